"""A large JSON document whose root is an array is read one element at a time (so that a
60 MB array is never held as a tree); its output must be the tree path's, byte for byte.
Here the size threshold is lowered so that small documents take the streaming path too."""

from __future__ import annotations

import json

import pytest

from caveman_engine import elision
from caveman_engine.compressors import Compressed
from caveman_engine.compressors import json as jsonc


def _records(n: int, start: int = 0) -> list:
    return [{"id": i, "level": "info" if i % 3 else "debug", "msg": f"request {i % 4} ok",
             "latency_ms": 10 + i % 7, "user": f"user{i % 5}"} for i in range(start, start + n)]


def _nested(n: int) -> list:
    return [{"k": i, "rows": _records(40 if i % 5 == 0 else 3), "tags": ["a", "b"]}
            for i in range(n)]


DOCUMENTS = {
    "root run with summary and note": json.dumps(_records(400)),
    "indented, whitespace around": "\n  " + json.dumps(_records(60), indent=2) + "\n\n",
    "non-ascii and go escapes": json.dumps(
        [{"id": i, "s": "caf\u00e9 <b>&\u2028", "n": i % 3} for i in range(50)], ensure_ascii=False),
    "only nested arrays collapse": json.dumps(_nested(9)),
    "root collapses, kept elements have long arrays": json.dumps(_nested(80)),
    "errorish and anomalies kept": json.dumps(
        _records(40) + [{"id": 999, "level": "error", "msg": "timeout", "latency_ms": 90000,
                         "user": "x"}] + _records(40, 40)),
    "a marker element leaves the root alone": json.dumps(
        _records(20) + [{"__caveman_elided__": 3}] + _nested(3)),
    "at most eight elements": json.dumps(_nested(8)),
    "eight elements, nothing long": json.dumps(_records(8)),
    "empty array": "[]",
    "scalars": json.dumps(list(range(100)) + ["x"] * 30),
    "trailing bracket (go decoder)": json.dumps(_records(30)) + " ]",
    "trailing data": json.dumps(_records(30)) + " x",
    "trailing comma": json.dumps(_records(30))[:-1] + ",]",
    "cut short": json.dumps(_records(30))[:500],
    "escaped surrogate": json.dumps(_records(30))[:-1] + ', "\\ud800x"]',
    "deep element": "[" + "[" * 5000 + "]" * 5000 + "," + json.dumps(_records(30))[1:],
    "root object": json.dumps({"data": _records(30)}),
}


def _compress(doc: bytes, threshold: int, monkeypatch) -> Compressed | None:
    monkeypatch.setattr(jsonc, "STREAM_MIN_BYTES", threshold)
    return jsonc.compress(doc)


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_streamed_root_array_matches_the_tree(name: str, monkeypatch) -> None:
    doc = DOCUMENTS[name].encode("utf-8")
    tree = _compress(doc, 1 << 62, monkeypatch)
    streamed = _compress(doc, 0, monkeypatch)
    if tree is None:
        assert streamed is None
    else:
        assert streamed is not None
        assert (streamed.data, streamed.method) == (tree.data, tree.method)


def test_invalid_utf8_and_bom_match_the_tree(monkeypatch) -> None:
    doc = json.dumps(_records(40)).encode()
    for variant in (doc.replace(b"info", b"inf\xff", 3), b"\xef\xbb\xbf" + doc):
        tree = _compress(variant, 1 << 62, monkeypatch)
        streamed = _compress(variant, 0, monkeypatch)
        assert (tree and tree.data) == (streamed and streamed.data)


def test_large_root_array_is_never_parsed_whole(monkeypatch) -> None:
    def whole(*args, **kwargs):
        raise AssertionError("the document was parsed as one tree")

    doc = json.dumps(_records(400)).encode()
    expected = _compress(doc, 1 << 62, monkeypatch)
    monkeypatch.setattr(jsonc.jsonio, "loads", whole)
    got = _compress(doc, 0, monkeypatch)
    assert expected is not None and got is not None and got.data == expected.data


def test_summarize_reads_records_once_in_order() -> None:
    records = [elision.line_fields(f"level=info status={200 + i % 3} user=u{i % 2}")
               for i in range(40)]
    assert elision.summarize(iter(records), 4000) == elision.summarize(records, 4000)
    assert elision.summarize(iter(records), 4000) is not None
    assert elision.summarize(iter(records[:1]), 4000) is None
    assert elision.summarize(iter([records[0], None]), 4000) is None
