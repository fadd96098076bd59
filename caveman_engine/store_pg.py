"""The recovery store on PostgreSQL: one database a whole team shares, behind the same
``ccr_…`` handles as the SQLite store (``caveman_engine.store``; contract: ``ccr_spec.md``).

Selected by ``CAVEMAN_CCR_DB=postgresql://…`` (or ``postgres://…``); the URL goes to libpq as
it is, so every libpq parameter works in it (``sslmode``, ``sslrootcert``, ``connect_timeout``,
``options``, several hosts, a Unix-socket directory as ``host``…).

When the server is contacted. Opening checks the URL only (a malformed one is a
:class:`StoreError` at once: ``cannot open recovery store: …``, exit 1); the first read or write
connects and applies the migrations. So a server that is down, refuses the password, times out
or drops the connection makes ``put`` fail like any store that cannot take the original:
``compress`` passes its input through with ``"error":"cave_ccr_unavailable"``, exit 0.

Bounded time. Unless the URL says otherwise: ``connect_timeout=5`` (seconds),
``tcp_user_timeout=15000`` (ms, unacknowledged data on a dead link) and a server-side
``statement_timeout`` of 15 s (set through ``options``; ``options=-c statement_timeout=…`` in
the URL wins). A pool waits at most ``connect_timeout`` + 1 s for a free connection.

Schema. The numbered files of ``store/pg/`` (same tables and columns as SQLite, BYTEA
originals), each applied once and recorded in ``ccr_schema_migrations``, inside one
transaction holding ``pg_advisory_xact_lock``: hosts that start at once wait for each other.
Once applied, the store needs no DDL right (a runtime role with DML rights only works).

Budget. ``ccr_usage`` holds one row with the bytes the originals use (ccr_spec §7.1), updated in
the same transaction as every insert, update and delete. A writer locks that row
(``SELECT … FOR UPDATE``) before it checks the budget and writes, so writers on any number of
hosts are serialised at exactly that point and ``CAVEMAN_CCR_MAX_BYTES`` is never overshot.
Puts that change nothing return before taking the lock. Nothing is ever evicted.

Credentials never appear in what we print: :attr:`PgStore.path` is the URL with its password
masked, and error texts are scrubbed of the password.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager

from . import resources
from .store import (
    BudgetExceeded,
    Bucket,
    Entry,
    NotFound,
    PurgeResult,
    Selection,
    StoreBase,
    StoreError,
    StoreInfo,
    Summary,
    _statements,
    entries_from_rows,
    typed_object_identity,
    budget_from_env,
    check_handle,
    mask_url,
    pg_url_problem,
    redact,
    rfc3339_nano,
    run_statement,
)

DEFAULT_CONNECT_TIMEOUT = 5  # seconds
DEFAULT_STATEMENT_TIMEOUT_MS = 15_000
DEFAULT_TCP_USER_TIMEOUT_MS = 15_000
DEFAULT_POOL_MAX = 8
MIGRATION_LOCK = 0x63636D6967726174  # "ccmigrat": pg_advisory_xact_lock key for migrations

# Every statement below is a literal with bound parameters (tests/test_security.py checks it);
# the only other SQL is the migration files of store/pg/, run through store.run_statement.


def _used(conn) -> int:
    """Bytes the originals hold, counted from the tables (ccr_spec §7.1)."""
    return int(conn.execute(
        "SELECT ((SELECT COALESCE(SUM(LENGTH(original) + COALESCE(LENGTH(metadata), 0)), 0)"
        " FROM recoveries) + (SELECT COALESCE(SUM(LENGTH(data) + LENGTH(dependencies_json)),"
        " 0) FROM typed_objects))::bigint").fetchone()[0])


def _recount(conn) -> None:
    """Set the budget row to what the tables hold (hold the row lock first)."""
    conn.execute(
        "UPDATE ccr_usage SET used_bytes = ((SELECT COALESCE(SUM(LENGTH(original)"
        " + COALESCE(LENGTH(metadata), 0)), 0) FROM recoveries) + (SELECT COALESCE(SUM("
        "LENGTH(data) + LENGTH(dependencies_json)), 0) FROM typed_objects))::bigint"
        " WHERE id = 1")


def _add_usage(conn, delta: int) -> None:
    conn.execute("UPDATE ccr_usage SET used_bytes = used_bytes + %s WHERE id = 1", (delta,))


def _blob_row(conn, digest: bytes, handle: str, *, lock: bool):
    """The stored row for ``handle``; column 4 says whether its original has SHA-256
    ``digest`` (compared on the server: the original is not sent or fetched again)."""
    if lock:
        return conn.execute(
            "SELECT content_type, compressor, tokens_before, tokens_after,"
            " sha256(original) = %s, metadata,"
            " (LENGTH(original) + COALESCE(LENGTH(metadata), 0))::bigint"
            " FROM recoveries WHERE handle = %s FOR UPDATE", (digest, handle)).fetchone()
    return conn.execute(
        "SELECT content_type, compressor, tokens_before, tokens_after,"
        " sha256(original) = %s, metadata,"
        " (LENGTH(original) + COALESCE(LENGTH(metadata), 0))::bigint"
        " FROM recoveries WHERE handle = %s", (digest, handle)).fetchone()


def _object_row(conn, object_id: str):
    return conn.execute(
        "SELECT object_type, content_hash, source, repository_state, session_id,"
        " transform_version, dependencies_json, data FROM typed_objects WHERE object_id = %s",
        (object_id,)).fetchone()


def pg_migrations() -> list[tuple[int, str, str]]:
    out = []
    for p in sorted((resources.migrations_dir() / "pg").glob("[0-9][0-9][0-9][0-9]_*.sql")):
        out.append((int(p.name[:4]), p.stem, p.read_text(encoding="utf-8")))
    return out


def _import_psycopg():
    try:
        import psycopg
    except ImportError:
        raise StoreError(
            "a postgresql:// store needs psycopg 3: pip install 'psycopg[binary]>=3.2' "
            "psycopg-pool") from None
    return psycopg


def connection_params(url: str) -> dict[str, str]:
    """libpq parameters for ``url``, with our defaults for what it leaves unset. A URL libpq
    cannot read, or one whose password end is ambiguous (an unencoded ``@`` or ``/`` in it,
    which libpq would read as part of the host or database name and then echo in its errors),
    is a :class:`StoreError` that shows neither the password nor any part of it."""
    problem = pg_url_problem(url)
    if problem is not None:
        raise StoreError(f'invalid PostgreSQL URL "{mask_url(url)}": {problem}')
    psycopg = _import_psycopg()
    from psycopg.conninfo import conninfo_to_dict

    try:
        params = {k: str(v) for k, v in conninfo_to_dict(url).items()}
    except psycopg.Error as exc:
        raise StoreError(
            f'invalid PostgreSQL URL "{mask_url(url)}": {_one_line(str(exc), url)}') from None
    except UnicodeDecodeError:  # psycopg decodes every value libpq parsed as UTF-8
        raise StoreError(f'invalid PostgreSQL URL "{mask_url(url)}": a percent-encoded value'
                         " is not UTF-8") from None
    problem = _param_problem(params)
    if problem is not None:
        raise StoreError(f'invalid PostgreSQL URL "{mask_url(url)}": {problem}')
    params.setdefault("connect_timeout", str(DEFAULT_CONNECT_TIMEOUT))
    params.setdefault("tcp_user_timeout", str(DEFAULT_TCP_USER_TIMEOUT_MS))
    params.setdefault("application_name", "caveman-engine")
    options = params.get("options", "")
    if "statement_timeout" not in options:
        params["options"] = (options + " " if options else "") + (
            f"-c statement_timeout={DEFAULT_STATEMENT_TIMEOUT_MS}")
    return params


# libpq reads these only when it connects, so a bad value would look like an outage (the
# input passed through, exit 0) instead of the configuration error it is.
_INTEGER_PARAMS = ("connect_timeout", "keepalives", "keepalives_idle", "keepalives_interval",
                   "keepalives_count", "tcp_user_timeout")
_CHOICE_PARAMS = {
    "sslmode": ("disable", "allow", "prefer", "require", "verify-ca", "verify-full"),
    "gssencmode": ("disable", "prefer", "require"),
    "channel_binding": ("disable", "prefer", "require"),
    "target_session_attrs": ("any", "read-write", "read-only", "primary", "standby",
                             "prefer-standby"),
    "load_balance_hosts": ("disable", "random"),
    "sslnegotiation": ("postgres", "direct"),
}


def _param_problem(params: dict[str, str]) -> str | None:
    """What libpq would refuse at connect time in ``params``: a port that is no number from 1
    to 65535 (each of a list), an integer option that is no integer, an unknown choice."""
    for port in params.get("port", "").split(","):
        p = port.strip()
        if p and not (p.isascii() and p.isdigit() and 0 < int(p) < 65536):
            return f'port "{p}" is not a number from 1 to 65535'
    for key in _INTEGER_PARAMS:
        v = params.get(key, "").strip()
        if v and not (v.isascii() and v.lstrip("-").isdigit()):
            return f'{key} "{v}" is not an integer'
    for key, choices in _CHOICE_PARAMS.items():
        v = params.get(key)
        if v is not None and v not in choices:
            from .cmdutil import did_you_mean

            return f'{key} "{v}": not one of {", ".join(choices)}{did_you_mean(v, choices)}'
    return None


def _one_line(text: str, url: str = "") -> str:
    """A server or libpq message on one line, redacted (:func:`caveman_engine.store.redact`:
    no password of ``url``, no ``PGPASSWORD``, no raw URL)."""
    text = redact(text, url or None)
    return "; ".join(part.strip() for part in text.strip().splitlines() if part.strip())


class _RedactLogs:
    """A logging filter for psycopg's loggers (the pool logs connection failures at WARNING,
    which the proxy prints): the message is redacted against the store's URL."""

    def __init__(self, url: str) -> None:
        self.url = url

    def filter(self, record) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001
            return True
        record.msg, record.args = _one_line(message, self.url), ()
        return True


