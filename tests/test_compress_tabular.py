"""``tabular`` (spec §6.8): every tabular vector of the general suite byte for byte (through
the compressor and the engine's token gate, and through the real CLI), idempotence, the Go
``encoding/csv`` reader/writer quirks (§9.5), and small hand-checked tables."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caveman_engine import elision, tables
from caveman_engine.compressors import tabular

from .conftest import CONFORMANCE, count_tokens, gate, general_cases

GENERAL = CONFORMANCE / "general"
E = "\u2026"


def gated(data: bytes) -> bytes:
    return gate(tabular.compress(data), data)


VECTORS = [pytest.param(c, id=c["id"]) for c in general_cases("tabular")]


def test_vectors_present() -> None:
    # 8 auto + 9 forced; two of them are transformed by the reference
    assert len(VECTORS) == 17
    assert sum(1 for p in VECTORS if p.values[0]["stdout"]) == 4


@pytest.mark.parametrize("case", VECTORS)
def test_general_vector(case: dict) -> None:
    data = (GENERAL / case["case"]).read_bytes()
    expected = (GENERAL / case["stdout"]).read_bytes() if case["stdout"] else data
    got = gated(data)
    assert got == expected
    report = json.loads(case["stderr"])
    assert count_tokens(got) == report["tokens_after"]
    # idempotence (§2.5): compressing the output again changes nothing
    assert gated(got) == got


@pytest.mark.parametrize("case", [p for p in VECTORS if p.values[0]["stdout"] and "ps.csv" in p.values[0]["case"]])
def test_vector_through_cli(cli, case: dict) -> None:
    data = (GENERAL / case["case"]).read_bytes()
    r = cli(*case["args"], input=data)
    assert r.returncode == 0
    assert r.stdout == (GENERAL / case["stdout"]).read_bytes()
    assert r.stderr.decode() == case["stderr"]
    handle = json.loads(r.stderr)["recovery_handle"]
    back = cli("retrieve", handle)
    assert back.returncode == 0 and back.stdout == data


# --------------------------------------------------------------------------- hand-checked


def test_markdown_table() -> None:
    rows = ["| id | status | host |", "|---|:---:|---|"]
    rows += [f"| {i} | ok | web |" for i in range(1, 15)]
    data = ("\n".join(rows) + "\n").encode()
    # header + separator, rows 1-3, rows 13-14 (first 3 / last 2, and id's min/max) kept;
    # 4..12 are near-duplicates: one marker row, other cells empty; separator re-encoded
    assert tabular.compress(data) == (
        "| id | status | host |\n"
        "| --- | :---: | --- |\n"
        "| 1 | ok | web |\n| 2 | ok | web |\n| 3 | ok | web |\n"
        f"| {E} 9 rows elided (caveman): all status=ok host=web; range id=4..12 {E} |  |  |\n"
        "| 13 | ok | web |\n| 14 | ok | web |\n"
    ).encode()


def _quirky_csv(eol: bytes, *, blank_lines: bool = False, trailing: bool = True) -> bytes:
    rows = [
        b"name,note,n",
        b'alpha,"x, y",1',
        b"beta,plain,2",
        b'gamma,"multi' + eol + b'line",3',
    ]
    rows += [b"item,plain,%d" % k for k in range(4, 14)]
    rows += [b'omega,"say ""hi""",20', b"zeta, lead,21"]
    sep = eol + eol if blank_lines else eol
    return sep.join(rows) + (eol if trailing else b"")


def test_csv_crlf_quotes_and_leading_space() -> None:
    out = tabular.compress(_quirky_csv(b"\r\n"))
    # kept: header, first 3, last 2 (n's min and max too), and the first "item" row, which
    # no kept row represents (needs 3 of {item, plain, #}); 5..13 collapse with a summary.
    # Go's writer re-quotes "x, y", doubles quotes, quotes the field Go read as " lead",
    # and with CRLF output writes the quoted field's newline as CRLF.
    assert out == (
        b"name,note,n\r\n"
        b'alpha,"x, y",1\r\n'
        b"beta,plain,2\r\n"
        b'gamma,"multi\r\nline",3\r\n'
        b"item,plain,4\r\n"
        + f"{E} 9 rows elided (caveman): all name=item note=plain; range n=5..13 {E},,\r\n".encode()
        + b'omega,"say ""hi""",20\r\n'
        b'zeta," lead",21\r\n'
    )
    assert tabular.compress(out) is None  # already holds "rows elided (caveman)"


def test_csv_lf_blank_lines_no_trailing_newline() -> None:
    out = tabular.compress(_quirky_csv(b"\n", blank_lines=True, trailing=False))
    # blank lines are skipped by Go's reader (and not re-emitted); LF output, no final newline
    assert out == (
        b'name,note,n\nalpha,"x, y",1\nbeta,plain,2\ngamma,"multi\nline",3\nitem,plain,4\n'
        + f"{E} 9 rows elided (caveman): all name=item note=plain; range n=5..13 {E},,\n".encode()
        + b'omega,"say ""hi""",20\nzeta," lead",21'
    )


