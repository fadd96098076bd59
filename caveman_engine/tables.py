"""The strict table parser (spec §6.8), shared by detection, the tabular compressor and
query-narrowed retrieval.

Three users, one parser:

* **detection** (spec §3.1 step 6): ``table_rows(body) >= 8`` — the row count
  ``parse_table`` would give, computed without building rows (:func:`csv_shape`);
* **the tabular compressor** (spec §6.8): ``parse_table(body)`` gives the format (``kind``,
  ``delimiter``), the header, every row's cells and spans; ``body_rows`` skips the header (and
  the Markdown separator);
* **retrieve narrowing** (ccr_spec §9.3 rule 2):
  ``parse_delimited(content, max_fields=None, min_records=3)`` (CSV/TSV only, no Markdown, no
  field cap, header + ≥ 2 data rows) gives each record's original byte span; the unit text of a
  record is ``content[row.start:row.end]`` with trailing ``\r``/``\n`` stripped, the first
  record is the prelude. The caller still checks UTF-8 validity and the leading ``{``/``[``
  rule.

Lower-level pieces: :func:`read_csv` (Go ``csv.Reader.ReadAll`` over a byte range, with spans),
:func:`csv_shape` (its record/field counts only), :func:`choose_delimiter`, and Go
``strings.TrimSpace`` on bytes (:func:`trim_span`, :func:`trim`, :func:`is_blank`).

Everything works on **bytes**, so byte spans are exact and invalid UTF-8 survives untouched.
All delimiters (``|``, ``,``, TAB, ``"``, CR, LF) are ASCII, which cannot occur inside a
multi-byte UTF-8 sequence, so scanning bytes is equivalent to Go scanning runes.

Input handling: the parsers first trim Go Unicode whitespace (``strings.TrimSpace``) from both
ends; ``Table.start``/``Table.end`` is that trimmed span. All offsets (table and rows) index the
``data`` argument as given.

Row spans: ``Row.start`` is the end of the previous record (``Table.start`` for the first), so
a span covers any blank lines skipped before its record; ``Row.end`` is Go's
``csv.Reader.InputOffset()`` after the record: just past its line terminator (``\\n`` or
``\\r\\n``), or the end of the trimmed text for the last record. For Markdown, a row is exactly
one line with the same convention.

Cells: ``Row.fields`` holds the exact cell bytes (CSV: after unquoting, ``""`` → ``"``, CRLF
inside quoted fields normalised to LF, like Go; Markdown: each cell trimmed of Go whitespace);
``Row.cells`` decodes them with ``surrogateescape`` so that
``cell.encode("utf-8", "surrogateescape")`` gives back the exact bytes.

Rules (Go ``encoding/csv`` with default options, plus the spec's constraints):

* Markdown (tried first): after trimming, every ``\\n``-separated line, itself trimmed, starts
  and ends with ``|`` (length ≥ 2); cells are the text between the outer pipes split on ``|``,
  each trimmed; ≥ 3 lines; header ≥ 2 cells; every separator cell (row index 1) matches
  ``^:?-{3,}:?$``; every row has the header's cell count. The separator is kept as row 1.
* CSV/TSV: delimiter TAB when the first line has more tabs than commas (hence ≥ 1 tab), else
  comma; the first line must contain the delimiter. Records follow Go's reader: a ``"`` inside
  an unquoted field is an error (``ErrBareQuote``); a quoted field's closing quote must be
  followed by ``"``, the delimiter or the end of line (``ErrQuote``); an unterminated quote is
  an error; quoted fields may span lines; empty lines (``""``, ``"\\n"``, ``"\\r\\n"``) are
  skipped; ``\\r\\n`` line ends become ``\\n``; a lone ``\\r`` right before EOF is dropped;
  every record must have the first record's field count (``ErrFieldCount``). Then 2 ≤ fields
  ≤ ``max_fields`` (128 by default, ``None`` = unlimited) and ≥ ``min_records`` records (2).
"""

from __future__ import annotations

import re

# ---------------------------------------------------------------------------------------------
# Go whitespace on bytes (strings.TrimSpace without decoding the input).

