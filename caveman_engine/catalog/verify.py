"""``verify``: do two catalogs accept the same tool calls?

Tools are matched by name (the n-th tool of a name with the n-th of the same name). For each
pair, the input schemas are compared (and the MCP output schemas, when present). Each pair gets
exactly one verdict, and only the first two are evidence that the two accept the same calls:

1. **proven** (a proof): both are identical once annotations (``title``, ``description``,
   ``default``, ``examples``, ``$comment``, ``deprecated``, ``readOnly``, ``writeOnly``,
   ``example``, ``x-*``) are stripped from every schema position, and no ``$ref`` points into
   an annotation;
2. **tested** (sampling, not a proof): both schemas compile, and at least ``min_instances``
   distinct instances were checked in *each* direction without a disagreement. Original →
   rewritten means: instances generated from the original with ``hypothesis-jsonschema`` that
   the original accepts, plus near misses made from them (a member dropped, added, set to null
   or to another type; numbers and strings nudged; arrays grown and emptied), each validated
   against both schemas with ``jsonschema``; rewritten → original the same the other way.
   Near misses catch a rewrite that accepts *more* as well as one that accepts less;
3. **different**: a counterexample (an instance one schema accepts and the other rejects, or
   one only the rewritten cannot validate), a rewritten schema that does not compile while the
   original does (or that adds a compile error of its own), a tool or a schema on one side only;
4. **inconclusive**: no difference found, but no evidence either: an original that does not
   compile, too few instances in a direction (an unsatisfiable or generator-hostile schema),
   or a generation error (never swallowed: its message is the reason given).

"Compiles" means: valid against its draft's metaschema (so every ``pattern`` and
``patternProperties`` key is a regex Python's ``re`` accepts, as ``jsonschema`` needs) and
every ``$ref``/``$dynamicRef`` resolves locally (references are never fetched over the network).

A schema without ``$schema`` is read as 2020-12. Hypothesis runs derandomized: the same
inputs give the same report. ``jsonschema``, ``hypothesis`` and ``hypothesis-jsonschema`` are
the ``verify`` extra; they are imported only here.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from typing import Any

from . import envelope
from . import schema as js

PROVEN = "proven"
TESTED = "tested"
DIFFERENT = "different"
INCONCLUSIVE = "inconclusive"

# Exit codes of ``caveman-engine verify``.
EXIT_SAME = 0  # every schema proven or tested
EXIT_DIFFERENT = 1  # at least one difference
EXIT_USAGE = 2  # bad usage or input, missing extra: the check could not run
EXIT_INCONCLUSIVE = 3  # no difference, but at least one schema without evidence

DEFAULT_EXAMPLES = 25
DEFAULT_MIN_INSTANCES = 10
DEFAULT_MUTANTS = 40

STRIP = js.ANNOTATIONS
MISSING_EXTRA = (
    "needs the 'verify' extra: pip install 'caveman-engine[verify]' "
    "(jsonschema, hypothesis, hypothesis-jsonschema)"
)

SIDES = ("original", "rewritten")


class MissingDependency(RuntimeError):
    pass


@dataclass
class Direction:
    """Evidence gathered from one side's instances (checked against both schemas)."""

    source: str  # "original" / "rewritten"
    generated: int = 0  # distinct generated instances the source accepts, with both verdicts
    near_misses: int = 0  # distinct near misses of those, with both verdicts
    error: str = ""  # generation error from the source schema itself (never swallowed)

    @property
    def checked(self) -> int:
        return self.generated + self.near_misses

    @property
    def target(self) -> str:
        return SIDES[1] if self.source == SIDES[0] else SIDES[0]

    def as_json(self) -> dict:
        out = {"from": self.source, "to": self.target, "instances": self.checked,
               "generated": self.generated, "near_misses": self.near_misses}
        if self.error:
            out["error"] = self.error
        return out


@dataclass
class Verdict:
    status: str
    counterexample: Any = None
    accepted_by: str = ""  # "original" / "rewritten"
    detail: str = ""
    directions: list[Direction] = field(default_factory=list)

    def astuple(self) -> tuple[str, Any, str, str]:
        return self.status, self.counterexample, self.accepted_by, self.detail


