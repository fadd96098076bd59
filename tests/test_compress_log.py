"""``log`` invariant summaries (spec §6.2 + the shared ``elision.summarize``), as the reference
writes them for log lines (pinned by general2/log__logfmt-pkgcheck-tsfirst and
log__jsonl-structlog-style-archiver):
logfmt fields in order of first appearance, quoted values whole, NDJSON keys sorted, enum ties
in first-appearance order, and an enumeration with buckets >= half the run counted as weak."""

from __future__ import annotations

from caveman_engine import elision
from caveman_engine.compressors import log

E = "\u2026"


def _run(lines: list[str]) -> str | None:
    out = log.compress(("\n".join(lines) + "\n").encode())
    return None if out is None else out.decode()


def test_logfmt_fields_in_first_appearance_order_quoted_value_whole() -> None:
    lines = [f'ts={i} level=info msg="codec result" codec=h264 id=a{i}' for i in range(1, 8)]
    lines += ['ts=8 level=error msg="boom"', 'ts=9 level=info msg="codec result" codec=h264 id=a9']
    assert _run(lines) == (
        'ts=1 level=info msg="codec result" codec=h264 id=a1\n'
        'ts=2 level=info msg="codec result" codec=h264 id=a2\n'
        f"{E} 5 lines elided (caveman): all level=info msg=codec result codec=h264; "
        f"id: a3..a7 all 5 present; range ts=3..7 {E}\n"
        'ts=8 level=error msg="boom"\n'
        'ts=9 level=info msg="codec result" codec=h264 id=a9\n'
    )


def test_logfmt_line_fields() -> None:
    assert elision.line_fields('ts=1 msg="hello world" level=info ts=2') == [
        ("ts", "2", True), ("msg", "hello world", False), ("level", "info", False)]
    assert elision.line_fields("plain words only") is None


def test_ndjson_keys_stay_sorted() -> None:
    lines = [f'{{"ts": {i}, "worker": "w1", "level": "info", "event": "tick"}}' for i in range(1, 9)]
    assert _run(lines) == (
        '{"ts": 1, "worker": "w1", "level": "info", "event": "tick"}\n'
        '{"ts": 2, "worker": "w1", "level": "info", "event": "tick"}\n'
        f"{E} 4 lines elided (caveman): all event=tick level=info worker=w1; range ts=3..6 {E}\n"
        '{"ts": 7, "worker": "w1", "level": "info", "event": "tick"}\n'
        '{"ts": 8, "worker": "w1", "level": "info", "event": "tick"}\n'
    )


def test_enum_ties_keep_first_appearance_order() -> None:
    modes = ["w:xz", "w:gz", "w:xz", "w:gz", "w:bz2", "w:bz2"]
    lines = ["step=0 job=archive mode=w:xz", "step=1 job=archive mode=w:gz"]
    lines += [f"step={i + 2} job=archive mode={m}" for i, m in enumerate(modes)]
    lines += ["step=8 job=archive mode=w:bz2", "step=9 job=archive mode=w:xz"]
    assert _run(lines) == (
        "step=0 job=archive mode=w:xz\nstep=1 job=archive mode=w:gz\n"
        f"{E} 6 lines elided (caveman): all job=archive; mode: w:xz\u00d72 w:gz\u00d72 w:bz2\u00d72; "
        f"range step=2..7 {E}\n"
        "step=8 job=archive mode=w:bz2\nstep=9 job=archive mode=w:xz\n"
    )


def test_enum_with_buckets_half_the_run_is_weak_and_shed_first() -> None:
    # 4 lines, arch: amd64×3 all×1 → 2 buckets = n/2 → weak: shed before the pkg coverage.
    pre = 'level=info msg="package verified" caller=pkgcheck.py:86'
    pk = [("adduser", "all"), ("apt", "amd64"), ("bash", "amd64"), ("curl", "amd64"),
          ("dash", "all"), ("diff", "amd64"), ("gzip", "amd64"), ("zlib", "all")]
    lines = [f"{pre} pkg={p} arch={a}" for p, a in pk]
    assert _run(lines) == (
        f"{lines[0]}\n{lines[1]}\n"
        f"{E} 4 lines elided (caveman): all level=info msg=package verified "
        f"caller=pkgcheck.py:86; pkg: 4 distinct, bash..diff {E}\n"
        f"{lines[6]}\n{lines[7]}\n"
    )
    # With room to spare the enumeration is printed (after pkg: field order).
    recs = [elision.line_fields(x) for x in lines[2:6]]
    assert elision.summarize(recs, 10_000) == (
        "all level=info msg=package verified caller=pkgcheck.py:86; pkg: 4 distinct, bash..diff; "
        "arch: amd64\u00d73 all\u00d71"
    )
    # 5 units, 2 buckets: not weak — the coverage goes first.
    recs5 = recs + [elision.line_fields(lines[6])]
    assert elision.summarize(recs5, 384) == (
        "all level=info msg=package verified caller=pkgcheck.py:86; arch: amd64\u00d74 all\u00d71"
    )
