"""Merging keywords of one subschema into another object (shared by allof_single and
anyof_null; not a rule)."""

from __future__ import annotations

from .. import schema as js


def groups_split(outer_keys, inner_keys) -> bool:
    """Whether some group of keywords that read each other (properties /
    additionalProperties, items / additionalItems, if / then / else, contains / minContains)
    would end up with members from both sides: merging would change what they mean."""
    outer = set(outer_keys)
    inner = set(inner_keys)
    return any(outer & g and inner & g for g in js.GROUPS)


def splice(node: dict, key: str, items: list[tuple[str, object]]) -> dict:
    """``node`` with member ``key`` replaced, at its position, by ``items`` (in place)."""
    new: list[tuple[str, object]] = []
    for k, v in node.items():
        if k == key:
            new.extend(items)
        else:
            new.append((k, v))
    node.clear()
    node.update(new)
    return node
