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
    # "ms" is also the seam series (the highest-variance member of every element): the
    # spike is a step up at 15 and a step down at 16, so its neighbours are kept too.
    assert 14 in kept and 16 in kept


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


def test_seams_come_from_any_numeric_path_in_every_element() -> None:
    # A step in a nested leaf present in every element (like a DevTools node's
    # chromeRole.value) keeps both seam elements, 11 and 12. Most values are equal, so the
    # segment's MAD is 0 and its standard deviation (3919.2) is the scale: the means differ
    # by 8000 >= 2 * 3919.2. No anomaly: the robust z of 9000 is 0.56.
    nested = _compact([{"k": "a", "m": {"v": 1000 if i < 12 else 9000}} for i in range(20)])
    assert jsonc.compress(nested).data == (
        b'[{"k":"a","m":{"v":1000}},{"k":"a","m":{"v":1000}},{"k":"a","m":{"v":1000}},'
        b'{"__caveman_elided__":8,"__caveman_invariants__":"all k=a"},'
        b'{"k":"a","m":{"v":1000}},{"k":"a","m":{"v":9000}},'
        b'{"__caveman_elided__":5,"__caveman_invariants__":"all k=a"},'
        b'{"k":"a","m":{"v":9000}},{"k":"a","m":{"v":9000}}]'
    )


def _series(xs: list[float]) -> list[int]:
    """Split points (the right-hand seam element of each pair), in acceptance order."""
    return jsonc._change_points({"v": [float(x) for x in xs]}, [0] * len(xs))[1::2]


def test_seam_series_is_the_highest_variance_full_path_else_the_lengths() -> None:
    step = [0.0] * 14 + [50.0] * 6
    ramp = [float(i) for i in range(20)]  # constant slope: never segmented
    # "a.b" (variance 525) beats "c" (33.25); "t" misses an element, so it is no series
    assert jsonc._change_points({"c": ramp, "a.b": step, "t": [1e6] + [None] * 19},
                                [0] * 20) == [13, 14]
    steep = [10 * x for x in ramp]  # variance 3325: the series, and it has no seam
    assert jsonc._change_points({"c": steep, "a.b": step}, [0] * 20) == []
    # no path in every element: the element lengths are the series
    lengths = [30] * 6 + [90] * 14
    assert jsonc._change_points({"t": [5.0] * 19 + [None]}, lengths) == [5, 6]
    assert jsonc._change_points({}, lengths) == [5, 6]


def test_seam_needs_a_shift_of_twice_the_segments_mad() -> None:
    # A step well clear of the scatter around each level: the segment's MAD is 10, the means
    # differ by 100. Neither level splits again: the running sum peaks after its first
    # element, a shift of 5.3 or 5.7 against 10, twice the level's MAD of 5.
    assert _series([0, 10] * 8 + [100, 110] * 4) == [16]
    # The same step with scatter as wide as the step: the running sum peaks at 15, a shift
    # of 53.3 against 100, twice the MAD of 50.
    assert _series([0, 100] * 8 + [50, 150] * 4) == []
    # Values alternating about one level (DevTools list markers and links) never split.
    assert _series([110, 116] * 40) == []
    # When most values are equal the MAD is 0 and the standard deviation is the scale: a
    # clean step between two levels still splits, however unbalanced (the means differ by at
    # least twice the standard deviation).
    assert _series([0] * 16 + [1000] * 8) == [16]
    assert _series([0] * 20 + [1000] * 4) == [20]
    # A constant slope is never segmented, nor is a series of fewer than 8 points.
    assert _series([3 * i for i in range(24)]) == []
    assert _series([0] * 4 + [1000] * 3) == []


def test_seams_split_the_largest_segment_first_at_most_eight() -> None:
    # Ten levels (3**j) in runs of 4, 8, 8, 8, 8, 8, 8, 4, 4, 4: nine steps, eight splits.
    # The largest pending segment goes first (the first queued among equals), so the eighth
    # split is 4, in the 12-element head; breadth first would have split the 12-element tail
    # at 56 instead (depth6-rust-book-ownership needs the size order).
    stairs = []
    for j, run in enumerate([4, 8, 8, 8, 8, 8, 8, 4, 4, 4]):
        stairs += [3**j] * run
    assert _series(stairs) == [52, 36, 20, 12, 44, 28, 60, 4]
    # Segments shorter than 8 are not examined: after the split at the big step, a head of
    # 8 elements is split at its own step, a head of 7 is not.
    assert _series([0] * 4 + [1000] * 4 + [100000] * 20) == [8, 4]
    assert _series([0] * 4 + [1000] * 3 + [100000] * 20) == [7]
