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


@elision.declines_on_error
def compress(data: bytes) -> bytes | None:
    li = elision.read_lines(data, MIN_LINES)
    if li is None:
        return None
    lines, trailing, eol = li.lines, li.trailing_nl, li.eol
    n = len(lines)
    keep = [False] * n
    keep[0] = keep[1] = True
    real = [i for i in range(n) if not gotext.is_blank(lines[i])]
    for i in real[-2:]:
        keep[i] = True
    has_note = False
    for i, line in enumerate(lines):
        if elision.is_note(line):
            has_note = True
            keep[i] = True
        elif elision.is_marker(line) or _KEEP.search(line):
            keep[i] = True
    keep = elision.keep_non_redundant(lines, keep)
    return elide_lines(lines, keep, trailing, eol, marker, unit="lines", has_note=has_note)


def elide_lines(
    lines: list[str],
    keep: list[bool],
    trailing: bool,
    eol: str,
    make_marker,
    *,
    unit: str,
    has_note: bool,
) -> bytes | None:
    """Render kept lines and worth-eliding runs as summarised markers (+ contract note)."""
    out: list[str] = []
    elided_total = 0
    collapsed = False
    pos = 0
    for start, end in elision.runs(keep):
        out.extend(lines[pos:start])
        pos = end
        run = lines[start:end]
        elided = sum(elision.utf8_len(x) + 1 for x in run)
        summary = None
        if end - start >= 2:
            summary = elision.summarize([elision.line_fields(x) for x in run], elided)
        m = make_marker(end - start, summary)
        if elision.worth_eliding(end - start, summary, elision.utf8_len(m) + 1, elided):
            out.append(m + eol)
            elided_total += elided
            collapsed = True
        else:
            out.extend(run)
    out.extend(lines[pos:])
    if not collapsed:
        return None
    if elided_total >= elision.NOTE_MIN_ELIDED and not has_note:
        out.append(elision.contract_note(unit) + eol)
    return elision.join_lines(out, trailing).encode("utf-8")
