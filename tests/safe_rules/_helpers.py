"""Run one safe rule on a schema inside a one-tool MCP catalog (shared by the rule tests)."""

from __future__ import annotations

import json

from caveman_engine.catalog import envelope, safe


def load(text: str):
    return envelope.load(text.encode())


def run(rule: str, schema: str, *, name: str = "t", strict: bool = False, extra: str = "") -> str:
    """The rule's output schema as compact JSON text (key order kept)."""
    tool = '{"name":' + json.dumps(name) + extra + (',"strict":true' if strict else "") + \
        ',"inputSchema":' + schema + "}"
    doc = load("[" + tool + "]")
    out = safe.apply_tree(doc, [rule])
    return envelope.dumps(out[0]["inputSchema"]).decode()


def run_tool(rule: str, tool: str) -> str:
    doc = load("[" + tool + "]")
    return envelope.dumps(safe.apply_tree(doc, [rule])[0]).decode()


def same_calls(a: str, b: str, examples: int = 5) -> bool:
    """``verify`` finds no difference between the two schemas (a quick sample: tests that
    expect a difference use :func:`differs`, with verify's default sample size)."""
    from caveman_engine.catalog import verify

    status, ce, by, _ = verify.compare_schemas(json.loads(a), json.loads(b), examples=examples)
    return status != verify.DIFFERENT


def differs(a: str, b: str) -> bool:
    """``verify``, at its default settings, finds a difference between the two schemas."""
    from caveman_engine.catalog import verify

    return verify.compare_schemas(json.loads(a), json.loads(b))[0] == verify.DIFFERENT
