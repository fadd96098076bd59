"""JSON in and out, byte-compatible with Go's encoding/json.

Every compressor and the report use this module, so that the bytes we emit are the bytes the
reference engine emits:

* numbers keep their exact source literal (:class:`Number`), whatever their size or spelling;
* strings are decoded like Go: one U+FFFD per invalid UTF-8 byte, lone surrogate escapes become
  U+FFFD;
* output is compact (or 2-space indented), keys sorted byte-wise, ``< > &`` and U+2028/U+2029
  escaped as ``\\u003c \\u003e \\u0026 \\u2028 \\u2029``, other non-ASCII raw;
* documents nest up to 10,000 levels like Go's scanner; deeper ones are an error, never a
  ``RecursionError``.

orjson does the writing (``orjson.Fragment`` carries number literals) except for small values
while it is not imported yet, which the standard library's encoder writes; the standard
library's C scanner does the reading. Both have recursion limits well below 10,000, so each
has an iterative fallback that only pathological inputs reach.
"""

from __future__ import annotations

import re
import sys
TYPE_CHECKING = False  # typing's names only annotate; importing typing costs ~3 ms of start-up
if TYPE_CHECKING:
    from typing import Any, Callable

from . import gotext

# json and orjson are imported on first use: `detect` only needs `valid`, usually answered by
# simdjson, and must start fast.

MAX_DEPTH = 10000
BOM = b"\xef\xbb\xbf"


class JSONError(ValueError):
    """Input is not (exactly one) JSON value under the rules asked for."""


class Number:
    """A JSON number kept as its source literal (Go's json.Number)."""

    __slots__ = ("literal",)

    def __init__(self, literal: str) -> None:
        self.literal = literal

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Number) and other.literal == self.literal

    def __hash__(self) -> int:
        return hash(self.literal)

    def __float__(self) -> float:
        return float(self.literal)

    def __repr__(self) -> str:
        return f"Number({self.literal!r})"

    def __str__(self) -> str:
        return self.literal


def _reject_constant(name: str) -> Any:
    raise JSONError(f"invalid literal {name}")


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _make_decoder(object_pairs_hook: Callable | None):
    import json

    return json.JSONDecoder(
        parse_int=Number,
        parse_float=Number,
        parse_constant=_reject_constant,
        object_pairs_hook=object_pairs_hook,
        strict=True,
    )


_DECODER = None


def loads(
    data: bytes | str,
    *,
    trailing: str = "strict",
    object_pairs_hook: Callable | None = None,
) -> Any:
    """Decode exactly one JSON value.

    ``trailing="strict"``: only JSON whitespace may follow the value (``json.Valid``).
    ``trailing="go-decoder"``: like Go's ``Decoder.Decode`` + ``More()``; a following ``]`` or
    ``}`` (and everything after it) is ignored, anything else is an error.

    Numbers come back as :class:`Number`, objects as ``dict`` (last duplicate wins) unless an
    ``object_pairs_hook`` is given. Raises :class:`JSONError`.
    """
    if isinstance(data, bytes):
        if data.startswith(BOM):
            raise JSONError("byte order mark")
        text = gotext.decode(data)
    else:
        if data.startswith("\ufeff"):
            raise JSONError("byte order mark")
        text = data
    n = len(text)
    i = 0
    while i < n and text[i] in gotext.JSON_SPACE:
        i += 1
    if i == n:
        raise JSONError("empty input")
    if object_pairs_hook is None:
        decoder = _decoder()
    else:
        decoder = _make_decoder(object_pairs_hook)
    try:
        value, end = decoder.raw_decode(text, i)
    except RecursionError:
        value, end = _IterativeParser(text, object_pairs_hook).parse(i)
    except JSONError:
        raise
    except ValueError as exc:  # json.JSONDecodeError
        raise JSONError(str(exc)) from None
    while end < n and text[end] in gotext.JSON_SPACE:
        end += 1
    if end < n:
        if trailing != "go-decoder" or text[end] not in "]}":
            raise JSONError("trailing data after JSON value")
    if _SURROGATE_ESCAPE.search(text, i):
        value = _replace_surrogates(value)
    return value


def _decoder():
    global _DECODER
    if _DECODER is None:
        _DECODER = _make_decoder(None)
    return _DECODER


def scan_value(text: str, i: int) -> tuple[Any, int]:
    """The value that starts exactly at ``text[i]`` and the offset just after it, read like
    :func:`loads` reads it (numbers as :class:`Number`), without its fallback for deep
    nesting: ``RecursionError`` reaches the caller. Raises :class:`JSONError`."""
    try:
        return _decoder().scan_once(text, i)
    except StopIteration:
        raise JSONError(f"invalid character at offset {i}") from None
    except JSONError:
        raise
    except ValueError as exc:  # json.JSONDecodeError
        raise JSONError(str(exc)) from None


