"""``evals run``: load a fixture manifest, replay it through the engine, build the report.

Everything that makes the run itself impossible (no manifest, bad YAML, no fixtures, a fixture
path outside the fixtures directory, an unreadable fixture) is an :class:`EvalError`, printed as
``evals: <message>`` with exit 1. Everything that is wrong with one fixture's *result* (a grader
fails, a probe is lost, the original is not recoverable, no graders) is a failure inside the
report, and the report's ``passed`` is false (also exit 1).
"""

from __future__ import annotations

import os
import posixpath
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import jsonio
from ..limits import MAX_INPUT

MANIFEST = "manifest.yaml"
STATUSES = ("retained", "recoverable", "lost")


class EvalError(Exception):
    """The run cannot go on; the CLI prints ``evals: <message>`` and exits 1."""


def go_quote(s: str) -> str:
    """Close enough to Go's %q for the messages: a JSON string literal, non-ASCII raw."""
    import json

    return json.dumps(s, ensure_ascii=False)


# --------------------------------------------------------------------------- manifest


@dataclass
class Probe:
    value: str
    dimension: str | None = None


@dataclass
class Fixture:
    name: str
    file: str
    path: str  # resolved, inside the root
    type: str | None = None
    mode: str = "compress"
    query: str | None = None
    probes: list[Probe] = field(default_factory=list)
    graders: list[Any] = field(default_factory=list)
    quality_graders: list[Any] = field(default_factory=list)
    quality_task: str | None = None


def resolve_path(root: str, p: Any) -> str:
    """``p`` (a relative slash path from the manifest) resolved inside ``root`` (a real path).

    ``invalid fixture path "<p>"``: not a string, empty, absolute, with a backslash or NUL.
    ``fixture path escapes root: "<p>"``: ``..`` climbs out, or a symlink leads out.
    """
    if not isinstance(p, str) or not p or p.startswith("/") or "\\" in p or "\x00" in p:
        raise EvalError(f"invalid fixture path {go_quote(p if isinstance(p, str) else str(p))}")
    norm = posixpath.normpath(p)
    if norm == ".." or norm.startswith("../"):
        raise EvalError(f"fixture path escapes root: {go_quote(p)}")
    full = os.path.realpath(os.path.join(root, norm))
    if full != root and not full.startswith(root.rstrip(os.sep) + os.sep):
        raise EvalError(f"fixture path escapes root: {go_quote(p)}")
    return full


def read_file(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_INPUT + 1)
    except OSError as exc:
        raise EvalError(f"read {what}: {exc.strerror or exc}") from None
    if len(data) > MAX_INPUT:
        raise EvalError(f"read {what}: exceeds {MAX_INPUT} bytes")
    return data


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _opt_str(entry: dict, key: str, where: str) -> str | None:
    v = entry.get(key)
    if v is None:
        return None
    if not isinstance(v, str):
        raise EvalError(f"{where}: {key} must be a string")
    return v


def load_manifest(root_dir: str | os.PathLike) -> list[Fixture]:
    """Parse ``root_dir/manifest.yaml`` (YAML ``fixtures: [...]``)."""
    import yaml

    root = os.path.realpath(os.fspath(root_dir))
    mpath = os.path.join(root, MANIFEST)
    raw = read_file(mpath, f"manifest {go_quote(os.path.join(os.fspath(root_dir), MANIFEST))}")
    try:
        doc = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise EvalError(f"parse manifest: {_one_line(exc)}") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise EvalError("parse manifest: top level must be a mapping with a fixtures list")
    entries = doc.get("fixtures")
    if entries is None:
        entries = []
    if not isinstance(entries, list):
        raise EvalError("parse manifest: fixtures must be a list")
    if not entries:
        raise EvalError("manifest has no fixtures")
    fixtures = []
    seen: set[str] = set()
    for i, entry in enumerate(entries, 1):
        where = f"fixture {i}"
        if not isinstance(entry, dict):
            raise EvalError(f"{where}: must be a mapping")
        name = _opt_str(entry, "name", where)
        if not name:
            raise EvalError(f"{where}: name is required")
        where = f"fixture {go_quote(name)}"
        if name in seen:
            raise EvalError(f"{where}: duplicate name")
        seen.add(name)
        file = entry.get("file")
        if file is None:
            raise EvalError(f"{where}: file is required")
        path = resolve_path(root, file)
        mode = _opt_str(entry, "mode", where) or "compress"
        fx = Fixture(
            name=name,
            file=file,
            path=path,
            type=_opt_str(entry, "type", where) or None,
            mode="record" if mode == "record" else "compress",
            query=_opt_str(entry, "query", where),
            quality_task=_opt_str(entry, "quality_task", where),
        )
        fx.probes = _probes(entry.get("probes"), where)
        graders = entry.get("graders")
        if graders is None:
            graders = []
        if not isinstance(graders, list):
            raise EvalError(f"{where}: graders must be a list")
        for g in graders:
            if isinstance(g, dict):
                _resolve_grader_files(root, g)
        fx.graders = graders
        quality = entry.get("quality_graders")
        fx.quality_graders = quality if isinstance(quality, list) else []
        fixtures.append(fx)
    return fixtures


