"""JSON Schema vocabulary shared by the safe rules and the verifier.

Where subschemas sit, which keywords are annotations, which only constrain one instance type,
which drafts a ``$schema`` URI names, and a per-schema analysis (draft, whether every ``$ref``
is a plain ``#/$defs/NAME`` pointer, whether ``unevaluated*`` occurs) that the structural rules
consult before moving anything.

Walks recurse over subschemas; callers decline documents deeper than
:data:`.envelope.MAX_DEPTH` first, so the recursion limit is never reached.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator
from urllib.parse import unquote

from .. import jsonio

# Keywords whose value is one subschema (``items`` may also be an array of them).
SINGLE = frozenset(
    (
        "additionalProperties",
        "additionalItems",
        "unevaluatedProperties",
        "unevaluatedItems",
        "contains",
        "propertyNames",
        "not",
        "if",
        "then",
        "else",
        "contentSchema",
        "items",
    )
)
# Keywords whose value is an array of subschemas.
LISTS = frozenset(("allOf", "anyOf", "oneOf", "prefixItems", "items"))
# Keywords whose value maps user-chosen names to subschemas.
MAPS = frozenset(
    ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")
)

# Annotations: no effect on which instances validate, in any draft.
ANNOTATIONS = frozenset(
    (
        "title",
        "description",
        "default",
        "examples",
        "example",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
    )
)

STRING_KW = frozenset(("minLength", "maxLength", "pattern", "contentEncoding", "contentMediaType",
                       "contentSchema"))
NUMBER_KW = frozenset(("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"))
ARRAY_KW = frozenset(("items", "prefixItems", "additionalItems", "minItems", "maxItems",
                      "uniqueItems", "contains", "minContains", "maxContains"))
OBJECT_KW = frozenset(("properties", "required", "additionalProperties", "patternProperties",
                       "propertyNames", "minProperties", "maxProperties", "dependentRequired",
                       "dependentSchemas", "dependencies"))

# Instance types a type-specific keyword constrains; every other instance passes it. ``format``
# is taken as possibly numeric (OpenAPI's int32 & co.).
APPLIES_TO: dict[str, frozenset[str]] = {}
for _k in STRING_KW:
    APPLIES_TO[_k] = frozenset(("string",))
for _k in NUMBER_KW:
    APPLIES_TO[_k] = frozenset(("number", "integer"))
for _k in ARRAY_KW:
    APPLIES_TO[_k] = frozenset(("array",))
for _k in OBJECT_KW:
    APPLIES_TO[_k] = frozenset(("object",))
APPLIES_TO["format"] = frozenset(("string", "number", "integer"))

TYPES = frozenset(("null", "boolean", "object", "array", "number", "integer", "string"))

# Keywords that read sibling keywords of the same object: moving one without the others
# changes meaning.
GROUPS = (
    frozenset(("properties", "patternProperties", "additionalProperties")),
    frozenset(("items", "prefixItems", "additionalItems")),
    frozenset(("contains", "minContains", "maxContains")),
    frozenset(("if", "then", "else")),
)
# Keywords that change how references resolve or what "evaluated" means.
RESOLUTION = frozenset(
    (
        "$ref",
        "$dynamicRef",
        "$recursiveRef",
        "$id",
        "id",
        "$anchor",
        "$dynamicAnchor",
        "$recursiveAnchor",
        "$schema",
        "$defs",
        "definitions",
        "$vocabulary",
        "unevaluatedProperties",
        "unevaluatedItems",
    )
)

# --------------------------------------------------------------------------- drafts

DRAFTS = {
    "json-schema.org/draft-04/schema": "4",
    "json-schema.org/draft-06/schema": "6",
    "json-schema.org/draft-07/schema": "7",
    "json-schema.org/draft/2019-09/schema": "2019-09",
    "json-schema.org/draft/2020-12/schema": "2020-12",
}
DEFAULT_DRAFT = "2020-12"
_URI = re.compile(r"^https?://(json-schema\.org/[A-Za-z0-9/._-]+?)#?$")


def draft_of_uri(uri: Any) -> str | None:
    """``"7"``, ``"2020-12"``… for a known meta-schema URI, else None."""
    if not isinstance(uri, str):
        return None
    m = _URI.match(uri)
    return DRAFTS.get(m.group(1)) if m else None


def draft_of(root: Any) -> str | None:
    """The draft a schema root declares: a known draft, ``DEFAULT_DRAFT`` when it declares
    none, None when ``$schema`` is present but unknown."""
    if not isinstance(root, dict) or "$schema" not in root:
        return DEFAULT_DRAFT
    return draft_of_uri(root["$schema"])


# --------------------------------------------------------------------------- walking


def children(node: dict) -> Iterator[tuple[str, Any, Any]]:
    """``(keyword, name_or_index_or_None, subschema)`` for every direct subschema of ``node``."""
    for k, v in node.items():
        if k in MAPS:
            if isinstance(v, dict):
                for name, s in v.items():
                    if isinstance(s, (dict, bool)):
                        yield k, name, s
        elif k in LISTS and isinstance(v, list):
            for i, s in enumerate(v):
                if isinstance(s, (dict, bool)):
                    yield k, i, s
        elif k in SINGLE and isinstance(v, (dict, bool)):
            yield k, None, v


def nodes(root: Any) -> Iterator[dict]:
    """Every schema object under ``root`` (root included), pre-order, iterative."""
    stack = [root]
    while stack:
        n = stack.pop()
        if isinstance(n, dict):
            yield n
            stack.extend(c for _, _, c in children(n) if isinstance(c, dict))


def transform(root: Any, fn: Callable[[dict, str | None, Any], Any]) -> Any:
    """Post-order rewrite: ``fn(node, keyword, name)`` gets each schema object after its
    subschemas were rewritten and returns the (possibly new) node. ``keyword`` is the parent
    keyword (None at the root), ``name`` the property/definition name or array index."""

    def rec(node: Any, keyword: str | None, name: Any) -> Any:
        if not isinstance(node, dict):
            return node
        for k, key, child in list(children(node)):
            if not isinstance(child, dict):
                continue
            new = rec(child, k, key)
            if new is not child:
                if key is None:
                    node[k] = new
                else:
                    node[k][key] = new
        return fn(node, keyword, name)

    return rec(root, None, None)


# --------------------------------------------------------------------------- references


def _unescape_pointer_token(tok: str) -> str:
    return tok.replace("~1", "/").replace("~0", "~")


def parse_ref(ref: Any) -> tuple[str, str] | str | None:
    """``("$defs", name)`` / ``("definitions", name)`` for ``#/$defs/name``, ``"#"`` for the
    root, None for anything else (remote refs, deeper pointers, anchors)."""
    if not isinstance(ref, str):
        return None
    if ref == "#":
        return "#"
    for container in ("$defs", "definitions"):
        prefix = "#/" + container + "/"
        if ref.startswith(prefix):
            rest = unquote(ref[len(prefix):])
            if not rest or "/" in rest:
                return None
            return container, _unescape_pointer_token(rest)
    return None


@dataclass
class Analysis:
    """What the structural rules need to know about one schema document."""

    draft: str | None  # declared draft ("2020-12" when none declared), None if unknown URI
    simple_refs: bool  # every $ref is "#" or "#/$defs|definitions/NAME" resolving at the root
    unevaluated: bool  # unevaluatedProperties/Items occur somewhere
    dynamic: bool  # $id/$anchor/$dynamicRef/$recursiveRef… occur somewhere

    @property
    def structural_ok(self) -> bool:
        """Moving subschemas around keeps every reference and evaluation meaning."""
        return self.draft is not None and self.simple_refs and not self.unevaluated and not self.dynamic


_DYNAMIC = frozenset(
    ("$dynamicRef", "$recursiveRef", "$id", "$anchor", "$dynamicAnchor", "$recursiveAnchor",
     "$vocabulary")
)


def analyze(root: Any) -> Analysis:
    simple = True
    unevaluated = False
    dynamic = False
    defs = {}
    if isinstance(root, dict):
        for c in ("$defs", "definitions"):
            if isinstance(root.get(c), dict):
                defs[c] = root[c]
    for n in nodes(root):
        if "unevaluatedProperties" in n or "unevaluatedItems" in n:
            unevaluated = True
        if not dynamic and not _DYNAMIC.isdisjoint(n):
            dynamic = True
        if n is not root and "id" in n and isinstance(n.get("id"), str):
            dynamic = True
        if "$ref" in n:
            r = parse_ref(n["$ref"])
            if r is None:
                simple = False
            elif r != "#":
                container, name = r
                if container not in defs or name not in defs[container]:
                    simple = False
    if isinstance(root, dict) and isinstance(root.get("id"), str):
        dynamic = True
    return Analysis(draft_of(root), simple, unevaluated, dynamic)


def is_number(v: Any, literal: str | None = None) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, jsonio.Number):
        return literal is None or v.literal == literal
    if isinstance(v, (int, float)):
        return literal is None or str(v) == literal
    return False


def type_set(value: Any) -> list[str] | None:
    """The types a ``type`` keyword names, in order, or None when it is malformed."""
    types = [value] if isinstance(value, str) else value
    if not isinstance(types, list) or not types:
        return None
    if not all(isinstance(t, str) and t in TYPES for t in types) or len(set(types)) != len(types):
        return None
    return types


def overlap(a: list[str] | frozenset[str], b: list[str] | frozenset[str]) -> bool:
    """Whether some instance has a type in ``a`` and one in ``b`` (integers are numbers)."""
    for x in a:
        for y in b:
            if x == y or {x, y} == {"integer", "number"}:
                return True
    return False