def array_items(text: str, i: int):
    """The elements of the array whose ``[`` is at ``text[i]``, one at a time, as
    ``(start, end, value)``; the generator's return value is the offset just after the ``]``.
    The grammar is the one :func:`loads` applies (JSON whitespace, no trailing comma); an
    error raises :class:`JSONError` (deep nesting: ``RecursionError``) once the elements
    before it were yielded. The caller holds one element at a time, not the whole array."""
    ws = _WS.match
    i = ws(text, i + 1).end()
    if text.startswith("]", i):
        return i + 1
    while True:
        value, end = scan_value(text, i)
        yield i, end, value
        i = ws(text, end).end()
        c = text[i:i + 1]
        if c == ",":
            i = ws(text, i + 1).end()
        elif c == "]":
            return i + 1
        else:
            raise JSONError(f"invalid character at offset {i} after array element")


def has_surrogate_escape(text: str) -> bool:
    """Whether ``text`` holds a ``\\uD8xx``-style escape (:func:`loads` then replaces lone
    surrogates in the decoded value)."""
    return _SURROGATE_ESCAPE.search(text) is not None


def valid(data: bytes) -> bool:
    """Go's ``json.Valid``: one value, strict grammar, depth <= 10,000, any bytes >= 0x20
    (including invalid UTF-8) inside strings."""
    if not data or data.startswith(BOM):
        return False
    try:
        import simdjson

        simdjson.Parser().parse(data)
        return True
    except Exception:
        pass  # simdjson is stricter (UTF-8, depth 1024, huge numbers): decide slowly
    try:
        loads(data)
    except JSONError:
        return False
    return True


def _replace_surrogates(value: Any) -> Any:
    """Lone surrogates (from escapes like ``\\ud800``) become U+FFFD, as in Go."""

    def fix(s: str) -> str:
        return _SURROGATE.sub("\ufffd", s)

    root = [value]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        container, key = stack.pop()
        v = container[key]
        if isinstance(v, str):
            container[key] = fix(v)
        elif isinstance(v, list):
            stack.extend((v, k) for k in range(len(v)))
        elif isinstance(v, dict):
            if any(_SURROGATE.search(k) for k in v):
                items = [(fix(k), x) for k, x in v.items()]
                v.clear()
                for k, x in items:
                    v[k] = x
            stack.extend((v, k) for k in v)
    return root[0]


_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")


class _IterativeParser:
    """A slow, non-recursive JSON parser for documents nested deeper than the C scanner's
    recursion limit. Enforces Go's 10,000-level limit."""

    def __init__(self, text: str, object_pairs_hook: Callable | None) -> None:
        self.text = text
        self.hook = object_pairs_hook

    def _ws(self, i: int) -> int:
        return _WS.match(self.text, i).end()

    def _scalar(self, i: int) -> tuple[Any, int]:
        t = self.text
        c = t[i : i + 1]
        if c == '"':
            from json.decoder import scanstring

            try:
                return scanstring(t, i + 1, True)
            except ValueError as exc:
                raise JSONError(str(exc)) from None
        if t.startswith("true", i):
            return True, i + 4
        if t.startswith("false", i):
            return False, i + 5
        if t.startswith("null", i):
            return None, i + 4
        m = _NUMBER.match(t, i)
        if m and m.end() > i:
            return Number(m.group()), m.end()
        raise JSONError(f"invalid character at offset {i}")

    def parse(self, i: int) -> tuple[Any, int]:
        t = self.text
        n = len(t)
        # Each frame: [container, pending_key_or_None, pairs(list) for objects]
        stack: list[list[Any]] = []
        i = self._ws(i)
        while True:
            if i >= n:
                raise JSONError("unexpected end of JSON input")
            c = t[i]
            if c == "{" or c == "[":
                if len(stack) >= MAX_DEPTH:
                    raise JSONError("exceeded max depth")
                i = self._ws(i + 1)
                if c == "[":
                    if t[i : i + 1] == "]":
                        value: Any = []
                        i += 1
                    else:
                        stack.append(["[", []])
                        continue
                else:
                    if t[i : i + 1] == "}":
                        value = self._finish_object([])
                        i += 1
                    else:
                        key, i = self._key(i)
                        stack.append(["{", [], key])
                        continue
            else:
                value, i = self._scalar(i)
            # attach value to parents, closing containers as they end
            while True:
                if not stack:
                    return value, i
                frame = stack[-1]
                if frame[0] == "[":
                    frame[1].append(value)
                else:
                    frame[1].append((frame[2], value))
                i = self._ws(i)
                c = t[i : i + 1]
                if c == ",":
                    i = self._ws(i + 1)
                    if frame[0] == "{":
                        frame[2], i = self._key(i)
                    break
                closer = "]" if frame[0] == "[" else "}"
                if c != closer:
                    raise JSONError(f"invalid character at offset {i}")
                i += 1
                stack.pop()
                value = frame[1] if frame[0] == "[" else self._finish_object(frame[1])

    def _key(self, i: int) -> tuple[str, int]:
        t = self.text
        if t[i : i + 1] != '"':
            raise JSONError(f"expected object key at offset {i}")
        key, i = self._scalar(i)
        i = self._ws(i)
        if t[i : i + 1] != ":":
            raise JSONError(f"expected ':' at offset {i}")
        return key, self._ws(i + 1)

    def _finish_object(self, pairs: list[tuple[str, Any]]) -> Any:
        if self.hook is not None:
            return self.hook(pairs)
        return dict(pairs)


