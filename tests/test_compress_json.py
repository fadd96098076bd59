"""``json`` elision (spec §6.1): the general vectors, the spec's arrayJSON example (§10.2 #27,
#30) and the structural rules (verbatim keys, existing markers, note placement, declines)."""

from __future__ import annotations

import json

import pytest

from caveman_engine.compressors import Compressed
from caveman_engine.compressors import json as jsonc

from .test_compress_lines import check_vector, vector_cases

ARRAY_JSON = (
    b'{"results":[{"id":1},{"id":2},{"id":3},{"id":4},{"id":5},{"id":6},{"id":7},{"id":8},'
    b'{"id":9},{"id":10},{"id":11},{"id":12}],"error":null}'
)


@pytest.mark.parametrize(("ctype", "case", "stdout"), vector_cases(("json",)))
def test_general_vector(ctype: str, case: str, stdout: str | None) -> None:
    check_vector(ctype, case, stdout)


def test_array_json_27_and_idempotence_30() -> None:
    assert len(ARRAY_JSON) == 137
    out = jsonc.compress(ARRAY_JSON)
    assert out == Compressed(
        b'{"error":null,"results":[{"id":1},{"id":2},{"id":3},'
        b'{"__caveman_elided__":7,"__caveman_invariants__":"range id=4..10"},{"id":11},{"id":12}]}',
        method="elision",
    )
    assert jsonc.compress(out.data) is None


def test_declines() -> None:
    assert jsonc.compress(b'{"a":[1,2,3,4,5,6,7,8]}') is None  # no array longer than 8
    assert jsonc.compress(b'{"results":[1,2,3,  <-- not json') is None
    assert jsonc.compress(b'{"a":1} {"b":2}') is None  # a second value
    assert jsonc.compress(b"[" * 20000 + b"]" * 20000) is None  # deeper than Go's limit
    assert jsonc.compress(b"[" * 5000 + b"]" * 5000) is None  # deep but nothing to collapse


def test_trailing_bracket_tolerated_like_go_decoder() -> None:
    assert jsonc.compress(ARRAY_JSON + b"]") == jsonc.compress(ARRAY_JSON)


def _rows(n: int, **extra) -> list[dict]:
    return [{"id": i, "name": "svc", "state": "running", **extra} for i in range(n)]


def test_errorish_keys_kept_verbatim_and_markers_left_alone() -> None:
    doc = {"details": _rows(20), "items": _rows(20)}
    out = json.loads(jsonc.compress(json.dumps(doc).encode()).data)
    assert out["details"] == doc["details"]
    assert [x.get("id") for x in out["items"]] == [0, 1, 2, None, 18, 19]
    assert out["items"][3] == {
        "__caveman_elided__": 15,
        "__caveman_invariants__": "all name=svc state=running; range id=3..17",
    }
    premarked = {"items": doc["items"][:3] + [{"__caveman_elided__": 2}] + doc["items"][5:]}
    assert jsonc.compress(json.dumps(premarked).encode()) is None


def test_errorish_elements_and_anomalies_are_kept() -> None:
    rows = _rows(30)
    rows[10]["name"] = "svc failed"
    rows[20]["latency"] = 5  # only element with this path: fewer than 4 values, no anomaly
    for i, r in enumerate(rows):
        r["ms"] = 40 + (i % 5)
    rows[15]["ms"] = 900  # robust z far above 2
    out = json.loads(jsonc.compress(json.dumps({"r": rows}).encode()).data)["r"]
    kept = [x["id"] for x in out if "id" in x]
    assert 10 in kept and 15 in kept
    # One spike in a series this short is no seam (see test_seam_noise_level_is_each_
    # segments_mean_neighbour_difference): its neighbours are not kept.
    assert 14 not in kept and 16 not in kept


def test_note_only_on_first_large_run() -> None:
    pad = "x" * 60
    doc = {"a": [{"id": i, "pad": pad} for i in range(120)],
           "b": [{"id": i, "pad": pad} for i in range(120)]}
    out = json.loads(jsonc.compress(json.dumps(doc).encode()).data)
    notes = [x for k in ("a", "b") for x in out[k] if "__caveman_note__" in x]
    assert len(notes) == 1 and notes[0] in out["a"]
    assert notes[0]["__caveman_note__"].startswith("\u2026 caveman: elided elements resemble")


def test_small_first_run_takes_the_note_slot() -> None:
    # the note goes to the first collapsed run only, and only if that run is ≥ 4096 bytes
    doc = {"a": [{"id": i} for i in range(12)],
           "b": [{"id": i, "pad": "y" * 80} for i in range(120)]}
    out = jsonc.compress(json.dumps(doc).encode()).data
    assert b"__caveman_note__" not in out


def test_go_escaping_in_output() -> None:
    rows = [{"id": i, "html": "<b>&</b>"} for i in range(12)]
    out = jsonc.compress(json.dumps(rows).encode()).data
    assert b"\\u003cb\\u003e\\u0026\\u003c/b\\u003e" in out


