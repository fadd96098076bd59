"""Tool-choice benchmark on BFCL: what each catalog compression level saves and what it costs.

Runs ``caveman-engine evals tools bfcl`` in process — the eight BFCL categories (simple,
multiple, parallel, parallel_multiple and their live_ variants) read from the installed
``bfcl-eval`` package, the lexical (BM25) and semantic (WordLlama) graders side by side (the
semantic one when ``wordllama`` is installed; ``--grader`` picks), types toolschema /
toolschema-safe / toolschema-max — and prints the side-by-side table and the run time. ``--limit
N`` bounds each category, ``--json`` prints the report as JSON. Without ``bfcl-eval`` (``pip install --no-deps bfcl-eval``)
it says so and exits 0; ``main()`` returns 1 when a rewrite changes the validity of a
ground-truth call.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TYPES = ["toolschema", "toolschema-safe", "toolschema-max"]


def graders(which: str | None = None) -> list:
    """lexical, semantic or both (default: both when wordllama is installed, else lexical)."""
    from caveman_engine.evals import semantic
    from caveman_engine.evals.lexical import LexicalGrader

    which = which or ("both" if semantic.available() else "lexical")
    out = [LexicalGrader()] if which in ("lexical", "both") else []
    if which in ("semantic", "both"):
        out.append(semantic.SemanticGrader())
    return out


def measure(limit: int | None = None, grader: str | None = None) -> dict | None:
    from caveman_engine.evals import bfcl, tools

    if bfcl.package_data_dir() is None:
        return None
    chosen = graders(grader)
    runner = tools.Runner(TYPES, chosen)
    stats = [runner.run_dataset(cases[0].dataset, cases)
             for cases in bfcl.resolve("bfcl", limit) if cases]
    return tools.report(stats, TYPES, [g.name for g in chosen], runner.counter.name,
                        runner.pick is not None)


def main(argv: list[str] | None = None) -> int:
    from caveman_engine.evals import tools

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=None, help="at most N cases per category")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    ap.add_argument("--grader", choices=["lexical", "semantic", "both"], default=None,
                    help="tool-choice grader(s) (default: both when wordllama is installed)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rep = measure(args.limit, args.grader)
    if rep is None:
        print("bfcl-eval is not installed: pip install --no-deps bfcl-eval")
        return 0
    if args.json:
        print(json.dumps(rep, indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(tools.render_table(rep))
        print(f"({time.perf_counter() - t0:.1f} s)")
    return 1 if any(rep["total"]["types"][t]["disagree"] for t in TYPES) else 0


def test_bench_evals_tools(benchmark):
    """pytest-benchmark entry point (``pytest benchmarks/bench_evals_tools.py --benchmark-enable``)."""
    import pytest

    from caveman_engine.evals import bfcl

    if bfcl.package_data_dir() is None:
        pytest.skip("bfcl-eval is not installed")
    rep = benchmark.pedantic(measure, kwargs={"limit": 20}, rounds=1, iterations=1)
    assert not any(rep["total"]["types"][t]["disagree"] for t in TYPES)


if __name__ == "__main__":
    sys.exit(main())
