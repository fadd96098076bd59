"""Detection (engine_cli_spec §3): every `detect` conformance vector, the spec's §3.7 example
tables, and Go-semantics edge cases (whitespace set, RE2 classes, case folding, runes vs
bytes, invalid UTF-8, BOM, CR handling)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from caveman_engine import configfmt
from caveman_engine.detect import classify, detect

CONFORMANCE = Path(__file__).resolve().parent / "conformance"


def _detect_cases():
    cases = []
    for suite in ("general", "cli"):
        d = CONFORMANCE / suite
        for line in (d / "cases.jsonl").read_text().splitlines():
            c = json.loads(line)
            if c["args"] == ["detect"]:
                cases.append(pytest.param(d / c["case"], d / c["stdout"], id=f"{suite}/{c['case']}"))
    return cases


DETECT_CASES = _detect_cases()


def test_vector_count():
    assert len(DETECT_CASES) == 129  # 126 general + 3 cli


@pytest.mark.parametrize("case,expected", DETECT_CASES)
def test_detect_vector(case: Path, expected: Path):
    assert (detect(case.read_bytes()) + "\n").encode() == expected.read_bytes()


# ---------------------------------------------------------------------------------------------
# spec §3.7, transcribed

JSON60 = (
    '{\n  "nodes": [\n'
    + ",\n".join(
        f'    {{\n      "id": {i},\n      "name": "node-{i}",\n      "region": "eu",\n'
        f'      "active": true\n    }}'
        for i in range(60)
    )
    + "\n  ]\n}\n"
)
GO_SRC = (
    "package main\n\nimport \"fmt\"\n\nfunc alpha() int { return 1 }\n"
    "func beta() int { return 2 }\nfunc gamma() int { return 3 }\n\n"
    "func main() {\n\tfmt.Println(alpha(), beta(), gamma())\n}\n"
)


def gutter(text: str) -> str:
    lines = text.split("\n")
    trailing = lines[-1] == ""
    if trailing:
        lines.pop()
    return "\n".join(f"{i}\t{line}" for i, line in enumerate(lines, 1)) + ("\n" if trailing else "")


SPEC_EXAMPLES = [
    ('{"a":1,"b":[1,2,3]}', "json"),
    ("[1,2,3,4]", "json"),
    (
        "diff --git a/a.go b/a.go\n--- a/a.go\n+++ b/a.go\n@@ -1,5 +1,5 @@\n context\n-old\n"
        "+new\n context\n",
        "diff",
    ),
    ('package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Println("hi")\n}\n', "code"),
    (
        "import os\n\ndef run(x):\n    return x + 1\n\nclass A:\n    def m(self):\n"
        "        return 2\n",
        "code",
    ),
    (
        "2026-01-01T00:00:00Z [INFO] start\n[INFO] step\n[WARN] slow\n[ERROR] boom\n[INFO] end\n",
        "log",
    ),
    (
        "src/a.go:10:match\nsrc/b.go:11:match\nsrc/c.go:12:match\nsrc/d.go:13:match\n"
        "src/e.go:14:match\nsrc/f.go:15:match\n",
        "search-result",
    ),
    (
        "name,region,revenue,status\nalpha,eu,120,ok\nbravo,us,140,ok\ncharlie,apac,90,ok\n"
        "delta,eu,180,ok\necho,us,160,ok\nfoxtrot,apac,110,ok\ngolf,eu,200,ok\nhotel,us,170,ok\n"
        "india,apac,130,ok\n",
        "tabular",
    ),
    (
        "| name | region | revenue |\n| --- | --- | ---: |\n| alpha | eu | 120 |\n"
        "| bravo | us | 140 |\n| charlie | apac | 90 |\n| delta | eu | 180 |\n"
        "| echo | us | 160 |\n| foxtrot | apac | 110 |\n",
        "tabular",
    ),
    (
        "service:\n  name: api\n  port: 8080\n  database:\n    host: db.internal\n    port: 5432\n"
        "    pool: 20\n  cache:\n    host: cache.internal\n    ttl: 300\n  limits:\n"
        "    requests: 1000\n    burst: 50\n  telemetry:\n    enabled: true\n"
        "    endpoint: http://otel.internal\n",
        "config",
    ),
    (
        '[service]\nname = "api"\nport = 8080\n[database]\nhost = "db.internal"\nport = 5432\n'
        'pool = 20\n[cache]\nhost = "cache.internal"\nttl = 300\n[limits]\nrequests = 1000\n'
        'burst = 50\n[telemetry]\nenabled = true\nendpoint = "http://otel.internal"\n',
        "config",
    ),
    ("The quick brown fox jumps over the lazy dog. Nothing structured here at all.", "text"),
    ("", "text"),
    # detect_html_test.go
    (
        "<!doctype html><html><body><article><p>real article prose with enough text here</p>"
        "</article></body></html>",
        "html",
    ),
    (
        "import React from 'react'\n\nexport function Card({ title, items }) {\n  return (\n"
        '    <div className="card">\n      <h2>{title}</h2>\n'
        "      <ul>{items.map((it) => (<li key={it.id}>{it.name}</li>))}</ul>\n    </div>\n"
        "  )\n}\n",
        "code",
    ),
    (
        'package render\n\nfunc wrap(s string) string {\n\treturn "<div><p>" + s + "</p></div>"\n'
        '}\n\nfunc tag() string {\n\treturn "<span>x</span>"\n}\n',
        "code",
    ),
    (
        "2026-01-01T00:00:00Z [INFO] handler return 200\n2026-01-01T00:00:01Z [WARN] class loader "
        "slow\n2026-01-01T00:00:02Z [ERROR] func dispatch failed\n2026-01-01T00:00:03Z [INFO] "
        "return to pool\n",
        "log",
    ),
    # terminal_test.go
    ("\x1b[32mPASS\x1b[0m all green\nbuilding...\ndone\n", "terminal"),
    ("fetch 10%\rfetch 40%\rfetch 80%\rfetch done\n", "terminal"),
    ("The quick brown fox jumps over the lazy dog.", "text"),
    ("line one\r\nline two\r\nline three\r\n", "text"),
    # other tests
    (JSON60, "json"),
    (gutter(JSON60), "json"),
    (gutter(GO_SRC), "code"),
    (
        '<file name="main.go">\npackage main\n\nfunc alpha() int { return 1 }\n'
        "func beta() int { return 2 }\nfunc gamma() int { return 3 }\n</file>",
        "code",
    ),
    ('<file name="main.go">\n' + gutter(GO_SRC) + "</file>\n", "code"),
    (gutter('<file name="main.go">\n' + GO_SRC + "</file>\n"), "code"),
    # derived
    ('{"results":[1,2,3,  <-- not json', "text"),
    ("42", "text"),
    ('"x"', "text"),
    ("[INFO] a\n[INFO] b\n[INFO] c\n", "log"),
    ("[INFO] a\n[INFO] b\n[INFO] c", "text"),
    ("<div><p>a</p><p>b</p><p>c</p></div>", "html"),
]


@pytest.mark.parametrize("text,expected", SPEC_EXAMPLES, ids=range(len(SPEC_EXAMPLES)))
def test_spec_examples(text: str, expected: str):
    assert detect(text.encode()) == expected


def test_concatenated_json_is_not_json():
    assert detect(b'{"a":1} {"b":2}') != "json"


def test_a11y_tree_is_json():
    ax = json.dumps(
        [
            {"nodeId": str(i), "role": {"type": "role", "value": "button"},
             "name": {"type": "computedString", "value": f"b{i}"}, "backendDOMNodeId": i}
            for i in range(6)
        ]
    )
    assert detect(ax.encode()) == "json"


# ---------------------------------------------------------------------------------------------
# Go semantics


@pytest.mark.parametrize(
    "data,expected",
    [
        # strings.TrimSpace does not strip U+001C..U+001F (Python's str.strip does).
        (b'\x1c{"a":1}\x1c', "text"),
        (b'\x1f[1,2]', "text"),
        # ...but it strips U+0085, U+00A0, U+3000, \v.
        (b'\xc2\xa0\xe3\x80\x80\x0b{"a":1}\xc2\x85\xe2\x80\xa9', "json"),
        (b"\xe3\x80\x80 \xc2\xa0\n\t\x0b", "text"),
        # U+FEFF is not whitespace: a BOM in front of JSON is not JSON (json.Valid).
        (b'\xef\xbb\xbf{"a":1}', "text"),
        (b"\xef\xbb\xbf", "text"),
        # JSON validity: no NaN, no trailing comma, one value; invalid UTF-8 inside strings ok.
        (b'{"a":NaN}', "text"),
        (b"[1,2,]", "text"),
        (b'{"a":"caf\xe9"}', "json"),
        (b'{"a":"\x01"}', "text"),
        # bare carriage returns: CRLF pairs do not count.
        (b"a\rb\rc\r\n", "text"),
        (b"a\rb\rc\rd", "terminal"),
        (b"a\r\nb\r\nc\r\nd\r\ne\r\r\r\n", "text"),  # 2 bare CRs
        (b"a\r\nb\r\nc\r\nd\r\ne\r\r\r\r\n", "terminal"),
        (b"x \x1b[?25l y", "terminal"),
    ],
)
def test_go_semantics(data: bytes, expected: str):
    assert detect(data) == expected


def test_vertical_tab_is_not_re2_space():
    # "^\s*\[[A-Z]+\]": RE2's \s is [\t\n\f\r ], so \v before the bracket breaks the match.
    assert detect(b"\f[NOTICE] a\n\f[NOTICE] b\n\f[NOTICE] c\n") == "log"
    assert detect(b"\v[NOTICE] a\n\v[NOTICE] b\n\v[NOTICE] c\n") == "text"
    # "https?://\S+": \v is \S in RE2.
    assert detect(b"http://\v\n" * 6) == "search-result"
    assert detect(b"http:// \n" * 6) == "text"


def test_case_folding_is_go_simple_folding():
    # (?i)[A-Z] matches U+212A KELVIN SIGN and U+017F LONG S, not U+0130 / U+0131.
    assert detect("[\u212a] a\n[\u212a] b\n[\u212a] c\n".encode()) == "log"
    assert detect("[\u017f] a\n[\u017f] b\n[\u017f] c\n".encode()) == "log"
    assert detect("[\u0130] a\n[\u0130] b\n[\u0130] c\n".encode()) == "text"
    assert detect("[\u0131] a\n[\u0131] b\n[\u0131] c\n".encode()) == "text"
    # (?i) makes the "T" of the timestamp separator match "t".
    assert detect(b"2026-01-01t10:00:00 a\n" * 3) == "log"


def test_html_lowercase_maps_dotted_capital_i_to_i():
    # strings.ToLower("İ") == "i" (Python: "i̇"), so "<artİcle" is the container "<article".
    doc = "<art\u0130cle><span>a</span><span>b</span><span>c</span></art\u0130cle>"
    assert detect(doc.encode()) == "html"
    assert detect(doc.replace("\u0130", "x").encode()) == "text"
    assert detect(b"<HTML><head></head></HTML>") == "html"


def test_search_result_counts_runes_not_bytes():
    def lines(middle: bytes) -> bytes:
        return (b"a" + middle + b":1:x\n") * 6

    assert detect(lines("é".encode() * 240)) == "search-result"  # 240 runes, 480 bytes
    assert detect(lines("é".encode() * 241)) == "text"
    assert detect(lines(b"\xe2\x80" * 120)) == "search-result"  # invalid: one rune per byte
    assert detect(lines(b"\xe2\x80" * 120 + b"\xe2")) == "text"
    assert detect(lines(b"\xff" * 240)) == "search-result"


def test_invalid_utf8_is_not_yaml():
    good = b"".join(b"key%d: value %d\n" % (i, i) for i in range(14))
    assert detect(good) == "config"
    assert detect(good.replace(b"value 3", b"valu\xe9 3")) == "text"


def test_line_counts_include_trailing_empty_element():
    # log: 3 matches, 4 elements with the trailing newline, 3 without.
    assert detect(b"[INFO] a\n[INFO] b\n[INFO] c\n") == "log"
    # 3 matches out of 7 elements: 6 < 7.
    assert detect(b"[INFO] a\n[INFO] b\n[INFO] c\nx\ny\nz\n") == "text"
    # search: 6 elements needed; 5 lines + trailing newline qualify.
    assert detect(b"a.go:1:x\nb.go:2:x\nc.go:3:x\nd.go:4:x\ne.go:5:x\n") == "search-result"
    assert detect(b"a.go:1:x\nb.go:2:x\nc.go:3:x\nd.go:4:x\ne.go:5:x") == "text"


def test_code_symbols_anchor_only_at_input_start():
    # "^\s*#include" without a multiline flag: only at the very start (after whitespace).
    body = b"x\n#include <a>\nreturn const let\n"
    assert detect(body) == "text"
    assert detect(b"\n  #include <a>\nreturn const let\n") == "code"
    assert detect(b"from a import b\nreturn const let\n") == "code"
    assert detect(b"x\nfrom a import b\nreturn const let\n") == "text"


def test_keywords_need_ascii_word_boundaries():
    assert detect(b"functions returned constants {}") == "text"
    assert detect(b"func return const {}") == "code"
    # a multi-byte letter is a non-word rune for RE2's \b
    assert detect("éfuncé éreturné éconsté {}".encode()) == "code"


def test_diff_needs_marker_and_four_lines():
    assert detect(b"--- a\n+++ b\n-x\n+y\n") == "text"  # no "\n--- " before the first line
    assert detect(b"x\n--- a\n+++ b\n-x\n+y\n") == "diff"
    assert detect(b"x\n--- a\n+++ b\n-x\n") == "text"  # only 3 matching lines
    # [+-][^+-] may consume the newline: "-\n" counts, and the next line still starts a line.
    assert detect(b"x\n@@ -1 +1 @@\n-\n+a\n+b\n") == "diff"


def test_log_beats_code():
    data = b"[INFO] return func const {\n[INFO] b\n[INFO] c\n[INFO] d\n"
    assert detect(data) == "log"


def test_tabular_thresholds():
    rows = [b"h1,h2"] + [b"%d,v" % i for i in range(7)]
    assert detect(b"\n".join(rows) + b"\n") == "tabular"  # 8 records incl. header
    assert detect(b"\n".join(rows[:-1]) + b"\n") == "text"
    # bare quote in an unquoted field is an error in Go's reader
    bad = list(rows)
    bad[3] = b'2,v"x'
    assert detect(b"\n".join(bad)) == "text"
    # quoted fields with embedded delimiters, quotes and newlines are fine; blank lines skipped
    ok = list(rows)
    ok[3] = b'"2,\n""x""",v\n\n'
    assert detect(b"\n".join(ok)) == "tabular"


