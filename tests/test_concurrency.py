"""Many real ``caveman-engine`` processes on one store file at once.

Writers compress distinct and identical inputs (the store file does not exist when they start,
so its creation and schema migration race too); readers run ``retrieve`` on handles as soon as
a writer has printed them, and ``stats``. Afterwards: every printed handle retrieves
byte-exact, no process failed or reported an ``error`` field, ``PRAGMA integrity_check`` is
ok and ``stats`` counts exactly the distinct originals.

Bounded in CI (4 writers × 25 compresses); ``-m slow`` runs 8 × 200 (``docs/hardening.md``).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from caveman_engine.store import Store, handle_for

from .conftest import console_script

SHARED = 5  # identical inputs every writer compresses


def log_input(tag: str, lines: int = 40) -> bytes:
    """A routine log the ``log`` compressor elides; ``tag`` makes it distinct."""
    return b"".join(
        b"2026-05-01T12:00:%02dZ INFO worker=%s request served path=/api/v1/items status=200 id=%d\n"
        % (i % 60, tag.encode(), i)
        for i in range(lines)
    )


def writer_input(worker: int, i: int) -> bytes:
    if i % 2:
        return log_input(f"shared-{(i // 2) % SHARED}")
    return log_input(f"w{worker}-{i}")


class Harness:
    def __init__(self, store_dir: Path, cache_dir: Path) -> None:
        self.db = store_dir / "ccr.db"
        self.env = {k: v for k, v in os.environ.items() if k != "CAVE_ENGINE_TOON"}
        self.env.update(CAVEMAN_CCR_DB=str(self.db), CAVEMAN_CACHE_DIR=str(cache_dir))
        self.exe = console_script()
        self.lock = threading.Lock()
        self.printed: list[tuple[str, bytes, dict]] = []  # (handle, input, report)
        self.failures: list[str] = []
        self.reads = {"retrieve": 0, "stats": 0}
        self.done = threading.Event()

    def run(self, *args: str, data: bytes = b"") -> subprocess.CompletedProcess:
        return subprocess.run([self.exe, *args], input=data, capture_output=True, env=self.env,
                              timeout=120)

    def fail(self, msg: str) -> None:
        with self.lock:
            self.failures.append(msg)

    def writer(self, worker: int, count: int) -> None:
        for i in range(count):
            data = writer_input(worker, i)
            p = self.run("compress", data=data)
            if p.returncode != 0:
                self.fail(f"compress w{worker} #{i}: exit {p.returncode}: {p.stderr!r}")
                continue
            try:
                report = json.loads(p.stderr)
            except ValueError:
                self.fail(f"compress w{worker} #{i}: report {p.stderr!r}")
                continue
            if "error" in report or "recovery_handle" not in report:
                self.fail(f"compress w{worker} #{i}: {report}")
                continue
            with self.lock:
                self.printed.append((report["recovery_handle"], data, report))

    def reader(self, seed: int) -> None:
        last_count = 0
        n = seed
        while not self.done.is_set():
            n += 1
            if n % 2:
                with self.lock:
                    pick = self.printed[n % len(self.printed)] if self.printed else None
                if pick is None:
                    continue
                handle, data, _ = pick
                p = self.run("retrieve", handle)
                if (p.returncode, p.stdout, p.stderr) != (0, data, b""):
                    self.fail(f"retrieve {handle}: exit {p.returncode} {p.stderr!r}")
                kind = "retrieve"
            else:
                p = self.run("stats")
                try:
                    count = json.loads(p.stdout)["totals"]["count"]
                except (ValueError, KeyError):
                    self.fail(f"stats: exit {p.returncode} {p.stdout!r} {p.stderr!r}")
                    continue
                if p.returncode != 0 or p.stderr or count < last_count:
                    self.fail(f"stats: exit {p.returncode} count {count} after {last_count}")
                last_count = count
                kind = "stats"
            with self.lock:
                self.reads[kind] += 1


def hammer(store_dir: Path, cache_dir: Path, writers: int, per_writer: int, readers: int = 2):
    h = Harness(store_dir, cache_dir)
    assert not h.db.exists()

    def check_store(unique):
        with Store(str(h.db)) as s:
            assert s._conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
            for handle, (data, _) in unique.items():
                assert s.get(handle) == data

    return drive(h, writers, per_writer, readers, check_store)


def drive(h: Harness, writers: int, per_writer: int, readers: int, check_store) -> Harness:
    """Writers and readers at once through the CLI, then: nothing lost, nothing failed, one
    report per distinct input, ``check_store(unique)`` on the store itself, ``stats`` exact."""
    with ThreadPoolExecutor(max_workers=writers + readers) as pool:
        rs = [pool.submit(h.reader, k) for k in range(readers)]
        ws = [pool.submit(h.writer, w, per_writer) for w in range(writers)]
        for f in ws:
            f.result()
        h.done.set()
        for f in rs:
            f.result()
    assert h.failures == []
    assert len(h.printed) == writers * per_writer
    assert h.reads["retrieve"] > 0 and h.reads["stats"] > 0

    unique: dict[str, tuple[bytes, dict]] = {}
    for handle, data, report in h.printed:
        assert handle == handle_for(data)
        if handle in unique:  # identical input: identical report
            assert unique[handle] == (data, report)
        unique[handle] = (data, report)
    assert len(unique) == writers * ((per_writer + 1) // 2) + min(SHARED, per_writer // 2)

    check_store(unique)
    p = h.run("stats")
    assert p.returncode == 0
    stats = json.loads(p.stdout)
    expected = {
        "count": len(unique),
        "tokens_before": sum(r["tokens_before"] for _, r in unique.values()),
        "tokens_after": sum(r["tokens_after"] for _, r in unique.values()),
    }
    assert {k: stats["totals"][k] for k in expected} == expected
    assert list(stats["by_content_type"]) == ["log"]
    assert stats["storage_bytes"] == sum(len(d) for d, _ in unique.values())
    return h


def test_writers_and_readers_share_one_store(store_dir, rank_cache_dir):
    hammer(store_dir, rank_cache_dir, writers=4, per_writer=25)


@pytest.mark.slow
def test_writers_and_readers_share_one_store_8x200(store_dir, rank_cache_dir):
    h = hammer(store_dir, rank_cache_dir, writers=8, per_writer=200, readers=3)
    print(f"\n8 writers x 200 compresses: {len(h.printed)} handles, reads during writes: {h.reads}")


def test_inputs_are_compressed_by_the_log_compressor(cli):
    """The harness relies on every input being transformed (a handle to check)."""
    for data in (writer_input(0, 0), writer_input(3, 7)):
        r = cli("compress", input=data)
        report = json.loads(r.stderr)
        assert report["content_type"] == "log" and report["method"] == "log"
        assert report["tokens_after"] < report["tokens_before"]
