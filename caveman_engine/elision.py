"""Shared elision machinery (spec §6 "Shared machinery"): ONE copy, used by every compressor
that drops units (json elements, log/terminal/search lines, text sections, table rows, config
lines). Pure and deterministic; every length is in UTF-8 bytes.

Lines (line-oriented compressors)
---------------------------------
``split_lines(text) -> (lines, trailing_nl)``  split on ``\n`` after removing ONE trailing
    ``\n``; each line keeps its own ``\r``. ``join_lines(lines, trailing_nl)`` inverts it.
``marker_eol(text)``  ``"\r"`` when more than half of the input's line breaks are CRLF, else
    ``""``: append it to every synthesised marker line.
``is_marker(s)``  any compressor's marker (contains ``…`` and ``caveman``); ``is_note(s)`` the
    contract note. ``runs(keep)``  maximal dropped runs ``[(start, end)]``;
    ``render_runs(units, keep, marker)`` kept units with ``marker(n)`` for each dropped run.
``read_lines(data, min_lines)``  decode (valid UTF-8 only) and split; None when too short.
``utf8_len(s)``  byte length of a str.

keepNonRedundant
----------------
``keep_non_redundant(units, keep) -> list[bool]``  ``units``: the text of every unit (a line,
    a section, a table row joined as text, an element's canonical JSON); ``keep``: what the
    compressor chose. Seeds = up to 64 kept units: every ``n // 64``-th kept unit from the
    first (``kept[i·(n // 64)]``, i < 64; all of them when n ≤ 64); each dropped unit, in order, is compared with the seeds and
    the classes promoted so far (same masked/unmasked kind): represented when one of them holds
    ``ceil(0.9·|vocab|)`` of its vocabulary tokens (``profile(text)``), else promoted (kept,
    new class). After 128 promotions the rest is kept; fewer than 4 redundant units → every
    unit is kept (nothing worth eliding).

Invariant summaries
-------------------
A unit's fields are ``list[Field]``, ``Field = (name, value_text, is_number)``, in the unit's
field order (the summary lists fields in first-appearance order):
``json_fields(obj)`` top-level scalars of a JSON object, sorted keys (None: not an object;
    a string that parses as a decimal number counts as numeric, like a number);
``line_fields(line)`` NDJSON object line (sorted keys) or logfmt ``k=v`` pairs (order of first
    appearance, quoted values whole);
``table_fields(header, cells)`` header/cell pairs in column order (numeric cells parse as
    decimals) — the tabular compressor passes one list per dropped row.
``summarize(records, elided_bytes) -> str | None``  records of one dropped run (≥ 2, all
    readable, else None): ``all k=v …; <field>: v×n … | N distinct, lo..hi[, absent×n] |
    lo..hi all N present; range k=lo..hi …``, shed to ``summary_budget(elided_bytes)`` in the
    order weak enum, range, bounded coverage, constant, dense coverage, enum (last field first).
    Enumeration buckets go by count, ties in order of first appearance; an enumeration is weak
    when its buckets (absent included) are at least half the run's units.
``worth_eliding(n_units, summary, marker_bytes, elided_bytes)``  runs of ≥ 3 always; 1–2 only
    with a summary whose marker is at most half the elided bytes (json, log, tabular).
``contract_note(unit)`` the note (unit = ``elements``/``lines``/``rows``), added once per
    payload when ≥ ``NOTE_MIN_ELIDED`` (4096) bytes were elided.

``@declines_on_error`` wraps a ``compress`` function so bad input declines instead of raising.
"""

from __future__ import annotations

import math
import re
from functools import wraps
from typing import Callable, Iterable, Sequence, TypeVar

from . import gotext

ELLIPSIS = "\u2026"
NOTE_MIN_ELIDED = 4096

Field = tuple[str, str, bool]
_F = TypeVar("_F", bound=Callable)


