"""``check``: a CI gate on a catalog's token cost against a committed baseline.

The baseline is a small JSON file::

    {"version": 1, "tokenizer": "o200k_base", "total": 708,
     "tools": {"create_contact": 354, "log_activity": 178, "search_contacts": 176}}

Budgets: ``--max-increase`` (``5%`` of the baseline total, or ``N`` tokens; default 0: any
growth fails), ``--max-total N`` and ``--max-tool N`` (absolute caps). Exit 0 within budget,
1 over it, 2 for bad input (unreadable catalog or baseline, another tokenizer).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .measure import Measurement, percent

BASELINE_VERSION = 1
_INCREASE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(%?)\s*$")


class BaselineError(ValueError):
    pass


@dataclass
class Budget:
    increase: float = 0.0
    increase_is_percent: bool = False
    max_total: int | None = None
    max_tool: int | None = None


def parse_increase(text: str) -> tuple[float, bool]:
    m = _INCREASE.match(text)
    if not m:
        raise ValueError(f"--max-increase must be a percentage like 5% or a token count, not {text!r}")
    return float(m.group(1)), m.group(2) == "%"


def baseline_json(m: Measurement) -> bytes:
    doc = {"version": BASELINE_VERSION, "tokenizer": m.tokenizer, "total": m.total,
           "tools": m.by_name()}
    return (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode()


def load_baseline(path: Path, data: bytes | None = None) -> dict[str, Any]:
    """The baseline in the file ``path``, or in ``data`` already read (``path`` then only
    names it: ``stdin``)."""
    try:
        doc = json.loads(path.read_bytes() if data is None else data)
    except OSError as exc:
        raise BaselineError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise BaselineError(f"baseline {path} is not JSON: {exc}") from None
    if (
        not isinstance(doc, dict)
        or not isinstance(doc.get("tools"), dict)
        or not isinstance(doc.get("tokenizer"), str)
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in doc["tools"].values())
    ):
        raise BaselineError(f"baseline {path} is not a caveman-engine baseline "
                            "(expected tokenizer and per-tool token counts)")
    return doc


@dataclass
class Verdict:
    ok: bool
    total: int
    baseline_total: int
    failures: list[str] = field(default_factory=list)
    grown: list[tuple[str, int, int]] = field(default_factory=list)  # name, before, after
    added: list[tuple[str, int]] = field(default_factory=list)
    removed: list[tuple[str, int]] = field(default_factory=list)
    shrunk: list[tuple[str, int, int]] = field(default_factory=list)


def evaluate(m: Measurement, baseline: dict[str, Any], budget: Budget) -> Verdict:
    if baseline["tokenizer"] != m.tokenizer:
        raise BaselineError(f"baseline was counted with {baseline['tokenizer']}, "
                            f"this run counts with {m.tokenizer}; update the baseline")
    now = m.by_name()
    before: dict[str, int] = baseline["tools"]
    base_total = sum(before.values())
    v = Verdict(True, m.total, base_total)
    for name, n in now.items():
        if name not in before:
            v.added.append((name, n))
        elif n > before[name]:
            v.grown.append((name, before[name], n))
        elif n < before[name]:
            v.shrunk.append((name, before[name], n))
    v.removed = [(name, n) for name, n in before.items() if name not in now]
    v.grown.sort(key=lambda x: -(x[2] - x[1]))
    v.added.sort(key=lambda x: -x[1])
    growth = m.total - base_total
    allowed = budget.increase * base_total / 100.0 if budget.increase_is_percent else budget.increase
    if growth > allowed:
        limit = f"{budget.increase:g}%" if budget.increase_is_percent else f"{budget.increase:g} tokens"
        v.failures.append(f"total grew by {growth} tokens ({_signed_pct(growth, base_total)}), "
                          f"over the allowed {limit}")
    if budget.max_total is not None and m.total > budget.max_total:
        v.failures.append(f"total {m.total} tokens exceeds --max-total {budget.max_total}")
    if budget.max_tool is not None:
        for name, n in m.tools:
            if n > budget.max_tool:
                v.failures.append(f"tool {name} has {n} tokens, over --max-tool {budget.max_tool}")
    v.ok = not v.failures
    return v


def _signed_pct(delta: int, base: int) -> str:
    return f"{'+' if delta >= 0 else ''}{percent(delta, base):.1f}%"


def render(v: Verdict, tokenizer: str) -> str:
    delta = v.total - v.baseline_total
    head = "check OK" if v.ok else "check FAILED"
    lines = [
        f"{head}: {v.total} tokens (baseline {v.baseline_total}, "
        f"{'+' if delta >= 0 else ''}{delta}, {_signed_pct(delta, v.baseline_total)}) - {tokenizer}"
    ]
    lines += [f"  over budget: {f}" for f in v.failures]
    for name, b, a in v.grown:
        lines.append(f"  grew    {name}: {b} -> {a} (+{a - b})")
    for name, n in v.added:
        lines.append(f"  new     {name}: {n}")
    for name, n in v.removed:
        lines.append(f"  removed {name}: was {n}")
    for name, b, a in v.shrunk:
        lines.append(f"  shrank  {name}: {b} -> {a} ({a - b})")
    return "\n".join(lines) + "\n"