# > 40 bytes: never described, but makes the rows long enough for a full summary, and shared
# words let keepNonRedundant see the rows as near-duplicates despite their distinct names
DESC = b"shared runtime library for the many test programs here"


def test_tsv_marker_and_commas_unquoted() -> None:
    rows = [b"pkg\tdeps\tsize\tdesc"]
    rows += [b"lib%s\ta,b\t%d\t%s" % (bytes([97 + i]), 10 + i, DESC) for i in range(14)]
    out = tabular.compress(b"\n".join(rows) + b"\n")
    lines = out.split(b"\n")
    assert lines[:4] == rows[:4]
    # the marker cell carries an enumeration containing a comma: no quoting for TSV
    assert lines[4] == (
        f"{E} 9 rows elided (caveman): all deps=a,b; pkg: 9 distinct, libd..libl; "
        f"range size=13..21 {E}\t\t\t"
    ).encode()
    assert lines[5:] == rows[-2:] + [b""]


def test_csv_marker_with_comma_is_quoted() -> None:
    rows = [b"pkg,deps,size,desc"]
    rows += [b'lib%s,"a,b",%d,%s' % (bytes([97 + i]), 10 + i, DESC) for i in range(14)]
    out = tabular.compress(b"\n".join(rows) + b"\n")
    marker = (
        f"{E} 9 rows elided (caveman): all deps=a,b; pkg: 9 distinct, libd..libl; "
        f"range size=13..21 {E}"
    )
    assert out.split(b"\n")[4] == b'"' + marker.encode() + b'",,,'


def test_flagged_and_extreme_rows_survive() -> None:
    msg = b"GET /v1/items served from the shared cache in time"  # > 40 bytes: not described
    rows = [b"svc,latency_ms,msg"]
    rows += [b"api,%d,%s" % (10 + i % 3, msg) for i in range(20)]
    rows[8] = b"api,11,request DENIED by policy"  # flagged
    rows[12] = b"api,999," + msg  # max of the numeric column
    rows[15] = b"api,2," + msg  # min
    out = tabular.compress(b"\n".join(rows) + b"\n")

    def m(n: int) -> bytes:
        return f"{E} {n} rows elided (caveman): all svc=api; range latency_ms=10..12 {E},,".encode()

    # runs 4-7, 9-11 and 16-18 collapse; 13-14 (2 rows) stay verbatim: their marker would
    # cost more than half of the bytes it replaces
    assert out.split(b"\n") == [
        *rows[0:4], m(4), rows[8], m(3), *rows[12:16], m(3), rows[19], rows[20], b""
    ]


def test_contract_note_row() -> None:
    rows = [b"id,host,method,path,status"]
    rows += [b"%d,web-a,GET,/api/v1/items/list,200" % i for i in range(300)]
    out = tabular.compress(b"\n".join(rows) + b"\n")
    lines = out.split(b"\n")
    assert lines[-1] == b""
    # the note holds a comma ("cannot, one broad"): Go's writer quotes it
    assert b"," in elision.contract_note("rows").encode()
    assert lines[-2] == b'"' + elision.contract_note("rows").encode() + b'",,,,'
    assert lines[4].startswith(f"{E} 295 rows elided (caveman): all host=web-a".encode())
    assert len(lines) == 1 + 3 + 1 + 2 + 1 + 1


def test_no_note_below_4096_elided_bytes() -> None:
    rows = [b"id,host"] + [b"%d,web-a" % i for i in range(100)]
    out = tabular.compress(b"\n".join(rows))
    assert b"caveman: elided rows" not in out
    assert out.split(b"\n")[-1] == b"99,web-a"


def test_row_thresholds() -> None:
    def table(n_data: int) -> bytes:
        rows = [b"id,host,desc"] + [b"%d,web-a,%s" % (i, DESC) for i in range(n_data)]
        return b"\n".join(rows) + b"\n"

    assert tabular.compress(table(10)) is None  # 11 rows
    assert tabular.compress(table(11)) is not None  # 12 rows
    md = [b"| id | host |", b"| --- | --- |"] + [b"| %d | %s |" % (i, DESC) for i in range(9)]
    assert tabular.compress(b"\n".join(md)) is None  # 11 rows with the separator
    md.append(b"| 9 | %s |" % DESC)
    assert tabular.compress(b"\n".join(md)) is not None


def test_spec_detection_example_is_too_short() -> None:
    # spec §3.7: detected as tabular (≥ 8 rows) but 10 rows are below the compressor's 12
    data = (
        b"name,region,revenue,status\nalpha,eu,120,ok\nbravo,us,140,ok\ncharlie,apac,90,ok\n"
        b"delta,eu,180,ok\necho,us,160,ok\nfoxtrot,apac,110,ok\ngolf,eu,200,ok\nhotel,us,170,ok\n"
        b"india,apac,130,ok\n"
    )
    assert tables.parse_table(data) is not None
    assert tabular.compress(data) is None


