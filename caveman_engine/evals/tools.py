"""``evals tools``: what each catalog compression level saves, and what it costs in tool choice.

For every case (a question, the catalog offered, the right tools, ground-truth calls) and every
``--type``, the catalog is written minified (compact JSON), compressed exactly as ``compress
--type T`` would emit it (the engine's token gate included: a type that does not save tokens
leaves the catalog as it is), and compared with the original on three counts:

* **tokens** (o200k_base, :mod:`caveman_engine.tokens`) of the rewritten catalog against the
  minified original;
* **valid calls**: each ground-truth call validated (``jsonschema``, 2020-12 unless the schema
  says otherwise) against its tool's input schema in the original and in the rewritten catalog.
  The two must agree; any disagreement is listed and makes the command exit 1;
* **tool choice**: each grader (lexical BM25, semantic embeddings, or a model) picks one tool
  for the question from each catalog. ``top-1`` is the share of cases whose pick is one of the
  expected tools; ``flips`` counts cases whose pick changed (``lost``: right before, wrong
  after; ``gained``: the reverse), per grader.

Exit 0, 1 when a rewrite changes the validity of a ground-truth call, 2 for bad input or usage.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any

import click

from ..cli import Choice, nonempty
from ..cmdutil import bad_type, line

DEFAULT_TYPES = ("toolschema", "toolschema-safe", "toolschema-max")


# --------------------------------------------------------------------------- validity


def _validator_class():
    try:
        from jsonschema import Draft202012Validator
        from jsonschema.validators import validator_for
    except ImportError:
        return None
    return lambda schema: validator_for(schema, default=Draft202012Validator)


def _schemas_by_name(doc: Any) -> dict[str, Any]:
    from ..catalog import envelope

    out: dict[str, Any] = {}
    for t in envelope.iter_tools(doc):
        schemas = t.schemas()
        out.setdefault(t.name, schemas[0][1] if schemas else {})
    return out


def call_valid(schemas: dict[str, Any], name: str, args: dict, pick) -> bool:
    """Does ``name(**args)`` validate under the catalog's schema for ``name``?"""
    if name not in schemas:
        return False
    schema = schemas[name]
    if schema is True or schema == {}:
        return True
    try:
        return bool(pick(schema)(schema).is_valid(args))
    except Exception:  # an unusable schema (bad pattern, unresolvable $ref…) accepts nothing
        return False


# --------------------------------------------------------------------------- run


@dataclass
class ChoiceStats:
    """One grader's picks on one type's rewritten catalogs (against the original's)."""

    top1: int = 0
    flips: int = 0
    lost: int = 0
    gained: int = 0

    def add(self, other: "ChoiceStats") -> None:
        for k in ("top1", "flips", "lost", "gained"):
            setattr(self, k, getattr(self, k) + getattr(other, k))


def _first(d: dict, default):
    return next(iter(d.values()), default)


@dataclass
class TypeStats:
    tokens: int = 0
    valid: int = 0
    declined: int = 0          # cases where the type left the catalog unchanged
    disagree: list[str] = field(default_factory=list)
    choice: dict[str, ChoiceStats] = field(default_factory=dict)  # per grader, first = primary

    # the first grader's counts (the single-grader report's fields)
    top1 = property(lambda self: _first(self.choice, ChoiceStats()).top1)
    flips = property(lambda self: _first(self.choice, ChoiceStats()).flips)
    lost = property(lambda self: _first(self.choice, ChoiceStats()).lost)
    gained = property(lambda self: _first(self.choice, ChoiceStats()).gained)


@dataclass
class DatasetStats:
    name: str
    types: list[str]
    graders: list[str] = field(default_factory=list)
    cases: int = 0
    calls: int = 0
    tokens: int = 0
    valid: int = 0
    choice: dict[str, int] = field(default_factory=dict)  # per grader: right picks, original
    per_type: dict[str, TypeStats] = field(default_factory=dict)

    top1 = property(lambda self: _first(self.choice, 0))

    def __post_init__(self) -> None:
        for g in self.graders:
            self.choice.setdefault(g, 0)
        for t in self.types:
            ts = self.per_type.setdefault(t, TypeStats())
            for g in self.graders:
                ts.choice.setdefault(g, ChoiceStats())

    def add(self, other: "DatasetStats") -> None:
        self.cases += other.cases
        self.calls += other.calls
        self.tokens += other.tokens
        self.valid += other.valid
        for g, n in other.choice.items():
            self.choice[g] = self.choice.get(g, 0) + n
        for t, s in other.per_type.items():
            mine = self.per_type[t]
            for k in ("tokens", "valid", "declined"):
                setattr(mine, k, getattr(mine, k) + getattr(s, k))
            mine.disagree.extend(s.disagree)
            for g, c in s.choice.items():
                mine.choice.setdefault(g, ChoiceStats()).add(c)


