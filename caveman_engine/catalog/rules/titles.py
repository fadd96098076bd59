"""titles: drop ``title`` keywords that only repeat a name the model already sees.

* the schema root's title equals the tool name, optionally with a generator suffix
  (``search_eventsArguments``, ``x_wrapperArguments``, ``xOutput``…);
* a property's title equals the property name (``"User Id"`` for ``user_id``);
* a definition's title equals its ``$defs`` key;
* the MCP tool's own ``title`` (and ``annotations.title``) equals the tool name.

Comparison ignores case and everything but ASCII letters and digits. ``title`` is an
annotation: validation is unchanged. Informative titles stay.
"""

from __future__ import annotations

from .. import schema as js
from ._text import norm

NAME = "titles"
SUMMARY = "Drop titles that only repeat the property, $defs key or tool name"

ROOT_SUFFIXES = (
    "", "arguments", "args", "input", "inputs", "params", "parameters", "request", "schema",
    "output", "result", "response", "wrapperarguments", "wrapperoutput",
)


def _same(title, name) -> bool:
    if not isinstance(title, str) or not isinstance(name, str):
        return False
    t = norm(title)
    return bool(t) and t == norm(name)


def apply(root, ctx):
    if not isinstance(root, dict):
        return root
    name = ctx.tool_name
    t = root.get("title")
    if isinstance(t, str) and isinstance(name, str) and norm(name):
        nt, nn = norm(t), norm(name)
        if any(nt == nn + s for s in ROOT_SUFFIXES):
            del root["title"]
    for node in js.nodes(root):
        for container in ("properties", "$defs", "definitions"):
            m = node.get(container)
            if not isinstance(m, dict):
                continue
            for key, sub in m.items():
                if isinstance(sub, dict) and _same(sub.get("title"), key):
                    del sub["title"]
    return root


def apply_tool(tool, ctx) -> None:
    c = tool.container
    name = c.get("name")
    if not isinstance(name, str) or not norm(name):
        return
    nn = norm(name)
    for holder in (c, c.get("annotations")):
        if isinstance(holder, dict):
            t = holder.get("title")
            if isinstance(t, str) and norm(t) in (nn, nn + "tool"):
                del holder["title"]
