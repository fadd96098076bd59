"""Every conformance vector through the real console script: exact stdout, exact stderr (the
report, handles included), exact exit code, each against a fresh recovery store. Whenever a
case yields a handle, ``retrieve`` must give the input back byte for byte.

A vector whose expected output needs a compressor that does not exist yet is an expected
failure naming that compressor; everything else (detection, pass-through) must already pass.
Every case, `code` included, is compared byte for byte.
"""

from __future__ import annotations

import json

import pytest

from caveman_engine import registry

from .conftest import CONFORMANCE


# Cases whose reference rule is not found yet: strict expected failures (a fix turns them into
# an XPASS, which fails the suite until the entry is removed). Each says what still differs.
OPEN_DRIFT = {
    "general2/a11y__nodejs-api-index.json.in:compress":
        "json elision: the reference keeps $.nodes[222, 288-291, 420, 451, 468, 476, 477, 484, "
        "485, 622] and drops [687]. Its output is reproduced byte for byte when 222, 288, 417 "
        "and two of 289-291 are kept before the seeds are sampled (the other differences "
        "follow from the seed sample moving by five). Each is forced: 222 is the only unit the "
        "reference keeps that can move the seeds between 155 and 224 by one (seeds 232, 240 "
        "are needed); 288 and 289 or 290 are otherwise represented by the promoted 83 and 19; "
        "the fifth only has to make link 489 (which represents 687) a seed. No rule found so "
        "far keeps exactly those: anomalies, seams on any field (chromeRole.value seams with a "
        "mean-shift test match this vector but break forms-sgml, table-difflib and valgrind), "
        "online, rolling or grouped anomalies, per-chunk scopes, class lifetimes, hash "
        "sampling, seed-miss counts",
}


def _cases():
    for suite in ("cli", "toolschema", "general", "general2"):
        path = CONFORMANCE / suite / "cases.jsonl"
        for n, line in enumerate(path.read_text().splitlines()):
            case = json.loads(line)
            case["suite"] = suite
            ident = f"{suite}/{case['case']}:{' '.join(case['args'])}"
            marks = ([pytest.mark.xfail(reason=OPEN_DRIFT[ident], strict=True)]
                     if ident in OPEN_DRIFT else [])
            yield pytest.param(case, id=ident, marks=marks)


def waiting_on(case: dict) -> str | None:
    """The compressor a transformed expectation needs, if it is not implemented yet."""
    if not case["stderr"].startswith("{"):
        return None
    report = json.loads(case["stderr"])
    if "recovery_handle" not in report:
        return None
    ct = report["content_type"]
    e = registry.entry(ct)
    if e is None or not e.implemented:
        return ct
    return None


@pytest.mark.parametrize("case", list(_cases()))
def test_vector(case, cli):
    folder = CONFORMANCE / case["suite"]
    data = (folder / case["case"]).read_bytes()
    missing = waiting_on(case)
    if missing:
        pytest.xfail(f"waiting on the {missing} compressor")
    r = cli(*case["args"], input=data)
    expected_out = data if case["stdout"] is None else (folder / case["stdout"]).read_bytes()
    assert r.returncode == case["exit"], r.stderr
    assert r.stderr.decode() == case["stderr"]
    assert r.stdout == expected_out
    if b'"recovery_handle"' in r.stderr:
        handle = json.loads(r.stderr)["recovery_handle"]
        back = cli("retrieve", handle)
        assert back.returncode == 0
        assert back.stdout == data


def test_waiting_list_names_only_missing_compressors():
    """The vectors still waiting, grouped by compressor (printed with -rA); each group
    disappears as its compressor lands."""
    waiting: dict[str, int] = {}
    for p in _cases():
        ct = waiting_on(p.values[0])
        if ct:
            waiting[ct] = waiting.get(ct, 0) + 1
    for ct in waiting:
        assert not registry.entry(ct).implemented
    print("vectors waiting on a compressor:", waiting or "none")
