"""Whole-process start-up and in-process throughput of the engine core, side by side.

    python benchmarks/bench_core.py            # prints the table
    python -m pytest benchmarks/bench_core.py -s

Cold = a new `caveman-engine` process per run (OS file cache warm, tokenizer rank cache
present), median of N runs; the first-ever run (no rank cache yet) is shown separately.
Targets on the 2-core reference machine: cold `detect` <= 60 ms, cold `compress --type
toolschema` of the example catalog <= 170 ms; the 706-tool catalog in < 0.8 s and < 150 MiB.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _script import console_script

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "tools.json"
CORPUS = ROOT / "tests" / "corpus"


def _script() -> str:
    return console_script()


def big_catalog() -> bytes:
    """Every corpus catalog's tools concatenated in file-name order, indented."""
    tools = []
    for path in sorted(CORPUS.glob("*.tools.json")):
        tools.extend(json.loads(path.read_bytes()))
    return json.dumps(tools, indent=2, ensure_ascii=False).encode()


def _timed(args, data: bytes, env: dict, runs: int) -> tuple[float, float]:
    """Median wall seconds and max peak RSS (MiB), measured with wait4 for each run."""
    walls, peaks = [], []
    for _ in range(runs):
        start = time.perf_counter()
        p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env=env)
        p.stdin.write(data)
        p.stdin.close()
        _, _, usage = os.wait4(p.pid, 0)
        walls.append(time.perf_counter() - start)
        peaks.append(usage.ru_maxrss / 1024)
    return statistics.median(walls), max(peaks)


def measure(runs: int = 15) -> list[tuple[str, float, float, str]]:
    script = _script()
    example = EXAMPLE.read_bytes()
    big = big_catalog()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o700)
        env = dict(os.environ, CAVEMAN_CCR_DB=os.path.join(tmp, "ccr.db"),
                   CAVEMAN_CACHE_DIR=tmp)
        env.pop("CAVE_ENGINE_TOON", None)
        first, first_rss = _timed([script, "compress", "--type", "toolschema"], example, env, 1)
        rows.append(("python -c pass", *_timed([sys.executable, "-c", "pass"], b"", env, runs),
                     "interpreter start-up alone"))
        rows.append(("cold detect (example catalog)",
                     *_timed([script, "detect"], example, env, runs), "target <= 60 ms"))
        rows.append(("first compress ever (builds rank cache)", first, first_rss, "once per store"))
        rows.append(("cold compress --type toolschema (example)",
                     *_timed([script, "compress", "--type", "toolschema"], example, env, runs),
                     "target <= 170 ms"))
        rows.append((f"cold compress --type toolschema (706 tools, {len(big) / 1e6:.2f} MB)",
                     *_timed([script, "compress", "--type", "toolschema"], big, env, 5),
                     "target < 0.8 s, < 150 MiB"))
        rows.append(("cold retrieve (example handle)",
                     *_timed([script, "retrieve", "ccr_94e45c3f85f7dbc65d3283ce8e196975"], b"",
                             env, runs), ""))

        from caveman_engine.engine import Engine
        from caveman_engine.store import Store

        with Store(os.path.join(tmp, "warm.db")) as store:
            engine = Engine(store)
            engine.compress(example, "toolschema")
            for label, data, ctype in (("example catalog", example, "toolschema"),
                                       ("706-tool catalog", big, "toolschema")):
                n = max(1, int(2e6 // len(data)))
                start = time.perf_counter()
                for _ in range(n):
                    engine.compress(data, ctype)
                per = (time.perf_counter() - start) / n
                rows.append((f"warm in-process compress ({label})", per,
                             resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                             f"{len(data) / per / 1e6:.1f} MB/s"))
    return rows


def table(rows) -> str:
    lines = [f"{'measurement':<58}{'time':>10}{'peak RSS':>11}  note", "-" * 100]
    for label, secs, rss, note in rows:
        t = f"{secs * 1000:.0f} ms" if secs < 10 else f"{secs:.1f} s"
        lines.append(f"{label:<58}{t:>10}{rss:>8.0f} MiB  {note}")
    base = rows[0][1]
    lines.append("")
    lines.append("ratios to `python -c pass`: " + ", ".join(
        f"{label.split(' (')[0]} {secs / base:.1f}x" for label, secs, _, _ in rows[1:4]))
    return "\n".join(lines)


def test_core_table():
    print()
    print(table(measure(runs=7)))


if __name__ == "__main__":
    print(table(measure()))
