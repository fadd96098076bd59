"""The recovery store on real SQLite files: permissions, refusals, budget, write semantics,
concurrency, migrations and the CLI's handling of store failures."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
import time

import pytest

from caveman_engine import store as ccr
from caveman_engine.store import BudgetExceeded, NotFound, Store, StoreError

from .conftest import CORPUS


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def put(s: Store, data: bytes, **kw) -> str:
    args = dict(content_type="json", compressor="json", tokens_before=100, tokens_after=20)
    args.update(kw)
    return s.put(data, **args)


# --------------------------------------------------------------------------- files


def test_new_store_files_are_private(store_dir):
    path = store_dir / "ccr.db"
    with Store(str(path)) as s:
        put(s, b"x" * 5000)
        for name in ("ccr.db", "ccr.db-wal", "ccr.db-shm"):
            assert (store_dir / name).exists()
            assert mode(store_dir / name) == 0o600, name


def test_home_directory_is_created_0700(cli, tmp_path):
    home = tmp_path / "home" / ".caveman"
    r = cli("compress", input=b"hello", env={"CAVEMAN_CCR_DB": "", "CAVEMAN_HOME": str(home)})
    assert r.returncode == 0, r.stderr
    assert mode(home) == 0o700
    assert mode(home / "ccr.db") == 0o600


def test_existing_loose_files_are_tightened(store_dir):
    path = store_dir / "ccr.db"
    with Store(str(path)) as s:
        put(s, b"y" * 5000)
    for name in ("ccr.db", "ccr.db-wal", "ccr.db-shm"):
        if (store_dir / name).exists():
            os.chmod(store_dir / name, 0o666)
    with Store(str(path)):
        for name in ("ccr.db", "ccr.db-wal", "ccr.db-shm"):
            if (store_dir / name).exists():
                assert mode(store_dir / name) == 0o600


def test_symlinked_database_is_refused(cli, store_dir, tmp_path):
    target = tmp_path / "elsewhere.db"
    target.write_bytes(b"")
    (store_dir / "ccr.db").symlink_to(target)
    r = cli("compress", input=b"hello")
    assert r.returncode == 1
    assert r.stdout == b""
    assert r.stderr.decode() == (
        f'caveman-engine compress: cannot open recovery store: secure sqlite "{store_dir / "ccr.db"}": '
        "refusing non-regular file\n"
    )


def test_group_writable_parent_is_refused(cli, tmp_path):
    loose = tmp_path / "loose"
    loose.mkdir()
    os.chmod(loose, 0o777)
    r = cli("compress", input=b"hello", env={"CAVEMAN_CCR_DB": str(loose / "ccr.db")})
    assert r.returncode == 1
    assert r.stderr.decode() == (
        f'caveman-engine compress: cannot open recovery store: sqlite parent "{loose}" is '
        'group/world writable\n'
    )
    assert not (loose / "ccr.db").exists()


def test_sticky_parent_and_symlink_to_it_are_accepted(tmp_path):
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    os.chmod(sticky, 0o777 | stat.S_ISVTX)
    with Store(str(sticky / "a.db")) as s:
        assert s.get(put(s, b"ok")) == b"ok"
    link = tmp_path / "link"
    link.symlink_to(sticky)
    with Store(str(link / "b.db")) as s:
        assert s.path == str(sticky / "b.db")  # canonical path: the resolved parent


def test_missing_parent_is_an_error(tmp_path):
    with pytest.raises(StoreError, match="resolve sqlite parent"):
        Store(str(tmp_path / "nope" / "ccr.db"))


# --------------------------------------------------------------------------- budget


@pytest.mark.parametrize("raw", ["abc", "0", "-5", "1e6", "12_000", "0x10000", "99999999999999999999"])
def test_bad_budget_is_refused(cli, raw):
    r = cli("compress", input=b"hello", env={"CAVEMAN_CCR_MAX_BYTES": raw})
    assert r.returncode == 1
    assert r.stderr == (
        b"caveman-engine compress: cannot open recovery store: CAVEMAN_CCR_MAX_BYTES must be a "
        b"positive integer\n"
    )


def test_budget_below_sqlite_minimum(cli, store_dir):
    r = cli("compress", input=b"hello", env={"CAVEMAN_CCR_MAX_BYTES": " 65535 "})
    assert r.returncode == 1
    assert r.stderr.decode() == (
        f'caveman-engine compress: cannot open recovery store: configure sqlite storage budget '
        f'"{store_dir / "ccr.db"}": '
        "budget 65535 is below SQLite minimum 65536\n"
    )


def test_budget_accepts_sign_and_spaces(store_dir, monkeypatch):
    monkeypatch.setenv("CAVEMAN_CCR_MAX_BYTES", " +70000 ")
    assert ccr.budget_from_env() == 70000


def test_budget_exceeded_passes_through_with_error_and_exit_0(cli):
    catalog = (CORPUS / "notion.tools.json").read_bytes()
    assert len(catalog) > 65536
    r = cli("compress", "--type", "toolschema", input=catalog,
            env={"CAVEMAN_CCR_MAX_BYTES": "65536"})
    assert r.returncode == 0
    assert r.stdout == catalog
    report = json.loads(r.stderr)
    assert report["error"] == "cave_ccr_budget_exceeded"
    assert report["ratio"] == 0 and report["tokens_after"] == report["tokens_before"]
    assert "recovery_handle" not in report and "method" not in report
    stats = json.loads(cli("stats", env={"CAVEMAN_CCR_MAX_BYTES": "65536"}).stdout)
    assert stats["totals"]["count"] == 0


def test_existing_handles_survive_the_cap(store_dir):
    with Store(str(store_dir / "ccr.db"), max_bytes=1 << 20) as s:
        first = b"a" * (600 << 10)
        h = put(s, first)
        with pytest.raises(BudgetExceeded):
            put(s, b"b" * (600 << 10))
        assert s.get(h) == first
        assert put(s, first) == h  # identical repeat at the cap still succeeds
        summary = s.summary()
        assert summary.storage_bytes == 614400
        assert summary.max_storage_bytes == 1048576
        assert not summary.storage_full


def test_storage_full_flag_in_stats(cli, store_dir):
    """A budget lowered below what is already stored: nothing is evicted, stats says full."""
    with Store(str(store_dir / "ccr.db")) as s:
        put(s, b"z" * 100_000)
    r = cli("stats", env={"CAVEMAN_CCR_MAX_BYTES": "65536"})
    doc = json.loads(r.stdout)
    assert doc["storage_full"] is True and doc["storage_bytes"] == 100_000
    assert doc["max_storage_bytes"] == 65536


def test_physical_cap_maps_to_budget_error(store_dir):
    """SQLite's own page cap ("database or disk is full") is reported as the budget error."""
    with Store(str(store_dir / "ccr.db")) as s:
        put(s, b"seed")
        pages = s._conn.execute("PRAGMA page_count").fetchone()[0]
        s._conn.execute(f"PRAGMA max_page_count={pages}")
        with pytest.raises(BudgetExceeded):
            put(s, os.urandom(1 << 20))