def test_config_thresholds():
    toml = b"[a]\nx = 1\ny = 2\n[b]\nz = 3\nw = 4\n"
    assert configfmt.classify(toml) == "toml"
    assert detect(toml) == "text"  # fewer than 12 lines
    longer = toml + b"".join(b"k%d = %d\n" % (i, i) for i in range(6))
    assert detect(longer) == "config"
    assert detect(longer + b"this is prose\n") == "text"
    assert detect(longer + b'doc = """x"""\n') == "text"


def test_yaml_block_scalar_and_duplicates_are_not_config():
    base = b"".join(b"key%d: value %d\n" % (i, i) for i in range(14))
    assert detect(base) == "config"
    assert detect(base + b"text: |\n  hello\n") == "text"
    assert detect(base + b"key1: again\n") == "text"  # yaml.v3 rejects duplicate keys
    assert detect(b"--- \n" + base) == "config"
    assert detect(base + b"bad: [unclosed\n") == "text"


def test_whitespace_only_and_wrapped_whitespace():
    assert detect(b" ") == "text"
    assert detect(b"\n\n\n") == "text"
    assert classify(b"") == "text"


def test_large_input_is_linear():
    import time

    line = b"2026-01-01T00:00:00Z worker=%d handled request path=/api/v1/items status=200\n"
    data = b"".join(line % i for i in range(150_000))  # ~12 MB
    t0 = time.perf_counter()
    assert detect(data) == "log"
    assert time.perf_counter() - t0 < 5.0


