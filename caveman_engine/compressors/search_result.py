"""``search-result`` (spec §6.5): keep the first 8 and last 4 hits, flagged hits and existing
markers; near-duplicate hits elide to ``… N search result lines elided (caveman) …``."""

from __future__ import annotations

import re

from .. import elision

CONTENT_TYPE = "search-result"
SAFETY_CLASS = "S4"

MIN_LINES = 18
HEAD = 8
TAIL = 4
_KEEP = re.compile(
    r"(?i)\b(ERROR|FAIL|FAILED|PANIC|ACTION|FOLLOWUP|SECURITY|SECRET|TOKEN|PASSWORD|KEY)\b",
    re.ASCII,
)


@elision.declines_on_error
def compress(data: bytes) -> bytes | None:
    li = elision.read_lines(data, MIN_LINES)
    if li is None:
        return None
    lines, trailing, eol = li.lines, li.trailing_nl, li.eol
    n = len(lines)
    keep = [i < HEAD or i >= n - TAIL for i in range(n)]
    for i, line in enumerate(lines):
        if not keep[i] and (elision.is_marker(line) or _KEEP.search(line)):
            keep[i] = True
    keep = elision.keep_non_redundant(lines, keep)
    out = elision.render_runs(
        lines, keep, lambda n: f"\u2026 {n} search result lines elided (caveman) \u2026{eol}"
    )
    if out is None:
        return None
    return elision.join_lines(out, trailing).encode("utf-8")
