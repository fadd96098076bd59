"""Faults: SIGKILL of writers mid-transaction, a full disk, a read-only store, the budget.

The promise under test: a handle that was printed always retrieves the exact original, the
store always reopens with ``PRAGMA integrity_check = ok``, and when the original cannot be
stored nothing lossy is emitted (the input passes through with an ``error`` field, exit 0).
Store-open failures are one-line ``caveman-engine CMD: cannot open recovery store: …`` errors, exit 1 (spec
§1 error table), never a traceback.

Kill loop: 20 kills in CI, 500 with ``-m slow`` (``docs/hardening.md``).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from caveman_engine.engine import ERR_UNAVAILABLE, Engine
from caveman_engine.store import NotFound, Store, handle_for

from .conftest import console_script
from .hardening.faultgen import fault_input

WRITER = Path(__file__).resolve().parent / "hardening" / "writer.py"


# --------------------------------------------------------------------------- kill -9


class KillLoop:
    def __init__(self, db: Path, cache_dir: Path) -> None:
        self.db = db
        self.env = {k: v for k, v in os.environ.items() if k != "CAVE_ENGINE_TOON"}
        self.env.update(CAVEMAN_CCR_DB=str(db), CAVEMAN_CACHE_DIR=str(cache_dir))
        self.printed: dict[str, bytes] = {}
        self.kills = {"insert": 0, "commit": 0, "random": 0, "cli": 0}
        self.wal_dirty = 0  # commit-mode kills with uncommitted frames in the WAL

    def writer_kill(self, it: int, mode: str, rng: random.Random) -> int | None:
        """Run a writer and SIGKILL it; returns the index it was working on."""
        pause = "none"
        if mode in ("insert", "commit"):
            # the 4th compress of a run is the large input (faultgen)
            pause = f"{mode}:{rng.choice([1, 2, 4, 4])}"
        start = it * 100
        p = subprocess.Popen(
            [sys.executable, str(WRITER), str(self.db), str(start), "12", pause],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env,
        )
        state = {"in_flight": None, "wal_at_begin": 0}
        wal = Path(str(self.db) + "-wal")

        def handle_line(line: str) -> str:
            word, *rest = line.split()
            if word == "begin":
                state["in_flight"] = int(rest[0])
                state["wal_at_begin"] = wal.stat().st_size if wal.exists() else 0
            elif word == "handle":
                i, handle = int(rest[0]), rest[1]
                assert handle == handle_for(fault_input(i))
                self.printed[handle] = fault_input(i)
                state["in_flight"] = None
            elif word == "error":
                raise AssertionError(f"writer reported {line!r}")
            return word

        deadline = None if mode != "random" else time.monotonic() + rng.uniform(0.0, 0.35)
        try:
            while deadline is None or time.monotonic() < deadline:
                line = p.stdout.readline().decode()
                if not line or handle_line(line) == "done":
                    break
                if line.startswith("paused "):
                    i = int(line.split()[2])
                    assert mode in ("insert", "commit") and i == state["in_flight"]
                    if mode == "commit" and len(fault_input(i)) > 100_000:
                        # the uncommitted row's pages already sit in the WAL
                        grown = (wal.stat().st_size if wal.exists() else 0) - state["wal_at_begin"]
                        if grown > 64 * 1024:
                            self.wal_dirty += 1
                    break
        finally:
            p.send_signal(signal.SIGKILL)
            p.wait()
            # whatever it printed before dying counts as printed
            for line in p.stdout.read().decode().splitlines():
                handle_line(line)
            p.stdout.close()
            p.stderr.close()
            p.stdin.close()
        in_flight = state["in_flight"]
        self.kills[mode] += 1
        return in_flight

    def cli_kill(self, it: int, rng: random.Random) -> int:
        i = it * 100
        data = fault_input(i)
        p = subprocess.Popen([console_script(), "compress"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env)
        p.stdin.write(data)
        p.stdin.close()
        time.sleep(rng.uniform(0.0, 0.3))
        p.send_signal(signal.SIGKILL)
        out, err = p.stdout.read(), p.stderr.read()
        p.wait()
        p.stdout.close()
        p.stderr.close()
        if err.endswith(b"\n") and b"recovery_handle" in err:
            report = json.loads(err)
            assert out != data
            self.printed[report["recovery_handle"]] = data
        self.kills["cli"] += 1
        return i

    def verify(self, in_flight: int | None, mode: str) -> None:
        with Store(str(self.db)) as s:
            assert s._conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
            for handle, data in self.printed.items():
                assert s.get(handle) == data, handle
            if in_flight is not None:
                data = fault_input(in_flight)
                handle = handle_for(data)
                try:
                    got = s.get(handle)
                except NotFound:
                    got = None
                if mode in ("insert", "commit"):
                    assert got is None, "killed before COMMIT, yet the row is there"
                else:
                    assert got in (None, data)
                if got is not None:
                    self.printed[handle] = data
            rows = s._conn.execute("SELECT COUNT(*) FROM recoveries").fetchone()[0]
            assert s.summary().totals.count == rows == len(self.printed)


def kill_loop(tmp_path: Path, cache_dir: Path, kills: int, seed: int) -> KillLoop:
    d = tmp_path / "killstore"
    d.mkdir(mode=0o700)
    loop = KillLoop(d / "ccr.db", cache_dir)
    rng = random.Random(seed)
    modes = ["insert", "commit", "random", "cli"]
    for it in range(kills):
        mode = modes[it % len(modes)]
        if mode == "cli":
            in_flight = loop.cli_kill(it, rng)
        else:
            in_flight = loop.writer_kill(it, mode, rng)
        loop.verify(in_flight, mode)
    assert sum(loop.kills.values()) == kills
    assert len(loop.printed) >= kills // 2  # handles were printed and survived
    return loop


def test_sigkill_writers_never_lose_a_printed_handle(tmp_path, rank_cache_dir):
    loop = kill_loop(tmp_path, rank_cache_dir, kills=20, seed=1)
    assert loop.wal_dirty >= 1  # at least one kill left uncommitted frames in the WAL


@pytest.mark.slow
def test_sigkill_writers_500(tmp_path, rank_cache_dir):
    loop = kill_loop(tmp_path, rank_cache_dir, kills=500, seed=2)
    print(f"\nkills survived: {loop.kills}, handles verified: {len(loop.printed)},"
          f" commit kills with a dirty WAL: {loop.wal_dirty}")


# --------------------------------------------------------------------------- helpers


def log(lines: int, tag: bytes = b"a") -> bytes:
    return b"".join(b"2026-06-01 INFO %s request served id=%d\n" % (tag, i) for i in range(lines))


def run_cli(db: Path, cache: Path, *args: str, data: bytes = b"", env: dict | None = None):
    full = {k: v for k, v in os.environ.items() if k != "CAVE_ENGINE_TOON"}
    full.update(CAVEMAN_CCR_DB=str(db), CAVEMAN_CACHE_DIR=str(cache))
    full.update(env or {})
    return subprocess.run([console_script(), *args], input=data, capture_output=True,
                          env=full, timeout=120)


@contextlib.contextmanager
def tmpfs(where: Path, size: str):
    where.mkdir(mode=0o700)
    if shutil.which("mount") is None:
        pytest.skip("no mount(8) here: full-disk / read-only filesystem cases need a tmpfs")
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs",
                        str(where)], capture_output=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root/CAP_SYS_ADMIN): {p.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def fill(directory: Path, leave: int) -> None:
    """Fill the filesystem, then give back ``leave`` bytes."""
    filler = directory / "filler"
    with open(filler, "wb") as f:
        chunk = b"\0" * 65536
        try:
            while True:
                f.write(chunk)
                f.flush()
        except OSError:
            pass
    with contextlib.suppress(OSError):
        os.truncate(filler, max(0, filler.stat().st_size - leave))


def one_line_open_error(r, db: Path, command: str = "compress") -> str:
    """The one error line, without its ``caveman-engine COMMAND: `` prefix."""
    assert r.returncode == 1
    assert r.stdout == b""
    text = r.stderr.decode()
    assert text.count("\n") == 1 and "Traceback" not in text, text
    prefix = f"caveman-engine {command}: "
    assert text.startswith(prefix + "cannot open recovery store: "), text
    return text[len(prefix):]


# --------------------------------------------------------------------------- full disk


def test_full_disk_passes_through_and_keeps_old_handles(tmp_path, rank_cache_dir):
    with tmpfs(tmp_path / "small", "1m") as d:
        db = d / "ccr.db"
        first = log(300)
        r = run_cli(db, rank_cache_dir, "compress", data=first)
        old = json.loads(r.stderr)["recovery_handle"]
        fill(d, leave=200_000)
        big = log(20_000, b"b")  # ~0.9 MB original: cannot fit
        r = run_cli(db, rank_cache_dir, "compress", data=big)
        assert r.returncode == 0
        assert r.stdout == big
        report = json.loads(r.stderr)
        # ccr_spec §7.2: SQLite's "database or disk is full" is reported as the budget error
        assert report["error"] == "cave_ccr_budget_exceeded"
        assert report["tokens_after"] == report["tokens_before"] and report["ratio"] == 0
        assert "recovery_handle" not in report and "method" not in report
        r = run_cli(db, rank_cache_dir, "retrieve", old)
        assert (r.returncode, r.stdout) == (0, first)
        r = run_cli(db, rank_cache_dir, "stats")
        assert r.returncode == 0 and json.loads(r.stdout)["totals"]["count"] == 1
        with Store(str(db)) as s:
            assert s._conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


def test_completely_full_disk_is_a_one_line_open_error(tmp_path, rank_cache_dir):
    """Regression: with no space for the WAL index, ``PRAGMA journal_mode=WAL`` failed and
    the sqlite3 error escaped as a traceback."""
    with tmpfs(tmp_path / "small", "1m") as d:
        db = d / "ccr.db"
        assert run_cli(db, rank_cache_dir, "compress", data=log(300)).returncode == 0
        fill(d, leave=0)
        for args in (["compress"], ["stats"], ["retrieve", handle_for(log(300))]):
            r = run_cli(db, rank_cache_dir, *args, data=log(50))
            text = one_line_open_error(r, db, args[0])
            assert text.startswith(f'cannot open recovery store: open sqlite "{db}": '), text


def test_corrupt_store_file_is_a_one_line_open_error(store_dir, rank_cache_dir):
    """Regression (same fix): a store file that is not SQLite used to crash the CLI."""
    db = store_dir / "ccr.db"
    db.write_bytes(os.urandom(8192))
    db.chmod(0o600)
    data = log(300)
    for args in (["compress"], ["stats"], ["retrieve", handle_for(data)]):
        r = run_cli(db, rank_cache_dir, *args, data=data)
        text = one_line_open_error(r, db, args[0])
        assert text == f'cannot open recovery store: open sqlite "{db}": file is not a database\n'


# --------------------------------------------------------------------------- read-only


@contextlib.contextmanager
def immutable(*paths: Path):
    if shutil.which("chattr") is None:
        pytest.skip("no chattr(1): cannot make a file immutable (root ignores file modes)")
    done = []
    try:
        for p in paths:
            r = subprocess.run(["chattr", "+i", str(p)], capture_output=True)
            if r.returncode != 0:
                pytest.skip(f"chattr +i not supported here: {r.stderr.decode().strip()}")
            done.append(p)
        yield
    finally:
        for p in done:
            subprocess.run(["chattr", "-i", str(p)], capture_output=True)


def test_immutable_store_passes_through_as_unavailable(store_dir, rank_cache_dir):
    """The database file cannot be written (``chattr +i``; chmod means nothing to root):
    compress emits the original with ``cave_ccr_unavailable`` and exit 0; old handles,
    ``stats`` and ``retrieve`` keep working."""
    db = store_dir / "ccr.db"
    first = log(300)
    old = json.loads(run_cli(db, rank_cache_dir, "compress", data=first).stderr)["recovery_handle"]
    with immutable(db):
        data = log(400, b"new")
        r = run_cli(db, rank_cache_dir, "compress", data=data)
        assert r.returncode == 0 and r.stdout == data
        report = json.loads(r.stderr)
        assert report["error"] == "cave_ccr_unavailable"
        assert "recovery_handle" not in report and report["ratio"] == 0
        assert report["tokens_after"] == report["tokens_before"]
        r = run_cli(db, rank_cache_dir, "retrieve", old)
        assert (r.returncode, r.stdout, r.stderr) == (0, first, b"")
        r = run_cli(db, rank_cache_dir, "stats")
        assert r.returncode == 0 and json.loads(r.stdout)["totals"]["count"] == 1


def test_store_becoming_unwritable_mid_run(store_dir, rank_cache_dir, monkeypatch):
    """An engine whose store turns read-only while open (spec §10 #33): pass-through with
    the unavailable error, nothing lossy emitted, earlier handles still retrieve."""
    monkeypatch.setenv("CAVEMAN_CACHE_DIR", str(rank_cache_dir))
    db = store_dir / "ccr.db"
    with Store(str(db)) as s:
        engine = Engine(s)
        first = log(300)
        h = engine.compress(first).recovery_handle
        assert h is not None
        with immutable(db, Path(str(db) + "-wal")):
            data = log(300, b"late")
            r = engine.compress(data)
            assert r.error == ERR_UNAVAILABLE
            assert r.is_clean_passthrough(data)
            assert engine.retrieve(h) == first
        r = engine.compress(data)  # writable again: stored as usual
        assert r.error is None and engine.retrieve(r.recovery_handle) == data


def test_read_only_filesystem_is_a_one_line_open_error(tmp_path, rank_cache_dir):
    """On a read-only mount SQLite cannot create the WAL sidecars, so the store cannot be
    opened: ``caveman-engine compress: cannot open recovery store: …``, exit 1, nothing on stdout (spec §1 error
    table: a store that cannot be opened is an error, unlike a failed write)."""
    with tmpfs(tmp_path / "ro", "4m") as d:
        db = d / "ccr.db"
        assert run_cli(db, rank_cache_dir, "compress", data=log(300)).returncode == 0
        r = subprocess.run(["mount", "-o", "remount,ro", str(d)], capture_output=True)
        if r.returncode != 0:
            pytest.skip(f"cannot remount read-only: {r.stderr.decode().strip()}")
        r = run_cli(db, rank_cache_dir, "compress", data=log(400, b"x"))
        text = one_line_open_error(r, db)
        assert text == f'cannot open recovery store: open sqlite "{db}": unable to open database file\n'


# --------------------------------------------------------------------------- budget


def test_budget_reached_through_the_cli(store_dir, rank_cache_dir):
    """Fill a 128 KiB budget with real compresses: the first refusal passes the input
    through with ``cave_ccr_budget_exceeded`` (exit 0); every earlier handle still
    retrieves, an identical repeat still gets its handle, nothing was evicted."""
    db = store_dir / "ccr.db"
    env = {"CAVEMAN_CCR_MAX_BYTES": "131072"}
    stored: dict[str, bytes] = {}
    refused = None
    for i in range(40):
        data = log(200, b"batch%d" % i)
        r = run_cli(db, rank_cache_dir, "compress", data=data, env=env)
        assert r.returncode == 0
        report = json.loads(r.stderr)
        if "error" in report:
            refused = (data, r, report)
            break
        stored[report["recovery_handle"]] = data
    assert refused is not None and len(stored) >= 5
    data, r, report = refused
    assert report["error"] == "cave_ccr_budget_exceeded" and r.stdout == data
    total = sum(map(len, stored.values()))
    assert total <= 131072
    with Store(str(db), max_bytes=131072) as s:
        pages = s._conn.execute("PRAGMA page_count").fetchone()[0]
        cap = s._conn.execute("PRAGMA max_page_count").fetchone()[0]
    # refused by the logical budget (§7.1) or by the page cap backstop (§7.2): SQLite's page
    # overhead makes the backstop fire first once the payload nears a small budget
    assert total + len(data) > 131072 or pages + -(-len(data) // 4092) > cap == 32
    for handle, original in stored.items():
        back = run_cli(db, rank_cache_dir, "retrieve", handle, env=env)
        assert (back.returncode, back.stdout) == (0, original)
    first_handle, first = next(iter(stored.items()))
    again = json.loads(run_cli(db, rank_cache_dir, "compress", data=first, env=env).stderr)
    assert again.get("recovery_handle") == first_handle and "error" not in again
    stats = json.loads(run_cli(db, rank_cache_dir, "stats", env=env).stdout)
    assert stats["totals"]["count"] == len(stored)
    assert stats["storage_bytes"] == sum(map(len, stored.values()))
    assert stats["max_storage_bytes"] == 131072
