"""Locating and splicing the ``tools`` span of a request body (proxy_spec §2.3, §2.5).

The body must be valid JSON (Go ``json.Valid``, :func:`jsonio.valid`) whose root is an object.
The catalog is the value of the FIRST top-level member whose decoded key is ``tools`` (so
``"\\u0074ools"`` counts), and only when that value is an array: its exact bytes, never
re-encoded. Splicing replaces exactly that span; every other byte stays.

Offsets: the body is decoded as Latin-1 (one character per byte), so offsets in the text are
byte offsets. Top-level values before ``tools`` are skipped with the standard library's C
scanner (``JSONDecoder.raw_decode``) when the body is at most :data:`DECODE_SKIP_MAX` bytes
(fast; the decoded value is dropped at once). Larger bodies are skipped with a scanner that
builds nothing (a regex over strings and brackets), so memory per request stays about one copy
of the body however many objects the messages hold.
"""

from __future__ import annotations

import json
import re

from .. import jsonio

_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_STRUCT = re.compile(r'[\[\]{}"]')
_SCALAR = re.compile(r'[^,}\] \t\n\r]+')
DECODE_SKIP_MAX = 4 * 1024 * 1024


def _skip_lean(text: str, pos: int) -> int:
    """End offset of the (valid) JSON value at ``pos``, building no objects."""
    c = text[pos]
    if c == '"':
        return _STRING.match(text, pos).end()
    if c not in "[{":
        return _SCALAR.match(text, pos).end()
    depth = 0
    search, smatch = _STRUCT.search, _STRING.match
    while True:
        m = search(text, pos)
        c = text[m.start()]
        if c == '"':
            pos = smatch(text, m.start()).end()
        elif c in "[{":
            depth += 1
            pos = m.end()
        else:
            depth -= 1
            pos = m.end()
            if depth == 0:
                return pos


def find_tools(body: bytes, known=()) -> tuple[int, int] | None:
    """``(start, end)`` of the top-level ``tools`` array in ``body``, or None (not valid JSON,
    root not an object, no ``tools``, the first ``tools`` is not an array).

    ``known``: catalogs seen recently. When one of them is at the start of the ``tools`` value
    it IS that value (a complete array that begins a valid value ends where it ends), so a
    repeated catalog is found by one byte comparison instead of a scan."""
    if b"tools" not in body and b"\\u" not in body:
        return None  # cheap: no key can decode to "tools"
    if not jsonio.valid(body):
        return None
    text = body.decode("latin-1")
    ws = _WS.match
    pos = ws(text, 0).end()
    if text[pos : pos + 1] != "{":
        return None
    pos = ws(text, pos + 1).end()
    if text[pos : pos + 1] == "}":
        return None
    raw_decode = _DECODER.raw_decode
    lean = len(body) > DECODE_SKIP_MAX
    try:
        while True:
            key, pos = raw_decode(text, pos)  # the key string (valid JSON: always a string)
            pos = ws(text, pos).end()
            if text[pos] != ":":
                return None
            vstart = ws(text, pos + 1).end()
            if key == "tools":
                if text[vstart] != "[":
                    return None
                for cat in known:
                    if body.startswith(cat, vstart):
                        return vstart, vstart + len(cat)
                vend = _skip_lean(text, vstart) if lean else raw_decode(text, vstart)[1]
                return vstart, vend
            pos = _skip_lean(text, vstart) if lean else raw_decode(text, vstart)[1]
            pos = ws(text, pos).end()
            c = text[pos]
            if c == "}":
                return None
            if c != ",":
                return None
            pos = ws(text, pos + 1).end()
    except (ValueError, IndexError, RecursionError, AttributeError):
        return None  # deeper than the C scanner's recursion limit etc.: not extractable


def extract(body: bytes, known=()) -> tuple[bytes, int, int] | None:
    """The catalog bytes and their span, or None."""
    span = find_tools(body, known)
    if span is None:
        return None
    start, end = span
    return body[start:end], start, end


def splice(body: bytes, start: int, end: int, replacement: bytes, *,
           replacement_valid: bool = False) -> bytes | None:
    """``body`` with ``[start, end)`` replaced; None when the replacement or the result is not
    valid JSON, or the result is empty (spec §2.6 step 5). ``replacement_valid``: the caller
    already validated the replacement (a cached rewrite), so only the result is checked."""
    if not replacement or not (replacement_valid or jsonio.valid(replacement)):
        return None
    out = body[:start] + replacement + body[end:]
    if not out or not jsonio.valid(out):
        return None
    return out
