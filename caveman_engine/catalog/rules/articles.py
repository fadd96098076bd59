"""articles: drop the articles the prose shrink left (``toolschema-max``).

The prose step refuses a whole sentence when it cannot re-capitalise what follows a dropped
first article ("The check-in date…", "The IATA code…") or when its shrink suggestion does not
line up with the sentence; the articles inside such a sentence stay. This rule drops them one
by one, in any sentence (constraint sentences included: an article never states a limit):

* ``a``/``an``/``the`` in lower case anywhere, capitalised only as the sentence's first word;
* only before a word, a number or a quoted literal — never at the end, never before a
  conjunction, a preposition or a verb, where the letter is a name ("a or b", "point a is"),
  and never before another article ("the a", "The The"): one of the two is then a name, and
  what is left would read as an article the prose step drops on the next run;
* never a protected name (a property called ``a``), never inside code, quotes, URLs or paths.

Tool and schema descriptions; annotations only, so validation is unchanged.
"""

from __future__ import annotations

import re

from ._telegraph import Edit, Rule, rule

NAME = "articles"
SUMMARY = "Drop the articles a/an/the the prose shrink left (constraint sentences included)"

# Words an article is never followed by: after them the letter is a name, not an article.
_NOT_AFTER = frozenset("""
or and nor but is are was were be been being of to in on at by for with as if then than from
into via per a an the
""".split())

_ARTICLE = re.compile(r"(?:(?<=^)(?:The|An|A)|(?<![\w'\u2019.\-/])(?:the|an|a))[ \t]+"
                      r"(?=(?P<next>[A-Za-z0-9][\w'\u2019-]*|['\"`(\u201c]))")


def _drop(m: re.Match) -> str | None:
    nxt = m.group("next")
    if nxt.lower() in _NOT_AFTER:
        return None
    return ""


EDITS = [Edit(_ARTICLE, _drop)]

RULE = Rule(lambda node, i, s: EDITS, lambda i, s: EDITS, in_constraints=True)
apply, apply_tool = rule(RULE)