def declines_on_error(fn: _F) -> _F:
    """Decorator for ``compress``: bad input never raises, it declines (returns None)."""

    @wraps(fn)
    def guarded(data: bytes):
        try:
            return fn(data)
        except (ValueError, TypeError, KeyError, IndexError, RecursionError, MemoryError,
                OverflowError, UnicodeError):
            return None

    return guarded  # type: ignore[return-value]

# --------------------------------------------------------------------------- lines


def split_lines(text: str) -> tuple[list[str], bool]:
    """Split on ``\\n`` after removing one trailing ``\\n``; lines keep their own ``\\r``."""
    trailing = text.endswith("\n")
    if trailing:
        text = text[:-1]
    return text.split("\n"), trailing


class LineInput:
    """A valid-UTF-8 input split into lines (see :func:`read_lines`)."""

    __slots__ = ("text", "lines", "trailing_nl", "eol")

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines, self.trailing_nl = split_lines(text)
        self.eol = marker_eol(text)


def read_lines(data: bytes, min_lines: int) -> LineInput | None:
    """The input as lines, or None when it is not valid UTF-8 or has fewer than
    ``min_lines`` lines (the usual declines of the line-oriented compressors)."""
    text = gotext.decode_strict(data)
    if text is None:
        return None
    li = LineInput(text)
    if len(li.lines) < min_lines:
        return None
    return li


class LineSpans:
    """A valid-UTF-8 input's lines as offsets into its bytes (see :func:`read_line_spans`):
    the same lines as :func:`split_lines` of the decoded text, without a str per line kept
    alive. ``spans[i]`` is the text of line ``i`` (decoded on demand, so it can stand for the
    ``units`` of :func:`keep_non_redundant`); ``data[start(i):end(i)]`` are its bytes, without
    the ``\n`` that ends it."""

    __slots__ = ("data", "starts", "trailing_nl", "eol")

    def __init__(self, data: bytes) -> None:
        from array import array

        self.data = data
        self.trailing_nl = data.endswith(b"\n")
        body_end = len(data) - 1 if self.trailing_nl else len(data)
        starts = array("q", [0])
        find, append = data.find, starts.append
        p = find(b"\n", 0, body_end)
        while p >= 0:
            p += 1
            append(p)
            p = find(b"\n", p, body_end)
        append(body_end + 1)  # sentinel: line i ends at starts[i + 1] - 1
        self.starts = starts
        self.eol = marker_eol_bytes(data)

    def __len__(self) -> int:
        return len(self.starts) - 1

    def __getitem__(self, i: int) -> str:
        if i < 0:
            i += len(self.starts) - 1
        return self.data[self.starts[i]:self.starts[i + 1] - 1].decode("utf-8")

    def start(self, i: int) -> int:
        return self.starts[i]

    def end(self, i: int) -> int:
        return self.starts[i + 1] - 1

    def region(self, first: int, stop: int) -> memoryview:
        """Lines ``first .. stop - 1`` as they are in the input, joined by their ``\n``
        (none after the last): a view, not a copy."""
        return memoryview(self.data)[self.starts[first]:self.starts[stop] - 1]


def read_line_spans(data: bytes, min_lines: int) -> LineSpans | None:
    """:func:`read_lines` for a large input: the lines as offsets into ``data`` (no decoded
    copy of the input stays alive); None when ``data`` is not valid UTF-8 or has fewer than
    ``min_lines`` lines."""
    if not data.isascii() and not gotext.is_valid_utf8(data):
        return None
    if data.count(b"\n", 0, len(data) - 1) + 1 < min_lines:
        return None
    return LineSpans(data)


def join_lines(lines: Iterable[str], trailing_nl: bool) -> str:
    out = "\n".join(lines)
    return out + "\n" if trailing_nl else out


def marker_eol(text: str) -> str:
    """``"\\r"`` when more than half of the input's line breaks are CRLF."""
    n = text.count("\n")
    if n == 0:
        return ""
    return "\r" if 2 * text.count("\r\n") > n else ""


