"""Strict mode (``CAVEMAN_STRICT=1``, on for the whole test suite): a compressor that raises is a
crash the tests and fuzzers see; without it users keep the fail-closed pass-through."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from caveman_engine.compressors import CompressorCrash, log
from caveman_engine.engine import Engine
from caveman_engine.store import Store

LOG = b"".join(b"2026-06-01 12:00:%02d INFO served request id=%d\n" % (i % 60, i)
               for i in range(200))


def _boom(data: bytes):
    raise ZeroDivisionError("injected")


@pytest.fixture
def raising_log(monkeypatch):
    monkeypatch.setattr(log, "compress", _boom)


def test_suite_runs_strict():
    assert os.environ.get("CAVEMAN_STRICT") == "1"


def test_strict_mode_propagates_a_crash(raising_log):
    engine = Engine(Store(":memory:"))
    with pytest.raises(CompressorCrash, match="the log compressor raised ZeroDivisionError"):
        engine.compress(LOG, "log")
    with pytest.raises(CompressorCrash):
        engine.compress(LOG)  # detected as log


def test_users_keep_the_pass_through(raising_log, monkeypatch):
    monkeypatch.delenv("CAVEMAN_STRICT")
    result = Engine(Store(":memory:")).compress(LOG, "log")
    assert result.output == LOG
    assert result.recovery_handle is None


def test_strict_mode_reaches_the_catalog_toolkit(monkeypatch):
    from caveman_engine.catalog import diff
    from caveman_engine.compressors import toolschema

    monkeypatch.setattr(toolschema, "compress", _boom)
    with pytest.raises(CompressorCrash):
        diff.run_compressor("toolschema", b'{"tools":[]}')
    monkeypatch.delenv("CAVEMAN_STRICT")
    assert diff.run_compressor("toolschema", b'{"tools":[]}') is None


# The real console script's entry point, with the log compressor replaced by one that raises.
_RUN = """
import sys
from caveman_engine.compressors import log
def boom(data):
    raise ZeroDivisionError("injected")
log.compress = boom
sys.argv = ["caveman-engine", "compress", "--type", "log"]
from caveman_engine.launcher import main
main()
"""


@pytest.mark.parametrize("strict", ["1", None])
def test_console_script_entry(tmp_path, strict):
    env = {k: v for k, v in os.environ.items() if k != "CAVEMAN_STRICT"}
    env["CAVEMAN_CCR_DB"] = str(tmp_path / "ccr.db")
    if strict:
        env["CAVEMAN_STRICT"] = strict
    r = subprocess.run([sys.executable, "-c", _RUN], input=LOG, capture_output=True, env=env,
                       timeout=60)
    if strict:
        assert r.returncode == 1
        assert r.stdout == b""
        assert r.stderr.decode().splitlines()[-1] == (
            "caveman-engine compress: the log compressor raised ZeroDivisionError: injected")
    else:
        assert r.returncode == 0
        assert r.stdout == LOG
        report = json.loads(r.stderr)
        assert report["content_type"] == "log" and "recovery_handle" not in report