# --------------------------------------------------------------------------- writing

_GO_ESCAPES = (
    (b"<", b"\\u003c"),
    (b">", b"\\u003e"),
    (b"&", b"\\u0026"),
    ("\u2028".encode(), b"\\u2028"),
    ("\u2029".encode(), b"\\u2029"),
)


def _go_escape(out: bytes) -> bytes:
    # These bytes can only occur inside strings: number fragments are digits, signs, '.', 'e'.
    for raw, esc in _GO_ESCAPES:
        if raw in out:
            out = out.replace(raw, esc)
    return out


def _default(obj: Any) -> Any:
    import orjson

    if isinstance(obj, Number):
        return orjson.Fragment(obj.literal)
    raise TypeError(f"cannot encode {type(obj).__name__}")


# Until orjson is needed, the standard library's encoder writes up to STDLIB_NODES nodes in all
# (in one value or over several calls): importing orjson (it brings dataclasses, inspect, uuid
# and platform with it) costs 10-20 ms, while json's C encoder writes the 7,500 nodes of a
# 220 KB catalog in about 5 ms. Indented output goes through json's Python encoder, so its
# nodes count INDENT_COST times. A process that writes more (a large catalog, a long array
# written element by element) imports orjson once.
STDLIB_NODES = 25_000
INDENT_COST = 8
_stdlib_left = STDLIB_NODES


def dumps(
    value: Any, *, sort_keys: bool = True, indent: bool = False, html_escape: bool = True
) -> bytes:
    """Go ``json.Marshal`` (or ``MarshalIndent`` with two spaces) of ``value``.

    Values: dict, list, str, :class:`Number`, bool, None, int, ``orjson.Fragment``. Python
    floats are not accepted implicitly (their text differs from Go's); pass
    ``go_float_fragment(x)`` instead. ``html_escape=False`` leaves ``< > &`` and U+2028/U+2029
    raw (for output that keeps a document's own spelling rather than Go's).
    """
    global _stdlib_left
    out = None
    if _stdlib_left > 0 and "orjson" not in sys.modules:
        cost = INDENT_COST if indent else 1
        left = _nodes_left(value, _stdlib_left // cost)
        if left >= 0:
            _stdlib_left = left * cost
            out = _stdlib_write(value, sort_keys, indent)
    if out is None:
        import orjson

        option = ((orjson.OPT_SORT_KEYS if sort_keys else 0)
                  | (orjson.OPT_INDENT_2 if indent else 0))
        try:
            out = orjson.dumps(value, default=_default, option=option)
        except orjson.JSONEncodeError:  # too deep, lone surrogate, int beyond 64 bits
            out = _write(value, sort_keys, indent)
    return _go_escape(out) if html_escape else out


def _nodes_left(value: Any, budget: int) -> int:
    """``budget`` less the nodes of ``value``; -1 past the budget (a count that stops early)
    or when ``value`` holds a Python float, whose text json and orjson write differently."""
    stack = [value]
    while stack:
        v = stack.pop()
        budget -= 1
        if isinstance(v, dict):
            stack.extend(v.values())
            budget -= len(v)  # the keys
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, float):
            return -1
        if budget < 0:
            return -1
    return budget


# What a Number is written as first: a string no other string's encoding contains between
# quotes (a '"' in a string is escaped), so each occurrence of its encoding, quotes included,
# is a Number or a string equal to it -- which the count below catches.
_NUMBER_MARK = "\x00\x00number\x00\x00"
_NUMBER_TOKEN = '"\\u0000\\u0000number\\u0000\\u0000"'


