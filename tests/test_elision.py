"""The shared elision machinery (spec §6 "Shared machinery"), on small hand-checked inputs."""

from __future__ import annotations

import pytest

from caveman_engine import elision

# --------------------------------------------------------------------------- lines


def test_split_and_join_lines() -> None:
    assert elision.split_lines("a\r\nb\n") == (["a\r", "b"], True)
    assert elision.split_lines("a\n\n") == (["a", ""], True)
    assert elision.split_lines("a") == (["a"], False)
    assert elision.join_lines(["a\r", "b"], True) == "a\r\nb\n"


def test_marker_eol_majority_crlf() -> None:
    assert elision.marker_eol("a\r\nb\r\nc\n") == "\r"
    assert elision.marker_eol("a\r\nb\nc\r\nd\n") == ""  # exactly half is not a majority
    assert elision.marker_eol("no newline") == ""


def test_marker_and_note_recognition() -> None:
    assert elision.is_marker("\u2026 3 lines elided (caveman) \u2026")
    assert elision.is_marker("# \u2026 4 config lines elided (caveman) \u2026")
    assert not elision.is_marker("caveman without ellipsis")
    note = elision.contract_note("rows")
    assert note == (
        "\u2026 caveman: elided rows resemble shown rows and match the stated invariants "
        "\u2014 answer from this view; if you truly cannot, one broad caveman_retrieve \u2026"
    )
    assert elision.is_note(note) and elision.is_marker(note)


def test_runs() -> None:
    assert elision.runs([True, False, False, True, False]) == [(1, 3), (4, 5)]
    assert elision.runs([True, True]) == []


# --------------------------------------------------------------------------- keepNonRedundant


def test_profile_masks_digits_only_with_letters() -> None:
    p = elision.profile("[INFO] Step 12 ok amd64")
    assert p.masked and p.tokens == frozenset({"info", "step", "#", "ok", "amd#"})
    q = elision.profile("10.0.0.1 - 404")
    assert not q.masked and q.tokens == frozenset({"10", "0", "1", "404"})
    assert elision.profile("...").tokens == frozenset()
    words = [f"w{chr(97 + i % 26)}{chr(97 + i // 26)}" for i in range(300)]
    capped = elision.profile(" ".join(words)).tokens
    assert capped == frozenset(words[:128])  # the first 128 distinct tokens


def test_keep_non_redundant_near_duplicates_elide() -> None:
    units = ["[INFO] starting", "[INFO] step 0 ok"] + [f"[INFO] step {i} ok" for i in range(1, 10)]
    keep = [True, True] + [False] * 9
    assert elision.keep_non_redundant(units, keep) == keep


def test_keep_non_redundant_promotes_distinct_units() -> None:
    units = ["alpha beta gamma", "alpha beta gamma", "delta epsilon", "delta epsilon",
             "alpha beta", "alpha", "zeta eta theta iota", "alpha beta gamma delta",
             "a b c d e f g h i j", "a b c d e f g h i k"]
    keep = [True] + [False] * 9
    # "delta epsilon" is new (promoted, a new class) and then represents its copy; a unit
    # is represented when one kept unit holds ceil(0.9 × its vocabulary) of its tokens:
    # 4 of 4 for "alpha beta gamma delta" (no kept unit has them all), 9 of 10 for the last.
    got = elision.keep_non_redundant(units, keep)
    assert got == [True, False, True, False, False, False, True, True, True, False]


def test_keep_non_redundant_masked_kinds_do_not_mix() -> None:
    # "404" (unmasked: digits kept) is not represented by the masked unit {get, #, ok}
    units = ["GET 1 ok", "404"] + ["GET 200 ok"] * 4
    got = elision.keep_non_redundant(units, [True] + [False] * 5)
    assert got == [True, True, False, False, False, False]


def test_keep_non_redundant_too_few_redundant_keeps_everything() -> None:
    units = ["alpha beta", "alpha beta", "alpha beta", "alpha beta", "other words", "more"]
    keep = [True, False, False, False, True, True]
    assert elision.keep_non_redundant(units, keep) == [True] * 6  # only 3 redundant
    keep2 = [True, False, False, False, False, True]
    units2 = units[:4] + ["alpha beta"] + units[5:]
    assert elision.keep_non_redundant(units2, keep2) == keep2  # 4 redundant