def marker_eol_bytes(data: bytes) -> str:
    """:func:`marker_eol` of the text ``data`` encodes (UTF-8: the counts are the same)."""
    n = data.count(b"\n")
    if n == 0:
        return ""
    return "\r" if 2 * data.count(b"\r\n") > n else ""


def utf8_len(s: str) -> int:
    if s.isascii():
        return len(s)
    return len(s.encode("utf-8", "surrogatepass"))


def is_marker(line: str) -> bool:
    """A marker synthesised by any compressor (they all carry ``…`` and ``caveman``)."""
    return ELLIPSIS in line and "caveman" in line


_NOTE_BODY = (
    " resemble shown {u} and match the stated invariants \u2014 answer from this view; if you "
    "truly cannot, one broad caveman_retrieve \u2026"
)


def contract_note(unit: str) -> str:
    """The contract/elision note; ``unit`` is ``elements``, ``lines`` or ``rows``."""
    return ELLIPSIS + " caveman: elided " + unit + _NOTE_BODY.format(u=unit)


def is_note(line: str) -> bool:
    return (ELLIPSIS + " caveman: elided ") in line and "caveman_retrieve" in line


def runs(keep: Sequence[bool]) -> list[tuple[int, int]]:
    """Maximal runs ``[start, end)`` of units with ``keep[i]`` false."""
    out: list[tuple[int, int]] = []
    i, n = 0, len(keep)
    while i < n:
        if keep[i]:
            i += 1
            continue
        j = i
        while j < n and not keep[j]:
            j += 1
        out.append((i, j))
        i = j
    return out


def render_runs(units: Sequence[str], keep: Sequence[bool], marker: Callable[[int], str]) -> list[str] | None:
    """Kept units in order, each dropped run replaced by ``marker(run_length)``; None when
    nothing was dropped."""
    spans = runs(keep)
    if not spans:
        return None
    out: list[str] = []
    pos = 0
    for start, end in spans:
        out.extend(units[pos:start])
        out.append(marker(end - start))
        pos = end
    out.extend(units[pos:])
    return out


# --------------------------------------------------------------------------- keepNonRedundant

MAX_VOCAB = 128
MAX_SEEDS = 64
MAX_PROMOTIONS = 128
REPRESENTED = 0.9
MIN_REDUNDANT = 4


def _word_tokens(s: str) -> list[str]:
    """Runs of letters (Unicode L*), decimal digits (Nd) and underscore, lower-cased."""
    out: list[str] = []
    cur: list[str] = []
    for ch in s:
        if ch == "_" or ch.isalpha() or ch.isdecimal():
            cur.append(ch)
        elif cur:
            out.append("".join(cur))
            cur = []
    if cur:
        out.append("".join(cur))
    return out


_ASCII_TOKEN = re.compile(r"[A-Za-z0-9_]+")
_DIGIT_RUN = re.compile(r"[0-9]+")
_ASCII_LETTER = re.compile(r"[a-z]")
_UNI_DIGIT_RUN = re.compile(r"\d+")


class Profile:
    __slots__ = ("tokens", "masked")

    def __init__(self, tokens: frozenset[str], masked: bool) -> None:
        self.tokens = tokens
        self.masked = masked


def profile(text: str) -> Profile:
    """Vocabulary of a unit: lower-cased word tokens; digit runs masked to ``#`` when the unit
    has a letter-bearing token (else digits kept, profile "unmasked"); ≤ 128 distinct."""
    if text.isascii():
        low = text.lower()
        raw = _ASCII_TOKEN.findall(low)
        digit_re = _DIGIT_RUN
        masked = _ASCII_LETTER.search(low) is not None
    else:
        raw = _word_tokens(gotext.to_lower(text))
        digit_re = _UNI_DIGIT_RUN
        masked = any(c.isalpha() for t in raw for c in t)
    seen: dict[str, None] = {}
    for t in raw:
        if masked:
            t = digit_re.sub("#", t)
        if t not in seen:
            if len(seen) >= MAX_VOCAB:
                break
            seen[t] = None
    return Profile(frozenset(seen), masked)


