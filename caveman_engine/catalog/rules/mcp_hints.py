"""mcp_hints: drop MCP tool hints that say what their absence already says (``toolschema-max``).

The MCP specification gives every ``annotations`` hint a default and the tool's ``execution``
member one too; a hint set to that default tells a client (and the model) nothing:

* ``readOnlyHint: false``, ``destructiveHint: true``, ``idempotentHint: false``,
  ``openWorldHint: true`` (the specification's defaults);
* ``destructiveHint`` and ``idempotentHint`` next to ``readOnlyHint: true``: the specification
  says they are meaningful only when the tool is not read-only;
* ``execution.taskSupport: "forbidden"`` (the default);
* then an ``annotations`` or ``execution`` object left empty.

Only MCP tools (``inputSchema``) are touched; the schemas are not (validation is unchanged).
Not a ``toolschema-safe`` rule: it rewrites tool metadata, not schemas.
"""

from __future__ import annotations

NAME = "mcp_hints"
SUMMARY = "Drop MCP annotation hints and execution.taskSupport equal to the specification's defaults"

HINT_DEFAULTS = {
    "readOnlyHint": False,
    "destructiveHint": True,
    "idempotentHint": False,
    "openWorldHint": True,
}
WRITE_ONLY_HINTS = ("destructiveHint", "idempotentHint")


def apply(root, ctx):
    return root


def apply_tool(tool, ctx) -> None:
    c = tool.container
    if "inputSchema" not in c:
        return
    ann = c.get("annotations")
    if isinstance(ann, dict):
        read_only = ann.get("readOnlyHint") is True
        for key, default in HINT_DEFAULTS.items():
            v = ann.get(key)
            if isinstance(v, bool) and (v is default or (read_only and key in WRITE_ONLY_HINTS)):
                del ann[key]
        if not ann:
            del c["annotations"]
    ex = c.get("execution")
    if isinstance(ex, dict):
        if ex.get("taskSupport") == "forbidden":
            del ex["taskSupport"]
        if not ex:
            del c["execution"]