def test_keep_non_redundant_seeds_sampled_evenly() -> None:
    # 102 kept units: step = 102 // 64 = 1, so the seeds are the first 64 kept units and
    # kept[2] (then kept[3]) represents the dropped copies.
    kept = [f"unique{chr(97 + i % 26)}{chr(97 + i // 26)} word" for i in range(102)]
    kept[2] = "memcpy outp inp ncopy sizeof"
    units = kept + ["memcpy(outp, inp-ncopy, sizeof(*outp)*ncopy);"] * 5
    keep = [True] * 102 + [False] * 5
    assert elision.keep_non_redundant(units, keep) == keep
    kept[2], kept[3] = "filler words only", "memcpy outp inp ncopy sizeof"
    units = kept + ["memcpy(outp, inp-ncopy, sizeof(*outp)*ncopy);"] * 5
    assert elision.keep_non_redundant(units, keep) == keep


def _seed_probe(n_kept: int, at: int) -> list[bool]:
    """n_kept distinct kept units, kept[at] matching 5 dropped copies; keep_non_redundant's
    verdict on the copies (all False: kept[at] is a seed; all True: it is not)."""
    kept = [f"unique{chr(97 + i % 26)}{chr(97 + i // 26 % 26)} word" for i in range(n_kept)]
    kept[at] = "memcpy outp inp ncopy sizeof"
    units = kept + ["memcpy(outp, inp-ncopy, sizeof(*outp)*ncopy);"] * 5 + ["x y z"] * 4
    keep = [True] * n_kept + [False] * 9
    return elision.keep_non_redundant(units, keep)[n_kept:n_kept + 5]


def test_keep_non_redundant_seeds_every_step_th_kept_unit() -> None:
    # 200 kept units: step = 200 // 64 = 3, seeds kept[0], kept[3], … kept[189] (64 of them;
    # the a11y vectors libexslt/mdbook/rustdoc/sphinx pin this). kept[189] is the last seed;
    # kept[190..199] are never seeds, nor is kept[1].
    assert _seed_probe(200, 189) == [False] * 5
    assert _seed_probe(200, 192) == [True] + [False] * 4  # first copy promoted, then a class
    assert _seed_probe(200, 1) == [True] + [False] * 4
    assert _seed_probe(200, 3) == [False] * 5


def test_keep_non_redundant_promotion_cap() -> None:
    units = ["seed"] + [f"distinct{chr(97 + i % 26)}{chr(97 + i // 26 % 26)}{i // 676}" for i in range(140)]
    units += ["seed"] * 5
    keep = [True] + [False] * 145
    got = elision.keep_non_redundant(units, keep)
    # every distinct unit is promoted; after 128 promotions the rest is kept wholesale
    assert got == [True] * 146


# --------------------------------------------------------------------------- summaries


def test_summary_budget() -> None:
    assert elision.summary_budget(57) == 28  # 96 floor, but at most half of the elided bytes
    assert elision.summary_budget(300) == 96
    assert elision.summary_budget(500) == 125
    assert elision.summary_budget(10_000) == 160


def test_summary_range_of_array_json_27() -> None:
    recs = [elision.json_fields({"id": n}) for n in ("4", "5", "6", "7", "8", "9", "10")]
    from caveman_engine.jsonio import Number

    recs = [elision.json_fields({"id": Number(str(n))}) for n in range(4, 11)]
    assert elision.summarize(recs, 64) == "range id=4..10"


def test_summary_sections_and_order() -> None:
    rows = []
    for i in range(20):
        rows.append([("status", "ok", False), ("host", f"web-{i % 7}", False),
                     ("region", "eu" if i % 3 else "us", False), ("id", str(100 + i), True)])
    s = elision.summarize(rows, 2000)
    assert s == "all status=ok; host: web-0..web-6 all 7 present; region: eu×13 us×7; range id=100..119"


def test_summary_coverage_enum_rules() -> None:
    recs = [
        [("client", "10.0.0.1", False), ("level", "info", False), ("ts", "2026-01-01T00:00:01Z", False)],
        [("level", "debug", False), ("ts", "2026-01-01T00:00:02Z", False)],
    ]
    # every bucket count 1 → no enumeration; ≥ 2 distinct → bounded coverage; one value plus
    # absent is neither.
    assert elision.summarize(recs, 1000) == (
        "level: 2 distinct, debug..info; ts: 2 distinct, 2026-01-01T00:00:01Z..2026-01-01T00:00:02Z"
    )


