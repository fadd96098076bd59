"""Every conformance vector through the real console script: exact stdout, exact stderr (the
report, handles included), exact exit code, each against a fresh recovery store. Whenever a
case yields a handle, ``retrieve`` must give the input back byte for byte.

Every case, `code` included, is compared byte for byte; none is skipped or expected to fail.
"""

from __future__ import annotations

import json

import pytest

from .conftest import CONFORMANCE


def _cases():
    for suite in ("cli", "toolschema", "general", "general2"):
        path = CONFORMANCE / suite / "cases.jsonl"
        for line in path.read_text().splitlines():
            case = json.loads(line)
            case["suite"] = suite
            yield pytest.param(case, id=f"{suite}/{case['case']}:{' '.join(case['args'])}")


@pytest.mark.parametrize("case", list(_cases()))
def test_vector(case, cli):
    folder = CONFORMANCE / case["suite"]
    data = (folder / case["case"]).read_bytes()
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
