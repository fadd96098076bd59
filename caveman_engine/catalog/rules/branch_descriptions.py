"""branch_descriptions: say a description once when ``anyOf``/``oneOf``/``allOf`` branches (or
array ``items``) repeat it (``toolschema-max``).

Schema generators copy a union's description into each of its branches, and often into the
branches of nested unions as well. Descriptions are annotations, so:

* when a schema has no description and every branch of one of its combinators (two or more)
  carries the same one, that description moves to the schema (once);
* a branch (or ``items``) description whose sentences all appear in the description of the
  schema above it — or of any schema above that through combinators and ``items`` — goes;
* any other subschema's description (a property, ``additionalProperties``…) goes when it is
  exactly the description of a schema it is nested in (a generator copied it down).
  Definitions (``$defs``/``definitions``) start afresh: they are read where they are referenced.

Descriptions are compared with runs of whitespace made single and a final period ignored.
Validation is unchanged; every sentence is still said once where it applies.
"""

from __future__ import annotations

from .. import schema as js

NAME = "branch_descriptions"
SUMMARY = "Drop descriptions that combinator branches or items repeat from the schema above them"

COMBINATORS = ("anyOf", "oneOf", "allOf")
DEFINITIONS = ("$defs", "definitions")


def _norm(text: str) -> str:
    return " ".join(text.split()).rstrip(".").strip()


def _sentences(text: str) -> frozenset[str]:
    from ..prose_guard import pieces

    return frozenset(_norm(p) for p in pieces(text)[::2] if _norm(p))


def _said(desc, inherited: tuple) -> bool:
    if not isinstance(desc, str) or not _norm(desc):
        return False
    mine = _sentences(desc)
    return any(mine <= above for above in inherited)


def _hoist(node: dict) -> None:
    if "description" in node:
        return
    for key in COMBINATORS:
        branches = node.get(key)
        if not isinstance(branches, list) or len(branches) < 2:
            continue
        if not all(isinstance(b, dict) and isinstance(b.get("description"), str) for b in branches):
            continue
        first = branches[0]["description"]
        if not _norm(first) or any(_norm(b["description"]) != _norm(first) for b in branches):
            continue
        node["description"] = first
        for b in branches:
            del b["description"]
        return


def apply(root, ctx):
    if not isinstance(root, dict):
        return root
    stack: list[tuple[dict, tuple, frozenset]] = [(root, (), frozenset())]
    while stack:
        node, inherited, ancestors = stack.pop()
        _hoist(node)
        d = node.get("description")
        described = isinstance(d, str) and bool(_norm(d))
        here = inherited + ((_sentences(d),) if described else ())
        above = ancestors | {_norm(d)} if described else ancestors
        for kw, _, child in js.children(node):
            if not isinstance(child, dict):
                continue
            cd = child.get("description")
            if kw in DEFINITIONS:  # read where it is referenced, not under its holder
                stack.append((child, (), frozenset()))
            elif kw in COMBINATORS or kw == "items":
                if _said(cd, here):
                    del child["description"]
                stack.append((child, here, above))
            else:
                if isinstance(cd, str) and _norm(cd) and _norm(cd) in above:
                    del child["description"]
                stack.append((child, (), above))
    return root