# --------------------------------------------------------------------------- write semantics


def test_handle_is_content_addressed(store_dir):
    with Store(str(store_dir / "ccr.db")) as s:
        h = put(s, b"same bytes")
        assert h == ccr.handle_for(b"same bytes") == put(s, b"same bytes")
        assert len(h) == 36 and h.startswith("ccr_")


def test_unchanged_put_does_not_touch_the_row(store_dir):
    with Store(str(store_dir / "ccr.db")) as s:
        h = put(s, b"row")
        before = s._conn.execute("SELECT created_at FROM recoveries").fetchone()
        time.sleep(0.01)
        put(s, b"row")
        assert s._conn.execute("SELECT created_at FROM recoveries").fetchone() == before
        assert s.get(h) == b"row"


def test_zero_accounting_put_keeps_measured_stats(store_dir):
    with Store(str(store_dir / "ccr.db")) as s:
        put(s, b"doc", tokens_before=100, tokens_after=25)
        put(s, b"doc", content_type="block", compressor="proxy-content",
            tokens_before=0, tokens_after=0)
        summary = s.summary()
        assert (summary.totals.count, summary.totals.tokens_before,
                summary.totals.tokens_after) == (1, 100, 25)
        assert list(summary.by_content_type) == ["json"]


def test_metadata_is_first_writer_wins(store_dir):
    with Store(str(store_dir / "ccr.db")) as s:
        h = put(s, b"ax", content_type="a11y", compressor="a11y", metadata=b'{"uids":{}}')
        put(s, b"ax", metadata=None)
        put(s, b"ax", metadata=b"other")
        assert s.get_metadata(h) == b'{"uids":{}}'
        assert s.get(h) == b"ax"