def _stdlib_write(value: Any, sort_keys: bool, indent: bool) -> bytes | None:
    """``value`` (no Python floats) written by the standard library's encoder, byte-identical
    to orjson's output; None for what only the other writers handle (lone surrogates, a
    string equal to the Number mark, nesting past the recursion limit, unknown types)."""
    import json

    literals: list[str] = []

    def number(obj: Any) -> str:
        if isinstance(obj, Number):
            literals.append(obj.literal)
            return _NUMBER_MARK
        raise TypeError(f"cannot encode {type(obj).__name__}")

    encoder = json.JSONEncoder(
        ensure_ascii=False, check_circular=False, sort_keys=sort_keys, default=number,
        indent=2 if indent else None, separators=(",", ": " if indent else ":"))
    try:
        text = encoder.encode(value)
    except (TypeError, ValueError, RecursionError):
        return None
    if literals:
        parts = text.split(_NUMBER_TOKEN)
        if len(parts) != len(literals) + 1:
            return None
        joined = [parts[0]]
        for literal, part in zip(literals, parts[1:]):
            joined += (literal, part)
        text = "".join(joined)
    try:
        return text.encode()
    except UnicodeEncodeError:  # a lone surrogate: the other writers replace it
        return None


def _encode_str(s: str) -> str:
    from json.encoder import encode_basestring

    if _SURROGATE.search(s):
        s = _SURROGATE.sub("\ufffd", s)
    return encode_basestring(s)


def _write(value: Any, sort_keys: bool, indent: bool) -> bytes:
    """The Python writer, for what orjson refuses: nesting beyond its limit, lone surrogates
    (written as U+FFFD), integers beyond 64 bits."""
    import orjson  # already imported: only dumps' orjson fallback comes here

    fragment = orjson.Fragment
    parts: list[str] = []
    # stack items: ("v", value, depth) to write a value, ("s", text) to write raw text
    stack: list[tuple] = [("v", value, 0)]
    while stack:
        item = stack.pop()
        if item[0] == "s":
            parts.append(item[1])
            continue
        _, v, depth = item
        if isinstance(v, str):
            parts.append(_encode_str(v))
        elif v is None:
            parts.append("null")
        elif v is True:
            parts.append("true")
        elif v is False:
            parts.append("false")
        elif isinstance(v, Number):
            parts.append(v.literal)
        elif isinstance(v, int):
            parts.append(str(v))
        elif isinstance(v, fragment):
            parts.append(orjson.dumps(v).decode())  # a Fragment's only reader is dumps
        elif isinstance(v, (list, dict)):
            if not v:
                parts.append("[]" if isinstance(v, list) else "{}")
                continue
            if isinstance(v, list):
                open_, close, entries = "[", "]", [(None, x) for x in v]
            else:
                open_, close = "{", "}"
                keys = sorted(v) if sort_keys else list(v)
                entries = [(k, v[k]) for k in keys]
            nl = "\n" + "  " * (depth + 1) if indent else ""
            sep = ": " if indent else ":"
            todo: list[tuple] = [("s", open_)]
            for idx, (k, x) in enumerate(entries):
                lead = ("," if idx else "") + nl
                if k is not None:
                    todo.append(("s", lead + _encode_str(k) + sep))
                else:
                    todo.append(("s", lead))
                todo.append(("v", x, depth + 1))
            todo.append(("s", ("\n" + "  " * depth if indent else "") + close))
            stack.extend(reversed(todo))
        else:
            raise TypeError(f"cannot encode {type(v).__name__}")
    return "".join(parts).encode()


# --------------------------------------------------------------------------- numbers


def go_float(x: float) -> str:
    """Go encoding/json's text for a float64: shortest round-trip digits, positional for
    1e-6 <= |x| < 1e21, exponent form otherwise (``1e-7``, ``1e+21``); ``0`` not ``0.0``."""
    if x == 0:
        return "-0" if str(x).startswith("-") else "0"
    r = repr(float(x))
    sign = ""
    if r.startswith("-"):
        sign, r = "-", r[1:]
    # split repr into digits and decimal exponent: value = 0.d1d2... * 10**exp10
    if "e" in r:
        mant, e = r.split("e")
        exp = int(e)
    else:
        mant, exp = r, 0
    if "." in mant:
        ip, fp = mant.split(".")
    else:
        ip, fp = mant, ""
    if fp == "0":
        fp = ""
    digits = (ip + fp).lstrip("0")
    # position of decimal point relative to start of `digits`
    point = len(ip) + exp - (len(ip + fp) - len((ip + fp).lstrip("0")))
    digits = digits.rstrip("0") or "0"
    ax = abs(x)
    if 1e-6 <= ax < 1e21:
        if point <= 0:
            s = "0." + "0" * (-point) + digits
        elif point >= len(digits):
            s = digits + "0" * (point - len(digits))
        else:
            s = digits[:point] + "." + digits[point:]
        return sign + s
    e10 = point - 1
    m = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    es = ("-" if e10 < 0 else "+") + ("%02d" % abs(e10) if e10 >= 0 else str(abs(e10)))
    return sign + m + "e" + es


def go_float_fragment(x: float):
    """``go_float`` as an ``orjson.Fragment`` for :func:`dumps`."""
    import orjson

    return orjson.Fragment(go_float(x))