@dataclass
class Outcome:
    name: str
    part: str  # "input" / "output" / "tool"
    status: str
    detail: str = ""
    counterexample: Any = None
    accepted_by: str = ""  # "original" / "rewritten"
    directions: list[Direction] = field(default_factory=list)


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)
    min_instances: int = DEFAULT_MIN_INSTANCES

    @property
    def different(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == DIFFERENT]

    @property
    def inconclusive(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == INCONCLUSIVE]

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes if o.status == status)

    @property
    def verdict(self) -> str:
        """``same`` (every schema proven or tested), ``different`` or ``inconclusive``."""
        if self.different:
            return "different"
        if self.inconclusive or not self.outcomes:
            return "inconclusive"
        return "same"

    @property
    def exit_code(self) -> int:
        return {"same": EXIT_SAME, "different": EXIT_DIFFERENT}.get(self.verdict, EXIT_INCONCLUSIVE)


def _require():
    try:
        import hypothesis
        import hypothesis_jsonschema  # noqa: F401
        import jsonschema  # noqa: F401
        import referencing  # noqa: F401  (a dependency of jsonschema >= 4.18)
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


def _refs_into_annotations(schema: Any) -> bool:
    """Whether a reference's JSON pointer names an annotation keyword (``#/default/…``): then
    stripping annotations could change what it points at, and identity after stripping is no
    proof. Conservative: a property that happens to be called ``description`` counts too."""
    for n in js.nodes(schema):
        for kw in ("$ref", "$dynamicRef"):
            ref = n.get(kw)
            if not isinstance(ref, str) or "#" not in ref:
                continue
            pointer = ref.split("#", 1)[1]
            for tok in pointer.split("/")[1:]:
                tok = tok.replace("~1", "/").replace("~0", "~")
                if tok in STRIP or tok.startswith("x-"):
                    return True
    return False


def is_proven(a: Any, b: Any) -> bool:
    """The first proof: identical once annotations are stripped."""
    return (strip_annotations(a) == strip_annotations(b)
            and not _refs_into_annotations(a) and not _refs_into_annotations(b))


IDENTICAL = "identical once annotations are stripped"
SAME_DRAFT = "identical once annotations and unreferenced definitions are stripped"
OTHER_DRAFT = ("identical once annotations, the root $schema and unreferenced definitions are "
               "stripped, and every keyword it uses means the same in both drafts")
# Where a reference could resolve differently from one draft to the other.
_IDENTIFIERS = frozenset(("$id", "id", "$anchor", "$dynamicAnchor", "$dynamicRef",
                          "$recursiveRef", "$recursiveAnchor"))


def proof(a: Any, b: Any) -> str | None:
    """Why ``a`` and ``b`` accept exactly the same instances, or None when that is not proven
    (they may still be the same: then they are tested).

    1. identical once annotations are stripped (:func:`is_proven`);
    2. both compile, and they are identical once annotations, the root ``$schema`` and the
       definitions no reference reaches are stripped (the sampling copy of
       :func:`_sample_source`), and ``jsonschema`` validates that common schema alike in the
       drafts the two declare (:func:`_same_in_drafts`). Typical case: a ``toolschema-safe``
       rewrite that dropped a draft-07 ``$schema`` URI and unused ``$defs``."""
    if is_proven(a, b):
        return IDENTICAL
    if not (isinstance(a, dict) and isinstance(b, dict)):
        return None
    if _refs_into_annotations(a) or _refs_into_annotations(b):
        return None
    common = _sample_source(a)
    if common != _sample_source(b):
        return None
    ca, cb = _validator_class(a), _validator_class(b)
    if not _same_in_drafts(common, ca, cb):
        return None
    if compile_errors(a) or compile_errors(b):
        return None
    return SAME_DRAFT if ca is cb else OTHER_DRAFT


# jsonschema's ``items`` of drafts 6 to 2019-09 and of 2020-12 (read in jsonschema 4.26).
_ITEMS_FUNCTIONS = {"items_draft6_draft7_draft201909", "items"}


