"""In-process throughput of `toolschema` and `toolschema-annotations` on the real catalogs.

Collected only when run explicitly:

    pytest benchmarks/bench_toolschema.py --benchmark-enable
    python benchmarks/bench_toolschema.py          # the MB/s table and the big-catalog timings

:func:`big_catalog` builds "the big catalog": every ``tests/corpus/*.tools.json`` catalog's tools
concatenated in file-name order (706 tools), written with two-space indentation (~1.3 MB). The
whole-process target for the full CLI on it is < 0.8 s wall and < 150 MiB peak; in-process the
reducer should stay well under 0.3 s.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from caveman_engine.compressors import toolschema, toolschema_annotations

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"
COMPRESSORS = {"toolschema": toolschema.compress, "toolschema-annotations": toolschema_annotations.compress}


def corpus_catalogs() -> list[Path]:
    """Every catalog of the corpus: the MCP ``*.tools.json`` and the converted ``formats/``."""
    return sorted(CORPUS.glob("*.tools.json")) + sorted((CORPUS / "formats").glob("*.json"))


def big_catalog() -> bytes:
    """Every ``tests/corpus/*.tools.json`` catalog's tools, concatenated in file-name order,
    as one 2-space-indented JSON array (key order as in the files)."""
    tools: list = []
    for path in sorted(CORPUS.glob("*.tools.json")):
        tools.extend(json.loads(path.read_bytes()))
    return json.dumps(tools, indent=2, ensure_ascii=False).encode("utf-8")


def _best_of(fn, data: bytes, *, min_time: float = 0.2, max_runs: int = 50) -> float:
    best = float("inf")
    start = time.perf_counter()
    runs = 0
    while runs < 3 or (time.perf_counter() - start < min_time and runs < max_runs):
        t0 = time.perf_counter()
        fn(data)
        best = min(best, time.perf_counter() - t0)
        runs += 1
    return best


def throughput_table() -> str:
    lines = [f"{'catalog':<34}{'bytes':>9}  {'toolschema MB/s':>16}  {'annotations MB/s':>17}"]
    total = {name: 0.0 for name in COMPRESSORS}
    total_bytes = 0
    for path in corpus_catalogs():
        data = path.read_bytes()
        total_bytes += len(data)
        cells = []
        for name, fn in COMPRESSORS.items():
            t = _best_of(fn, data, min_time=0.05, max_runs=20)
            total[name] += t
            cells.append(len(data) / t / 1e6)
        label = str(path.relative_to(CORPUS))
        lines.append(f"{label:<34}{len(data):>9}  {cells[0]:>16.1f}  {cells[1]:>17.1f}")
    lines.append(
        f"{'(all)':<34}{total_bytes:>9}  {total_bytes / total['toolschema'] / 1e6:>16.1f}"
        f"  {total_bytes / total['toolschema-annotations'] / 1e6:>17.1f}"
    )
    big = big_catalog()
    for name, fn in COMPRESSORS.items():
        t = _best_of(fn, big)
        lines.append(f"big catalog ({len(big)} bytes), {name}: {t * 1000:.1f} ms, {len(big) / t / 1e6:.1f} MB/s")
    return "\n".join(lines)


@pytest.mark.parametrize("name", list(COMPRESSORS))
@pytest.mark.parametrize("path", corpus_catalogs(), ids=lambda p: p.name)
def test_bench_catalog(benchmark, name, path):
    data = path.read_bytes()
    out = benchmark(COMPRESSORS[name], data)
    assert out is not None


@pytest.mark.parametrize("name", list(COMPRESSORS))
def test_bench_big_catalog(benchmark, name):
    data = big_catalog()
    assert len(json.loads(data)) == 706
    out = benchmark(COMPRESSORS[name], data)
    assert out is not None and len(out) < len(data)


def test_throughput_table(capsys):
    table = throughput_table()
    with capsys.disabled():
        print("\n" + table)


if __name__ == "__main__":
    print(throughput_table())
