"""The recovery store (CCR): exact original bytes behind ``ccr_…`` handles.

Two implementations of one interface (:class:`StoreBase`): :class:`Store`, a SQLite file (the
default), and :class:`caveman_engine.store_pg.PgStore`, a PostgreSQL database a team shares.
:func:`open_store` picks one from ``CAVEMAN_CCR_DB``: a ``postgresql://`` or ``postgres://`` URL
selects PostgreSQL, anything else is a SQLite path. The shared types (errors, :class:`Summary`,
:class:`Entry`, :class:`Selection`, …) live here; everything else in the engine (``compress``,
``retrieve``, ``stats``, ``store …``, the MCP middleware, the proxy) uses only the interface.

Same file, tables and columns as the reference engine (``ccr_spec.md``), so every Caveman tool
can share ``~/.caveman/ccr.db``. Schema changes are the numbered SQL files of ``store/``,
applied once each, tracked in ``PRAGMA user_version``.

Security (ccr_spec §6): the parent directory must not be group/world writable unless sticky;
the database file is created exclusively with mode 0600 and never followed through a symlink;
existing files and the ``-wal``/``-shm`` sidecars are tightened to 0600 (SQLite creates the
sidecars with the database file's mode, so they are never readable by others).

Budget (ccr_spec §7): originals may use at most ``CAVEMAN_CCR_MAX_BYTES`` (default 512 MiB);
at the cap new writes fail with :class:`BudgetExceeded` and nothing is ever evicted. The bytes
used are one row (``ccr_usage``, beside the reference's tables) that triggers keep in step with
every write (``store/0003_usage_counter.sql``), so a put never sums the store.

Credentials: :func:`redact` is the one function every store location or error passes through
before it is shown (a PostgreSQL URL's password, ``password=`` values, ``PGPASSWORD``).
"""

from __future__ import annotations

# Imports are few and cheap: `compress` opens the store on every agent request, and a
# repeated request (results.py) does little else. hashlib (OpenSSL), pathlib, urllib.parse,
# dataclasses and regular expressions are loaded only by what needs them.
import abc
import os
import stat
import sys
import time
from _thread import RLock

try:
    # The C module behind the sqlite3 package, which adds on top of it only DB-API aliases and
    # date/datetime adapters (no date is ever bound here) and imports datetime to do so.
    import _sqlite3 as sqlite3
except ImportError:  # pragma: no cover
    import sqlite3

from . import resources
from .records import Record

DEFAULT_MAX_BYTES = 512 << 20
MEMORY = ":memory:"
_DIGITS = frozenset("0123456789")
_HANDLE_FIRST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_HANDLE_CHARS = _HANDLE_FIRST | frozenset("_.:-")


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


_PG_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(path: str | None) -> bool:
    """Whether ``path`` (``CAVEMAN_CCR_DB``) names a PostgreSQL server rather than a file."""
    return isinstance(path, str) and path[:13].lower().startswith(_PG_SCHEMES)


_SECRET_PARAMS = ("password", "sslpassword")
_ENV_SECRETS = ("PGPASSWORD", "PGSSLPASSWORD")
# Secrets shorter than this are not searched for inside other words of a message (a one-letter
# password would turn every such letter into ***); the URL and password= masks still apply.
_MIN_SECRET = 3


def _pg_parts(url: str):
    """``(scheme, userinfo or None, rest)`` of a PostgreSQL URL, split where libpq splits it:
    the credentials are what comes before the first ``@`` when no ``/`` comes first (so a
    ``?`` or ``#`` in a password is part of it, as libpq reads it). None if not a URL."""
    scheme, sep, after = url.partition("://")
    if not sep:
        return None
    i = 0
    while i < len(after) and after[i] not in "@/":
        i += 1
    if i < len(after) and after[i] == "@":
        return scheme, after[:i], after[i + 1:]
    return scheme, None, after


def pg_url_problem(url: str) -> str | None:
    """Why libpq and a reader of ``url`` would disagree on where its password ends (so an
    error about its host or database could show part of the password), or None. Reached
    when a ``@`` or ``/`` of a password is not percent-encoded."""
    parts = _pg_parts(url)
    if parts is None:
        return "not a URL"
    _scheme, userinfo, rest = parts
    end = len(rest)
    for stop in "/?":
        k = rest.find(stop)
        if k >= 0:
            end = min(end, k)
    hosts = rest[:end]
    if "@" in hosts:
        return 'a "@" in the user name or password must be percent-encoded as %40'
    if userinfo is None and "@" in rest.split("?", 1)[0]:
        return 'a "/" in the user name or password must be percent-encoded as %2F'
    return None


def _query_masked(query: str) -> str:
    """``query`` with the value of every ``password=`` / ``sslpassword=`` parameter (its key
    percent-decoded, as libpq reads it) replaced by ``***``; everything else verbatim."""
    from urllib.parse import unquote

    out = []
    for param in query.split("&"):
        key, eq, _value = param.partition("=")
        if eq and unquote(key).strip() in _SECRET_PARAMS:
            param = f"{key}=***"
        out.append(param)
    return "&".join(out)


def mask_url(url: str) -> str:
    """``url`` fit to print: the password (in the authority or as a ``password=`` /
    ``sslpassword=`` parameter) replaced by ``***``, read the way libpq reads the URL; a URL
    where that is ambiguous (:func:`pg_url_problem`) is shown as ``scheme://***``. Never
    raises."""
    try:
        parts = _pg_parts(url)
        if parts is None:
            return "postgresql://***"
        scheme, userinfo, rest = parts
        if pg_url_problem(url) is not None:
            return f"{scheme}://***"
        if userinfo is not None:
            if ":" in userinfo:
                userinfo = userinfo.split(":", 1)[0] + ":***"
            rest = f"{userinfo}@{rest}"
        head, q, query = rest.partition("?")
        return f"{scheme}://{head}" + (f"?{_query_masked(query)}" if q else "")
    except Exception:  # noqa: BLE001 - a mask must never fail
        return "postgresql://***"


def url_secrets(url: str | None = None) -> list[str]:
    """The secrets :func:`redact` removes: the password of ``url`` (as written and decoded,
    from the authority and from ``password=`` / ``sslpassword=``) and the values of
    ``PGPASSWORD`` / ``PGSSLPASSWORD``; longest first."""
    from urllib.parse import unquote

    out = [os.environ.get(name, "") for name in _ENV_SECRETS]
    if url:
        parts = _pg_parts(url)
        if parts is not None:
            _scheme, userinfo, rest = parts
            if userinfo and ":" in userinfo:
                out.append(userinfo.split(":", 1)[1])
            _head, _q, query = rest.partition("?")
            for param in query.split("&") if query else ():
                key, eq, value = param.partition("=")
                if eq and unquote(key).strip() in _SECRET_PARAMS:
                    out.append(value)
        if "psycopg" in sys.modules:  # libpq's own reading, when the driver is loaded
            try:
                from psycopg.conninfo import conninfo_to_dict

                d = conninfo_to_dict(url)
                out += [str(d[k]) for k in _SECRET_PARAMS if d.get(k)]
            except Exception:  # noqa: BLE001
                pass
    out += [unquote(s) for s in out]
    return sorted({s for s in out if s}, key=len, reverse=True)


