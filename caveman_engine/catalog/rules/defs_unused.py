"""defs_unused: remove root ``$defs``/``definitions`` entries no reference reaches.

A definition is used when a ``$ref`` outside the definitions points at it, or a used
definition does (transitively). Only when every reference in the document is a plain
``#/$defs/NAME`` (or ``#``) pointer and no identifiers (``$id``, ``$anchor``, dynamic refs)
exist: then nothing else can reach the removed entries. An emptied container goes too.
"""

from __future__ import annotations

from ._refs import containers, reachable

NAME = "defs_unused"
SUMMARY = "Remove $defs/definitions entries that no $ref reaches"


def apply(root, ctx):
    if not isinstance(root, dict) or not ctx.analysis.structural_ok:
        return root
    defs = containers(root)
    if not defs:
        return root
    used = reachable(root)
    for c, m in defs.items():
        for name in [n for n in m if (c, n) not in used]:
            del m[name]
        if not m:
            del root[c]
    return root
