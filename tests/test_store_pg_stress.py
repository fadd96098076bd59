"""Many processes on one PostgreSQL store: concurrent compresses with readers, the budget race,
``kill -9`` of writers mid-transaction, and the server stopped mid-run.

Bounded in the default run; ``-m slow`` runs the full profiles (8 writers × 200 compresses,
more kill rounds)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

from caveman_engine.store import open_store

from .conftest import console_script
from .pg import pg_server, pg_url  # noqa: F401 - fixtures
from .test_concurrency import Harness, drive, writer_input


# --------------------------------------------------------------------------- many compresses


def pg_hammer(url: str, cache_dir, tmp_path, writers: int, per_writer: int, readers: int = 2):
    h = Harness(tmp_path, cache_dir)
    h.env["CAVEMAN_CCR_DB"] = url

    def check_store(unique):
        with open_store(url) as s:
            for handle, (data, _) in unique.items():
                assert s.get(handle) == data
            assert s.used_bytes_row() == sum(len(d) for d, _ in unique.values())

    return drive(h, writers, per_writer, readers, check_store)


def test_writers_and_readers_share_one_database(pg_url, rank_cache_dir, tmp_path):
    pg_hammer(pg_url, rank_cache_dir, tmp_path, writers=4, per_writer=10)


@pytest.mark.slow
def test_writers_and_readers_share_one_database_8x200(pg_url, rank_cache_dir, tmp_path):
    h = pg_hammer(pg_url, rank_cache_dir, tmp_path, writers=8, per_writer=200, readers=3)
    print(f"\n8 writers x 200 compresses: {len(h.printed)} handles, reads: {h.reads}")


# --------------------------------------------------------------------------- budget race

_BUDGET_WRITER = r"""
import sys
from caveman_engine.store import BudgetExceeded, Store
url, worker, budget = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = Store(url, max_bytes=budget)
sys.stdin.readline()  # start together
for i in range(40):
    data = (b"w%02d-%03d " % (worker, i)) * (97 + i % 7)
    try:
        if i % 5 == 4:
            print("o", s.put_object(data, object_type="CommandResult", session_id="race"))
        else:
            print("h", s.put(data, content_type="log", compressor="log", tokens_before=10,
                             tokens_after=1))
    except BudgetExceeded:
        print("full")
    sys.stdout.flush()
s.close()
"""


def test_budget_race_never_overshoots(pg_url):
    budget = 120_000  # ~140 of the 800 originals fit
    procs = [subprocess.Popen([sys.executable, "-c", _BUDGET_WRITER, pg_url, str(w),
                               str(budget)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for w in range(20)]
    time.sleep(1.0)
    for p in procs:
        p.stdin.write(b"go\n")
        p.stdin.flush()
    outs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0] * 20, [o[1][-500:] for o in outs]
    stored = [line.split() for o in outs for line in o[0].decode().splitlines()]
    ok = [x[1] for x in stored if x[0] in ("h", "o")]
    refused = sum(1 for x in stored if x == ["full"])
    assert refused > 0 and len(ok) > 0 and len(ok) + refused == 800
    with open_store(pg_url) as s:
        summary = s.summary()
        assert summary.storage_bytes <= budget
        assert summary.storage_bytes > budget - 2 * 110 * 8  # filled up to the last fit
        assert s.used_bytes_row() == summary.storage_bytes
        assert sum(1 for _ in s.entries()) == len(ok)
        for key in ok:
            s.retrieve(key)


# --------------------------------------------------------------------------- kill -9

_KILL_WRITER = r"""
import os, sys
from caveman_engine.store import Store
url, tag = sys.argv[1], sys.argv[2]
s = Store(url)
i = 0
while True:
    data = os.urandom(16).hex().encode() + (b" %s-%d " % (tag.encode(), i)) * 300
    h = s.put(data, content_type="log", compressor="log", tokens_before=50, tokens_after=5)
    sys.stdout.write(h + " " + data.hex() + "\n")
    sys.stdout.flush()
    i += 1