_LIBPQ_KEYS = frozenset("host hostaddr port dbname user password passfile sslmode sslpassword"
                        " service options connect_timeout application_name".split())


def looks_like_conninfo(path: str) -> bool:
    """Whether ``path`` (``CAVEMAN_CCR_DB``) is a libpq key/value connection string
    (``host=db user=app password=…``) rather than a file: it would otherwise become a SQLite
    file of that name, password and all."""
    if not isinstance(path, str) or "=" not in path or is_postgres_url(path):
        return False
    import re

    keys = re.findall(r"(?:^|\s)([A-Za-z_]+)\s*=", path)
    return any(k.lower() in _LIBPQ_KEYS for k in keys)


def _conninfo_error(path: str) -> StoreError:
    return StoreError(f'"{redact(path)}" is a libpq key/value connection string, not a file:'
                      " write CAVEMAN_CCR_DB as a postgresql:// URL")


_URL_START = None


def _not_a_file(path: str) -> StoreError | None:
    """The error for a store location that must not become a SQLite file of that name (its
    password would sit in the name and in every message): a libpq key/value string, or a URL
    that is no ``postgresql://`` / ``postgres://`` one (``postgresql+psycopg://``, ``pgsql://``,
    spaces around it). Only its scheme is shown."""
    global _URL_START
    if looks_like_conninfo(path):
        return _conninfo_error(path)
    if _URL_START is None:
        import re

        _URL_START = re.compile(r"\s*([A-Za-z][A-Za-z0-9+.\-]*)://")
    m = _URL_START.match(path)
    if m is None or is_postgres_url(path):
        return None
    return StoreError(f'"{m.group(1)}://…" is not a store location: CAVEMAN_CCR_DB is a file '
                      "path, :memory: or a postgresql:// URL (no spaces around it)")


_redact_res = None


def redact(text: str, url: str | None = None) -> str:
    """``text`` (an error message, a path, a log line) fit to print: every secret of
    :func:`url_secrets` replaced by ``***``, every ``postgresql://`` / ``postgres://`` URL in it
    masked (:func:`mask_url`), and the value of a key/value ``password=`` / ``sslpassword=``
    (quoted or not) replaced by ``***``. The one function every path that shows a store
    location or a store error goes through. Never raises."""
    global _redact_res
    try:
        if _redact_res is None:
            import re

            _redact_res = (
                re.compile(r"postgres(?:ql)?://[^\s\"'<>]*", re.IGNORECASE),
                re.compile(r"\b((?:ssl)?password)(\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s&'\"]+)",
                           re.IGNORECASE),
            )
        url_re, kv_re = _redact_res
        if url:
            text = text.replace(url, mask_url(url))
        for secret in url_secrets(url):
            if len(secret) >= _MIN_SECRET or secret == text:
                text = text.replace(secret, "***")
        text = url_re.sub(lambda m: mask_url(m.group(0)), text)
        return kv_re.sub(lambda m: m.group(1) + m.group(2) + "***", text)
    except Exception:  # noqa: BLE001
        return "***"


# Below this size SHA-256 is computed by the interpreter's own module: loading OpenSSL (what
# hashlib uses) costs more than it saves on small inputs.
_SMALL_HASH = 256 << 10


def sha256(data: bytes = b""):
    """A SHA-256 hash object (``hashlib.sha256``), started on ``data``."""
    if len(data) < _SMALL_HASH and "_hashlib" not in sys.modules:
        try:
            from _sha256 import sha256 as small
        except ImportError:
            pass
        else:
            return small(data)
    import hashlib

    return hashlib.sha256(data)


def handle_for(original: bytes) -> str:
    """``ccr_`` + the first 16 bytes of SHA-256(original), lowercase hex."""
    return handle_from_digest(sha256(original).digest())


def handle_from_digest(digest: bytes) -> str:
    """The handle of an original whose SHA-256 is ``digest``."""
    return "ccr_" + digest[:16].hex()


def _handle_ok(name) -> bool:
    """``[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}``, the whole string."""
    return (isinstance(name, str) and 0 < len(name) <= 128 and name[0] in _HANDLE_FIRST
            and _HANDLE_CHARS.issuperset(name))


def check_handle(handle: str) -> None:
    """Reject what cannot be a handle or typed-object id before it reaches SQL."""
    if not _handle_ok(handle):
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
    digits = raw[1:] if raw[0] in "+-" else raw
    if not digits or not _DIGITS.issuperset(digits):
        raise StoreError("CAVEMAN_CCR_MAX_BYTES must be a positive integer")
    n = int(raw)
    if n <= 0 or n > (1 << 63) - 1:
        raise StoreError("CAVEMAN_CCR_MAX_BYTES must be a positive integer")
    return n


def default_path() -> str:
    """``CAVEMAN_CCR_DB`` verbatim, else ``<CAVEMAN_HOME or ~/.caveman>/ccr.db`` (created 0700)."""
    return resolve_path(create=True)


def resolve_path(*, create: bool = False) -> str:
    """Where the store is: ``CAVEMAN_CCR_DB`` verbatim, else ``<CAVEMAN_HOME or
    ~/.caveman>/ccr.db``. Only with ``create`` is that home directory made (0700)."""
    explicit = os.environ.get("CAVEMAN_CCR_DB", "")
    if explicit:
        refused = _not_a_file(explicit)
        if refused is not None:
            raise refused
        return explicit
    home = caveman_home()
    if create:
        try:
            _mkdir_all(home, 0o700)
        except OSError as exc:
            why = ("exists and is not a directory" if isinstance(exc, FileExistsError)
                   else exc.strerror or str(exc))
            raise StoreError(f"cannot create {home}: {why}") from None
    return os.path.join(home, "ccr.db")


def caveman_home() -> str:
    """``CAVEMAN_HOME``, else ``~/.caveman`` (not created here)."""
    home = os.environ.get("CAVEMAN_HOME", "")
    if not home:
        user_home = os.path.expanduser("~")  # what Path.home() reads
        if user_home[:1] == "~":
            raise StoreError("cannot resolve home directory: Could not determine home directory.")
        home = _pathlib_join(user_home, ".caveman")
    return home


def _pathlib_parts(path: str) -> tuple[str, list[str]]:
    root = "//" if path[:2] == "//" and path[2:3] != "/" else "/" if path[:1] == "/" else ""
    return root, [p for p in path.split("/") if p and p != "."]


def _pathlib_parent(path: str) -> str:
    """``str(pathlib.PurePosixPath(path).parent)``."""
    root, parts = _pathlib_parts(path)
    return (root + "/".join(parts[:-1])) or "."


def _pathlib_join(base: str, name: str) -> str:
    """``str(pathlib.PurePosixPath(base) / name)`` for a plain ``name``: repeated slashes and
    ``.`` parts of ``base`` dropped, a leading ``//`` kept (pathlib is not imported for it)."""
    root, parts = _pathlib_parts(base)
    parts.append(name)
    return root + "/".join(parts)


