"""``measure``: what each tool of a catalog costs in tokens.

A tool's cost is the token count of its catalog entry written as compact JSON (key order and
characters as in the input): what a provider receives for it. The total is the sum over tools;
tools are listed most expensive first (ties in catalog order).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import envelope


@dataclass
class Whole:
    """The whole catalog: as written, minified, and after a rewrite (``None``: no rewrite asked)."""

    as_written: int
    minified: int
    after: int | None = None

    def saved(self) -> float | None:
        """Share of the minified catalog's tokens the rewrite saves (what the rewrite itself
        is worth: minifying alone is free)."""
        if self.after is None or not self.minified:
            return None
        return (self.minified - self.after) / self.minified


@dataclass
class Measurement:
    tokenizer: str
    in_order: list[tuple[str, int]]  # (name, tokens) in catalog order
    whole: Whole | None = None

    @property
    def tools(self) -> list[tuple[str, int]]:
        """Most expensive first; ties keep catalog order."""
        ranked = sorted(enumerate(self.in_order), key=lambda p: (-p[1][1], p[0]))
        return [x for _, x in ranked]

    @property
    def total(self) -> int:
        return sum(n for _, n in self.in_order)

    def by_name(self) -> dict[str, int]:
        """Per-tool counts keyed by name; a repeated name gets ``#2``, ``#3``… suffixes."""
        out: dict[str, int] = {}
        for name, n in self.in_order:
            key, k = name, 2
            while key in out:
                key, k = f"{name}#{k}", k + 1
            out[key] = n
        return out


def counter():
    """The engine's o200k_base counter (``approx-chars/4`` if the vocabulary is unusable),
    with the rank cache where the engine keeps it."""
    from ..tokens import make_counter

    explicit = os.environ.get("CAVEMAN_CACHE_DIR")
    if explicit:
        return make_counter(Path(explicit))
    home = os.environ.get("CAVEMAN_HOME") or os.path.join(os.path.expanduser("~"), ".caveman")
    return make_counter(Path(home) if os.path.isdir(home) else None)


def measure_doc(doc: Any, count=None) -> Measurement:
    """Raises :class:`envelope.CatalogError` when ``doc`` has no tools."""
    tools = envelope.iter_tools(doc)
    if not tools:
        raise envelope.CatalogError("no tools found (expected an OpenAI, Anthropic or MCP catalog)")
    c = count or counter()
    return Measurement(c.name, [(t.name, c.count(envelope.dumps(t.element))) for t in tools])


def percent(part: int, total: int) -> float:
    return 100.0 * part / total if total else 0.0


def render_text(m: Measurement, after: dict[str, int] | None = None) -> str:
    width = max([4] + [len(n) for n, _ in m.tools])
    total = m.total
    if after is None:
        lines = [f"{'tool':<{width}}  {'tokens':>8}  {'% of total':>10}"]
        for name, n in m.tools:
            lines.append(f"{name:<{width}}  {n:>8}  {percent(n, total):>9.1f}%")
        lines.append(f"{'total':<{width}}  {total:>8}  {100.0 if total else 0.0:>9.1f}%")
    else:
        lines = [f"{'tool':<{width}}  {'tokens':>8}  {'% of total':>10}  {'after':>8}  {'saved':>7}"]
        for name, n in m.tools:
            a = after.get(name, n)
            lines.append(f"{name:<{width}}  {n:>8}  {percent(n, total):>9.1f}%  {a:>8}  "
                         f"{percent(n - a, n):>6.1f}%")
        at = sum(after.get(name, n) for name, n in m.tools)
        lines.append(f"{'total':<{width}}  {total:>8}  {100.0 if total else 0.0:>9.1f}%  {at:>8}  "
                     f"{percent(total - at, total):>6.1f}%")
    lines.append(f"{len(m.tools)} tools, {total} tokens ({m.tokenizer})")
    w = m.whole
    if w is not None:
        line = f"whole catalog: {w.as_written} tokens as written, {w.minified} minified"
        if w.after is not None:
            line += f", {w.after} after the rewrite: {100.0 * w.saved():.1f}% saved against minified"
        lines.append(line)
    return "\n".join(lines) + "\n"


def render_json(m: Measurement, after: dict[str, int] | None = None) -> bytes:
    total = m.total
    tools = []
    for name, n in m.tools:
        row: dict[str, Any] = {"name": name, "tokens": n, "percent": round(percent(n, total), 2)}
        if after is not None:
            row["after"] = after.get(name, n)
        tools.append(row)
    out: dict[str, Any] = {"tokenizer": m.tokenizer, "total": total, "tools": tools}
    if after is not None:
        out["total_after"] = sum(after.get(name, n) for name, n in m.tools)
    w = m.whole
    if w is not None:
        out["catalog"] = {"as_written": w.as_written, "minified": w.minified}
        if w.after is not None:
            out["catalog"]["after"] = w.after
            out["catalog"]["saved_vs_minified"] = round(w.saved(), 4)
    return envelope.dumps(out, indent=True) + b"\n"
