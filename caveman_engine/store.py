"""The recovery store (CCR): exact original bytes behind ``ccr_…`` handles, in SQLite.

Same file, tables and columns as the reference engine (``ccr_spec.md``), so every Caveman tool
can share ``~/.caveman/ccr.db``. Schema changes are the numbered SQL files of ``store/``,
applied once each, tracked in ``PRAGMA user_version``.

Security (ccr_spec §6): the parent directory must not be group/world writable unless sticky;
the database file is created exclusively with mode 0600 and never followed through a symlink;
existing files and the ``-wal``/``-shm`` sidecars are tightened to 0600 (SQLite creates the
sidecars with the database file's mode, so they are never readable by others).

Budget (ccr_spec §7): originals may use at most ``CAVEMAN_CCR_MAX_BYTES`` (default 512 MiB);
at the cap new writes fail with :class:`BudgetExceeded` and nothing is ever evicted.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import stat
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from . import resources

DEFAULT_MAX_BYTES = 512 << 20
MEMORY = ":memory:"
_INT64 = re.compile(r"[+-]?[0-9]+")
_HANDLE_OK = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}")


class StoreError(Exception):
    """Any store failure; the message is the one-line text shown to the user."""


class BudgetExceeded(StoreError):
    def __init__(self, msg: str = "ccr: storage budget exceeded") -> None:
        super().__init__(msg)


class NotFound(StoreError):
    def __init__(self) -> None:
        super().__init__("ccr: recovery handle not found")


class InvalidHandle(StoreError):
    def __init__(self) -> None:
        super().__init__("ccr: malformed recovery handle")


def handle_for(original: bytes) -> str:
    """``ccr_`` + the first 16 bytes of SHA-256(original), lowercase hex."""
    return "ccr_" + hashlib.sha256(original).digest()[:16].hex()


def check_handle(handle: str) -> None:
    """Reject what cannot be a handle or typed-object id before it reaches SQL."""
    if not isinstance(handle, str) or not _HANDLE_OK.fullmatch(handle):
        raise InvalidHandle()


def rfc3339_nano(ns: int | None = None) -> str:
    """UTC time like Go's RFC3339Nano: fraction with trailing zeros trimmed, none when zero."""
    ns = time.time_ns() if ns is None else ns
    sec, frac = divmod(ns, 1_000_000_000)
    base = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
    if frac:
        base += "." + f"{frac:09d}".rstrip("0")
    return base + "Z"


def budget_from_env() -> int:
    raw = os.environ.get("CAVEMAN_CCR_MAX_BYTES", "").strip()
    if not raw:
        return DEFAULT_MAX_BYTES
    if not _INT64.fullmatch(raw):
        raise StoreError("CAVEMAN_CCR_MAX_BYTES must be a positive integer")
    n = int(raw)
    if n <= 0 or n > (1 << 63) - 1:
        raise StoreError("CAVEMAN_CCR_MAX_BYTES must be a positive integer")
    return n


def default_path() -> str:
    """``CAVEMAN_CCR_DB`` verbatim, else ``<CAVEMAN_HOME or ~/.caveman>/ccr.db`` (created 0700)."""
    explicit = os.environ.get("CAVEMAN_CCR_DB", "")
    if explicit:
        return explicit
    home = os.environ.get("CAVEMAN_HOME", "")
    if not home:
        try:
            user_home = Path.home()
        except (RuntimeError, KeyError) as exc:
            raise StoreError(f"cannot resolve home directory: {exc}") from None
        home = str(user_home / ".caveman")
    try:
        _mkdir_all(home, 0o700)
    except OSError as exc:
        raise StoreError(f"cannot create ~/.caveman: {exc}") from None
    return os.path.join(home, "ccr.db")


