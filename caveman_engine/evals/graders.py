"""Offline graders for ``evals run``: each checks one property of a fixture's output.

``grade(spec, ctx)`` returns ``None`` when the grader passes, else a one-line failure message
(``<type>: <why>``; an unknown type is ``unknown grader type: <type>``). A grader with bad or
missing parameters is a failure of its fixture, not an error of the run. The exact semantics of
each type are documented in docs/evals.md.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable

from .. import jsonio


@dataclass
class Context:
    input: bytes
    output: bytes
    result: Any  # engine.Result
    fixture: Any  # run.Fixture


class ConfigError(Exception):
    """The grader's parameters are wrong (reported as a failure of the fixture)."""


GRADERS: dict[str, Callable[[dict, Context], str | None]] = {}


def grader(name: str):
    def register(fn):
        GRADERS[name] = fn
        return fn

    return register


def grade(spec: Any, ctx: Context) -> str | None:
    if isinstance(spec, str):  # shorthand: `- compressed` is `- {type: compressed}`
        spec = {"type": spec}
    if not isinstance(spec, dict):
        return f"grader must be a mapping with a type, got {_short(spec)}"
    kind = spec.get("type")
    fn = GRADERS.get(kind) if isinstance(kind, str) else None
    if fn is None:
        return f"unknown grader type: {'' if kind is None else kind}"
    try:
        msg = fn(spec, ctx)
    except ConfigError as exc:
        return f"{kind}: {exc}"
    return None if msg is None else f"{kind}: {msg}"


# --------------------------------------------------------------------------- helpers


def _short(v: Any, limit: int = 60) -> str:
    s = repr(v) if not isinstance(v, str) else v
    s = " ".join(s.split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _number(spec: dict, key: str, required: bool) -> float | None:
    v = spec.get(key)
    if v is None:
        if required:
            raise ConfigError(f"{key} is required")
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v):
        raise ConfigError(f"{key} must be a number")
    return float(v)


def _strings(spec: dict, one: str, many: str) -> list[str]:
    """``one: "x"`` and/or ``many: ["x", "y"]``, at least one string in all."""
    out: list[str] = []
    if one in spec:
        if not isinstance(spec[one], str):
            raise ConfigError(f"{one} must be a string")
        out.append(spec[one])
    if many in spec:
        v = spec[many]
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise ConfigError(f"{many} must be a list of strings")
        out.extend(v)
    if not out:
        raise ConfigError(f"needs {one} or {many}")
    return out


def canonical_json(data: bytes) -> bytes | None:
    """Compact, key-sorted JSON of ``data`` (numbers verbatim), or None if not JSON."""
    try:
        return jsonio.dumps(jsonio.loads(data))
    except (jsonio.JSONError, ValueError, TypeError):
        return None


def toon_json(data: bytes) -> bytes | None:
    """The JSON that TOON ``data`` decodes to (canonical form), or None if not TOON."""
    from ..compressors import toon

    try:
        return toon.decode(data)
    except (ValueError, RecursionError):
        return None


def json_or_toon(data: bytes) -> tuple[Any, str] | None:
    """``data`` parsed as JSON, else as TOON: (value with plain numbers, "json"|"toon")."""
    for kind, canon in (("json", canonical_json), ("toon", toon_json)):
        c = canon(data)
        if c is not None:
            return plain(jsonio.loads(c)), kind
    return None


def plain(v: Any) -> Any:
    """jsonio values with :class:`jsonio.Number` turned into int or float."""
    if isinstance(v, jsonio.Number):
        lit = v.literal
        if re.fullmatch(r"-?\d+", lit):
            return int(lit)
        return float(lit)
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    return v


# --------------------------------------------------------------------------- graders


@grader("exact_match")
def _exact_match(spec: dict, ctx: Context) -> str | None:
    if "_expected_file" in spec:
        expected = spec["_expected_file"]
    elif isinstance(spec.get("expected"), str):
        expected = spec["expected"].encode()
    elif "expected" in spec:
        raise ConfigError("expected must be a string")
    else:
        raise ConfigError("needs expected or expected_file")
    if ctx.output == expected:
        return None
    at = next((i for i, (a, b) in enumerate(zip(ctx.output, expected)) if a != b),
              min(len(ctx.output), len(expected)))
    return (f"output differs from expected at byte {at} "
            f"(output {len(ctx.output)} bytes, expected {len(expected)})")


@grader("ratio_threshold")
def _ratio_threshold(spec: dict, ctx: Context) -> str | None:
    from .run import eval_ratio

    lo = _number(spec, "min", required=True)
    hi = _number(spec, "max", required=False)
    r = eval_ratio(ctx.result.tokens_before, ctx.result.tokens_after)
    if r < lo:
        return f"ratio {r:.4f} below min {lo:g}"
    if hi is not None and hi > 0 and r > hi:
        return f"ratio {r:.4f} above max {hi:g}"
    return None