@pytest.mark.parametrize(
    "bad",
    [
        b'a,b"c,1',  # bare quote in an unquoted field
        b'a,"b"c,1',  # text after a closing quote
        b'a,"unterminated,1',
        b"a,b",  # wrong field count
    ],
)
def test_go_csv_errors_decline(bad: bytes) -> None:
    rows = [b"x,y,z"] + [b"host,web,%d" % i for i in range(20)]
    rows[10] = bad
    assert tabular.compress(b"\n".join(rows) + b"\n") is None


def test_declines() -> None:
    assert tabular.compress(b"") is None
    assert tabular.compress(b"just some prose\nwith lines\n" * 10) is None
    rows = [b"id,host"] + [b"%d,web-a" % i for i in range(40)]
    rows[20] = f"{E} 3 rows elided (caveman) {E},".encode()
    assert tabular.compress(b"\n".join(rows)) is None
    # every row distinct: keepNonRedundant keeps the whole table
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
             "india", "juliet", "kilo", "lima", "mike", "november"]
    rows = [b"a,b"] + [f"{w},{w}x".encode() for w in words]
    assert tabular.compress(b"\n".join(rows)) is None


def test_not_smaller_declines() -> None:
    # Go reads " w" with its leading space and the writer must quote it: re-encoding grows
    # every kept row by 2 bytes per field, more than one short marker saves.
    def word(i: int) -> str:
        return "".join(chr(97 + (i // 26**k) % 26) for k in range(3))

    def table(lead: str) -> bytes:
        rows = [",".join(f"{lead}c{j}" for j in range(20))]
        for i in range(16):
            w = word(i * 7 + 3) if not 6 <= i < 11 else "same"
            rows.append(",".join(f"{lead}{w}{j}" for j in range(20)))
        return "\n".join(rows).encode()

    assert tabular.compress(table("")) is not None
    assert tabular.compress(table(" ")) is None


# --------------------------------------------------------------------------- the CSV writer


@pytest.mark.parametrize(
    ("fields", "delim", "crlf", "expected"),
    [
        ([b"a", b"b"], b",", False, b"a,b"),
        ([b"", b"x", b""], b",", False, b",x,"),
        ([b"a,b", b"c"], b",", False, b'"a,b",c'),
        ([b'say "hi"'], b",", False, b'"say ""hi"""'),
        ([b" lead", b"trail "], b",", False, b'" lead",trail '),
        ([b"\tx", b"\xc2\xa0x", b"\xe3\x80\x80x"], b",", False, b'"\tx","\xc2\xa0x","\xe3\x80\x80x"'),
        ([b"\\.", b"\\.x"], b",", False, b'"\\.",\\.x'),
        ([b"a\nb"], b",", False, b'"a\nb"'),
        ([b"a\nb"], b",", True, b'"a\r\nb"'),
        ([b"a\rb"], b",", False, b'"a\rb"'),
        ([b"a\rb"], b",", True, b'"ab"'),
        ([b"a,b", b"c"], b"\t", False, b"a,b\tc"),
        ([b"a\tb", b"c"], b"\t", False, b'"a\tb"\tc'),
        ([b"\xff\xfe", b"x"], b",", False, b"\xff\xfe,x"),
    ],
)
def test_write_csv_record(fields, delim, crlf, expected) -> None:
    assert tables.write_csv_record(fields, delim, crlf) == expected


_FIELD = st.text(alphabet=st.sampled_from(list('ab ,"\t\n\u00a0é')), max_size=6)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(_FIELD, min_size=2, max_size=4), min_size=1, max_size=5), st.booleans())
def test_writer_reader_round_trip(records, crlf) -> None:
    width = len(records[0])
    records = [(r + [""] * width)[:width] for r in records]
    eol = b"\r\n" if crlf else b"\n"
    data = b"".join(
        tables.write_csv_record([f.encode() for f in r], b",", crlf) + eol for r in records
    )
    rows = tables.read_csv(data, b",")
    assert rows is not None
    assert [[f.decode() for f in row.fields] for row in rows] == records


def test_invalid_utf8_cells_survive_byte_exact() -> None:
    rows = [b"id,name,desc"] + [b"%d,n\xff%d,%s" % (i, i % 2, DESC) for i in range(14)]
    out = tabular.compress(b"\n".join(rows) + b"\n")
    lines = out.split(b"\n")
    assert lines[:4] == rows[:4] and lines[5:7] == rows[-2:]
    # the summary quotes the raw bytes back: Go strings are bytes
    assert lines[4] == f"{E} 9 rows elided (caveman): ".encode() + b"name: n\xff1\xc3\x975 n\xff0\xc3\x974; range id=3..11 " + E.encode() + b",,"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([b"a", b",", b'"', b"\n", b"\r\n", b"\t", b"1", b"|", b" ", b"-", b"\xff", b"ERROR", b"\xe2\x80\xa6"]), max_size=80))
def test_never_raises(parts) -> None:
    data = b"id,x\n" + b"".join(parts) * 3
    out = tabular.compress(data)
    assert out is None or len(out) < len(data)