def _mkdir_all(path: str, mode: int) -> None:
    """``mkdir -p`` like Go's ``os.MkdirAll``: every directory it creates gets ``mode``
    (``os.makedirs`` gives the missing parents 0777 & ~umask: world-writable under umask 0)."""
    path = os.path.abspath(path)
    missing = []
    while not os.path.isdir(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for d in reversed(missing):
        try:
            os.mkdir(d, mode)
        except FileExistsError:
            if not os.path.isdir(d):
                raise


# --------------------------------------------------------------------------- file security


def _secure_parent(path: str) -> str:
    """Resolve and check the parent directory; return the canonical database path."""
    parent = os.path.dirname(os.path.abspath(path))
    try:
        resolved = os.path.realpath(parent, strict=True)
    except OSError as exc:
        raise StoreError(f'resolve sqlite parent "{parent}": {exc.strerror or exc}') from None
    try:
        st = os.stat(resolved)
    except OSError as exc:
        raise StoreError(f'inspect sqlite parent "{resolved}": {exc.strerror or exc}') from None
    if not stat.S_ISDIR(st.st_mode):
        raise StoreError(f'sqlite parent "{resolved}" must be a directory')
    if os.name == "posix" and st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        raise StoreError(f'sqlite parent "{resolved}" is group/world writable')
    return os.path.join(resolved, os.path.basename(path))


def _secure_file(path: str, *, create: bool) -> None:
    """Create ``path`` exclusively with mode 0600 (``create``), or check an existing entry:
    a regular file (never a symlink), owned by us, tightened to 0600.

    Existing files are handled by path, never through a descriptor: closing any descriptor of
    a file drops every POSIX lock this process holds on it, SQLite's included, and another
    process would then re-initialise the shared-memory index under a live connection (SIGBUS).
    The entry cannot be swapped between lstat and chmod: the parent is private, or sticky."""
    label = "secure sqlite" if create else "secure sqlite sidecar"
    try:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            if not create:
                return
            flags = os.O_CREAT | os.O_EXCL | os.O_RDWR | getattr(os, "O_NOFOLLOW", 0)
            try:
                fd = os.open(path, flags, 0o600)
            except FileExistsError:
                st = os.lstat(path)
            else:
                os.fchmod(fd, 0o600)
                os.close(fd)
                return
        if not stat.S_ISREG(st.st_mode):
            raise StoreError(f'{label} "{path}": refusing non-regular file')
        if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
            raise StoreError(f'{label} "{path}": refusing file owned by another user')
        if stat.S_IMODE(st.st_mode) != 0o600:
            try:
                os.chmod(path, 0o600)
            except FileNotFoundError:
                if create:
                    raise
    except StoreError:
        raise
    except OSError as exc:
        raise StoreError(f'{label} "{path}": {exc.strerror or exc}') from None


def _secure_all(canonical: str) -> None:
    """The database file and its -wal/-shm sidecars: run before SQLite opens the file (so the
    file is created 0600) and again after (sidecars SQLite created)."""
    _secure_file(canonical, create=True)
    _secure_file(canonical + "-wal", create=False)
    _secure_file(canonical + "-shm", create=False)


# --------------------------------------------------------------------------- busy retry


def _is_busy(exc: BaseException) -> bool:
    text = str(exc)
    return "database is locked" in text or "SQLITE_BUSY" in text


def retry_busy(fn, *, budget: float = 5.0, attempts: int = 40, sleep=time.sleep, clock=time.monotonic):
    """Open-time retry (ccr_spec §8.4): up to 40 attempts within 5 s, sleeping 25 ms × i
    after failed attempt i (clipped to the time left); non-busy errors return at once."""
    deadline = clock() + budget
    last: BaseException | None = None
    for i in range(1, attempts + 1):
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc):
                raise
            last = exc
        remaining = deadline - clock()
        if remaining <= 0:
            break
        sleep(min(0.025 * i, remaining))
        if clock() >= deadline:
            break
    assert last is not None
    raise last


# --------------------------------------------------------------------------- the store


@dataclass
class Bucket:
    count: int = 0
    tokens_before: int = 0
    tokens_after: int = 0

    @property
    def ratio(self) -> float:
        if self.tokens_before <= 0:
            return 0.0
        return (self.tokens_before - self.tokens_after) / self.tokens_before