def test_summary_never_describes_secrets_or_unusable_values() -> None:
    recs = [[("api_key", "k1", False), ("Session_ID", "s", False), ("note", "x" * 41, False),
             ("tag", "a\u2026", False), ("kind", "job", False)] for _ in range(3)]
    assert elision.summarize(recs, 1000) == "all kind=job"
    assert elision.summarize([None, [("a", "b", False)]], 1000) is None
    assert elision.summarize([[("a", "b", False)]], 1000) is None  # a single unit


def test_summary_shedding_order() -> None:
    # 5 table rows of `ps`: the weak enumerations go first, then ranges from the last field.
    header = ["USER", "PID", "%CPU", "%MEM", "VSZ", "RSS", "STAT", "TIME"]
    rows = ["root,1457,0.0,0.0,5244,4252,Ss,0:00", "root,2774,0.0,0.0,0,0,I,0:00",
            "root,6029,0.1,0.0,0,0,I,0:04", "root,6239,0.0,0.0,0,0,I,0:00",
            "root,6463,0.1,0.0,1392,1056,S,0:01"]
    recs = [elision.table_fields(header, r.split(",")) for r in rows]
    full = elision.summarize(recs, 10_000)
    # equal counts keep the order of first appearance (Ss before S, 0:04 before 0:01)
    assert full == ("all USER=root %MEM=0.0; STAT: I×3 Ss×1 S×1; TIME: 0:00×3 0:04×1 0:01×1; "
                    "range PID=1457..6463 %CPU=0.0..0.1 VSZ=0..5244 RSS=0..4252")
    assert elision.summarize(recs, 158) == (
        "all USER=root %MEM=0.0; range PID=1457..6463 %CPU=0.0..0.1 VSZ=0..5244"
    )


def test_summary_weak_enum_at_half_the_units() -> None:
    # 4 units, arch: amd64×3 all×1 → 2 buckets, 2·2 ≥ 4 → weak: shed first, before the
    # coverage; with 5 units (2·2 < 5) it is a plain enumeration and the coverage goes first.
    pk = [("bash", "amd64"), ("curl", "amd64"), ("dash", "all"), ("diff", "amd64"),
          ("gzip", "amd64")]
    recs = [[("pkg", p, False), ("arch", a, False)] for p, a in pk]
    assert elision.summarize(recs[:4], 10_000) == "pkg: 4 distinct, bash..diff; arch: amd64×3 all×1"
    assert elision.summarize(recs[:4], 98) == "pkg: 4 distinct, bash..diff"  # budget 49 < 50
    assert elision.summarize(recs, 10_000) == "pkg: 5 distinct, bash..gzip; arch: amd64×4 all×1"
    assert elision.summarize(recs, 98) == "arch: amd64×4 all×1"


def test_line_fields() -> None:
    assert elision.line_fields('{"b": 2, "a": "x", "c": {"d": 1}}') == [("a", "x", False), ("b", "2", True)]
    # logfmt pairs in order of first appearance, a quoted value whole
    assert elision.line_fields('ts=1 msg="hello world" level=info') == [
        ("ts", "1", True), ("msg", "hello world", False), ("level", "info", False)]
    assert elision.line_fields("plain words only") is None


@pytest.mark.parametrize(
    ("n", "summary", "marker", "elided", "expected"),
    [(3, None, 30, 10, True), (2, None, 30, 500, False), (2, "s", 30, 60, True),
     (2, "s", 31, 60, False), (1, "s", 10, 100, True), (0, "s", 1, 100, False)],
)
def test_worth_eliding(n, summary, marker, elided, expected) -> None:
    assert elision.worth_eliding(n, summary, marker, elided) is expected


def test_json_fields_numeric_strings_are_numbers() -> None:
    # A string member that parses as a number is numeric for the summary (DevTools node ids
    # are strings): a run of them is a numeric range, compared as numbers, not a coverage.
    from caveman_engine import jsonio

    assert elision.json_fields(jsonio.loads(b'{"a":"7","b":"x7","c":7,"d":"1e3"}')) == [
        ("a", "7", True), ("b", "x7", False), ("c", "7", True), ("d", "1e3", True)]
    recs = [elision.json_fields(jsonio.loads(s)) for s in (
        b'{"id":"9","p":"-1000000011"}', b'{"id":"10","p":"81"}', b'{"id":"11","p":"12"}')]
    assert elision.summarize(recs, 1000) == "range id=9..11 p=-1000000011..81"
