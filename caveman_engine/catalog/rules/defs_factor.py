"""defs_factor: a subschema repeated inside one schema is written once, in the root's
definitions, and referenced where it stood (``toolschema-max`` only).

Two or more subschemas that are the same JSON (same keywords, same values, annotations
included) become ``{"$ref": "#/$defs/NAME"}``, and the first of them becomes the definition
``NAME``; a subschema equal to an existing definition is replaced by a reference to it. A
``{"$ref": …}`` object alone validates exactly what its target validates, in every draft, so the
accepted calls stay the same (``verify`` tests it). Done only when it saves o200k tokens: per
group, ``(k - 1)`` copies of the body against ``k`` references, the definition's key and, for a
first definition, the container; largest bodies first, until no group pays.

Conditions: every reference is a plain local pointer, no identifiers, anchors, dynamic references
or ``unevaluated*`` (:attr:`Analysis.structural_ok`), so a body moved under the root's
definitions keeps meaning the same; subschemas holding definitions of their own are left alone.
The container is the one the schema has, else ``definitions`` for drafts up to 7 and ``$defs``
after; the name is the property the first copy sits under, or sits in (``items`` of ``labels``
is ``labels``; letters, digits, ``_`` and ``-`` only, numbered when taken), else ``d``.
"""

from __future__ import annotations

import re

from .. import schema as js

NAME = "defs_factor"
SUMMARY = "Move a subschema repeated inside one schema to $defs and reference it"

MIN_BYTES = 24  # a smaller body cannot pay for a reference
_SAFE_NAME = re.compile(r"[^A-Za-z0-9_-]+")
_MAX_ROUNDS = 64


def _dumps(v) -> bytes:
    from ..envelope import dumps

    return dumps(v)


def _key(v) -> bytes:
    from ..envelope import dumps

    return dumps(v, sort_keys=True)


_counter = None


def _tokens(b: bytes) -> int:
    global _counter
    if _counter is None:
        from ...tokens import make_counter

        _counter = make_counter(None)
    return _counter.count(b)


def _sites(root: dict, defs: dict[str, dict]):
    """``[(parent_container, key, node, name_hint)]`` for every subschema of ``root`` outside
    the definition containers (and the definitions' own subschemas), pre-order."""
    out = []
    top = []
    for k, key, child in js.children(root):
        if k in defs and root.get(k) is defs[k]:
            continue
        top.append((child, (root, k, key), _hint(k, key, None)))
    for m in defs.values():  # the definitions' own subschemas, after the body
        top.extend((d, None, name) for name, d in m.items() if isinstance(d, dict))
    stack = top[::-1]
    while stack:
        node, where, hint = stack.pop()
        if not isinstance(node, dict):
            continue
        if where is not None:
            parent, k, key = where
            out.append((parent, k, key, node, hint))
        stack.extend([(child, (node, k, key), _hint(k, key, hint))
                      for k, key, child in js.children(node)][::-1])
    return out


def _hint(keyword: str, key, above):
    """The name a subschema would be defined under: its property's name, or the one above it
    (``items`` of ``labels`` is ``labels``)."""
    if keyword == "properties" and isinstance(key, str):
        return key
    return above


def _holds_defs(node: dict) -> bool:
    return any("$defs" in n or "definitions" in n for n in js.nodes(node))


def _replace(parent: dict, k: str, key, new) -> None:
    if key is None:
        parent[k] = new
    else:
        parent[k][key] = new


def _name(hint, taken: set[str]) -> str:
    base = _SAFE_NAME.sub("", hint or "") or "d"
    name = base
    n = 2
    while name in taken:
        name = f"{base}{n}"
        n += 1
    return name


def _factor(root: dict, ctx) -> bool:
    """Factor ``root`` in place; whether it now costs fewer tokens."""
    if not ctx.analysis.structural_ok:
        return False
    draft = ctx.analysis.draft
    existing = [c for c in ("$defs", "definitions") if isinstance(root.get(c), dict)]
    container = existing[0] if existing else ("definitions" if draft in ("4", "6", "7") else "$defs")
    if any(not isinstance(root.get(c), dict) and c in root for c in ("$defs", "definitions")):
        return False
    before = _tokens(_dumps(root))
    changed = False
    for _ in range(_MAX_ROUNDS):
        defs = {c: root[c] for c in ("$defs", "definitions") if isinstance(root.get(c), dict)}
        by_body: dict[bytes, tuple[str, str]] = {}
        for c, m in defs.items():
            for name, d in m.items():
                if isinstance(d, dict):
                    by_body.setdefault(_key(d), (c, name))
        groups: dict[bytes, list] = {}
        for site in _sites(root, defs):
            node = site[3]
            if "$ref" in node and len(node) == 1:
                continue
            body = _key(node)
            if len(body) < MIN_BYTES:
                continue
            groups.setdefault(body, []).append(site)
        best = None
        for body, sites in groups.items():
            target = by_body.get(body)
            k = len(sites)
            if target is None and k < 2:
                continue
            if _holds_defs(sites[0][3]):
                continue
            body_t = _tokens(_dumps(sites[0][3]))
            if target is not None:
                c, name = target
                ref_t = _tokens(_dumps({"$ref": f"#/{c}/{name}"}))
                gain = k * (body_t - ref_t)
            else:
                taken = set(defs.get(container, {}))
                name = _name(sites[0][4], taken)
                ref_t = _tokens(_dumps({"$ref": f"#/{container}/{name}"}))
                entry_t = _tokens(_dumps({name: None})) - 1  # '"name":' and a separator
                opening = 0 if container in defs else _tokens(_dumps({container: {}}))
                gain = (k - 1) * body_t - k * ref_t - entry_t - opening
            if gain > 0 and (best is None or (gain, len(body)) > (best[0], len(best[1]))):
                best = (gain, body, sites, target)
        if best is None:
            break
        _, body, sites, target = best
        if target is None:
            m = root.setdefault(container, {})
            name = _name(sites[0][4], set(m))
            m[name] = sites[0][3]
            target = (container, name)
        c, name = target
        for parent, k, key, _node, _hint in sites:
            _replace(parent, k, key, {"$ref": f"#/{c}/{name.replace('~', '~0').replace('/', '~1')}"})
        changed = True
    return changed and _tokens(_dumps(root)) < before


def apply(root, ctx):
    """The factored schema when the whole of it costs fewer tokens (the per-group figures
    are estimates), else ``root`` unchanged."""
    from ..envelope import copy_tree

    if not isinstance(root, dict):
        return root
    trial = copy_tree(root)
    return trial if _factor(trial, ctx) else root