def _same_in_drafts(schema: Any, ca, cb) -> bool:
    """Whether validator classes ``ca`` and ``cb`` give ``schema`` the same meaning, read off
    ``jsonschema`` itself: the same type checker, and every keyword at every schema position
    implemented by the very same function in both. One exception, from the two functions'
    code: ``items`` given one schema, with no ``prefixItems``/``additionalItems`` beside it,
    applies that schema to every element in both (draft 6-2019-09 and 2020-12). Nothing that
    makes references resolve differently may occur (identifiers, anchors, dynamic or recursive
    references, a nested ``$schema``), every ``$ref`` is ``#`` or names a root definition (so it
    reaches only subschemas the walk checks), and a ``$ref`` has no validating sibling (drafts
    up to 7 ignore them, later ones apply them)."""
    if ca is cb:
        return True
    if ca.TYPE_CHECKER != cb.TYPE_CHECKER:
        return False
    if not js.analyze(schema).simple_refs:
        return False  # a reference could reach a subschema the walk below does not see
    va, vb = ca.VALIDATORS, cb.VALIDATORS
    items_alike = {getattr(va.get("items"), "__name__", None),
                   getattr(vb.get("items"), "__name__", None)} == _ITEMS_FUNCTIONS
    for node in js.nodes(schema):
        if not _IDENTIFIERS.isdisjoint(node) or (node is not schema and "$schema" in node):
            return False
        if "$ref" in node and any(k != "$ref" and (k in va or k in vb) for k in node):
            return False
        for k, v in node.items():
            fa, fb = va.get(k), vb.get(k)
            if fa is fb:
                continue
            if (k == "items" and items_alike and isinstance(v, (dict, bool))
                    and {"prefixItems", "additionalItems"}.isdisjoint(node)):
                continue
            return False
    return True


# --------------------------------------------------------------------------- compiling


def _validator_class(schema: Any):
    from jsonschema import Draft202012Validator
    from jsonschema.validators import validator_for

    if not isinstance(schema, dict) or not isinstance(schema.get("$schema", ""), str):
        # not a schema object, or a $schema that names nothing: read as 2020-12, whose
        # metaschema then reports the $schema (jsonschema's lookup needs a string)
        return Draft202012Validator
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return validator_for(schema, default=Draft202012Validator)


def _registry():
    """Only the metaschemas: a reference elsewhere is unresolvable, never fetched."""
    from jsonschema_specifications import REGISTRY

    return REGISTRY


def _validator(schema: Any):
    return _validator_class(schema)(schema, registry=_registry())


def compile_errors(schema: Any) -> list[tuple[str, str]]:
    """``(message, where)`` for every reason ``jsonschema`` cannot use ``schema``: a metaschema
    violation (an invalid ``pattern`` regex, a wrong keyword type…) or an unresolvable
    ``$ref``/``$dynamicRef``. Messages name the offending value, not its place, so the same
    fault moved elsewhere by a rewrite compares equal."""
    if isinstance(schema, bool):
        return []
    if not isinstance(schema, dict):
        return [(f"a schema must be an object or a boolean, not {type(schema).__name__}", "#")]
    from jsonschema.validators import validator_for
    from referencing.exceptions import Unresolvable
    from referencing.jsonschema import DRAFT202012, specification_with

    cls = _validator_class(schema)
    errors: list[tuple[str, str]] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        meta_cls = validator_for(cls.META_SCHEMA, default=cls)
        meta = meta_cls(cls.META_SCHEMA, format_checker=meta_cls.FORMAT_CHECKER)
        for e in meta.iter_errors(schema):
            where = "#" + "".join(f"/{p}" for p in e.absolute_path)
            errors.append((e.message, where))
    meta_id = cls.META_SCHEMA.get("$id") or cls.META_SCHEMA.get("id") or ""
    spec = specification_with(meta_id, default=DRAFT202012)
    try:
        root = spec.create_resource(schema)
        base = root.id() or ""
        resolver = _registry().with_resource(base, root).resolver(base_uri=base)
    except Exception as exc:  # a malformed $id
        return errors + [(f"cannot build a reference resolver: {exc}", "#")]

    def walk(node: Any, resolver, where: str) -> None:
        if not isinstance(node, dict):
            return
        try:
            resolver = resolver.in_subresource(spec.create_resource(node))
        except Exception as exc:
            errors.append((f"bad identifier: {exc}", where))
            return
        for kw in ("$ref", "$dynamicRef"):
            ref = node.get(kw)
            if isinstance(ref, str):
                try:
                    resolver.lookup(ref)
                except Unresolvable:
                    errors.append((f"cannot resolve {kw} {ref!r}", where))
                except Exception as exc:
                    errors.append((f"cannot resolve {kw} {ref!r}: {exc}", where))
        for k, name, child in js.children(node):
            walk(child, resolver, where + "/" + k + ("" if name is None else f"/{name}"))

    walk(schema, resolver, "#")
    return errors