class Runner:
    """``grader`` is one grader or a list of them (each with a distinct ``name``); every
    grader picks on every catalog, and the first is the report's primary one."""

    def __init__(self, types: list[str], grader, counter=None, progress=None) -> None:
        from ..catalog.measure import counter as default_counter

        self.types = types
        self.graders = list(grader) if isinstance(grader, (list, tuple)) else [grader]
        self.grader = self.graders[0]
        self.counter = counter or default_counter()
        self.progress = progress
        self.pick = _validator_class()
        self._compressed: dict[tuple[str, bytes], bytes] = {}
        self._tokens: dict[bytes, int] = {}

    def count(self, data: bytes) -> int:
        n = self._tokens.get(data)
        if n is None:
            n = self._tokens[data] = self.counter.count(data)
        return n

    def rewrite(self, content_type: str, minified: bytes) -> bytes:
        """The catalog as ``compress --type`` emits it: the compressor's output when it differs
        and has fewer tokens, else the input (``catalog.diff.run_compressor``'s gate, with this
        runner's counter and a cache)."""
        from .. import registry
        from ..engine import call_compressor

        key = (content_type, minified)
        out = self._compressed.get(key)
        if out is None:
            found = registry.compressor(content_type)
            produced = call_compressor(found[0], minified) if found else None
            out = minified
            if produced is not None:
                data = bytes(produced.data)
                if data != minified and self.count(data) < self.count(minified):
                    out = data
            self._compressed[key] = out
        return out

    def run_dataset(self, name: str, cases: list) -> DatasetStats:
        st = DatasetStats(name, self.types, [g.name for g in self.graders])
        for i, case in enumerate(cases, 1):
            if self.progress:
                self.progress(name, i, len(cases))
            self.run_case(case, st)
        return st

    def run_case(self, case, st: DatasetStats) -> None:
        minified = json.dumps(case.catalog, ensure_ascii=False, separators=(",", ":")).encode()
        original = json.loads(minified)
        st.cases += 1
        st.calls += len(case.calls)
        st.tokens += self.count(minified)
        schemas = _schemas_by_name(original)
        valid_before = None
        if self.pick is not None:
            valid_before = [call_valid(schemas, n, a, self.pick) for n, a in case.calls]
            st.valid += sum(valid_before)
        picks = [(g, g.choose(case, original)) for g in self.graders]
        for g, choice in picks:
            st.choice[g.name] += choice in case.expected
        for t in self.types:
            ts = st.per_type[t]
            out = self.rewrite(t, minified)
            ts.tokens += self.count(out)
            if out == minified:
                ts.declined += 1
                ts.valid += sum(valid_before or [])
                for g, choice in picks:
                    ts.choice[g.name].top1 += choice in case.expected
                continue
            rewritten = json.loads(out)
            if valid_before is not None:
                after_schemas = _schemas_by_name(rewritten)
                for (n, a), before in zip(case.calls, valid_before):
                    after = call_valid(after_schemas, n, a, self.pick)
                    ts.valid += after
                    if after != before:
                        ts.disagree.append(f"{case.id}:{n}")
            for g, choice in picks:
                cs = ts.choice[g.name]
                right = choice in case.expected
                pick2 = g.choose(case, rewritten)
                right2 = pick2 in case.expected
                cs.top1 += right2
                if pick2 != choice:
                    cs.flips += 1
                    cs.lost += right and not right2
                    cs.gained += right2 and not right


# --------------------------------------------------------------------------- report


def _pct(part: int, whole: int) -> float:
    return 100.0 * part / whole if whole else 0.0


def report(datasets: list[DatasetStats], types: list[str], grader: str | list[str],
           tokenizer: str, validity: bool) -> dict:
    """The JSON report. ``grader`` names the graders (a name or a list; the first is the
    primary one, whose counts fill the single-grader fields ``top1``, ``flips``, ``lost``,
    ``gained``); ``by_grader`` holds every grader's."""
    graders = [grader] if isinstance(grader, str) else list(grader)
    total = DatasetStats("total", types, graders)
    for d in datasets:
        total.add(d)

    def one(d: DatasetStats) -> dict:
        row: dict[str, Any] = {
            "name": d.name, "cases": d.cases, "calls": d.calls, "tokens": d.tokens,
            "valid": d.valid if validity else None,
            "top1": d.top1, "top1_percent": round(_pct(d.top1, d.cases), 2),
            "by_grader": {g: {"top1": d.choice.get(g, 0),
                              "top1_percent": round(_pct(d.choice.get(g, 0), d.cases), 2)}
                          for g in graders},
            "types": {},
        }
        for t in types:
            s = d.per_type[t]
            row["types"][t] = {
                "tokens": s.tokens, "saved": d.tokens - s.tokens,
                "saved_percent": round(_pct(d.tokens - s.tokens, d.tokens), 2),
                "valid": s.valid if validity else None, "disagree": s.disagree,
                "top1": s.top1, "top1_percent": round(_pct(s.top1, d.cases), 2),
                "flips": s.flips, "lost": s.lost, "gained": s.gained, "unchanged": s.declined,
                "by_grader": {},
            }
            for g in graders:
                c = s.choice.get(g, ChoiceStats())
                row["types"][t]["by_grader"][g] = {
                    "top1": c.top1, "top1_percent": round(_pct(c.top1, d.cases), 2),
                    "flips": c.flips, "lost": c.lost, "gained": c.gained}
        return row

    return {"grader": graders[0], "graders": graders, "tokenizer": tokenizer, "types": types,
            "validity": "jsonschema" if validity else None,
            "datasets": [one(d) for d in datasets], "total": one(total)}