def _represented(p: Profile, kept: Sequence[Profile]) -> bool:
    if not p.tokens:
        return True
    need = math.ceil(REPRESENTED * len(p.tokens))
    toks = p.tokens
    for k in kept:
        if k.masked != p.masked:
            continue
        if len(k.tokens) < need:
            continue
        if len(toks & k.tokens) >= need:
            return True
    return False


def keep_non_redundant(units: Sequence[str], keep: Sequence[bool]) -> list[bool]:
    """Promote dropped units that no kept unit represents (spec: keepNonRedundant)."""
    keep = list(keep)
    kept_idx = [i for i, k in enumerate(keep) if k]
    if len(kept_idx) > MAX_SEEDS:
        # Every step-th kept unit from the first, step = len // 64 in integer arithmetic, at
        # most 64 of them: with 311 kept units the seeds are kept[0], kept[4], … kept[252].
        step = len(kept_idx) // MAX_SEEDS
        kept_idx = kept_idx[::step][:MAX_SEEDS]
    classes = [profile(units[i]) for i in kept_idx]
    promotions = 0
    redundant = 0
    for i, k in enumerate(keep):
        if k:
            continue
        if promotions >= MAX_PROMOTIONS:
            keep[i] = True
            continue
        p = profile(units[i])
        if _represented(p, classes):
            redundant += 1
            continue
        keep[i] = True
        classes.append(p)
        promotions += 1
    if redundant < MIN_REDUNDANT:
        return [True] * len(keep)
    return keep


# --------------------------------------------------------------------------- invariant summaries

