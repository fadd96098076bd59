"""``toolschema``: shrink a tool catalog by dropping schema metadata and reducing descriptions.

Spec: ``toolschema_spec.md`` §1. Decode the first JSON value keeping number literals (Go
``json.Decoder`` + ``More()``), classify the document (§1.3), walk envelopes (§1.4) and schemas
(§1.5) key by key, reduce every ``description`` string (§1.6), and write compact JSON with sorted
keys and Go's escapes (§1.7). Forced only (never auto-detected).

Public helpers for in-process chaining:

* :func:`compress_tree` transforms an already-decoded tree (as returned by
  ``jsonio.loads``) and returns the new tree. The input is never modified; unchanged subtrees
  (``enum``/``default``/``const`` values, untouched envelope members) are shared, not copied.
* :func:`reduce_description` is REDUCE (§1.6) on one string.

Every walk is iterative: documents nested up to the decoder's 10,000 levels are handled without
touching the recursion limit.
"""

from __future__ import annotations

import re

from .. import jsonio

TYPE_CHECKING = False  # typing and unicodedata are not imported for a compress
if TYPE_CHECKING:
    from typing import Any

CONTENT_TYPE = "toolschema"
SAFETY_CLASS = "S4"

LEAD_CAP = 80
SMALL = 2 * LEAD_CAP

# --------------------------------------------------------------------------- REDUCE (§1.6)

# WS_GO (strings.TrimSpace): not str.strip(), which also strips U+001C..U+001F.
_WS_GO = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)

# A candidate boundary: '.', then a run of WS_SENT (ASCII space, TAB, LF, VT, FF, CR).
_CANDIDATE = re.compile(r"\.[\t\n\v\f\r ]+")
_ABBREV_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz.")
_ABBREVIATIONS = frozenset(
    "e.g i.e eg ie etc vs cf al viz resp approx no fig figs dr mr mrs ms prof "
    "sr jr st inc ltd corp co dept est".split()
)
_ASCII_UPPER = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_ASCII_NOT_UPPER = frozenset(chr(c) for c in range(128)) - _ASCII_UPPER

_CONSTRAINT_ALTERNATIVES = (
    "must|must not|cannot|can't|shall|"
    "require\\w*|reject\\w*|disallow\\w*|forbidden|"
    "invalid|not allowed|not permitted|"
    "exactly one|only one of|one of|at least|at most|"
    "mutually exclusive|only|unique|case[- ]?sensitive|"
    "max|min|maximum|minimum|range|between|"
    "greater than|less than|more than|fewer than|no more than|no less than|"
    "over|above|below|under|beyond|exceed\\w*|"
    "format\\w*|iso[- ]?\\d*|rfc[- ]?\\d*|absolute"
)


def _go_fold_classes(alternatives: str) -> str:
    """Spell RE2's ``(?i)`` out: each ASCII letter becomes a class of its Unicode simple-fold
    orbit. Go folds ``k`` with U+212A (KELVIN SIGN) and ``s`` with U+017F (LONG S); nothing
    else in this pattern has a non-ASCII equivalent (Python's IGNORECASE would also fold ``i``
    with U+0130/U+0131, which Go does not). Escapes (``\\w``, ``\\d``) are left alone."""
    out = []
    i = 0
    while i < len(alternatives):
        c = alternatives[i]
        if c == "\\":
            out.append(alternatives[i : i + 2])
            i += 2
            continue
        if c.isascii() and c.isalpha():
            lo, up = c.lower(), c.upper()
            extra = {"k": "\u212a", "s": "\u017f"}.get(lo, "")
            out.append(f"[{lo}{up}{extra}]")
        else:
            out.append(c)
        i += 1
    return "".join(out)


# RE2 semantics: \b, \w, \d are ASCII (re.ASCII); case folding as in Go (explicit classes).
# Compiled on first use (only non-ASCII sentences need it).
CONSTRAINT_PATTERN = r"\b(?:" + _go_fold_classes(_CONSTRAINT_ALTERNATIVES) + r")\b"
_constraint_exact: re.Pattern | None = None


def _by_first_letter(alternatives: str) -> str:
    """The same alternatives grouped by their first letter (``m(?:ust|ax|...)|c(?:...)``):
    `re` then rejects most positions on one character instead of trying every alternative.
    Only whether the pattern matches somewhere is asked of it, which no order changes."""
    groups: dict[str, list[str]] = {}
    for alt in alternatives.split("|"):
        groups.setdefault(alt[0], []).append(alt[1:])
    return "|".join(first + (rests[0] if len(rests) == 1 else "(?:" + "|".join(rests) + ")")
                    for first, rests in groups.items())