_ASCII_SPACE = b"\t\n\v\f\r "
# Every Go unicode.IsSpace rune as a UTF-8 byte pattern.
_SPACE_RE = rb"(?:[\t\n\v\f\r ]|\xc2[\x85\xa0]|\xe1\x9a\x80|\xe2\x80[\x80-\x8a\xa8\xa9\xaf]|\xe2\x81\x9f|\xe3\x80\x80)"
# The same set with each encoding reversed, matched on the reversed bytes.
_SPACE_REV_RE = rb"(?:[\t\n\v\f\r ]|[\x85\xa0]\xc2|\x80\x9a\xe1|[\x80-\x8a\xa8\xa9\xaf]\x80\xe2|\x9f\x81\xe2|\x80\x80\xe3)*"
# First and last byte of every whitespace encoding: quick "nothing to trim" tests, so that
# most inputs never need the patterns (compiled on first use: every command imports this
# module through the wrappers, and start-up time counts).
_SPACE_FIRST_BYTES = frozenset(_ASCII_SPACE + b"\xc2\xe1\xe2\xe3")
_SPACE_LAST_BYTES = frozenset(_ASCII_SPACE + b"\x85\xa0\x80\x81\x82\x83\x84\x86\x87\x88\x89\x8a\xa8\xa9\xaf\x9f")
_leading_space: re.Pattern | None = None
_trailing_space_rev: re.Pattern | None = None


def _leading_space_re() -> re.Pattern:
    global _leading_space
    if _leading_space is None:
        _leading_space = re.compile(_SPACE_RE + b"*")
    return _leading_space


def _leading_end(data: bytes, lo: int, hi: int) -> int:
    """Where the run of Go whitespace starting at ``lo`` ends (before ``hi``)."""
    if lo >= hi or data[lo] not in _SPACE_FIRST_BYTES:
        return lo
    return _leading_space_re().match(data, lo, hi).end()


def trim_span(data: bytes, lo: int = 0, hi: int | None = None) -> tuple[int, int]:
    """The span of ``data[lo:hi]`` left by Go's ``strings.TrimSpace`` (byte offsets)."""
    if hi is None:
        hi = len(data)
    lo = _leading_end(data, lo, hi)
    if lo >= hi or data[hi - 1] not in _SPACE_LAST_BYTES:
        return lo, hi
    if data[hi - 1] == 0x0A and hi - 1 > lo and data[hi - 2] not in _SPACE_LAST_BYTES:
        return lo, hi - 1  # one final newline, the usual case
    global _trailing_space_rev
    if _trailing_space_rev is None:
        _trailing_space_rev = re.compile(_SPACE_REV_RE)
    # Go's DecodeLastRune stops at a lead byte, so matching whole encodings backwards (on the
    # reversed bytes) is exact. Look at a growing tail window: the match is final once it stops
    # at least 3 bytes (one whole encoding) before the window's edge, or covers everything.
    size = 64
    while True:
        a = max(lo, hi - size)
        rev = data[a:hi][::-1]
        n = _trailing_space_rev.match(rev).end()
        if a == lo or n < len(rev) - 3:
            return lo, hi - n
        size *= 4


def trim(data: bytes) -> bytes:
    """``strings.TrimSpace`` on bytes."""
    lo, hi = trim_span(data)
    if lo == 0 and hi == len(data):
        return data
    return data[lo:hi]


def is_blank(data: bytes) -> bool:
    """True when ``data`` is empty or only Go whitespace."""
    return _leading_end(data, 0, len(data)) == len(data)


# ---------------------------------------------------------------------------------------------
# Result types


class _Value:
    """Immutable value object: equality, hash and repr over ``__slots__`` (a dataclass costs
    ~0.6 ms to define at import; detection runs on every CLI start)."""

    __slots__ = ()

    def _values(self) -> tuple:
        return tuple(getattr(self, k) for k in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._values() == self._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__)
        return f"{type(self).__name__}({args})"

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def _init(self, **values: object) -> None:
        for k, v in values.items():
            object.__setattr__(self, k, v)


class Row(_Value):
    """One record: its cells (exact bytes) and its original byte span ``[start, end)``."""

    __slots__ = ("fields", "start", "end")
    fields: tuple[bytes, ...]
    start: int
    end: int

    def __init__(self, fields: tuple[bytes, ...], start: int, end: int) -> None:
        self._init(fields=fields, start=start, end=end)

    @property
    def cells(self) -> tuple[str, ...]:
        return tuple(f.decode("utf-8", "surrogateescape") for f in self.fields)