def _probes(raw: Any, where: str) -> list[Probe]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise EvalError(f"{where}: probes must be a list")
    out = []
    for p in raw:
        if isinstance(p, str):
            value, dim = p, None
        elif isinstance(p, dict):
            value, dim = p.get("value"), p.get("dimension")
            if dim is not None and not isinstance(dim, str):
                raise EvalError(f"{where}: probe dimension must be a string")
        else:
            value, dim = p, None
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise EvalError(f"{where}: each probe needs a value (a string)")
        value = str(value)
        if not value:
            raise EvalError(f"{where}: probe value must not be empty")
        out.append(Probe(value, dim or None))
    return out


GRADER_FILES = ("expected_file", "schema_file")


def _resolve_grader_files(root: str, g: dict) -> None:
    """Files a grader names are fixture paths too: same checks, read now."""
    for key in GRADER_FILES:
        if key in g:
            path = resolve_path(root, g[key])
            g["_" + key] = read_file(path, f"fixture file {go_quote(str(g[key]))}")


# --------------------------------------------------------------------------- counting


_ASCII_WORD = re.compile(r"[A-Za-z0-9]+")


def count_words(data: bytes) -> int:
    """Runs of letters and digits (Unicode letters, decimal digits), like the reference."""
    text = data.decode("utf-8", "replace")
    if text.isascii():
        return len(_ASCII_WORD.findall(text))
    n, inword = 0, False
    for ch in text:
        cat = unicodedata.category(ch)
        w = cat[0] == "L" or cat == "Nd"
        if w and not inword:
            n += 1
        inword = w
    return n


def eval_ratio(before: int, after: int) -> float:
    if before <= 0 or after >= before:
        return 0.0
    return (before - after) / before


# --------------------------------------------------------------------------- running


@dataclass
class Outcome:
    fixture: Fixture
    content_type: str
    tokens_before: int
    tokens_after: int
    words_before: int
    words_after: int
    basis: str
    byte_recoverable: bool
    failures: list[str]
    probes: list[tuple[Probe, str]]

    @property
    def passed(self) -> bool:
        return not self.failures


def new_engine():
    """An engine on a fresh in-memory store: evals never touch the user's ccr.db."""
    from ..engine import Engine
    from ..store import Store, StoreError

    try:
        return Engine(Store(":memory:"))
    except StoreError as exc:
        raise EvalError(f"cannot open recovery store: {exc}") from None


def run_fixture(engine, fx: Fixture) -> Outcome:
    from ..compressors import CompressorCrash
    from ..detect import detect
    from ..engine import Result
    from .graders import Context, grade

    data = read_file(fx.path, f"fixture {go_quote(fx.file)}")
    failures: list[str] = []
    if fx.mode == "record":
        # Library mode "record": the input untouched, tokens counted, nothing claimed.
        n = engine.count(data)
        result = Result(data, fx.type or detect(data), n, n, engine.counter.name)
    else:
        try:
            result = engine.compress(data, fx.type)
        except CompressorCrash as exc:
            n = engine.count(data)
            result = Result(data, fx.type or detect(data), n, n, engine.counter.name)
            failures.append(f"compress: {exc}")
    output = result.output

    if result.recovery_handle is not None:
        try:
            recovered = engine.retrieve(result.recovery_handle)
        except Exception:  # noqa: BLE001 - any store failure means: not recoverable
            recovered = None
        byte_recoverable = recovered == data
    else:
        byte_recoverable = output == data
    if not byte_recoverable:
        failures.append("original is not byte-recoverable")

    probes: list[tuple[Probe, str]] = []
    for p in fx.probes:
        if p.value.encode() in output:
            status = "retained"
        elif byte_recoverable:
            status = "recoverable"
        else:
            status = "lost"
            failures.append(f"probe lost: {go_quote(p.value)}")
        probes.append((p, status))

    if not fx.graders:
        failures.append("no graders configured")
    ctx = Context(input=data, output=output, result=result, fixture=fx)
    for g in fx.graders:
        msg = grade(g, ctx)
        if msg is not None:
            failures.append(msg)

    return Outcome(
        fixture=fx,
        content_type=result.content_type,
        tokens_before=result.tokens_before,
        tokens_after=result.tokens_after,
        words_before=count_words(data),
        words_after=count_words(output),
        basis=result.basis,
        byte_recoverable=byte_recoverable,
        failures=failures,
        probes=probes,
    )


