"""``log`` (spec §6.2): elide runs of routine log lines, keeping errors, warnings, stack frames,
the first two and last two lines; near-duplicate runs become ``… N lines elided (caveman) …``
markers, with an invariant summary when the lines carry fields (NDJSON, logfmt).

The summary of a log run follows the reference where it differs from the shared
``elision.summarize`` (json, tabular), as the general2 log vectors pin it:
* logfmt fields are listed in order of first appearance in the run (``time level msg …``), not
  sorted; a quoted value (``msg="codec result"``) is one value. NDJSON lines keep sorted keys.
* enumeration buckets with equal counts keep the order in which their values first appear
  (a stable sort on the count alone), not an alphabetical tie-break;
* an enumeration is weak (shed first) when its buckets, absent included, are at least half the
  run's units (``2·buckets ≥ n``)."""

from __future__ import annotations

import re

from .. import elision, gotext, jsonio

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
            summary = summarize([line_fields(x) for x in run], elided)
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


# --------------------------------------------------------------------------- invariant summary


def line_fields(line: str) -> list[elision.Field] | None:
    """Fields of a log line: an NDJSON object's top-level scalars (sorted keys), else its
    logfmt ``k=v`` pairs in order of first appearance (a repeated key keeps its first place
    and its last value; ``"…"`` values are one value, without the quotes)."""
    t = gotext.trim(line)
    if t.startswith("{") and t.endswith("}"):
        try:
            v = jsonio.loads(t)
        except (jsonio.JSONError, ValueError, RecursionError):
            v = None
        if isinstance(v, dict):
            return elision.json_fields(v)
    pairs = elision._LOGFMT.findall(t)
    if not pairs:
        return None
    d: dict[str, str] = {}
    for k, v in pairs:
        if len(v) >= 2 and v[0] == '"' and v[-1] == '"':
            v = v[1:-1]
        d[k] = v
    return [(k, v, elision.parse_number(v) is not None) for k, v in d.items()]


def _enum_entry(key: str, order: int, vals: list[str | None], e: elision._Entry) -> elision._Entry:
    """Re-render an enumeration entry with first-appearance tie order and the weak rule."""
    n = len(vals)
    distinct: dict[str, int] = {}
    absent = 0
    for v in vals:
        if v is None:
            absent += 1
        else:
            distinct[v] = distinct.get(v, 0) + 1
    items = sorted(distinct.items(), key=lambda kv: -kv[1])  # stable: first appearance on ties
    parts = [f"{v}\u00d7{c}" for v, c in items]
    if absent:
        parts.append(f"absent\u00d7{absent}")
    buckets = len(distinct) + (1 if absent else 0)
    kind = elision._WEAK_ENUM if 2 * buckets >= n else elision._ENUM
    return elision._Entry(kind, order, key, f"{key}: " + " ".join(parts))


def summarize(records: list[list[elision.Field] | None], elided_bytes: int) -> str | None:
    """Invariant summary of a run of >= 2 dropped log lines, or None (see the module notes)."""
    n = len(records)
    if n < 2:
        return None
    order: dict[str, int] = {}
    per_unit: list[dict[str, tuple[str, bool]]] = []
    for rec in records:
        if rec is None:
            return None
        d: dict[str, tuple[str, bool]] = {}
        for k, v, isnum in rec:
            if k not in order:
                order[k] = len(order)
            d[k] = (v, isnum)
        per_unit.append(d)
    entries: list[elision._Entry] = []
    coverage = 0
    for key, idx in order.items():
        if elision._SENSITIVE.search(key):
            continue
        vals: list[str | None] = []
        nums: list[bool] = []
        for d in per_unit:
            got = d.get(key)
            if got is None:
                vals.append(None)
            else:
                vals.append(got[0])
                nums.append(got[1])
        e = elision._field_entry(key, idx, vals, nums)
        if e is None:
            continue
        if e.kind in (elision._ENUM, elision._WEAK_ENUM):
            e = _enum_entry(key, idx, vals, e)
        elif e.kind in (elision._COVERAGE, elision._DENSE):
            if coverage >= elision.MAX_COVERAGE:
                continue
            coverage += 1
        entries.append(e)
    if not entries:
        return None
    budget = elision.summary_budget(elided_bytes)
    text = elision._render(entries)
    if elision.utf8_len(text) <= budget:
        return text
    for kind in (elision._WEAK_ENUM, elision._RANGE, elision._COVERAGE, elision._CONSTANT,
                 elision._DENSE, elision._ENUM):
        while True:
            cands = [e for e in entries if e.kind == kind]
            if not cands:
                break
            victim = max(cands, key=lambda e: e.order)
            entries.remove(victim)
            if not entries:
                return None
            text = elision._render(entries)
            if elision.utf8_len(text) <= budget:
                return text
    return None