def _fmt_errors(errors: list[tuple[str, str]], limit: int = 2) -> str:
    shown = "; ".join(f"{m} (at {w})" for m, w in errors[:limit])
    return shown + (f"; and {len(errors) - limit} more" if len(errors) > limit else "")


def _verdict(v, instance) -> bool | Exception:
    try:
        return v.is_valid(instance)
    except Exception as exc:  # not expected once the schema compiles (deep recursion…)
        return exc


def _error_text(exc: BaseException) -> str:
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    msg = msg if len(msg) <= 120 else msg[:120] + "…"
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__


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


_STRATEGIES: dict[tuple, Any] = {}


def _memoise_strategies() -> None:
    """Build each ``hypothesis-jsonschema`` strategy once per distinct (sub)schema.

    ``hypothesis-jsonschema`` rebuilds the strategy of every member of an object on *every*
    object it draws (resolving references, canonicalising, compiling validators and
    ``st.composite`` wrappers each time): most of the generation time on real catalogs. Its two
    builders are pure functions of the (canonically serialised) schema, so they are wrapped
    with a cache keyed by that serialisation; equal schemas get the very same strategy, which
    draws exactly what a fresh one would. Only the default alphabet and no custom formats are
    cached (all ``verify`` uses); a build that raises is not cached (it raises again)."""
    try:
        from hypothesis_jsonschema import _from_schema as m

        if getattr(m, "_caveman_memoised", False):
            return
        build, merge = m.__dict__["__from_schema"], m.merged_as_strategies
    except (ImportError, KeyError, AttributeError):  # another layout: no cache, same results
        return

    def cached(fn, what, schema, alphabet, custom_formats):
        if custom_formats is not None:
            return fn(schema, alphabet=alphabet, custom_formats=custom_formats)
        try:
            key = (what, getattr(alphabet, "allow_x00", None), getattr(alphabet, "codec", None),
                   _key(schema))
        except (TypeError, ValueError):
            return fn(schema, alphabet=alphabet, custom_formats=custom_formats)
        hit = _STRATEGIES.get(key)
        if hit is None:
            hit = _STRATEGIES[key] = fn(schema, alphabet=alphabet, custom_formats=custom_formats)
            if len(_STRATEGIES) > 20000:
                _STRATEGIES.pop(next(iter(_STRATEGIES)))
        return hit

    def from_schema_cached(schema, *, alphabet, custom_formats):
        return cached(build, "one", schema, alphabet, custom_formats)

    def merged_cached(schemas, *, alphabet, custom_formats):
        return cached(merge, "merged", schemas, alphabet, custom_formats)

    setattr(m, "__from_schema", from_schema_cached)
    m.merged_as_strategies = merged_cached
    m._caveman_memoised = True


