"""Run the safe rules over a catalog (or a bare schema).

Each rule rewrites a private deep copy in place; the pass is repeated until nothing changes
(inlining a definition can expose an ``anyOf`` the next pass merges), at most
:data:`MAX_PASSES` times. Input schemas and MCP output schemas are rewritten alike; tool-level
members only by the rules that define ``apply_tool`` (redundant tool titles, description
whitespace).
"""

from __future__ import annotations

from typing import Any, Iterable

from . import envelope, rules
from .schema import analyze

MAX_PASSES = 4


def _run_schema(schema: Any, tool_name: str | None, strict: bool, output: bool,
                modules: list) -> Any:
    if not isinstance(schema, dict):
        return schema
    for _ in range(MAX_PASSES):
        before = envelope.dumps(schema)
        for m in modules:
            ctx = rules.Context(tool_name, strict, output, analyze(schema))
            schema = m.apply(schema, ctx)
        if envelope.dumps(schema) == before:
            break
    return schema


def apply_tree(doc: Any, names: Iterable[str] | None = None) -> Any:
    """The catalog ``doc`` (not modified) with the selected rules applied; returns a new tree.
    ``names`` defaults to ``CAVEMAN_SAFE_RULES`` (all rules when unset)."""
    selected = tuple(rules.from_env() if names is None else names)
    modules = [rules.module(n) for n in selected]
    out = envelope.copy_tree(doc)
    if not modules:
        return out
    tools = envelope.iter_tools(out)
    if tools:
        for tool in tools:
            c = tool.container
            for key, schema in tool.schemas():
                new = _run_schema(schema, tool.name if isinstance(c.get("name"), str) else None,
                                  tool.strict, key == envelope.OUTPUT_DOOR, modules)
                if new is not schema:
                    c[key] = new
            for m in modules:
                fn = getattr(m, "apply_tool", None)
                if fn is not None:
                    fn(tool, rules.Context(tool.name, tool.strict, False, analyze({})))
        return out
    if envelope.is_bare_schema(out):
        return _run_schema(out, None, False, False, modules)
    return out


def compress_bytes(data: bytes, names: Iterable[str] | None = None) -> bytes | None:
    """The ``toolschema-safe`` transform on bytes; None declines (not JSON, not a catalog or
    schema, too deep)."""
    doc = envelope.load_catalog(data)
    if doc is None:
        return None
    return envelope.dumps(apply_tree(doc, names))
