"""``tabular`` (spec §6.8): elide redundant rows of a Markdown, CSV or TSV table.

The table is parsed strictly by :func:`caveman_engine.tables.parse_table` (Markdown first, then
CSV/TSV with Go ``encoding/csv`` rules). With ≥ 12 rows (and more than header + 6), it keeps
the header row(s), the first 3 and last 2 data rows, flagged rows, the min and max row of every
column that is ≥ 70 % numeric, then runs keepNonRedundant. Each worth-eliding dropped run
becomes one row whose first cell is ``… N rows elided (caveman)[: <summary>] …`` (other cells
empty); a final note row follows when ≥ 4096 bytes were elided. The table is re-encoded
(Markdown ``| a | b |`` lines, CSV/TSV through a Go-compatible writer), with CRLF line ends when
most input line breaks are CRLF and a trailing newline only when the input had one.

Declines: no strict table, too few rows, input already holding ``rows elided (caveman)``,
nothing elided, or output not smaller in bytes.
"""

from __future__ import annotations

import re

from .. import elision, tables

CONTENT_TYPE = "tabular"
SAFETY_CLASS = "S4"

MIN_ROWS = 12
HEAD_ROWS = 3
TAIL_ROWS = 2
NUMERIC_TENTHS = 7  # a column is numeric when ≥ 70 % of its data cells parse as numbers

_FLAGGED = re.compile(
    r"(?i)\b(ERROR|FAIL|FAILED|FATAL|PANIC|EXCEPTION|WARNING|SECURITY|DENIED|REJECTED)\b",
    re.ASCII,
)
_ALREADY = b"rows elided (caveman)"


def marker(n: int, summary: str | None) -> str:
    if summary:
        return f"\u2026 {n} rows elided (caveman): {summary} \u2026"
    return f"\u2026 {n} rows elided (caveman) \u2026"


def _extreme_rows(body: list[tuple[str, ...]], width: int) -> set[int]:
    """Indexes (into ``body``) of the min and max row of every ≥ 70 %-numeric column; ties go
    to the first row holding the extreme value."""
    out: set[int] = set()
    n = len(body)
    parse = elision.parse_number
    for c in range(width):
        nums = [(i, parse(row[c])) for i, row in enumerate(body)]
        vals = [(i, v) for i, v in nums if v is not None]
        if not vals or 10 * len(vals) < NUMERIC_TENTHS * n:
            continue
        lo_i, lo_v = vals[0]
        hi_i, hi_v = vals[0]
        for i, v in vals[1:]:
            if v < lo_v:
                lo_i, lo_v = i, v
            if v > hi_v:
                hi_i, hi_v = i, v
        out.add(lo_i)
        out.add(hi_i)
    return out


@elision.declines_on_error
def compress(data: bytes) -> bytes | None:
    if _ALREADY in data:
        return None
    table = tables.parse_table(data)
    if table is None:
        return None
    rows = [r.cells for r in table.rows]
    head = 2 if table.kind == "markdown" else 1
    n = len(rows)
    if n < MIN_ROWS or n <= head + 6:
        return None
    width = table.width
    body = rows[head:]
    nb = len(body)

    keep = [False] * n
    for i in range(head):
        keep[i] = True
    for i in list(range(HEAD_ROWS)) + list(range(nb - TAIL_ROWS, nb)):
        keep[head + i] = True
    texts = [" ".join(r) for r in rows]
    for i in range(head, n):
        if _FLAGGED.search(texts[i]):
            keep[i] = True
    for i in _extreme_rows(body, width):
        keep[head + i] = True
    keep = elision.keep_non_redundant(texts, keep)

    enc = _Encoder(table, data)
    raw = [r.fields for r in table.rows]  # exact cell bytes, re-encoded as they are
    header = rows[0]
    out: list[tuple[bytes, ...]] = []
    pad = (b"",) * (width - 1)
    elided_total = 0
    collapsed = False
    pos = 0
    for start, end in elision.runs(keep):
        out.extend(raw[pos:start])
        pos = end
        elided = sum(enc.row_bytes(r) for r in raw[start:end])
        summary = None
        if end - start >= 2:
            summary = elision.summarize(
                [elision.table_fields(header, r) for r in rows[start:end]], elided
            )
        mrow = (marker(end - start, summary).encode("utf-8", "surrogateescape"),) + pad
        if elision.worth_eliding(end - start, summary, enc.row_bytes(mrow), elided):
            out.append(mrow)
            elided_total += elided
            collapsed = True
        else:
            out.extend(raw[start:end])
    out.extend(raw[pos:])
    if not collapsed:
        return None
    if elided_total >= elision.NOTE_MIN_ELIDED:
        out.append((elision.contract_note("rows").encode("utf-8"),) + pad)
    result = enc.encode(out)
    if len(result) >= len(data):
        return None
    return result


# First bytes of every Go unicode.IsSpace encoding: a field starting with one may need quotes.
_MAY_LEAD_SPACE = frozenset(b"\t\n\v\f\r \xc2\xe1\xe2\xe3")


class _Encoder:
    """Re-encodes rows (tuples of cell bytes) in the input's format and line-ending style."""

    def __init__(self, table: tables.Table, data: bytes) -> None:
        self.markdown = table.kind == "markdown"
        self.delimiter = table.delimiter
        n = data.count(b"\n")
        self.crlf = n > 0 and 2 * data.count(b"\r\n") > n
        self.trailing = data.endswith(b"\n")

    def line(self, row: tuple[bytes, ...]) -> bytes:
        if self.markdown:
            return b"| " + b" | ".join(row) + b" |"
        d = self.delimiter
        line = d.join(row)
        # fast path: nothing Go's writer would quote
        if (
            line.count(d) == len(row) - 1
            and b'"' not in line
            and b"\r" not in line
            and b"\n" not in line
            and b"\\." not in row
            and not any(f and f[0] in _MAY_LEAD_SPACE for f in row)
        ):
            return line
        return tables.write_csv_record(row, d, self.crlf)

    def row_bytes(self, row: tuple[bytes, ...]) -> int:
        """Bytes of one encoded row with its line break."""
        return len(self.line(row)) + (2 if self.crlf else 1)

    def encode(self, rows: list[tuple[bytes, ...]]) -> bytes:
        eol = b"\r\n" if self.crlf else b"\n"
        out = eol.join(self.line(r) for r in rows)
        if self.trailing:
            out += eol
        return out
