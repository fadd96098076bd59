"""What the MCP middleware costs: `caveman-engine mcp -- SERVER` against SERVER alone.

    python benchmarks/bench_mcp.py            # prints the table
    python -m pytest benchmarks/bench_mcp.py -s

A small Python fake server (written to a temp dir) answers ``initialize``, ``tools/list``
(a real catalog, one compact line) and ``flood`` (N bytes of notification lines, then the
response). Measured over one long-lived session each, direct and through the middleware:

* start-up: spawn → ``initialize`` response;
* ``tools/list`` round trip: median and p95 of many calls (the middleware compresses the list
  with ``toolschema``, counts tokens and upserts the original into the store every time);
* pass-through throughput: MB/s of server → client notification lines (nothing rewritten).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _script import console_script

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus"
EXAMPLE = ROOT / "examples" / "tools.json"

SERVER = r'''
import json, os, sys
catalog = open(sys.argv[1], "rb").read()
def write(data):
    view = memoryview(data)
    while view:
        view = view[os.write(1, view):]
buf = b""
while True:
    chunk = os.read(0, 1 << 16)
    if not chunk:
        break
    buf += chunk
    *lines, buf = buf.split(b"\n")
    for line in lines:
        msg = json.loads(line)
        if "id" not in msg:
            continue
        rid = json.dumps(msg["id"]).encode()
        m = msg["method"]
        if m == "tools/list":
            write(b'{"jsonrpc":"2.0","id":' + rid + b',"result":{"tools":' + catalog + b'}}\n')
        elif m == "flood":
            total, size = msg["params"]["bytes"], msg["params"]["line"]
            head = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"'
            line = head + b"z" * (size - len(head) - 4) + b'"}}\n'
            block = line * max(1, (1 << 20) // size)
            sent = 0
            while sent < total:
                write(block)
                sent += len(block)
            write(b'{"jsonrpc":"2.0","id":' + rid + b',"result":{"sent":' + str(sent).encode() + b'}}\n')
        else:
            write(b'{"jsonrpc":"2.0","id":' + rid + b',"result":{}}\n')
'''


def _script() -> str:
    return console_script()


class Session:
    def __init__(self, argv, env):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, env=env, bufsize=0)
        self.pieces: list[bytes] = []
        self.lines: list[bytes] = []  # complete lines, last one first
        self.next = 1

    def _line(self) -> bytes:
        while not self.lines:
            chunk = self.p.stdout.read(1 << 20)
            if not chunk:
                raise EOFError
            if b"\n" not in chunk:
                self.pieces.append(chunk)  # a long line: no quadratic re-joining
                continue
            self.pieces.append(chunk)
            *complete, rest = b"".join(self.pieces).split(b"\n")
            self.pieces = [rest]
            self.lines.extend(reversed(complete))
        return self.lines.pop()

    def request(self, method, params=None) -> tuple[bytes, int]:
        """Send, then read until the response; returns (response line, bytes read)."""
        rid = self.next
        self.next += 1
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.p.stdin.write(json.dumps(msg).encode() + b"\n")
        marker = b'"id":%d,' % rid
        total = 0
        while True:
            line = self._line()
            total += len(line) + 1
            if marker in line[:40]:
                return line, total

    def close(self):
        self.p.stdin.close()
        self.p.wait(30)


def measure(catalogs: list[tuple[str, bytes]], rounds: int = 40, flood_mb: int = 64):
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o700)
        env = dict(os.environ, CAVEMAN_CCR_DB=os.path.join(tmp, "ccr.db"), CAVEMAN_CACHE_DIR=tmp)
        server_py = os.path.join(tmp, "server.py")
        Path(server_py).write_text(SERVER)
        # build the tokenizer rank cache once, outside the measurements
        subprocess.run([_script(), "compress", "--type", "toolschema"], input=b"[]", env=env,
                       capture_output=True)
        for label, catalog in catalogs:
            cat_path = os.path.join(tmp, "catalog.json")
            Path(cat_path).write_bytes(catalog)
            server = [sys.executable, server_py, cat_path]
            result = {}
            for mode, argv in (("direct", server), ("mcp", [_script(), "mcp", "--", *server])):
                t0 = time.perf_counter()
                s = Session(argv, env)
                s.request("initialize", {})
                startup = time.perf_counter() - t0
                t0 = time.perf_counter()
                line, _ = s.request("tools/list")
                first = time.perf_counter() - t0
                times = []
                for _ in range(rounds):
                    t0 = time.perf_counter()
                    line, _ = s.request("tools/list")
                    times.append(time.perf_counter() - t0)
                times.sort()
                result[mode] = (startup, statistics.median(times),
                                times[int(len(times) * 0.95) - 1], len(line), first)
                s.close()
            d, m = result["direct"], result["mcp"]
            rows.append((f"tools/list {label}: {len(catalog) / 1e3:.1f} kB -> "
                         f"{m[3] / 1e3:.1f} kB line",
                         d[1], m[1], f"added {1e3 * (m[1] - d[1]):.2f} ms median, "
                         f"{1e3 * (m[2] - d[2]):.2f} ms p95 (repeat list)"))
            rows.append((f"first tools/list {label} (compress + store)", d[4], m[4],
                         f"added {1e3 * (m[4] - d[4]):.2f} ms"))
        rows.append(("start-up to initialize response", result["direct"][0], result["mcp"][0],
                     f"added {1e3 * (result['mcp'][0] - result['direct'][0]):.0f} ms"))
        for line_size in (256, 65536, 4 << 20):
            rates = {}
            for mode, argv in (("direct", server), ("mcp", [_script(), "mcp", "--", *server])):
                s = Session(argv, env)
                s.request("initialize", {})
                t0 = time.perf_counter()
                _, got = s.request("flood", {"bytes": flood_mb << 20, "line": line_size})
                rates[mode] = (got / (time.perf_counter() - t0) / 1e6)
                s.close()
            rows.append((f"pass-through, {line_size} B lines ({flood_mb} MiB)",
                         rates["direct"], rates["mcp"],
                         f"{rates['mcp'] / rates['direct'] * 100:.0f}% of direct (MB/s)"))
    return rows


def table(rows) -> str:
    out = [f"{'measurement':<58}{'direct':>11}{'via mcp':>11}  note", "-" * 110]
    for label, d, m, note in rows:
        if "pass-through" in label:
            out.append(f"{label:<58}{d:>7.0f} MB/s{m:>7.0f} MB/s  {note}")
        else:
            out.append(f"{label:<58}{d * 1e3:>8.2f} ms{m * 1e3:>8.2f} ms  {note}")
    return "\n".join(out)


def catalogs() -> list[tuple[str, bytes]]:
    def compact(path: Path) -> bytes:
        tools = json.loads(path.read_bytes())
        if isinstance(tools, dict):
            tools = tools["tools"]
        return json.dumps(tools, separators=(",", ":"), ensure_ascii=False).encode()

    return [("example", compact(EXAMPLE)), ("github", compact(CORPUS / "github.tools.json"))]


def test_mcp_table():
    print()
    print(table(measure(catalogs(), rounds=15, flood_mb=16)))


if __name__ == "__main__":
    print(table(measure(catalogs())))
