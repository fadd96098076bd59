"""``verify``: do two catalogs accept the same tool calls?

Tools are matched by name (the n-th tool of a name with the n-th of the same name). For each
pair, the input schemas are compared (and the MCP output schemas, when present):

1. **proven** when both are identical once annotations (``title``, ``description``,
   ``default``, ``examples``, ``$comment``, ``deprecated``, ``readOnly``, ``writeOnly``,
   ``example``, ``x-*``) are stripped from every schema position;
2. otherwise **tested**: instances are generated from each schema with
   ``hypothesis-jsonschema`` and validated against the other with ``jsonschema`` (both
   directions), then every generated instance is mutated into near misses (a member dropped,
   added, set to null or to another type; numbers and strings nudged; arrays grown and emptied)
   and each mutant must get the same verdict from both schemas. That catches a rewrite that
   accepts *more* as well as one that accepts less. A disagreement is a counterexample.

A schema without ``$schema`` is read as 2020-12. Hypothesis runs derandomized: the same
inputs give the same report. ``jsonschema``, ``hypothesis`` and ``hypothesis-jsonschema`` are
the ``verify`` extra; they are imported only here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from . import envelope
from . import schema as js

PROVEN = "proven"
TESTED = "tested"
DIFFERENT = "different"
UNTESTED = "untested"

STRIP = js.ANNOTATIONS
MISSING_EXTRA = (
    "needs the 'verify' extra: pip install 'caveman-engine[verify]' "
    "(jsonschema, hypothesis, hypothesis-jsonschema)"
)


class MissingDependency(RuntimeError):
    pass


@dataclass
class Outcome:
    name: str
    part: str  # "input" / "output" / "tool"
    status: str
    detail: str = ""
    counterexample: Any = None
    accepted_by: str = ""  # "original" / "rewritten"


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def different(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == DIFFERENT]

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes if o.status == status)


def _require():
    try:
        import hypothesis
        import hypothesis_jsonschema  # noqa: F401
        import jsonschema  # noqa: F401
    except ImportError:
        raise MissingDependency(MISSING_EXTRA) from None
    from hypothesis.internal.conjecture import utils as cu

    if not hasattr(cu.many, "more"):  # hypothesis >= 6.170.10 broke hypothesis-jsonschema 0.23
        raise MissingDependency(
            f"hypothesis {hypothesis.__version__} does not work with hypothesis-jsonschema; "
            "pip install 'caveman-engine[verify]' (hypothesis<6.170.10)"
        )


# --------------------------------------------------------------------------- annotation strip


def strip_annotations(schema: Any) -> Any:
    """A copy of ``schema`` without annotation keywords at schema positions (enum/const/
    default values and property names are instance data or names: untouched)."""
    out = envelope.copy_tree(schema)
    for n in js.nodes(out):
        for k in [k for k in n if k in STRIP or (k.startswith("x-"))]:
            del n[k]
    return out


# --------------------------------------------------------------------------- validation


def _validator(schema: Any):
    from jsonschema import Draft202012Validator
    from jsonschema.validators import validator_for

    cls = validator_for(schema, default=Draft202012Validator) if isinstance(schema, dict) else Draft202012Validator
    return cls(schema)


def _valid(v, instance) -> bool | None:
    try:
        return v.is_valid(instance)
    except Exception:  # an unresolvable reference, a bad regex…: no verdict
        return None


# --------------------------------------------------------------------------- generation


def tighten(schema: Any) -> Any:
    """A stricter copy of ``schema`` to draw from quickly: objects get
    ``additionalProperties: false`` and arrays ``maxItems`` (at most 3) where they say nothing,
    outside ``not``/``if`` (where stricter would mean looser). Every instance is still validated
    against both real schemas, so this only shapes the sample: extra members come back as
    mutants."""
    out = envelope.copy_tree(schema)

    def rec(node: Any, positive: bool) -> None:
        if not isinstance(node, dict):
            return
        if positive:
            if "properties" in node and not ({"additionalProperties", "patternProperties",
                                              "unevaluatedProperties"} & node.keys()):
                node["additionalProperties"] = False
            if node.get("type") == "array" and "maxItems" not in node:
                lo = node.get("minItems", 0)
                if isinstance(lo, int) and not isinstance(lo, bool) and lo <= 3:
                    node["maxItems"] = 3
        for k, _, child in list(js.children(node)):
            rec(child, positive and k not in ("not", "if"))

    rec(out, True)
    return out


def _draw(schema: Any, n: int) -> list[Any]:
    """Up to ``n`` instances of ``schema`` (fewer, or none, if generation fails)."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis.errors import HypothesisException
    from hypothesis_jsonschema import from_schema

    try:
        strategy = from_schema(schema)
    except Exception:
        return []
    found: list[Any] = []

    @settings(max_examples=n, database=None, derandomize=True, deadline=None,
              suppress_health_check=list(HealthCheck), phases=[Phase.generate],
              print_blob=False)
    @given(strategy)
    def collect(x):
        found.append(x)

    try:
        collect()
    except (HypothesisException, Exception):
        pass
    # Deduplicate while keeping order.
    out, seen = [], set()
    for x in found:
        key = json.dumps(x, sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append(x)
    return out


_ALT_VALUES = (None, "x", 0, 1.5, True, [], {}, "", -1, [None], {"": None})


def _variants(v: Any) -> list[Any]:
    """Near misses of one value, most telling first: same-type nudges, then other types."""
    vs: list[Any] = []
    if isinstance(v, bool):
        vs.append(not v)
    elif isinstance(v, int):
        vs += [float(v) + 0.5, v + 1, v - 1, -v - 1, v * 10 + 7, str(v), 10**12, -(10**12)]
    elif isinstance(v, float):
        vs += [v + 1, v - 1, -v, int(v), v * 10, str(v)]
    elif isinstance(v, str):
        vs += [v + "x", v * 3 + "xyz", v[:-1], "", v.upper(), " " + v, "null", str(len(v))]
    elif isinstance(v, list):
        vs += [[], v + v[-1:] if v else [None], v[:-1], v + v, v[1:], v + [None]]
    elif isinstance(v, dict):
        vs += [{**v, "zz_unexpected": 1}]
        vs += [{kk: vv for kk, vv in v.items() if kk != k} for k in v]
        vs += [{**v, "zz_unexpected": None}, {}]
    vs += [a for a in _ALT_VALUES if type(a) is not type(v) or a != v]
    return vs


def _mutants(instance: Any, limit: int) -> list[Any]:
    """Near misses of ``instance``: one change at one place, round-robin over the places
    (breadth-first) so that every place gets its most telling mutations first."""
    positions: list[tuple[tuple, Any]] = [((), instance)]
    i = 0
    while i < len(positions) and len(positions) < 200:
        path, v = positions[i]
        i += 1
        if isinstance(v, dict):
            positions.extend(((*path, k), x) for k, x in v.items())
        elif isinstance(v, list):
            positions.extend(((*path, j), x) for j, x in enumerate(v))
    lists = [(path, _variants(v)) for path, v in positions]
    out: list[Any] = []
    rank = 0
    while len(out) < limit:
        progressed = False
        for path, vs in lists:
            if rank < len(vs):
                progressed = True
                out.append(_replace(instance, path, vs[rank]))
                if len(out) >= limit:
                    break
        if not progressed:
            break
        rank += 1
    return out


def _replace(root: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(root, dict):
        new = dict(root)
    else:
        new = list(root)
    new[head] = _replace(root[head], rest, value)
    return new


# --------------------------------------------------------------------------- comparing


def compare_schemas(a: Any, b: Any, *, examples: int = 25, mutants: int = 40) -> tuple[str, Any, str, str]:
    """``(status, counterexample, accepted_by, detail)`` for original ``a`` vs rewritten ``b``
    (both plain JSON values, numbers as int/float). Results are memoised per process (the same
    pair of schemas recurs across envelopes of one catalog)."""
    if strip_annotations(a) == strip_annotations(b):
        return PROVEN, None, "", ""
    key = (json.dumps(a, sort_keys=True), json.dumps(b, sort_keys=True), examples, mutants)
    hit = _MEMO.get(key)
    if hit is None:
        hit = _MEMO[key] = _test(a, b, examples, mutants)
        if len(_MEMO) > 4096:
            _MEMO.pop(next(iter(_MEMO)))
    return hit


_MEMO: dict[tuple, tuple[str, Any, str, str]] = {}


def _test(a: Any, b: Any, examples: int, mutants: int) -> tuple[str, Any, str, str]:
    va, vb = _validator(a), _validator(b)
    instances: list[Any] = []
    drew = False
    for src in (a, b):
        # copies: hypothesis-jsonschema resolves references in place
        got = _draw(tighten(src), examples) + _draw(envelope.copy_tree(src), max(1, examples // 5))
        drew = drew or bool(got)
        instances.extend(got)
    checked = 0
    pool = list(instances)
    for inst in instances:
        pool.extend(_mutants(inst, mutants))
    best = None
    for inst in pool:
        ra, rb = _valid(va, inst), _valid(vb, inst)
        if ra is None or rb is None:
            continue
        checked += 1
        if ra != rb:
            size = len(json.dumps(inst))
            if best is None or size < best[0]:
                best = (size, inst, "original" if ra else "rewritten")
    if best is not None:
        return DIFFERENT, best[1], best[2], ""
    if not drew or checked == 0:
        return UNTESTED, None, "", "no instances could be generated"
    return TESTED, None, "", f"{checked} instances"


def _index(doc: Any) -> dict[str, list[envelope.Tool]]:
    out: dict[str, list[envelope.Tool]] = {}
    for t in envelope.iter_tools(doc):
        out.setdefault(t.name, []).append(t)
    return out


def verify_docs(original: Any, rewritten: Any, *, examples: int = 25, mutants: int = 40) -> Report:
    """Compare two decoded catalogs (or two bare schemas). Raises :class:`MissingDependency`."""
    _require()
    report = Report()
    if envelope.is_bare_schema(original) and envelope.is_bare_schema(rewritten):
        pa, pb = envelope.to_plain(original), envelope.to_plain(rewritten)
        status, ce, by, detail = compare_schemas(pa, pb, examples=examples, mutants=mutants)
        report.outcomes.append(Outcome("(schema)", "input", status, detail, ce, by))
        return report
    ia, ib = _index(original), _index(rewritten)
    for name in list(ia) + [n for n in ib if n not in ia]:
        la, lb = ia.get(name, []), ib.get(name, [])
        for k in range(max(len(la), len(lb))):
            if k >= len(la) or k >= len(lb):
                where = "rewritten" if k >= len(la) else "original"
                report.outcomes.append(Outcome(name, "tool", DIFFERENT, f"only in the {where} catalog"))
                continue
            ta, tb = la[k], lb[k]
            sa, sb = dict(ta.schemas()), dict(tb.schemas())
            pairs = [("input", sa.get(ta.schema_key), sb.get(tb.schema_key))]
            if envelope.OUTPUT_DOOR in sa or envelope.OUTPUT_DOOR in sb:
                pairs.append(("output", sa.get(envelope.OUTPUT_DOOR), sb.get(envelope.OUTPUT_DOOR)))
            for part, x, y in pairs:
                if (x is None) != (y is None):
                    report.outcomes.append(Outcome(name, part, DIFFERENT, "schema missing on one side"))
                    continue
                if x is None:
                    report.outcomes.append(Outcome(name, part, PROVEN))
                    continue
                status, ce, by, detail = compare_schemas(
                    envelope.to_plain(x), envelope.to_plain(y), examples=examples, mutants=mutants)
                report.outcomes.append(Outcome(name, part, status, detail, ce, by))
    return report


def format_report(report: Report) -> str:
    lines = []
    for o in report.outcomes:
        if o.status == DIFFERENT:
            if o.counterexample is not None or o.accepted_by:
                other = "rewritten" if o.accepted_by == "original" else "original"
                ce = json.dumps(o.counterexample, ensure_ascii=False, separators=(",", ":"))
                if len(ce) > 400:
                    ce = ce[:400] + "…"
                lines.append(f"DIFFERENT {o.name} ({o.part}): {ce} is accepted by the "
                             f"{o.accepted_by} and rejected by the {other}")
            else:
                lines.append(f"DIFFERENT {o.name} ({o.part}): {o.detail}")
        elif o.status == UNTESTED:
            lines.append(f"untested {o.name} ({o.part}): {o.detail}")
    total = len(report.outcomes)
    lines.append(
        f"{total} schemas: {report.count(PROVEN)} proven, {report.count(TESTED)} tested, "
        f"{report.count(UNTESTED)} untested, {report.count(DIFFERENT)} different"
    )
    return "\n".join(lines) + "\n"