def test_summary_and_stats_json(store_dir):
    with Store(str(store_dir / "ccr.db")) as s:
        put(s, b"one", content_type="json", tokens_before=100, tokens_after=20)
        put(s, b"two", content_type="log", compressor="log", tokens_before=200, tokens_after=10)
        doc = json.loads(s.summary().to_json())
    assert doc["totals"] == {"count": 2, "tokens_before": 300, "tokens_after": 30, "ratio": 0.9}
    assert set(doc["by_content_type"]) == {"json", "log"}
    assert doc["basis"] == "inferred" and doc["storage_bytes"] == 6


def test_fresh_store_stats_bytes(cli):
    r = cli("stats")
    assert r.returncode == 0
    assert r.stdout == (
        b'{\n  "totals": {\n    "count": 0,\n    "tokens_before": 0,\n    "tokens_after": 0,\n'
        b'    "ratio": 0\n  },\n  "by_content_type": {},\n  "basis": "inferred",\n'
        b'  "max_storage_bytes": 536870912\n}\n'
    )


def test_empty_original_and_typed_objects(store_dir):
    with Store(str(store_dir / "ccr.db")) as s:
        h = put(s, b"")
        assert s.get(h) == b""
        oid = s.put_object(b"", object_type="CommandResult", session_id="s1",
                           object_id="typed-empty-output")
        assert s.retrieve(oid) == b""
        auto = s.put_object(b"exact contents", object_type="FileObservation", session_id="s1")
        assert auto.startswith("ccr_obj_") and s.get(auto) == b"exact contents"
        with pytest.raises(StoreError, match="id collision"):
            s.put_object(b"different", object_type="FileObservation", session_id="s1",
                         object_id=auto)
        with pytest.raises(StoreError, match="unknown object type"):
            s.put_object(b"x", object_type="FutureUnknownObject", session_id="s1")


def test_malformed_handles_never_reach_sql(store_dir):
    with Store(str(store_dir / "ccr.db")) as s:
        for bad in ["", "x y", "ccr_'; DROP TABLE recoveries; --", "../etc/passwd", "a" * 200]:
            with pytest.raises(ccr.InvalidHandle):
                s.retrieve(bad)
        with pytest.raises(NotFound):
            s.retrieve("ccr_00000000000000000000000000000000")


def test_retrieve_cli_errors(cli):
    r = cli("retrieve")
    assert (r.returncode, r.stderr) == (  # a usage error since the CLI rules of issue 26
        2, b"caveman-engine retrieve: missing HANDLE (usage: caveman-engine retrieve HANDLE"
           b" [QUERY])\n")
    r = cli("retrieve", "ccr_00000000000000000000000000000000")
    assert (r.returncode, r.stderr) == (1, b"caveman-engine retrieve: ccr_0000000000000000000000"
                                           b"0000000000: recovery handle not found\n")
    r = cli("retrieve", "not a handle!")
    assert (r.returncode, r.stderr) == (1, b"caveman-engine retrieve: not a handle!: malformed "
                                           b"recovery handle\n")


# --------------------------------------------------------------------------- memory, migrations


def test_memory_store(cli):
    catalog = (CORPUS / "github.tools.json").read_bytes()
    r = cli("compress", "--type", "toolschema", input=catalog, env={"CAVEMAN_CCR_DB": ":memory:"})
    assert r.returncode == 0
    handle = json.loads(r.stderr)["recovery_handle"]
    with Store(":memory:") as s:
        assert s.get(put(s, catalog)) == catalog
    # ephemeral: another process cannot see it
    r = cli("retrieve", handle, env={"CAVEMAN_CCR_DB": ":memory:"})
    assert r.returncode == 1


REFERENCE_SCHEMA = """
CREATE TABLE recoveries (handle TEXT PRIMARY KEY, created_at TEXT NOT NULL,
  content_type TEXT NOT NULL, compressor TEXT NOT NULL, tokens_before INTEGER NOT NULL,
  tokens_after INTEGER NOT NULL, original BLOB NOT NULL{metadata});
CREATE TABLE typed_objects (object_id TEXT PRIMARY KEY, object_type TEXT NOT NULL,
  content_hash TEXT NOT NULL, source TEXT NOT NULL, created_at TEXT NOT NULL,
  repository_state TEXT NOT NULL, session_id TEXT NOT NULL, transform_version TEXT NOT NULL,
  currentness TEXT NOT NULL, lifecycle TEXT NOT NULL, dependencies_json TEXT NOT NULL,
  original_byte_length INTEGER NOT NULL, stored_byte_length INTEGER NOT NULL, data BLOB NOT NULL);
"""


