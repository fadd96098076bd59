"""Detection speed.

1. In-process throughput of ``detect()`` over every ``tests/conformance/general/*.in`` file
   (total MB / best-of-N wall time), plus a few large synthetic inputs (tens of MB) to show
   linear behaviour.
2. Cold whole-process ``caveman-engine detect`` on a small file next to cold ``python -c pass``
   (median of N subprocess runs each).

Usage: python benchmarks/bench_detect.py [--runs 20]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _script import console_script

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from caveman_engine.detect import detect  # noqa: E402

GENERAL = ROOT / "tests" / "conformance" / "general"
SMALL = ROOT / "tests" / "conformance" / "cli" / "plain.txt.in"


def best_of(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def synthetic() -> dict[str, bytes]:
    log = b"".join(
        b"2026-01-01T00:00:%02dZ worker=%d handled request path=/api/v1/items status=200\n"
        % (i % 60, i)
        for i in range(250_000)
    )
    csv = b"id,name,region,amount\n" + b"".join(
        b'%d,"item %d",eu-west-1,%d.50\n' % (i, i, i) for i in range(600_000)
    )
    prose = b"The quick brown fox jumps over the lazy dog, again and again. " * 320_000
    listing = b"".join(b"%6d\tvalue = compute(%d)  # note\n" % (i, i) for i in range(1, 500_001))
    return {"log ~20MB": log, "csv ~20MB": csv, "prose ~20MB": prose, "cat -n ~17MB": listing}


def cold(cmd: list[str], data: bytes, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, input=data, stdout=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()

    files = sorted(GENERAL.glob("*.in"))
    blobs = [f.read_bytes() for f in files]
    total = sum(map(len, blobs))
    t = best_of(lambda: [detect(b) for b in blobs], 5)
    rows = [(f"general/*.in ({len(files)} files)", total, t)]
    for name, data in synthetic().items():
        t = best_of(lambda: detect(data), 2)
        rows.append((f"{name} -> {detect(data)}", len(data), t))

    print(f"{'input':44} {'MB':>8} {'ms':>9} {'MB/s':>8}")
    for name, size, t in rows:
        print(f"{name:44} {size / 1e6:8.2f} {t * 1e3:9.1f} {size / 1e6 / t:8.1f}")

    script = console_script()
    small = SMALL.read_bytes()
    base = cold([sys.executable, "-c", "pass"], b"", args.runs)
    imp = cold([sys.executable, "-c", "import caveman_engine.detect"], b"", args.runs)
    det = cold([script, "detect"], small, args.runs)
    print()
    print(f"cold process, median of {args.runs} runs ({len(small)}-byte input)")
    print(f"{'command':44} {'ms':>9}")
    print(f"{'python -c pass':44} {base * 1e3:9.1f}")
    print(f"{'python -c import caveman_engine.detect':44} {imp * 1e3:9.1f}")
    print(f"{'caveman-engine detect':44} {det * 1e3:9.1f}")
    print(f"{'caveman-engine detect - python -c pass':44} {(det - base) * 1e3:9.1f}")


if __name__ == "__main__":
    main()
