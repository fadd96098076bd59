"""In-process throughput of every compressor over the general conformance samples, one table.

    python benchmarks/bench_compressors.py
    python -m pytest benchmarks/bench_compressors.py -s

Each compressor runs on the samples the vectors give it (forced `--type T` cases and the
auto-detected ones), directly as a function of bytes: no token counting, no store. The tool
schema types run on the corpus catalogs instead.
"""

from __future__ import annotations

import importlib
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GENERAL = ROOT / "tests" / "conformance" / "general"
CORPUS = ROOT / "tests" / "corpus"
CATALOG_TYPES = ("toolschema", "toolschema-annotations", "toolschema-safe", "toolschema-max")


def samples() -> dict[str, list[bytes]]:
    by_type: dict[str, dict[str, bytes]] = {}
    for line in (GENERAL / "cases.jsonl").read_text().splitlines():
        case = json.loads(line)
        if case["args"][0] != "compress":
            continue
        ctype = json.loads(case["stderr"])["content_type"]
        by_type.setdefault(ctype, {})[case["case"]] = (GENERAL / case["case"]).read_bytes()
    catalogs = {p.name: p.read_bytes() for p in sorted(CORPUS.glob("*.tools.json"))}
    for t in CATALOG_TYPES:
        by_type[t] = catalogs
    prose = [b"Sure, this just basically returns the value of the given field. " * 40]
    out = {t: list(v.values()) for t, v in by_type.items()}
    out["prose"] = prose
    return out


def measure(min_seconds: float = 0.3) -> list[tuple[str, int, int, float, int]]:
    from caveman_engine import registry

    rows = []
    for ctype, inputs in sorted(samples().items()):
        e = registry.entry(ctype)
        if e is None or not e.implemented:
            continue
        module = importlib.import_module(e.module_name)
        size = sum(len(x) for x in inputs)
        transformed = sum(1 for x in inputs if module.compress(x) not in (None, x))
        rounds = 0
        start = time.perf_counter()
        while True:
            for x in inputs:
                module.compress(x)
            rounds += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_seconds:
                break
        rows.append((ctype, len(inputs), size, size * rounds / elapsed / 1e6, transformed))
    return rows


def table(rows) -> str:
    lines = [f"{'compressor':<24}{'samples':>8}{'bytes':>11}{'MB/s':>9}{'rewritten':>11}",
             "-" * 63]
    for ctype, n, size, mbs, transformed in rows:
        lines.append(f"{ctype:<24}{n:>8}{size:>11,}{mbs:>9.1f}{transformed:>11}")
    return "\n".join(lines)


def test_compressor_throughput_table():
    print()
    print(table(measure(min_seconds=0.1)))


if __name__ == "__main__":
    print(table(measure()))