class PgStore(StoreBase):
    """The recovery store in a PostgreSQL database. Thread-safe: one connection guarded by a
    lock, or a connection pool (``pooled=True``, or on demand with ``pooled=None``)."""

    backend = "postgresql"
    is_local = False

    def __init__(self, url: str, *, max_bytes: int | None = None,
                 pooled: bool | None = None) -> None:
        if max_bytes is None:
            max_bytes = budget_from_env()
        elif max_bytes <= 0:
            raise StoreError("ccr max storage bytes must be positive")
        self.max_bytes = max_bytes
        self._url = url
        self.path = mask_url(url)
        self._params = connection_params(url)
        self._pooled = pooled
        self._lock = threading.Lock()  # guards the single connection
        self._setup = threading.Lock()  # guards migration and pool creation
        self._conn = None
        self._pool = None
        self._migrated = False
        self._closed = False
        if pooled:
            self._make_pool()

    # -- connections

    def _connect(self):
        psycopg = _import_psycopg()
        return psycopg.connect(autocommit=True, **self._params)

    def _make_pool(self):
        with self._setup:
            if self._pool is None:
                try:
                    from psycopg_pool import ConnectionPool
                except ImportError:
                    raise StoreError("a pooled postgresql:// store needs psycopg-pool: "
                                     "pip install psycopg-pool") from None
                import logging

                from psycopg.conninfo import make_conninfo

                for name in ("psycopg", "psycopg.pool"):  # the pool logs connection failures
                    logging.getLogger(name).addFilter(_RedactLogs(self._url))
                size = _pool_max()
                self._pool = ConnectionPool(
                    make_conninfo("", **self._params), min_size=1, max_size=size,
                    kwargs={"autocommit": True}, open=False,
                    check=ConnectionPool.check_connection,
                    timeout=float(self._params.get("connect_timeout") or DEFAULT_CONNECT_TIMEOUT)
                    + 1.0,
                    name="caveman-ccr",
                )
                self._pool.open(wait=False)
            return self._pool

    @contextmanager
    def _connection(self):
        """(connection, reused): a pooled connection, or the single one under its lock."""
        if self._closed:
            raise StoreError("ccr: store is closed")
        pool = self._pool
        if pool is None and not self._lock.acquire(blocking=False):
            if self._pooled is None:  # two threads at once: a long-running process
                pool = self._make_pool()
            else:
                self._lock.acquire()
        if pool is not None:
            with pool.connection() as conn:
                yield conn, True
            return
        try:
            reused = self._conn is not None and not self._conn.closed
            if not reused:
                self._conn = None
                self._conn = self._connect()
            try:
                yield self._conn, reused
            finally:
                if self._conn is not None and (self._conn.broken or self._conn.closed):
                    try:
                        self._conn.close()
                    finally:
                        self._conn = None
        finally:
            self._lock.release()

    def _run(self, what: str, fn):
        """``fn(conn)`` on a migrated connection; psycopg errors become one-line
        :class:`StoreError`; a reused connection the server dropped is retried once (every
        write is idempotent: a put of the same bytes is a no-op or the same upsert)."""
        psycopg = _import_psycopg()
        for attempt in (1, 2):
            conn, reused = None, False
            try:
                with self._connection() as (conn, reused):
                    self._ensure_migrated(conn)
                    return fn(conn)
            except StoreError:
                raise
            except psycopg.Error as exc:
                lost = conn is not None and (conn.broken or conn.closed)
                if attempt == 1 and reused and lost:
                    continue
                raise StoreError(f"{what}: {self._clean(exc)}") from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _clean(self, exc: BaseException) -> str:
        text = _one_line(str(exc), self._url) or type(exc).__name__
        return text

    def close(self) -> None:
        self._closed = True
        with self._lock:
            if self._conn is not None:
                try:
                    self._conn.close()
                except Exception:  # noqa: BLE001
                    pass
                self._conn = None
        if self._pool is not None:
            try:
                self._pool.close(timeout=2.0)
            except Exception:  # noqa: BLE001
                pass
            self._pool = None

    # -- schema

    def _ensure_migrated(self, conn) -> None:
        if self._migrated:
            return
        with self._setup:
            if self._migrated:
                return
            self._migrate(conn)
            self._migrated = True

    def _migrate(self, conn) -> None:
        migrations = pg_migrations()
        latest = migrations[-1][0] if migrations else 0
        if self._schema_version(conn) >= latest:
            return  # no lock and no DDL right needed once the schema is there
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS ccr_schema_migrations (version INTEGER PRIMARY KEY,"
                " name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())")
            done = {r[0] for r in conn.execute("SELECT version FROM ccr_schema_migrations")}
            for number, name, sql in migrations:
                if number in done:
                    continue
                for stmt in _statements(sql):
                    run_statement(conn, stmt)
                conn.execute("INSERT INTO ccr_schema_migrations (version, name) VALUES (%s, %s)",
                             (number, name))

    @staticmethod
    def _schema_version(conn) -> int:
        row = conn.execute("SELECT to_regclass('ccr_schema_migrations') IS NOT NULL").fetchone()
        if not row[0]:
            return 0
        return int(conn.execute(
            "SELECT COALESCE(MAX(version), 0) FROM ccr_schema_migrations").fetchone()[0])

    # -- writes

    def put(self, original: bytes, *, content_type: str, compressor: str, tokens_before: int,
            tokens_after: int, metadata: bytes | None = None) -> str:
        """Store ``original`` (upsert by content hash, ccr_spec §8.1); returns its handle."""
        import hashlib

        original = bytes(original)
        digest = hashlib.sha256(original).digest()
        handle = "ccr_" + digest[:16].hex()
        meta = bytes(metadata) if metadata else None
        wanted = (content_type, compressor, tokens_before, tokens_after)

        def unchanged(row) -> bool:
            return (row is not None and tuple(row[:4]) == wanted and row[4] is True
                    and (bytes(row[5]) if row[5] else None) == meta)

        def work(conn):
            if unchanged(_blob_row(conn, digest, handle, lock=False)):
                return handle  # no write, no lock, no budget check
            with conn.transaction():
                used = self._lock_usage(conn)
                row = _blob_row(conn, digest, handle, lock=True)
                if unchanged(row):
                    return handle
                existing = int(row[6]) if row is not None else 0
                if used - existing + len(original) + len(meta or b"") > self.max_bytes:
                    raise BudgetExceeded()
                now = rfc3339_nano()
                if row is None:
                    conn.execute(
                        "INSERT INTO recoveries (handle, created_at, content_type, compressor,"
                        " tokens_before, tokens_after, original, metadata)"
                        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                        (handle, now, content_type, compressor, tokens_before, tokens_after,
                         original, meta))
                    stored = len(original) + len(meta or b"")
                else:
                    ct, comp, before, after = content_type, compressor, tokens_before, tokens_after
                    if tokens_before == 0 and row[2] > 0:  # keep measured accounting
                        ct, comp, before, after = row[:4]
                    old_meta = bytes(row[5]) if row[5] is not None else None
                    kept = old_meta if old_meta else meta  # first writer wins
                    if row[4] is True:  # same bytes: not sent again
                        conn.execute(
                            "UPDATE recoveries SET created_at = %s, content_type = %s,"
                            " compressor = %s, tokens_before = %s, tokens_after = %s,"
                            " metadata = %s WHERE handle = %s",
                            (now, ct, comp, before, after, kept, handle))
                    else:
                        conn.execute(
                            "UPDATE recoveries SET created_at = %s, content_type = %s,"
                            " compressor = %s, tokens_before = %s, tokens_after = %s,"
                            " original = %s, metadata = %s WHERE handle = %s",
                            (now, ct, comp, before, after, original, kept, handle))
                    stored = len(original) + len(kept or b"")
                _add_usage(conn, stored - existing)
            return handle

        return self._run("ccr put", work)

    @staticmethod
    def _lock_usage(conn) -> int:
        row = conn.execute("SELECT used_bytes FROM ccr_usage WHERE id = 1 FOR UPDATE").fetchone()
        if row is None:  # the row was deleted by hand: recreate it from the tables
            conn.execute("INSERT INTO ccr_usage (id, used_bytes) VALUES (1, 0)"
                         " ON CONFLICT (id) DO NOTHING")
            conn.execute("SELECT used_bytes FROM ccr_usage WHERE id = 1 FOR UPDATE")
            _recount(conn)
            row = conn.execute("SELECT used_bytes FROM ccr_usage WHERE id = 1").fetchone()
        return int(row[0])

    def put_object(self, data: bytes, *, object_type: str, session_id: str, source: str = "",
                   repository_state: str = "", transform_version: str = "",
                   object_id: str = "", dependencies: list[str] | None = None) -> str:
        data = bytes(data)
        object_id, content_hash, deps = typed_object_identity(
            data, object_type, session_id, source, repository_state, object_id, dependencies)
        wanted = (object_type, content_hash, source, repository_state, session_id,
                  transform_version, deps, data)

        def same(row) -> bool:
            if tuple(row[:7]) != wanted[:7] or bytes(row[7]) != data:
                raise StoreError("ccr: typed object id collision")
            return True

        def work(conn):
            row = _object_row(conn, object_id)
            if row is not None and same(row):
                return object_id
            with conn.transaction():
                used = self._lock_usage(conn)
                row = _object_row(conn, object_id)
                if row is not None and same(row):
                    return object_id
                size = len(data) + len(deps)
                if used + size > self.max_bytes:
                    raise BudgetExceeded()
                conn.execute(
                    "INSERT INTO typed_objects (object_id, object_type, content_hash, source,"
                    " created_at, repository_state, session_id, transform_version, currentness,"
                    " lifecycle, dependencies_json, original_byte_length, stored_byte_length,"
                    " data) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, 'current', 'hot', %s, %s,"
                    " %s, %s)",
                    (object_id, object_type, content_hash, source, rfc3339_nano(),
                     repository_state, session_id, transform_version, deps, len(data),
                     len(data), data))
                _add_usage(conn, size)
            return object_id

        return self._run("ccr typed object put", work)

    # -- reads

    def get(self, handle: str) -> bytes:
        check_handle(handle)
        if handle.startswith("ccr_obj_"):
            return self.get_object_data(handle)
        return self._bytes("ccr get", lambda conn: conn.execute(
            "SELECT original FROM recoveries WHERE handle = %s", (handle,)).fetchone())

    def get_object_data(self, object_id: str) -> bytes:
        check_handle(object_id)
        return self._bytes("ccr get", lambda conn: conn.execute(
            "SELECT data FROM typed_objects WHERE object_id = %s", (object_id,)).fetchone())

    def _bytes(self, what: str, query) -> bytes:
        row = self._run(what, query)
        if row is None:
            raise NotFound()
        return bytes(row[0])

    def get_metadata(self, handle: str) -> bytes | None:
        check_handle(handle)
        row = self._run("ccr get metadata", lambda conn: conn.execute(
            "SELECT metadata FROM recoveries WHERE handle = %s", (handle,)).fetchone())
        if row is None:
            raise NotFound()
        return None if row[0] is None else bytes(row[0])

    def summary(self) -> Summary:
        def work(conn):
            with self._snapshot(conn):
                rows = conn.execute(
                    "SELECT content_type, COUNT(*)::bigint,"
                    " COALESCE(SUM(tokens_before), 0)::bigint,"
                    " COALESCE(SUM(tokens_after), 0)::bigint FROM recoveries"
                    " GROUP BY content_type").fetchall()
                used = _used(conn)
            return rows, used

        rows, used = self._run("ccr summary", work)
        totals = Bucket()
        by_type: dict[str, Bucket] = {}
        for ct, n, before, after in rows:
            by_type[ct] = Bucket(int(n), int(before), int(after))
            totals.count += int(n)
            totals.tokens_before += int(before)
            totals.tokens_after += int(after)
        return Summary(totals, by_type, used, self.max_bytes)

    @staticmethod
    @contextmanager
    def _snapshot(conn):
        """One read-only transaction in which every SELECT sees the same snapshot."""
        with conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield conn

    # -- management (``caveman-engine store``)

    @staticmethod
    def _list(conn) -> list[Entry]:
        return entries_from_rows(
            conn.execute(
                "SELECT handle, created_at, content_type, compressor, tokens_before,"
                " tokens_after, LENGTH(original), COALESCE(LENGTH(metadata), 0) FROM recoveries"
                ' ORDER BY created_at COLLATE "C", handle COLLATE "C"').fetchall(),
            conn.execute(
                "SELECT object_id, created_at, object_type, content_hash, session_id, source,"
                " repository_state, transform_version, dependencies_json, LENGTH(data)"
                ' FROM typed_objects ORDER BY created_at COLLATE "C", object_id COLLATE "C"'
            ).fetchall())

    def entries(self, selection: Selection | None = None) -> list[Entry]:
        def work(conn):
            with self._snapshot(conn):
                return self._list(conn)

        rows = self._run("ccr list", work)
        return [e for e in rows if selection is None or selection.matches(e)]

    def read(self, entry: Entry) -> bytes | None:
        try:
            if entry.kind == "blob":
                return self._bytes("ccr get", lambda conn: conn.execute(
                    "SELECT original FROM recoveries WHERE handle = %s",
                    (entry.key,)).fetchone())
            return self._bytes("ccr get", lambda conn: conn.execute(
                "SELECT data FROM typed_objects WHERE object_id = %s", (entry.key,)).fetchone())
        except NotFound:
            return None

    def read_metadata(self, entry: Entry) -> bytes | None:
        if entry.kind != "blob":
            return None
        try:
            data = self._bytes("ccr get", lambda conn: conn.execute(
                "SELECT COALESCE(metadata, ''::bytea) FROM recoveries WHERE handle = %s",
                (entry.key,)).fetchone())
        except NotFound:
            return None
        return data or None

    def info(self) -> StoreInfo:
        def work(conn):
            with self._snapshot(conn):
                rows = self._list(conn)
                used = _used(conn)
                version = self._schema_version(conn)
            return rows, used, version

        rows, used, version = self._run("ccr info", work)
        return StoreInfo.build(self.path, rows, used, self.max_bytes, version)

    def purge(self, selection: Selection, *, dry_run: bool = False,
              only: set[tuple[str, str]] | None = None) -> PurgeResult:
        """Delete what ``selection`` (and ``only``) picks, in one transaction holding the
        budget row; the budget row is then recounted from what remains."""
        def chosen(rows):
            return [e for e in rows if selection.matches(e)
                    and (only is None or (e.kind, e.key) in only)]

        if dry_run:
            def look(conn):
                with self._snapshot(conn):
                    used = _used(conn)
                    return chosen(self._list(conn)), used

            gone, used = self._run("ccr purge", look)
            return PurgeResult(self.path, gone, used, used, dry_run=True)

        def work(conn):
            with conn.transaction():
                self._lock_usage(conn)
                before = _used(conn)
                gone = chosen(self._list(conn))
                blobs = [e.key for e in gone if e.kind == "blob"]
                objects = [e.key for e in gone if e.kind == "object"]
                if blobs:
                    conn.execute("DELETE FROM recoveries WHERE handle = ANY(%s)", (blobs,))
                if objects:
                    conn.execute("DELETE FROM typed_objects WHERE object_id = ANY(%s)",
                                 (objects,))
                after = _used(conn)
                conn.execute("UPDATE ccr_usage SET used_bytes = %s WHERE id = 1", (after,))
            return gone, before, after

        gone, before, after = self._run("ccr purge", work)
        return PurgeResult(self.path, gone, before, after, dry_run=False)

    def vacuum(self) -> bool:
        """``VACUUM FULL`` of the store's tables (gives the space of deleted rows back to the
        disk; needs the tables' owner; concurrent writers wait up to the statement timeout),
        then recount the budget row. PostgreSQL skips a table the role may not vacuum with only
        a WARNING ("permission denied to vacuum …, skipping it"), and the statement succeeds:
        every warning the vacuum emits is collected and makes it a :class:`StoreError`."""
        def work(conn):
            warnings: list[str] = []

            def notice(diag) -> None:
                if (diag.severity_nonlocalized or diag.severity or "").upper() == "WARNING":
                    warnings.append(diag.message_primary or "warning")

            conn.add_notice_handler(notice)
            try:
                conn.execute("VACUUM FULL recoveries, typed_objects")
            finally:
                conn.remove_notice_handler(notice)
            if warnings:
                raise StoreError("ccr vacuum: " + _one_line("; ".join(warnings), self._url)
                                 + " (VACUUM FULL needs the tables' owner)")
            with conn.transaction():
                self._lock_usage(conn)
                _recount(conn)
            return True

        return self._run("ccr vacuum", work)

    def disk_usage(self) -> dict[str, int]:
        """Bytes on the server: the store's tables with their indexes and TOAST data."""
        def work(conn):
            return int(conn.execute(
                "SELECT (pg_total_relation_size('recoveries')"
                " + pg_total_relation_size('typed_objects')"
                " + pg_total_relation_size('ccr_usage'))::bigint").fetchone()[0])

        return {"db": self._run("ccr disk usage", work), "wal": 0, "shm": 0}

    def cache_dir(self):
        """Local caches (the tokenizer's rank cache) go to the Caveman home directory
        (``CAVEMAN_HOME`` or ``~/.caveman``, created 0700), never near the URL."""
        from pathlib import Path

        from .store import _mkdir_all, caveman_home

        try:
            home = caveman_home()
            _mkdir_all(home, 0o700)
        except (StoreError, OSError):
            return None
        return Path(home)

    def used_bytes_row(self) -> int:
        """The budget row as it stands (tests compare it with the tables)."""
        return self._run("ccr usage", lambda conn: int(conn.execute(
            "SELECT used_bytes FROM ccr_usage WHERE id = 1").fetchone()[0]))


def _pool_max() -> int:
    raw = os.environ.get("CAVEMAN_CCR_PG_POOL", "").strip()
    if raw.isdigit() and int(raw) > 0:
        return int(raw)
    return DEFAULT_POOL_MAX
