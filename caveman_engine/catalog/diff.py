"""``diff``: what ``compress --type T`` would change in a catalog, tool by tool.

The compressor runs exactly as ``compress`` runs it (and its result is kept only when it has
fewer tokens than the input and different bytes, the engine's gate). Both catalogs are then
written as normalised JSON (sorted keys, two-space indent) and each changed tool gets a unified
diff headed ``--- a/<tool>`` / ``+++ b/<tool>``; what lies outside the tools (a ``tools``
wrapper's other members) is diffed as ``(catalog)``. Input that is no catalog is diffed as one
document. Formatting alone (a pretty-printed catalog coming back minified) is not a change.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

from . import envelope


class UnknownType(ValueError):
    pass


@dataclass
class DiffResult:
    changed: bool
    hunks: list[str] = field(default_factory=list)
    tools_changed: int = 0
    tools_total: int = 0
    note: str = ""


def run_compressor(content_type: str, data: bytes) -> bytes | None:
    """The compressor's output for ``data`` as ``compress`` would emit it, or None when
    ``compress`` would pass the input through."""
    from .. import registry
    from ..engine import call_compressor
    from .measure import counter

    found = registry.compressor(content_type)
    if found is None:
        raise UnknownType(f"unknown or unavailable content type: {content_type}")
    module, _ = found
    produced = call_compressor(module, data)
    if produced is None or produced.data == data:
        return None
    out = produced.data
    c = counter()
    if c.count(bytes(out)) >= c.count(data):
        return None
    return bytes(out)


def _norm(value: Any) -> list[str]:
    return envelope.dumps(value, indent=True, sort_keys=True).decode().splitlines(keepends=True)


def _udiff(a: Any, b: Any, name: str) -> str:
    lines = list(difflib.unified_diff(_norm(a), _norm(b), f"a/{name}", f"b/{name}"))
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    fixed = []
    for ln in lines:
        fixed.append(ln if ln.endswith("\n") else ln + "\n")
    return "".join(fixed)


def _outside(doc: Any) -> Any:
    """The document with its tools list emptied (what remains is the envelope)."""
    lst = envelope.tool_list(doc)
    if lst is None or isinstance(doc, list):
        return None
    copy = envelope.copy_tree(doc)
    inner = envelope.tool_list(copy)
    if inner is not None:
        inner.clear()
    return copy


def diff_docs(before: Any, after: Any) -> DiffResult:
    tb, ta = envelope.iter_tools(before), envelope.iter_tools(after)
    if not tb or not ta:
        text = _udiff(before, after, "document") if before != after else ""
        return DiffResult(bool(text), [text] if text else [])
    res = DiffResult(False, tools_total=len(tb))
    index: dict[str, list[envelope.Tool]] = {}
    for t in ta:
        index.setdefault(t.name, []).append(t)
    seen: dict[str, int] = {}
    for t in tb:
        k = seen.get(t.name, 0)
        seen[t.name] = k + 1
        lst = index.get(t.name, [])
        other = lst[k].element if k < len(lst) else None
        if other is None or envelope.dumps(t.element, sort_keys=True) != envelope.dumps(other, sort_keys=True):
            res.hunks.append(_udiff(t.element, other, t.name))
            res.tools_changed += 1
    for name, lst in index.items():
        for extra in lst[seen.get(name, 0):]:
            res.hunks.append(_udiff(None, extra.element, name))
            res.tools_changed += 1
    ob, oa = _outside(before), _outside(after)
    if ob != oa:
        res.hunks.append(_udiff(ob, oa, "(catalog)"))
    res.changed = bool(res.hunks)
    return res


def diff_bytes(content_type: str, data: bytes) -> DiffResult:
    out = run_compressor(content_type, data)
    if out is None:
        return DiffResult(False, note="compress would pass the input through unchanged")
    try:
        before = envelope.load(data)
        after = envelope.load(out)
    except envelope.CatalogError:
        a = data.decode("utf-8", "replace").splitlines(keepends=True)
        b = out.decode("utf-8", "replace").splitlines(keepends=True)
        text = "".join(ln if ln.endswith("\n") else ln + "\n"
                       for ln in difflib.unified_diff(a, b, "a/document", "b/document"))
        return DiffResult(True, [text])
    res = diff_docs(before, after)
    if not res.changed:
        res.note = "only formatting would change (same JSON values)"
    return res