@dataclass
class Summary:
    totals: Bucket
    by_content_type: dict[str, Bucket] = field(default_factory=dict)
    storage_bytes: int = 0
    max_storage_bytes: int = 0

    @property
    def storage_full(self) -> bool:
        return self.max_storage_bytes > 0 and self.storage_bytes >= self.max_storage_bytes

    def to_json(self) -> bytes:
        """``stats`` output (spec §1.6): 2-space indented, zero/false storage fields omitted."""
        from . import jsonio

        def bucket(b: Bucket) -> dict:
            return {"count": b.count, "tokens_before": b.tokens_before,
                    "tokens_after": b.tokens_after, "ratio": jsonio.go_float_fragment(b.ratio)}

        doc: dict = {
            "totals": bucket(self.totals),
            "by_content_type": {k: bucket(v) for k, v in sorted(self.by_content_type.items())},
            "basis": "inferred",
        }
        if self.storage_bytes:
            doc["storage_bytes"] = self.storage_bytes
        if self.max_storage_bytes:
            doc["max_storage_bytes"] = self.max_storage_bytes
        if self.storage_full:
            doc["storage_full"] = True
        return jsonio.dumps(doc, sort_keys=False, indent=True)


def _migrations() -> list[tuple[int, str, str]]:
    out = []
    for p in sorted(resources.migrations_dir().glob("[0-9][0-9][0-9][0-9]_*.sql")):
        out.append((int(p.name[:4]), p.stem, p.read_text(encoding="utf-8")))
    return out


