"""What `caveman-engine proxy` costs: N requests through the proxy vs straight to the upstream.

    python benchmarks/bench_proxy.py                  # 2,000 requests, concurrency 32
    python benchmarks/bench_proxy.py --upstream-delay 50 --requests 500 --level toolschema-max

Three processes on loopback: the fake upstream (``tests/fixtures/proxy/fake_upstream.py``), the
real ``caveman-engine proxy`` console script in front of it, and this load generator (aiohttp,
``--concurrency`` workers, each one agent session with its own ``x-cave-session``). Requests
rotate over Anthropic Messages, OpenAI Chat Completions and OpenAI Responses bodies carrying
the same real catalog (``examples/tools.json``); every other one streams (SSE). The direct
pass and the proxied pass send the same requests.

One run per ``--upstream-delay`` item (default ``0,50,25-75``): the fake waits that long before
the first byte of each answer, a fixed time or a uniform draw from a range. At 0 ms the
upstream answers at once and the three processes saturate the cores, so the proxy's cost shows
as lost requests/s and as queueing for CPU (a throughput figure). A real model API takes tens
of milliseconds or more before its first byte, and not the same time for every call. At a
fixed 50 ms the 32 workers stay in lockstep: each wave of 32 requests arrives at once and
queues for the cores, with or without the proxy. With 25–75 ms (the same mean) the sessions
drift apart as real ones do, and the added latency is the proxy's own.

Printed, per run: latency p50/p99 at concurrency 1 (direct and proxied interleaved) and at
``--concurrency``, the added latency (percentiles of each request's latency minus the
upstream's wait for it, proxied minus direct), requests/s and the proxied/direct ratio; the proxy's CPU
time per request, its RSS (start, peak, end: flat means no growth with traffic), and the
differences between what the upstream received and what it should have (the engine's rewrite
of the catalog spliced into the client's bytes), and between what the upstream sent and what
the client got (SHA-256 per request, matched by the fake's ``x-fake-seq`` header). Not part of
the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from _script import console_script

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402

from caveman_engine.engine import Engine  # noqa: E402
from caveman_engine.proxy import catalog  # noqa: E402
from caveman_engine.proxy.rewrite import LEVEL_TYPES  # noqa: E402
from caveman_engine.store import Store  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _bodies(copies: int = 1) -> list[tuple[str, bytes, bool]]:
    doc = json.loads((ROOT / "examples" / "tools.json").read_bytes())
    base = doc["tools"] if isinstance(doc, dict) else doc
    tools = [dict(t, name=f"{t['name']}_{i}" if i else t["name"]) for i in range(copies)
             for t in base]
    anth = [{"name": t["name"], "description": t.get("description", ""),
             "input_schema": t.get("input_schema") or t.get("inputSchema")
             or t.get("parameters") or {"type": "object"}} for t in tools]
    anth[-1]["cache_control"] = {"type": "ephemeral"}
    chat = [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                              "parameters": t["input_schema"]}} for t in anth]
    resp = [{"type": "function", "name": t["name"], "description": t["description"],
             "parameters": t["input_schema"]} for t in anth]
    msgs = [{"role": "user", "content": "Summarise the repository layout. " * 20}]
    out = []
    for stream in (False, True):
        out.append(("/v1/messages", json.dumps({"model": "claude-fake", "max_tokens": 256,
                                                "system": "You are terse.", "messages": msgs,
                                                "tools": anth, "stream": stream}).encode(), stream))
        out.append(("/v1/chat/completions", json.dumps({"model": "gpt-fake", "messages": msgs,
                                                        "tools": chat, "stream": stream}).encode(),
                    stream))
        out.append(("/v1/responses", json.dumps({"model": "gpt-fake", "input": msgs,
                                                 "tools": resp, "stream": stream}).encode(),
                    stream))
    return out


async def _serial(direct: str, proxy: str, bodies, n: int, sessions: bool = True):
    """Concurrency 1, direct and proxied requests interleaved (machine noise hits both)."""
    lat = {direct: [], proxy: []}
    waits = {direct: [], proxy: []}
    headers = {"content-type": "application/json", "x-api-key": "bench"}
    if sessions:
        headers["x-cave-session"] = "bench-serial"
    async with aiohttp.ClientSession(auto_decompress=False) as s:
        for i in range(n):
            path, body, _ = bodies[i % len(bodies)]
            for base in (direct, proxy):
                t = time.perf_counter()
                async with s.post(base + path, data=body, headers=headers) as r:
                    await r.read()
                    wait = float(r.headers.get("x-fake-delay", "0"))
                lat[base].append(time.perf_counter() - t)
                waits[base].append(wait)
    return lat[direct], lat[proxy], waits[direct], waits[proxy]


async def _load(base: str, bodies, n: int, concurrency: int, sessions: bool = True):
    """(latencies in s, [(seq, sha256 of the body the client got)], wall seconds, errors).
    ``sessions``: each worker is one agent session (``x-cave-session``), so the proxy reads
    every answer's usage for the tripwire, as it does for a client that sends the header."""
    lat: list[float] = []
    waits: list[float] = []  # the upstream's first-byte wait for each request
    seen: list[tuple[int, str]] = []
    errors = 0
    counter = iter(range(n))
    conn = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=conn, auto_decompress=False) as s:

        async def worker(w: int):
            nonlocal errors
            headers = {"content-type": "application/json", "x-api-key": "bench"}
            if sessions:
                headers["x-cave-session"] = f"bench-{w}"
            for i in counter:
                path, body, _ = bodies[i % len(bodies)]
                t = time.perf_counter()
                try:
                    async with s.post(base + path, data=body, headers=headers) as r:
                        data = await r.read()
                        seq = int(r.headers.get("x-fake-seq", "-1"))
                        wait = float(r.headers.get("x-fake-delay", "0"))
                except aiohttp.ClientError:
                    errors += 1
                    continue
                lat.append(time.perf_counter() - t)
                waits.append(wait)
                seen.append((seq, hashlib.sha256(data).hexdigest()))

        t0 = time.perf_counter()
        await asyncio.gather(*(worker(w) for w in range(concurrency)))
        wall = time.perf_counter() - t0
    return lat, seen, wall, errors, waits