@grader("valid_json")
def _valid_json(spec: dict, ctx: Context) -> str | None:
    return None if jsonio.valid(ctx.output) else "output is not valid JSON"


@grader("json_or_toon_round_trip")
def _json_or_toon_round_trip(spec: dict, ctx: Context) -> str | None:
    want = canonical_json(ctx.input)
    if want is None:
        raise ConfigError("input is not JSON")
    got = canonical_json(ctx.output)
    kind = "JSON"
    if got is None:
        got, kind = toon_json(ctx.output), "TOON"
    if got is None:
        return "output is neither JSON nor TOON"
    return None if got == want else f"output {kind} does not decode to the input's data"


@grader("toon_round_trip")
def _toon_round_trip(spec: dict, ctx: Context) -> str | None:
    want = canonical_json(ctx.input)
    if want is None:
        raise ConfigError("input is not JSON")
    got = toon_json(ctx.output)
    if got is None:
        return "output is not valid TOON"
    return None if got == want else "output TOON does not decode to the input's data"


@grader("json_schema")
def _json_schema(spec: dict, ctx: Context) -> str | None:
    if "_schema_file" in spec:
        import yaml

        try:
            schema = yaml.safe_load(spec["_schema_file"])
        except yaml.YAMLError:
            raise ConfigError("schema_file is not JSON or YAML") from None
    elif "schema" in spec:
        schema = spec["schema"]
    else:
        raise ConfigError("needs schema or schema_file")
    if not isinstance(schema, (dict, bool)):
        raise ConfigError("schema must be an object or a boolean")
    c = canonical_json(ctx.output)
    if c is None:
        return "output is not valid JSON"
    errors = validate(plain(jsonio.loads(c)), schema)
    if not errors:
        return None
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"output does not match the schema: {errors[0]}{more}"


def tool_names(value: Any) -> list[str] | None:
    """Tool names of a catalog: a list of tools, ``{"tools": [...]}`` or a JSON-RPC
    ``{"result": {"tools": [...]}}``; a tool's name is ``name`` or ``function.name``."""
    if isinstance(value, dict):
        if isinstance(value.get("result"), dict) and "tools" in value["result"]:
            value = value["result"]["tools"]
        elif "tools" in value:
            value = value["tools"]
    if not isinstance(value, list):
        return None
    names = []
    for t in value:
        if not isinstance(t, dict):
            return None
        name = t.get("name")
        if name is None and isinstance(t.get("function"), dict):
            name = t["function"].get("name")
        if not isinstance(name, str):
            return None
        names.append(name)
    return names


@grader("tool_sequence")
def _tool_sequence(spec: dict, ctx: Context) -> str | None:
    expected = spec.get("expected", spec.get("tools"))
    if expected is None:
        parsed = json_or_toon(ctx.input)
        expected = tool_names(parsed[0]) if parsed else None
        if expected is None:
            raise ConfigError("needs expected (the input is not a tool catalog)")
    elif not isinstance(expected, list) or not all(isinstance(x, str) for x in expected):
        raise ConfigError("expected must be a list of tool names")
    parsed = json_or_toon(ctx.output)
    got = tool_names(parsed[0]) if parsed else None
    if got is None:
        return "output is not a tool catalog"
    if got == expected:
        return None
    missing = [n for n in expected if n not in got]
    extra = [n for n in got if n not in expected]
    if missing or extra:
        parts = []
        if missing:
            parts.append("missing " + ", ".join(missing[:5]))
        if extra:
            parts.append("unexpected " + ", ".join(extra[:5]))
        return "; ".join(parts)
    return "tools out of order: " + ", ".join(got[:10])


@grader("contains")
def _contains(spec: dict, ctx: Context) -> str | None:
    missing = [v for v in _strings(spec, "value", "values") if v.encode() not in ctx.output]
    if not missing:
        return None
    return "output lacks " + ", ".join(jsonio_quote(v) for v in missing[:5])


@grader("not_contains")
def _not_contains(spec: dict, ctx: Context) -> str | None:
    found = [v for v in _strings(spec, "value", "values") if v.encode() in ctx.output]
    if not found:
        return None
    return "output contains " + ", ".join(jsonio_quote(v) for v in found[:5])


@grader("byte_identical")
def _byte_identical(spec: dict, ctx: Context) -> str | None:
    return None if ctx.output == ctx.input else "output differs from the input"


