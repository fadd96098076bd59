"""anyof_null: ``anyOf: [{X}, {"type": "null"}]`` -> ``"type": [X, "null"]`` (and more
generally any ``anyOf``/``oneOf`` whose branches have disjoint types) when that is equivalent.

Every branch must declare ``type``, no two branches may share an instance type (``integer``
and ``number`` overlap), and every other keyword of a branch must constrain only instances of
that branch's own types (``minLength`` only strings, ``items`` only arrays, …), so that after
merging it still ignores the other branches' instances. Then the union of the branches is the
merged object: ``{"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}]}`` becomes
``{"type": ["string", "null"], "format": "date"}``. With disjoint types, ``oneOf`` is the same
as ``anyOf``. One extra shape: a branch with ``enum`` next to a bare ``{"type": "null"}``
branch merges with ``null`` added to the enum.

Not merged: branches with ``$ref``, ``const``, nested combinators or unknown keywords, a
keyword present in two places, a holder that already has ``type`` or ``$ref``, keyword groups
split between holder and branch, schemas using ``unevaluated*`` or non-local references (a
pointer into the ``anyOf`` would dangle). Branch annotations move up when the holder has none;
the holder's own annotations win (a branch's is dropped); two branches' descriptions, or a
``default`` inside a branch (it would become the parameter's default), block the merge.
"""

from __future__ import annotations

from .. import schema as js
from ._merge import groups_split, splice

NAME = "anyof_null"
SUMMARY = "Rewrite anyOf/oneOf of type-disjoint branches (anyOf [X, null]) as a type array"

_HOLDER_BLOCK = frozenset(("type", "$ref", "$dynamicRef", "$recursiveRef", "unevaluatedProperties",
                           "unevaluatedItems"))


def _merge(node: dict, keyword, name):
    for key in ("anyOf", "oneOf"):
        if key in node:
            merged = _try(node, key)
            if merged is not None:
                return merged
    return node


def _is_annotation(k: str) -> bool:
    return k in js.ANNOTATIONS or k.startswith("x-")


def _try(node: dict, key: str):
    branches = node[key]
    if not isinstance(branches, list) or len(branches) < 2:
        return None
    if not _HOLDER_BLOCK.isdisjoint(node):
        return None
    types: list[list[str]] = []
    for b in branches:
        if not isinstance(b, dict) or "type" not in b:
            return None
        t = js.type_set(b["type"])
        if t is None:
            return None
        for seen in types:
            if js.overlap(t, seen):
                return None
        types.append(t)
    null_pair = (
        len(branches) == 2
        and any(b == {"type": "null"} for b in branches)
    )
    outer_keys = [k for k in node if k != key]
    moved: list[tuple[str, object]] = []
    seen_keys: set[str] = set()
    annotations: dict[str, object] = {}
    all_types: list[str] = []
    enum_value = None
    for i, b in enumerate(branches):
        own = types[i]
        others = [t for j, ts in enumerate(types) if j != i for t in ts]
        all_types.extend(own)
        for k, v in b.items():
            if k == "type":
                continue
            if k == "default":
                return None  # a branch's default would become the parameter's default
            if _is_annotation(k):
                if k in node:
                    continue  # the holder's annotation wins
                if k in annotations:
                    if k == "description":
                        return None  # two branch descriptions: keep both where they are
                    continue
                annotations[k] = v
                moved.append((k, v))
                continue
            if k == "enum":
                if not null_pair or "null" in own or not isinstance(v, list):
                    return None
                enum_value = list(v) if None in v else list(v) + [None]
                v = enum_value
            else:
                applies = js.APPLIES_TO.get(k)
                if applies is None or js.overlap(applies, others):
                    return None
            if k in node or k in seen_keys:
                return None
            seen_keys.add(k)
            moved.append((k, v))
    if groups_split(outer_keys, seen_keys):
        return None
    return splice(node, key, [("type", all_types)] + moved)


def apply(root, ctx):
    if not ctx.analysis.structural_ok:
        return root
    return js.transform(root, _merge)