@pytest.mark.parametrize("with_metadata", [True, False])
def test_store_created_by_the_reference_is_adopted(store_dir, with_metadata):
    path = store_dir / "ccr.db"
    conn = sqlite3.connect(path)
    conn.executescript(REFERENCE_SCHEMA.format(metadata=", metadata BLOB" if with_metadata else ""))
    handle = ccr.handle_for(b"old original")
    conn.execute("INSERT INTO recoveries VALUES (?, '2026-08-08T12:00:00Z', 'json', 'json', 5, 2, ?"
                 + (", NULL)" if with_metadata else ")"), (handle, b"old original"))
    conn.commit()
    conn.close()
    os.chmod(path, 0o600)
    with Store(str(path)) as s:
        assert s.get(handle) == b"old original"
        cols = [r[1] for r in s._conn.execute("PRAGMA table_info(recoveries)")]
        assert cols[-1] == "metadata" and cols.count("metadata") == 1
        assert s._conn.execute("PRAGMA user_version").fetchone()[0] == 3
        put(s, b"new", metadata=b"m")
    with Store(str(path)) as s:  # reopening applies nothing twice
        assert s.get_metadata(ccr.handle_for(b"new")) == b"m"


def test_schema_matches_the_reference_columns(store_dir):
    with Store(str(store_dir / "ccr.db")) as s:
        rec = [r[1] for r in s._conn.execute("PRAGMA table_info(recoveries)")]
        obj = [r[1] for r in s._conn.execute("PRAGMA table_info(typed_objects)")]
        idx = [r[1] for r in s._conn.execute("PRAGMA index_list(typed_objects)")]
    assert rec == ["handle", "created_at", "content_type", "compressor", "tokens_before",
                   "tokens_after", "original", "metadata"]
    assert obj[0] == "object_id" and obj[-1] == "data" and len(obj) == 14
    assert "typed_objects_session_created" in idx


def test_pragmas(store_dir):
    with Store(str(store_dir / "ccr.db")) as s:
        q = lambda p: s._conn.execute(f"PRAGMA {p}").fetchone()[0]  # noqa: E731
        assert q("journal_mode") == "wal"
        assert q("busy_timeout") == 5000
        assert q("max_page_count") == 131072
        assert q("wal_autocheckpoint") == 8192
        assert q("journal_size_limit") == 67108864


def test_rfc3339_nano():
    assert ccr.rfc3339_nano(1_786_190_400_000_000_123) == "2026-08-08T12:00:00.000000123Z"
    assert ccr.rfc3339_nano(1_786_190_400_000_000_000) == "2026-08-08T12:00:00Z"
    assert ccr.rfc3339_nano(1_786_190_400_500_000_000) == "2026-08-08T12:00:00.5Z"


def test_busy_retry_schedule():
    """Fake clock: a 100 ms budget, always busy → exactly 3 calls, 100 ms of sleep."""
    now = [0.0]
    slept = []

    def sleep(d):
        slept.append(d)
        now[0] += d

    calls = []

    def busy():
        calls.append(1)
        raise sqlite3.OperationalError("database is locked")

    with pytest.raises(sqlite3.OperationalError):
        ccr.retry_busy(busy, budget=0.1, sleep=sleep, clock=lambda: now[0])
    assert len(calls) == 3
    assert sum(slept) == pytest.approx(0.1)

    def other():
        raise sqlite3.OperationalError("no such table: x")

    slept.clear()
    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        ccr.retry_busy(other, budget=0.1, sleep=sleep, clock=lambda: now[0])
    assert slept == []


# --------------------------------------------------------------------------- concurrency, failure


WRITER = """
import sys
from caveman_engine.store import Store
s = Store(sys.argv[1])
tag = sys.argv[2].encode()
for i in range(int(sys.argv[3])):
    s.put(tag + b"-%d" % i, content_type="text", compressor="text",
          tokens_before=10, tokens_after=5)
    s.put(b"shared-%d" % (i % 5), content_type="text", compressor="text",
          tokens_before=10, tokens_after=5)
print("done")
"""


