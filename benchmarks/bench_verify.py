"""Wall time of ``caveman-engine verify`` on a ~430 KB, ~120-tool catalog (issue 13, item 4).

The catalog is built from the corpus: the tools of ``notion``, ``firecrawl``, ``azure`` and
``n8n-mcp`` (in that order) concatenated and written with two-space indentation: 121 tools,
31 of them with an MCP output schema (152 schemas), 429 178 bytes. Its rewrites are what
``caveman-engine compress --type toolschema-safe`` and ``--type toolschema-max`` print for it.
Each rewrite is then checked with ``caveman-engine verify ORIGINAL REWRITTEN`` at the default
settings, as a subprocess (so the time includes start-up and imports), and the table gives
input size, tools, wall seconds, CPU seconds (the process and its workers: what the run costs
whatever else the machine is doing), the 1-minute load average after the run (a wall time
taken on a busy machine says so), verdict, the 20 s target and the ratio seconds / target.

    python benchmarks/bench_verify.py            # the table; exit 1 when a run misses the target
    python benchmarks/bench_verify.py --json     # the same rows as JSON

Nothing here is collected as a test.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _script import console_script  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus"
PARTS = ("notion", "firecrawl", "azure", "n8n-mcp")
TARGET_S = 20.0
VERDICTS = {0: "same", 1: "different", 2: "cannot run", 3: "inconclusive"}


def catalog() -> tuple[bytes, int]:
    """The ~430 KB catalog (bytes) and its number of tools."""
    tools: list = []
    for name in PARTS:
        tools.extend(json.loads((CORPUS / f"{name}.tools.json").read_bytes()))
    return json.dumps(tools, indent=2, ensure_ascii=False).encode() + b"\n", len(tools)


def run(workdir: Path) -> list[dict]:
    script = console_script()
    env = dict(os.environ, CAVEMAN_HOME=str(workdir / "home"))
    data, tools = catalog()
    original = workdir / "original.json"
    original.write_bytes(data)
    rows = []
    for kind in ("toolschema-safe", "toolschema-max"):
        rewritten = workdir / f"{kind}.json"
        out = subprocess.run([script, "compress", "-q", "--type", kind, str(original)],
                             env=env, capture_output=True, check=True)
        rewritten.write_bytes(out.stdout)
        r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        res = subprocess.run([script, "verify", str(original), str(rewritten)], env=env,
                             capture_output=True, text=True)
        seconds = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        last = res.stdout.strip().splitlines()[-1] if res.stdout.strip() else res.stderr.strip()
        rows.append({"rewrite": kind, "input_bytes": len(data), "rewritten_bytes": len(out.stdout),
                     "tools": tools, "seconds": round(seconds, 2),
                     "cpu_seconds": round(cpu, 2), "load": round(os.getloadavg()[0], 1),
                     "exit": res.returncode,
                     "verdict": VERDICTS.get(res.returncode, str(res.returncode)),
                     "summary": last, "target_s": TARGET_S,
                     "ratio": round(seconds / TARGET_S, 3)})
    return rows


def table(rows: list[dict]) -> str:
    head = (f"| {'rewrite':<15} | {'input':>9} | {'tools':>5} | {'seconds':>7} | "
            f"{'cpu s':>6} | {'load':>4} | {'verdict':<12} | {'target':>6} | {'ratio':>5} |")
    rule = "|" + "|".join("-" * len(c) for c in head.strip("|").split("|")) + "|"
    lines = [head, rule]
    for r in rows:
        lines.append(f"| {r['rewrite']:<15} | {r['input_bytes']:>9} | {r['tools']:>5} | "
                     f"{r['seconds']:>7.2f} | {r['cpu_seconds']:>6.1f} | {r['load']:>4.1f} | "
                     f"{r['verdict']:<12} | {r['target_s']:>5.0f}s | "
                     f"{r['ratio']:>5.2f} |")
    lines += ["", *(f"{r['rewrite']}: {r['summary']}" for r in rows)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-verify-") as tmp:
        rows = run(Path(tmp))
    print(json.dumps(rows, indent=2) if args.json else table(rows))
    return 0 if all(r["seconds"] <= TARGET_S for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
