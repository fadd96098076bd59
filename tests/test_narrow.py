"""Query-narrowed retrieval (engine_cli_spec §1.5.1, ccr_spec §9.3 and the §12 inventory of
retrieve_query_test.go / engine_test.go)."""

from __future__ import annotations

import json
import math

import pytest

from caveman_engine import narrow as N

M = "\u2026 [caveman: non-adjacent] \u2026"
MB = M.encode()
ARRAY_JSON = (
    b'{"results":[{"id":1},{"id":2},{"id":3},{"id":4},{"id":5},{"id":6},{"id":7},{"id":8},'
    b'{"id":9},{"id":10},{"id":11},{"id":12}],"error":null}'
)


def blocks(view: bytes) -> list[str]:
    """Non-marker blocks of a view."""
    return [b for b in view.decode().split("\n\n") if b != M]


def test_marker_is_31_bytes():
    assert len(MB) == 31 and N.MARKER == M


# --------------------------------------------------------------------------- worked examples


def test_array_json_is_137_bytes():
    assert len(ARRAY_JSON) == 137


def test_example_29_query_11_exact_view():
    out = N.narrow(ARRAY_JSON, "11")
    assert out == MB + b'\n\n{\n  "id": 11\n}\n\n' + MB
    assert len(out) == 80


def test_example_29_query_id_returns_full_original():
    # every record matches: the 247-byte view is not shorter than the 137-byte original
    assert len(N.view(ARRAY_JSON, "id")) == 247
    assert N.narrow(ARRAY_JSON, "id") == ARRAY_JSON


def test_postgres_autovacuum_exact_view():
    original = (
        b'{"model":"m","messages":[{"role":"user","content":"Section about kubernetes pod '
        b'scheduling and node affinity."},{"role":"user","content":"Section about postgres vacuum '
        b'tuning and autovacuum thresholds."},{"role":"user","content":"Section about redis '
        b'eviction policies and maxmemory."}]}'
    )
    out = N.narrow(original, "postgres autovacuum tuning")
    assert out == (
        MB + b"\n\n{\n"
        b'  "content": "Section about postgres vacuum tuning and autovacuum thresholds.",\n'
        b'  "role": "user"\n}\n\n' + MB
    )
    assert b"kubernetes" not in out and b"redis eviction" not in out
    assert len(out) < len(original)


def _log40(hit_lines=(2, 30)):
    lines = []
    for i in range(40):
        tail = "delivery failed for endpoint alpha" if i in hit_lines else "heartbeat ok"
        lines.append(f"ts=t{i:02d} event={i} {tail}")
    return ("\n".join(lines) + "\n").encode()


def test_marks_every_gap_worked_example():
    out = N.narrow(_log40(), "delivery failed endpoint alpha")
    assert out == (
        MB + b"\n\nts=t02 event=2 delivery failed for endpoint alpha\n\n" + MB
        + b"\n\nts=t30 event=30 delivery failed for endpoint alpha\n\n" + MB
    )


# --------------------------------------------------------------------------- retrieve_query_test.go


def test_never_orphans_a_json_field():
    orders = [
        {"order_id": f"ord-{1041 + i}", "amount": 10 + i,
         "status": "unfulfilled" if i == 2 else "fulfilled", "customer": f"c{i}"}
        for i in range(12)
    ]
    original = json.dumps({"orders": orders, "page": 2}, indent=4).encode()
    out = N.narrow(original, "unfulfilled orders with order_id, amount, status")
    assert out != original
    bs = blocks(out)
    assert bs
    for b in bs:
        rec = json.loads(b)
        assert {"order_id", "amount", "status"} <= rec.keys()
    hit = [b for b in bs if '"status": "unfulfilled"' in b]
    assert len(hit) == 1
    assert "ord-1043" in hit[0] and hit[0].count('"order_id"') == 1


def test_keeps_text_bearing_json_records_whole():
    original = (
        b'{"items":[{"id":"row-1","text":"delivery failed"},{"id":"row-2","text":"delivery ok"}]}'
    )
    v = N.view(original, "failed")
    assert v == MB + b'\n\n{\n  "id": "row-1",\n  "text": "delivery failed"\n}\n\n' + MB
    # the view is longer than this tiny original, so retrieve returns the original
    assert N.narrow(original, "failed") == original


def test_keeps_tool_message_content_with_its_id():
    original = json.dumps({"messages": [
        {"id": "msg-1", "role": "tool", "content": "refund failed"},
        {"id": "msg-2", "role": "tool", "content": "refund issued"},
    ]}).encode()
    v = N.view(original, "failed").decode()
    assert '"id": "msg-1"' in v and '"content": "refund failed"' in v
    assert '"id": "msg-2"' not in v