def test_two_processes_writing_at_once(store_dir):
    path = str(store_dir / "ccr.db")
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, path, tag, "60"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for tag in ("alpha", "beta")
    ]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert out == b"done\n"
    with Store(path) as s:
        for tag in ("alpha", "beta"):
            for i in range(60):
                data = f"{tag}-{i}".encode()
                assert s.get(ccr.handle_for(data)) == data
        assert s.summary().totals.count == 125
        assert s._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_store_write_failure_passes_through_as_unavailable(cli, store_dir):
    """Another process holds the write lock past the 5 s busy timeout: the original cannot be
    stored, so nothing lossy is emitted — original bytes out, error field, exit 0."""
    path = store_dir / "ccr.db"
    Store(str(path)).close()
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1], isolation_level=None);"
         "c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); time.sleep(30)", str(path)],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout.readline() == b"locked\n"
        catalog = (CORPUS / "github.tools.json").read_bytes()
        r = cli("compress", "--type", "toolschema", input=catalog)
    finally:
        holder.kill()
        holder.wait()
    assert r.returncode == 0
    assert r.stdout == catalog
    report = json.loads(r.stderr)
    assert report["error"] == "cave_ccr_unavailable"
    assert "recovery_handle" not in report and report["ratio"] == 0


SAME_PROCESS = """
import sys
from caveman_engine.store import Store
stores = [Store(sys.argv[1]) for _ in range(3)]
for i in range(40):
    for s in stores:
        s.put(b"%s-%d" % (sys.argv[2].encode(), i), content_type="t", compressor="t",
              tokens_before=2, tokens_after=1)
    if i % 10 == 0:
        Store(sys.argv[1]).close()  # opening and closing must not drop the others' locks
print("done")
"""