class Table(_Value):
    """A parsed table. ``kind`` is "markdown", "csv" or "tsv"; ``delimiter`` b"|", b"," or
    b"\t"; ``rows`` starts with the header (Markdown keeps its separator as ``rows[1]``);
    ``[start, end)`` is the trimmed span of the input that was parsed."""

    __slots__ = ("kind", "delimiter", "rows", "start", "end")
    kind: str
    delimiter: bytes
    rows: tuple[Row, ...]
    start: int
    end: int

    def __init__(self, kind: str, delimiter: bytes, rows: tuple[Row, ...], start: int, end: int) -> None:
        self._init(kind=kind, delimiter=delimiter, rows=rows, start=start, end=end)

    @property
    def width(self) -> int:
        return len(self.rows[0].fields)

    @property
    def header(self) -> Row:
        return self.rows[0]

    @property
    def body_rows(self) -> tuple[Row, ...]:
        """Data rows: after the header (and, for Markdown, the separator)."""
        return self.rows[2:] if self.kind == "markdown" else self.rows[1:]


# ---------------------------------------------------------------------------------------------
# Markdown

_SEPARATOR_CELL = rb":?-{3,}:?\Z"


def parse_markdown(data: bytes) -> Table | None:
    """A strict Markdown pipe table, or None."""
    lo, hi = trim_span(data)
    if lo >= hi or data[lo] != 0x7C:  # "|"
        return None
    rows: list[Row] = []
    width = -1
    pos = lo
    while pos <= hi:
        nl = data.find(b"\n", pos, hi)
        end = hi if nl < 0 else nl + 1
        a, b = trim_span(data, pos, hi if nl < 0 else nl)
        if b - a < 2 or data[a] != 0x7C or data[b - 1] != 0x7C:
            return None
        fields = tuple(trim(c) for c in data[a + 1 : b - 1].split(b"|"))
        if width < 0:
            width = len(fields)
            if width < 2:
                return None
        elif len(fields) != width:
            return None
        if len(rows) == 1 and not all(re.match(_SEPARATOR_CELL, c) for c in fields):
            return None
        rows.append(Row(fields, pos, end))
        if nl < 0:
            break
        pos = end
    if len(rows) < 3:
        return None
    return Table("markdown", b"|", tuple(rows), lo, hi)


# ---------------------------------------------------------------------------------------------
# CSV / TSV with Go encoding/csv semantics


class _CSVError(Exception):
    pass


def read_csv(data: bytes, delimiter: bytes, lo: int = 0, hi: int | None = None) -> list[Row] | None:
    """Go ``csv.NewReader`` + ``ReadAll`` over ``data[lo:hi]`` (default options, the given
    one-byte delimiter). Returns the records with their spans, or None on any parse error."""
    if hi is None:
        hi = len(data)
    delim = delimiter[0]
    rows: list[Row] = []
    width = -1
    pos = lo
    try:
        while True:
            rec = _read_record(data, delim, pos, hi)
            if rec is None:
                return rows
            fields, end = rec
            if width < 0:
                width = len(fields)
            elif len(fields) != width:
                return None
            rows.append(Row(fields, pos, end))
            pos = end
    except _CSVError:
        return None


def csv_shape(data: bytes, delimiter: bytes, lo: int = 0, hi: int | None = None) -> tuple[int, int] | None:
    """(record count, field count) that :func:`read_csv` would return, or None; without
    building rows. After the first record, runs of single-line records with the same field
    count (and empty lines) are validated by one regex match; anything else (a multi-line
    quoted field, the last line, an error) goes through the exact record reader."""
    if hi is None:
        hi = len(data)
    delim = delimiter[0]
    try:
        first = _read_record(data, delim, lo, hi)
        if first is None:
            return 0, 0
        fields, pos = first
        width = len(fields)
        count = 1
        run = _record_run(delim, width).match
        while pos < hi:
            end = run(data, pos, hi).end()
            if end > pos:
                lines = data[pos:end].split(b"\n")  # ends with "\n": last element is ""
                count += len(lines) - lines.count(b"") - lines.count(b"\r")
                pos = end
                if pos >= hi:
                    break
            rec = _read_record(data, delim, pos, hi)
            if rec is None:
                break
            fields, pos = rec
            if len(fields) != width:
                return None
            count += 1
    except _CSVError:
        return None
    return count, width


