"""Reference graph of a schema document's root ``$defs``/``definitions`` (shared by
defs_unused and defs_inline; not a rule)."""

from __future__ import annotations

from .. import schema as js


def containers(root: dict) -> dict[str, dict]:
    return {c: root[c] for c in ("$defs", "definitions") if isinstance(root.get(c), dict)}


def ref_sites(root: dict) -> tuple[list[dict], dict[tuple[str, str], list[dict]]]:
    """``(body_sites, def_sites)``: the ``$ref`` objects outside every root definition, and
    per definition the ``$ref`` objects inside it. Only valid when every ref is simple."""
    defs = containers(root)
    body: list[dict] = []
    inside: dict[tuple[str, str], list[dict]] = {}

    def collect(start, into: list[dict]) -> None:
        for n in js.nodes(start):
            if "$ref" in n:
                into.append(n)

    # Body: the root without its definition containers.
    stack = []
    for k, key, child in js.children(root):
        if k in defs and root.get(k) is defs[k]:
            continue
        stack.append(child)
    if "$ref" in root:
        body.append(root)
    for child in stack:
        if isinstance(child, dict):
            collect(child, body)
    for c, m in defs.items():
        for name, d in m.items():
            lst: list[dict] = []
            if isinstance(d, dict):
                collect(d, lst)
            inside[(c, name)] = lst
    return body, inside


def target(site: dict):
    r = js.parse_ref(site.get("$ref"))
    return r if isinstance(r, tuple) else None


def reachable(root: dict) -> set[tuple[str, str]]:
    body, inside = ref_sites(root)
    seen: set[tuple[str, str]] = set()
    todo = [t for t in (target(s) for s in body) if t is not None]
    if any(js.parse_ref(s.get("$ref")) == "#" for s in body):
        pass  # "#" is the root itself: its definitions are reached only through refs
    while todo:
        t = todo.pop()
        if t in seen or t not in inside:
            continue
        seen.add(t)
        todo.extend(x for x in (target(s) for s in inside[t]) if x is not None)
    return seen
