"""The recovery store on PostgreSQL (issue 17), against a real server the session starts
(``tests/pg.py``). The store semantics of ``test_store.py`` run on both backends; the CLI round
trips run through the real console script with ``CAVEMAN_CCR_DB`` set to a path or a URL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from caveman_engine import store as ccr
from caveman_engine.store import BudgetExceeded, NotFound, Store, StoreError, open_store

from .conftest import console_script
from .pg import PASSWORD, pg_server, pg_url  # noqa: F401 - fixtures

LOG = b"".join(
    b"2026-05-01T12:00:%02dZ INFO worker=pg request served path=/api/v1/items status=200 id=%d\n"
    % (i % 60, i) for i in range(40))


def put(s, data: bytes, **kw) -> str:
    args = dict(content_type="json", compressor="json", tokens_before=100, tokens_after=20)
    args.update(kw)
    return s.put(data, **args)


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request, store_dir):
    """A factory of stores of one backend, all on the same (fresh) database."""
    made = []
    if request.param == "sqlite":
        where = str(store_dir / "ccr.db")
    else:
        where = request.getfixturevalue("pg_url")

    def make(**kw):
        s = open_store(where) if not kw else Store(where, **kw)
        made.append(s)
        return s

    make.kind = request.param
    make.where = where
    yield make
    for s in made:
        s.close()


# --------------------------------------------------------------------------- semantics


def test_put_get_byte_exact_and_content_addressed(backend):
    s = backend()
    every_byte = bytes(range(256)) * 300 + b"\x00"
    for data in (b"", b"\x00", every_byte, "ünïcødé\u2028".encode(), os.urandom(70_000)):
        h = put(s, data)
        assert h == ccr.handle_for(data) == put(s, data)
        got = s.get(h)
        assert type(got) is bytes and got == data
        assert s.retrieve(h) == data


def test_unchanged_put_does_not_touch_the_row(backend):
    s = backend()
    h = put(s, b"row")
    before = [e.created_at for e in s.entries()]
    time.sleep(0.01)
    put(s, b"row")
    assert [e.created_at for e in s.entries()] == before
    put(s, b"row", tokens_after=19)  # changed accounting: the row is rewritten
    assert [e.created_at for e in s.entries()] != before
    assert s.get(h) == b"row"


def test_zero_accounting_put_keeps_measured_stats(backend):
    s = backend()
    put(s, b"doc", tokens_before=100, tokens_after=25)
    put(s, b"doc", content_type="block", compressor="proxy-content", tokens_before=0,
        tokens_after=0)
    summary = s.summary()
    assert (summary.totals.count, summary.totals.tokens_before,
            summary.totals.tokens_after) == (1, 100, 25)
    assert list(summary.by_content_type) == ["json"]


def test_metadata_is_first_writer_wins(backend):
    s = backend()
    h = put(s, b"ax", content_type="a11y", compressor="a11y", metadata=b'{"uids":{}}')
    put(s, b"ax", metadata=None)
    put(s, b"ax", metadata=b"other")
    assert s.get_metadata(h) == b'{"uids":{}}'
    assert s.get(h) == b"ax"
    plain = put(s, b"no meta")
    assert s.get_metadata(plain) is None
    with pytest.raises(NotFound):
        s.get_metadata("ccr_missing")


def test_budget_refuses_new_and_keeps_existing(backend):
    s = backend(max_bytes=1 << 20)
    first = b"a" * (600 << 10)
    h = put(s, first)
    with pytest.raises(BudgetExceeded):
        put(s, b"b" * (600 << 10))
    assert s.get(h) == first
    assert put(s, first) == h  # identical repeat at the cap still succeeds
    summary = s.summary()
    assert (summary.storage_bytes, summary.max_storage_bytes) == (614400, 1048576)
    assert not summary.storage_full
    with pytest.raises(BudgetExceeded):
        s.put_object(b"c" * (600 << 10), object_type="FileObservation", session_id="s")
    if s.backend == "postgresql":  # (SQLite's page cap, its backstop, is hit before)
        exact = (1 << 20) - 614400  # equality with the cap is allowed
        put(s, b"d" * exact)
        assert s.summary().storage_full and s.used_bytes_row() == 1 << 20
        with pytest.raises(BudgetExceeded):
            put(s, b"e")


def test_empty_original_and_typed_objects(backend):
    s = backend()
    h = put(s, b"")
    assert s.get(h) == b""
    oid = s.put_object(b"", object_type="CommandResult", session_id="s1",
                       object_id="typed-empty-output")
    assert s.retrieve(oid) == b""
    auto = s.put_object(b"exact contents", object_type="FileObservation", session_id="s1",
                        dependencies=["src/auth.ts", "package-lock.json"])
    assert auto.startswith("ccr_obj_") and s.get(auto) == b"exact contents"
    assert s.put_object(b"exact contents", object_type="FileObservation", session_id="s1",
                        dependencies=["src/auth.ts", "package-lock.json"]) == auto
    with pytest.raises(StoreError, match="id collision"):
        s.put_object(b"different", object_type="FileObservation", session_id="s1",
                     object_id=auto)
    assert s.get(auto) == b"exact contents"
    with pytest.raises(StoreError, match="unknown object type"):
        s.put_object(b"x", object_type="FutureUnknownObject", session_id="s1")
    with pytest.raises(StoreError, match="session_id is required"):
        s.put_object(b"x", object_type="FileObservation", session_id=" ")


def test_malformed_handles_never_reach_sql(backend):
    s = backend()
    for bad in ["", "x y", "ccr_'; DROP TABLE recoveries; --", "../etc/passwd", "a" * 200]:
        with pytest.raises(ccr.InvalidHandle):
            s.retrieve(bad)
    with pytest.raises(NotFound):
        s.retrieve("ccr_00000000000000000000000000000000")


def test_persists_across_reopen(backend):
    s = backend()
    h = put(s, b"kept")
    oid = s.put_object(b"contract", object_type="TaskContract", session_id="s")
    s.close()
    again = backend()
    assert again.get(h) == b"kept" and again.retrieve(oid) == b"contract"


def test_management_entries_purge_info(backend):
    s = backend()
    logs = [put(s, b"log %d" % i * 50, content_type="log", compressor="log") for i in range(3)]
    js = put(s, b"json" * 30, metadata=b"meta")
    oid = s.put_object(b'{"path": "a.py"}', object_type="FileObservation", session_id="s1")
    entries = s.entries()
    assert [e.key for e in entries if e.kind == "blob"] == sorted(
        [e.key for e in entries if e.kind == "blob"],
        key=lambda k: next(e.created_at for e in entries if e.key == k))
    assert {e.key for e in entries} == {*logs, js, oid}
    meta_entry = next(e for e in entries if e.key == js)
    assert s.read(meta_entry) == b"json" * 30 and s.read_metadata(meta_entry) == b"meta"
    info = s.info()
    assert info.count == 5 and info.blobs["log"].count == 3
    assert info.kept_bytes == sum(e.kept_bytes for e in entries)
    sel = ccr.Selection(frozenset({"log"}))
    plan = s.purge(sel, dry_run=True)
    assert plan.count == 3 and s.summary().totals.count == 4
    done = s.purge(sel)
    assert done.count == 3 and done.kept_after == done.kept_before - plan.bytes
    assert s.summary().storage_bytes == done.kept_after
    for h in logs:
        with pytest.raises(NotFound):
            s.get(h)
    assert s.get(js) == b"json" * 30
    if s.backend == "postgresql":
        assert s.used_bytes_row() == done.kept_after
    s.vacuum()
    assert s.get(js) == b"json" * 30
    if s.backend == "postgresql":
        assert s.used_bytes_row() == done.kept_after


def test_stats_json_is_identical_on_both_backends(store_dir, pg_url):
    docs = []
    for where in (str(store_dir / "ccr.db"), pg_url):
        with Store(where) as s:
            put(s, b"one", content_type="json", tokens_before=100, tokens_after=20)
            put(s, b"two", content_type="log", compressor="log", tokens_before=200,
                tokens_after=10, metadata=b"mm")
            put(s, b"one", content_type="block", compressor="proxy-content", tokens_before=0,
                tokens_after=0)
            s.put_object(b"obj", object_type="SearchResult", session_id="x",
                         dependencies=["a"])
            docs.append(s.summary().to_json())
    assert docs[0] == docs[1]
    assert json.loads(docs[1])["storage_bytes"] == 3 + 3 + 2 + 3 + len('["a"]')


# --------------------------------------------------------------------------- PostgreSQL only


@pytest.mark.parametrize("url,shown", [
    ("postgresql://u:secret@h:5432/db", "postgresql://u:***@h:5432/db"),
    ("postgres://u@h/db?password=secret&sslmode=require",
     "postgres://u@h/db?password=***&sslmode=require"),
    ("postgresql://h/db", "postgresql://h/db"),
    ("postgresql://u:p%40ss@h1,h2:5/db?sslpassword=x", "postgresql://u:***@h1,h2:5/db?sslpassword=***"),
])
def test_mask_url(url, shown):
    assert ccr.mask_url(url) == shown
    assert ccr.is_postgres_url(url) and not ccr.is_postgres_url("/tmp/postgresql.db")


def test_cache_dir_is_never_derived_from_the_url(tmp_path, monkeypatch, store_dir):
    """The tokenizer's rank cache: beside a SQLite file; for PostgreSQL, the Caveman home
    (created 0700), not a directory named after the URL."""
    from caveman_engine.store_pg import PgStore

    home = tmp_path / "home" / ".caveman"
    monkeypatch.setenv("CAVEMAN_HOME", str(home))
    with Store(str(store_dir / "ccr.db")) as s:
        assert s.cache_dir() == store_dir
    with Store(":memory:") as s:
        assert s.cache_dir() is None and not home.exists()
    s = PgStore("postgresql://u@127.0.0.1:1/db")
    assert s.cache_dir() == home and (home.stat().st_mode & 0o777) == 0o700
    s.close()


def test_connection_defaults_and_libpq_overrides():
    from caveman_engine.store_pg import connection_params

    p = connection_params("postgresql://u@h/db")
    assert p["connect_timeout"] == "5" and p["tcp_user_timeout"] == "15000"
    assert p["options"] == "-c statement_timeout=15000"
    p = connection_params("postgresql://u@h/db?connect_timeout=9&sslmode=verify-full"
                          "&sslrootcert=/etc/ca.pem&options=-c%20statement_timeout%3D100")
    assert (p["connect_timeout"], p["sslmode"], p["sslrootcert"], p["options"]) == (
        "9", "verify-full", "/etc/ca.pem", "-c statement_timeout=100")
    with pytest.raises(StoreError, match="invalid PostgreSQL URL") as err:
        connection_params(f"postgresql://u:{PASSWORD}@h/db?nonsense=1")
    assert PASSWORD not in str(err.value)



@pytest.mark.parametrize("query,message", [
    ("@h:notaport/db", 'port "notaport" is not a number from 1 to 65535'),
    ("@h:5432,h2:0/db", 'port "0" is not a number from 1 to 65535'),
    ("@h/db?sslmode=requre", 'sslmode "requre": not one of disable, allow, prefer, require, '
                             'verify-ca, verify-full (did you mean require?)'),
    ("@h/db?connect_timeout=soon", 'connect_timeout "soon" is not an integer'),
])
def test_a_url_libpq_would_refuse_at_connect_is_a_configuration_error(cli, query, message):
    """libpq reads ports, timeouts and sslmode only when it connects: such a URL looked like
    an outage (compress passed its input through, exit 0) instead of the mistake it is."""
    url = f"postgresql://caveman:{SECRET}{query}"
    r = cli("compress", input=LOG, env={"CAVEMAN_CCR_DB": url})
    _no_secret(r, query)
    assert r.returncode == 1 and r.stdout == b""
    assert r.stderr == (b'caveman-engine compress: cannot open recovery store: invalid '
                        b'PostgreSQL URL "' + url.replace(SECRET, "***").encode() + b'": ' +
                        message.encode() + b"\n")


def test_url_selects_postgresql_and_masks_the_password(pg_url):
    for url in (pg_url, pg_url.replace("postgresql://", "postgres://", 1)):
        s = open_store(url)
        try:
            assert s.backend == "postgresql" and not s.is_local
            assert PASSWORD not in s.path and ":***@" in s.path
            assert PASSWORD not in repr(s.info())
        finally:
            s.close()
    assert isinstance(Store(pg_url), ccr.StoreBase) and Store(pg_url).backend == "postgresql"


def test_schema_matches_the_sqlite_columns(store_dir, pg_url):
    import psycopg

    with Store(str(store_dir / "ccr.db")) as s:
        lite = {t: [r[1] for r in s._conn.execute(f"PRAGMA table_info({t})")]
                for t in ("recoveries", "typed_objects")}
    with open_store(pg_url) as s:
        s.summary()  # connects and migrates
    with psycopg.connect(pg_url) as c:
        pg = {t: [r[0] for r in c.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = %s"
            " ORDER BY ordinal_position", (t,))] for t in ("recoveries", "typed_objects")}
        types = dict(c.execute("SELECT column_name, data_type FROM information_schema.columns"
                               " WHERE table_name = 'recoveries'").fetchall())
        assert c.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'typed_objects'"
                         " AND indexname = 'typed_objects_session_created'").fetchone()
    assert pg == lite
    assert types["original"] == "bytea" and types["metadata"] == "bytea"


def test_migrations_apply_once_when_many_hosts_start_at_once(pg_server):
    """12 processes open a fresh database at the same moment: each migration runs once."""
    import psycopg

    db = pg_server.create_database()
    url = pg_server.url(db)
    script = ("import sys\nfrom caveman_engine.store import open_store\n"
              "s = open_store(sys.argv[1])\nprint(s.put(sys.argv[2].encode(), content_type='log',"
              " compressor='log', tokens_before=9, tokens_after=1))\n")
    procs = [subprocess.Popen([sys.executable, "-c", script, url, f"host {i}"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for i in range(12)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 12, [o[1] for o in outs]
    with psycopg.connect(url) as c:
        rows = c.execute("SELECT version, name FROM ccr_schema_migrations").fetchall()
        assert rows == [(1, "0001_initial")]
        assert c.execute("SELECT COUNT(*) FROM recoveries").fetchone()[0] == 12
        assert c.execute("SELECT used_bytes FROM ccr_usage").fetchone()[0] == sum(
            len(f"host {i}") for i in range(12))
    with open_store(url) as s:
        assert s.info().schema_version == 1
    pg_server.drop_database(db)


def test_a_migrated_store_needs_no_ddl_rights(pg_server, pg_url):
    """The least-privilege role of docs/store.md: DML on the tables, nothing else."""
    import psycopg

    with open_store(pg_url) as s:
        put(s, b"by the owner")
    db = pg_url.rsplit("/", 1)[1]
    role = "ccr_app_" + db[-6:]
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'app-pw-123'")
        c.execute(f"REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        c.execute(f"GRANT CONNECT ON DATABASE {db} TO {role}")
        c.execute(f"GRANT USAGE ON SCHEMA public TO {role}")
        c.execute(f"GRANT SELECT, INSERT, UPDATE ON recoveries, typed_objects TO {role}")
        c.execute(f"GRANT SELECT, UPDATE ON ccr_usage TO {role}")
        c.execute(f"GRANT SELECT ON ccr_schema_migrations TO {role}")
    app = f"postgresql://{role}:app-pw-123@127.0.0.1:{pg_server.port}/{db}"
    try:
        with open_store(app) as s:
            h = put(s, b"by the app")
            assert s.get(h) == b"by the app"
            assert s.summary().totals.count == 2
            with pytest.raises(StoreError, match="permission denied"):
                s.purge(ccr.Selection(frozenset({"json"})))
    finally:
        with psycopg.connect(pg_url, autocommit=True) as c:
            c.execute(f"REASSIGN OWNED BY {role} TO CURRENT_USER")
            c.execute(f"DROP OWNED BY {role}")
            c.execute(f"DROP ROLE {role}")


def test_unix_socket_url(pg_server):
    db = pg_server.create_database()
    with open_store(pg_server.socket_url(db)) as s:
        h = put(s, b"over the socket")
        assert s.get(h) == b"over the socket"
    pg_server.drop_database(db)


def test_pooled_store_under_threads(pg_url):
    """pooled=True and the default (a pool once two threads want the connection at once)."""
    for pooled in (True, None):
        s = open_store(pg_url, pooled=pooled)
        errors = []

        def work(k):
            try:
                for i in range(25):
                    data = b"thread %d item %d pooled %r" % (k, i, pooled)
                    assert s.get(put(s, data)) == data
                    put(s, b"shared %d" % (i % 3))
            except Exception as exc:  # noqa: BLE001
                errors.append(repr(exc))

        threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert s._pool is not None
        s.close()
    with open_store(pg_url) as s:
        assert s.summary().totals.count == 2 * 8 * 25 + 3
        assert s.used_bytes_row() == s.summary().storage_bytes


def test_long_running_store_reconnects_after_a_server_restart(pg_server, pg_url):
    s = open_store(pg_url)
    try:
        h = put(s, b"before the restart")
        pg_server.stop()
        with pytest.raises(StoreError) as err:
            put(s, b"while it is down")
        assert "\n" not in str(err.value) and PASSWORD not in str(err.value)
        pg_server.start()
        h2 = put(s, b"after the restart")  # the same store object: a new connection
        assert s.get(h) == b"before the restart" and s.get(h2) == b"after the restart"
    finally:
        s.close()


# --------------------------------------------------------------------------- CLI round trips


@pytest.fixture(params=["sqlite", "postgresql"])
def ccr_env(request, store_dir):
    if request.param == "sqlite":
        return {"CAVEMAN_CCR_DB": str(store_dir / "ccr.db")}
    return {"CAVEMAN_CCR_DB": request.getfixturevalue("pg_url")}


def test_cli_compress_retrieve_query_stats(cli, ccr_env):
    r = cli("compress", input=LOG, env=ccr_env)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stderr)
    assert "error" not in report and r.stdout != LOG
    h = report["recovery_handle"]
    r = cli("retrieve", h, env=ccr_env)
    assert (r.returncode, r.stdout, r.stderr) == (0, LOG, b"")
    r = cli("retrieve", h, "id=7 status", env=ccr_env)
    assert r.returncode == 0 and b"id=7\n" in r.stdout
    r = cli("retrieve", "ccr_00000000000000000000000000000000", env=ccr_env)
    assert (r.returncode, r.stderr) == (1, b"caveman-engine retrieve: ccr_0000000000000000000000"
                                           b"0000000000: recovery handle not found\n")
    stats = json.loads(cli("stats", env=ccr_env).stdout)
    assert stats["totals"]["count"] == 1 and stats["storage_bytes"] == len(LOG)


def test_cli_stats_identical_on_both_backends(cli, store_dir, pg_url):
    inputs = [LOG, LOG.replace(b"worker=pg", b"worker=two"), LOG,
              json.dumps({"items": [{"id": i, "name": "x" * 20, "ok": True}
                                    for i in range(30)]}).encode()]
    outs = []
    for env in ({"CAVEMAN_CCR_DB": str(store_dir / "ccr.db")}, {"CAVEMAN_CCR_DB": pg_url}):
        reports = []
        for data in inputs:
            r = cli("compress", input=data, env=env)
            assert r.returncode == 0 and b"error" not in r.stderr, r.stderr
            reports.append(r.stderr)
        outs.append((reports, cli("stats", env=env).stdout,
                     cli("stats", "--format", "text", env=env).stdout))
    assert outs[0] == outs[1]


def test_cli_store_subcommands(cli, ccr_env, tmp_path):
    handles = []
    for i in range(3):
        r = cli("compress", input=LOG.replace(b"worker=pg", b"worker=%d" % i), env=ccr_env)
        handles.append(json.loads(r.stderr)["recovery_handle"])
    r = cli("store", "path", env=ccr_env)
    assert r.returncode == 0 and PASSWORD.encode() not in r.stdout
    info = json.loads(cli("store", "info", "--format", "json", env=ccr_env).stdout)
    assert info["originals"] == 3 and info["blobs"]["by_content_type"]["log"]["count"] == 3
    assert PASSWORD not in json.dumps(info)
    r = cli("store", "info", env=ccr_env)
    assert r.returncode == 0 and PASSWORD.encode() not in r.stdout + r.stderr
    dest = tmp_path / "export.tar.gz"
    r = cli("store", "export", str(dest), "--format", "json", env=ccr_env)
    assert r.returncode == 0 and json.loads(r.stdout)["count"] == 3, r.stderr
    r = cli("store", "purge", "--type", "log", "--yes", "--format", "json", env=ccr_env)
    assert r.returncode == 0 and json.loads(r.stdout)["count"] == 3, r.stderr
    assert PASSWORD.encode() not in r.stdout + r.stderr
    assert cli("retrieve", handles[0], env=ccr_env).returncode == 1
    r = cli("store", "vacuum", "--format", "json", env=ccr_env)
    assert r.returncode == 0, r.stderr
    stats = json.loads(cli("stats", env=ccr_env).stdout)
    assert stats["totals"]["count"] == 0


# --------------------------------------------------------------------------- failures


def _unavailable(r, data: bytes = LOG, limit: float | None = None):
    assert r.returncode == 0, r.stderr
    assert r.stdout == data
    report = json.loads(r.stderr)  # one JSON line: no traceback
    assert report["error"] == "cave_ccr_unavailable"
    assert report["ratio"] == 0 and "recovery_handle" not in report
    assert PASSWORD.encode() not in r.stderr


def test_misconfigured_url_is_a_one_line_error(cli):
    r = cli("compress", input=LOG,
            env={"CAVEMAN_CCR_DB": f"postgresql://u:{PASSWORD}@127.0.0.1/db?bogus=1"})
    assert r.returncode == 1 and r.stdout == b""
    assert r.stderr.startswith(b"caveman-engine compress: cannot open recovery store: invalid "
                               b"PostgreSQL URL ")
    assert r.stderr.count(b"\n") == 1 and PASSWORD.encode() not in r.stderr


def test_server_down_passes_through_in_bounded_time(cli):
    from .pg import free_port

    url = f"postgresql://caveman:{PASSWORD}@127.0.0.1:{free_port()}/nothing"
    t = time.monotonic()
    r = cli("compress", input=LOG, env={"CAVEMAN_CCR_DB": url})
    assert time.monotonic() - t < 30
    _unavailable(r)
    for args in (("retrieve", "ccr_00000000000000000000000000000000"), ("stats",),
                 ("store", "info")):
        r = cli(*args, env={"CAVEMAN_CCR_DB": url})
        assert r.returncode == 1 and r.stderr.count(b"\n") == 1, r.stderr
        assert PASSWORD.encode() not in r.stderr and b"Traceback" not in r.stderr


def test_unreachable_host_respects_connect_timeout(cli):
    """A host that never answers (a blackholed address would need the network; a listening
    socket that never accepts does the same on loopback)."""
    import socket

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(0)
    port = srv.getsockname()[1]
    fillers = []
    try:
        for _ in range(8):  # fill the accept queue so connects hang
            c = socket.socket()
            c.setblocking(False)
            c.connect_ex(("127.0.0.1", port))
            fillers.append(c)
        url = f"postgresql://caveman@127.0.0.1:{port}/db?connect_timeout=2"
        t = time.monotonic()
        r = cli("compress", input=LOG, env={"CAVEMAN_CCR_DB": url})
        took = time.monotonic() - t
        _unavailable(r)
        assert took < 20
    finally:
        for c in fillers:
            c.close()
        srv.close()


def test_auth_failure_passes_through_without_the_password(cli, pg_server):
    url = pg_server.url("postgres").replace(PASSWORD, "wrong-" + PASSWORD[::-1])
    r = cli("compress", input=LOG, env={"CAVEMAN_CCR_DB": url})
    _unavailable(r)
    assert b"wrong-" not in r.stderr


def test_sslmode_goes_to_libpq(cli, pg_server):
    """The test server has no TLS: sslmode=require must refuse it (not silently downgrade)."""
    db = pg_server.create_database()
    r = cli("compress", input=LOG, env={"CAVEMAN_CCR_DB": pg_server.url(db, sslmode="require")})
    _unavailable(r)
    r = cli("compress", input=LOG, env={"CAVEMAN_CCR_DB": pg_server.url(db, sslmode="disable")})
    assert "error" not in json.loads(r.stderr)
    r = cli("compress", input=LOG, env={"CAVEMAN_CCR_DB": pg_server.url(
        db, sslmode="verify-full", sslrootcert="/nonexistent/ca.pem")})
    _unavailable(r)
    pg_server.drop_database(db)


def _hold_budget_row(url):
    import psycopg

    holder = psycopg.connect(url)
    with open_store(url) as s:
        s.summary()  # migrate
    holder.execute("SELECT used_bytes FROM ccr_usage WHERE id = 1 FOR UPDATE")
    return holder


def test_statement_timeout_passes_through(cli, pg_url):
    holder = _hold_budget_row(pg_url)
    try:
        url = pg_url + "?options=-c%20statement_timeout%3D700"
        t = time.monotonic()
        r = cli("compress", input=LOG, env={"CAVEMAN_CCR_DB": url})
        assert time.monotonic() - t < 30
        _unavailable(r)
    finally:
        holder.rollback()
        holder.close()
    r = cli("compress", input=LOG, env={"CAVEMAN_CCR_DB": pg_url})
    assert "error" not in json.loads(r.stderr)


def test_connection_dropped_mid_transaction_passes_through(pg_url, rank_cache_dir):
    """The writer's backend is terminated while its transaction waits for the budget row."""
    import psycopg

    holder = _hold_budget_row(pg_url)
    env = dict(os.environ, CAVEMAN_CCR_DB=pg_url, CAVEMAN_CACHE_DIR=str(rank_cache_dir))
    p = subprocess.Popen([console_script(), "compress"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    p.stdin.write(LOG)
    p.stdin.close()
    try:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            deadline = time.monotonic() + 60
            pid = None
            while pid is None and time.monotonic() < deadline:
                row = admin.execute(
                    "SELECT pid FROM pg_stat_activity WHERE application_name = 'caveman-engine'"
                    " AND wait_event_type = 'Lock' AND datname = current_database()").fetchone()
                pid = row[0] if row else None
                time.sleep(0.05)
            assert pid is not None, "the writer never waited for the budget row"
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        out, err = p.stdout.read(), p.stderr.read()
        assert p.wait(timeout=60) == 0
    finally:
        holder.rollback()
        holder.close()
        if p.poll() is None:
            p.kill()
    from .conftest import Run

    _unavailable(Run(0, out, err))
    with open_store(pg_url) as s:
        assert s.summary().totals.count == 0 and s.used_bytes_row() == 0


# --------------------------------------------------------------------------- credentials (issue 27.3)

SECRET = "Hush-" + PASSWORD[::-1]  # a password the server never accepts


def _leak_urls(port: int, bad_port: int) -> dict[str, str]:
    """Every shape of URL a password can hide in, each one refused somewhere."""
    at = f"127.0.0.1:{port}/postgres"
    return {
        "wrong password": f"postgresql://caveman:{SECRET}@{at}",
        "wrong password= parameter": f"postgresql://caveman@{at}?password={SECRET}",
        "percent-encoded wrong password": f"postgresql://caveman:{SECRET.replace('-', '%2D')}@{at}",
        "server down": f"postgresql://caveman:{SECRET}@127.0.0.1:{bad_port}/postgres",
        "unknown parameter": f"postgresql://caveman:{SECRET}@{at}?bogus=1",
        "bad percent escape": f"postgresql://caveman:ab%zz{SECRET}@{at}",
        "bad port": f"postgresql://caveman:{SECRET}@127.0.0.1:notaport/postgres",
        "unencoded @ in password": f"postgresql://caveman:p@{SECRET}@{at}",
        "unencoded / in password": f"postgresql://caveman:pa/{SECRET}@{at}",
        "unencoded ? in password": f"postgresql://caveman:pa?{SECRET}@{at}",
        "unencoded # in password": f"postgresql://caveman:pa#{SECRET}@{at}",
        "unclosed IPv6 host": f"postgresql://caveman:{SECRET}@[::1/postgres",
        "password not UTF-8": f"postgresql://caveman:{SECRET}%E2%28@{at}",
    }


COMMANDS = [("stats",), ("stats", "--format", "text"), ("store", "path"), ("store", "info"),
            ("store", "info", "--format", "json"), ("store", "vacuum"),
            ("store", "purge", "--all", "--yes"), ("store", "purge", "--all", "--dry-run"),
            ("retrieve", "ccr_00000000000000000000000000000000"), ("compress",)]


def _no_secret(r, what):
    out = r.stdout + r.stderr
    for part in (SECRET, SECRET[5:], SECRET.replace("-", "%2D")):
        assert part.encode() not in out, (what, out)
    assert b"Traceback" not in out and b"internal error" not in out, (what, out)


@pytest.mark.parametrize("case", list(_leak_urls(1, 2)))
def test_the_password_is_never_printed(cli, pg_server, tmp_path, case):
    """Each URL shape through every command of the real console script: a refused login on
    the real server, a server that is down, URLs libpq or we refuse, passwords with unencoded
    @ / ? # (which libpq reads as part of the host or the database, and would echo)."""
    from .pg import free_port

    url = _leak_urls(pg_server.port, free_port())[case]
    env = {"CAVEMAN_CCR_DB": url}
    for args in COMMANDS + [("store", "export", str(tmp_path / "out"))]:
        r = cli(*args, input=LOG, env=env, timeout=60)
        what = f"{case}: {' '.join(args)}"
        _no_secret(r, what)
        if args == ("store", "path"):
            assert r.returncode == 0 and r.stdout.count(b"***") == 1, (what, r.stdout)
        elif args == ("compress",):
            assert r.returncode in (0, 1), what
            assert r.stderr.count(b"\n") == 1, (what, r.stderr)
        else:
            assert r.returncode == 1 and r.stderr.count(b"\n") == 1, (what, r.stderr)
    assert not (tmp_path / "out").exists()


def test_a_password_with_an_unencoded_at_sign_is_refused_before_connecting(cli, pg_server):
    """libpq reads postgresql://u:p@SECRET@host as password "p" and host "SECRET@host", and
    then prints that host in its errors: such a URL is refused at once, naming the fix."""
    url = f"postgresql://caveman:p@{SECRET}@127.0.0.1:{pg_server.port}/postgres"
    r = cli("stats", env={"CAVEMAN_CCR_DB": url})
    assert (r.returncode, r.stderr) == (
        1, b'caveman-engine stats: cannot open recovery store: invalid PostgreSQL URL '
           b'"postgresql://***": a "@" in the'
           b' user name or password must be percent-encoded as %40\n')
    assert ccr.mask_url(url) == "postgresql://***"


def test_a_question_mark_in_the_password_is_masked_the_way_libpq_reads_it(cli, pg_server):
    """libpq takes everything up to the first @ as the credentials, ? and # included."""
    url = f"postgresql://caveman:pa?{SECRET}@127.0.0.1:{pg_server.port}/postgres"
    r = cli("store", "path", env={"CAVEMAN_CCR_DB": url})
    assert r.stdout == f"postgresql://caveman:***@127.0.0.1:{pg_server.port}/postgres\n".encode()


def test_a_key_value_connection_string_is_no_file(pg_server, tmp_path, rank_cache_dir):
    """CAVEMAN_CCR_DB="host=… password=…" is not a URL: it used to become a SQLite file of
    that name in the current directory, printed (password and all) by `store path` and
    every error. Now every command refuses it in one line, the password shown as ***."""
    dsn = f"host=127.0.0.1 port={pg_server.port} user=caveman password={SECRET} dbname=postgres"
    before = sorted(os.listdir(tmp_path))
    for args in (("stats",), ("store", "path"), ("store", "info"), ("store", "vacuum"),
                 ("compress",), ("retrieve", "ccr_00000000000000000000000000000000")):
        r = subprocess.run([console_script(), *args], capture_output=True, cwd=tmp_path,
                           env=dict(os.environ, CAVEMAN_CCR_DB=dsn,
                                    CAVEMAN_CACHE_DIR=str(rank_cache_dir)),
                           timeout=60, input=LOG)
        _no_secret(r, args)
        assert r.returncode == 1 and r.stderr.count(b"\n") == 1, r.stderr
        assert b"key/value connection string" in r.stderr and b"password=***" in r.stderr
    assert sorted(os.listdir(tmp_path)) == before  # no file named after the string


@pytest.mark.parametrize("url", [
    "postgresql+psycopg://caveman:{secret}@127.0.0.1:1/db",  # SQLAlchemy's spelling
    " postgresql://caveman:{secret}@127.0.0.1:1/db",          # a space before it
    "pgsql://caveman:{secret}@127.0.0.1:1/db",
])
def test_a_url_that_is_no_postgresql_url_is_no_file(tmp_path, rank_cache_dir, url):
    """Any other URL used to become a SQLite path (os.path.abspath folds its :// to :/, so
    the URL mask missed it) and every command printed it, password and all."""
    url = url.format(secret=SECRET)
    before = sorted(os.listdir(tmp_path))
    for args in (("stats",), ("store", "path"), ("store", "info"), ("compress",),
                 ("retrieve", "ccr_00000000000000000000000000000000"),
                 ("proxy", "--listen", "127.0.0.1:0", "--level", "toolschema")):
        r = subprocess.run([console_script(), *args], capture_output=True, cwd=tmp_path,
                           env=dict(os.environ, CAVEMAN_CCR_DB=url,
                                    CAVEMAN_CACHE_DIR=str(rank_cache_dir)),
                           timeout=60, input=LOG)
        _no_secret(r, args)
        assert r.returncode == 1 and r.stderr.count(b"\n") == 1, (args, r.stderr)
        assert b"is not a store location" in r.stderr, r.stderr
    assert sorted(os.listdir(tmp_path)) == before


def test_the_proxy_startup_error_hides_the_password(pg_server, rank_cache_dir):
    url = f"postgresql://caveman:pa/{SECRET}@127.0.0.1:{pg_server.port}/postgres"
    env = dict(os.environ, CAVEMAN_CCR_DB=url, CAVEMAN_CACHE_DIR=str(rank_cache_dir))
    p = subprocess.run([console_script(), "proxy", "--listen", "127.0.0.1:0", "--level",
                        "toolschema"], capture_output=True, env=env, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 1 and p.stderr.startswith(b"caveman-engine proxy: cannot open "
                                                     b"recovery store: invalid PostgreSQL URL")
    assert SECRET.encode() not in p.stdout + p.stderr and b"pa/" not in p.stderr


def test_the_mcp_middleware_hides_the_password(pg_server, rank_cache_dir):
    """A tools/list through `caveman-engine mcp` with a store URL libpq misreads."""
    server = ("import sys, json\nfor line in sys.stdin:\n    m = json.loads(line)\n"
              "    print(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'result': {'tools': [{"
              "'name': 't%d' % i, 'description': 'Returns the list of items. ' * 20,"
              " 'inputSchema': {'type': 'object'}} for i in range(5)]}}), flush=True)\n")
    for url in (f"postgresql://caveman:p@{SECRET}@127.0.0.1:{pg_server.port}/postgres",
                f"postgresql://caveman:{SECRET}@127.0.0.1:{pg_server.port}/postgres"):
        env = dict(os.environ, CAVEMAN_CCR_DB=url, CAVEMAN_CACHE_DIR=str(rank_cache_dir))
        p = subprocess.run([console_script(), "mcp", "--", sys.executable, "-c", server],
                           input=b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}\n',
                           capture_output=True, env=env, timeout=60)
        assert p.returncode == 0 and b'"tools"' in p.stdout, p.stderr
        assert SECRET.encode() not in p.stdout + p.stderr, p.stderr


def test_psycopg_log_records_are_redacted():
    """The pool logs its connection failures (the proxy prints WARNING records): the filter
    a pooled store installs rewrites them."""
    import logging

    from caveman_engine.store_pg import _RedactLogs

    url = f"postgresql://caveman:{SECRET}@db:5432/x"
    rec = logging.LogRecord("psycopg.pool", logging.WARNING, __file__, 1,
                            "error connecting in %r: %s", ("caveman-ccr", f"bad {url} {SECRET}"),
                            None)
    assert _RedactLogs(url).filter(rec) is True
    assert rec.getMessage() == ("error connecting in 'caveman-ccr': bad "
                                "postgresql://caveman:***@db:5432/x ***")


@pytest.mark.parametrize("text,url,shown", [
    (f"host=h password={SECRET} user=u", None, "host=h password=*** user=u"),
    (f"host=h password = '{SECRET} x' user=u", None, "host=h password = *** user=u"),
    (f'in URI: "postgresql://u:{SECRET}@[::1/db"', None, 'in URI: "postgresql://u:***@[::1/db"'),
    (f"token {SECRET}", f"postgresql://u:{SECRET}@h/db", "token ***"),
    (f"token {SECRET.replace('-', '%2D')}", f"postgresql://u:{SECRET.replace('-', '%2D')}@h/db",
     "token ***"),
    ("password authentication failed for user \"u\"", None,
     "password authentication failed for user \"u\""),
])
def test_redact(text, url, shown):
    assert ccr.redact(text, url) == shown


def test_redact_removes_pgpassword(monkeypatch):
    monkeypatch.setenv("PGPASSWORD", SECRET)
    assert ccr.redact(f"echoed {SECRET}!") == "echoed ***!"


# --------------------------------------------------------------------------- vacuum (issue 27.7)


def test_vacuum_by_a_role_that_does_not_own_the_tables_fails(cli, pg_server, pg_url):
    """PostgreSQL answers VACUUM FULL by a non-owner with a WARNING ("permission denied to
    vacuum …, skipping it") and success; `store vacuum` must not report success."""
    import psycopg

    with open_store(pg_url) as s:
        put(s, b"kept by the owner")
    db = pg_url.rsplit("/", 1)[1]
    role = "ccr_vac_" + db[-6:]
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'vac-pw-123'")
        c.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON recoveries, typed_objects TO {role}")
        c.execute(f"GRANT SELECT, UPDATE ON ccr_usage TO {role}")
        c.execute(f"GRANT SELECT ON ccr_schema_migrations TO {role}")
    app = f"postgresql://{role}:vac-pw-123@127.0.0.1:{pg_server.port}/{db}"
    try:
        r = cli("store", "vacuum", env={"CAVEMAN_CCR_DB": app})
        assert (r.returncode, r.stdout) == (1, b""), r.stderr
        assert r.stderr.count(b"\n") == 1 and b"vacuum-pw" not in r.stderr
        assert r.stderr.startswith(b"caveman-engine store vacuum: ccr vacuum: permission denied "
                                   b"to vacuum "
                                   b'"recoveries"'), r.stderr
        assert r.stderr.endswith(b"(VACUUM FULL needs the tables' owner)\n")
        r = cli("store", "vacuum", "--format", "json", env={"CAVEMAN_CCR_DB": app})
        assert (r.returncode, r.stdout) == (1, b"")
        r = cli("store", "vacuum", env={"CAVEMAN_CCR_DB": pg_url})  # the owner
        assert r.returncode == 0 and r.stdout.startswith(b"vacuumed "), r.stderr
        with open_store(app) as s:  # the app role still works
            assert s.get(ccr.handle_for(b"kept by the owner")) == b"kept by the owner"
    finally:
        with psycopg.connect(pg_url, autocommit=True) as c:
            c.execute(f"DROP OWNED BY {role}")
            c.execute(f"DROP ROLE {role}")
