"""Rewriting MCP list responses in place, byte-exactly.

A list response (``tools/list``, ``prompts/list``, ``resources/list``,
``resources/templates/list``) is rewritten by *splicing*: only the list value, the description
strings inside it and the result's ``_meta`` change; every other byte of the line (key order,
whitespace, number literals of any size, escapes) is the server's. The original list - the
exact bytes of the array in the server's line - is stored in the recovery store and its handle
is added to ``result._meta["caveman/recovery_handle"]``.

Tools go through a tool-schema content type of the engine (default ``toolschema``) as one
in-process ``Engine.compress`` of the array; prompts, resources and resource templates (and
tools under ``--type prose``) have the string values of the chosen fields shrunk with the
``prose`` rules, walking ``inputSchema`` for tools like the original caveman-shrink.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from typing import Any, Callable

LIST_KEYS = {
    "tools/list": "tools",
    "prompts/list": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
}
META_HANDLE = "caveman/recovery_handle"
CACHE_ENTRIES = 32  # recent lists: a repeated tools/list costs one store lookup
RETRIEVE_TOOL_NAME = "caveman_retrieve"

RETRIEVE_TOOL: dict[str, Any] = {
    "name": RETRIEVE_TOOL_NAME,
    "description": (
        "Return the original, uncompressed text stored under a caveman recovery handle "
        "(ccr_...), e.g. the full tool list from _meta \"caveman/recovery_handle\". "
        "Pass query to get only the parts that match it."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "handle": {"type": "string", "description": "Recovery handle, ccr_..."},
            "query": {"type": "string", "description": "Optional keywords to narrow the original."},
        },
        "required": ["handle"],
    },
}

_WS = re.compile(r"[ \t\n\r]*")
# One JSON token of a valid document (strings, structural characters, scalars).
_TOKEN = re.compile(
    r'[ \t\n\r]*(?:("[^"\\]*(?:\\.[^"\\]*)*")|([{}\[\],:])|([^ \t\n\r{}\[\],:"]+))', re.S
)
_DECODER = json.JSONDecoder()
_SURROGATE = re.compile("[\ud800-\udfff]")


def json_string(s: str) -> str:
    """A JSON string literal for ``s`` (non-ASCII raw, lone surrogates escaped)."""
    out = json.dumps(s, ensure_ascii=False)
    if _SURROGATE.search(out):
        out = _SURROGATE.sub(lambda m: "\\u%04x" % ord(m.group(0)), out)
    return out


class _Invalid(Exception):
    pass


def _ws(text: str, i: int) -> int:
    return _WS.match(text, i).end()


def object_members(text: str, i: int) -> list[tuple[str, int, int]]:
    """Members of the JSON object starting at ``text[i] == '{'``: (key, value start, value end)."""
    if text[i] != "{":
        raise _Invalid
    members = []
    i = _ws(text, i + 1)
    if text[i] == "}":
        return members
    scanstring = json.decoder.scanstring
    while True:
        if text[i] != '"':
            raise _Invalid
        key, i = scanstring(text, i + 1)
        i = _ws(text, i)
        if text[i] != ":":
            raise _Invalid
        start = _ws(text, i + 1)
        _, end = _DECODER.raw_decode(text, start)
        members.append((key, start, end))
        i = _ws(text, end)
        if text[i] == ",":
            i = _ws(text, i + 1)
            continue
        if text[i] == "}":
            return members
        raise _Invalid


def _last(members: list[tuple[str, int, int]], key: str) -> tuple[int, int] | None:
    found = None
    for k, s, e in members:
        if k == key:
            found = (s, e)  # duplicate keys: the last one wins, as in every JSON parser here
    return found


def splice(text: str, edits: list[tuple[int, int, str]]) -> str:
    parts = []
    pos = 0
    for start, end, new in sorted(edits):
        parts.append(text[pos:start])
        parts.append(new)
        pos = end
    parts.append(text[pos:])
    return "".join(parts)


def prose_edits(
    text: str, start: int, end: int, fields: frozenset[str], walk_schema: bool,
    shrink: Callable[[str], str],
) -> list[tuple[int, int, str]]:
    """Edits shrinking the chosen string fields of the items of the array ``text[start:end]``.

    Item level: a string directly under an item member named in ``fields``. With
    ``walk_schema`` (tools), also every string directly under a member named in ``fields``
    anywhere inside an item's ``inputSchema`` (caveman-shrink §3.1). Items that are not objects
    (``null``, strings, numbers) are left alone. Iterative: any depth."""
    edits: list[tuple[int, int, str]] = []
    if not fields:
        return edits
    # frame: [is_object, context, key, expecting_key]; contexts: list, item, schema, other
    stack: list[list] = []
    pos = start
    while pos < end:
        m = _TOKEN.match(text, pos)
        if m is None or m.end() > end:
            break
        pos = m.end()
        string, punct = m.group(1), m.group(2)
        top = stack[-1] if stack else None
        if punct is not None:
            if punct in "{[":
                ctx = "list" if top is None else _child_context(top, punct == "{", walk_schema)
                stack.append([punct == "{", ctx, None, punct == "{"])
            elif punct in "}]":
                stack.pop()
            elif punct == ":":
                top[3] = False
            elif punct == ",":
                if top[0]:
                    top[3] = True
            continue
        if top is None:
            break
        if top[0] and top[3]:  # an object key
            top[2] = json.loads(string)
            continue
        if string is not None and top[0] and top[1] in ("item", "schema") and top[2] in fields:
            old = json.loads(string)
            new = shrink(old)
            if new != old:
                edits.append((m.start(1), m.end(1), json_string(new)))
    return edits


def _child_context(parent: list, child_is_object: bool, walk_schema: bool) -> str:
    _, ctx, key, _ = parent
    if ctx == "list":
        return "item" if child_is_object else "other"
    if ctx == "item":
        return "schema" if (walk_schema and key == "inputSchema") else "other"
    if ctx == "schema":
        return "schema"
    return "other"


def _with_tool(listing: str) -> str:
    """``listing`` (a JSON array's text) with the caveman_retrieve tool appended."""
    close = listing.rstrip(" \t\n\r")
    if not close.endswith("]"):
        raise _Invalid
    inner = close[:-1].rstrip(" \t\n\r")
    sep = "" if inner.endswith("[") else ","
    tool = json.dumps(RETRIEVE_TOOL, ensure_ascii=False, separators=(",", ":"))
    return inner + sep + tool + "]" + listing[len(close):]


class Rewriter:
    """Rewrites list responses; thread-safe (one engine use at a time)."""

    def __init__(
        self,
        engine_factory: Callable[[], Any],
        tool_type: str = "toolschema",
        fields: tuple[str, ...] = ("description",),
        retrieve_tool: bool = False,
    ) -> None:
        self._engine_factory = engine_factory
        self.tool_type = tool_type
        self.fields = frozenset(fields)
        self.retrieve_tool = retrieve_tool
        self.lock = threading.Lock()
        self._cache: dict[tuple[str, bytes], tuple[str, str]] = {}

    def rewrite(self, line: bytes, method: str, msg: dict, first_page: bool = True) -> bytes | None:
        """The rewritten line (same terminator bytes), or None to forward ``line`` as is."""
        key = LIST_KEYS.get(method)
        result = msg.get("result")
        if key is None or not isinstance(result, dict) or not isinstance(result.get(key), list):
            return None
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            return None
        try:
            with self.lock:
                return self._rewrite(text, key, result, first_page)
        except (_Invalid, ValueError, IndexError, RecursionError):
            return None

    def _rewrite(self, text: str, key: str, result: dict, first_page: bool) -> bytes | None:
        i = _ws(text, 0)
        top = object_members(text, i)
        span = _last(top, "result")
        if span is None:
            return None
        r_start, r_end = span
        members = object_members(text, r_start)
        list_span = _last(members, key)
        if list_span is None or text[list_span[0]] != "[":
            return None
        l_start, l_end = list_span
        original = text[l_start:l_end]
        new_list, handle = self._compress_list(original, key)

        add_tool = (
            self.retrieve_tool
            and key == "tools"
            and first_page
            and not any(
                isinstance(t, dict) and t.get("name") == RETRIEVE_TOOL_NAME for t in result[key]
            )
        )
        # What goes out when the list is not rewritten: the line as is, or with the tool added.
        plain = splice(text, [(l_start, l_end, _with_tool(original))]) if add_tool else None
        if new_list is None:
            return plain.encode("utf-8") if plain is not None else None
        edits = [(l_start, l_end, _with_tool(new_list) if add_tool else new_list)]
        meta_edit = self._meta_edit(text, r_start, members, handle)
        if meta_edit is None:
            return plain.encode("utf-8") if plain is not None else None
        edits.append(meta_edit)
        out = splice(text, edits).encode("utf-8")
        # The token gate on the whole response, _meta handle included: a small list whose
        # rewrite saves less than the handle costs goes out unrewritten.
        engine = self._engine_factory()
        baseline = (plain if plain is not None else text).encode("utf-8")
        if engine is not None and engine.count(out) >= engine.count(baseline):
            return baseline if plain is not None else None
        return out

    def _meta_edit(self, text, r_start, members, handle) -> tuple[int, int, str] | None:
        member = '"' + META_HANDLE + '":' + json_string(handle)
        meta = _last(members, "_meta")
        if meta is None:
            # first member of result
            return (r_start + 1, r_start + 1, '"_meta":{' + member + "},")
        m_start, m_end = meta
        if text[m_start] != "{":
            return None  # a non-object _meta: leave the response alone
        inner = object_members(text, m_start)
        existing = _last(inner, META_HANDLE)
        if existing is not None:
            return (existing[0], existing[1], json_string(handle))
        sep = "," if inner else ""
        return (m_start + 1, m_start + 1, member + sep)

    def _compress_list(self, original: str, key: str) -> tuple[str | None, str | None]:
        engine = self._engine_factory()
        if engine is None or getattr(engine, "store", None) is None:
            return None, None
        data = original.encode("utf-8")
        cache_key = (key, hashlib.sha256(data).digest())
        hit = self._cache.get(cache_key)
        if hit is not None:
            try:
                if engine.store.get(hit[1]) == data:  # still recoverable: reuse
                    return hit
            except Exception:
                pass
            del self._cache[cache_key]
        new, handle = self._compress_list_uncached(engine, data, original, key)
        if handle is not None:
            if len(self._cache) >= CACHE_ENTRIES:
                self._cache.pop(next(iter(self._cache)))
            self._cache[cache_key] = (new, handle)
        return new, handle

    def _compress_list_uncached(self, engine, data: bytes, original: str, key: str):
        if key == "tools" and self.tool_type != "prose":
            res = engine.compress(data, self.tool_type)
            if res.recovery_handle is None or res.error is not None:
                return None, None
            out = res.output
            if b"\n" in out or b"\r" in out:
                return None, None
            try:
                json.loads(out)
            except ValueError:
                return None, None
            return out.decode("utf-8"), res.recovery_handle

        from ..compressors.prose import shrink

        edits = prose_edits(original, 0, len(original), self.fields, key == "tools", shrink)
        if not edits:
            return None, None
        new = splice(original, edits)
        new_data = new.encode("utf-8")
        before = engine.count(data)
        after = engine.count(new_data)
        if after >= before:
            return None, None
        try:
            handle = engine.store.put(
                data,
                content_type="prose",
                compressor="prose",
                tokens_before=before,
                tokens_after=after,
            )
        except Exception:
            return None, None  # never emit what cannot be recovered
        return new, handle
