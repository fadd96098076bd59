"""Whole-sentence selection for ``toolschema-max`` descriptions.

``toolschema``'s reducer keeps a long description's first sentence cut at 80 bytes plus its
constraint sentences; the cut leaves instructions unfinished ("- End git commit messages") and
glues an unfinished lead to a later sentence. Here a description is split into *units* and
units are kept or dropped whole, never shortened:

* a unit is a sentence of a paragraph, one Markdown list item (its continuation lines
  included), one table or one fenced code block; lines that continue a sentence (a hard-wrapped
  docstring) belong to the same paragraph. A sentence ends at ``.``/``!``/``?`` followed by
  whitespace and an upper-case letter, a digit, a quote or a bracket, never after an
  abbreviation (``e.g.``, ``i.e.``, ``etc.``, an initial) — a version (``v1.2``), a URL or a
  file extension has no whitespace after its dot, so it never ends one;
* kept: every *instruction* unit (:func:`is_instruction`: the ``toolschema`` CONSTRAINT words,
  and never/always/do not/avoid/important/prefer/instead/only/before/after/when/if/unless/
  default/up to and numbers with a unit), the *lead* (the first unit that is not catalog
  boilerplate and not a bare "Optional."), and the heading line (ending in ``:``) of a kept list
  item;
* dropped whole: catalog boilerplate (a unit found in at least :data:`BOILERPLATE_SHARE` of the
  tool descriptions of the catalog, and at least :data:`BOILERPLATE_MIN` of them, that is no
  instruction) and every other unit; fenced code goes unless it is the only content.

A description of at most :data:`SMALL` bytes is kept whole (as ``toolschema`` does), one of
at most :data:`FEW` units and :data:`MEDIUM` bytes loses only boilerplate and "Optional."
notes; a description is never left empty when it had content.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Iterable

SMALL = 160
# A description of at most FEW units and MEDIUM bytes is kept whole too: there, every sentence
# says something of its own (measured on BFCL, see docs/catalog.md).
FEW = 3
MEDIUM = 600
# Boilerplate: a unit in at least this share of a catalog's tool descriptions, and in at least
# BOILERPLATE_MIN of them (measured on the corpus: see docs/catalog.md).
BOILERPLATE_SHARE = 0.25
BOILERPLATE_MIN = 3

_ABBREVIATIONS = frozenset(
    "e.g i.e eg ie vs cf al viz resp approx no nos fig figs dr mr mrs ms prof sr jr st inc "
    "ltd corp co dept est ex incl min max sec approx avg".split())
_LIST_ITEM = re.compile(r"[ \t]*(?:[-*+\u2022]|\d{1,3}[.)])[ \t]+\S")
_FENCE = re.compile(r"[ \t]*(?:```|~~~)")
_TABLE = re.compile(r"[ \t]*\|")
_HEADING = re.compile(r"[ \t]*#{1,6}[ \t]")
# A sentence end: the stop, whitespace, then what can open a sentence.
# (A closing "**" belongs to the sentence: "**Don't peek.** A fork's…" is two.)
_END = re.compile(r"[.!?](?:[\"')\]\u201d*]*)(?=[ \t\n]+[A-Z0-9\"'(\[`*\u201c])")
_WORD_BEFORE = re.compile(r"([A-Za-z.]*)[.!?][\"')\]\u201d*]*\Z")

_INSTRUCT = re.compile(
    r"\b(?:never|always|do not|does not|don't|dont|avoid\w*|important\w*|prefer\w*|instead|only|"
    r"before|after|when|whenever|if|unless|default\w*|up to|note|warning|caution|"
    r"deprecated|ensure|make sure|should|recommended|otherwise|except)\b",
    re.IGNORECASE)
_UNIT = re.compile(
    r"\b\d[\d,.]*\s*(?:%|[kmgt]i?b|bytes?|ms|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?|days?|"
    r"weeks?|months?|years?|chars?|characters?|tokens?|lines?|items?|results?|entries|records|"
    r"rows|pages?|requests?|calls?|px|pixels?|words?)\b", re.IGNORECASE)
# Base-form verbs that open an instruction ("- Run long servers in the background", "Batch
# URLs in one call."); read only as the first word of a sentence or list item (after a list
# item's short "Label:"), where a third-person verb ("Runs…") or a noun phrase would otherwise
# stand, and capitalised. Words that are more often nouns there (list, search, filter, limit,
# sort) are left out.
_IMPERATIVE_VERBS = frozenset("""
add apply ask batch be brief call check choose clean close combine commit confirm consider copy
create delegate delete describe do draft enable escape explain explore express fetch find fix
follow generate get give include inspect install keep leave load make mark mention narrow
omit open pass paginate pick poll prefer provide put quote read remember remove rename repeat
replace respect respond retry reuse review run save say send separate
skip specify start stop store supply tell treat trust try update use verify
wait wrap write
""".split())
# The verb opening a list item (after its short "Label:") or a sentence, an adverb may come
# first ("- Clearly tell the agent…", "Briefly describe…"); "To end the loop, call…" opens
# with its purpose.
_ITEM_LEAD = re.compile(
    r"[ \t]*(?:[-*+\u2022]|\d{1,3}[.)])[ \t]+(?:[^:\n]{1,40}:[ \t]+)?"
    r"(?:([A-Za-z]+ly)[ \t]+)?([A-Za-z]+)(?=[ \t])")
_SENTENCE_LEAD = re.compile(r"[\"'(*_\u201c]*(?:([A-Za-z]+ly)[ \t]+)?([A-Za-z]+)(?=[ \t])")
_PURPOSE_LEAD = re.compile(r"To [^,.;:\n]{1,60}, ([a-z]+)(?=[ \t])")
_CLAUSE_VERB = re.compile(r"[:;][ \t]+([A-Za-z]+)\b")
_OPTIONAL = re.compile(
    r"\(?(?:optional|this (?:field|parameter|argument|value|param) is optional)\)?[.:]?",
    re.IGNORECASE)
_LETTER = re.compile(r"[^\W\d_]")


def is_instruction(unit: str) -> bool:
    """Whether ``unit`` instructs or constrains: the ``toolschema`` CONSTRAINT regex, an
    instruction word, a number with a unit ("up to 5 MB", "30 seconds"), or a sentence or list
    item that opens with a verb in the imperative ("- Run servers in the background", "Clearly
    tell…", "To stop, call…")."""
    from ..compressors.toolschema import is_constraint

    if is_constraint(unit) or _INSTRUCT.search(unit) or _UNIT.search(unit):
        return True
    item = _ITEM_LEAD.match(unit)
    m = item or _PURPOSE_LEAD.match(unit) or _SENTENCE_LEAD.match(unit)
    if m is None:
        return False
    if m.re is _PURPOSE_LEAD:
        return m.group(1) in _IMPERATIVE_VERBS
    first = m.group(1) or m.group(2)
    if first[0].isupper() and m.group(2).lower() in _IMPERATIVE_VERBS:
        return True
    # "...: escape them", "...; use X instead" inside a list item
    return item is not None and any(w.lower() in _IMPERATIVE_VERBS
                                    for w in _CLAUSE_VERB.findall(unit))


# --------------------------------------------------------------------------- splitting

def _blocks(text: str) -> list[tuple[str, str, str]]:
    """``[(separator_before, block, kind)]``: paragraphs (``p``), list items (``li``), tables
    (``t``), code fences (``x``) and headings (``h``); all but paragraphs are one unit each.
    Joining separators and blocks gives ``text`` back."""
    lines = text.split("\n")
    out: list[tuple[str, str, str]] = []
    cur: list[str] = []
    kind = ""
    sep = ""
    pending = ""  # separator before the next block (newlines, blank lines)
    fence = False

    def flush():
        nonlocal cur, kind, sep
        if cur:
            out.append((sep, "\n".join(cur), kind))
        cur, kind = [], ""

    for i, line in enumerate(lines):
        nl = "\n" if i else ""
        if fence:
            cur.append(line)
            if _FENCE.match(line):
                fence = False
                flush()
            continue
        if not line.strip():
            flush()
            pending += nl + line
            continue
        if _FENCE.match(line):
            flush()
            sep, pending = pending + nl, ""
            cur, kind, fence = [line], "x", True
            continue
        if _TABLE.match(line):
            if kind == "t":
                cur.append(line)
                continue
            flush()
            sep, pending = pending + nl, ""
            cur, kind = [line], "t"
            continue
        new_block = (
            not cur
            or kind in ("t", "h")
            or _LIST_ITEM.match(line) is not None
            or _HEADING.match(line) is not None
            or (kind == "li" and _indent(line) <= _indent(cur[0]))
            or (kind == "p" and re.search(r"[.!?:]\W*\Z", cur[-1]) is not None)
        )
        if new_block:
            flush()
            sep, pending = pending + nl, ""
            cur = [line]
            kind = "li" if _LIST_ITEM.match(line) else "h" if _HEADING.match(line) else "p"
        else:
            cur.append(line)
    flush()
    return out


def _sentence_ends(par: str) -> list[int]:
    ends = []
    last = 0
    for m in _END.finditer(par):
        if not _LETTER.search(par, last, m.start()):
            continue  # "3. Large service…": a list number, not a sentence

        w = _WORD_BEFORE.search(par, 0, m.end())
        token = (w.group(1) if w else "").strip(".")
        # an abbreviation: one letter, dotted short parts (e.g., U.S.), a known word; a file
        # name ("a.html.") ends a sentence
        if token and (len(token) == 1 or token.lower() in _ABBREVIATIONS
                      or ("." in token and all(len(p) <= 2 for p in token.split(".")))):
            continue
        ends.append(m.end())
        last = m.end()
    return ends


def units(text: str) -> list[tuple[str, str]]:
    """``[(separator_before, unit)]`` of ``text`` (see the module doc); the first separator
    is empty. Units carry no surrounding whitespace."""
    out: list[tuple[str, str]] = []
    for sep, block, kind in _blocks(text):
        if kind != "p":
            body = block.strip()
            # the indentation of a nested list item stays in its separator
            out.append((sep + block[:len(block) - len(block.lstrip())], body))
            continue
        start = 0
        for end in _sentence_ends(block) + [len(block)]:
            piece = block[start:end]
            body = piece.strip()
            if body:
                lead_ws = piece[:len(piece) - len(piece.lstrip())]
                out.append((sep + lead_ws, body))
                sep = ""
            start = end
    if out:
        out[0] = ("", out[0][1])
    return out


def split(text: str) -> list[str]:
    return [u for _, u in units(text)]


# --------------------------------------------------------------------------- selection

def normal(unit: str) -> str:
    """The key a unit is compared by across tools: lower case, words only."""
    return " ".join(re.findall(r"\w+", unit.lower()))


def boilerplate(descriptions: Iterable[str | None]) -> frozenset[str]:
    """Normalised units shared by many of ``descriptions`` (one per tool) that instruct
    nothing: what :func:`select` drops."""
    descs = [d for d in descriptions if isinstance(d, str)]
    n = len(descs)
    counts: Counter = Counter()
    for d in descs:
        counts.update({normal(u) for u in split(d)})
    need = max(BOILERPLATE_MIN, BOILERPLATE_SHARE * n)
    return frozenset(k for k, c in counts.items() if k and c >= need)


def _is_optional_note(unit: str) -> bool:
    return _OPTIONAL.fullmatch(unit.strip()) is not None


def _indent(u: str) -> int:
    return len(u) - len(u.lstrip(" \t"))


def _line_indent(sep: str) -> int:
    """The indentation a unit starts its line with (kept in its separator; 0 for the first
    unit and for a sentence inside a paragraph)."""
    return len(sep) - sep.rfind("\n") - 1 if "\n" in sep else 0


def _owners(us: list[tuple[str, str]], hashed: list[bool], colon: list[bool]) -> list[list[int]]:
    """Per unit, the headings it sits under: the last "#" heading (until the next one), and
    the colon lines above it (a paragraph's colon line until a blank line before a paragraph;
    a list item ending with a colon over the more indented items after it)."""
    out: list[list[int]] = []
    owner_hash = None
    stack: list[tuple[int, int]] = []  # (indent, index); a paragraph heading has indent -1
    for i, (sep, u) in enumerate(us):
        item = _LIST_ITEM.match(u) is not None
        if hashed[i]:
            out.append([])
            owner_hash, stack = i, []
            continue
        if not item:
            # A paragraph, table or code block goes on under the colon line above it until a
            # blank line; list items' headings end at it.
            stack = [] if "\n\n" in sep else [e for e in stack[:1] if e[0] == -1]
        else:
            k = _line_indent(sep)
            while stack and stack[-1][0] >= k:
                stack.pop()
        out.append(([owner_hash] if owner_hash is not None else []) + [j for _, j in stack])
        if colon[i]:
            if not item:
                stack = []
            stack.append((_line_indent(sep) if item else -1, i))
    return out


def select(text: str, shared: frozenset[str] = frozenset(), small: int | None = None) -> str:
    """``text`` with whole units only: the lead, every instruction, headings of kept list
    items; catalog boilerplate (``shared``) and the rest dropped (see the module doc)."""
    t = text.strip()
    if len(t.encode("utf-8")) <= (SMALL if small is None else small):
        return t
    us = units(t)
    if len(us) <= 1:
        return t
    few = len(us) <= FEW and len(t.encode("utf-8")) <= MEDIUM
    keep = [False] * len(us)
    code = [u.lstrip().startswith(("```", "~~~")) for _, u in us]
    hashed = [_HEADING.match(u) is not None for _, u in us]
    colon = [not hashed[i] and u.rstrip().endswith(":") for i, (_, u) in enumerate(us)]
    lead = None
    for i, (_, u) in enumerate(us):
        if code[i] or hashed[i] or not _LETTER.search(u) or _is_optional_note(u):
            continue
        if normal(u) in shared and not is_instruction(u):
            continue
        lead = i
        break
    if lead is None:  # nothing but boilerplate and notes: keep the first unit with letters
        lead = next((i for i, (_, u) in enumerate(us) if _LETTER.search(u)), 0)
    keep[lead] = True
    owners = _owners(us, hashed, colon)
    heads = {j for o in owners for j in o}
    colon = [c and i in heads for i, c in enumerate(colon)]  # a colon line over nothing is text
    for i, (_, u) in enumerate(us):
        if keep[i] or code[i] or hashed[i]:
            continue
        if _is_optional_note(u):
            continue
        if few:  # a short description: every unit but boilerplate and notes
            keep[i] = not (normal(u) in shared and not is_instruction(u))
            continue
        if colon[i]:
            continue  # a heading: kept below when something under it is
        # An instruction, or a list item under an instruction heading ("Never:", "When to
        # use this tool:", "IMPORTANT:"): every item there instructs.
        if is_instruction(u) or (_LIST_ITEM.match(u) and any(
                colon[j] and is_instruction(us[j][1]) for j in owners[i])):
            keep[i] = True
    # Headings ("## Usage", a line ending with a colon) are kept when something under them is.
    for i in range(len(us)):
        if keep[i]:
            for j in owners[i]:
                keep[j] = True
    # Join: a kept unit after dropped ones takes the widest break among the separators it
    # skipped (a paragraph's second sentence after a dropped first one starts the paragraph).
    out: list[str] = []
    gap = ""
    for i, (sep, u) in enumerate(us):
        if sep.count("\n") > gap.count("\n") or not gap:
            gap = sep
        if keep[i]:
            if out:
                if "\n" in sep:  # the widest break, then the unit's own indentation
                    gap = gap[:gap.rfind("\n") + 1] + sep[sep.rfind("\n") + 1:]
                out.append(gap if gap else " ")
            out.append(u)
            gap = ""
    return "".join(out)