def _mkdir_all(path: str, mode: int) -> None:
    """``mkdir -p`` like Go's ``os.MkdirAll``: every directory it creates gets ``mode``
    (``os.makedirs`` gives the missing parents 0777 & ~umask: world-writable under umask 0);
    on a failure, none of them is left."""
    _mkdir_tracked(path, mode)


# --------------------------------------------------------------------------- file security


_URI_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~/")


def _quote_path(path: str) -> str:
    """``urllib.parse.quote(path, safe="/")``: UTF-8 (strict), every byte but ASCII letters,
    digits and ``_.-~/`` as ``%XX``."""
    raw = path.encode("utf-8")
    if _URI_SAFE.issuperset(raw):
        return path
    return "".join(chr(b) if b in _URI_SAFE else f"%{b:02X}" for b in raw)


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


def _create_complete(path: str) -> None:
    """A new store file at ``path`` -- every migration applied, in WAL mode -- unless there is
    something at ``path`` already.

    SQLite making a new database in place syncs the disk some eight times before the first
    original is stored (a rollback journal for the switch to WAL, then a new WAL and its
    directory), a cost every first ``compress`` in a new home paid. Here the database is built
    in a private temporary file beside it (created exclusively, 0600) without syncing -- no
    one else can see it -- synced once, then hard-linked into place: a link never replaces
    anything, so a store another process made meanwhile is the one used. (The directory entry
    is made durable by SQLite, which syncs the directory when it creates the WAL for the first
    write; until then the store holds nothing to lose.) Best effort: on any
    failure (no hard links here, a full disk, ...) nothing is left behind and the caller
    creates the file the usual way, with the usual errors. Our descriptor of the file is
    closed before SQLite opens it under its real name (closing a descriptor drops this
    process's POSIX locks on the file, SQLite's included)."""
    try:
        os.lstat(path)
        return
    except FileNotFoundError:
        pass
    except OSError:
        return
    parent, name = os.path.split(path)
    tmp = os.path.join(parent, f".{name}.{os.getpid()}.{os.urandom(6).hex()}.new")
    try:
        fd = _open_new(tmp)
    except OSError:
        return
    try:
        os.fchmod(fd, 0o600)
        conn = sqlite3.connect("file:" + _quote_path(tmp), uri=True, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=OFF").fetchall()
            conn.execute("PRAGMA synchronous=OFF").fetchall()
            version = 0
            for number, _name, sql in _migrations():
                for stmt in _statements(sql):
                    conn.execute(stmt)
                version = number
            conn.execute(f"PRAGMA user_version={int(version)}").fetchall()
            if conn.execute("PRAGMA journal_mode=WAL").fetchone()[0] != "wal":
                return
        finally:
            conn.close()
        (getattr(os, "fdatasync", None) or os.fsync)(fd)
        os.link(tmp, path)  # FileExistsError: another process made the store first
    except (OSError, sqlite3.Error, UnicodeError, ValueError):
        pass
    finally:
        os.close(fd)
        try:
            os.unlink(tmp)
        except OSError:
            pass


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


class Bucket(Record):
    _fields = ("count", "tokens_before", "tokens_after")

    def __init__(self, count: int = 0, tokens_before: int = 0, tokens_after: int = 0) -> None:
        self.count = count
        self.tokens_before = tokens_before
        self.tokens_after = tokens_after

    @property
    def ratio(self) -> float:
        if self.tokens_before <= 0:
            return 0.0
        return (self.tokens_before - self.tokens_after) / self.tokens_before


class Summary(Record):
    _fields = ("totals", "by_content_type", "storage_bytes", "max_storage_bytes")

    def __init__(self, totals: Bucket, by_content_type: dict[str, Bucket] | None = None,
                 storage_bytes: int = 0, max_storage_bytes: int = 0) -> None:
        self.totals = totals
        self.by_content_type = {} if by_content_type is None else by_content_type
        self.storage_bytes = storage_bytes
        self.max_storage_bytes = max_storage_bytes

    @property
    def storage_full(self) -> bool:
        return self.max_storage_bytes > 0 and self.storage_bytes >= self.max_storage_bytes

    def to_json(self) -> bytes:
        """``stats`` output (spec §1.6): 2-space indented, zero/false storage fields omitted."""
        from . import jsonio

        def bucket(b: Bucket) -> dict:
            return {"count": b.count, "tokens_before": b.tokens_before,
                    "tokens_after": b.tokens_after,
                    "ratio": jsonio.Number(jsonio.go_float(b.ratio))}

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


def _migration_files() -> list[tuple[int, str, str]]:
    """``(number, name, path)`` of each ``NNNN_*.sql`` file of the store's migrations, in
    order: what ``glob("[0-9][0-9][0-9][0-9]_*.sql")`` finds, without reading any."""
    where = resources.migrations_location()
    try:
        names = os.listdir(where)
    except OSError:
        return []
    out = []
    for name in sorted(names):
        if (len(name) >= 9 and name[4] == "_" and name.endswith(".sql")
                and _DIGITS.issuperset(name[:4])):
            out.append((int(name[:4]), name[:-4], os.path.join(where, name)))
    return out


def _migrations() -> list[tuple[int, str, str]]:
    """``(number, name, SQL)`` of each migration, in order."""
    out = []
    for number, name, path in _migration_files():
        with open(path, encoding="utf-8") as f:
            out.append((number, name, f.read()))
    return out


class StoreBase(abc.ABC):
    """What the engine, the CLI, the MCP middleware and the proxy may use of a store.

    ``path`` is what to show the user (a file path, ``:memory:``, or a URL with its password
    masked); ``max_bytes`` the budget; ``is_local`` whether ``path`` is a file beside which
    caches may live. Errors are :class:`StoreError` (one line, no credentials)."""

    backend = "?"
    is_local = True
    path: str
    max_bytes: int

    @abc.abstractmethod
    def put(self, original: bytes, *, content_type: str, compressor: str, tokens_before: int,
            tokens_after: int, metadata: bytes | None = None) -> str: ...

    @abc.abstractmethod
    def get(self, handle: str) -> bytes: ...

    @abc.abstractmethod
    def get_object_data(self, object_id: str) -> bytes: ...

    @abc.abstractmethod
    def get_metadata(self, handle: str) -> bytes | None: ...

    @abc.abstractmethod
    def summary(self) -> Summary: ...

    @abc.abstractmethod
    def put_object(self, data: bytes, *, object_type: str, session_id: str, source: str = "",
                   repository_state: str = "", transform_version: str = "",
                   object_id: str = "", dependencies: list[str] | None = None) -> str: ...

    @abc.abstractmethod
    def entries(self, selection: Selection | None = None) -> list[Entry]: ...

    @abc.abstractmethod
    def read(self, entry: Entry) -> bytes | None: ...

    @abc.abstractmethod
    def read_metadata(self, entry: Entry) -> bytes | None: ...

    @abc.abstractmethod
    def info(self) -> StoreInfo: ...

    @abc.abstractmethod
    def purge(self, selection: Selection, *, dry_run: bool = False,
              only: set[tuple[str, str]] | None = None) -> PurgeResult: ...

    @abc.abstractmethod
    def vacuum(self) -> bool: ...

    @abc.abstractmethod
    def close(self) -> None: ...

    @abc.abstractmethod
    def disk_usage(self) -> dict[str, int]:
        """Bytes the store takes where it lives (SQLite: file, -wal, -shm)."""

    def cache_dir(self):
        """Where local caches (the tokenizer's rank cache) may live, a ``pathlib.Path``:
        beside a SQLite file; for an in-memory store the Caveman home directory if it exists,
        else None. (The PostgreSQL store uses the Caveman home, creating it 0700.)"""
        from pathlib import Path

        if self.path != MEMORY:
            return Path(self.path).parent
        try:
            home = caveman_home()
        except StoreError:
            return None
        return Path(home) if os.path.isdir(home) else None

    def cache_location(self) -> str | None:
        """:meth:`cache_dir` as a string; for a SQLite file without importing pathlib."""
        if self.path != MEMORY and type(self).cache_dir is StoreBase.cache_dir:
            return _pathlib_parent(self.path)
        found = self.cache_dir()
        return None if found is None else os.fspath(found)

    def holds(self, original: bytes, *, handle: str, content_type: str, compressor: str,
              tokens_before: int, tokens_after: int, metadata: bytes | None = None) -> bool:
        """Whether ``put`` of these arguments would find them all stored under ``handle``
        (``handle_for(original)``, which the caller has) and so write nothing. A read only;
        False when unsure (then ``put`` decides)."""
        return False

    def retrieve(self, handle: str) -> bytes:
        """Engine-level lookup (ccr_spec §9.2): blob or ``ccr_obj_`` id, then any typed id."""
        try:
            return self.get(handle)
        except NotFound:
            return self.get_object_data(handle)

    OBJECT_TYPES = frozenset(
        "FileObservation SearchResult CommandResult TestResult BuildResult DiffSnapshot"
        " TaskContract TaskDecision ExecutionState DocumentationExcerpt BrowserSnapshot"
        " RepositoryMap EvidenceBundle".split()
    )

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Store(StoreBase):
    """One SQLite connection, guarded by a lock; autocommit except for explicit transactions.

    ``Store(url)`` with a PostgreSQL URL returns a :class:`~caveman_engine.store_pg.PgStore`
    (so ``Engine(Store(os.environ["CAVEMAN_CCR_DB"]))`` works for either backend)."""

    backend = "sqlite"

    def __new__(cls, path: str | None = None, *args, **kwargs):
        if cls is Store and is_postgres_url(path):
            from .store_pg import PgStore

            return PgStore(path, *args, **kwargs)
        return super().__new__(cls)

    def __init__(self, path: str | None = None, *, max_bytes: int | None = None) -> None:
        path = default_path() if path is None else path
        if max_bytes is None:
            max_bytes = budget_from_env()
        elif max_bytes <= 0:
            raise StoreError("ccr max storage bytes must be positive")
        self.max_bytes = max_bytes
        self._lock = RLock()
        if path == MEMORY:
            self.path = MEMORY
            uri = "file::memory:"
        else:
            if not path.strip():
                raise StoreError("ccr sqlite path is required")
            refused = _not_a_file(path)
            if refused is not None:
                raise refused
            self.path = _secure_parent(path)
            _create_complete(self.path)
            _secure_all(self.path)
            uri = "file:" + _quote_path(self.path)
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
        files = _migration_files()
        latest = files[-1][0] if files else 0
        if c.execute("PRAGMA user_version").fetchone()[0] >= latest:
            return
        migrations = _migrations()
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

    def disk_usage(self) -> dict[str, int]:
        return disk_usage(self.path)

    # -- accounting

    def _used(self, *, repair: bool = False) -> int:
        """Bytes the originals hold: the ``ccr_usage`` row the triggers of
        ``store/0003_usage_counter.sql`` keep in step with every write (one row read, whatever
        the store holds). A row deleted by hand is counted from the tables, and with
        ``repair`` (inside a write transaction) written back."""
        row = self._conn.execute("SELECT used_bytes FROM ccr_usage WHERE id = 1").fetchone()
        if row is not None:
            return int(row[0])
        used = self._scan_used()
        if repair:
            self._conn.execute("INSERT OR REPLACE INTO ccr_usage (id, used_bytes) VALUES (1, ?)",
                               (used,))
        return used

    def _scan_used(self) -> int:
        """The same figure summed over every stored original (what the counter replaces; the
        tests compare the two)."""
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
            used = self._used(repair=True)
            if used - existing + len(original) + len(meta or b"") > self.max_bytes:
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

    def holds(self, original: bytes, *, handle: str, content_type: str, compressor: str,
              tokens_before: int, tokens_after: int, metadata: bytes | None = None) -> bool:
        """:meth:`StoreBase.holds`: the comparison ``put`` makes before it writes (one
        SELECT, no write transaction)."""
        meta = metadata if metadata else None
        with self._lock:
            try:  # the original compared where it lies (SQLite compares BLOBs bytewise)
                row = self._conn.execute(
                    "SELECT content_type, compressor, tokens_before, tokens_after,"
                    " typeof(original) = 'blob' AND original = ?, metadata FROM recoveries"
                    " WHERE handle = ?",
                    (original, handle),
                ).fetchone()
            except sqlite3.Error:
                return False
        return row is not None and row[:5] == (
            content_type, compressor, tokens_before, tokens_after, 1
        ) and (row[5] or None) == meta

    def _write(self, what: str) -> _Transaction:
        """One write transaction (BEGIN IMMEDIATE, so the budget check and the write are
        atomic across processes); SQLite's "full" becomes :class:`BudgetExceeded`, other
        SQLite errors a one-line :class:`StoreError` prefixed with ``what``."""
        return _Transaction(self, what, True)

    def _transaction(self, what: str, *, write: bool) -> _Transaction:
        return _Transaction(self, what, write)

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
        object_id, content_hash, deps = typed_object_identity(
            data, object_type, session_id, source, repository_state, object_id, dependencies)
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
            if self._used(repair=True) + len(data) + len(deps) > self.max_bytes:
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

    # -- management (``caveman-engine store``). Each is a plain SELECT or DELETE by key; what
    # to keep or drop is decided in Python by a :class:`Selection`, the same for any backend.

    def _read(self, what: str) -> _Transaction:
        """One read transaction: every SELECT inside sees the same snapshot."""
        return _Transaction(self, what, False)

    def _list(self, c) -> list[Entry]:
        """Every stored original without its bytes: blobs, then typed objects."""
        return entries_from_rows(
            c.execute(
                "SELECT handle, created_at, content_type, compressor, tokens_before,"
                " tokens_after, LENGTH(original), COALESCE(LENGTH(metadata), 0) FROM recoveries"
                " ORDER BY created_at, handle").fetchall(),
            c.execute(
                "SELECT object_id, created_at, object_type, content_hash, session_id, source,"
                " repository_state, transform_version, dependencies_json, LENGTH(data)"
                " FROM typed_objects ORDER BY created_at, object_id").fetchall())

    def entries(self, selection: Selection | None = None) -> list[Entry]:
        """The stored originals ``selection`` matches (all without one), oldest first."""
        with self._read("ccr list") as c:
            rows = self._list(c)
        return [e for e in rows if selection is None or selection.matches(e)]

    def read(self, entry: Entry) -> bytes | None:
        """The exact bytes behind ``entry`` (None if it was deleted since it was listed)."""
        try:
            if entry.kind == "blob":
                return self._fetch("SELECT original FROM recoveries WHERE handle = ?", entry.key)
            return self._fetch("SELECT data FROM typed_objects WHERE object_id = ?", entry.key)
        except NotFound:
            return None

    def read_metadata(self, entry: Entry) -> bytes | None:
        """A blob's recovery metadata (None when it has none, or was deleted)."""
        if entry.kind != "blob":
            return None
        try:
            data = self._fetch(
                "SELECT COALESCE(metadata, X'') FROM recoveries WHERE handle = ?", entry.key)
        except NotFound:
            return None
        return data or None

    def info(self) -> StoreInfo:
        """Counts and bytes per type, budget use, oldest/newest entry, schema version."""
        with self._read("ccr info") as c:
            rows = self._list(c)
            used = self._used()
            version = int(c.execute("PRAGMA user_version").fetchone()[0])
        return StoreInfo.build(self.path, rows, used, self.max_bytes, version)

    def purge(self, selection: Selection, *, dry_run: bool = False,
              only: set[tuple[str, str]] | None = None) -> PurgeResult:
        """Delete the originals ``selection`` matches (and, given ``only``, whose (kind, key)
        is in it: what the user confirmed), in one write transaction. The budget is what the
        remaining rows hold, so it shrinks with them. Deleted bytes are overwritten with zeros
        (``secure_delete``) and the WAL is truncated afterwards, where no reader prevents it."""
        def chosen(rows):
            return [e for e in rows if selection.matches(e)
                    and (only is None or (e.kind, e.key) in only)]

        if dry_run:
            with self._read("ccr purge") as c:
                used = self._used()
                gone = chosen(self._list(c))
            return PurgeResult(self.path, gone, used, used, dry_run=True)
        with self._lock:
            try:
                previous = int(self._conn.execute("PRAGMA secure_delete").fetchone()[0])
                self._conn.execute("PRAGMA secure_delete=1").fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"ccr purge: {exc}") from None
            try:
                with self._write("ccr purge") as c:
                    before = self._used(repair=True)
                    gone = chosen(self._list(c))
                    c.executemany("DELETE FROM recoveries WHERE handle = ?",
                                  [(e.key,) for e in gone if e.kind == "blob"])
                    c.executemany("DELETE FROM typed_objects WHERE object_id = ?",
                                  [(e.key,) for e in gone if e.kind == "object"])
                    after = self._used()
            finally:
                try:
                    self._conn.execute(f"PRAGMA secure_delete={int(previous)}").fetchall()
                except sqlite3.Error:
                    pass
            try:
                self._checkpoint()
            except sqlite3.Error:
                pass  # deleted already; the next checkpoint clears the WAL
        return PurgeResult(self.path, gone, before, after, dry_run=False)

    def _checkpoint(self) -> bool:
        """Copy the WAL into the database file and truncate it; False if a reader kept it."""
        if self.path == MEMORY:
            return True
        row = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return row is None or row[0] == 0

    def vacuum(self) -> bool:
        """Give free pages back to the file system: checkpoint, VACUUM, checkpoint. Returns
        False when another connection kept the WAL from being truncated."""
        with self._lock:
            try:
                self._checkpoint()
                self._conn.execute("VACUUM")
                return self._checkpoint()
            except sqlite3.Error as exc:
                raise StoreError(f"ccr vacuum: {exc}") from None


