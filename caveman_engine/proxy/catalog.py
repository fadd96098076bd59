"""Locating and splicing the ``tools`` span of a request body (proxy_spec §2.3, §2.5).

The body must be valid JSON (Go ``json.Valid``, :func:`jsonio.valid`) whose root is an object.
The catalog is the value of the FIRST top-level member whose decoded key is ``tools`` (so
``"\\u0074ools"`` counts), and only when that value is an array: its exact bytes, never
re-encoded. Splicing replaces exactly that span; every other byte stays.

Offsets: the body is decoded as Latin-1 (one character per byte) and walked with the standard
library's C scanner (``JSONDecoder.raw_decode``), so offsets in the text are byte offsets and
skipping a large ``messages`` value costs C time, not a Python loop per token.
"""

from __future__ import annotations

import json
import re

from .. import jsonio

_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def find_tools(body: bytes) -> tuple[int, int] | None:
    """``(start, end)`` of the top-level ``tools`` array in ``body``, or None (not valid JSON,
    root not an object, no ``tools``, the first ``tools`` is not an array)."""
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
                _, vend = raw_decode(text, vstart)
                return vstart, vend
            _, pos = raw_decode(text, vstart)
            pos = ws(text, pos).end()
            c = text[pos]
            if c == "}":
                return None
            if c != ",":
                return None
            pos = ws(text, pos + 1).end()
    except (ValueError, IndexError, RecursionError):
        return None  # deeper than the C scanner's recursion limit etc.: not extractable


def extract(body: bytes) -> tuple[bytes, int, int] | None:
    """The catalog bytes and their span, or None."""
    span = find_tools(body)
    if span is None:
        return None
    start, end = span
    return body[start:end], start, end


def splice(body: bytes, start: int, end: int, replacement: bytes) -> bytes | None:
    """``body`` with ``[start, end)`` replaced; None when the replacement or the result is not
    valid JSON, or the result is empty (spec §2.6 step 5)."""
    if not replacement or not jsonio.valid(replacement):
        return None
    out = body[:start] + replacement + body[end:]
    if not out or not jsonio.valid(out):
        return None
    return out
