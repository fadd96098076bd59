"""``toon``: JSON re-encoded as TOON (Token-Oriented Object Notation), lossless to the data model.

Forced only (method ``toon``, ``lossless_to_model: true``). The same encoder/decoder back the
stateless ``caveman-engine toon encode|decode`` subcommand.

The supported subset (spec §6.12):

* root object: fields in sorted key order, 2-space indentation per level; ``key: scalar``,
  ``key:`` followed by the indented child object, ``key: {}`` for an empty object; an empty
  root object is ``{}``;
* arrays: empty ``key[0]: []`` (root ``[]``); all scalars ``key[N]: v1,v2`` (root ``[N]: …``);
  all objects with the same keys in the same source order and only scalar values
  ``key[N]{f1,f2}:`` followed by one indented row per element (root ``[N]{f1,f2}:``);
  anything else is not encodable;
* keys match ``^[A-Za-z_][A-Za-z0-9_.-]*$``;
* scalars: ``null``, ``true``, ``false`` and numbers verbatim; strings bare unless they would
  be ambiguous, then JSON-quoted with Go escaping.

Everything is iterative, so deeply nested documents never hit Python's recursion limit.
"""

from __future__ import annotations

import re
from json.decoder import scanstring as _scanstring
from typing import Any

from .. import gotext, jsonio
from . import Compressed

CONTENT_TYPE = "toon"
SAFETY_CLASS = "S4"

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*\Z")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?\Z")
_QUOTE_CHARS = re.compile('[\n\r\t":,]')
_QUOTE_FIRST = frozenset('[{"-0123456789')
# A field line: key, optional [N], optional {f1,f2}, ':' and the rest.
_FIELD = re.compile(r"([A-Za-z_][A-Za-z0-9_.\-]*)(?:\[([0-9]+)\](?:\{([^}]*)\})?)?:(.*)\Z", re.S)
_ROOT_ARRAY = re.compile(r"\[([0-9]+)\](?:\{([^}]*)\})?:(.*)\Z", re.S)


def _is_scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, bool, jsonio.Number))


def _needs_quote(s: str) -> bool:
    if not s or gotext.trim(s) != s:
        return True
    if s[0] in _QUOTE_FIRST or s in ("true", "false", "null"):
        return True
    if _QUOTE_CHARS.search(s):
        return True
    return _NUMBER.match(s) is not None


def _scalar(v: Any) -> str:
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, jsonio.Number):
        return v.literal
    if _needs_quote(v):
        return jsonio.dumps(v).decode()
    return v


def _no_dup_pairs(pairs: list[tuple[str, Any]]) -> dict:
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise ValueError("duplicate key")
        out[k] = v
    return out


def _array_lines(prefix: str, arr: list, indent: str, out: list[str], room: int | None = None) -> None:
    """Append the lines of an array field (``prefix`` is the key, or "" at the root)."""
    n = len(arr)
    if n == 0:
        out.append(f"{indent}{prefix}[0]: []" if prefix else "[]")
        return
    if all(_is_scalar(v) for v in arr):
        out.append(f"{indent}{prefix}[{n}]: " + ",".join(_scalar(v) for v in arr))
        return
    first = arr[0]
    if not isinstance(first, dict) or not first:
        raise ValueError("array is neither scalars nor uniform objects")
    fields = list(first)
    for k in fields:
        if not _KEY.match(k):
            raise ValueError("key not TOON-safe")
    row_indent = indent + "  "
    if room is not None and len(row_indent) * n > room:
        raise ValueError("output too large")
    rows = []
    for el in arr:
        if not isinstance(el, dict) or list(el) != fields:
            raise ValueError("non-uniform array of objects")
        vals = el.values()
        if not all(_is_scalar(v) for v in vals):
            raise ValueError("nested value in a tabular row")
        rows.append(row_indent + ",".join(_scalar(v) for v in vals))
    out.append(f"{indent}{prefix}[{n}]{{{','.join(fields)}}}:")
    out.extend(rows)


def encode(data: bytes, max_chars: int | None = None) -> bytes:
    """JSON bytes → TOON bytes (no trailing newline). Raises ValueError when the input is not
    exactly one JSON value without duplicate keys in the supported subset, or when the output
    would exceed ``max_chars`` characters."""
    value = jsonio.loads(data, object_pairs_hook=_no_dup_pairs)
    out: list[str] = []
    size = seen = 0
    if isinstance(value, list):
        _array_lines("", value, "", out)
    elif isinstance(value, dict):
        if not value:
            return b"{}"
        # stack of (object, sorted keys, next index, indent)
        stack: list[list[Any]] = [[value, sorted(value), 0, ""]]
        while stack:
            if max_chars is not None:
                while seen < len(out):
                    size += len(out[seen]) + 1
                    seen += 1
                if size > max_chars:
                    raise ValueError("output too large")
            frame = stack[-1]
            obj, keys, i, indent = frame
            if i == len(keys):
                stack.pop()
                continue
            frame[2] = i + 1
            k = keys[i]
            if not _KEY.match(k):
                raise ValueError("key not TOON-safe")
            v = obj[k]
            if isinstance(v, dict):
                if not v:
                    out.append(f"{indent}{k}: {{}}")
                else:
                    out.append(f"{indent}{k}:")
                    stack.append([v, sorted(v), 0, indent + "  "])
            elif isinstance(v, list):
                _array_lines(k, v, indent, out, None if max_chars is None else max_chars - size)
            else:
                out.append(f"{indent}{k}: {_scalar(v)}")
    else:
        out.append(_scalar(value))
    return "\n".join(out).encode()


# --------------------------------------------------------------------------- decoding


