"""phrases: say a stock phrase in its shorter equivalent (``toolschema-max``).

Each pair below means the same in a tool description; the shorter one costs fewer tokens:

* "such as" → "like" and "e.g.," → "like", before the examples they introduce ("e.g.," costs
  three o200k tokens, "like" one; a bare "e.g." stays: it is as long as "like", and every edit
  of these rules shortens the text);
* "in order to" → "to"; "as well as" → "and"; "prior to" → "before";
* "format of 'X'" → "format 'X'" (before a quoted literal, a code span or a parenthesis);
* "if not provided/specified/given/supplied/passed/set" → "if omitted";
* "whether or not" → "whether".

Constraint sentences included: none of these words is a constraint word, and the constraint
words of the sentence must be the same after the edit. Quoted literals and code are never
touched. Annotations only: validation is unchanged.
"""

from __future__ import annotations

import re

from ._telegraph import Edit, Rule, rule

NAME = "phrases"
SUMMARY = "Shorter equivalents of stock phrases (\"such as\"/\"e.g.,\" → \"like\", \"if not provided\" → \"if omitted\")"


def _case(word: str):
    def repl(m: re.Match) -> str:
        return word[0].upper() + word[1:] if m.group()[0].isupper() else word
    return repl


EDITS = [
    Edit(re.compile(r"\b[Ss]uch[ \t]+as\b(?=[ \t]+\S)"), _case("like")),
    Edit(re.compile(r"(?<![\w.])[Ee]\.g\.,(?=[ \t]+\S)"), _case("like")),
    Edit(re.compile(r"\b[Ii]n[ \t]+order[ \t]+to\b"), _case("to")),
    Edit(re.compile(r"\b[Aa]s[ \t]+well[ \t]+as\b"), _case("and")),
    Edit(re.compile(r"\b[Pp]rior[ \t]+to\b"), _case("before")),
    Edit(re.compile(r"\b(?P<f>[Ff]ormat)[ \t]+of[ \t]+(?=['\"`(\u201c])"), r"\g<f> "),
    Edit(re.compile(r"\b(?P<i>[Ii]f)[ \t]+not[ \t]+(?:provided|specified|given|supplied|passed|set)\b"),
         r"\g<i> omitted"),
    Edit(re.compile(r"\b(?P<w>[Ww]hether)[ \t]+or[ \t]+not\b"), r"\g<w>"),
]

RULE = Rule(lambda node, i, s: EDITS, lambda i, s: EDITS, in_constraints=True)
apply, apply_tool = rule(RULE)