def test_detect_does_not_import_heavy_modules():
    code = (
        "import sys; from caveman_engine.detect import detect; "
        "detect(b'hello world\\n'); detect(b'{\"a\":1}'); "
        "print(sorted(m for m in ('tiktoken','yaml','sqlite3','click') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------------------------------------
# through the real console script


CLI_SAMPLES = [
    ("general", "edge__cat-n-listing-in-file-tag.txt"),
    ("general", "json__package-lock.json"),
    ("general", "terminal__git-clone-progress.ansi"),
    ("general", "tabular__sqlite-markdown-sections.md"),
    ("general", "config__cpan-kwalify-distroprefs.yml"),
    ("general", "edge__whitespace-only.txt"),
    ("cli", "plain.txt"),
]


@pytest.mark.parametrize("suite,name", CLI_SAMPLES)
def test_cli_detect(cli, suite: str, name: str):
    data = (CONFORMANCE / suite / f"{name}.in").read_bytes()
    expected = (CONFORMANCE / suite / f"{name}.detect.out").read_bytes()
    run = cli("detect", input=data)
    assert (run.returncode, run.stdout, run.stderr) == (0, expected, b"")
    # the reference ignores extra arguments; here a word is a FILE (docs/cli.md)
    run = cli("detect", "no-such-file", input=data)
    assert (run.returncode, run.stdout) == (1, b"")
    assert run.stderr == b"caveman-engine detect: cannot read no-such-file: No such file or directory\n"


def test_cli_detect_empty(cli):
    run = cli("detect", input=b"")
    assert (run.returncode, run.stdout) == (0, b"text\n")


# ---------------------------------------------------------------------------------------------
# the strict table parser behind step 6 (caveman_engine.tables), Go encoding/csv rules

from caveman_engine import tables  # noqa: E402


def _cells(t):
    return [r.cells for r in t.rows]


def test_csv_go_reader_rules():
    t = tables.parse_delimited(b'h1,h2\r\n"a""b",c\r\n\r\n\n"x\r\ny",z\rw\n"",\n')
    assert t.kind == "csv" and t.delimiter == b","
    assert _cells(t) == [("h1", "h2"), ('a"b', "c"), ("x\ny", "z\rw"), ("", "")]
    for bad in (
        b'h1,h2\na,"b"c\n',  # text after a closing quote
        b'h1,h2\na,b"c\n',  # bare quote in an unquoted field
        b'h1,h2\na,"b\n',  # unterminated quote
        b"h1,h2\na,b,c\n",  # field count differs from the first record
        b"h1,h2\n \n",  # a whitespace-only line is a one-field record, not a blank line
    ):
        assert tables.parse_delimited(bad) is None, bad
    # a lone "\r" right before EOF is dropped; a quoted field may end the input
    rows = tables.read_csv(b'a,"b"\r', b",")
    assert [r.cells for r in rows] == [("a", "b")]
    assert [r.cells for r in tables.read_csv(b"a,b\r", b",")] == [("a", "b")]


def test_csv_trailing_empty_lines_are_outside_the_last_span():
    rows = tables.read_csv(b"a,b\nc,d\n\r\n\n", b",")
    assert [(r.start, r.end) for r in rows] == [(0, 4), (4, 8)]


def test_csv_row_spans_partition_the_input():
    data = b'  \nh1\th2\n\n1\t"x\n y"\r\n2\tz\n\n'
    t = tables.parse_delimited(data)
    assert t.kind == "tsv" and (t.start, t.end) == (3, len(data) - 2)
    assert [(r.start, r.end) for r in t.rows] == [(3, 9), (9, 20), (20, 23)]
    assert b"".join(data[r.start : r.end] for r in t.rows) == data[t.start : t.end]
    assert data[t.rows[1].start : t.rows[1].end] == b'\n1\t"x\n y"\r\n'  # includes the skipped blank line


def test_delimiter_choice_and_field_limits():
    assert tables.parse_delimited(b"a\tb,c\nd\te,f\n").kind == "csv"  # tabs must outnumber commas
    assert tables.parse_delimited(b"a\tb\tc,d\ne\tf\tg,h\n").kind == "tsv"
    assert tables.parse_delimited(b"abc\ndef\n") is None  # first line lacks the delimiter
    assert tables.parse_delimited(b"a,b\n") is None  # one record
    wide = b",".join(b"c%d" % i for i in range(129))
    assert tables.parse_delimited(wide + b"\n" + wide) is None
    assert tables.parse_delimited(wide + b"\n" + wide, max_fields=None).width == 129


def test_markdown_table():
    data = b"| a | b |\n|:---|---:|\n| 1 |  x y |\n\n"
    t = tables.parse_table(data)
    assert t.kind == "markdown"
    assert _cells(t) == [("a", "b"), (":---", "---:"), ("1", "x y")]
    assert [r.cells for r in t.body_rows] == [("1", "x y")]
    assert [(r.start, r.end) for r in t.rows] == [(0, 10), (10, 22), (22, 34)]
    for bad in (
        b"| a | b |\n| -- | --- |\n| 1 | 2 |",  # separator cells need three dashes
        b"| a | b |\n| --- | --- |\n| 1 | 2 | 3 |",
        b"| a |\n| --- |\n| 1 |",  # header needs two cells
        b"| a | b |\n| --- | --- |",  # three lines minimum
        b"| a | b |\n| --- | --- |\n\n| 1 | 2 |",  # a blank line inside
    ):
        assert tables.parse_markdown(bad) is None, bad


def test_trim_span_matches_go_trimspace():
    import random

    from caveman_engine import gotext

    rng = random.Random(7)
    alphabet = [" ", "\t", "\n", "\v", "\x85", "\xa0", "\u3000", "\u2009", "\x1c", "a", "é", "\ufeff"]
    for _ in range(300):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 12)))
        data = s.encode()
        assert tables.trim(data) == gotext.trim(s).encode(), s
    # long trailing runs of multi-byte spaces (window growth)
    data = b"x" + "\u3000".encode() * 1000 + b" \n"
    assert tables.trim(data) == b"x"
    assert tables.trim(b"\xff\xe3\x80\x80") == b"\xff"


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_CSV_BYTES = st.lists(
    st.sampled_from([b"a", b"b", b",", b"\t", b'"', b"\r", b"\n", b" ", b"|", b"-", b"\xc3\xa9"]),
    max_size=60,
).map(b"".join)