_RUNS: dict[tuple[int, int], re.Pattern] = {}


def _record_run(delim: int, width: int) -> re.Pattern:
    """A possessive run of newline-terminated lines, each empty (skipped by Go) or one whole
    record of exactly ``width`` fields on one line."""
    p = _RUNS.get((delim, width))
    if p is None:
        d = re.escape(bytes((delim,)))
        field = rb'(?:"(?:[^"\n]|"")*"|[^"%s\n]*)' % d
        record = field + (rb"(?:%s%s){%d}" % (d, field, width - 1) if width > 1 else b"")
        p = _RUNS[(delim, width)] = re.compile(rb"(?:%s\r?\n|\r?\n)*+" % record)
    return p


_QUOTED_LINES: dict[int, re.Pattern] = {}
_FIELDS: dict[int, re.Pattern] = {}


def _quoted_line(delim: int) -> re.Pattern:
    """One line holding one whole record: fields are ``"…"`` (``""`` escapes a quote) or
    quote-free text, separated by the delimiter."""
    p = _QUOTED_LINES.get(delim)
    if p is None:
        d = re.escape(bytes((delim,)))
        field = rb'(?:"(?:[^"]|"")*"|[^"%s]*)' % d
        p = _QUOTED_LINES[delim] = re.compile(rb"%s(?:%s%s)*" % (field, d, field))
    return p


def _field(delim: int) -> re.Pattern:
    p = _FIELDS.get(delim)
    if p is None:
        d = re.escape(bytes((delim,)))
        p = _FIELDS[delim] = re.compile(rb'"((?:[^"]|"")*)"|([^"%s]*)' % d)
    return p


def _read_line(data: bytes, pos: int, hi: int) -> tuple[int, int, bool, int] | None:
    """Go's ``readLine`` at ``pos``: (content start, content end, ends with LF, next pos).
    The content excludes the line feed; a CRLF ending is normalised (the CR excluded too); a
    lone CR right before EOF is dropped. None at EOF."""
    if pos >= hi:
        return None
    nl = data.find(b"\n", pos, hi)
    if nl < 0:
        end = hi
        if data[end - 1] == 0x0D:
            end -= 1
        return pos, end, False, hi
    end = nl
    if end > pos and data[end - 1] == 0x0D:
        end -= 1
    return pos, end, True, nl + 1


def _read_record(data: bytes, delim: int, pos: int, hi: int) -> tuple[tuple[bytes, ...], int] | None:
    """Go's ``readRecord`` at ``pos``: (fields, position after the record), None at EOF.
    Raises :class:`_CSVError` on a parse error."""
    while True:  # skip empty lines
        line = _read_line(data, pos, hi)
        if line is None:
            return None
        a, e, has_nl, pos = line
        if a != e:
            break
    find = data.find
    if find(b'"', a, e) < 0:  # fast path: no quotes on the line
        return tuple(data[a:e].split(bytes((delim,)))), pos
    if _quoted_line(delim).fullmatch(data, a, e):
        # A whole, valid record on this line (the pattern accepts exactly what Go's reader
        # accepts on one line): take its fields without the byte-level state machine.
        field = _field(delim).match
        fields = []
        i = a
        while True:
            m = field(data, i, e)
            quoted = m.group(1)
            fields.append(quoted.replace(b'""', b'"') if quoted is not None else m.group(2))
            i = m.end()
            if i >= e:
                return tuple(fields), pos
            i += 1  # the delimiter
            if i == e:
                fields.append(b"")
                return tuple(fields), pos
    return _parse_fields(data, delim, a, e, has_nl, pos, hi)


