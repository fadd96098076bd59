"""titles: drop a ``title`` that only restates a name the model already reads.

A title is dropped when, compared on ASCII letters and digits alone and ignoring case, it is:

* on a property, that property's key (``"User Id"`` on ``user_id``);
* on a ``$defs`` / ``definitions`` entry, that entry's key;
* on the schema root, the tool's name, alone or followed by the word a schema generator
  appends to a function's name (``search_eventsArguments``, ``getTimeInput``, ``xOutput``…);
* in an MCP tool's ``annotations``, the tool's name, alone or followed by "tool".

An MCP tool's top-level ``title`` is its display name: it always stays, even when it spells the
tool's name ("Write File" on ``write_file``). ``title`` is an annotation, so the calls a schema
accepts do not change. Any title that says more than the name ("Time zone of the caller")
stays.
"""

from __future__ import annotations

from .. import schema as js
from ._text import squash

NAME = "titles"
SUMMARY = "Drop titles that only repeat the property, $defs key or tool name"

# What generators put after a function's name when they name its argument or result model.
GENERATED_TAILS = frozenset({
    "args", "arguments", "input", "inputs", "params", "parameters", "request", "schema",
    "output", "result", "response", "wrapperarguments", "wrapperoutput",
})
KEYED = ("properties", "$defs", "definitions")


def _restates(title, key: str, tails=frozenset()) -> bool:
    """``title`` is the name ``key`` (optionally followed by one of ``tails``), nothing more."""
    if not isinstance(title, str) or not isinstance(key, str):
        return False
    name = squash(key)
    said = squash(title)
    if not name or not said.startswith(name):
        return False
    rest = said[len(name):]
    return rest == "" or rest in tails


def apply(root, ctx):
    if not isinstance(root, dict):
        return root
    if _restates(root.get("title"), ctx.tool_name, GENERATED_TAILS):
        del root["title"]
    for node in js.nodes(root):
        for where in KEYED:
            members = node.get(where)
            if isinstance(members, dict):
                for key, sub in members.items():
                    if isinstance(sub, dict) and _restates(sub.get("title"), key):
                        del sub["title"]
    return root


def apply_tool(tool, ctx) -> None:
    container = tool.container
    ann = container.get("annotations")
    if not isinstance(ann, dict) or "title" not in ann:
        return
    if _restates(ann["title"], container.get("name"), frozenset({"tool"})):
        del ann["title"]