def render_table(rep: dict) -> str:
    types = rep["types"]
    rows = rep["datasets"] + ([rep["total"]] if len(rep["datasets"]) > 1 else [])
    name_w = max([7] + [len(r["name"]) for r in rows])
    base = f"{'dataset':<{name_w}} {'cases':>5} {'calls':>5} {'tokens':>8} {'valid':>5} {'top-1':>6}"
    cell_w = 30
    head1 = " " * len(base) + "".join(f" | {t:<{cell_w}}" for t in types)
    head2 = base + "".join(f" | {'saved':>6} {'valid':>5} {'top-1':>6} {'flips':>5} {'lost':>4}"
                           for _ in types)
    lines = [head1.rstrip(), head2, "-" * len(head2)]
    for r in rows:
        valid = "n/a" if r["valid"] is None else str(r["valid"])
        line = (f"{r['name']:<{name_w}} {r['cases']:>5} {r['calls']:>5} {r['tokens']:>8} "
                f"{valid:>5} {r['top1_percent']:>5.1f}%")
        for t in types:
            c = r["types"][t]
            v = "n/a" if c["valid"] is None else str(c["valid"]) + ("!" if c["disagree"] else "")
            line += (f" | {c['saved_percent']:>5.1f}% {v:>5} {c['top1_percent']:>5.1f}% "
                     f"{c['flips']:>5} {c['lost']:>4}")
        lines.append(line)
    lines.append(f"saved: o200k tokens saved against the minified catalog ({rep['tokenizer']}); "
                 f"valid: ground-truth calls that validate; top-1: grader {rep['grader']}; "
                 f"flips: cases whose top-1 changed; lost: right before, wrong after")
    if rep["validity"] is None:
        lines.append("valid: n/a (install jsonschema: pip install 'caveman-engine[verify]')")
    graders = rep.get("graders") or [rep["grader"]]
    if len(graders) > 1:
        lines.append("")
        lines.extend(_grader_lines(rep, rows, graders, name_w))
    for t in types:
        bad = rep["total"]["types"][t]["disagree"]
        if bad:
            lines.append(f"DISAGREE {t}: {len(bad)} call(s) change validity: "
                         + ", ".join(bad[:10]) + (" …" if len(bad) > 10 else ""))
    return "\n".join(lines) + "\n"


def _grader_lines(rep: dict, rows: list[dict], graders: list[str], name_w: int) -> list[str]:
    """Every grader's top-1 (count and %) on the original and each type's catalogs, and the
    type's lost / gained picks against the original."""
    types = rep["types"]
    grader_w = max(len(g) for g in graders)
    cell_w = 22
    base = f"{'dataset':<{name_w}} {'grader':<{grader_w}} {'original':>{cell_w - 8}}"
    head1 = " " * len(base) + "".join(f" | {t:<{cell_w}}" for t in types)
    head2 = base + "".join(f" | {'top-1':>12} {'lost':>4} {'gain':>4}" for _ in types)
    out = ["top-1 by grader: right picks (count, %) and, per type, lost / gained picks "
           "against the original catalog's", head1.rstrip(), head2, "-" * len(head2)]
    for r in rows:
        for i, g in enumerate(graders):
            o = r["by_grader"][g]
            line = (f"{r['name'] if i == 0 else '':<{name_w}} {g:<{grader_w}} "
                    f"{o['top1']:>{cell_w - 16}} {o['top1_percent']:>6.1f}%")
            for t in types:
                c = r["types"][t]["by_grader"][g]
                line += f" | {c['top1']:>5} {c['top1_percent']:>5.1f}% {c['lost']:>4} {c['gained']:>4}"
            out.append(line)
    return out


# --------------------------------------------------------------------------- command