class _Transaction:
    """``with store._write(what) as c`` / ``store._read(what)``: the store's lock held, BEGIN
    (IMMEDIATE for a write) ... COMMIT; on any failure ROLLBACK, and a SQLite error becomes
    one line: :class:`BudgetExceeded` for a full database on a write, else
    :class:`StoreError` prefixed with ``what``. (A class rather than a generator with
    ``contextlib``, which this module does not import.)"""

    __slots__ = ("_store", "_what", "_write", "_conn")

    def __init__(self, store: Store, what: str, write: bool) -> None:
        self._store = store
        self._what = what
        self._write = write

    def __enter__(self):
        lock = self._store._lock
        lock.acquire()
        try:
            c = self._conn = self._store._conn
            try:
                if self._write:
                    c.execute("BEGIN IMMEDIATE")
                else:
                    c.execute("BEGIN")
            except BaseException as exc:
                self._abandon(exc)
                raise
        except BaseException:
            lock.release()
            raise
        return c

    def __exit__(self, typ, exc, tb) -> bool:
        try:
            if exc is None:
                try:
                    self._conn.execute("COMMIT")
                except BaseException as failure:
                    self._abandon(failure)
                    raise
            else:
                self._abandon(exc)
            return False
        finally:
            self._store._lock.release()

    def _abandon(self, exc: BaseException) -> None:
        """Roll back; raise the one-line error for a SQLite error (else return, and the
        caller lets ``exc`` go on)."""
        c = self._conn
        if c.in_transaction:
            try:
                c.execute("ROLLBACK")
            except sqlite3.Error:
                pass
        if isinstance(exc, sqlite3.Error):
            text = str(exc).lower()
            if self._write and ("database or disk is full" in text or "sqlite_full" in text):
                raise BudgetExceeded() from None
            raise StoreError(f"{self._what}: {exc}") from None