class Store:
    """One SQLite connection, guarded by a lock; autocommit except for explicit transactions."""

    def __init__(self, path: str | None = None, *, max_bytes: int | None = None) -> None:
        path = default_path() if path is None else path
        if max_bytes is None:
            max_bytes = budget_from_env()
        elif max_bytes <= 0:
            raise StoreError("ccr max storage bytes must be positive")
        self.max_bytes = max_bytes
        self._lock = threading.RLock()
        if path == MEMORY:
            self.path = MEMORY
            uri = "file::memory:"
        else:
            if not path.strip():
                raise StoreError("ccr sqlite path is required")
            self.path = _secure_parent(path)
            _secure_all(self.path)
            uri = "file:" + quote(self.path, safe="/")
        try:
            self._conn = sqlite3.connect(
                uri, uri=True, isolation_level=None, check_same_thread=False, timeout=5.0
            )
        except sqlite3.Error as exc:
            raise StoreError(f'open sqlite "{self.path}": {exc}') from None
        try:
            try:
                self._conn.execute("PRAGMA busy_timeout=5000")
                retry_busy(lambda: self._conn.execute("PRAGMA journal_mode=WAL").fetchone())
            except sqlite3.Error as exc:  # not a database, disk full, I/O error: one line
                raise StoreError(f'open sqlite "{self.path}": {exc}') from None
            self._migrate()
            self._apply_budget()
            if self.path != MEMORY:
                _secure_all(self.path)
        except BaseException:
            self._conn.close()
            raise

    # -- setup

    def _migrate(self) -> None:
        try:
            retry_busy(self._migrate_once)
        except sqlite3.Error as exc:
            raise StoreError(f'migrate sqlite "{self.path}": {exc}') from None

    def _migrate_once(self) -> None:
        c = self._conn
        migrations = _migrations()
        latest = migrations[-1][0] if migrations else 0
        if c.execute("PRAGMA user_version").fetchone()[0] >= latest:
            return
        c.execute("BEGIN IMMEDIATE")
        try:
            version = c.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                version = self._adopt_reference_schema()
            for number, _name, sql in migrations:
                if number > version:
                    for stmt in _statements(sql):
                        c.execute(stmt)
                    version = number
            c.execute(f"PRAGMA user_version={int(version)}")
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise

    def _adopt_reference_schema(self) -> int:
        """A store created by the reference engine has tables but no user_version: work out
        which migrations its schema already contains."""
        cols = [r[1] for r in self._conn.execute("PRAGMA table_info(recoveries)")]
        if not cols:
            return 0
        return 2 if "metadata" in cols else 1

    def _apply_budget(self) -> None:
        c = self._conn
        try:
            page = c.execute("PRAGMA page_size").fetchone()[0]
            max_pages = self.max_bytes // page
            if max_pages < 16:
                raise StoreError(
                    f"budget {self.max_bytes} is below SQLite minimum {16 * page}"
                )
            c.execute(f"PRAGMA max_page_count={int(max_pages)}").fetchall()
            c.execute(f"PRAGMA wal_autocheckpoint={max(1, max_pages // 16)}").fetchall()
            c.execute(f"PRAGMA journal_size_limit={self.max_bytes // 8}").fetchall()
        except (StoreError, sqlite3.Error) as exc:
            raise StoreError(f'configure sqlite storage budget "{self.path}": {exc}') from None

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- accounting

    def _used(self) -> int:
        row = self._conn.execute(
            "SELECT (SELECT COALESCE(SUM(LENGTH(original) + COALESCE(LENGTH(metadata), 0)), 0)"
            " FROM recoveries) + (SELECT COALESCE(SUM(LENGTH(data) + LENGTH(dependencies_json)), 0)"
            " FROM typed_objects)"
        ).fetchone()
        return int(row[0])

    # -- writes

    def put(
        self,
        original: bytes,
        *,
        content_type: str,
        compressor: str,
        tokens_before: int,
        tokens_after: int,
        metadata: bytes | None = None,
    ) -> str:
        """Store ``original`` (upsert by content hash, ccr_spec §8.1); returns its handle."""
        handle = handle_for(original)
        meta = metadata if metadata else None
        with self._write("ccr put") as c:
            row = c.execute(
                "SELECT content_type, compressor, tokens_before, tokens_after, original,"
                " metadata, LENGTH(original) + COALESCE(LENGTH(metadata), 0)"
                " FROM recoveries WHERE handle = ?",
                (handle,),
            ).fetchone()
            if row is not None and row[:5] == (
                content_type, compressor, tokens_before, tokens_after, original
            ) and (row[5] or None) == meta:
                return handle  # unchanged: no write, no budget check
            existing = row[6] if row is not None else 0
            if self._used() - existing + len(original) + len(meta or b"") > self.max_bytes:
                raise BudgetExceeded()
            now = rfc3339_nano()
            if row is None:
                c.execute(
                    "INSERT INTO recoveries (handle, created_at, content_type, compressor,"
                    " tokens_before, tokens_after, original, metadata)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (handle, now, content_type, compressor, tokens_before, tokens_after,
                     original, meta),
                )
            else:
                if tokens_before == 0 and row[2] > 0:  # keep measured accounting
                    content_type, compressor, tokens_before, tokens_after = row[:4]
                keep_meta = row[5] is not None and len(row[5]) > 0  # first writer wins
                c.execute(
                    "UPDATE recoveries SET created_at = ?, content_type = ?, compressor = ?,"
                    " tokens_before = ?, tokens_after = ?, original = ?, metadata = ?"
                    " WHERE handle = ?",
                    (now, content_type, compressor, tokens_before, tokens_after, original,
                     row[5] if keep_meta else meta, handle),
                )
        return handle

    @contextmanager
    def _write(self, what: str):
        """One write transaction (BEGIN IMMEDIATE, so the budget check and the write are
        atomic across processes); SQLite's "full" becomes :class:`BudgetExceeded`, other
        SQLite errors a one-line :class:`StoreError` prefixed with ``what``."""
        with self._lock:
            c = self._conn
            try:
                c.execute("BEGIN IMMEDIATE")
                yield c
                c.execute("COMMIT")
            except BaseException as exc:
                if c.in_transaction:
                    try:
                        c.execute("ROLLBACK")
                    except sqlite3.Error:
                        pass
                if isinstance(exc, sqlite3.Error):
                    text = str(exc).lower()
                    if "database or disk is full" in text or "sqlite_full" in text:
                        raise BudgetExceeded() from None
                    raise StoreError(f"{what}: {exc}") from None
                raise

    # -- reads

    def get(self, handle: str) -> bytes:
        """The stored bytes for a blob handle (``ccr_obj_…``: the typed object's data)."""
        check_handle(handle)
        if handle.startswith("ccr_obj_"):
            return self.get_object_data(handle)
        return self._fetch("SELECT original FROM recoveries WHERE handle = ?", handle)

    def get_object_data(self, object_id: str) -> bytes:
        check_handle(object_id)
        return self._fetch("SELECT data FROM typed_objects WHERE object_id = ?", object_id)

    def _fetch(self, sql: str, key: str) -> bytes:
        with self._lock:
            try:
                row = self._conn.execute(sql, (key,)).fetchone()
            except sqlite3.Error as exc:
                raise StoreError(f"ccr get: {exc}") from None
        if row is None:
            raise NotFound()
        return bytes(row[0])

    def get_metadata(self, handle: str) -> bytes | None:
        """The compressor's recovery metadata for a blob handle (None when it stored none)."""
        check_handle(handle)
        with self._lock:
            try:
                row = self._conn.execute(
                    "SELECT metadata IS NULL, metadata FROM recoveries WHERE handle = ?",
                    (handle,),
                ).fetchone()
            except sqlite3.Error as exc:
                raise StoreError(f"ccr get metadata: {exc}") from None
        if row is None:
            raise NotFound()
        return None if row[0] else bytes(row[1])

    def retrieve(self, handle: str) -> bytes:
        """Engine-level lookup (ccr_spec §9.2): blob or ``ccr_obj_`` id, then any typed id."""
        try:
            return self.get(handle)
        except NotFound:
            return self.get_object_data(handle)

    def summary(self) -> Summary:
        with self._lock:
            try:
                rows = self._conn.execute(
                    "SELECT content_type, COUNT(*), COALESCE(SUM(tokens_before), 0),"
                    " COALESCE(SUM(tokens_after), 0) FROM recoveries GROUP BY content_type"
                    " ORDER BY content_type"
                ).fetchall()
                used = self._used()
            except sqlite3.Error as exc:
                raise StoreError(f"ccr summary: {exc}") from None
        totals = Bucket()
        by_type: dict[str, Bucket] = {}
        for ct, n, before, after in rows:
            by_type[ct] = Bucket(n, before, after)
            totals.count += n
            totals.tokens_before += before
            totals.tokens_after += after
        return Summary(totals, by_type, used, self.max_bytes)

    # -- typed objects (written by other Caveman tools; here for completeness and tests)

    OBJECT_TYPES = frozenset(
        "FileObservation SearchResult CommandResult TestResult BuildResult DiffSnapshot"
        " TaskContract TaskDecision ExecutionState DocumentationExcerpt BrowserSnapshot"
        " RepositoryMap EvidenceBundle".split()
    )

    def put_object(
        self,
        data: bytes,
        *,
        object_type: str,
        session_id: str,
        source: str = "",
        repository_state: str = "",
        transform_version: str = "",
        object_id: str = "",
        dependencies: list[str] | None = None,
    ) -> str:
        if object_type not in self.OBJECT_TYPES:
            raise StoreError(f'ccr: unknown object type "{object_type}"')
        if not session_id.strip():
            raise StoreError("ccr: typed object session_id is required")
        content_hash = "sha256:" + hashlib.sha256(data).hexdigest()
        if not object_id:
            identity = "\x00".join(
                [object_type, session_id, source, repository_state, content_hash]
            ).encode()
            object_id = "ccr_obj_" + hashlib.sha256(identity).digest()[:16].hex()
        check_handle(object_id)
        import json

        deps = json.dumps(dependencies, separators=(",", ":")) if dependencies else "null"
        with self._write("ccr typed object put") as c:
            row = c.execute(
                "SELECT object_type, content_hash, source, repository_state, session_id,"
                " transform_version, dependencies_json, data FROM typed_objects"
                " WHERE object_id = ?",
                (object_id,),
            ).fetchone()
            if row is not None:
                if row != (object_type, content_hash, source, repository_state, session_id,
                           transform_version, deps, data):
                    raise StoreError("ccr: typed object id collision")
                return object_id
            if self._used() + len(data) + len(deps) > self.max_bytes:
                raise BudgetExceeded()
            c.execute(
                "INSERT INTO typed_objects (object_id, object_type, content_hash, source,"
                " created_at, repository_state, session_id, transform_version, currentness,"
                " lifecycle, dependencies_json, original_byte_length, stored_byte_length,"
                " data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'current', 'hot', ?, ?, ?, ?)",
                (object_id, object_type, content_hash, source, rfc3339_nano(),
                 repository_state, session_id, transform_version, deps, len(data),
                 len(data), data),
            )
        return object_id


def _statements(sql: str) -> list[str]:
    """Split a migration file into statements (no semicolons inside our literals)."""
    body = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
    return [s.strip() for s in body.split(";") if s.strip()]


def open_store(path: str | None = None) -> Store:
    """The store at ``path``, or at the default location (``CAVEMAN_CCR_DB`` / ``CAVEMAN_HOME``
    / ``~/.caveman/ccr.db``), with the budget from ``CAVEMAN_CCR_MAX_BYTES``."""
    return Store(path)
