"""final_period: drop the full stop that ends a description (``toolschema-max``).

The last sentence of a description needs no full stop: the end of the string ends it. Read by
a model, ``"Height of triangle"`` says what ``"Height of triangle."`` says. Where the
description closes its object the stop costs an o200k token of its own (``."`` + ``}}`` against
``"}}``); elsewhere only its byte. Every word stays.

A description whose last sentence states a constraint (the ``toolschema`` CONSTRAINT regex)
keeps its stop: a constraint sentence is kept as it is, to the byte.

The stop is kept when it is part of something: an ellipsis (``..``), an abbreviation or an
initial (``etc.``, ``e.g.``, ``U.S.``, ``No.``: the ``toolschema`` abbreviation test), or a
literal it follows directly (a backslash, a slash, a backtick, any character but a letter, a
digit or a closing quote or bracket). Applies to every schema ``description`` and to the
tool's own description; annotations only.
"""

from __future__ import annotations

from ._text import description_rule

NAME = "final_period"
SUMMARY = "Drop the full stop that ends a description (not an abbreviation's or an ellipsis')"

_CLOSERS = frozenset("'\")]\u2019\u201d")


def strip_final_period(text: str) -> str:
    from ...compressors.toolschema import _is_abbrev, is_constraint
    from ..prose_guard import pieces

    if len(text) < 2 or not text.endswith(".") or text.endswith(".."):
        return text
    i = len(text) - 1
    before = text[i - 1]
    if not ((before.isascii() and before.isalnum()) or before in _CLOSERS):
        return text
    if _is_abbrev(text, i):
        return text
    if is_constraint(pieces(text)[-1]):
        return text
    return text[:i]


apply, apply_tool = description_rule(strip_final_period)