"""


def kill_rounds(url: str, rounds: int, writers: int = 4) -> int:
    printed: dict[str, bytes] = {}
    rng = random.Random(17)
    for r in range(rounds):
        procs = [subprocess.Popen([sys.executable, "-c", _KILL_WRITER, url, f"r{r}w{w}"],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
                 for w in range(writers)]
        time.sleep(2.5 + rng.random())  # start-up (imports) takes most of the first second
        for p in procs:
            p.send_signal(signal.SIGKILL)
        for p in procs:
            out = p.stdout.read()
            p.wait()
            for line in out.decode().splitlines():
                parts = line.split(" ")
                if len(parts) == 2 and len(parts[1]) % 2 == 0:  # a complete line
                    printed[parts[0]] = bytes.fromhex(parts[1])
    with open_store(url) as s:
        for handle, data in printed.items():
            assert s.get(handle) == data
        assert s.used_bytes_row() == s.summary().storage_bytes
    return len(printed)


def test_kill_9_writers_mid_transaction(pg_url):
    assert kill_rounds(pg_url, rounds=3) > 0


@pytest.mark.slow
def test_kill_9_writers_mid_transaction_many(pg_url):
    print(f"\n{kill_rounds(pg_url, rounds=25)} printed handles all retrieve")


# --------------------------------------------------------------------------- server stopped


def test_server_stopped_mid_run(pg_server, pg_url, rank_cache_dir):
    env = {k: v for k, v in os.environ.items() if k != "CAVE_ENGINE_TOON"}
    env.update(CAVEMAN_CCR_DB=pg_url, CAVEMAN_CACHE_DIR=str(rank_cache_dir))

    def compress(data: bytes):
        p = subprocess.run([console_script(), "compress"], input=data, capture_output=True,
                           env=env, timeout=120)
        return p, json.loads(p.stderr)

    stop_at = 4
    results = []
    for i in range(8):
        if i == stop_at:
            pg_server.stop()
        data = writer_input(i, 0)
        p, report = compress(data)
        results.append((data, p, report))
    for i, (data, p, report) in enumerate(results):
        assert p.returncode == 0 and b"Traceback" not in p.stderr
        if i < stop_at:
            assert "error" not in report and "recovery_handle" in report
        else:
            assert report["error"] == "cave_ccr_unavailable" and p.stdout == data
            assert "recovery_handle" not in report
    pg_server.start()
    data = writer_input(99, 0)
    p, report = compress(data)
    assert "error" not in report, report
    with open_store(pg_url) as s:
        assert s.get(report["recovery_handle"]) == data
        for data, _, rep in results[:stop_at]:
            assert s.get(rep["recovery_handle"]) == data
        assert s.summary().totals.count == stop_at + 1


def test_server_stopped_while_a_long_running_process_writes(pg_server, pg_url):
    """A pooled store (the proxy, the MCP middleware) through a stop and a restart: a put
    waits at most connect_timeout + 1 s for a connection (a short outage is ridden out), fails
    with a one-line StoreError when the server stays down longer, and works again after."""
    from caveman_engine.store import StoreError

    s = open_store(pg_url, pooled=True)
    stop = threading.Event()
    outcomes = {"ok": 0, "err": 0, "slow": 0}
    lock = threading.Lock()

    def work(k):
        i = 0
        while not stop.is_set():
            i += 1
            t = time.monotonic()
            try:
                s.put(b"t%d-%d" % (k, i), content_type="log", compressor="log",
                      tokens_before=2, tokens_after=1)
                kind = "ok"
            except StoreError as exc:
                assert "\n" not in str(exc)
                kind = "err"
            with lock:
                outcomes[kind] += 1
                if time.monotonic() - t > 15:
                    outcomes["slow"] += 1
            time.sleep(0.01)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    try:
        for t in threads:
            t.start()
        time.sleep(1.0)
        pg_server.stop()
        time.sleep(9.0)
        pg_server.start()
        time.sleep(3.0)
        with lock:
            before = outcomes["ok"]
        time.sleep(1.0)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
    assert outcomes["err"] > 0 and outcomes["slow"] == 0
    assert outcomes["ok"] > before  # writing again after the restart
    s.close()