def test_keeps_mixed_message_content_shapes_whole():
    original = json.dumps({"messages": [
        {"id": "m1", "content": "customer asks for a refund"},
        {"id": "m2", "content": [{"type": "text", "text": "image evidence"},
                                 {"type": "image", "url": "x.png"}]},
        {"id": "m3", "content": "unrelated chatter"},
    ]}).encode()
    bs = blocks(N.view(original, "refund image evidence"))
    recs = [json.loads(b) for b in bs]
    assert [r["id"] for r in recs] == ["m1", "m2"]
    assert recs[1]["content"][1] == {"type": "image", "url": "x.png"}
    assert '"text": "image evidence"' in bs[1]


def test_marks_separate_json_arrays_as_non_adjacent():
    original = json.dumps({
        "warnings": [{"id": "warn-1", "msg": "target slow"}],
        "errors": [{"id": "err-1", "msg": "target missing"}],
    }).encode()
    v = N.view(original, "target").decode()
    assert v.index("err-1") < v.index("warn-1")  # sorted keys: errors before warnings
    parts = v.split("\n\n")
    assert parts[0] == M and parts[2] == M and parts[4] == M and len(parts) == 5


def test_marks_omitted_json_envelope():
    original = json.dumps({
        "status": "ok", "count": 3, "cursor": "abc",
        "items": [{"name": "alpha"}, {"name": "needle here"}, {"name": "gamma"}],
    }).encode()
    v = N.view(original, "needle")
    assert v.startswith(MB + b"\n\n") and v.endswith(b"\n\n" + MB)
    assert blocks(v) == ['{\n  "name": "needle here"\n}']


def test_keeps_csv_rows_whole():
    rows = ["txn_id,order_id,state,amount,note"]
    for i in range(40):
        state = "refunded" if i in (5, 17) else "settled"
        note = '"chargeback dispute, escalated"' if i == 17 else "routine"
        rows.append(f"txn-{i:03d},ord-{i},{state},{i}.00,{note}")
    original = ("\n".join(rows) + "\n").encode()
    out = N.narrow(original, "refunded chargeback dispute").decode()
    lines = out.split("\n")
    assert lines[0] == rows[0]
    assert out.count("txn_id,order_id") == 1
    body = [b for b in out[len(rows[0]) + 1 :].split("\n\n") if b != M]
    assert body == [rows[6], rows[18]]
    for b in body:
        assert b.startswith("txn-") and b.count(",") >= 4
    assert M in out
    assert out == (
        rows[0] + "\n" + M + "\n\n" + rows[6] + "\n\n" + M + "\n\n" + rows[18] + "\n\n" + M
    )


def test_falls_back_to_the_whole_original():
    original = json.dumps({"server": {"port": 8080, "tls": {"enabled": True}},
                           "paths": ["a", "b"], "features": [[{"nested": "no"}]]}).encode()
    # arrays of arrays are descended, so [[{…}]] does form a group: use a pure config here
    config = json.dumps({"server": {"port": 8080, "tls": {"enabled": True}},
                         "paths": ["a", "b"], "log": {"level": "debug"}}).encode()
    assert N.units_of(config) == ("", [])
    assert N.view(config, "port") is None
    assert N.narrow(config, "port") == config
    assert N.units_of(original) == ("", ["", '{\n  "nested": "no"\n}', ""])


def test_keeps_ndjson_lines_whole():
    lines = []
    for i in range(40):
        status = "bounced mailbox full" if i in (7, 21) else "delivered"
        lines.append(json.dumps({"delivery_id": f"d-{i}", "status": status, "attempt": 1}))
    original = ("\n".join(lines) + "\n").encode()
    out = N.narrow(original, "bounced mailbox")
    bs = blocks(out)
    assert [json.loads(b)["delivery_id"] for b in bs] == ["d-7", "d-21"]


@pytest.mark.parametrize("query", ["", "   ", "\t\n", "\u3000"])
def test_empty_query_is_still_byte_exact(query):
    assert N.narrow(_log40(), query) == _log40()
    assert N.view(_log40(), query) is None


# --------------------------------------------------------------------------- unit decomposition


def test_json_walk_order_and_sentinels():
    original = json.dumps({
        "b": [{"k": "b1"}],
        "a": {"z": [{"k": "z1"}, {"k": "z2"}], "y": [1, [{"k": "y1"}]]},
    }).encode()
    prelude, units = N.units_of(original)
    assert prelude == ""
    recs = ['{\n  "k": "%s"\n}' % k for k in ("y1", "z1", "z2", "b1")]
    assert units == ["", recs[0], "", recs[1], recs[2], "", recs[3], ""]


def test_json_records_use_go_escaping_and_literal_numbers():
    original = b'[{"t":"<a&b>","n":1.50E+3,"u":"\\u2028\xc3\xa9"}]'
    _, units = N.units_of(original)
    assert units[1] == (
        '{\n  "n": 1.50E+3,\n  "t": "\\u003ca\\u0026b\\u003e",\n  "u": "\\u2028\u00e9"\n}'
    )


