"""Word helpers shared by the title and description rules (not a rule)."""

from __future__ import annotations

import re

_NON_ALNUM = re.compile(r"[^0-9a-z]+")
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_ACRONYM = re.compile(r"([A-Z]+)([A-Z][a-z])")
_POSSESSIVE = re.compile(r"'s\b", re.ASCII)
_WORDS = re.compile(r"[A-Za-z]+|[0-9]+")
# Words that carry nothing beyond the name they accompany ("The user ID" for user_id).
STOP_WORDS = frozenset(
    "a an the of for to this that is value field param parameter argument arg property given "
    "specified input".split()
)


def norm(text: str) -> str:
    """Lower-case ASCII letters and digits only: ``"User Id"`` and ``user_id`` -> ``userid``."""
    return _NON_ALNUM.sub("", text.lower())


def content_words(text: str) -> frozenset[str]:
    """Lower-cased words of ``text`` with camel/snake/kebab case split, stop-words removed."""
    if not text.isascii():
        # Non-ASCII words would vanish from the comparison: never call such a text an echo.
        return frozenset({"\x00" + text})
    text = _POSSESSIVE.sub("", text)
    text = _ACRONYM.sub(r"\1 \2", _CAMEL.sub(r"\1 \2", text))
    return frozenset(w.lower() for w in _WORDS.findall(text)) - STOP_WORDS
