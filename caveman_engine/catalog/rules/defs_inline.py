"""defs_inline: inline a definition referenced exactly once, then remove it.

The ``{"$ref": "#/$defs/D", ...}`` object becomes D's keywords at the position of ``$ref``.
Conditions: every reference in the document is a plain local pointer and there are no
identifiers (so moving D's body moves references that still resolve from the root); D is an
object and not recursive (no chain of references from D leads back to D); the referring
object's other keywords are annotations only (in drafts up to 7 validation siblings of
``$ref`` are ignored, in later drafts they apply: either way, only annotations can be merged
without changing meaning), and they win over D's annotations of the same name. References to
the document root (``#``) are left alone.
"""

from __future__ import annotations

from .. import schema as js
from ._merge import splice
from ._refs import containers, ref_sites, target

NAME = "defs_inline"
SUMMARY = "Inline $defs used exactly once (never recursive ones), rewriting the $ref"

_ROOT_SIBLINGS = frozenset(("$defs", "definitions", "$schema"))


def _recursive(start, inside) -> bool:
    seen = set()
    todo = [t for t in (target(s) for s in inside.get(start, ())) if t is not None]
    while todo:
        t = todo.pop()
        if t == start:
            return True
        if t in seen:
            continue
        seen.add(t)
        todo.extend(x for x in (target(s) for s in inside.get(t, ())) if x is not None)
    return False


def apply(root, ctx):
    if not isinstance(root, dict) or not ctx.analysis.structural_ok:
        return root
    defs = containers(root)
    if not defs:
        return root
    body, inside = ref_sites(root)
    sites: dict[tuple[str, str], list[dict]] = {}
    for s in body + [s for lst in inside.values() for s in lst]:
        t = target(s)
        if t is not None:
            sites.setdefault(t, []).append(s)
    done: list[tuple[str, str]] = []
    for t, lst in sites.items():
        if len(lst) != 1 or t not in inside:
            continue
        c, name = t
        d = defs[c].get(name)
        if not isinstance(d, dict) or _recursive(t, inside):
            continue
        site = lst[0]
        siblings = [k for k in site if k != "$ref"]
        allowed = js.ANNOTATIONS | (_ROOT_SIBLINGS if site is root else frozenset())
        if any(k not in allowed for k in siblings):
            continue
        if site is root and not _ROOT_SIBLINGS.isdisjoint(d):
            continue
        if site is d or _inside(d, site):
            continue
        items = [(k, v) for k, v in d.items() if k not in site]
        splice(site, "$ref", items)
        done.append(t)
    for c, name in done:
        m = defs[c]
        m.pop(name, None)
        if not m and root.get(c) is m:
            del root[c]
    return root


def _inside(d: dict, site: dict) -> bool:
    return any(n is site for n in js.nodes(d))