@settings(max_examples=200, deadline=None)
@given(_CSV_BYTES)
def test_fast_row_count_agrees_with_full_parser(data: bytes):
    table = tables.parse_table(data)
    assert tables.table_rows(data) == (len(table.rows) if table else 0)
    for delim in (b",", b"\t"):
        rows = tables.read_csv(data, delim)
        shape = tables.csv_shape(data, delim)
        if rows is None:
            assert shape is None
        else:
            assert shape == (len(rows), len(rows[0].fields) if rows else 0)
            # spans tile the input; only empty lines may follow the last record
            if rows:
                assert rows[0].start == 0
                assert all(a.end == b.start for a, b in zip(rows, rows[1:]))
                assert set(data[rows[-1].end :]) <= {0x0D, 0x0A}


_LINE_BYTES = st.lists(
    st.sampled_from([b"a", b",", b"\t", b'"', b'""', b"\r", b" ", b"\xff"]), min_size=1, max_size=24
).map(b"".join)


@settings(max_examples=200, deadline=None)
@given(_LINE_BYTES, st.sampled_from([b",", b"\t"]), st.booleans())
def test_single_line_fast_path_matches_state_machine(line: bytes, delim: bytes, nl: bool):
    data = line + (b"\n" if nl else b"") + b'x"\n'  # a follow-up line for multi-line fields
    d = delim[0]
    try:
        fast = tables._read_record(data, d, 0, len(data))
    except tables._CSVError:
        fast = "error"
    first = tables._read_line(data, 0, len(data))
    if first[0] == first[1]:
        return  # an empty first line is skipped before either path runs
    try:
        slow = tables._parse_fields(data, d, *first, len(data))
    except tables._CSVError:
        slow = "error"
    assert fast == slow