def run_statement(conn, stmt: str):
    """One statement of a migration file shipped in ``store/`` (or ``store/pg/``): the only
    SQL any backend runs that is not a literal in the code."""
    return conn.execute(stmt)


def _statements(sql: str) -> list[str]:
    """Split a migration file into statements (no semicolons inside our literals); a
    ``CREATE TRIGGER … BEGIN … END`` is one statement, semicolons of its body included."""
    body = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
    out: list[str] = []
    pending = ""
    for piece in body.split(";"):
        stmt = (pending + ";" + piece) if pending else piece
        words = stmt.split()
        if (len(words) > 1 and words[0].upper() == "CREATE" and "TRIGGER" in
                (w.upper() for w in words[1:3]) and words[-1].upper() != "END"):
            pending = stmt  # inside the trigger's body
            continue
        pending = ""
        if stmt.strip():
            out.append(stmt.strip())
    if pending.strip():
        out.append(pending.strip())
    return out


def open_store(path: str | None = None, *, pooled: bool | None = None) -> StoreBase:
    """The store at ``path``, or at the default location (``CAVEMAN_CCR_DB`` / ``CAVEMAN_HOME``
    / ``~/.caveman/ccr.db``), with the budget from ``CAVEMAN_CCR_MAX_BYTES``.

    A ``postgresql://`` / ``postgres://`` URL opens a :class:`~caveman_engine.store_pg.PgStore`:
    the URL is checked here (a malformed one raises :class:`StoreError`), the server is first
    contacted by the first read or write. ``pooled``: True, a connection pool from the start;
    False, one connection; None (default), one connection until two threads want it at once,
    then a pool (the proxy and the MCP middleware). SQLite ignores it."""
    if path is None:
        explicit = os.environ.get("CAVEMAN_CCR_DB", "")
        path = explicit if is_postgres_url(explicit) else default_path()
    if is_postgres_url(path):
        from .store_pg import PgStore

        return PgStore(path, pooled=pooled)
    return Store(path)


