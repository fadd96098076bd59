"""Query-narrowed retrieval: the BM25 view behind ``retrieve HANDLE QUERY`` (ccr_spec §9.3).

``narrow(original, query)`` splits the original into whole units (JSON records, CSV/TSV rows,
paragraphs or lines), ranks them against the query with Okapi BM25 and renders the best ones in
document order, with a marker wherever units were left out. It returns the full original when
the query is blank, nothing matches, the content cannot be split, or the view would not be
strictly shorter. Pure function of its arguments.
"""

from __future__ import annotations

import math
import re
from typing import Any

from . import gotext, jsonio

MARKER = "\u2026 [caveman: non-adjacent] \u2026"
K1 = 1.5
B = 0.75
TOP_K = 20
STOPWORDS = frozenset(
    "a an and are as at be by for from how in is it of on or that the this to was what when "
    "where which who why with".split()
)
# Python's \w is Go's letter/digit/underscore set plus the non-decimal numbers (No, Nl);
# runs containing non-ASCII characters are split further in tokenize().
_WORD = re.compile(r"\w+")


def _keep(tok: str) -> bool:
    return tok not in STOPWORDS and len(tok.encode("utf-8")) >= 2


def tokenize(text: str) -> list[str]:
    """Lower-cased maximal runs of Unicode letters (L*), decimal digits (Nd) or ``_``, at least
    2 UTF-8 bytes long, stop-words removed."""
    out: list[str] = []
    for run in _WORD.findall(gotext.to_lower(text)):
        if run.isascii():
            if len(run) >= 2 and run not in STOPWORDS:
                out.append(run)
            continue
        cur: list[str] = []
        for ch in run:
            if ch.isalpha() or ch.isdecimal() or ch == "_":
                cur.append(ch)
            elif cur:
                tok = "".join(cur)
                cur = []
                if _keep(tok):
                    out.append(tok)
        if cur:
            tok = "".join(cur)
            if _keep(tok):
                out.append(tok)
    return out


def _json_units(original: bytes) -> list[str] | None:
    """Units of a JSON document, [] when it is JSON without record groups, None when the
    original is not exactly one JSON value."""
    try:
        value = jsonio.loads(original, trailing="go-decoder")
    except ValueError:
        return None
    groups: list[list[str]] = []
    stack: list[Any] = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v[k] for k in sorted(v, reverse=True))
        elif isinstance(v, list):
            if v and all(isinstance(el, dict) for el in v):
                groups.append([jsonio.dumps(el, indent=True).decode() for el in v])
            else:
                stack.extend(reversed(v))
    if not groups:
        return []
    units = [""]
    for g in groups:
        units.extend(g)
        units.append("")
    return units


def _table_units(original: bytes) -> tuple[str, list[str]] | None:
    """(header prelude, data-record units) of a CSV/TSV original, or None.

    Valid UTF-8, not blank, trimmed content not starting with ``{``/``[``, a strict Go CSV
    parse with ≥ 2 fields and ≥ 2 data records. A unit is the record's original byte span
    (from the end of the previous record) without trailing CR/LF characters."""
    from . import tables

    if not gotext.is_valid_utf8(original):
        return None
    lo, hi = tables.trim_span(original)
    if lo >= hi or original[lo : lo + 1] in (b"{", b"["):
        return None
    table = tables.parse_delimited(original, max_fields=None, min_records=3)
    if table is None:
        return None
    texts = [original[r.start : r.end].rstrip(b"\r\n").decode("utf-8") for r in table.rows]
    return texts[0], texts[1:]


def _text_units(text: str) -> list[str]:
    pieces = text.split("\n\n") if "\n\n" in text else text.split("\n")
    return [p for p in (gotext.trim(x) for x in pieces) if p]


def units_of(original: bytes) -> tuple[str, list[str]]:
    """(prelude, units) per the first matching decomposition rule."""
    units = _json_units(original)
    if units is not None:
        return "", units
    table = _table_units(original)
    if table is not None:
        return table
    return "", _text_units(original.decode("utf-8", "surrogateescape"))


def scores(units: list[str], query: str) -> list[float]:
    """Okapi BM25 (k1 = 1.5, b = 0.75) of every unit against the set of query terms."""
    terms = list(dict.fromkeys(tokenize(query)))
    n = len(units)
    if not terms or not n:
        return [0.0] * n
    term_set = set(terms)
    tfs: list[dict[str, int]] = []
    lengths: list[int] = []
    df = dict.fromkeys(terms, 0)
    total = 0
    for u in units:
        toks = tokenize(u) if u else []
        lengths.append(len(toks))
        total += len(toks)
        tf: dict[str, int] = {}
        for t in toks:
            if t in term_set:
                tf[t] = tf.get(t, 0) + 1
        for t in tf:
            df[t] += 1
        tfs.append(tf)
    avgdl = total / n if total else 1.0
    idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in terms}
    out = []
    for tf, dl in zip(tfs, lengths):
        s = 0.0
        if tf:
            for t in terms:
                f = tf.get(t, 0)
                if f > 0:
                    s += idf[t] * f * (K1 + 1) / (f + K1 * (1 - B + B * dl / avgdl))
        out.append(s)
    return out


def render(prelude: str, units: list[str], hits: list[int]) -> str:
    parts: list[str] = []
    if prelude:
        parts.append(prelude + "\n")
    prev = -1
    for idx in hits:
        if prev < 0:
            if idx != 0:
                parts.append(MARKER + "\n\n")
        elif idx == prev + 1:
            parts.append("\n\n")
        else:
            parts.append("\n\n" + MARKER + "\n\n")
        parts.append(units[idx])
        prev = idx
    if prev >= 0 and prev != len(units) - 1:
        parts.append("\n\n" + MARKER)
    return "".join(parts)


def view(original: bytes, query: str) -> bytes | None:
    """The rendered view, or None when the query is blank, the content has no units or no
    unit matches. Not compared with the original's size (see :func:`narrow`)."""
    if gotext.is_blank(query):
        return None
    try:
        prelude, units = units_of(original)
    except (ValueError, RecursionError):
        return None
    if not units:
        return None
    sc = scores(units, query)
    hits = [i for i, s in enumerate(sc) if s > 0]
    if not hits:
        return None
    hits.sort(key=lambda i: -sc[i])  # stable: ties keep document order
    hits = sorted(hits[:TOP_K])
    return render(prelude, units, hits).encode("utf-8", "surrogateescape")


def narrow(original: bytes, query: str) -> bytes:
    """The query-narrowed view of ``original``, or ``original`` itself when the query is
    blank, nothing matches, the content has no units, or the view is not strictly shorter."""
    v = view(original, query)
    return v if v is not None and len(v) < len(original) else original