def _fail(message: str, code: int = 1) -> None:
    """One line, ``caveman-engine evals tools: …``: exit 1 for an error, 2 for a usage error."""
    from ..cmdutil import fail

    fail(line("evals tools", message), code)


def _progress():
    if not sys.stderr.isatty():
        return None, lambda: None
    state = {"shown": False}

    def show(name: str, i: int, n: int) -> None:
        if i == n or i % 10 == 1:
            sys.stderr.write(f"\r\x1b[Kevals tools: {name} {i}/{n}")
            sys.stderr.flush()
            state["shown"] = True

    def done() -> None:
        if state["shown"]:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()

    return show, done


@click.command("tools", short_help="Does the model still pick the right tool after compression?")
@click.argument("datasets", nargs=-1, metavar="[DATASET]...")
@click.option("--type", "types", multiple=True, metavar="T",
              callback=nonempty("a content type"),
              help=f"Content type to evaluate (repeatable; default {', '.join(DEFAULT_TYPES)}).")
@click.option("--grader", type=Choice(["lexical", "semantic", "both", "llm"]), default=None,
              help="Tool-choice grader: offline BM25 (lexical), offline WordLlama embeddings "
                   "(semantic), both side by side (the default when wordllama is installed, "
                   "else lexical), or an OpenAI-compatible model (llm).")
@click.option("--model", default=None, metavar="NAME",
              help="Model for --grader llm (or CAVEMAN_EVALS_MODEL).")
@click.option("--format", "fmt", type=Choice(["text", "json"], aliases={"table": "text"}),
              default="text",
              help="text: a side-by-side table (`table` is accepted too); json.")
@click.option("--limit", type=click.IntRange(min=1), default=None, metavar="N",
              help="At most N cases per dataset.")
def tools_command(datasets, types, grader, model, fmt, limit) -> None:
    """Tool-choice benchmark: per compression type, the tokens saved, the ground-truth calls
    that still validate, and the grader's top-1 tool on the original and rewritten catalog.

    DATASET is a BFCL category (simple, multiple, parallel, parallel_multiple and their live_
    variants; bfcl for all eight; read from the installed bfcl-eval package), a BFCL data
    directory or question file, or a JSONL file of {"catalog", "query", "expected_tool"[,
    "arguments"]}. Default: bfcl. The semantic grader needs wordllama (pip install
    'caveman-engine[evals]'); the llm grader reads CAVEMAN_EVALS_BASE_URL and
    CAVEMAN_EVALS_API_KEY. Exit 1 when a rewrite changes a ground-truth call's validity.

    \b
    Examples:
      caveman-engine evals tools bfcl --limit 50
      caveman-engine evals tools cases.jsonl --type toolschema-max --format json
    """
    import os

    from .. import registry
    from . import bfcl

    type_list = list(dict.fromkeys(types or DEFAULT_TYPES))
    for t in type_list:
        if registry.compressor(t) is None:
            _fail(bad_type("--type", t, [e.type for e in registry.entries()]), 2)
    if grader == "llm":
        from .llm import LLMGrader

        model = model or os.environ.get("CAVEMAN_EVALS_MODEL")
        if not model:
            _fail("--grader llm needs --model NAME (or CAVEMAN_EVALS_MODEL)", 2)
        chosen = [LLMGrader(model)]
    else:
        from . import semantic
        from .lexical import LexicalGrader

        if grader is None:
            grader = "both" if semantic.available() else "lexical"
        chosen = [LexicalGrader()] if grader in ("lexical", "both") else []
        if grader in ("semantic", "both"):
            try:
                chosen.append(semantic.SemanticGrader())
            except semantic.SemanticUnavailable as exc:
                _fail(str(exc))

    groups = []
    try:
        for spec in datasets or ("bfcl",):
            groups.extend(bfcl.resolve(spec, limit))
    except bfcl.DatasetError as exc:
        _fail(str(exc))

    show, done = _progress()
    runner = Runner(type_list, chosen, progress=show)
    from .llm import LLMError

    stats = []
    try:
        for cases in groups:
            if cases:
                stats.append(runner.run_dataset(cases[0].dataset, cases))
    except LLMError as exc:
        done()
        _fail(str(exc))
    done()
    rep = report(stats, type_list, [g.name for g in chosen], runner.counter.name,
                 runner.pick is not None)
    if fmt == "json":
        out = json.dumps(rep, indent=2, ensure_ascii=False) + "\n"
    else:
        out = render_table(rep)
    sys.stdout.write(out)
    sys.stdout.flush()
    if any(rep["total"]["types"][t]["disagree"] for t in type_list):
        sys.exit(1)


if __name__ == "__main__":  # python -m caveman_engine.evals.tools …
    tools_command(prog_name="caveman-engine evals tools")