def test_several_stores_per_process_keep_their_locks(store_dir):
    """Opening a store never opens/closes descriptors of a live database file: that would
    release this process's POSIX locks and let another process reset the WAL index (the
    symptom was SIGBUS in COMMIT)."""
    path = str(store_dir / "ccr.db")
    procs = [subprocess.Popen([sys.executable, "-c", SAME_PROCESS, path, tag],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for tag in ("x", "y")]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert (p.returncode, out) == (0, b"done\n"), err
    with Store(path) as s:
        assert s._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert s.summary().totals.count == 80


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to chown")
def test_database_owned_by_another_user_is_refused(store_dir):
    path = store_dir / "ccr.db"
    path.write_bytes(b"")
    os.chown(path, 65534, 65534)
    with pytest.raises(StoreError, match="owned by another user"):
        Store(str(path))


# --------------------------------------------------------------------------- the budget counter (issue 27.7)


def real_used(path) -> tuple[int, int | None]:
    """(bytes the originals hold, summed over the tables; the ccr_usage row), read with a
    connection of its own."""
    c = sqlite3.connect(path)
    try:
        total = c.execute(
            "SELECT (SELECT COALESCE(SUM(LENGTH(original) + COALESCE(LENGTH(metadata), 0)), 0)"
            " FROM recoveries) + (SELECT COALESCE(SUM(LENGTH(data) + LENGTH(dependencies_json)),"
            " 0) FROM typed_objects)").fetchone()[0]
        row = c.execute("SELECT used_bytes FROM ccr_usage WHERE id = 1").fetchone()
    finally:
        c.close()
    return total, None if row is None else row[0]


def test_put_reads_the_counter_instead_of_summing_the_store(store_dir):
    """Every put used to run SUM(LENGTH(...)) over both tables under the write lock."""
    with Store(str(store_dir / "ccr.db")) as s:
        for i in range(20):
            put(s, b"filler %d" % i)
        seen: list[str] = []
        s._conn.set_trace_callback(seen.append)
        put(s, b"a new original")
        put(s, b"a new original", metadata=b"m")
        s.put_object(b"obj", object_type="SearchResult", session_id="x")
        s._conn.set_trace_callback(None)
    assert seen and not [q for q in seen if "SUM(" in q.upper()], seen


def test_the_counter_equals_the_tables_after_a_mixed_sequence(store_dir):
    path = str(store_dir / "ccr.db")
    steps = []

    def check(what):
        total, row = real_used(path)
        steps.append((what, total, row))
        assert row == total, steps

    with Store(path, max_bytes=1 << 20) as s:
        check("new store")
        a = put(s, b"a" * 1000)
        check("put")
        put(s, b"a" * 1000)
        check("unchanged put")
        put(s, b"a" * 1000, metadata=b"meta" * 10)
        check("same original, metadata added")
        put(s, b"a" * 1000, metadata=b"other", tokens_before=0, tokens_after=0)
        check("same original, first metadata kept")
        put(s, b"")
        check("empty original")
        put(s, "é".encode() * 300, content_type="log", compressor="log")
        check("multibyte original")
        s.put_object(b"o" * 500, object_type="SearchResult", session_id="s",
                     dependencies=["ccr_x", "é"])
        check("typed object")
        with pytest.raises(BudgetExceeded):
            put(s, b"b" * (1 << 20))
        check("refused put")
        s.purge(ccr.Selection(frozenset({"log"})))
        check("purge by type")
        c = sqlite3.connect(path)  # another Caveman tool writing the same file
        c.execute("INSERT INTO recoveries VALUES ('ccr_other', '2026-01-01T00:00:00Z', 'text',"
                  " 'text', 1, 1, ?, ?)", (b"x" * 333, b"y" * 7))
        c.execute("UPDATE recoveries SET original = ? WHERE handle = 'ccr_other'", (b"z" * 9,))
        c.execute("DELETE FROM typed_objects")
        c.commit()
        c.close()
        check("writes by another tool")
        s.vacuum()
        check("vacuum")
        s.purge(ccr.Selection())
        check("purge everything")
        assert real_used(path) == (0, 0)
        put(s, b"after the purge")
        check("put after purge")
        assert s.summary().storage_bytes == len(b"after the purge")
        assert s.info().kept_bytes == len(b"after the purge")


COUNTER_WRITER = """
import os, sys
from caveman_engine import store as ccr
s = ccr.Store(sys.argv[1])
tag = sys.argv[2]
for i in range(int(sys.argv[3])):
    data = ("%s-%d " % (tag, i)).encode() * (1 + i % 17)
    s.put(data, content_type=tag, compressor="t", tokens_before=9, tokens_after=1,
          metadata=b"m" * (i % 3))
    s.put(b"shared-%d" % (i % 7), content_type="shared", compressor="t", tokens_before=9,
          tokens_after=1, metadata=b"first" if tag == "a" else b"second")
    if i % 5 == 0:
        s.put_object(os.urandom(i % 50), object_type="SearchResult", session_id=tag)
    if i % 25 == 24:
        s.purge(ccr.Selection(frozenset({tag})))
print("done")
"""


def test_the_counter_is_exact_with_two_writer_processes(store_dir):
    path = str(store_dir / "ccr.db")
    Store(path).close()
    procs = [subprocess.Popen([sys.executable, "-c", COUNTER_WRITER, path, tag, "120"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for tag in ("a", "b")]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert (p.returncode, out) == (0, b"done\n"), err
    total, row = real_used(path)
    assert total > 0 and row == total
    with Store(path) as s:
        assert s.summary().storage_bytes == total


def test_a_counter_row_deleted_by_hand_is_rebuilt(store_dir):
    path = str(store_dir / "ccr.db")
    with Store(path) as s:
        put(s, b"one" * 100)
    c = sqlite3.connect(path)
    c.execute("DELETE FROM ccr_usage")
    c.commit()
    c.close()
    with Store(path) as s:
        assert s.summary().storage_bytes == 300  # counted from the tables
        assert real_used(path) == (300, None)
        put(s, b"two" * 10)
    assert real_used(path) == (330, 330)


def test_a_reference_store_gets_an_exact_counter(store_dir):
    path = store_dir / "ccr.db"
    conn = sqlite3.connect(path)
    conn.executescript(REFERENCE_SCHEMA.format(metadata=", metadata BLOB"))
    conn.execute("INSERT INTO recoveries VALUES ('ccr_old', '2026-08-08T12:00:00Z', 'json',"
                 " 'json', 5, 2, ?, ?)", (b"old original", b"md"))
    conn.commit()
    conn.close()
    os.chmod(path, 0o600)
    with Store(str(path)) as s:
        assert s.summary().storage_bytes == len(b"old original") + 2
    assert real_used(str(path)) == (14, 14)
