"""Click commands ``measure``, ``check``, ``diff``, ``verify`` (loaded lazily by
``caveman_engine.cli``). Errors are one line on stderr; exit 2 means bad input or usage. A FILE
that cannot be read is exit 1 for ``measure``, as everywhere else, and 2 for ``check``,
``diff`` and ``verify``, whose exit 1 is an answer (over budget, changed, different), as
diff(1) and cmp(1) keep 1 for "different" and 2 for trouble."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from ..cli import FORMAT as FORMATS
from ..cli import nonempty
from ..cmdutil import TERMINAL_USAGE, bad_type, bad_value, fail, line, read_input
from . import envelope

# Exit code of a FILE that cannot be read, per command (see the module's docstring).
_UNREADABLE = {"measure": 1}


def _fail(command: str, message: str, code: int = 2) -> None:
    fail(line(command, message), code)


def _source(command: str, source: str | None) -> str:
    """FILE as given; no FILE is stdin (``-``), unless stdin is a terminal: then the usage,
    exit 2, rather than a silent wait."""
    if source is not None:
        return source
    if sys.stdin.isatty():
        fail(TERMINAL_USAGE[command], 2)
    return "-"


def _name(source: str) -> str:
    return "stdin" if source == "-" else source


def _read(command: str, source: str) -> bytes:
    return read_input(command, source, _UNREADABLE.get(command, 2))


def _unknown_type(command: str, content_type: str) -> None:
    from .. import registry

    _fail(command, bad_type("--type", content_type, [e.type for e in registry.entries()]))


def _load(command: str, source: str):
    data = _read(command, source)
    try:
        return data, envelope.load(data)
    except envelope.CatalogError as exc:
        _fail(command, f"{_name(source)}: {exc}")


def _require_catalog(command: str, source: str, doc) -> None:
    """A catalog (or one JSON Schema, which the catalog types also rewrite), or exit 2."""
    if not (envelope.is_catalog(doc) or envelope.is_bare_schema(doc)):
        _fail(command, f"{_name(source)}: no tools found (expected an OpenAI, Anthropic or MCP "
                       "catalog)")
    if envelope.depth(doc) > envelope.MAX_DEPTH:
        _fail(command, f"{_name(source)}: nested deeper than {envelope.MAX_DEPTH} levels")


def _rules_env(command: str, rules: str | None, disabled: tuple[str, ...]) -> None:
    """Apply --rules / --disable-rule to this process (the compressors read the env var). A
    rule name that does not exist is refused like any choice value, naming where it came
    from: ``--disable-rule defs_inlin: not one of … (did you mean defs_inline?)``."""
    from . import rules as _rules

    given = ([("--rules", rules)] if rules else
             [(_rules.ENV, os.environ[_rules.ENV])] if os.environ.get(_rules.ENV) else [])
    given += [("--disable-rule", f"-{d}") for d in disabled]
    if not given:
        return
    for option, spec in given:
        try:
            _rules.select(spec, strict_names=True)
        except _rules.UnknownRule as exc:
            _fail(command, bad_value(option, exc.name, _rules.ORDER))
    os.environ[_rules.ENV] = ",".join(spec for _, spec in given)


def _write(data: bytes | str) -> None:
    out = sys.stdout.buffer
    out.write(data.encode() if isinstance(data, str) else data)
    out.flush()


_RULE_OPTIONS = [
    click.option("--rules", "rules", metavar="SPEC", default=None,
                 callback=nonempty("safe rules (e.g. -defs_inline,-anyof_null)"),
                 help="Safe rules to use, like CAVEMAN_SAFE_RULES (e.g. -defs_inline,-anyof_null)."),
    click.option("--disable-rule", "disabled", metavar="NAME", multiple=True,
                 help="Disable one safe rule (repeatable)."),
]


def _rule_options(f):
    for opt in reversed(_RULE_OPTIONS):
        f = opt(f)
    return f


@click.command("measure")
@click.argument("source", required=False, metavar="[FILE|-]")
@click.option("--format", "fmt", type=FORMATS, default="text", help="text table or JSON.")
@click.option("--type", "content_type", metavar="TYPE", default=None,
              callback=nonempty("a content type"),
              help="Also show each tool after compress --type TYPE (e.g. toolschema-max).")
@_rule_options
def measure(source: str, fmt: str, content_type: str | None, rules, disabled) -> None:
    """Token cost of each tool of a catalog (OpenAI, Anthropic, MCP), most expensive first.

    Each tool is counted as compact JSON, what a provider receives for it. The last line gives
    the whole catalog as written and minified; with --type, also after the rewrite and what the
    rewrite saves against the minified catalog (minifying alone is free).

    \b
    Example:
      caveman-engine measure --type toolschema-max tools.json
    """
    from . import measure as _m

    source = _source("measure", source)
    _rules_env("measure", rules, disabled)
    data, doc = _load("measure", source)
    count = _m.counter()
    try:
        m = _m.measure_doc(doc, count)
    except envelope.CatalogError as exc:
        _fail("measure", f"{_name(source)}: {exc}")
    after = None
    if content_type:
        from .diff import UnknownType, run_compressor

        try:
            out = run_compressor(content_type, data)
        except UnknownType:
            _unknown_type("measure", content_type)
        after_doc = envelope.load(out) if out is not None else doc
        try:
            after = _m.measure_doc(after_doc, count).by_name()
        except envelope.CatalogError:
            _fail("measure", f"compress --type {content_type} does not return a catalog")
    m.whole = _m.Whole(count.count(data), count.count(envelope.dumps(doc)),
                       None if after is None else count.count(out if out is not None else data))
    if fmt == "json":
        _write(_m.render_json(m, after))
    else:
        _write(_m.render_text(m, after))


@click.command("check")
@click.argument("source", metavar="FILE")
@click.option("--baseline", "-b", "baseline", required=True, metavar="B",
              callback=nonempty("a file"),
              help="Baseline JSON (per-tool token counts); - reads it from stdin, or writes "
                   "it to stdout with --update-baseline.")
@click.option("--max-increase", "max_increase", default="0", metavar="5%|N",
              help="Allowed growth of the total: a percentage of the baseline or a token count.")
@click.option("--max-total", "max_total", type=click.IntRange(min=0), default=None, metavar="N",
              help="Absolute cap on the total.")
@click.option("--max-tool", "max_tool", type=click.IntRange(min=0), default=None, metavar="N",
              help="Absolute cap on every tool.")
@click.option("--update-baseline", "update", is_flag=True,
              help="Write the baseline from this catalog and exit 0.")
@click.option("--format", "fmt", type=FORMATS, default="text")
def check(source, baseline, max_increase, max_total, max_tool, update, fmt) -> None:
    """CI gate: exit 1 when FILE's tokens exceed the budget against the baseline.

    The baseline is a JSON file of per-tool token counts written by --update-baseline; commit
    it, then fail the build when the catalog grows by more than --max-increase, or when the
    total or any tool passes an absolute cap. New, grown and removed tools are listed.

    \b
    Example:
      caveman-engine check tools.json -b tools.baseline.json --max-increase 5%
    """
    from ..cmdutil import json_bytes, read_input, text_bytes, warn, write_file
    from . import check as _c
    from . import measure as _m

    try:
        increase, is_pct = _c.parse_increase(max_increase)
    except ValueError as exc:
        _fail("check", str(exc))
    # -b -: the baseline comes on stdin (or, with --update-baseline, goes to stdout)
    if baseline == "-" and source == "-" and not update:
        _fail("check", "only one of FILE and --baseline can be stdin")
    _, doc = _load("check", source)
    try:
        m = _m.measure_doc(doc)
    except envelope.CatalogError as exc:
        _fail("check", f"{_name(source)}: {exc}")
    path = Path(baseline)
    summary = f"{m.total} tokens across {len(m.in_order)} tools ({m.tokenizer})"
    if update and baseline == "-":
        _write(_c.baseline_json(m))
        sys.stdout.flush()
        warn(f"caveman-engine check: wrote the baseline to stdout: {summary}")
        return
    if update:
        write_file("check", baseline, _c.baseline_json(m))
        _write(text_bytes(f"wrote {baseline}: {summary}\n"))
        return
    try:
        base = (_c.load_baseline(Path("stdin"), read_input("check", "-", code=2))
                if baseline == "-" else _c.load_baseline(path))
        v = _c.evaluate(m, base, _c.Budget(increase, is_pct, max_total, max_tool))
    except _c.BaselineError as exc:
        _fail("check", str(exc))
    if fmt == "json":
        out = {
            "ok": v.ok, "tokenizer": m.tokenizer, "total": v.total,
            "baseline_total": v.baseline_total, "failures": v.failures,
            "grown": [{"name": n, "baseline": b, "tokens": a} for n, b, a in v.grown],
            "new": [{"name": n, "tokens": t} for n, t in v.added],
            "removed": [{"name": n, "baseline": t} for n, t in v.removed],
        }
        _write(json_bytes(out, indent=2) + b"\n")
    else:
        _write(_c.render(v, m.tokenizer))
    sys.exit(0 if v.ok else 1)


@click.command("diff")
@click.option("--type", "content_type", required=True, metavar="TYPE",
              callback=nonempty("a content type"),
              help="Content type compress would run (e.g. toolschema-safe).")
@click.option("--exit-code", "exit_code", is_flag=True, help="Exit 1 when anything would change.")
@click.option("--format", "fmt", type=FORMATS, default="text",
              help="text: unified diffs; json: the same as one object.")
@click.option("-q", "--quiet", is_flag=True, help="No summary line on stderr.")
@click.argument("source", required=False, metavar="[FILE|-]")
@_rule_options
def diff(content_type: str, exit_code: bool, fmt: str, quiet: bool, source: str, rules,
         disabled) -> None:
    """Unified diff, per changed tool, of what compress --type TYPE would change.

    Each changed tool is shown as pretty-printed JSON before and after, so a reviewer sees
    exactly which words and keywords a rewrite drops; a summary line goes to stderr. Nothing
    is stored.

    \b
    Example:
      caveman-engine diff --type toolschema-safe tools.json | less
    """
    from . import diff as _d

    source = _source("diff", source)
    _rules_env("diff", rules, disabled)
    data, doc = _load("diff", source)
    _require_catalog("diff", source, doc)
    try:
        res = _d.diff_bytes(content_type, data)
    except _d.UnknownType:
        _unknown_type("diff", content_type)
    if fmt == "json":
        import json

        _write(json.dumps({"type": content_type, "changed": res.changed,
                           "tools_total": res.tools_total, "tools_changed": res.tools_changed,
                           "note": res.note, "hunks": res.hunks}, indent=2,
                          ensure_ascii=False) + "\n")
    else:
        for hunk in res.hunks:
            _write(hunk)
    if quiet:
        pass
    elif res.tools_total:
        click.echo(f"diff: {res.tools_changed} of {res.tools_total} tools would change", err=True)
    elif res.note:
        click.echo(f"diff: {res.note}", err=True)
    sys.exit(1 if exit_code and res.changed else 0)


@click.command("verify", epilog="""\b
Exit codes:
  0  same: every schema proven or tested
  1  different: a counterexample, a rewrite that does not compile, or a
     tool/schema on one side only
  2  cannot run: bad usage, unreadable input, missing 'verify' extra
  3  inconclusive: no difference found, but at least one schema lacks
     evidence (no instance could be generated, a generation error, an
     original that does not compile)