@grader("compressed")
def _compressed(spec: dict, ctx: Context) -> str | None:
    r = ctx.result
    if r.recovery_handle is not None and r.tokens_after < r.tokens_before:
        return None
    return "output was not compressed (the input passed through)"


def all_keys(value: Any, into: set[str] | None = None) -> set[str]:
    keys = set() if into is None else into
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            keys.update(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return keys


@grader("recall_keys")
def _recall_keys(spec: dict, ctx: Context) -> str | None:
    keys = spec.get("keys")
    if keys is None:
        parsed = json_or_toon(ctx.input)
        if parsed is None:
            raise ConfigError("needs keys (the input is not JSON)")
        keys = sorted(all_keys(parsed[0]))
    elif not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise ConfigError("keys must be a list of strings")
    lo = _number(spec, "min", required=False)
    lo = 1.0 if lo is None else lo
    if not keys:
        return None
    parsed = json_or_toon(ctx.output)
    if parsed is not None:
        present = all_keys(parsed[0])
        missing = [k for k in keys if k not in present]
    else:  # not JSON or TOON (an outline, prose): the key's text must appear
        missing = [k for k in keys if k.encode() not in ctx.output]
    recall = (len(keys) - len(missing)) / len(keys)
    if recall >= lo:
        return None
    return (f"recall {recall:.4f} below min {lo:g} "
            f"(missing {', '.join(missing[:8])}{', …' if len(missing) > 8 else ''})")


def jsonio_quote(s: str) -> str:
    from .run import go_quote

    return go_quote(s)


# --------------------------------------------------------------------------- JSON Schema


def validate(instance: Any, schema: Any) -> list[str]:
    """Errors of ``instance`` against ``schema`` (the common keywords of JSON Schema draft 4
    to 2020-12; unknown keywords and ``format`` are ignored; ``$ref`` to the same document)."""
    errors: list[str] = []
    _check(instance, schema, schema, "", errors, 0)
    return errors


_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool))
    or (isinstance(v, float) and v.is_integer()),
}


