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
# _KEEP on a line's bytes, searched in place (pos/endpos): with MULTILINE, ``^`` matches at
# the line's start (the input's start or just after a "\n"), and nothing reaches past the
# line's end. Same matches as on the decoded line: ASCII-only classes, word boundaries and
# case folding, and UTF-8 bytes of other characters are never word or space bytes.
_KEEP_BYTES = re.compile(_KEEP.pattern.encode(), re.MULTILINE)


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
    has_note = False
    search = _KEEP_BYTES.search
    starts = lines.starts
    if _ELLIPSIS in data:
        for i in range(n):
            line = lines[i] if data.find(_ELLIPSIS, starts[i], starts[i + 1] - 1) >= 0 else ""
            if line and elision.is_note(line):
                has_note = True
                keep[i] = True
            elif (line and elision.is_marker(line)) or search(data, starts[i], starts[i + 1] - 1):
                keep[i] = True
    else:  # neither a note nor a marker can be there
        for i in range(n):
            if search(data, starts[i], starts[i + 1] - 1):
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
                [elision.line_fields(lines[i]) for i in range(start, end)], elided)
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