\b
Proof and sampling:
  proven  is a proof: identical once annotations are stripped, or
          also once a root $schema and unreferenced definitions
          are, where jsonschema gives every keyword left the same
          meaning in both drafts.
  tested  is sampling, not a proof: no disagreement on at least
          --min-instances instances checked in each direction
          (generated from one schema plus their near misses, validated
          against both).""")
@click.argument("original", metavar="ORIGINAL")
@click.argument("rewritten", metavar="REWRITTEN")
@click.option("--examples", type=click.IntRange(min=1, max=1000), default=25, show_default=True,
              help="Instances to generate per schema and direction.")
@click.option("--min-instances", "min_instances", type=click.IntRange(min=1), default=10,
              show_default=True,
              help="Instances (generated + near misses) that must be checked in each direction "
                   "for a schema to count as tested; fewer is inconclusive.")
@click.option("--format", "fmt", type=FORMATS, default="text")
def verify(original: str, rewritten: str, examples: int, min_instances: int, fmt: str) -> None:
    """Check that two catalogs accept the same tool calls: exit 0 same, 1 different,
    2 cannot run, 3 inconclusive. One line per schema names its evidence."""
    from . import verify as _v

    try:
        _v._require()
    except _v.MissingDependency as exc:
        _fail("verify", str(exc))
    if original == "-" and rewritten == "-":
        _fail("verify", "only one of ORIGINAL and REWRITTEN can be stdin")
    _, a = _load("verify", original)
    _, b = _load("verify", rewritten)
    for src, doc in ((original, a), (rewritten, b)):
        _require_catalog("verify", src, doc)
    def show(done: int, total: int) -> None:
        sys.stderr.write(f"\rverify: {done}/{total} tools")
        sys.stderr.flush()

    # one updating line on a terminal; nothing when stderr is a pipe or a file
    progress = show if sys.stderr.isatty() else None
    try:
        report = _v.verify_docs(a, b, examples=examples, min_instances=min_instances,
                                progress=progress)
    finally:
        if progress is not None:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
    if fmt == "json":
        import json

        _write(json.dumps(_v.report_json(report), indent=2, ensure_ascii=False) + "\n")
    else:
        _write(_v.format_report(report))
    sys.exit(report.exit_code)