# --------------------------------------------------------------------------- management


_TIME_PATTERN = (r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})"
                 r"(?:\.([0-9]{1,9})[0-9]*)?([Zz]|[+-][0-9]{2}:[0-9]{2})")
_time_re = None


def parse_time(text: str) -> int | None:
    """Nanoseconds since the epoch of an RFC 3339 ``created_at`` (any fraction width, any
    offset); None when it is not one. String order is not time order within a second
    (``…:00.5Z`` < ``…:00Z``), so ages are compared on this, never on the text."""
    import datetime

    global _time_re
    if _time_re is None:
        import re

        _time_re = re.compile(_TIME_PATTERN)
    m = _time_re.fullmatch(text.strip()) if isinstance(text, str) else None
    if m is None:
        return None
    y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
    frac = int((m.group(7) or "0").ljust(9, "0"))
    zone = m.group(8)
    offset = 0 if zone in ("Z", "z") else (int(zone[1:3]) * 60 + int(zone[4:6])) * 60
    if zone[0] == "-":
        offset = -offset
    try:
        when = datetime.datetime(y, mo, d, h, mi, min(s, 59), tzinfo=datetime.timezone.utc)
    except ValueError:
        return None
    return (int(when.timestamp()) + (s - min(s, 59)) - offset) * 1_000_000_000 + frac


class Entry(Record):
    """One stored original, without its bytes. ``content_type`` is a typed object's
    ``object_type``; ``kept_bytes`` is what it counts against the budget. ``kind`` is "blob"
    (recoveries) or "object" (typed_objects); ``key`` its handle or object id."""

    _fields = ("kind", "key", "content_type", "created_at", "size", "kept_bytes", "compressor",
               "tokens_before", "tokens_after", "metadata_size", "object_fields")

    def __init__(self, kind: str, key: str, content_type: str, created_at: str, size: int,
                 kept_bytes: int, compressor: str | None = None,
                 tokens_before: int | None = None, tokens_after: int | None = None,
                 metadata_size: int = 0, object_fields: dict | None = None) -> None:
        self.kind = kind
        self.key = key
        self.content_type = content_type
        self.created_at = created_at
        self.size = size
        self.kept_bytes = kept_bytes
        self.compressor = compressor
        self.tokens_before = tokens_before
        self.tokens_after = tokens_after
        self.metadata_size = metadata_size
        self.object_fields = object_fields


class Selection(Record):
    """Which originals a purge or an export applies to: those of one of ``types`` (any type
    when empty) created before ``created_before_ns`` (any time when None). A ``created_at``
    that cannot be read never counts as old. Immutable and hashable."""

    _fields = ("types", "created_before_ns")

    def __init__(self, types: frozenset = frozenset(), created_before_ns: int | None = None
                 ) -> None:
        object.__setattr__(self, "types", types)
        object.__setattr__(self, "created_before_ns", created_before_ns)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}")

    def __hash__(self) -> int:
        return hash(self._values())

    @property
    def everything(self) -> bool:
        return not self.types and self.created_before_ns is None

    def matches(self, entry: Entry) -> bool:
        if self.types and entry.content_type not in self.types:
            return False
        if self.created_before_ns is not None:
            when = parse_time(entry.created_at)
            if when is None or when >= self.created_before_ns:
                return False
        return True


class TypeCount(Record):
    _fields = ("count", "bytes")

    def __init__(self, count: int = 0, bytes: int = 0) -> None:  # noqa: A002
        self.count = count
        self.bytes = bytes


def _by_type(entries) -> dict[str, TypeCount]:
    out: dict[str, TypeCount] = {}
    for e in entries:
        t = out.setdefault(e.content_type, TypeCount())
        t.count += 1
        t.bytes += e.kept_bytes
    return dict(sorted(out.items()))


class StoreInfo(Record):
    _fields = ("path", "schema_version", "kept_bytes", "max_bytes", "blobs", "objects",
               "oldest", "newest", "undated")

    def __init__(self, path: str, schema_version: int, kept_bytes: int, max_bytes: int,
                 blobs: dict[str, TypeCount], objects: dict[str, TypeCount],
                 oldest: str | None, newest: str | None, undated: int) -> None:
        self.path = path
        self.schema_version = schema_version
        self.kept_bytes = kept_bytes
        self.max_bytes = max_bytes
        self.blobs = blobs
        self.objects = objects
        self.oldest = oldest
        self.newest = newest
        self.undated = undated

    @classmethod
    def build(cls, path, entries, kept, max_bytes, version) -> StoreInfo:
        dated = [(parse_time(e.created_at), e.created_at) for e in entries]
        times = sorted((t, text) for t, text in dated if t is not None)
        return cls(path, version, kept, max_bytes,
                   _by_type(e for e in entries if e.kind == "blob"),
                   _by_type(e for e in entries if e.kind == "object"),
                   times[0][1] if times else None, times[-1][1] if times else None,
                   len(dated) - len(times))

    @property
    def count(self) -> int:
        return sum(t.count for t in self.blobs.values()) + sum(
            t.count for t in self.objects.values())


class PurgeResult(Record):
    _fields = ("path", "entries", "kept_before", "kept_after", "dry_run")

    def __init__(self, path: str, entries: list[Entry], kept_before: int, kept_after: int,
                 dry_run: bool) -> None:
        self.path = path
        self.entries = entries
        self.kept_before = kept_before
        self.kept_after = kept_after
        self.dry_run = dry_run

    @property
    def count(self) -> int:
        return len(self.entries)

    @property
    def bytes(self) -> int:
        return sum(e.kept_bytes for e in self.entries)

    @property
    def by_type(self) -> dict[str, TypeCount]:
        return _by_type(self.entries)


def exists(path: str) -> bool:
    """Whether a store is there (without opening or creating anything). A PostgreSQL URL
    counts as there: its tables are created by the first command that connects."""
    return path == MEMORY or is_postgres_url(path) or os.path.lexists(path)


def disk_usage(path: str) -> dict[str, int]:
    """Bytes on disk of the database file and its sidecars (0 for missing ones)."""
    out = {}
    for name, suffix in (("db", ""), ("wal", "-wal"), ("shm", "-shm")):
        size = 0
        if path != MEMORY and not is_postgres_url(path):
            try:
                st = os.lstat(path + suffix)
                if stat.S_ISREG(st.st_mode):
                    size = st.st_size
            except OSError:
                pass
        out[name] = size
    return out


# --------------------------------------------------------------------------- export


class ExportError(StoreError):
    """An export refused (before writing anything) or failed."""


class ExportResult(Record):
    _fields = ("dest", "archive", "count", "bytes", "mismatched", "skipped")

    def __init__(self, dest: str, archive: bool, count: int = 0, bytes: int = 0,  # noqa: A002
                 mismatched: list[str] | None = None, skipped: list[str] | None = None) -> None:
        self.dest = dest
        self.archive = archive
        self.count = count
        self.bytes = bytes
        self.mismatched = [] if mismatched is None else mismatched
        self.skipped = [] if skipped is None else skipped