# Fast path for ASCII sentences: there, RE2's (?i) is exactly "lower-case the text, match the
# lower-case pattern" (ASCII lower-casing never changes which bytes are word characters).
_CONSTRAINT_LOWER = re.compile(
    r"\b(?:" + _by_first_letter(_CONSTRAINT_ALTERNATIVES) + r")\b", re.ASCII)


# Lower-cases ASCII letters only.
_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}


def is_constraint(sentence: str) -> bool:
    """Whether the CONSTRAINT regex matches anywhere in ``sentence`` (Go RE2 semantics)."""
    if sentence.isascii():
        return _CONSTRAINT_LOWER.search(sentence.lower()) is not None
    if "\u212a" not in sentence and "\u017f" not in sentence:
        # The only non-ASCII characters that fold with a letter of the pattern are KELVIN SIGN
        # and LONG S: without them, no other one can match a letter, and lower-casing the
        # ASCII letters alone is the fast path again (no compile of the exact pattern).
        return _CONSTRAINT_LOWER.search(sentence.translate(_ASCII_LOWER)) is not None
    return constraint_regex().search(sentence) is not None


def constraint_regex() -> re.Pattern:
    """The CONSTRAINT regex with Go RE2 semantics on any text."""
    global _constraint_exact
    if _constraint_exact is None:
        _constraint_exact = re.compile(CONSTRAINT_PATTERN, re.ASCII)
    return _constraint_exact


def _is_abbrev(t: str, i: int) -> bool:
    """ABBREV(t, i): the period at ``i`` ends an abbreviation."""
    k = i
    chars = _ABBREV_CHARS
    while k > 0 and t[k - 1] in chars:
        k -= 1
    token = t[k:i].strip(".")
    if not token:
        return False
    if len(token) == 1 or "." in token:
        return True
    return token.lower() in _ABBREVIATIONS


def _is_upper(c: str) -> bool:
    """Go unicode.IsUpper: general category Lu only."""
    if c in _ASCII_UPPER:
        return True
    if c in _ASCII_NOT_UPPER:
        return False
    import unicodedata

    return unicodedata.category(c) == "Lu"


def split_sentences(t: str) -> list[str]:
    """SPLIT(t): sentences end at '.' + WS_SENT + an uppercase letter, unless ABBREV."""
    out: list[str] = []
    start = 0
    n = len(t)
    for m in _CANDIDATE.finditer(t):
        j = m.end()
        if j >= n or not _is_upper(t[j]):
            continue
        i = m.start()
        if _is_abbrev(t, i):
            continue
        seg = t[start : i + 1].strip(_WS_GO)
        if seg:
            out.append(seg)
        start = j
    seg = t[start:].strip(_WS_GO)
    if seg:
        out.append(seg)
    return out


def cap_lead(s: str, limit: int = LEAD_CAP) -> str:
    """CAP(s, 80): cut to 80 bytes on a character boundary, back off to the last ASCII space
    when it sits past byte 40, trim trailing ASCII spaces. No ellipsis."""
    b = s.encode("utf-8")
    if len(b) <= limit:
        return s
    cut = b[:limit]
    while True:  # back off to a rune boundary (s is valid UTF-8: at most 3 bytes)
        try:
            cut.decode("utf-8")
            break
        except UnicodeDecodeError:
            cut = cut[:-1]
    sp = cut.rfind(b" ")
    if sp > limit // 2:
        cut = cut[:sp]
    return cut.rstrip(b" ").decode("utf-8")


def _byte_len_gt(s: str, limit: int) -> bool:
    if len(s) > limit:
        return True
    if s.isascii() or len(s) * 4 <= limit:
        return False
    return len(s.encode("utf-8")) > limit


def reduce_description(s: str) -> str:
    """REDUCE (§1.6): trim WS_GO; keep <= 160 bytes whole; otherwise keep every constraint
    sentence whole plus the first non-constraint sentence capped at 80 bytes, in order,
    joined by single spaces."""
    t = s.strip(_WS_GO)
    if not _byte_len_gt(t, SMALL):
        return t
    kept: list[str] = []
    lead_taken = False
    for sentence in split_sentences(t):
        if is_constraint(sentence):
            kept.append(sentence)
        elif not lead_taken:
            kept.append(cap_lead(sentence))
            lead_taken = True
    return " ".join(kept)


