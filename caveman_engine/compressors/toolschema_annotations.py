"""``toolschema-annotations``: delete annotation members from tool schemas, byte for byte.

Spec: ``toolschema_spec.md`` §2. The input is validated (Go ``json.Valid``), scanned once to
record half-open byte ranges to delete (a DROP member inside a schema position plus exactly one
adjacent separator, §2.3.2), and every other byte is copied through unchanged: order,
whitespace, number spelling, escapes, even invalid UTF-8 inside strings. The result is validated
again. Nothing is ever re-serialised. Forced only (never auto-detected).

Entry points (§2.4): a top-level array is a catalog (each element a catalog entry, nested arrays
recurse), an object is an envelope (so ``{"tools": [...]}`` and bare schemas come back
unchanged), a scalar is a no-op. Returns the input bytes when nothing is stripped; the engine
then passes the input through as byte-identical.

The scan is iterative (explicit frame stack), so any depth the validator accepts (10,000
levels) is safe.
"""

from __future__ import annotations

import json
import re

from .. import gotext, jsonio

CONTENT_TYPE = "toolschema-annotations"
SAFETY_CLASS = "S4"

DROP = frozenset((b"$schema", b"title", b"examples", b"deprecated"))
DOORS = frozenset((b"input_schema", b"inputSchema", b"parameters"))
NEST_DOOR = b"function"
NAME_MAPS = frozenset(
    (b"properties", b"patternProperties", b"$defs", b"definitions", b"dependentSchemas")
)
SCHEMA_CHILDREN = frozenset(
    (
        b"items",
        b"prefixItems",
        b"additionalItems",
        b"unevaluatedItems",
        b"additionalProperties",
        b"unevaluatedProperties",
        b"propertyNames",
        b"contains",
        b"not",
        b"if",
        b"then",
        b"else",
        b"allOf",
        b"anyOf",
        b"oneOf",
    )
)

_WS = re.compile(rb"[ \t\n\r]*")
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_SCALAR = re.compile(rb"[^,}\] \t\n\r]*")
_STRUCT = re.compile(rb'[\[\]{}"]')

# value kinds
_CATALOG = 0  # array: each element CATALOG; object: ENVELOPE; else skipped
_SCHEMA = 1  # object: schema members (DROP active); array: each element SCHEMA
_NAMEMAP = 2  # object: each value SCHEMA, no DROP; anything else skipped

# frame kinds
_F_ARRAY_CATALOG = 0
_F_ARRAY_SCHEMA = 1
_F_ENVELOPE = 2
_F_SCHEMA = 3
_F_NAMEMAP = 4


class _Anomaly(Exception):
    pass


def _skip_container(data: bytes, pos: int) -> int:
    """``pos`` is at ``{`` or ``[``; return the offset just past its matching close."""
    depth = 0
    search = _STRUCT.search
    smatch = _STRING.match
    while True:
        m = search(data, pos)
        if m is None:
            raise _Anomaly("unterminated container")
        c = data[m.start()]
        if c == 0x22:  # '"'
            sm = smatch(data, m.start())
            if sm is None:
                raise _Anomaly("unterminated string")
            pos = sm.end()
        elif c == 0x7B or c == 0x5B:  # { [
            depth += 1
            pos = m.end()
        else:
            depth -= 1
            pos = m.end()
            if depth == 0:
                return pos


def _skip_value(data: bytes, pos: int) -> int:
    c = data[pos : pos + 1]
    if c == b'"':
        m = _STRING.match(data, pos)
        if m is None:
            raise _Anomaly("unterminated string")
        return m.end()
    if c == b"{" or c == b"[":
        return _skip_container(data, pos)
    end = _SCALAR.match(data, pos).end()
    if end == pos:
        raise _Anomaly(f"no value at offset {pos}")
    return end


def _key_bytes(raw: bytes) -> bytes:
    """The decoded key (between the quotes) as UTF-8 bytes: keys match after unescaping."""
    if b"\\" not in raw:
        return raw
    return json.loads(gotext.decode(b'"' + raw + b'"')).encode("utf-8", "surrogatepass")


