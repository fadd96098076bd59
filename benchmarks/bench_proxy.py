"""What `caveman-engine proxy` costs: N requests through the proxy vs straight to the upstream.

    python benchmarks/bench_proxy.py                  # 2,000 requests, concurrency 32
    python benchmarks/bench_proxy.py --requests 500 --level toolschema-max

Three processes on loopback: the fake upstream (``tests/fixtures/proxy/fake_upstream.py``), the
real ``caveman-engine proxy`` console script in front of it, and this load generator (aiohttp,
``--concurrency`` workers). Requests rotate over Anthropic Messages, OpenAI Chat Completions
and OpenAI Responses bodies carrying the same real catalog (``examples/tools.json``); every
other one streams (SSE). The direct pass and the proxied pass send the same requests.

Printed: latency p50/p99 per pass and the added latency, requests/s, the proxy's RSS (start,
peak, end: flat means no growth with traffic), and the differences between what the upstream
received and what it should have (the engine's rewrite of the catalog spliced into the
client's bytes), and between what the upstream sent and what the client got (SHA-256 per
request, matched by the fake's ``x-fake-seq`` header). Not part of the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
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


async def _serial(direct: str, proxy: str, bodies, n: int):
    """Concurrency 1, direct and proxied requests interleaved (machine noise hits both)."""
    lat = {direct: [], proxy: []}
    async with aiohttp.ClientSession(auto_decompress=False) as s:
        for i in range(n):
            path, body, _ = bodies[i % len(bodies)]
            for base in (direct, proxy):
                t = time.perf_counter()
                async with s.post(base + path, data=body,
                                  headers={"content-type": "application/json"}) as r:
                    await r.read()
                lat[base].append(time.perf_counter() - t)
    return lat[direct], lat[proxy]


async def _load(base: str, bodies, n: int, concurrency: int):
    """(latencies in s, [(seq, sha256 of the body the client got)], wall seconds)."""
    lat: list[float] = []
    seen: list[tuple[int, str]] = []
    errors = 0
    counter = iter(range(n))
    conn = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=conn, auto_decompress=False) as s:

        async def worker():
            nonlocal errors
            for i in counter:
                path, body, _ = bodies[i % len(bodies)]
                t = time.perf_counter()
                try:
                    async with s.post(base + path, data=body,
                                      headers={"content-type": "application/json",
                                               "x-api-key": "bench"}) as r:
                        data = await r.read()
                        seq = int(r.headers.get("x-fake-seq", "-1"))
                except aiohttp.ClientError:
                    errors += 1
                    continue
                lat.append(time.perf_counter() - t)
                seen.append((seq, hashlib.sha256(data).hexdigest()))

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - t0
    return lat, seen, wall, errors


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


def main() -> None:
    ap = argparse.ArgumentParser(description="caveman-engine proxy load test")
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--level", default="toolschema")
    ap.add_argument("--copies", type=int, default=16,
                    help="the example catalog repeated this many times (renamed tools)")
    ap.add_argument("--serial", type=int, default=500,
                    help="requests of the extra unloaded pass at concurrency 1")
    args = ap.parse_args()

    bodies = _bodies(args.copies)
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
                             "--port", str(up_port), "--quiet"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL)
    px = subprocess.Popen([console_script(), "proxy", "--listen", f"127.0.0.1:{px_port}",
                           "--level", args.level, "--config", str(cfg)], env=env,
                          stderr=subprocess.DEVNULL)
    try:
        for url in (upstream + "/__fake/records", proxy + "/health/ready"):
            deadline = time.time() + 30
            while True:
                try:
                    import urllib.request

                    urllib.request.urlopen(url, timeout=1).read()
                    break
                except OSError:
                    if time.time() > deadline:
                        raise SystemExit(f"{url} did not come up")
                    time.sleep(0.1)

        # the upstream body each request should produce: the engine's rewrite, spliced
        engine = Engine(Store(":memory:"))
        expected = {}
        for path, body, _ in bodies:
            span, start, end = catalog.extract(body)
            r = engine.compress(span, LEVEL_TYPES[args.level])
            new = r.output if r.recovery_handle and len(r.output) < len(span) else span
            expected[body] = hashlib.sha256(body[:start] + new + body[end:]).hexdigest()
        sha_of = {hashlib.sha256(b).hexdigest(): b for _, b, _ in bodies}

        warm = max(len(bodies) * 4, 64)
        asyncio.run(_load(upstream, bodies, warm, args.concurrency))
        asyncio.run(_load(proxy, bodies, warm, args.concurrency))

        sd, sp = asyncio.run(_serial(upstream, proxy, bodies, args.serial))
        before = len(_records(upstream))

        d_lat, d_seen, d_wall, d_err = asyncio.run(
            _load(upstream, bodies, args.requests, args.concurrency))
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
        p_lat, p_seen, p_wall, p_err = asyncio.run(
            _load(proxy, bodies, args.requests, args.concurrency))
        cpu = _cpu_s(px.pid) - cpu0
        stop.set()
        sampler.join()
        rss.append(_rss_kb(px.pid))

        recs = _records(upstream)
        by_seq = {r["seq"]: r for r in recs}
        diff_client = sum(1 for seq, h in p_seen if by_seq.get(seq, {}).get("sent") != h)
        diff_client += sum(1 for seq, h in d_seen if by_seq.get(seq, {}).get("sent") != h)
        proxied = [r for r in recs[mid:]]
        diff_upstream = 0
        for r in proxied:
            # what the client sent, identified by the direct pass's identical request bodies
            want = {expected[b] for b in sha_of.values()}
            if r["received"] not in want:
                diff_upstream += 1
        direct_ok = all(r["received"] in sha_of for r in recs[before:mid])

        d50, d99 = _pct(d_lat, 50), _pct(d_lat, 99)
        p50, p99 = _pct(p_lat, 50), _pct(p_lat, 99)
        n10 = max(1, len(rss) // 10)
        print(f"caveman-engine proxy load test: {args.requests} requests, concurrency "
              f"{args.concurrency}, half streaming, level {args.level}, catalog "
              f"examples/tools.json × {args.copies} ({len(catalog.extract(bodies[0][1])[0])} bytes in "
              f"the Messages shape)")
        print()
        print("| pass | p50 ms | p99 ms | requests/s | errors |")
        print("|---|---:|---:|---:|---:|")
        print(f"| unloaded (concurrency 1, {args.serial} requests each, interleaved): direct | "
              f"{_pct(sd, 50):.2f} | {_pct(sd, 99):.2f} | {1 / statistics.mean(sd):.0f} | 0 |")
        print(f"| unloaded: through the proxy | {_pct(sp, 50):.2f} | {_pct(sp, 99):.2f} | "
              f"{1 / statistics.mean(sp):.0f} | 0 |")
        print(f"| **unloaded: added by the proxy** | **{_pct(sp, 50) - _pct(sd, 50):+.2f}** | "
              f"**{_pct(sp, 99) - _pct(sd, 99):+.2f}** | | |")
        print(f"| concurrency {args.concurrency}: direct to upstream | {d50:.2f} | {d99:.2f} | {len(d_lat) / d_wall:.0f} | {d_err} |")
        print(f"| concurrency {args.concurrency}: through the proxy | {p50:.2f} | {p99:.2f} | {len(p_lat) / p_wall:.0f} | {p_err} |")
        print(f"| **added by the proxy** | **{p50 - d50:+.2f}** | **{p99 - d99:+.2f}** | | |")
        print()
        print(f"proxy CPU per request under load: {cpu / max(1, len(p_lat)) * 1000:.2f} ms "
              f"(machine: {os.cpu_count()} cores shared by the load generator, the proxy and "
              f"the fake upstream)")
        print()
        print("| proxy RSS | MiB |")
        print("|---|---:|")
        print(f"| at start of the run | {rss[0] / 1024:.1f} |")
        print(f"| mean of first 10% of samples | {statistics.mean(rss[:n10]) / 1024:.1f} |")
        print(f"| peak | {max(rss) / 1024:.1f} |")
        print(f"| mean of last 10% of samples | {statistics.mean(rss[-n10:]) / 1024:.1f} |")
        print()
        print("| check | differences |")
        print("|---|---:|")
        print(f"| upstream received ≠ client bytes with the rewritten catalog | {diff_upstream} "
              f"of {len(proxied)} |")
        print(f"| client got ≠ upstream sent (both passes) | {diff_client} of "
              f"{len(p_seen) + len(d_seen)} |")
        print(f"| direct pass: upstream received ≠ client bytes | "
              f"{0 if direct_ok else 'some'} |")
    finally:
        for p in (px, fake):
            p.send_signal(signal.SIGTERM)
        for p in (px, fake):
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()


if __name__ == "__main__":
    main()