def draw(schema: Any, n: int) -> tuple[list[Any], str]:
    """Up to ``n`` distinct instances of ``schema`` and the generation error, if any (``""``).
    Whatever was drawn before an error is kept; the error is reported, never swallowed."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis_jsonschema import from_schema

    _memoise_strategies()
    found: list[Any] = []
    error = ""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            strategy = from_schema(schema)
        except Exception as exc:
            return [], f"the generator rejects the schema: {_error_text(exc)}"
        try:
            empty = strategy.is_empty
        except Exception as exc:
            return [], f"the generator rejects the schema: {_error_text(exc)}"
        if empty:
            return [], "the generator finds no instance (the schema may accept nothing)"

        @settings(max_examples=n, database=None, derandomize=True, deadline=None,
                  suppress_health_check=list(HealthCheck), phases=[Phase.generate],
                  print_blob=False)
        @given(strategy)
        def collect(x):
            found.append(x)

        try:
            collect()
        except Exception as exc:
            error = f"generation failed: {_error_text(exc)}"
    out, seen = [], set()
    for x in found:
        key = _key(x)
        if key not in seen:
            seen.add(key)
            out.append(x)
    return out, error


def _key(x: Any) -> str:
    return json.dumps(x, sort_keys=True)


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


def compare(a: Any, b: Any, *, examples: int = DEFAULT_EXAMPLES, mutants: int = DEFAULT_MUTANTS,
            min_instances: int = DEFAULT_MIN_INSTANCES) -> Verdict:
    """The verdict for original ``a`` vs rewritten ``b`` (plain JSON values, numbers as
    int/float). Memoised per process (the same pair recurs across envelopes of one catalog)."""
    why = proof(a, b)
    if why is not None:
        return Verdict(PROVEN, detail=why)
    key = (_key(a), _key(b), examples, mutants, min_instances)
    hit = _MEMO.get(key)
    if hit is None:
        hit = _MEMO[key] = _test(a, b, examples, mutants, min_instances)
        if len(_MEMO) > 4096:
            _MEMO.pop(next(iter(_MEMO)))
    return hit


def compare_schemas(a: Any, b: Any, *, examples: int = DEFAULT_EXAMPLES,
                    mutants: int = DEFAULT_MUTANTS,
                    min_instances: int = DEFAULT_MIN_INSTANCES) -> tuple[str, Any, str, str]:
    """``(status, counterexample, accepted_by, detail)`` of :func:`compare`."""
    return compare(a, b, examples=examples, mutants=mutants, min_instances=min_instances).astuple()


_MEMO: dict[tuple, Verdict] = {}


def _generate(src: Any, examples: int) -> tuple[list[Any], str]:
    """Instances of ``src``: mostly from its tightened copy (small, quick), some from the
    schema itself. The tightened copy is only a sampling aid, so its failure (it may be
    unsatisfiable where the schema is not) just moves the whole budget to the schema itself,
    whose own generation error is returned. Drawn from :func:`_sample_source`, once per
    distinct one."""
    src = _sample_source(src)
    key = (_key(src), examples)
    hit = _DRAWN.get(key)
    if hit is None:
        # copies: hypothesis-jsonschema resolves references in place
        tight, tight_error = draw(tighten(src), examples)
        budget = max(1, examples // 5) if tight and not tight_error else examples
        loose, error = draw(envelope.copy_tree(src), budget)
        hit = _DRAWN[key] = (tight + loose, error)
        if len(_DRAWN) > 1024:
            _DRAWN.pop(next(iter(_DRAWN)))
    return list(hit[0]), hit[1]


def _sample_source(src: Any) -> Any:
    """What instances are drawn from: ``src`` without annotations, its root ``$schema`` and
    unreferenced definitions (a sampling aid like :func:`tighten`: none of these changes which
    calls the schema accepts, the dialect was already checked when it compiled, and every
    instance is validated against both real schemas). A rewrite that only drops those thus
    draws the very same sample as its original, once. Unchanged when a reference points into
    an annotation (stripping could change what it resolves to)."""
    if not isinstance(src, dict) or _refs_into_annotations(src):
        return src
    out = strip_annotations(src)
    out.pop("$schema", None)
    _drop_unreferenced_defs(out)
    return out


def _drop_unreferenced_defs(schema: dict) -> None:
    """Drop root ``$defs``/``definitions`` entries that no reference reaches from the rest of
    the schema (in place): they cannot change what it accepts. Only with plain local
    references (``#/$defs/name…``) and no ``$id``/``$anchor``/``$dynamicRef`` anywhere;
    otherwise nothing is dropped."""
    kws = [k for k in ("$defs", "definitions") if isinstance(schema.get(k), dict)]
    if not kws:
        return
    refs_of: dict[Any, list[tuple[str, str]]] = {}

    def refs(node: Any) -> list[tuple[str, str]] | None:
        out: list[tuple[str, str]] = []
        for n in js.nodes(node):
            if not _IDENTIFIERS.isdisjoint(n):
                return None
            ref = n.get("$ref")
            if ref is None:
                continue
            parts = ref.split("/") if isinstance(ref, str) else []
            if len(parts) < 3 or parts[0] != "#" or parts[1] not in kws or "%" in ref:
                return None
            name = parts[2].replace("~1", "/").replace("~0", "~")
            if name not in schema[parts[1]]:
                return None
            out.append((parts[1], name))
        return out

    body = {k: v for k, v in schema.items() if k not in kws}
    todo = refs(body)
    if todo is None:
        return
    for kw in kws:
        for name, sub in schema[kw].items():
            found = refs(sub)
            if found is None:
                return
            refs_of[(kw, name)] = found
    keep: set[tuple[str, str]] = set()
    while todo:
        ref = todo.pop()
        if ref not in keep:
            keep.add(ref)
            todo.extend(refs_of.get(ref, []))
    for kw in kws:
        kept = {name: sub for name, sub in schema[kw].items() if (kw, name) in keep}
        if kept:
            schema[kw] = kept
        else:
            del schema[kw]


# Instances drawn per distinct schema (and budget): a schema that recurs on either side of
# several pairs is drawn from once. Draws are derandomized, so this only saves time.
_DRAWN: dict[tuple, tuple[list[Any], str]] = {}


def _test(a: Any, b: Any, examples: int, mutants: int, need: int) -> Verdict:
    errors_a, errors_b = compile_errors(a), compile_errors(b)
    known = {m for m, _ in errors_a}
    new = [(m, w) for m, w in errors_b if m not in known]
    if new:
        if errors_a:
            return Verdict(DIFFERENT, detail="the rewritten schema adds a compile error: "
                                             + _fmt_errors(new))
        return Verdict(DIFFERENT, detail="the rewritten schema does not compile (the original "
                                         "does): " + _fmt_errors(new))
    if errors_a:
        return Verdict(INCONCLUSIVE, detail="the original schema does not compile, so nothing "
                                            "can be checked against it: " + _fmt_errors(errors_a))
    va, vb = _validator(a), _validator(b)
    directions: list[Direction] = []
    best = None  # (size, instance, accepted_by, detail)
    unverdicted = 0
    # Both verdicts of every distinct instance, shared by the two directions: a rewrite that
    # changes little draws mostly the same instances from either side.
    both: dict[str, tuple[Any, Any]] = {}

    def verdicts(inst: Any, k: str) -> tuple[Any, Any]:
        hit = both.get(k)
        if hit is None:
            hit = both[k] = (_verdict(va, inst), _verdict(vb, inst))
        return hit

    for label, src, i_src in ((SIDES[0], a, 0), (SIDES[1], b, 1)):
        d = Direction(label)
        directions.append(d)
        drawn, d.error = _generate(src, examples)
        valid = [x for x in drawn if verdicts(x, _key(x))[i_src] is True]
        seen: set[str] = set()
        pool = [(x, True) for x in valid]
        for x in valid:
            pool.extend((m, False) for m in _mutants(x, mutants))
        for inst, generated in pool:
            k = _key(inst)
            if k in seen:
                continue
            seen.add(k)
            ra, rb = verdicts(inst, k)
            if isinstance(rb, Exception) and not isinstance(ra, Exception):
                cand = (len(k), inst, "", "the rewritten schema cannot validate "
                        f"{_short(inst)}: {_error_text(rb)}")
            elif isinstance(ra, Exception) or isinstance(rb, Exception):
                unverdicted += 1
                continue
            else:
                if generated:
                    d.generated += 1
                else:
                    d.near_misses += 1
                if ra == rb:
                    continue
                cand = (len(k), inst, SIDES[0] if ra else SIDES[1], "")
            if best is None or cand[0] < best[0]:
                best = cand
    if best is not None:
        return Verdict(DIFFERENT, best[1], best[2], best[3], directions)
    problems = []
    for d in directions:
        if d.error:
            problems.append(f"{d.source} → {d.target}: {d.error}")
        elif d.checked < need:
            why = (f"only {d.checked} instance{'s' if d.checked != 1 else ''} checked "
                   f"({d.generated} generated, {d.near_misses} near misses), need {need}")
            if not d.generated:
                why = f"no instance of the {d.source} schema could be generated, need {need}"
            problems.append(f"{d.source} → {d.target}: {why}")
    if unverdicted and not problems:
        problems.append(f"{unverdicted} instances could not be validated against the original")
    if problems:
        return Verdict(INCONCLUSIVE, detail="; ".join(problems), directions=directions)
    return Verdict(TESTED, detail=_evidence(directions), directions=directions)


def _evidence(directions: list[Direction]) -> str:
    return ", ".join(f"{d.checked} {d.source} → {d.target} ({d.generated} generated + "
                     f"{d.near_misses} near misses)" for d in directions)


def _short(x: Any, limit: int = 400) -> str:
    s = json.dumps(x, ensure_ascii=False, separators=(",", ":"))
    return s if len(s) <= limit else s[:limit] + "…"


def _index(doc: Any) -> dict[str, list[envelope.Tool]]:
    out: dict[str, list[envelope.Tool]] = {}
    for t in envelope.iter_tools(doc):
        out.setdefault(t.name, []).append(t)
    return out


# Below this many distinct pairs to test, a worker pool costs more than it saves.
PARALLEL_MIN_PAIRS = 4
MAX_JOBS = 2


def _jobs(requested: int | None, pairs: int) -> int:
    """Worker processes for ``pairs`` distinct pairs to test: ``requested`` when given,
    else ``CAVEMAN_VERIFY_JOBS`` when set (``1`` forces the serial path), else up to
    :data:`MAX_JOBS` (the usable cores) once there are :data:`PARALLEL_MIN_PAIRS` pairs."""
    import os

    if requested is None:
        env = os.environ.get("CAVEMAN_VERIFY_JOBS", "").strip()
        if env.isdigit() and int(env) >= 1:
            requested = int(env)
        else:
            try:
                cores = len(os.sched_getaffinity(0))
            except (AttributeError, OSError):
                cores = os.cpu_count() or 1
            requested = min(MAX_JOBS, cores) if pairs >= PARALLEL_MIN_PAIRS else 1
    return max(1, min(requested, pairs))


def _pool_context():
    import multiprocessing as mp
    import sys

    # fork: the workers inherit the imported extra and the caches; elsewhere the safe default
    if sys.platform.startswith("linux") and "fork" in mp.get_all_start_methods():
        return mp.get_context("fork")
    return mp.get_context()


def verify_docs(original: Any, rewritten: Any, *, examples: int = DEFAULT_EXAMPLES,
                mutants: int = DEFAULT_MUTANTS,
                min_instances: int = DEFAULT_MIN_INSTANCES, jobs: int | None = None,
                progress=None) -> Report:
    """Compare two decoded catalogs (or two bare schemas). Raises :class:`MissingDependency`.

    Proven pairs (:func:`proof`) are settled without generating
    anything. The other pairs are tested once per distinct (original, rewritten) pair, keyed
    by the canonical serialisation of *both* schemas; with ``jobs`` > 1 (default: 2 when at
    least :data:`PARALLEL_MIN_PAIRS` distinct pairs need testing and two cores are usable;
    ``CAVEMAN_VERIFY_JOBS=1`` forces the serial path) they are spread over a pool of worker
    processes. Each test is derandomized and independent, so the report is the same either way,
    in input order. ``progress(done, total)`` is called as tools are settled."""
    _require()
    report = Report(min_instances=min_instances)
    opts = {"examples": examples, "mutants": mutants, "min_instances": min_instances}
    # One entry per outcome, in input order: a settled Outcome, or (name, part, job key).
    entries: list[Any] = []
    tool_of: list[int] = []  # the tool index of each entry
    tests: dict[tuple, tuple] = {}  # job key -> (a, b), insertion (input) order

    def add(tool: int, name: str, part: str, x: Any, y: Any) -> None:
        a, b = envelope.to_plain(x), envelope.to_plain(y)
        tool_of.append(tool)
        why = proof(a, b)
        if why is not None:
            entries.append(Outcome(name, part, PROVEN, why))
            return
        key = (_key(a), _key(b))
        tests.setdefault(key, (a, b))
        entries.append((name, part, key))

    def settled(tool: int, name: str, part: str, status: str, detail: str) -> None:
        tool_of.append(tool)
        entries.append(Outcome(name, part, status, detail))

    if envelope.is_bare_schema(original) and envelope.is_bare_schema(rewritten):
        add(0, "(schema)", "input", original, rewritten)
    else:
        ia, ib = _index(original), _index(rewritten)
        tool = -1
        for name in list(ia) + [n for n in ib if n not in ia]:
            la, lb = ia.get(name, []), ib.get(name, [])
            for k in range(max(len(la), len(lb))):
                tool += 1
                if k >= len(la) or k >= len(lb):
                    where = "rewritten" if k >= len(la) else "original"
                    settled(tool, name, "tool", DIFFERENT, f"only in the {where} catalog")
                    continue
                ta, tb = la[k], lb[k]
                sa, sb = dict(ta.schemas()), dict(tb.schemas())
                pairs = [("input", sa.get(ta.schema_key), sb.get(tb.schema_key))]
                if envelope.OUTPUT_DOOR in sa or envelope.OUTPUT_DOOR in sb:
                    pairs.append(("output", sa.get(envelope.OUTPUT_DOOR),
                                  sb.get(envelope.OUTPUT_DOOR)))
                for part, x, y in pairs:
                    if (x is None) != (y is None):
                        where = "original" if y is None else "rewritten"
                        settled(tool, name, part, DIFFERENT, f"schema only in the {where} catalog")
                    elif x is None:
                        settled(tool, name, part, PROVEN, "no schema on either side")
                    else:
                        add(tool, name, part, x, y)

    verdicts = _run_tests(tests, opts, jobs, entries, tool_of, progress)
    for e in entries:
        if isinstance(e, Outcome):
            report.outcomes.append(e)
            continue
        name, part, key = e
        v = verdicts[key]
        report.outcomes.append(Outcome(name, part, v.status, v.detail, v.counterexample,
                                       v.accepted_by, v.directions))
    return report


def _run_tests(tests: dict[tuple, tuple], opts: dict, jobs: int | None, entries: list,
               tool_of: list[int], progress) -> dict[tuple, Verdict]:
    """The verdict of every distinct pair to test, serially or over a pool; ``progress``
    hears ``(tools settled, tools)`` at the start and after each pair."""
    tools = (tool_of[-1] + 1) if tool_of else 0
    pending: dict[int, set] = {}
    for t, e in zip(tool_of, entries):
        pending.setdefault(t, set())
        if not isinstance(e, Outcome):
            pending[t].add(e[2])
    verdicts: dict[tuple, Verdict] = {}

    def report_progress() -> None:
        if progress is not None:
            progress(sum(1 for need in pending.values() if not need - verdicts.keys()), tools)

    report_progress()
    keys = list(tests)
    n = _jobs(jobs, len(keys))
    if n <= 1:
        for key in keys:
            a, b = tests[key]
            verdicts[key] = compare(a, b, **opts)
            report_progress()
        return verdicts
    # Largest first, so that the last job to finish is a small one; results keyed, not ordered.
    order = sorted(range(len(keys)), key=lambda i: -len(keys[i][0]) - len(keys[i][1]))
    with _pool_context().Pool(n) as pool:
        results = pool.imap_unordered(
            _indexed_job, [(i, tests[keys[i]][0], tests[keys[i]][1], opts) for i in order])
        for i, verdict in results:
            verdicts[keys[i]] = verdict
            report_progress()
    return verdicts


def _indexed_job(job: tuple) -> tuple[int, Verdict]:
    i, a, b, opts = job
    return i, compare(a, b, **opts)


def outcome_line(o: Outcome) -> str:
    """One line per schema naming its evidence: proven / tested with k instances /
    inconclusive: why / DIFFERENT: why."""
    head = f"{o.name} ({o.part})"
    if o.status == DIFFERENT:
        if o.accepted_by:
            other = SIDES[1] if o.accepted_by == SIDES[0] else SIDES[0]
            return (f"DIFFERENT {head}: {_short(o.counterexample)} is accepted by the "
                    f"{o.accepted_by} and rejected by the {other}")
        return f"DIFFERENT {head}: {o.detail}"
    if o.status == TESTED:
        return f"tested {head}: {o.detail}"
    if o.status == PROVEN:
        return f"proven {head}: {o.detail}" if o.detail else f"proven {head}"
    return f"inconclusive {head}: {o.detail}"


def summary(report: Report) -> str:
    verdict = {
        "same": "same: every schema proven or tested",
        "different": "DIFFERENT: at least one difference found",
        "inconclusive": "inconclusive: no difference found, but not every schema has evidence",
    }[report.verdict]
    return (f"{len(report.outcomes)} schemas: {report.count(PROVEN)} proven, "
            f"{report.count(TESTED)} tested, {report.count(INCONCLUSIVE)} inconclusive, "
            f"{report.count(DIFFERENT)} different - {verdict}")


def format_report(report: Report) -> str:
    """Differences first, then inconclusive, tested and proven schemas, then the summary."""
    order = {DIFFERENT: 0, INCONCLUSIVE: 1, TESTED: 2, PROVEN: 3}
    lines = [outcome_line(o) for o in sorted(report.outcomes, key=lambda o: order[o.status])]
    lines.append(summary(report))
    return "\n".join(lines) + "\n"


def report_json(report: Report) -> dict:
    return {
        "verdict": report.verdict,
        "same": report.verdict == "same",
        "exit_code": report.exit_code,
        "min_instances": report.min_instances,
        "schemas": [
            {"tool": o.name, "part": o.part, "status": o.status,
             **({"counterexample": o.counterexample, "accepted_by": o.accepted_by}
                if o.status == DIFFERENT and o.accepted_by else {}),
             **({"detail": o.detail} if o.detail else {}),
             **({"evidence": [d.as_json() for d in o.directions]} if o.directions else {})}
            for o in report.outcomes
        ],
    }