def _compact(v) -> bytes:
    return json.dumps(v, separators=(",", ":")).encode()


def test_seams_come_from_top_level_members_only() -> None:
    # A level shift in a noisy top-level member present in every element keeps both seam
    # elements (9 and 10).
    top = _compact([{"k": "a", "v": (i * 7) % 5 + (100 if i >= 10 else 0)} for i in range(20)])
    assert jsonc.compress(top).data == (
        b'[{"k":"a","v":0},{"k":"a","v":2},{"k":"a","v":4},'
        b'{"__caveman_elided__":6,"__caveman_invariants__":"all k=a; range v=0..4"},'
        b'{"k":"a","v":3},{"k":"a","v":100},'
        b'{"__caveman_elided__":7,"__caveman_invariants__":"all k=a; range v=100..104"},'
        b'{"k":"a","v":101},{"k":"a","v":103}]'
    )
    # The same shift in a nested leaf (like a DevTools node's chromeRole.value) is no seam:
    # with no top-level numeric member the series is the element length, constant here.
    nested = _compact([{"k": "a", "m": {"v": 1000 if i < 10 else 9000}} for i in range(20)])
    assert jsonc.compress(nested).data == (
        b'[{"k":"a","m":{"v":1000}},{"k":"a","m":{"v":1000}},{"k":"a","m":{"v":1000}},'
        b'{"__caveman_elided__":15,"__caveman_invariants__":"all k=a"},'
        b'{"k":"a","m":{"v":9000}},{"k":"a","m":{"v":9000}}]'
    )


def _series(xs: list[float]) -> list[int]:
    """Split points (the right-hand seam element of each pair), in acceptance order."""
    return jsonc._change_points({"v": [float(x) for x in xs]}, [0] * len(xs))[1::2]


def test_seam_noise_level_is_each_segments_mean_neighbour_difference() -> None:
    # A segment splits when max|S| >= 1.358 * mean|x[i+1]-x[i]| over that segment * sqrt(its
    # length). Every segment of a ramp (DevTools backendDOMNodeId in document order) splits.
    wobbly_ramp = [10 * i + (3 if i % 2 else 0) for i in range(24)]
    assert _series(wobbly_ramp) == [12, 6, 18]
    # A lone spike in a long series splits on its two sides (xjson__api_results: 116|117|118);
    # in a short one the spike's own jumps are most of the segment's noise: no seam.
    spike = [(i * 7) % 5 for i in range(64)]
    spike[40] = 500
    assert _series(spike) == [40, 41]
    short_spike = [(i * 7) % 5 for i in range(24)]
    short_spike[10] = 500
    assert _series(short_spike) == []
    # A segment whose values jump about is noise and stays whole, so the splits go to the
    # ramp after it (depth6-rust-book-ownership: its scattered first 25 nodes are not split,
    # the ramp at 54..78 is). One noise level for the whole series would split the jumpy
    # part at 4 and 9 and never reach 36 and 44 within the 8 splits.
    jumpy = [(i * 37) % 11 * 90 for i in range(16)]
    ramp = [2000 + 10 * i + (3 if i % 2 else 0) for i in range(32)]
    assert _series(jumpy + ramp) == [16, 32, 24, 40, 20, 28, 36, 44]
    # Mostly-equal neighbours over the whole series: no seams, even across a clean step.
    assert _series([0] * 12 + [1000] * 12) == []
    # A constant slope is never segmented.
    assert _series([3 * i for i in range(24)]) == []


def test_seams_breadth_first_at_most_eight() -> None:
    # Segments are examined in the order they were created (a FIFO queue), segments shorter
    # than 8 are not examined, and the 9th split is never made. Depth first would give
    # 40, 20, 10, 5, 15, 30, 25, 35 instead.
    wobbly_ramp = [10 * i + (3 if i % 2 else 0) for i in range(80)]
    assert _series(wobbly_ramp) == [40, 20, 60, 10, 30, 50, 70, 5]


def test_no_seams_when_top_level_numbers_miss_some_elements() -> None:
    # "t" is the only top-level number and two elements lack it: no seam series at all. The
    # element lengths (which step at index 10 here) are used only when no element has one.
    rows = [{"k": "a", "s": "x" if i < 10 else "x" * 12, "t": 5} for i in range(20)]
    del rows[7]["t"], rows[12]["t"]
    assert jsonc.compress(_compact(rows)).data == (
        b'[{"k":"a","s":"x","t":5},{"k":"a","s":"x","t":5},{"k":"a","s":"x","t":5},'
        b'{"__caveman_elided__":15,"__caveman_invariants__":"all k=a; s: xxxxxxxxxxxx\xc3\x978 '
        b'x\xc3\x977; t: 5\xc3\x9713 absent\xc3\x972"},'
        b'{"k":"a","s":"xxxxxxxxxxxx","t":5},{"k":"a","s":"xxxxxxxxxxxx","t":5}]'
    )
