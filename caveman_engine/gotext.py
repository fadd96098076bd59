"""Text primitives with Go semantics.

The reference engine is written in Go; several of its string operations differ from Python's
in ways that change bytes: which characters count as whitespace, how invalid UTF-8 is decoded,
how strings are lower-cased. Every compressor that needs one of these uses this module.
"""

from __future__ import annotations

import re

# Go unicode.IsSpace / strings.TrimSpace. Python's str.strip() also strips U+001C..U+001F.
GO_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_FIELDS_PATTERN = "[" + re.escape(GO_SPACE) + "]+"  # compiled by fields() on first use
# JSON insignificant whitespace.
JSON_SPACE = " \t\n\r"
JSON_SPACE_BYTES = b" \t\n\r"
# RE2's \s: [\t\n\f\r ] (no \v).
RE2_SPACE_CLASS = r"[\t\n\f\r ]"


def trim(s: str) -> str:
    """strings.TrimSpace."""
    return s.strip(GO_SPACE)


def trim_left(s: str) -> str:
    return s.lstrip(GO_SPACE)


def trim_right(s: str) -> str:
    return s.rstrip(GO_SPACE)


def fields(s: str) -> list[str]:
    """strings.Fields. Python's str.split() also splits at U+001C..U+001F."""
    return [w for w in re.split(_FIELDS_PATTERN, s) if w]


def is_blank(s: str) -> bool:
    return not s.strip(GO_SPACE)


# surrogateescape turns every byte of an invalid sequence into its own U+DC80..U+DCFF, and
# valid UTF-8 never decodes to a surrogate, so these are exactly the bytes Go sees as invalid.
_ESCAPED = {c: 0xFFFD for c in range(0xDC80, 0xDD00)}


def decode(data: bytes) -> str:
    """Decode UTF-8 the way Go ranges over a string: one U+FFFD per invalid byte.

    (Python's own "replace" gives one U+FFFD per maximal invalid subpart instead: a truncated
    three-byte sequence is one, where Go has two. An error handler that replaces one byte per
    call gives Go's answer too, at a Python call per invalid byte: 3x slower on binary input.)"""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("utf-8", "surrogateescape").translate(_ESCAPED)


def is_valid_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def decode_strict(data: bytes) -> str | None:
    """The text if ``data`` is valid UTF-8, else None."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def to_lower(s: str) -> str:
    """strings.ToLower: simple per-rune mapping. Python's str.lower() differs on U+0130 (two
    code points instead of 'i') and on a word-final capital sigma (context-sensitive)."""
    if "\u0130" in s:
        s = s.replace("\u0130", "i")
    if "\u03a3" in s:
        s = s.replace("\u03a3", "\u03c3")
    return s.lower()