def strip_ranges(data: bytes) -> list[tuple[int, int]]:
    """Walk a valid JSON document (§2.3.1) and return the byte ranges to delete, in order."""
    n = len(data)
    ws = _WS.match
    smatch = _STRING.match
    ranges: list[tuple[int, int]] = []
    # frame: [frame_kind, prev_value_end, any_kept]
    stack: list[list] = []
    pos = ws(data, 0).end()
    kind = _CATALOG
    # The loop alternates between "start a value of `kind` at pos" and "a value ended at pos".
    while True:
        # ---- start a value
        c = data[pos : pos + 1]
        if c == b"{":
            frame_kind = _F_ENVELOPE if kind == _CATALOG else _F_SCHEMA if kind == _SCHEMA else _F_NAMEMAP
            frame = [frame_kind, -1, False]
            stack.append(frame)
            pos = ws(data, pos + 1).end()
            if data[pos : pos + 1] == b"}":
                pos += 1
                stack.pop()
            else:
                kind, pos = _enter_member(data, pos, frame, ranges, ws, smatch)
                if kind is not None:
                    continue
        elif c == b"[" and (kind == _CATALOG or kind == _SCHEMA):
            stack.append([_F_ARRAY_CATALOG if kind == _CATALOG else _F_ARRAY_SCHEMA, -1, False])
            pos = ws(data, pos + 1).end()
            if data[pos : pos + 1] == b"]":
                pos += 1
                stack.pop()
            else:
                continue  # kind stays: elements of a catalog/schema array have the same kind
        else:
            pos = _skip_value(data, pos)
        # ---- a value ended at pos: hand control back to the enclosing frame(s)
        while True:
            if not stack:
                if ws(data, pos).end() != n:
                    raise _Anomaly("trailing data")
                return ranges
            frame = stack[-1]
            fk = frame[0]
            if fk >= _F_ENVELOPE:
                frame[1] = pos  # valueEnd of the member just finished
            pos = ws(data, pos).end()
            c = data[pos : pos + 1]
            if c == b",":
                pos = ws(data, pos + 1).end()
                if fk <= _F_ARRAY_SCHEMA:
                    kind = _CATALOG if fk == _F_ARRAY_CATALOG else _SCHEMA
                    break
                kind, pos = _enter_member(data, pos, frame, ranges, ws, smatch)
                if kind is not None:
                    break
                continue  # the member was handled whole; pos is just after its value
            if c != (b"]" if fk <= _F_ARRAY_SCHEMA else b"}"):
                raise _Anomaly(f"unexpected byte at offset {pos}")
            pos += 1
            stack.pop()


def _enter_member(data, pos, frame, ranges, ws, smatch):
    """``pos`` is at a member's key. Returns ``(kind, value_pos)`` when the value must be
    walked, or ``(None, value_end)`` when the member was skipped or deleted whole."""
    m = smatch(data, pos)
    if m is None:
        raise _Anomaly(f"expected key at offset {pos}")
    key_start = pos
    key = _key_bytes(data[pos + 1 : m.end() - 1])
    pos = ws(data, m.end()).end()
    if data[pos : pos + 1] != b":":
        raise _Anomaly(f"expected ':' at offset {pos}")
    vpos = ws(data, pos + 1).end()
    fk = frame[0]
    if fk == _F_SCHEMA:
        if key in DROP:
            vend = _skip_value(data, vpos)
            if frame[2]:
                ranges.append((frame[1], vend))
            else:
                p = ws(data, vend).end()
                if data[p : p + 1] == b",":
                    next_start = ws(data, p + 1).end()
                else:
                    next_start = p
                ranges.append((key_start, next_start))
            return None, vend
        frame[2] = True
        if key in NAME_MAPS:
            return _NAMEMAP, vpos
        if key in SCHEMA_CHILDREN:
            return _SCHEMA, vpos
    elif fk == _F_NAMEMAP:
        return _SCHEMA, vpos
    else:  # envelope
        if key in DOORS:
            return _SCHEMA, vpos
        if key == NEST_DOOR:
            return _CATALOG, vpos
    return None, _skip_value(data, vpos)


def apply_ranges(data: bytes, ranges: list[tuple[int, int]]) -> bytes:
    """Copy every byte outside ``ranges`` (sorted, disjoint, in bounds), in one pass."""
    parts = []
    prev = 0
    n = len(data)
    for a, b in ranges:
        if a < prev or b < a or b > n:
            raise _Anomaly("bad range")
        parts.append(data[prev:a])
        prev = b
    parts.append(data[prev:])
    return b"".join(parts)


def strip_annotations(data: bytes) -> tuple[bytes, bool]:
    """``StripToolSchemaAnnotations``: ``(output, ok)``. On failure the input comes back with
    ``ok=False``; with nothing to strip, the input comes back with ``ok=True``."""
    if not jsonio.valid(data):
        return data, False
    try:
        ranges = strip_ranges(data)
    except (_Anomaly, ValueError, IndexError, UnicodeError):
        return data, False
    if not ranges:
        return data, True
    try:
        out = apply_ranges(data, ranges)
    except _Anomaly:
        return data, False
    if not jsonio.valid(out):
        return data, False
    return out, True


def compress(data: bytes) -> bytes | None:
    """The strip as a compressor: the (possibly identical) bytes, or ``None`` to decline."""
    out, ok = strip_annotations(data)
    return out if ok else None