def _eq(a: Any, b: Any) -> bool:
    """JSON equality: 1 == 1.0, but true != 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_eq(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_eq(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _resolve_ref(root: Any, ref: str) -> Any:
    if not ref.startswith("#"):
        raise ConfigError(f"only same-document $ref is supported: {ref}")
    node = root
    for part in [p for p in ref[1:].split("/") if p]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise ConfigError(f"unresolvable $ref: {ref}")
    return node


def _check(v: Any, s: Any, root: Any, path: str, errors: list[str], depth: int) -> None:
    if depth > 200:
        raise ConfigError("schema nests too deeply (recursive $ref?)")
    at = path or "/"
    if s is True or s == {}:
        return
    if s is False:
        errors.append(f"{at}: no value is allowed here")
        return
    if not isinstance(s, dict):
        raise ConfigError(f"schema at {at} is not an object")
    if "$ref" in s:
        _check(v, _resolve_ref(root, s["$ref"]), root, path, errors, depth + 1)
    t = s.get("type")
    if t is not None:
        types = t if isinstance(t, list) else [t]
        if not any(_TYPES.get(x, lambda _: False)(v) for x in types):
            errors.append(f"{at}: expected {' or '.join(map(str, types))}")
            return
    if "enum" in s and not any(_eq(v, e) for e in s["enum"]):
        errors.append(f"{at}: not one of the enum values")
    if "const" in s and not _eq(v, s["const"]):
        errors.append(f"{at}: not the const value")
    for sub in s.get("allOf", []):
        _check(v, sub, root, path, errors, depth + 1)
    if "anyOf" in s and not any(not _sub_errors(v, x, root, path, depth) for x in s["anyOf"]):
        errors.append(f"{at}: matches none of anyOf")
    if "oneOf" in s:
        n = sum(1 for x in s["oneOf"] if not _sub_errors(v, x, root, path, depth))
        if n != 1:
            errors.append(f"{at}: matches {n} of oneOf, not exactly one")
    if "not" in s and not _sub_errors(v, s["not"], root, path, depth):
        errors.append(f"{at}: matches the not schema")
    if "if" in s:
        branch = "then" if not _sub_errors(v, s["if"], root, path, depth) else "else"
        if branch in s:
            _check(v, s[branch], root, path, errors, depth + 1)
    if isinstance(v, dict):
        _check_object(v, s, root, path, errors, depth)
    elif isinstance(v, list):
        _check_array(v, s, root, path, errors, depth)
    elif isinstance(v, str):
        n = len(v)
        if "minLength" in s and n < s["minLength"]:
            errors.append(f"{at}: shorter than {s['minLength']}")
        if "maxLength" in s and n > s["maxLength"]:
            errors.append(f"{at}: longer than {s['maxLength']}")
        if "pattern" in s and not _search(s["pattern"], v):
            errors.append(f"{at}: does not match pattern {s['pattern']}")
    elif _TYPES["number"](v):
        _check_number(v, s, at, errors)


def _search(pattern: Any, s: str) -> bool:
    try:
        return re.search(pattern, s) is not None
    except (re.error, TypeError):
        raise ConfigError(f"bad pattern in schema: {_short(pattern)}") from None


def _sub_errors(v, s, root, path, depth) -> list[str]:
    sub: list[str] = []
    _check(v, s, root, path, sub, depth + 1)
    return sub


def _check_number(v: float, s: dict, at: str, errors: list[str]) -> None:
    lo, hi = s.get("minimum"), s.get("maximum")
    xlo, xhi = s.get("exclusiveMinimum"), s.get("exclusiveMaximum")
    if xlo is True:  # draft 4: a flag on minimum
        xlo, lo = lo, None
    if xhi is True:
        xhi, hi = hi, None
    if isinstance(lo, (int, float)) and not isinstance(lo, bool) and v < lo:
        errors.append(f"{at}: less than minimum {lo}")
    if isinstance(hi, (int, float)) and not isinstance(hi, bool) and v > hi:
        errors.append(f"{at}: greater than maximum {hi}")
    if isinstance(xlo, (int, float)) and not isinstance(xlo, bool) and v <= xlo:
        errors.append(f"{at}: not greater than {xlo}")
    if isinstance(xhi, (int, float)) and not isinstance(xhi, bool) and v >= xhi:
        errors.append(f"{at}: not less than {xhi}")
    m = s.get("multipleOf")
    if isinstance(m, (int, float)) and not isinstance(m, bool) and m > 0:
        q = v / m
        if not math.isclose(q, round(q), rel_tol=0, abs_tol=1e-9):
            errors.append(f"{at}: not a multiple of {m}")


def _check_object(v: dict, s: dict, root, path: str, errors: list[str], depth: int) -> None:
    at = path or "/"
    for k in s.get("required", []):
        if k not in v:
            errors.append(f"{at}: missing required property {k}")
    if "minProperties" in s and len(v) < s["minProperties"]:
        errors.append(f"{at}: fewer than {s['minProperties']} properties")
    if "maxProperties" in s and len(v) > s["maxProperties"]:
        errors.append(f"{at}: more than {s['maxProperties']} properties")
    for k, needed in (s.get("dependentRequired") or {}).items():
        if k in v:
            for d in needed:
                if d not in v:
                    errors.append(f"{at}: {k} requires {d}")
    props = s.get("properties") or {}
    patterns = s.get("patternProperties") or {}
    extra = s.get("additionalProperties", True)
    names = s.get("propertyNames")
    for k, x in v.items():
        sub = f"{path}/{k.replace('~', '~0').replace('/', '~1')}"
        if names is not None:
            _check(k, names, root, sub, errors, depth + 1)
        matched = False
        if k in props:
            matched = True
            _check(x, props[k], root, sub, errors, depth + 1)
        for pat, ps in patterns.items():
            if _search(pat, k):
                matched = True
                _check(x, ps, root, sub, errors, depth + 1)
        if not matched:
            if extra is False:
                errors.append(f"{at}: unexpected property {k}")
            elif isinstance(extra, dict):
                _check(x, extra, root, sub, errors, depth + 1)


def _check_array(v: list, s: dict, root, path: str, errors: list[str], depth: int) -> None:
    at = path or "/"
    if "minItems" in s and len(v) < s["minItems"]:
        errors.append(f"{at}: fewer than {s['minItems']} items")
    if "maxItems" in s and len(v) > s["maxItems"]:
        errors.append(f"{at}: more than {s['maxItems']} items")
    if s.get("uniqueItems") is True:
        for i in range(len(v)):
            if any(_eq(v[i], v[j]) for j in range(i)):
                errors.append(f"{at}: items are not unique")
                break
    items = s.get("items")
    prefix = s.get("prefixItems")
    if isinstance(items, list):  # draft 4-7 tuple form
        prefix, items = items, s.get("additionalItems")
    start = 0
    if isinstance(prefix, list):
        for i, (x, ps) in enumerate(zip(v, prefix)):
            _check(x, ps, root, f"{path}/{i}", errors, depth + 1)
        start = len(prefix)
    if isinstance(items, (dict, bool)):
        for i in range(start, len(v)):
            _check(v[i], items, root, f"{path}/{i}", errors, depth + 1)
    if "contains" in s and not any(
        not _sub_errors(x, s["contains"], root, path, depth) for x in v
    ):
        errors.append(f"{at}: no item matches contains")
