"""allof_single: merge ``allOf: [S]`` (one branch) into the object that holds it.

``{"allOf": [S], ...rest}`` accepts exactly what ``S ∪ rest`` accepts when the two share no
keyword (annotations excepted: the outer one is kept), no group of keywords that read each
other is split between them (``properties``/``additionalProperties``, ``items``/
``additionalItems``, ``if``/``then``/``else``, ``contains``/``minContains``), and neither side
uses ``$ref`` (in drafts up to 7 its siblings are ignored), identifiers or ``unevaluated*``.
``allOf: [true]`` and ``allOf: [{}]`` are simply dropped.
"""

from __future__ import annotations

from .. import schema as js
from ._merge import groups_split, splice

NAME = "allof_single"
# Locations and the dialect do not read their sibling keywords; everything else in
# RESOLUTION does (or changes how references resolve).
_OUTER_BLOCK = js.RESOLUTION - {"$schema", "$defs", "definitions"}
SUMMARY = "Merge a single-branch allOf into its parent when validation stays identical"


def _merge(node: dict, keyword, name):
    branches = node.get("allOf")
    if not isinstance(branches, list) or len(branches) != 1:
        return node
    s = branches[0]
    if s is True or s == {}:
        return splice(node, "allOf", [])
    if not isinstance(s, dict):
        return node
    outer = [k for k in node if k != "allOf"]
    if not js.RESOLUTION.isdisjoint(s) or not _OUTER_BLOCK.isdisjoint(outer):
        return node
    moved = []
    for k, v in s.items():
        if k in node:
            if k in js.ANNOTATIONS:
                continue  # the outer annotation wins; validation does not read either
            return node
        moved.append((k, v))
    if groups_split(outer, [k for k, _ in moved]):
        return node
    return splice(node, "allOf", moved)


def apply(root, ctx):
    if not ctx.analysis.structural_ok:
        return root
    return js.transform(root, _merge)