def _parse_fields(
    data: bytes, delim: int, a: int, e: int, has_nl: bool, pos: int, hi: int
) -> tuple[tuple[bytes, ...], int]:
    """The byte-level state machine of Go's ``readRecord`` for the record whose first line is
    ``data[a:e]`` (``pos`` = the position after that line)."""
    find = data.find
    fields: list[bytes] = []
    i = a
    while True:
        if i >= e or data[i] != 0x22:  # unquoted field
            j = find(bytes((delim,)), i, e)
            stop = e if j < 0 else j
            if find(b'"', i, stop) >= 0:
                raise _CSVError("bare quote in non-quoted field")
            fields.append(data[i:stop])
            if j < 0:
                return tuple(fields), pos
            i = j + 1
            continue
        # quoted field
        i += 1
        buf = bytearray()
        while True:
            q = find(b'"', i, e)
            if q >= 0:
                buf += data[i:q]
                i = q + 1
                if i < e and data[i] == 0x22:  # "" -> "
                    buf.append(0x22)
                    i += 1
                elif i < e and data[i] == delim:
                    fields.append(bytes(buf))
                    i += 1
                    break
                elif i == e:
                    fields.append(bytes(buf))
                    return tuple(fields), pos
                else:
                    raise _CSVError('extraneous or missing " in quoted-field')
            elif i < e or has_nl:
                # the field goes on on the next line
                buf += data[i:e]
                if has_nl:
                    buf.append(0x0A)
                line = _read_line(data, pos, hi)
                if line is None:
                    raise _CSVError('extraneous or missing " in quoted-field')
                i, e, has_nl, pos = line
            else:
                raise _CSVError('extraneous or missing " in quoted-field')


def choose_delimiter(first_line: bytes) -> bytes:
    """TAB when the first line has more tabs than commas, else comma."""
    tabs = first_line.count(b"\t")
    return b"\t" if tabs > first_line.count(b",") else b","


def parse_delimited(
    data: bytes, *, max_fields: int | None = 128, min_records: int = 2
) -> Table | None:
    """A strict CSV/TSV table (header = first record), or None."""
    lo, hi = trim_span(data)
    delim = _delimiter_for(data, lo, hi)
    if delim is None:
        return None
    rows = read_csv(data, delim, lo, hi)
    if not rows or len(rows) < min_records:
        return None
    width = len(rows[0].fields)
    if width < 2 or (max_fields is not None and width > max_fields):
        return None
    return Table("tsv" if delim == b"\t" else "csv", delim, tuple(rows), lo, hi)


def parse_table(data: bytes) -> Table | None:
    """Markdown first, else CSV/TSV (spec §6.8)."""
    return parse_markdown(data) or parse_delimited(data)


def table_rows(data: bytes) -> int:
    """The number of rows ``parse_table(data)`` would return (0 when it fails), computed
    without building rows: what detection needs."""
    md = parse_markdown(data)
    if md is not None:
        return len(md.rows)
    lo, hi = trim_span(data)
    delim = _delimiter_for(data, lo, hi)
    if delim is None:
        return 0
    shape = csv_shape(data, delim, lo, hi)
    if shape is None:
        return 0
    records, width = shape
    if records < 2 or not 2 <= width <= 128:
        return 0
    return records


def _delimiter_for(data: bytes, lo: int, hi: int) -> bytes | None:
    if lo >= hi:
        return None
    nl = data.find(b"\n", lo, hi)
    first = data[lo : hi if nl < 0 else nl]
    delim = choose_delimiter(first)
    return delim if delim in first else None


# ---------------------------------------------------------------------------------------------
# Go encoding/csv Writer (used by the tabular compressor to re-encode CSV/TSV)


def _field_needs_quotes(field: bytes, delim: int) -> bool:
    """Go ``Writer.fieldNeedsQuotes``: non-empty and (``\\.``, or holds the delimiter, ``"``,
    CR or LF, or starts with a Go ``unicode.IsSpace`` rune)."""
    if not field:
        return False
    if field == b"\\.":
        return True
    if delim in field or b'"' in field or b"\r" in field or b"\n" in field:
        return True
    return _leading_end(field, 0, len(field)) > 0


def write_csv_record(fields: list[bytes] | tuple[bytes, ...], delimiter: bytes, crlf: bool = False) -> bytes:
    """One record as Go's ``csv.Writer.Write`` writes it (one-byte delimiter, ``UseCRLF`` =
    ``crlf``), WITHOUT the record terminator (``\\n``, or ``\\r\\n`` when ``crlf``). Inside a
    quoted field ``"`` doubles; with ``crlf`` a CR is dropped and LF becomes CRLF."""
    delim = delimiter[0]
    out = bytearray()
    for n, field in enumerate(fields):
        if n:
            out.append(delim)
        if not _field_needs_quotes(field, delim):
            out += field
            continue
        body = field.replace(b'"', b'""')
        if crlf:
            body = body.replace(b"\r", b"").replace(b"\n", b"\r\n")
        out += b'"' + body + b'"'
    return bytes(out)
