"""Catalog envelopes: where the tools are, and writing the catalog back unchanged in shape.

Shapes recognised (the first that matches):

* a JSON array: every object element is a tool;
* ``{"tools": [...]}`` (MCP ``tools/list`` result, provider request bodies);
* a JSON-RPC response ``{"result": {"tools": [...]}}``;
* a single tool object.

A tool is OpenAI Chat Completions (``{"type": "function", "function": {"name", "parameters",
"strict"}}``), OpenAI Responses (``{"type": "function", "name", "parameters"}``), Anthropic
(``{"name", "input_schema"}``) or MCP (``{"name", "inputSchema", "outputSchema"?}``). Every
rewrite works on a deep copy of the decoded tree and changes values in place, so the envelope
and the order of every key come back as they went in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import jsonio

SCHEMA_DOORS = ("parameters", "input_schema", "inputSchema")
OUTPUT_DOOR = "outputSchema"
# Deeper documents are declined by the rewriting types (no recursion limit is ever reached).
MAX_DEPTH = 400


class CatalogError(ValueError):
    """The input is not a tool catalog (one line, for the CLI)."""


@dataclass
class Tool:
    """One tool of a catalog. ``element`` is the catalog entry (what a provider receives),
    ``container`` the object holding ``name`` and the schema (``element["function"]`` for OpenAI
    Chat Completions, else ``element`` itself)."""

    index: int
    element: dict
    container: dict

    @property
    def name(self) -> str:
        n = self.container.get("name")
        return n if isinstance(n, str) else f"#{self.index}"

    @property
    def schema_key(self) -> str | None:
        for k in SCHEMA_DOORS:
            if k in self.container:
                return k
        return None

    @property
    def strict(self) -> bool:
        """OpenAI structured outputs: ``strict: true`` on the function (or the flat tool)."""
        return self.container.get("strict") is True or self.element.get("strict") is True

    def schemas(self) -> list[tuple[str, Any]]:
        """``[(key, schema)]``: the input schema, then the MCP output schema if present."""
        out = []
        k = self.schema_key
        if k is not None:
            out.append((k, self.container[k]))
        if OUTPUT_DOOR in self.container:
            out.append((OUTPUT_DOOR, self.container[OUTPUT_DOOR]))
        return out


def _is_tool(v: Any) -> bool:
    if not isinstance(v, dict):
        return False
    if isinstance(v.get("function"), dict):
        return True
    return "name" in v or any(k in v for k in SCHEMA_DOORS)


def _tool(index: int, v: dict) -> Tool:
    fn = v.get("function")
    container = fn if isinstance(fn, dict) else v
    return Tool(index, v, container)


def tool_list(doc: Any) -> list | None:
    """The list holding the tools, or None when the document is not a list-shaped catalog."""
    if isinstance(doc, list):
        return doc
    if isinstance(doc, dict):
        t = doc.get("tools")
        if isinstance(t, list):
            return t
        r = doc.get("result")
        if isinstance(r, dict) and isinstance(r.get("tools"), list):
            return r["tools"]
    return None


def iter_tools(doc: Any) -> list[Tool]:
    """Every tool of ``doc`` in catalog order (empty when it has none)."""
    lst = tool_list(doc)
    if lst is not None:
        return [_tool(i, v) for i, v in enumerate(lst) if _is_tool(v)]
    if _is_tool(doc):
        return [_tool(0, doc)]
    return []


def is_catalog(doc: Any) -> bool:
    return bool(iter_tools(doc))


def is_bare_schema(doc: Any) -> bool:
    """A top-level object that is no catalog: treated as one JSON Schema."""
    return isinstance(doc, dict) and tool_list(doc) is None and not _is_tool(doc)


def kind(doc: Any) -> str:
    """``openai`` / ``anthropic`` / ``mcp`` / ``mixed`` / ``none`` (for messages only)."""
    kinds = set()
    for t in iter_tools(doc):
        k = t.schema_key
        if k == "parameters":
            kinds.add("openai")
        elif k == "input_schema":
            kinds.add("anthropic")
        elif k == "inputSchema":
            kinds.add("mcp")
    if not kinds:
        return "none"
    return kinds.pop() if len(kinds) == 1 else "mixed"


# --------------------------------------------------------------------------- tree helpers


def depth(value: Any) -> int:
    """Nesting depth of containers (iterative)."""
    best = 0
    stack = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            best = max(best, d)
            stack.extend((x, d + 1) for x in v.values() if isinstance(x, (dict, list)))
        elif isinstance(v, list):
            best = max(best, d)
            stack.extend((x, d + 1) for x in v if isinstance(x, (dict, list)))
    return best


def copy_tree(value: Any) -> Any:
    """Deep copy of dicts and lists (iterative); scalars and :class:`jsonio.Number` shared."""
    if not isinstance(value, (dict, list)):
        return value
    root = {} if isinstance(value, dict) else []
    stack = [(value, root)]
    while stack:
        src, dst = stack.pop()
        if isinstance(src, dict):
            for k, v in src.items():
                if isinstance(v, (dict, list)):
                    c = {} if isinstance(v, dict) else []
                    stack.append((v, c))
                    dst[k] = c
                else:
                    dst[k] = v
        else:
            for v in src:
                if isinstance(v, (dict, list)):
                    c = {} if isinstance(v, dict) else []
                    stack.append((v, c))
                    dst.append(c)
                else:
                    dst.append(v)
    return root


def load(data: bytes) -> Any:
    """Decode one JSON value, numbers kept as literals. Raises :class:`CatalogError`."""
    try:
        return jsonio.loads(data)
    except (jsonio.JSONError, RecursionError, ValueError) as exc:
        raise CatalogError(f"invalid JSON: {exc}") from None


def load_catalog(data: bytes) -> Any | None:
    """The decoded catalog or bare schema in ``data``, or None when it is not one (invalid
    JSON, another shape, nested deeper than MAX_DEPTH): what the catalog compressors decline."""
    try:
        doc = load(data)
    except CatalogError:
        return None
    if not (is_catalog(doc) or is_bare_schema(doc)) or depth(doc) > MAX_DEPTH:
        return None
    return doc


def dumps(value: Any, *, indent: bool = False, sort_keys: bool = False) -> bytes:
    """JSON in the given key order, no HTML escaping (``<`` stays ``<``), numbers verbatim."""
    return jsonio.dumps(value, sort_keys=sort_keys, indent=indent, html_escape=False)


def to_plain(value: Any) -> Any:
    """The tree with :class:`jsonio.Number` turned into int/float (for ``jsonschema``)."""
    import json

    return json.loads(dumps(value))
