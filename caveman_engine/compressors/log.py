"""``log`` (spec §6.2): elide runs of routine log lines, keeping errors, warnings, stack frames,
the first two and last two lines; near-duplicate runs become ``… N lines elided (caveman) …``
markers, with an invariant summary when the lines carry fields (NDJSON, logfmt) — the shared
``elision.summarize`` over ``elision.line_fields`` (logfmt fields in order of first appearance,
NDJSON keys sorted; see ``caveman_engine.elision``)."""

from __future__ import annotations

import re

from .. import elision, gotext

CONTENT_TYPE = "log"
SAFETY_CLASS = "S4"

MIN_LINES = 4

_KEEP = re.compile(
    r"(?i)(\b(ERROR|FATAL|PANIC|EXCEPTION|TRACEBACK|FAIL|FAILED|FAILURE|WARN|WARNING)\b"
    r"|^[\t\n\f\r ]+at[\t\n\f\r ]|^[\t\n\f\r ]+File \"|\.go:[0-9]+|^[\t\n\f\r ]+--->|caused by)",
    re.ASCII,
)


def marker(n: int, summary: str | None) -> str:
    if summary:
        return f"\u2026 {n} lines elided (caveman): {summary} \u2026"
    return f"\u2026 {n} lines elided (caveman) \u2026"


_ELLIPSIS = elision.ELLIPSIS.encode()
# _KEEP for the whole input at once, lower-cased (bytes.lower maps ASCII letters only, which
# is all _KEEP's ASCII case folding does): its space classes without "\n", so that no match
# crosses a line break, and "^" at each line's start (MULTILINE). A line has a match of
# _KEEP_LOWER within the input exactly when _KEEP matches it alone: word boundaries at the
# line's edges are the same ("\n" is no word byte), and UTF-8 bytes of other characters are
# never word or space bytes.
_KEEP_LOWER = re.compile(
    rb"\b(error|fatal|panic|exception|traceback|fail|failed|failure|warn|warning)\b"
    rb'|^[\t\f\r ]+at[\t\f\r ]|^[\t\f\r ]+file "|\.go:[0-9]+|^[\t\f\r ]+--->|caused by',
    re.MULTILINE,
)


def _lines_with(find, starts, lines_n: int):
    """Indices of the lines where ``find(pos)`` (the first hit at or after ``pos``, or None)
    hits, each once, in order: one search per such line, jumping to the next line."""
    from bisect import bisect_right

    pos = find(0)
    while pos is not None:
        i = bisect_right(starts, pos) - 1
        if i >= lines_n:
            return
        yield i
        pos = find(starts[i + 1])


@elision.declines_on_error
def compress(data: bytes) -> bytes | None:
    """Lines are offsets into ``data`` (a line's text is decoded only when a check needs it)
    and the output is built from views of ``data``: a 60 MB log costs the input and the
    output, not several copies of its text."""
    lines = elision.read_line_spans(data, MIN_LINES)
    if lines is None:
        return None
    n = len(lines)
    keep = [False] * n
    keep[0] = keep[1] = True
    # the last two lines that are not blank
    found = 0
    for i in range(n - 1, -1, -1):
        if found == 2:
            break
        if not gotext.is_blank(lines[i]):
            keep[i] = True
            found += 1
    starts = lines.starts
    low = data.lower()
    search = _KEEP_LOWER.search

    def keep_match(pos: int) -> int | None:
        m = search(low, pos)
        return None if m is None else m.start()

    for i in _lines_with(keep_match, starts, n):
        keep[i] = True
    del low
    has_note = False

    def ellipsis(pos: int) -> int | None:
        p = data.find(_ELLIPSIS, pos)
        return None if p < 0 else p

    for i in _lines_with(ellipsis, starts, n):  # notes and markers
        line = lines[i]
        if elision.is_note(line):
            has_note = True
            keep[i] = True
        elif elision.is_marker(line):
            keep[i] = True
    keep = elision.keep_non_redundant(lines, keep)
    return elide_lines(lines, keep, marker, unit="lines", has_note=has_note)


def elide_lines(
    lines: elision.LineSpans,
    keep: list[bool],
    make_marker,
    *,
    unit: str,
    has_note: bool,
) -> bytes | None:
    """Render kept lines and worth-eliding runs as summarised markers (+ contract note): the
    input's own bytes for each kept stretch of lines, joined with the markers."""
    eol = lines.eol
    starts = lines.starts
    parts: list = []  # views of kept stretches and encoded markers, joined by "\n"
    elided_total = 0
    collapsed = False
    region = 0  # first line of the kept stretch not yet in ``parts``
    for start, end in elision.runs(keep):
        elided = starts[end] - starts[start]  # each line's bytes and its "\n"
        summary = None
        if end - start >= 2:
            summary = elision.summarize(
                (elision.line_fields(lines[i]) for i in range(start, end)), elided)
        m = make_marker(end - start, summary)
        if elision.worth_eliding(end - start, summary, elision.utf8_len(m) + 1, elided):
            if region < start:
                parts.append(lines.region(region, start))
            parts.append((m + eol).encode("utf-8"))
            region = end
            elided_total += elided
            collapsed = True
    if not collapsed:
        return None
    if region < len(lines):
        parts.append(lines.region(region, len(lines)))
    if elided_total >= elision.NOTE_MIN_ELIDED and not has_note:
        parts.append((elision.contract_note(unit) + eol).encode("utf-8"))
    if lines.trailing_nl:
        parts.append(b"")
    return b"\n".join(parts)
