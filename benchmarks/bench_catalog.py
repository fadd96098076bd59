"""Tool-catalog benchmark: tokens saved by each approach on every corpus catalog.

Columns, all measured in o200k_base tokens against the *minified* input (compact JSON, key
order and characters as in the file):

* ``toolschema``       our reference-exact reducer;
* ``safe``             ``toolschema-safe`` (validation-equivalent rules);
* ``toolism-safe`` / ``toolism-ann``   toolism 0.1.0 ``slim`` at level ``safe`` / ``annotations``
  (only when ``toolism`` is installed; it is never a dependency of this project);
* ``max``              ``toolschema-max``.

Each cell is the compressor's output as the engine would emit it: when a compressor declines
or does not save tokens, the engine passes the input through, and the cell is the minified
input (0 %). After the per-catalog rows comes the side-by-side summary of the shared corpus:
per approach, the total saved, the median of the per-catalog savings, and on how many catalogs
it saves the most (ties count for every approach that reaches the best). The MongoDB-shaped
fixture (``tests/fixtures/catalogs/mongodb.tools.json``) is measured on its own line, outside the
corpus figures, and so is the agent-shaped fixture (``agent-tools.tools.json``: tools whose
descriptions are long instruction lists). Run ``python benchmarks/bench_catalog.py`` (``--json`` for a machine-readable
table); ``main()`` returns 1 when ``max`` loses to ``safe`` or a toolism column on any catalog
(fixtures included) or saves less than 25 % in total. ``toolschema`` is no bound: its 80-byte
lead cap cuts sentences that ``max`` keeps whole.
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

CORPUS = ROOT / "tests" / "corpus"
FIXTURES = [ROOT / "tests" / "fixtures" / "catalogs" / "mongodb.tools.json",
            ROOT / "tests" / "fixtures" / "catalogs" / "agent-tools.tools.json"]
TARGET_TOTAL = 25.0


def corpus_files() -> list[Path]:
    return sorted(CORPUS.glob("*.tools.json")) + sorted((CORPUS / "formats").glob("*.json"))


def _toolism():
    try:
        import toolism
        from toolism.io import dumps
    except ImportError:
        return None

    def run(obj, level):
        res = toolism.slim(toolism.parse(obj), level=level, tokenizer="heuristic")
        return dumps(res.toolset, indent=None).encode()

    return run


def measure(files: list[Path] | None = None) -> dict:
    from caveman_engine.compressors import toolschema, toolschema_max, toolschema_safe
    from caveman_engine.tokens import make_counter

    counter = make_counter(None)
    slim = _toolism()
    columns = ["toolschema", "safe"] + (["toolism-safe", "toolism-ann"] if slim else []) + ["max"]
    rows = []
    for path in files or corpus_files():
        raw = path.read_bytes()
        obj = json.loads(raw)
        minified = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()
        base = counter.count(minified)
        outs = {
            "toolschema": toolschema.compress(raw),
            "safe": toolschema_safe.compress(raw),
            "max": toolschema_max.compress(raw),
        }
        if slim:
            outs["toolism-safe"] = slim(obj, "safe")
            outs["toolism-ann"] = slim(obj, "annotations")
        try:
            label = path.relative_to(CORPUS).as_posix()
        except ValueError:
            label = "fixture " + path.name
        row = {"catalog": label, "minified": base}
        for col in columns:
            out = outs[col]
            n = counter.count(out) if out is not None else base
            row[col] = min(n, base)  # the engine's gate: never more than the input
        rows.append(row)
    totals = {"minified": sum(r["minified"] for r in rows)}
    for col in columns:
        totals[col] = sum(r[col] for r in rows)
    extra = measure(FIXTURES)["rows"] if files is None else []
    return {"columns": columns, "rows": rows, "totals": totals, "summary": summary(columns, rows, totals),
            "fixtures": extra, "toolism": slim is not None, "tokenizer": counter.name}


def _median(values: list[float]) -> float:
    v = sorted(values)
    n = len(v)
    if not n:
        return 0.0
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def summary(columns: list[str], rows: list[dict], totals: dict) -> dict:
    """Per approach: total %, median of per-catalog %, wins (catalogs where it is the best)."""
    out = {"minified": {"total": 0.0, "median": 0.0, "wins": 0}}
    for col in columns:
        out[col] = {"total": pct(totals["minified"], totals[col]),
                    "median": _median([pct(r["minified"], r[col]) for r in rows]),
                    "wins": sum(1 for r in rows if r[col] == min(r[c] for c in columns))}
    return out


def pct(saved_from: int, now: int) -> float:
    return 100.0 * (saved_from - now) / saved_from if saved_from else 0.0


def render(result: dict) -> str:
    cols = result["columns"]
    head = f"{'catalog':34} {'minified':>8} " + " ".join(f"{c:>12}" for c in cols)
    lines = [head, "-" * len(head)]
    for r in result["rows"] + [dict(result["totals"], catalog="TOTAL")]:
        cells = " ".join(f"{pct(r['minified'], r[c]):11.1f}%" for c in cols)
        lines.append(f"{r['catalog']:34} {r['minified']:8d} {cells}")
    for r in result.get("fixtures", []):
        cells = " ".join(f"{pct(r['minified'], r[c]):11.1f}%" for c in cols)
        lines.append(f"{r['catalog']:34} {r['minified']:8d} {cells}")
    lines.append(f"(% of tokens saved against the minified input; tokenizer {result['tokenizer']})")
    lines.append("")
    n = len(result["rows"])
    lines.append(f"| shared corpus ({n} catalogs, {result['totals']['minified']:,} tokens) | "
                 + " | ".join(["minified"] + cols) + " |")
    lines.append("|---" * (len(cols) + 2) + "|")
    summ = result["summary"]
    for key, label in (("total", "total saved"), ("median", "median per catalog")):
        lines.append(f"| {label} | " + " | ".join(f"{summ[c][key]:.1f} %" for c in ["minified"] + cols) + " |")
    lines.append("| best on (catalogs, ties shared) | - | " + " | ".join(str(summ[c]["wins"]) for c in cols) + " |")
    if not result["toolism"]:
        lines.append("toolism columns skipped: toolism is not installed "
                     "(pip install toolism==0.1.0 to compare)")
    return "\n".join(lines)


def problems(result: dict) -> list[str]:
    out = []
    for r in result["rows"] + result.get("fixtures", []) + [dict(result["totals"], catalog="TOTAL")]:
        for c in result["columns"]:
            if c not in ("max", "toolschema") and r["max"] > r[c]:
                out.append(f"{r['catalog']}: max {r['max']} > {c} {r[c]}")
    total = pct(result["totals"]["minified"], result["totals"]["max"])
    if total < TARGET_TOTAL:
        out.append(f"max saves {total:.1f}% in total, below {TARGET_TOTAL}%")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print the table as JSON")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    result = measure()
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(render(result))
        print(f"({time.perf_counter() - t0:.1f} s)")
    bad = problems(result)
    for p in bad:
        print("FAIL", p, file=sys.stderr)
    return 1 if bad else 0


def test_bench_catalog(benchmark):
    """pytest-benchmark entry point (``pytest benchmarks/bench_catalog.py --benchmark-enable``)."""
    result = benchmark.pedantic(measure, rounds=1, iterations=1)
    assert not problems(result)


if __name__ == "__main__":
    sys.exit(main())
