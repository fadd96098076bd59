"""``terminal`` (spec §6.15): strip ANSI escapes, keep only the last redraw of progress lines
(bare ``\\r``), then elide near-duplicate runs keeping the first/last 3 lines and flagged ones."""

from __future__ import annotations

import re

from .. import elision, gotext

CONTENT_TYPE = "terminal"
SAFETY_CLASS = "S4"

HEAD = 3
TAIL = 3
MIN_LINES = 4

_ANSI = re.compile(
    r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]"
)
# The spec's ``[A-Za-z]+Error\b`` / ``[A-Za-z]+Exception\b`` are spelled with a single letter:
# for a search (is there a match anywhere?) they are equivalent, and the ``+`` form backtracks
# quadratically in Python's re on a long run of letters (RE2 is linear).
_KEEP = re.compile(
    r"(?i)(\b(ERROR|ERR|FATAL|PANIC|EXCEPTION|TRACEBACK|FAIL|FAILED|FAILURE|WARN|WARNING)\b"
    r"|[A-Za-z]Error\b|[A-Za-z]Exception\b|^[\t\n\f\r ]+at[\t\n\f\r ]|^[\t\n\f\r ]+File \""
    r"|\.go:[0-9]+|:[0-9]+:[0-9]+:|^[\t\n\f\r ]*--->|caused by|\bexit status [1-9])",
    re.ASCII,
)


def clean_line(line: str) -> str:
    """Drop progress redraws (keep the last non-empty ``\\r`` segment) and ANSI escapes; the
    line's own trailing ``\\r`` is kept."""
    own = ""
    if line.endswith("\r"):
        line, own = line[:-1], "\r"
    if "\r" in line:
        segs = [s for s in line.split("\r") if s != ""]
        line = segs[-1] if segs else ""
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    return line + own


def marker(n: int) -> str:
    return f"\u2026 {n} lines elided (caveman) \u2026"


@elision.declines_on_error
def compress(data: bytes) -> bytes | None:
    if not data:
        return None
    text = gotext.decode_strict(data)
    if text is None:
        return None
    raw, trailing = elision.split_lines(text)
    lines = [clean_line(x) for x in raw]
    n = len(lines)
    if n >= MIN_LINES:
        eol = elision.marker_eol(text)
        keep = [i < HEAD or i >= n - TAIL for i in range(n)]
        for i, line in enumerate(lines):
            if not keep[i] and (elision.is_marker(line) or _KEEP.search(line)):
                keep[i] = True
        keep = elision.keep_non_redundant(lines, keep)
        out = elision.render_runs(lines, keep, lambda k: marker(k) + eol)
        if out is not None:
            lines = out
    result = elision.join_lines(lines, trailing).encode("utf-8")
    if result == data:
        return None
    return result
