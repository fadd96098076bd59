"""slot_verbs: drop the verb a parameter description opens with when it only says "this slot
holds" (``toolschema-max``).

A property's description describes a value: "Specifies the page size" says the same as "Page
size", "Indicates whether to include archived items" the same as "Whether to include archived
items". Removed at the start of the first sentence of a schema (property) description:

* "Specifies", "Indicates", "Determines", "Defines", "Denotes", "Represents", "Describes",
  "Sets", "Controls", "Configures", "Contains" and an article after them, when a lower-case
  word follows ("Indicates if X" becomes "Whether X");
* "Flag indicating whether" / "A flag that indicates if" / "Flag to determine whether"… →
  "Whether".

Never on tool descriptions (there the verb is the tool's action: "Sets user status"), never in
the middle of a sentence. Annotations only: validation is unchanged.
"""

from __future__ import annotations

import re

from ._telegraph import Edit, Rule, rule

NAME = "slot_verbs"
SUMMARY = "Drop \"Specifies the\"/\"Indicates whether\"-style openers of parameter descriptions"

VERBS = ("Specifies", "Indicates", "Determines", "Defines", "Denotes", "Represents", "Describes",
         "Sets", "Controls", "Configures", "Contains")
_FLAG_VERBS = (r"(?:that[ \t]+|which[ \t]+)?(?:indicat(?:es|ing)|specif(?:ies|ying)|determin(?:es|ing)"
               r"|control(?:s|ling)|to[ \t]+(?:indicate|specify|determine|control))")

_OPENER = re.compile(r"^(?:" + "|".join(VERBS) + r")[ \t]+(?:(?:the|a|an)[ \t]+)?"
                     r"(?=(?P<next>[a-z][a-z'\u2019-]*)\b)")
_FLAG = re.compile(r"^(?:(?:A|An|The)[ \t]+)?(?:[Bb]oolean[ \t]+)?(?:[Ff]lag|[Bb]oolean)[ \t]+"
                   + _FLAG_VERBS + r"[ \t]+(?:whether|if)\b")


def _opener(m: re.Match) -> str:
    return ""


def _whether_if(m: re.Match) -> str:
    return "Whether"


EDITS = [
    Edit(_FLAG, _whether_if),
    Edit(re.compile(r"^(?:" + "|".join(VERBS) + r")[ \t]+(?:whether|if)\b"), _whether_if),
    Edit(_OPENER, _opener),
]


def _for_schema(node, index, sentence):
    return EDITS if index == 0 else []


RULE = Rule(_for_schema, None, in_constraints=True)
apply, apply_tool = rule(RULE)
