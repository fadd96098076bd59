"""Shrink description prose without touching what it says about arguments.

``prose.shrink`` (``shrink_spec.md`` §4) drops articles, fillers, hedges and pleasantries. Some
of that changes meaning in a tool catalog: ``"Make sure the file exists"`` loses ``sure``,
``"Option A or B"`` loses the option ``A``, ``"e.g. the foo_bar value"`` capitalises the
identifier. So ``shrink`` only *suggests*: each sentence is shrunk on its own, the words it
dropped are found by aligning its output with the sentence, and only these drops are applied
to the original sentence text:

* in a *constraint* sentence (the ``toolschema`` CONSTRAINT regex: must, only, at most,
  format, …): the articles ``a``/``an``/``the``;
* elsewhere: articles, the fillers (just, really, basically, actually, simply, quite, very,
  essentially, literally), ``please``/``kindly`` and the line-leading "you can"/"I will"/
  "let me"-style leaders;

never a word that is a property name, an enum/const value or the tool name, never a
capitalised word inside a sentence (``Option A``). Everything else — identifiers, numbers,
paths, URLs, code, punctuation, case, line breaks — stays byte for byte; a sentence whose
first word went starts with a capital if it did before.
"""

from __future__ import annotations

import re
from typing import Iterable

# A sentence ends at . ! ? and whitespace, unless a lower-case letter follows ("e.g. the").
_SENTENCE_SEP = re.compile(r"(?<=[.!?])(\s+)(?![a-z])")
_TOKEN = re.compile(r"[A-Za-z0-9_]+(?:'[A-Za-z]+)?|\S")
_ARTICLES = frozenset(("a", "an", "the"))
_FREE = _ARTICLES | frozenset(
    (
        "just really basically actually simply quite very essentially literally please kindly "
        "you can i will we let me let's lets i'll ill"
    ).split()
)
_LOWER_WORD = re.compile(r"[a-z]+(?=[\s,;!?]|\.(?:\s|\Z)|\Z)")
_PLAIN_TAIL = re.compile(r"(?:^|\s)[A-Za-z0-9]+\Z")
_AFTER_STOP = re.compile(r"[.!?]\s+\Z")
# Punctuation with no word before it: at the start, or after whitespace or other punctuation.
_ORPHAN = re.compile(r"(?:^|(?<=[\s.,;:!?]))[.,;:!?]")


def _removable(word: str, index: int, removable: frozenset[str], protected: frozenset[str]) -> bool:
    low = word.lower()
    if low not in removable or word in protected or low in protected:
        return False
    # Lower-case anywhere; capitalised only as the sentence's first word ("The", "Please").
    return word == low or index == 0


def _sentence(piece: str, constraint: bool, protected: frozenset[str], shrink) -> str:
    """Delete from ``piece`` the words ``shrink`` dropped that may be dropped here; everything
    else (case, punctuation, whitespace) stays as in ``piece``."""
    try:
        suggestion = shrink(piece)
    except Exception:
        return piece
    spans = [(m.start(), m.end(), m.group()) for m in _TOKEN.finditer(piece)]
    new = [t.lower() for t in _TOKEN.findall(suggestion)]
    removable = _ARTICLES if constraint else _FREE
    drop: list[int] = []
    j = 0
    for i, (_, _, tok) in enumerate(spans):
        if j < len(new) and tok.lower() == new[j]:
            j += 1
        elif _removable(tok, i, removable, protected):
            drop.append(i)
    if j < len(new):
        return piece  # the suggestion is not the piece minus some words: ignore it
    # Never create a sentence boundary: keep a word that follows ". " when the next token
    # does not start with a lower-case letter ("e.g. a Foo" stays, "e.g. the foo" shrinks).
    drop = [
        i for i in drop
        if not (_AFTER_STOP.search(piece, 0, spans[i][0])
                and (i + 1 == len(spans) or not spans[i + 1][2][0].islower()))
    ]
    if not drop:
        return piece
    out = []
    pos = 0
    for i in drop:
        start, end, _ = spans[i]
        nxt = spans[i + 1][0] if i + 1 < len(spans) else len(piece)
        gap = piece[end:nxt]
        if gap.strip():  # never happens for word tokens; be safe
            return piece
        if i + 1 == len(spans) or not gap:
            # last word, or punctuation right after it: take the space before it instead,
            # only after a plain word (never glue "." to a URL, path or code)
            before = piece[pos:start].rstrip(" \t")
            if not before or before[-1].isspace() or not _PLAIN_TAIL.search(before):
                return piece
            start = pos + len(before)
            nxt = end
        out.append(piece[pos:start])
        pos = nxt
    out.append(piece[pos:])
    result = "".join(out)
    if len(_ORPHAN.findall(result)) != len(_ORPHAN.findall(piece)):
        return piece  # a clause lost all its words ("The. just." -> "The. .")
    if len(_SENTENCE_SEP.split(result)) != 1:
        return piece  # a new sentence boundary ("e.g. the the Make" -> "e.g. Make")
    if drop[0] == 0 and piece[0].isupper():
        # The sentence started with a capital and its first word went: the new first word
        # takes the capital if it is a plain lower-case word, otherwise nothing is dropped
        # (a lower-case start would merge it with the sentence before).
        if not _LOWER_WORD.match(result):
            return piece
        result = result[0].upper() + result[1:]
    return result if result.strip() else piece


def pieces(text: str) -> list[str]:
    """``text`` split into sentences and the whitespace between them (odd indexes), the way
    :func:`shrink_description` splits it (joining the list gives ``text`` back)."""
    return _SENTENCE_SEP.split(text)


def shrink_description(text: str, protected: Iterable[str] = ()) -> str:
    """``text`` with each sentence shrunk when that is safe (see module doc)."""
    if not text or not isinstance(text, str):
        return text
    from ..compressors.prose import shrink
    from ..compressors.toolschema import is_constraint

    prot = frozenset(protected)
    parts = pieces(text)
    out = []
    for k, part in enumerate(parts):
        if k % 2 == 1 or not part.strip():
            out.append(part)  # separator (kept as is) or blank
            continue
        out.append(_sentence(part, is_constraint(part), prot, shrink))
    result = "".join(out)
    return result if len(result) <= len(text) else text