def _records(upstream: str) -> list[dict]:
    import urllib.request

    with urllib.request.urlopen(upstream + "/__fake/records", timeout=30) as r:
        return json.loads(r.read())


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] * 1000


def _wait_up(urls) -> None:
    import urllib.request

    for url in urls:
        deadline = time.time() + 30
        while True:
            try:
                urllib.request.urlopen(url, timeout=1).read()
                break
            except OSError:
                if time.time() > deadline:
                    raise SystemExit(f"{url} did not come up")
                time.sleep(0.1)


def _run(args, bodies, expected, delay) -> dict:
    """One fake upstream (answering after ``delay``: (min, max) ms) and one proxy in front: the
    unloaded pass, the direct and proxied passes at ``--concurrency``, the proxy's CPU and RSS,
    and the byte checks."""
    tmp = tempfile.mkdtemp(prefix="bench-proxy-")
    os.chmod(tmp, 0o700)
    up_port, px_port = _free_port(), _free_port()
    upstream, proxy = f"http://127.0.0.1:{up_port}", f"http://127.0.0.1:{px_port}"
    env = dict(os.environ, CAVEMAN_CCR_DB=os.path.join(tmp, "ccr.db"), CAVEMAN_HOME=tmp,
               PYTHONPATH=str(ROOT))
    for k in ("CAVEMAN_TOOLSCHEMA_STRIP", "CAVEMAN_CONFIG", "CAVEMAN_STRICT"):
        env.pop(k, None)
    cfg = Path(tmp) / "caveman.yaml"
    cfg.write_text(f"providers:\n  anthropic:\n    base_url: {upstream}\n"
                   f"  openai:\n    base_url: {upstream}\n")
    fake = subprocess.Popen([sys.executable, "-m", "tests.fixtures.proxy.fake_upstream",
                             "--port", str(up_port), "--quiet",
                             "--first-byte-delay", str(delay[0]),
                             "--first-byte-delay-max", str(delay[1])], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL)
    px = subprocess.Popen([console_script(), "proxy", "--listen", f"127.0.0.1:{px_port}",
                           "--level", args.level, "--config", str(cfg)], env=env,
                          stderr=subprocess.DEVNULL)
    sessions = args.sessions
    try:
        _wait_up((upstream + "/__fake/records", proxy + "/health/ready"))
        sha_of = {hashlib.sha256(b).hexdigest(): b for _, b, _ in bodies}

        warm = max(len(bodies) * 4, 64)
        asyncio.run(_load(upstream, bodies, warm, args.concurrency, sessions))
        asyncio.run(_load(proxy, bodies, warm, args.concurrency, sessions))

        sd, sp, sdw, spw = asyncio.run(_serial(upstream, proxy, bodies, args.serial, sessions))
        before = len(_records(upstream))

        d_lat, d_seen, d_wall, d_err, d_wait = asyncio.run(
            _load(upstream, bodies, args.requests, args.concurrency, sessions))
        rss = [_rss_kb(px.pid)]
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                rss.append(_rss_kb(px.pid))
                time.sleep(0.05)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        mid = len(_records(upstream))
        cpu0 = _cpu_s(px.pid)
        p_lat, p_seen, p_wall, p_err, p_wait = asyncio.run(
            _load(proxy, bodies, args.requests, args.concurrency, sessions))
        cpu = _cpu_s(px.pid) - cpu0
        stop.set()
        sampler.join()
        rss.append(_rss_kb(px.pid))

        recs = _records(upstream)
        by_seq = {r["seq"]: r for r in recs}
        diff_client = sum(1 for seq, h in p_seen if by_seq.get(seq, {}).get("sent") != h)
        diff_client += sum(1 for seq, h in d_seen if by_seq.get(seq, {}).get("sent") != h)
        proxied = recs[mid:]
        want = set(expected.values())
        diff_upstream = sum(1 for r in proxied if r["received"] not in want)
        direct_diff = sum(1 for r in recs[before:mid] if r["received"] not in sha_of)
    finally:
        for p in (px, fake):
            p.send_signal(signal.SIGTERM)
        for p in (px, fake):
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)  # the run's recovery store and config
    n10 = max(1, len(rss) // 10)
    return {
        "delay": delay, "serial": (sd, sp), "direct": (d_lat, d_wall, d_err),
        "proxied": (p_lat, p_wall, p_err),
        # latency minus the upstream's own wait, request by request: what the added
        # latency is computed from (with a random wait, percentiles of the raw latencies
        # would mostly compare two draws of the wait)
        "beyond": ([a - w for a, w in zip(sd, sdw)], [a - w for a, w in zip(sp, spw)],
                   [a - w for a, w in zip(d_lat, d_wait)], [a - w for a, w in zip(p_lat, p_wait)]), "cpu_ms": cpu / max(1, len(p_lat)) * 1000,
        "rss": (rss[0], statistics.mean(rss[:n10]), max(rss), statistics.mean(rss[-n10:])),
        "diff_upstream": (diff_upstream, len(proxied)),
        "diff_client": (diff_client, len(p_seen) + len(d_seen)),
        "diff_direct": (direct_diff, mid - before),
    }


def _delays(text: str) -> list[tuple[float, float]]:
    """``0,50,25-75`` → [(0, 0), (50, 50), (25, 75)]: a fixed wait, or a uniform range."""
    out = []
    try:
        for item in text.split(","):
            lo, _, hi = item.strip().partition("-")
            lo_ms = float(lo)
            hi_ms = float(hi) if hi else lo_ms
            if lo_ms < 0 or hi_ms < lo_ms:
                raise ValueError
            out.append((lo_ms, hi_ms))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of milliseconds or ranges: {text!r}") \
            from None
    return out


def _delay_label(delay) -> str:
    lo, hi = delay
    return f"{lo:g} ms" if lo == hi else f"{lo:g}–{hi:g} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description="caveman-engine proxy load test")
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--level", default="toolschema")
    ap.add_argument("--copies", type=int, default=16,
                    help="the example catalog repeated this many times (renamed tools)")
    ap.add_argument("--serial", type=int, default=200,
                    help="requests of the extra unloaded pass at concurrency 1")
    ap.add_argument("--upstream-delay", type=_delays, default=_delays("0,50,25-75"),
                    metavar="MS|MIN-MAX[,...]",
                    help="the fake upstream's wait before the first byte of each answer, fixed "
                         "or drawn uniformly from a range; one run per item (default "
                         "0,50,25-75: saturated, then model-like)")
    ap.add_argument("--no-sessions", dest="sessions", action="store_false",
                    help="send no x-cave-session header (the tripwire then reads no usage)")
    args = ap.parse_args()

    bodies = _bodies(args.copies)
    # the upstream body each request should produce: the engine's rewrite, spliced
    engine = Engine(Store(":memory:"))
    expected = {}
    for path, body, _ in bodies:
        span, start, end = catalog.extract(body)
        r = engine.compress(span, LEVEL_TYPES[args.level])
        new = r.output if r.recovery_handle and len(r.output) < len(span) else span
        expected[body] = hashlib.sha256(body[:start] + new + body[end:]).hexdigest()

    load0 = os.getloadavg()
    runs = [_run(args, bodies, expected, d) for d in args.upstream_delay]
    load1 = os.getloadavg()

    c = args.concurrency
    print(f"caveman-engine proxy load test: {args.requests} requests at concurrency {c} "
          f"(half streaming, {'an x-cave-session per worker' if args.sessions else 'no sessions'}"
          f"), level {args.level}, catalog examples/tools.json × {args.copies} "
          f"({len(catalog.extract(bodies[0][1])[0])} bytes in the Messages shape); "
          f"{os.cpu_count()} cores shared by the load generator, the proxy and the fake "
          f"upstream; load average {load0[0]:.2f} before, {load1[0]:.2f} after")
    print()
    print("| upstream first-byte delay | pass | p50 ms | p99 ms | requests/s | "
          "proxied / direct requests/s | errors |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for r in runs:
        d = _delay_label(r["delay"])
        sd, sp = r["serial"]
        sd_rps, sp_rps = 1 / statistics.mean(sd), 1 / statistics.mean(sp)
        print(f"| {d} | concurrency 1 ({len(sd)} each, interleaved): direct | {_pct(sd, 50):.2f} "
              f"| {_pct(sd, 99):.2f} | {sd_rps:.0f} | | 0 |")
        print(f"| {d} | concurrency 1: through the proxy | {_pct(sp, 50):.2f} | "
              f"{_pct(sp, 99):.2f} | {sp_rps:.0f} | {sp_rps / sd_rps:.2f} | 0 |")
        bsd, bsp, bdl, bpl = r["beyond"]
        print(f"| {d} | **concurrency 1: added** | **{_pct(bsp, 50) - _pct(bsd, 50):+.2f}** | "
              f"**{_pct(bsp, 99) - _pct(bsd, 99):+.2f}** | | | |")
        (dl, dw, de), (pl, pw, pe) = r["direct"], r["proxied"]
        d_rps, p_rps = len(dl) / dw, len(pl) / pw
        print(f"| {d} | concurrency {c}: direct | {_pct(dl, 50):.2f} | {_pct(dl, 99):.2f} | "
              f"{d_rps:.0f} | | {de} |")
        print(f"| {d} | concurrency {c}: through the proxy | {_pct(pl, 50):.2f} | "
              f"{_pct(pl, 99):.2f} | {p_rps:.0f} | {p_rps / d_rps:.2f} | {pe} |")
        print(f"| {d} | **concurrency {c}: added** | **{_pct(bpl, 50) - _pct(bdl, 50):+.2f}** | "
              f"**{_pct(bpl, 99) - _pct(bdl, 99):+.2f}** | | | |")
    print()
    print("added: p50 (p99) of each request's latency minus the upstream's wait for it (the fake "
          "reports it in x-fake-delay), through the proxy, minus the same direct")
    print()
    print("| upstream first-byte delay | proxy CPU ms/request | proxy RSS MiB: start, first "
          "10%, peak, last 10% | upstream got ≠ expected | client got ≠ upstream sent | "
          "direct: upstream got ≠ client sent |")
    print("|---:|---:|---|---:|---:|---:|")
    for r in runs:
        rss = ", ".join(f"{x / 1024:.1f}" for x in r["rss"])
        print(f"| {_delay_label(r['delay'])} | {r['cpu_ms']:.2f} | {rss} | "
              f"{r['diff_upstream'][0]} of {r['diff_upstream'][1]} | "
              f"{r['diff_client'][0]} of {r['diff_client'][1]} | "
              f"{r['diff_direct'][0]} of {r['diff_direct'][1]} |")


if __name__ == "__main__":
    main()
