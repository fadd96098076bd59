"""Reusing compress results (caveman_engine.results) through the real console script: a
repeated request gives exactly the bytes of a fresh run, changed options are never served from
the reuse, and every handle it prints still retrieves."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest

from .conftest import CORPUS

CATALOG = (CORPUS / "github.tools.json").read_bytes()
ROWS = json.dumps({"rows": [{"id": i, "name": f"user{i}", "ok": True} for i in range(60)]}).encode()
TABLE = json.dumps([{"id": i, "name": f"user{i}", "ok": True} for i in range(6)]).encode()
TITLED = (CORPUS / "time.tools.json").read_bytes()
BIG = (CORPUS / "zereight-gitlab.tools.json").read_bytes()


@pytest.fixture
def cache_dir(tmp_path):
    d = tmp_path / "cache"
    d.mkdir(mode=0o700)
    return d


@pytest.fixture
def run(cli, cache_dir):
    def go(*args, input=b"", env=None):
        return cli(*args, input=input, env={"CAVEMAN_CACHE_DIR": str(cache_dir), **(env or {})})
    return go


def entries(cache_dir):
    d = cache_dir / "results"
    return sorted(p for p in d.iterdir()) if d.exists() else []


@pytest.mark.parametrize("args, data", [
    (["compress", "--type", "toolschema"], CATALOG),
    (["compress", "--type", "toolschema-max"], CATALOG),
    (["compress"], ROWS),
    (["compress", "--type", "log"], b"plain\n"),  # a pass-through is kept too
])
def test_repeat_is_byte_identical_to_a_fresh_run(run, args, data):
    first = run(*args, input=data)
    again = run(*args, input=data)
    fresh = run(*args, input=data, env={"CAVEMAN_RESULT_CACHE": "0"})
    assert first.returncode == again.returncode == fresh.returncode == 0
    assert (again.stdout, again.stderr) == (first.stdout, first.stderr) == (fresh.stdout,
                                                                            fresh.stderr)


def test_the_repeat_is_served_from_the_kept_result(run, cache_dir):
    from caveman_engine.results import Kept

    first = run("compress", "--type", "toolschema", input=CATALOG)
    [entry] = entries(cache_dir)
    kept = Kept.parse(entry.read_bytes())
    kept.report = kept.report.replace(b'"basis":"inferred"', b'"basis":"MARK"')
    entry.write_bytes(kept.to_bytes())
    again = run("compress", "--type", "toolschema", input=CATALOG)
    assert again.stdout == first.stdout and b'"basis":"MARK"' in again.stderr


def test_a_tampered_output_is_not_served(run, cache_dir):
    first = run("compress", "--type", "toolschema", input=CATALOG)
    [entry] = entries(cache_dir)
    entry.write_bytes(entry.read_bytes()[:-1] + b"X")
    again = run("compress", "--type", "toolschema", input=CATALOG)
    assert (again.stdout, again.stderr) == (first.stdout, first.stderr)


def test_an_entry_others_can_write_is_ignored(run, cache_dir):
    run("compress", "--type", "toolschema", input=CATALOG)
    [entry] = entries(cache_dir)
    text = entry.read_bytes().replace(b'"basis":"inferred"', b'"basis":"X"')
    entry.write_bytes(text)
    entry.chmod(0o666)
    again = run("compress", "--type", "toolschema", input=CATALOG)
    assert b'"basis":"inferred"' in again.stderr


@pytest.mark.parametrize("env_a, env_b, args, data", [
    ({}, {"CAVE_ENGINE_TOON": "best-of"}, ["compress"], TABLE),
    ({}, {"CAVEMAN_SAFE_RULES": "-titles"}, ["compress", "--type", "toolschema-safe"], TITLED),
])
def test_a_changed_option_is_not_served_from_the_reuse(run, env_a, env_b, args, data):
    a = run(*args, input=data, env=env_a)
    b = run(*args, input=data, env=env_b)
    b_fresh = run(*args, input=data, env={**env_b, "CAVEMAN_RESULT_CACHE": "0"})
    assert (b.stdout, b.stderr) == (b_fresh.stdout, b_fresh.stderr)
    assert b.stdout != a.stdout


def test_another_type_is_another_result(run):
    a = run("compress", "--type", "toolschema", input=CATALOG)
    b = run("compress", "--type", "toolschema-safe", input=CATALOG)
    assert a.stdout != b.stdout
    assert json.loads(b.stderr)["content_type"] == "toolschema-safe"


def test_original_deleted_behind_the_cache_is_stored_again(run, store_dir):
    first = run("compress", "--type", "toolschema", input=CATALOG)
    handle = json.loads(first.stderr)["recovery_handle"]
    with sqlite3.connect(store_dir / "ccr.db") as db:
        db.execute("DELETE FROM recoveries WHERE handle = ?", (handle,))
    assert run("retrieve", handle).returncode == 1
    again = run("compress", "--type", "toolschema", input=CATALOG)
    assert (again.stdout, again.stderr) == (first.stdout, first.stderr)
    assert run("retrieve", handle).stdout == CATALOG


def test_no_room_for_the_original_is_reported_as_usual(run, tmp_path):
    run("compress", "--type", "toolschema", input=BIG)
    other = tmp_path / "other"
    other.mkdir(mode=0o700)
    env = {"CAVEMAN_CCR_DB": str(other / "ccr.db"), "CAVEMAN_CCR_MAX_BYTES": "65536"}
    r = run("compress", "--type", "toolschema", input=BIG, env=env)
    report = json.loads(r.stderr)
    assert report["error"] == "cave_ccr_budget_exceeded" and r.stdout == BIG


def test_unknown_types_are_not_kept(run, cache_dir):
    run("compress", "--type", "no-such-type", input=b"abc")
    assert entries(cache_dir) == []
    r = run("compress", "--type", "no-such-type", "--strict", input=b"abc")
    assert r.returncode == 2


def test_the_cache_keeps_a_bounded_number_of_entries(run, cache_dir, monkeypatch):
    from caveman_engine import results

    cache = results.ResultCache(cache_dir / "results")
    os.makedirs(cache.directory, mode=0o700)
    for i in range(results.MAX_ENTRIES + 5):
        (cache.directory / f"{i:064x}").write_bytes(b"x")
    cache._trim()
    assert len(list(cache.directory.iterdir())) == results.MAX_ENTRIES


def test_memory_store_keeps_nothing(cli, tmp_path):
    r = cli("compress", "--type", "toolschema", input=CATALOG,
            env={"CAVEMAN_CCR_DB": ":memory:", "CAVEMAN_CACHE_DIR": None})
    assert r.returncode == 0
    assert not any(tmp_path.rglob("results"))