def _bare(tok: str) -> Any:
    if tok == "null":
        return None
    if tok == "true":
        return True
    if tok == "false":
        return False
    if _NUMBER.match(tok):
        return jsonio.Number(tok)
    if _needs_quote(tok):
        raise ValueError(f"ambiguous bare value {tok!r}")
    return tok


def _quoted(s: str, i: int) -> tuple[str, int]:
    """The JSON string starting at s[i] == '"' and the index after it."""
    try:
        return _scanstring(s, i + 1, True)
    except ValueError:
        raise ValueError("bad quoted string") from None


def _value(s: str) -> Any:
    """One scalar occupying the whole of ``s``."""
    if s.startswith('"'):
        v, end = _quoted(s, 0)
        if end != len(s):
            raise ValueError("text after a quoted string")
        return v
    return _bare(s)


def _cells(s: str) -> list[Any]:
    """Comma-separated scalars; quoted cells may contain commas."""
    out: list[Any] = []
    i, n = 0, len(s)
    while True:
        if s.startswith('"', i):
            v, i = _quoted(s, i)
            out.append(v)
        else:
            j = s.find(",", i)
            if j < 0:
                j = n
            out.append(_bare(s[i:j]))
            i = j
        if i == n:
            return out
        if s[i] != ",":
            raise ValueError("expected ',' between cells")
        i += 1


def _fields(spec: str) -> list[str]:
    fields = spec.split(",")
    if any(not _KEY.match(f) for f in fields) or len(set(fields)) != len(fields):
        raise ValueError("bad tabular header")
    return fields


def _split_indent(line: str) -> tuple[int, str]:
    content = line.lstrip(" ")
    n = len(line) - len(content)
    if n % 2 or not content:
        raise ValueError("odd indentation or blank line")
    return n // 2, content


def _rows(lines: list[str], start: int, count: int, depth: int, fields: list[str]) -> list[dict]:
    if start + count > len(lines):
        raise ValueError("row count mismatch")
    rows = []
    for line in lines[start : start + count]:
        d, content = _split_indent(line)
        if d != depth:
            raise ValueError("row count mismatch")
        cells = _cells(content)
        if len(cells) != len(fields):
            raise ValueError("row width mismatch")
        rows.append(dict(zip(fields, cells)))
    return rows


def _array_value(count: str, spec: str | None, rest: str, lines: list[str], i: int, depth: int):
    """Parse an array header's payload. Returns (list, index of the next line)."""
    n = int(count)
    if spec is None:
        if not rest.startswith(" "):
            raise ValueError("array header without values")
        body = rest[1:]
        if n == 0:
            if body != "[]":
                raise ValueError("bad empty array")
            return [], i + 1
        cells = _cells(body)
        if len(cells) != n:
            raise ValueError("array length mismatch")
        return cells, i + 1
    if rest or n == 0:
        raise ValueError("bad tabular header")
    fields = _fields(spec)
    return _rows(lines, i + 1, n, depth + 1, fields), i + 1 + n


def decode(data: bytes) -> bytes:
    """TOON bytes → compact JSON bytes (sorted keys, Go escaping, numbers verbatim). Raises
    ValueError when the input is not in the supported TOON subset."""
    text = gotext.decode(data).rstrip("\n")
    if not text:
        raise ValueError("empty input")
    lines = text.split("\n")
    first = lines[0]
    if first.startswith(" "):
        raise ValueError("indented first line")
    value: Any
    m_root = _ROOT_ARRAY.match(first)
    if m_root:
        value, nxt = _array_value(m_root[1], m_root[2], m_root[3], lines, 0, 0)
        if nxt != len(lines):
            raise ValueError("trailing lines")
    elif not _FIELD.match(first):
        if len(lines) != 1:
            raise ValueError("trailing lines")
        if first == "{}":
            value = {}
        elif first == "[]":
            value = []
        else:
            value = _value(first)
    else:
        value = {}
        stack: list[dict] = [value]  # stack[d] = object receiving fields at depth d
        i, n = 0, len(lines)
        while i < n:
            depth, content = _split_indent(lines[i])
            if depth >= len(stack):
                raise ValueError("unexpected indentation")
            del stack[depth + 1 :]
            obj = stack[depth]
            m = _FIELD.match(content)
            if not m:
                raise ValueError("expected a field")
            key, count, spec, rest = m[1], m[2], m[3], m[4]
            if key in obj:
                raise ValueError("duplicate key")
            if count is not None:
                obj[key], i = _array_value(count, spec, rest, lines, i, depth)
                continue
            if rest == "":
                # nested object: must have at least one field at depth + 1
                if i + 1 >= n or _split_indent(lines[i + 1])[0] != depth + 1:
                    raise ValueError("empty nested object")
                child: dict = {}
                obj[key] = child
                stack.append(child)
            elif rest == " {}":
                obj[key] = {}
            elif rest.startswith(" "):
                obj[key] = _value(rest[1:])
            else:
                raise ValueError("expected ': ' after key")
            i += 1
    return jsonio.dumps(value)


# o200k_base's longest token is 128 bytes: an output over 128 × the input's bytes has more
# tokens than the input has bytes, so the engine's token gate would refuse it. Nested objects
# indent quadratically (10,000 levels of a 60 KB input → 100 MB of TOON to build and count),
# so compress stops encoding at that size instead.
MAX_GROWTH = 128


def compress(data: bytes) -> Compressed | None:
    try:
        out = encode(data, max_chars=MAX_GROWTH * len(data))
    except (ValueError, RecursionError):
        return None
    return Compressed(out, method="toon", lossless_to_model=True)