def run(fixtures: list[Fixture]) -> list[Outcome]:
    engine = new_engine()
    try:
        return [run_fixture(engine, fx) for fx in fixtures]
    finally:
        engine.store.close()


# --------------------------------------------------------------------------- report


def _tally(statuses) -> dict:
    counts = {"total": 0, "retained": 0, "recoverable": 0, "lost": 0}
    for s in statuses:
        counts["total"] += 1
        counts[s] += 1
    return counts


def report(outcomes: list[Outcome]) -> dict:
    """The report document, fields in the reference's order (spec §1.10)."""
    f = jsonio.go_float_fragment
    tb = sum(o.tokens_before for o in outcomes)
    ta = sum(o.tokens_after for o in outcomes)
    wb = sum(o.words_before for o in outcomes)
    wa = sum(o.words_after for o in outcomes)
    all_probes = [(p, s) for o in outcomes for p, s in o.probes]
    probes = _tally(s for _, s in all_probes)
    dims = sorted({p.dimension for p, _ in all_probes if p.dimension})
    if dims:
        probes["by_dimension"] = {
            d: _tally(s for p, s in all_probes if p.dimension == d) for d in dims
        }
    fixtures = []
    for o in outcomes:
        entry: dict = {
            "name": o.fixture.name,
            "content_type": o.content_type,
            "tokens_before": o.tokens_before,
            "tokens_after": o.tokens_after,
            "ratio": f(eval_ratio(o.tokens_before, o.tokens_after)),
            "words_before": o.words_before,
            "words_after": o.words_after,
            "word_ratio": f(eval_ratio(o.words_before, o.words_after)),
            "basis": o.basis,
            "passed": o.passed,
            "byte_recoverable": o.byte_recoverable,
        }
        if o.failures:
            entry["failures"] = list(o.failures)
        if o.probes:
            entry["probes"] = [_probe_entry(p, s) for p, s in o.probes]
            entry["probe_summary"] = _tally(s for _, s in o.probes)
        fixtures.append(entry)
    return {
        "passed": all(o.passed for o in outcomes) and probes["lost"] == 0,
        "tokens_before": tb,
        "tokens_after": ta,
        "token_ratio": f(eval_ratio(tb, ta)),
        "words_before": wb,
        "words_after": wa,
        "word_ratio": f(eval_ratio(wb, wa)),
        "probes": probes,
        "fixtures": fixtures,
    }


def _probe_entry(p: Probe, status: str) -> dict:
    entry = {"value": p.value}
    if p.dimension:
        entry["dimension"] = p.dimension
    entry["status"] = status
    return entry


def render_json(doc: dict) -> bytes:
    """2-space indented, Go escaping, one trailing newline (Go's Encoder with SetIndent)."""
    return jsonio.dumps(doc, sort_keys=False, indent=True) + b"\n"


def render_text(outcomes: list[Outcome], doc: dict) -> str:
    """A readable table: one row per fixture, its failures under it, totals at the end."""
    head = ("fixture", "type", "tokens", "saved", "words", "probes", "result")
    rows = []
    for o in outcomes:
        kept = sum(1 for _, s in o.probes if s == "retained")
        rows.append((
            o.fixture.name,
            o.content_type,
            f"{o.tokens_before} -> {o.tokens_after}",
            _pct(eval_ratio(o.tokens_before, o.tokens_after)),
            f"{o.words_before} -> {o.words_after}",
            f"{kept}/{len(o.probes)}" if o.probes else "-",
            "pass" if o.passed else "FAIL",
        ))
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

    def line(cells) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()

    out = [line(head)]
    for o, r in zip(outcomes, rows):
        out.append(line(r))
        for msg in o.failures:
            out.append(f"    - {msg}")
    p = doc["probes"]
    n_pass = sum(1 for o in outcomes if o.passed)
    out.append("")
    out.append(
        f"tokens {doc['tokens_before']} -> {doc['tokens_after']}"
        f" ({_pct(eval_ratio(doc['tokens_before'], doc['tokens_after']))} saved), "
        f"words {doc['words_before']} -> {doc['words_after']}"
    )
    out.append(
        f"probes {p['total']}: {p['retained']} retained, {p['recoverable']} recoverable,"
        f" {p['lost']} lost"
    )
    out.append(f"{'PASSED' if doc['passed'] else 'FAILED'}: {n_pass}/{len(outcomes)} fixtures passed")
    return "\n".join(out) + "\n"


def _pct(r: float) -> str:
    return f"{r * 100:.1f}%"
