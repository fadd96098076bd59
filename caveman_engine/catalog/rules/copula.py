"""copula: drop the auxiliary verb before a participle (``toolschema-max``).

Telegraphic style, as in headlines and notes: the participle carries the meaning, the
auxiliary only the grammar. In a description:

* "that is"/"which are" (+ "being"), "that has been" before a participle: a reduced relative clause
  ("Token that is used for paging" → "Token used for paging");
* "is"/"are"/"was"/"were" (+ "being") before a participle or "not", after a word that is not
  a pronoun ("City where event is held" → "City where event held", "if city is not in US" →
  "if city not in US");
* "will be", "has been"/"have been", and "has"/"have" before a past participle ("any date will
  be considered" → "any date considered", "alarms user has configured" → "alarms user
  configured").

A participle is a word in ``-ed`` or ``-ing`` (not a noun such as "string" or "setting") or one
of the irregular past participles listed below. Modal verbs (must, should, can, may…) and
"to be" are never touched; neither is anything after a pronoun ("it is used to" stays), nor
"is used to" after a noun (it would read as a habit), nor a constraint word (the constraint words of a sentence must be the same after the edit).
Annotations only: validation is unchanged.
"""

from __future__ import annotations

import re

from ._telegraph import Edit, Rule, rule

NAME = "copula"
SUMMARY = "Drop the auxiliary before a participle (\"where event is held\" → \"where event held\")"

# Irregular past participles (written for this rule).
IRREGULAR = frozenset("""
held set sent made done given known shown taken seen built found paid kept left sold told written
chosen run put bought brought caught taught thought begun drawn driven eaten fallen forgotten
frozen hidden ridden risen spoken stolen torn worn thrown grown flown blown cut hit hurt lost
meant met shut spent split spread understood won bound dealt fed led lent lit felt hung laid
stuck struck swept wound overridden rewritten withheld broken
""".split())

# Words in -ing that are nouns or adjectives, not participles (written for this rule).
ING_NOUNS = frozenset("""
string thing nothing something anything everything setting settings padding heading spring ring
king building morning evening meeting booking listing mapping encoding ceiling during pending
missing existing remaining following upcoming incoming outgoing ongoing interesting
""".split())

# Subjects after which the auxiliary stays (pronouns and pointers: "it is used to" ≠ "it used to").
PRONOUNS = frozenset("""
it this that these those there here which what who whom whose he she they we you i one
""".split())

_PARTICIPLE = r"(?P<p>[a-z][a-z-]*(?:ed|ing)|" + "|".join(sorted(IRREGULAR)) + r")\b"


def _is_participle(word: str) -> bool:
    if word in IRREGULAR:
        return True
    if word in ING_NOUNS:
        return False
    if word.endswith("ing"):
        return len(word) >= 6
    if word.endswith("ed"):
        return len(word) >= 4 and not word.endswith("eed")
    return False


def _keep_participle(m: re.Match) -> str | None:
    return m.group("p") if _is_participle(m.group("p")) else None


def _after_subject(m: re.Match) -> str | None:
    if m.group("s").lower() in PRONOUNS:
        return None
    p = m.group("p")
    if p != "not" and not _is_participle(p):
        return None
    if p == "used" and re.match(r"[ \t]+to\b", m.string[m.end():]):
        return None  # "X is used to Y" must not read as "X used to Y" (habit)
    return m.group("s") + " " + p


EDITS = [
    Edit(r"\b(?:that|which)[ \t]+(?:(?:is|are|was|were)(?:[ \t]+being)?|ha(?:s|ve)[ \t]+been)[ \t]+"
         + _PARTICIPLE,
         _keep_participle),
    Edit(r"(?<![\w'\u2019-])(?P<s>[A-Za-z][a-z'\u2019]*)[ \t]+"
         r"(?:(?:is|are|was|were)(?:[ \t]+being)?|will[ \t]+be|ha(?:s|ve)[ \t]+been|ha(?:s|ve))[ \t]+"
         r"(?P<p>not\b|[a-z][a-z-]*(?:ed|ing)\b|(?:" + "|".join(sorted(IRREGULAR)) + r")\b)",
         _after_subject),
]

RULE = Rule(lambda node, i, s: EDITS, lambda i, s: EDITS, in_constraints=True)
apply, apply_tool = rule(RULE)
