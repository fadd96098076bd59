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

A catalog seen on a recent request (agents resend theirs every turn) is located without decoding
anything: see :func:`_known_span`. Both ways give the same answer for every body.
"""

from __future__ import annotations

import json
import re
import threading

from .. import jsonio

_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_STRUCT = re.compile(r'[\[\]{}"]')
_SCALAR = re.compile(r'[^,}\] \t\n\r]+')
DECODE_SKIP_MAX = 4 * 1024 * 1024
_KEY = b'"tools"'
_COLON = re.compile(rb"[ \t\n\r]*:[ \t\n\r]*")
PARSER_REUSE_MAX = 1024 * 1024
KNOWN_TRIES = 8  # occurrences of '"tools"' looked at before the full scan takes over
_local = threading.local()


def _simd_parse(data: bytes):
    """simdjson's document for ``data``, or None when simdjson rejects it. simdjson is stricter
    than Go's ``json.Valid`` (UTF-8, depth 1024, huge numbers), so None only means "not proven
    valid here"; a document proves validity (that is how :func:`jsonio.valid` uses it too).
    One parser per thread, reused for documents up to :data:`PARSER_REUSE_MAX` bytes (making
    one per call costs more than parsing a request); a larger document gets a parser of its
    own, so no thread keeps buffers sized for the largest body it ever saw."""
    try:
        import simdjson
    except ImportError:
        return None
    if len(data) > PARSER_REUSE_MAX:
        parser = simdjson.Parser()
    else:
        parser = getattr(_local, "parser", None)
        if parser is None:
            parser = _local.parser = simdjson.Parser()
    try:
        return parser.parse(data)
    except Exception:
        return None


def _is_first_tools_member(body: bytes, vstart: int, vend: int) -> bool:
    """True when ``body`` is valid JSON and ``[vstart, vend)`` (a complete valid value) is the
    value of its first top-level member named ``tools``; False when that is not proven.

    Two simdjson checks, neither decoding a value into Python objects:

    * ``body[:vstart] + b"0}"`` is a valid object whose last key is ``tools`` and no other key
      is. A valid completion by ``0}`` means the prefix ends where the root object waits for
      a member value (deeper, or inside a string, one ``}`` cannot close everything), so
      ``vstart`` is where the root's first ``tools`` value starts;
    * ``b'{"":0' + body[vend:]`` is valid: the bytes after the value continue the root object
      and close it, as they would after any member value.

    With the value itself valid, those two make the whole body valid, with this span as its
    first top-level ``tools`` value."""
    if body.startswith(jsonio.BOM):  # Go rejects a BOM; simdjson would skip it
        return False
    doc = _simd_parse(body[:vstart] + b"0}")
    if doc is None:
        return False
    try:
        keys = list(doc.keys())
    except Exception:
        return False
    finally:
        del doc  # the parser is reused: nothing may keep its last document alive
    if not keys or keys[-1] != "tools" or "tools" in keys[:-1]:
        return False
    doc = _simd_parse(b'{"":0' + body[vend:])
    ok = doc is not None
    del doc
    return ok


def _known_span(body: bytes, known) -> tuple[int, int, bytes] | None:
    """The span of a recently seen catalog and that catalog (the very object, whose hash is
    already computed: the rewrite cache finds it without hashing or copying 30 KB again), when
    it is this body's first top-level ``tools`` value; None when that is not proven (then the
    full scan decides)."""
    if not known:
        return None
    pos = body.find(_KEY)
    for _ in range(KNOWN_TRIES):
        if pos < 0:
            return None
        m = _COLON.match(body, pos + len(_KEY))
        if m is not None:
            vstart = m.end()
            for cat in known:
                if body.startswith(cat, vstart):
                    vend = vstart + len(cat)
                    if _is_first_tools_member(body, vstart, vend):
                        return vstart, vend, cat
                    return None
        pos = body.find(_KEY, pos + 1)
    return None


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


def _scan(body: bytes, known=()) -> tuple[int, int] | None:
    """``(start, end)`` of the top-level ``tools`` array, found by validating the body and
    decoding the members before ``tools``; None when the body is not valid JSON, its root is
    not an object, it has no ``tools`` or the first ``tools`` is not an array."""
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
    """The top-level ``tools`` array of ``body`` and its span, or None (see :func:`_scan`).

    ``known``: catalogs seen recently. When one of them is at the start of the ``tools`` value
    it IS that value (a complete array that begins a valid value ends where it ends), so a
    repeated catalog is found by one byte comparison instead of a scan.
    ``known`` must hold only complete, valid JSON arrays (catalogs found by this function)."""
    found = _known_span(body, known)
    if found is not None:
        start, end, cat = found
        return cat, start, end
    span = _scan(body, known)
    if span is None:
        return None
    start, end = span
    return body[start:end], start, end


def splice(body: bytes, start: int, end: int, replacement: bytes, *,
           replacement_valid: bool = False, nested_valid: bool = False) -> bytes | None:
    """``body`` with ``[start, end)`` replaced; None when the replacement or the result is not
    valid JSON, or the result is empty (spec §2.6 step 5). ``replacement_valid``: the caller
    already validated the replacement (a cached rewrite), so only the result is checked.

    ``nested_valid``: ``[start, end)`` came from :func:`extract` on this body (so the body
    is valid and the span is a top-level member value) and ``b"[" + replacement + b"]"`` is
    valid (so the replacement is valid one level down too, depth limit included). The result
    is then valid by construction and is not parsed again."""
    if not replacement:
        return None
    view = memoryview(body)
    out = b"".join((view[:start], replacement, view[end:]))  # one copy
    if nested_valid:
        return out
    if not (replacement_valid or jsonio.valid(replacement)):
        return None
    if not out or not jsonio.valid(out):
        return None
    return out
