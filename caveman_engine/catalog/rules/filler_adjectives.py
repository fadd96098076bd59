"""filler_adjectives: drop "specified", "given" and "provided" before the noun they point at
(``toolschema-max``).

"Returns weather for the specified location" says no more than "Returns weather for location":
in a tool catalog every argument is specified, given or provided by the caller. The word goes
only where it is an adjective: after a determiner or a preposition (or at the start of a
sentence) and before a plain lower-case word that is not itself a preposition, conjunction or
verb — "if provided", "as specified in", "provided that", "is given priority" and
"user-specified" stay. Not in constraint sentences ("within the specified range" refers to a
range stated elsewhere). Annotations only: validation is unchanged.
"""

from __future__ import annotations

import re

from ._telegraph import Edit, Rule, rule

NAME = "filler_adjectives"
SUMMARY = "Drop \"specified\"/\"given\"/\"provided\" before the noun they point at"

ADJECTIVES = ("specified", "given", "provided")

# What may stand before the adjective (written for this rule): determiners and prepositions.
BEFORE = frozenset("""
the a an this that these those each every any all some its their his her your our
for of to in on at by from with within into onto about per via over under between against
""".split())

# What may not follow it: then it is a verb or a conjunction, not an adjective.
NOT_AFTER = frozenset("""
by in as for to on at with when if or and through via from under within is are was were be
will that which than then so but nor of into onto about per over between against
""".split())

_PATTERN = re.compile(
    r"(?:(?P<start>^)|(?<![\w'\u2019-])(?P<before>[A-Za-z]+)[ \t]+)"
    r"(?P<adj>" + "|".join(ADJECTIVES) + r")[ \t]+(?=(?P<next>[a-z][a-z'\u2019-]*)\b)",
    re.IGNORECASE,
)


def _drop(m: re.Match) -> str | None:
    adj = m.group("adj")
    if m.group("start") is not None:
        if adj[0].islower():
            return None
    elif adj != adj.lower() or m.group("before").lower() not in BEFORE:
        return None
    if m.group("next").lower() in NOT_AFTER:
        return None
    return "" if m.group("start") is not None else m.group("before") + " "


EDITS = [Edit(_PATTERN, _drop)]

RULE = Rule(lambda node, i, s: EDITS, lambda i, s: EDITS, in_constraints=True)
apply, apply_tool = rule(RULE)