MANIFEST = "manifest.jsonl"


def is_archive(dest: str) -> bool:
    return dest.endswith((".tar", ".tar.gz", ".tgz"))


def _file_names(entries: list[Entry]) -> list[tuple[str, str | None]]:
    """(file, metadata file or None) per entry: the handle itself when it is a safe file name,
    else ``obj_`` + a hash of the id (the manifest keeps the id)."""
    used = {MANIFEST}
    out = []
    for e in entries:
        name = e.key
        if not _handle_ok(name) or name.endswith(".metadata") or name in used:
            name = "obj_" + sha256(e.key.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        used.add(name)
        meta = None
        if e.metadata_size:
            meta = name + ".metadata"
            used.add(meta)
        out.append((name, meta))
    return out


def _manifest_line(e: Entry, name: str, meta: str | None, data: bytes, digest: str,
                   matches: bool) -> bytes:
    import json

    row = {"handle": e.key, "kind": e.kind, "content_type": e.content_type,
           "compressor": e.compressor, "tokens_before": e.tokens_before,
           "tokens_after": e.tokens_after, "created_at": e.created_at, "size": len(data),
           "sha256": digest, "file": name}
    if meta:
        row["metadata_file"] = meta
    if e.object_fields is not None:
        row["object"] = e.object_fields
    if not matches:
        row["hash_matches_handle"] = False
    return json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def _hash_matches(e: Entry, data: bytes, digest: str) -> bool:
    """A blob's handle is its content hash; a typed object carries ``sha256:<hex>``."""
    if e.kind == "blob":
        return handle_for(data) == e.key
    return (e.object_fields or {}).get("content_hash") == "sha256:" + digest


def export_originals(store: StoreBase, dest: str, selection: Selection | None = None, *,
                     force: bool = False, warn=lambda line: None) -> ExportResult:
    """Write the selected originals to ``dest``: a directory (created 0700; one 0600 file per
    original named by its handle, plus ``manifest.jsonl``), or a tar file when ``dest`` ends
    in ``.tar``/``.tar.gz``/``.tgz`` (same layout inside, the archive 0600). Nothing existing
    is replaced unless ``force``; the refusal happens before anything is written."""
    _check_dest(dest)
    entries = store.entries(selection)
    names = _file_names(entries)
    if is_archive(dest):
        return _export_tar(store, dest, entries, names, force, warn)
    return _export_dir(store, dest, entries, names, force, warn)


def _originals(store, entries, names, result, warn):
    """(entry, file, metadata file, data, metadata, manifest line) for each entry still there."""
    for e, (name, meta_name) in zip(entries, names):
        data = store.read(e)
        if data is None:
            result.skipped.append(e.key)
            warn(f"export: {e.key} was deleted while exporting; skipped")
            continue
        meta = store.read_metadata(e) if meta_name else None
        digest = sha256(data).hexdigest()
        ok = _hash_matches(e, data, digest)
        if not ok:
            result.mismatched.append(e.key)
            warn(f"export: {e.key}: stored bytes do not match its hash; exported as stored")
        result.count += 1
        result.bytes += len(data)
        yield (e, name, meta_name if meta else None, data, meta,
               _manifest_line(e, name, meta_name if meta else None, data, digest, ok))


def _open_new(path: str) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                   | getattr(os, "O_CLOEXEC", 0), 0o600)


def _write_fd(fd: int, data: bytes, mtime_ns: int | None) -> None:
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fchmod(fd, 0o600)
        if mtime_ns is not None and os.utime in os.supports_fd:
            os.utime(fd, ns=(mtime_ns, mtime_ns))
        os.fsync(fd)
    finally:
        os.close(fd)


def _check_dest(dest: str) -> None:
    """An export destination must name something: an empty or blank one would otherwise be
    the current directory (``os.path.join("", name)``)."""
    if not isinstance(dest, str) or not dest.strip() or "\x00" in dest:
        raise ExportError("export: the destination is empty: name a directory or a .tar or "
                          ".tar.gz file")


def _export_dir(store, dest, entries, names, force, warn) -> ExportResult:
    """Every file is first written into a private staging directory inside ``dest`` and moved
    into place only once all are complete: on any failure the staging directory, the files
    already moved and the directory this export created are removed again, so a failed
    export leaves nothing behind (with ``--force``, files already replaced stay replaced).
    ``dest`` itself may be created, its missing parents never are."""
    created: list[str] = []
    try:
        st = os.stat(dest)
    except FileNotFoundError:
        try:
            os.mkdir(dest, 0o700)
        except OSError as exc:
            raise ExportError(f"export: cannot write {dest}: {exc.strerror or exc}") from None
        created = [os.path.abspath(dest)]
    except OSError as exc:
        raise ExportError(f"export: cannot write {dest}: {exc.strerror or exc}") from None
    else:
        if not stat.S_ISDIR(st.st_mode):
            raise ExportError(f"export: {dest} exists and is not a directory"
                              " (name a .tar or .tar.gz file to write an archive)")
        if st.st_mode & 0o077:
            warn(f"export: {dest} is accessible to other users (mode "
                 f"{stat.S_IMODE(st.st_mode):04o}); the exported originals are 0600")
    wanted = [MANIFEST] + [n for pair in names for n in pair if n]
    if not force and not created:
        clash = [n for n in wanted if os.path.lexists(os.path.join(dest, n))]
        if clash:
            more = f" and {len(clash) - 1} more" if len(clash) > 1 else ""
            raise ExportError(f"export: {os.path.join(dest, clash[0])} exists{more}"
                              " (use --force to overwrite)")
    result = ExportResult(dest, archive=False)
    staging = os.path.join(dest, f".ccr-export-{os.getpid()}-{os.urandom(6).hex()}")
    staged: list[str] = []
    moved: list[str] = []
    try:
        try:
            os.mkdir(staging, 0o700)
            manifest = bytearray()
            for e, name, meta_name, data, meta, line in _originals(store, entries, names,
                                                                   result, warn):
                when = parse_time(e.created_at)
                _write_fd(_open_new(os.path.join(staging, name)), data, when)
                staged.append(name)
                if meta_name:
                    _write_fd(_open_new(os.path.join(staging, meta_name)), meta, when)
                    staged.append(meta_name)
                manifest += line
            _write_fd(_open_new(os.path.join(staging, MANIFEST)), bytes(manifest), None)
            staged.append(MANIFEST)
            for name in staged:
                src, dst = os.path.join(staging, name), os.path.join(dest, name)
                if force:
                    os.replace(src, dst)  # a symlink in its place is replaced, not followed
                else:
                    try:
                        os.link(src, dst, follow_symlinks=False)  # never replaces anything
                    except FileExistsError:
                        raise ExportError(f"export: {dst} exists (use --force to overwrite)"
                                          ) from None
                    except OSError:  # no hard links here: check, then rename
                        if os.path.lexists(dst):
                            raise ExportError(f"export: {dst} exists (use --force to "
                                              "overwrite)") from None
                        os.rename(src, dst)
                moved.append(dst)
            _fsync_dir(dest)
        except OSError as exc:
            raise ExportError(f"export: write {exc.filename or dest}: {exc.strerror or exc}"
                              ) from None
    except BaseException:
        if not force:
            for path in moved:
                _unlink_quietly(path)
        _remove_staging(staging)
        _remove_dirs(created)
        raise
    _remove_staging(staging)
    return result


