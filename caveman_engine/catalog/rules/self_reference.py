"""self_reference: drop "This function"/"This tool" before the verb of a tool description
(``toolschema-max``).

A tool's description is read as the tool's: "This function retrieves the weather" says the
same as "Retrieves the weather". Removed at the start of the tool description's first
sentence: "This"/"The" + function, tool, method, endpoint, API, operation, command, action,
utility or service, when a verb in the third person follows ("retrieves", "allows"; not "is",
"was", "has"). Schema descriptions are not touched. Annotations only: validation is unchanged.
"""

from __future__ import annotations

import re

from ._telegraph import Edit, Rule, rule

NAME = "self_reference"
SUMMARY = "Drop \"This function\"/\"This tool\" before the verb a tool description starts with"

NOUNS = ("function", "tool", "method", "endpoint", "API", "api", "operation", "command", "action",
         "utility", "service")
_NOT_VERBS = frozenset(("is", "was", "has", "does", "as", "us", "its", "this", "is"))

_PATTERN = re.compile(r"^(?:This|The)[ \t]+(?:" + "|".join(NOUNS) + r")[ \t]+"
                      r"(?=(?P<verb>[a-z]+s)\b)")


def _drop(m: re.Match) -> str | None:
    verb = m.group("verb")
    if verb in _NOT_VERBS or verb.endswith(("ss", "us", "is")):
        return None
    return ""


EDITS = [Edit(_PATTERN, _drop)]

RULE = Rule(None, lambda i, s: EDITS if i == 0 else [], in_constraints=True)
apply, apply_tool = rule(RULE)