def test_json_go_decoder_trailing_quirk():
    # a trailing ']' after the value is tolerated, other trailing text is not
    _, units = N.units_of(b'[{"a":"x"}] ]')
    assert units == ["", '{\n  "a": "x"\n}', ""]
    _, units = N.units_of(b'[{"a":"x"}] tail')
    assert units == ['[{"a":"x"}] tail']


def test_json_scalar_and_empty_array_have_no_units():
    assert N.units_of(b"42") == ("", [])
    assert N.units_of(b'{"a":[]}') == ("", [])
    assert N.units_of(b'{"a":[{"x":1}, 2]}') == ("", [])


def test_tsv_detection_and_spans():
    original = b"id\tname\tnote\r\n1\tana\tplain\r\n\r\n2\tsam\tneedle\r\n3\tbo\tplain\r\n"
    prelude, units = N.units_of(original)
    assert prelude == "id\tname\tnote"
    # spans run from the end of the previous record, so skipped blank lines stay in front
    assert units == ["1\tana\tplain", "\r\n2\tsam\tneedle", "3\tbo\tplain"]


@pytest.mark.parametrize(
    "original",
    [
        b"a,b\n1,2\n",  # one data row
        b"only\none\ncolumn\n",  # first line has no delimiter
        b'a,b\n1,x"y\n3,4\n',  # bare quote
        b"a,b\n1,2,3\n4,5\n",  # field count
        b"a,b\n\xff,2\n3,4\n",  # invalid UTF-8
    ],
)
def test_not_tabular_falls_to_lines(original):
    prelude, units = N.units_of(original)
    assert prelude == ""
    text = original.decode("utf-8", "surrogateescape")
    assert units == [x for x in text.split("\n") if x]


def test_paragraph_split_and_trim():
    assert N.units_of(b"  one\ntwo  \n\n\n\nthree\n\n \n\n") == ("", ["one\ntwo", "three"])
    assert N.units_of("\u3000a\u3000\n\nb".encode()) == ("", ["a", "b"])


def test_invalid_utf8_lines_survive_byte_exact():
    lines = [b"noise line %d" % i for i in range(10)]
    lines[4] = b"needle \xff\xfe bytes"
    original = b"\n".join(lines)
    assert N.narrow(original, "needle") == MB + b"\n\nneedle \xff\xfe bytes\n\n" + MB


# --------------------------------------------------------------------------- tokenizer and BM25


def test_tokenizer_rules():
    assert N.tokenize("The quick_fox IS at 42 a x é ß_1") == ["quick_fox", "42", "é", "ß_1"]
    # Nd digits join tokens, other numbers (superscripts, Roman numerals) split them
    assert N.tokenize("ab\u0663\u0664 x\u00b2y v\u2163w") == ["ab\u0663\u0664"]
    assert N.tokenize("\u0130STANBUL") == ["istanbul"]
    assert N.tokenize("why-what which who") == []


def test_bm25_scores_by_hand():
    units = ["alpha beta", "gamma", "alpha alpha", ""]
    sc = N.scores(units, "alpha alpha ALPHA")  # query terms are a set
    n, df, total = 4, 2, 5
    avgdl = total / n
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    s0 = idf * 1 * 2.5 / (1 + 1.5 * (0.25 + 0.75 * 2 / avgdl))
    s2 = idf * 2 * 2.5 / (2 + 1.5 * (0.25 + 0.75 * 2 / avgdl))
    assert sc == pytest.approx([s0, 0.0, s2, 0.0], rel=1e-12)
    assert N.scores(["", ""], "x1") == [0.0, 0.0]


def test_top_20_ties_keep_document_order():
    lines = [f"row {i:02d} needle" for i in range(25)] + ["tail line"]
    out = N.narrow("\n".join(lines).encode(), "needle").decode()
    assert out == "\n\n".join(lines[:20]) + "\n\n" + M


def test_top_20_prefers_higher_scores():
    lines = [f"row{i:02d} needle" for i in range(30)]
    lines[25] = "row25 needle needle"
    out = N.narrow("\n".join(lines).encode(), "needle").decode()
    kept = [b for b in out.split("\n\n") if b != M]
    assert len(kept) == 20 and kept[-1] == lines[25] and kept[:19] == lines[:19]
    assert out.endswith(lines[18] + "\n\n" + M + "\n\n" + lines[25] + "\n\n" + M)


def test_no_hits_or_only_stopwords_returns_original():
    assert N.narrow(_log40(), "zebra") == _log40()
    assert N.narrow(_log40(), "the of a") == _log40()


def test_first_and_last_units_get_no_outer_marker():
    original = b"needle first\n" + b"some other middle line\n" * 4 + b"needle last"
    assert N.narrow(original, "needle") == b"needle first\n\n" + MB + b"\n\nneedle last"


def test_deep_json_does_not_recurse():
    depth = 5000
    original = b'{"a":' * depth + b'[{"k":"deep needle"}]' + b"}" * depth
    assert N.view(original, "needle") == MB + b'\n\n{\n  "k": "deep needle"\n}\n\n' + MB