def _mkdir_tracked(path: str, mode: int) -> list[str]:
    """:func:`_mkdir_all`, returning the directories it created, outermost first."""
    path = os.path.abspath(path)
    missing = []
    while not os.path.isdir(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    made: list[str] = []
    try:
        for d in reversed(missing):
            try:
                os.mkdir(d, mode)
            except FileExistsError:
                if not os.path.isdir(d):
                    raise
            else:
                made.append(d)
    except OSError:
        _remove_dirs(made)
        raise
    return made


def _remove_dirs(made: list[str]) -> None:
    for d in reversed(made):
        try:
            os.rmdir(d)
        except OSError:
            pass


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _remove_staging(staging: str) -> None:
    """The staging directory (this export's own) and what is left in it."""
    try:
        left = os.listdir(staging)
    except OSError:
        return
    for name in left:
        _unlink_quietly(os.path.join(staging, name))
    try:
        os.rmdir(staging)
    except OSError:
        pass


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _export_tar(store, dest, entries, names, force, warn) -> ExportResult:
    """The archive is written beside ``dest`` and linked (or, with --force, renamed) into
    place once complete. An existing ``dest`` that is no regular file (a device, a FIFO) is
    written in place, never replaced; a missing parent directory is never created."""
    try:
        st = os.stat(dest)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise ExportError(f"export: cannot write {dest}: {exc.strerror or exc}") from None
    in_place = st is not None and not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode)
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise ExportError(f"export: {dest} is a directory")
    if os.path.lexists(dest) and not force and not in_place:
        raise ExportError(f"export: {dest} exists (use --force to overwrite)")
    tmp = os.path.join(os.path.dirname(os.path.abspath(dest)),
                       f".{os.path.basename(dest)}.{os.getpid()}.tmp")
    result = ExportResult(dest, archive=True)
    ours = False
    try:
        try:
            if in_place:
                fd = os.open(dest, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
            else:
                fd = _open_new(tmp)
                ours = True
        except OSError as exc:
            raise ExportError(f"export: cannot write {dest}: {exc.strerror or exc}") from None
        with os.fdopen(fd, "wb") as raw:
            # a device or FIFO cannot seek: tarfile's stream mode (`|`) never does
            mode = ("w|" if in_place else "w:") + ("" if dest.endswith(".tar") else "gz")
            _write_tar(raw, mode, store, entries, names, result, warn)
            raw.flush()
            if not in_place:
                os.fsync(raw.fileno())
        if force and not in_place:
            os.replace(tmp, dest)
            ours = False
        elif not in_place:
            try:
                os.link(tmp, dest)  # fails if dest appeared meanwhile: never replaced silently
            except FileExistsError:
                raise ExportError(f"export: {dest} exists (use --force to overwrite)") from None
            except OSError:
                if os.path.lexists(dest):
                    raise ExportError(f"export: {dest} exists (use --force to overwrite)") from None
                os.rename(tmp, dest)
                ours = False
    except OSError as exc:
        raise ExportError(f"export: write {dest}: {exc.strerror or exc}") from None
    finally:
        if ours:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    return result


def export_tar_stream(store: StoreBase | None, out, selection: Selection | None = None, *,
                      warn=lambda line: None) -> ExportResult:
    """Write the selected originals as an uncompressed tar stream to the file object ``out``
    (``store export -``: stdout), the layout of a tar file export. ``store`` None (no store
    yet) writes an archive holding an empty manifest. A failed write of ``out`` is raised as
    it comes (stdout's own error: a reader that went away ends the command quietly)."""
    entries = store.entries(selection) if store is not None else []
    result = ExportResult("-", archive=True)
    _write_tar(out, "w|", store, entries, _file_names(entries), result, warn)
    return result


def _write_tar(raw, mode: str, store, entries, names, result: ExportResult, warn) -> None:
    """The archive of ``entries`` into the file object ``raw``: one 0600 member per original
    (and metadata file), then ``manifest.jsonl``."""
    import io
    import tarfile

    now = time.time()

    def member(name: str, data: bytes, when: int | None) -> tuple[tarfile.TarInfo, io.BytesIO]:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        info.mode = 0o600
        info.mtime = when / 1e9 if when is not None else now
        info.uname = info.gname = ""
        return info, io.BytesIO(data)

    with tarfile.open(fileobj=raw, mode=mode, format=tarfile.PAX_FORMAT) as tar:
        manifest = bytearray()
        for e, name, meta_name, data, meta, line in _originals(store, entries, names, result,
                                                               warn):
            when = parse_time(e.created_at)
            tar.addfile(*member(name, data, when))
            if meta_name:
                tar.addfile(*member(meta_name, meta, when))
            manifest += line
        tar.addfile(*member(MANIFEST, bytes(manifest), None))


def entries_from_rows(blobs, objects) -> list[Entry]:
    """:class:`Entry` objects from the two listing queries' rows (both backends select the
    same columns): ``(handle, created_at, content_type, compressor, tokens_before,
    tokens_after, size, metadata_size)`` and ``(object_id, created_at, object_type,
    content_hash, session_id, source, repository_state, transform_version,
    dependencies_json, size)``."""
    out = []
    for key, created, ctype, comp, before, after, size, meta in blobs:
        out.append(Entry("blob", key, ctype, created, size, size + meta, compressor=comp,
                         tokens_before=before, tokens_after=after, metadata_size=meta))
    for key, created, otype, chash, session, source, repo, version, deps, size in objects:
        fields = {"object_type": otype, "content_hash": chash, "session_id": session,
                  "source": source, "repository_state": repo, "transform_version": version,
                  "dependencies_json": deps}
        out.append(Entry("object", key, otype, created, size, size + len(deps),
                         object_fields=fields))
    return out


def typed_object_identity(data: bytes, object_type: str, session_id: str, source: str,
                          repository_state: str, object_id: str,
                          dependencies: list[str] | None) -> tuple[str, str, str]:
    """``(object_id, content_hash, dependencies_json)`` of a typed object (ccr_spec §8.2),
    checked: a known type, a session, a well-formed id (derived when not given)."""
    import json

    if object_type not in StoreBase.OBJECT_TYPES:
        raise StoreError(f'ccr: unknown object type "{object_type}"')
    if not session_id.strip():
        raise StoreError("ccr: typed object session_id is required")
    content_hash = "sha256:" + sha256(data).hexdigest()
    if not object_id:
        identity = "\x00".join(
            [object_type, session_id, source, repository_state, content_hash]).encode()
        object_id = "ccr_obj_" + sha256(identity).digest()[:16].hex()
    check_handle(object_id)
    deps = json.dumps(dependencies, separators=(",", ":")) if dependencies else "null"
    return object_id, content_hash, deps