# --------------------------------------------------------------------------- walks (§1.3-1.5)

_DOORS = frozenset(("input_schema", "inputSchema", "parameters"))
_ENVELOPE_KEYS = frozenset(("name", "input_schema", "inputSchema", "parameters", "function"))
_DROP = frozenset(("examples", "example", "$comment", "title", "$schema"))
_VERBATIM = frozenset(("enum", "required", "default", "const"))
_USER_MAPS = frozenset(
    (
        "properties",
        "$defs",
        "definitions",
        "patternProperties",
        "dependentSchemas",
        "dependentRequired",
        "dependencies",
    )
)

# walk kinds
_ENV = 0  # ENVELOPE(v)
_SCHEMA = 1  # SCHEMA(v, userKeys=false)
_USER = 2  # SCHEMA(v, userKeys=true)


def _walk(kind: int, root: Any, cache: dict[str, str]) -> Any:
    """Apply ENVELOPE / SCHEMA to ``root`` without recursion. Containers that are walked are
    rebuilt; everything else is shared with the input."""
    holder: list[Any] = [None]
    stack: list[tuple[int, Any, Any, Any]] = [(kind, root, holder, 0)]
    pop = stack.pop
    push = stack.append
    drop = _DROP
    verbatim = _VERBATIM
    user_maps = _USER_MAPS
    doors = _DOORS

    def reduce(s: str) -> str:
        r = cache.get(s)
        if r is None:
            r = cache[s] = reduce_description(s)
        return r

    while stack:
        k, v, dst, key = pop()
        t = type(v)
        if t is dict:
            # A walked dict starts as a copy (C): its members are then replaced where they
            # change (a container is replaced once walked), the dropped ones deleted. Member
            # order does not matter: the output is written with sorted keys.
            if k == _SCHEMA:
                new: dict = v.copy()
                for mk, mv in v.items():
                    tv = type(mv)
                    if (tv is dict or tv is list) and mk not in verbatim and mk not in drop:
                        push((_USER if mk in user_maps else _SCHEMA, mv, new, mk))
                if not drop.isdisjoint(new):
                    for mk in drop.intersection(new):
                        del new[mk]
                d = new.get("description")
                if type(d) is str:
                    new["description"] = reduce(d)
            elif k == _USER:
                new = v.copy()
                for mk, mv in v.items():
                    tv = type(mv)
                    if tv is dict or tv is list:
                        push((_SCHEMA, mv, new, mk))
            else:  # envelope: copy every member, override the doors, function, description
                new = dict(v)
                for mk in doors:
                    if mk in new:
                        mv = new[mk]
                        tv = type(mv)
                        if tv is dict or tv is list:
                            push((_SCHEMA, mv, new, mk))
                if "function" in new:
                    mv = new["function"]
                    tv = type(mv)
                    if tv is dict or tv is list:
                        push((_ENV, mv, new, "function"))
                d = new.get("description")
                if type(d) is str:
                    new["description"] = reduce(d)
            dst[key] = new
        elif t is list:
            # SCHEMA of an array: every element is SCHEMA(e, false), whatever userKeys was.
            ek = _ENV if k == _ENV else _SCHEMA
            new_list = list(v)
            for idx, e in enumerate(v):
                te = type(e)
                if te is dict or te is list:
                    push((ek, e, new_list, idx))
            dst[key] = new_list
        else:
            dst[key] = v
    return holder[0]


def compress_tree(value: Any) -> Any:
    """The whole ``toolschema`` transform (§1.3 classification, §1.4-1.6) on a decoded tree.

    Returns a new tree; ``value`` is not modified. Unwalked subtrees are shared."""
    cache: dict[str, str] = {}
    t = type(value)
    if t is list:
        return _walk(_ENV, value, cache)
    if t is dict:
        if "tools" in value:
            out = dict(value)
            out["tools"] = _walk(_ENV, value["tools"], cache)
            return out
        if not _ENVELOPE_KEYS.isdisjoint(value):
            return _walk(_ENV, value, cache)
        return _walk(_SCHEMA, value, cache)
    return value


def compress(data: bytes) -> bytes | None:
    """Decode (Go ``Decoder`` semantics), transform, re-serialise. ``None`` declines: empty or
    malformed input, NaN, BOM, nesting deeper than 10,000, a second value."""
    try:
        value = jsonio.loads(data, trailing="go-decoder")
    except jsonio.JSONError:
        return None
    return jsonio.dumps(compress_tree(value))
