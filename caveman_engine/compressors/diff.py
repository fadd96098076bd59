"""``diff`` (spec §6.4): keep structural and changed lines plus two lines of context on each
side; every other run becomes ``… N context lines elided (caveman) …``."""

from __future__ import annotations

from .. import elision

CONTENT_TYPE = "diff"
SAFETY_CLASS = "S4"

MIN_LINES = 12
CONTEXT = 2
_STRUCTURAL = ("diff --git ", "index ", "@@ ", "+", "-")


@elision.declines_on_error
def compress(data: bytes) -> bytes | None:
    li = elision.read_lines(data, MIN_LINES)
    if li is None:
        return None
    lines, trailing, eol = li.lines, li.trailing_nl, li.eol
    n = len(lines)
    keep = [False] * n
    for i, line in enumerate(lines):
        if line.startswith(_STRUCTURAL) or elision.is_marker(line):
            for j in range(max(0, i - CONTEXT), min(n, i + CONTEXT + 1)):
                keep[j] = True
    out = elision.render_runs(
        lines, keep, lambda n: f"\u2026 {n} context lines elided (caveman) \u2026{eol}"
    )
    if out is None:
        return None
    return elision.join_lines(out, trailing).encode("utf-8")