_SENSITIVE = re.compile(
    r"(?i)(secret|passw|token|api[_-]?key|authoriz|credential|cookie|session)", re.ASCII
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_PLAIN_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_PREFIX_INT = re.compile(r"(.*?)([0-9]+)")

MAX_VALUE = 40
MAX_ENUM_VALUE = 24
MAX_ENUM_BUCKETS = 5
MAX_COVERAGE = 2
BUDGET_MIN = 96
BUDGET_MAX = 160

# kinds, in shedding order
_WEAK_ENUM, _RANGE, _COVERAGE, _CONSTANT, _DENSE, _ENUM = range(6)


def parse_number(s: str) -> float | None:
    """A decimal number (the cell/field text), else None."""
    if not _PLAIN_NUMBER.fullmatch(s):
        return None
    try:
        v = float(s)
    except ValueError:
        return None
    if math.isinf(v) or math.isnan(v):
        return None
    return v


def _usable(v: str) -> bool:
    return (
        utf8_len(v) <= MAX_VALUE
        and "caveman" not in v
        and ELLIPSIS not in v
        and not _CONTROL.search(v)
    )


def summary_budget(elided_bytes: int) -> int:
    b = elided_bytes // 4
    if b < BUDGET_MIN:
        b = BUDGET_MIN
    if b > elided_bytes // 2:
        b = elided_bytes // 2
    if b > BUDGET_MAX:
        b = BUDGET_MAX
    return b


class _Entry:
    __slots__ = ("kind", "order", "key", "text")

    def __init__(self, kind: int, order: int, key: str, text: str) -> None:
        self.kind = kind
        self.order = order
        self.key = key
        self.text = text


def _render(entries: list[_Entry]) -> str:
    consts = [e for e in entries if e.kind == _CONSTANT]
    ranges = [e for e in entries if e.kind == _RANGE]
    fields = [e for e in entries if e.kind not in (_CONSTANT, _RANGE)]
    sections: list[str] = []
    if consts:
        sections.append("all " + " ".join(e.text for e in consts))
    for e in sorted(fields, key=lambda e: e.order):
        sections.append(e.text)
    if ranges:
        sections.append("range " + " ".join(e.text for e in ranges))
    return "; ".join(sections)


def _field_entry(key: str, order: int, vals: list[str | None], nums: list[bool]) -> _Entry | None:
    n = len(vals)
    present = [v for v in vals if v is not None]
    absent = n - len(present)
    if not present:
        return None
    if not all(_usable(v) for v in present):
        return None
    distinct: dict[str, int] = {}
    for v in present:
        distinct[v] = distinct.get(v, 0) + 1
    if absent == 0 and len(distinct) == 1:
        return _Entry(_CONSTANT, order, key, f"{key}={present[0]}")
    if absent == 0 and all(nums):
        fv = [parse_number(v) for v in present]
        if all(x is not None for x in fv):
            lo = hi = 0
            for i in range(1, n):
                if fv[i] < fv[lo]:
                    lo = i
                if fv[i] > fv[hi]:
                    hi = i
            return _Entry(_RANGE, order, key, f"{key}={present[lo]}..{present[hi]}")
    buckets = len(distinct) + (1 if absent else 0)
    if (
        buckets <= MAX_ENUM_BUCKETS
        and all(utf8_len(v) <= MAX_ENUM_VALUE and " " not in v for v in distinct)
    ):
        if max(distinct.values()) == 1 and absent <= 1:
            pass  # every bucket has count 1: not printed as an enumeration
        else:
            # most frequent first; equal counts keep the order in which the values first
            # appear in the run (a stable sort on the count alone)
            items = sorted(distinct.items(), key=lambda kv: -kv[1])
            parts = [f"{v}\u00d7{c}" for v, c in items]
            if absent:
                parts.append(f"absent\u00d7{absent}")
            weak = 2 * buckets >= n  # buckets (absent included) are at least half the units
            return _Entry(_WEAK_ENUM if weak else _ENUM, order, key, f"{key}: " + " ".join(parts))
    if len(distinct) < 2:
        return None
    # Coverage entries name values, so they obey the enumeration's value limits.
    if any(utf8_len(v) > MAX_ENUM_VALUE or " " in v for v in distinct):
        return None
    ordered = sorted(distinct, key=lambda s: s.encode("utf-8", "surrogatepass"))
    if absent == 0:
        m = [_PREFIX_INT.fullmatch(v) for v in ordered]
        if all(m):
            prefix = m[0].group(1)
            if all(x.group(1) == prefix for x in m):
                ints = sorted(int(x.group(2)) for x in m)
                lo_i, hi_i = ints[0], ints[-1]
                if hi_i - lo_i + 1 == len(ints):
                    lo_s = next(v for v, x in zip(ordered, m) if int(x.group(2)) == lo_i)
                    hi_s = next(v for v, x in zip(ordered, m) if int(x.group(2)) == hi_i)
                    return _Entry(
                        _DENSE, order, key, f"{key}: {lo_s}..{hi_s} all {len(ints)} present"
                    )
    text = f"{key}: {len(distinct)} distinct, {ordered[0]}..{ordered[-1]}"
    if absent:
        text += f", absent\u00d7{absent}"
    return _Entry(_COVERAGE, order, key, text)


def summarize(records: Iterable[Sequence[Field] | None], elided_bytes: int) -> str | None:
    """Invariant summary of a run of ≥ 2 dropped units, or None. ``records`` is read once, in
    order (a generator is fine: a run of 300k units never has all its records alive); what is
    kept of them is one list of values per field, each distinct value text once."""
    order: dict[str, int] = {}
    vals_of: dict[str, list[str | None]] = {}  # per field, one entry per unit (None: absent)
    nums_of: dict[str, list[bool]] = {}  # per field, one entry per unit that has it
    same: dict[str, str] = {}  # one str object per distinct value text
    n = 0
    for rec in records:
        if rec is None:
            return None
        d: dict[str, tuple[str, bool]] = {}
        for k, v, isnum in rec:
            if k not in order:
                order[k] = len(order)
                if not _SENSITIVE.search(k):
                    vals_of[k] = [None] * n
                    nums_of[k] = []
            d[k] = (v, isnum)  # a repeated field: the last value wins
        for k, vals in vals_of.items():
            got = d.get(k)
            if got is None:
                vals.append(None)
            else:
                v = got[0]
                vals.append(same.setdefault(v, v))
                nums_of[k].append(got[1])
        n += 1
    if n < 2 or not order:
        return None
    del same
    entries: list[_Entry] = []
    coverage = 0
    for key, idx in order.items():
        if key not in vals_of:  # sensitive
            continue
        e = _field_entry(key, idx, vals_of[key], nums_of[key])
        if e is None:
            continue
        if e.kind in (_COVERAGE, _DENSE):
            if coverage >= MAX_COVERAGE:
                continue
            coverage += 1
        entries.append(e)
    if not entries:
        return None
    budget = summary_budget(elided_bytes)
    text = _render(entries)
    if utf8_len(text) <= budget:
        return text
    for kind in (_WEAK_ENUM, _RANGE, _COVERAGE, _CONSTANT, _DENSE, _ENUM):
        while True:
            cands = [e for e in entries if e.kind == kind]
            if not cands:
                break
            victim = max(cands, key=lambda e: e.order)
            entries.remove(victim)
            if not entries:
                return None
            text = _render(entries)
            if utf8_len(text) <= budget:
                return text
    return None


def worth_eliding(n_units: int, summary: str | None, marker_bytes: int, elided_bytes: int) -> bool:
    """A run of ≥ 3 units always elides; 1–2 units only with a summary whose marker costs at
    most half of what it replaces."""
    if n_units >= 3:
        return True
    if n_units < 1 or not summary:
        return False
    return 2 * marker_bytes <= elided_bytes


# --------------------------------------------------------------------------- field readers


def _scalar_text(v: object) -> tuple[str, bool] | None:
    from .jsonio import Number

    if isinstance(v, str):
        return v, parse_number(v) is not None
    if isinstance(v, Number):
        return v.literal, True
    if v is True:
        return "true", False
    if v is False:
        return "false", False
    if v is None:
        return "null", False
    return None


def json_fields(value: object) -> list[Field] | None:
    """Top-level scalar members of a JSON object, sorted keys; None for a non-object."""
    if not isinstance(value, dict):
        return None
    out: list[Field] = []
    for k in sorted(value, key=lambda s: s.encode("utf-8", "surrogatepass")):
        st = _scalar_text(value[k])
        if st is not None:
            out.append((k, st[0], st[1]))
    return out


_LOGFMT = re.compile(r'(?:^|[\t\n\f\r ])([A-Za-z_][A-Za-z0-9_.\-]*)=("(?:[^"\\]|\\.)*"|[^\t\n\f\r ]*)')


def line_fields(line: str) -> list[Field] | None:
    """Fields of a log line: an NDJSON object's top-level scalars (sorted keys), else its
    logfmt ``k=v`` pairs in order of first appearance (a repeated key keeps its first place
    and its last value; a ``"…"`` value is one value, without the quotes)."""
    t = gotext.trim(line)
    if t.startswith("{") and t.endswith("}"):
        from . import jsonio

        try:
            v = jsonio.loads(t)
        except (jsonio.JSONError, ValueError, RecursionError):
            v = None
        if isinstance(v, dict):
            return json_fields(v)
    pairs = _LOGFMT.findall(t)
    if not pairs:
        return None
    d: dict[str, str] = {}
    for k, v in pairs:
        if len(v) >= 2 and v[0] == '"' and v[-1] == '"':
            v = v[1:-1]
        d[k] = v  # a repeated key keeps its first place and takes its last value
    return [(k, v, parse_number(v) is not None) for k, v in d.items()]


def table_fields(header: Sequence[str], cells: Sequence[str]) -> list[Field]:
    """Header/cell pairs in column order; numeric when the cell parses as a number."""
    out: list[Field] = []
    for k, v in zip(header, cells):
        out.append((k, v, parse_number(v) is not None))
    return out
