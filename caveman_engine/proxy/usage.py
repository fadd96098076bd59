"""Token usage of one upstream response, read from a side copy of its bytes (proxy_spec §4.3).

The client's bytes are never touched: :class:`UsageScanner` only looks at copies of the chunks
the proxy forwards. Two ways in, one usage reader:

* identity-encoded SSE (``text/event-stream``): parsed line by line as the chunks pass, so a
  stream of any length costs one partial line of memory and ``message_start`` is never lost;
* anything else (JSON, NDJSON): a side buffer capped at 2 MiB (over the cap only the last
  1 MiB is kept), parsed at the end: as one JSON document if it is one, else line by line as
  SSE/NDJSON.

gzip and deflate bodies are decoded as they pass, 256 KiB at a time and at most 2 side
buffers' worth (4 MiB) in all (nor more than 4 MiB of compressed input: a stream of empty
blocks), into the same two readers; a zstd body is kept compressed
(within the cap) and decoded at the end under the same bound. Nothing is decoded past the
bound: an answer that inflates without end costs one slice of memory.

Usage objects: ``usage``, ``usageMetadata``, ``message.usage``, ``response.usage``,
``response.usageMetadata``; values merge by maximum across events. Anthropic
``cache_creation_input_tokens`` (or the ``cache_creation`` ephemeral 5m + 1h sum) and
``cache_read_input_tokens``; OpenAI ``*_tokens_details.cache_write_tokens`` and
``*_tokens_details.cached_tokens`` / ``cached_input_tokens``. Anything unreadable counts 0;
after :data:`MISSES_MAX` lines that name usage and are no JSON, an answer's other lines are
not parsed.
"""

from __future__ import annotations

import json
import os
import zlib

import orjson

from .ledger import Usage

SCAN_MAX = 2 * 1024 * 1024
SCAN_KEEP = 1024 * 1024
LINE_MAX = 1024 * 1024


def scan_max() -> int:
    """The side buffer's cap: ``CAVE_USAGE_SCAN_MAX_BYTES`` when a positive integer."""
    try:
        v = int(os.environ.get("CAVE_USAGE_SCAN_MAX_BYTES", ""))
        return v if v > 0 else SCAN_MAX
    except ValueError:
        return SCAN_MAX


def _int(v) -> int:
    # a positive JSON integer (bool is not one), else 0
    return v if type(v) is int and v > 0 else 0


class _Inexact(Exception):
    """A number that orjson may have read otherwise than the standard library."""


def _int_orjson(v) -> int:
    """:func:`_int` of a value orjson decoded. orjson turns an integer beyond 64 bits into a
    float, where the standard library keeps the integer: such a float (or any float that
    large) sends the document back to the standard library."""
    if type(v) is int:
        return v if v > 0 else 0
    if type(v) is float and v >= 1.8e19:
        raise _Inexact
    return 0


def usage_of(u: dict, num=_int) -> Usage:
    """One usage object → (input, cache read, cache creation)."""
    get = u.get
    cc = get("cache_creation_input_tokens")
    if cc is None and "cache_creation_input_tokens" not in u:
        cd = get("cache_creation")
        cc = num(cd.get("ephemeral_5m_input_tokens")) + \
            num(cd.get("ephemeral_1h_input_tokens")) if isinstance(cd, dict) else 0
    else:
        cc = num(cc)
    cr = num(get("cache_read_input_tokens"))
    for details in ("prompt_tokens_details", "input_tokens_details"):
        d = get(details)
        if isinstance(d, dict):
            v = num(d.get("cache_write_tokens"))
            if v > cc:
                cc = v
            v = num(d.get("cached_tokens"))
            if v > cr:
                cr = v
    v = num(get("cached_input_tokens"))
    if v > cr:
        cr = v
    inp = max(num(get("input_tokens")), num(get("prompt_tokens")),
              num(get("promptTokenCount")))
    return Usage(inp, cr, cc)


def _merge(acc: Usage, u: Usage) -> None:
    if u.input_tokens > acc.input_tokens:
        acc.input_tokens = u.input_tokens
    if u.cache_read > acc.cache_read:
        acc.cache_read = u.cache_read
    if u.cache_creation > acc.cache_creation:
        acc.cache_creation = u.cache_creation


def scan_value(doc, acc: Usage, num=_int) -> None:
    if not isinstance(doc, dict):
        return
    get = doc.get
    for u in (get("usage"), get("usageMetadata")):
        if isinstance(u, dict):
            _merge(acc, usage_of(u, num))
    for outer, name in (("message", "usage"), ("response", "usage"),
                        ("response", "usageMetadata")):
        d = get(outer)
        if isinstance(d, dict):
            u = d.get(name)
            if isinstance(u, dict):
                _merge(acc, usage_of(u, num))


def _scan_json(data: bytes, acc: Usage) -> None:
    """The usage of one JSON document; ValueError or RecursionError when it is not one.
    orjson decodes first (several times faster than the standard library); a document it
    refuses (NaN, lone surrogates, a BOM, nesting past 1,024) or whose usage numbers it may
    have read otherwise (see :func:`_int_orjson`) is decoded by the standard library, so the
    usage is the same either way. (Only a document nested deeper than the standard
    library's recursion limit but within orjson's is now read where it was not.)"""
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    else:
        found = Usage()
        try:
            scan_value(doc, found, _int_orjson)
        except _Inexact:
            pass
        else:
            _merge(acc, found)
            return
    scan_value(json.loads(data), acc)


def scan_line(line: bytes, acc: Usage) -> bool:
    """The usage of one SSE/NDJSON line; False when it named usage and was no JSON."""
    line = line.strip()
    if not line or line.startswith((b"event:", b":", b"id:", b"retry:")):
        return True
    if line.startswith(b"data:"):
        line = line[5:].strip()
    # usage / usageMetadata (find, not `in`: bytes.__contains__ first tries the word as an
    # integer and builds and drops a TypeError each time)
    if line == b"[DONE]" or line.find(b"sage") < 0:
        return True
    try:
        _scan_json(line, acc)
    except (ValueError, RecursionError):
        return False
    return True


# Lines that name usage but are no JSON cost two failed parses each: after this many in one
# answer no more of its lines are parsed (an answer of "usage" lines that are not JSON would
# otherwise hold the event loop for seconds per 2 MiB; real streams have none).
MISSES_MAX = 64


class _Lines:
    """scan_line over the lines of one answer, until :data:`MISSES_MAX` of them failed."""

    __slots__ = ("acc", "misses")

    def __init__(self, acc: Usage) -> None:
        self.acc = acc
        self.misses = 0

    def __call__(self, line: bytes) -> None:
        if self.misses < MISSES_MAX and not scan_line(line, self.acc):
            self.misses += 1


def scan_document(data: bytes, acc: Usage, lines: _Lines | None = None) -> None:
    try:
        _scan_json(data, acc)
    except (ValueError, RecursionError):
        lines = lines or _Lines(acc)
        for line in data.split(b"\n"):
            if lines.misses >= MISSES_MAX:
                return
            lines(line)


# A compressed answer is decoded up to 2 side buffers' worth (4 MiB): past one side buffer only
# its tail is read anyway.
DECODE_MAX_FACTOR = 2
DECODE_STEP = 256 * 1024  # and at most this much at a time (one slice in memory)
_ZLIB = ("gzip", "x-gzip", "deflate")
HEAD_MAX = 64 * 1024  # input kept for the raw-deflate retry, at most


class _Inflater:
    """gzip / deflate decoded as the chunks pass, in bounded slices: at most ``limit`` bytes
    come out in all, so a small answer that inflates without end (a "gzip bomb") costs one
    slice of memory and ``limit`` bytes of work, then is left undecoded. ``deflate`` is the
    zlib format, or raw deflate when its first bytes say otherwise (as servers send both)."""

    def __init__(self, encoding: str, limit: int) -> None:
        self.raw_fallback = encoding == "deflate"
        self._d = zlib.decompressobj(16 + zlib.MAX_WBITS if encoding != "deflate"
                                     else zlib.MAX_WBITS)
        self._head = b""  # the input before any output, for the raw-deflate retry
        self.left = limit
        self.fed_left = limit  # compressed bytes it still reads (a stream of empty blocks)
        self.failed = False

    def feed(self, data: bytes, out) -> None:
        if self.failed or self.left <= 0 or self.fed_left <= 0 or self._d.eof:
            return
        self.fed_left -= len(data)
        if self.raw_fallback:
            self._head += data
        try:
            piece = self._d.decompress(data, min(DECODE_STEP, self.left))
            if self.raw_fallback and len(self._head) > HEAD_MAX:
                # this much input and zlib still finds no fault and makes no output: a zlib
                # stream (of empty blocks, or an odd one), not raw deflate
                self.raw_fallback = False
                self._head = b""
            while True:
                if piece:
                    self.raw_fallback = False
                    self._head = b""
                    self.left -= len(piece)
                    out(piece)
                tail = self._d.unconsumed_tail
                if not tail or self.left <= 0:
                    return
                piece = self._d.decompress(tail, min(DECODE_STEP, self.left))
        except zlib.error:
            if self.raw_fallback:
                self.raw_fallback = False
                self._d = zlib.decompressobj(-zlib.MAX_WBITS)
                head, self._head = self._head, b""
                self.feed(head, out)
            else:
                self.failed = True


def _unzstd(data: bytes, limit: int, out) -> None:
    """A zstd body (kept compressed, within the side buffer's cap) decoded at the end, at
    most ``limit`` bytes, a slice at a time."""
    import io

    try:
        try:
            from compression import zstd  # Python 3.14+
        except ImportError:
            import zstandard

            reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data))
        else:
            reader = zstd.ZstdFile(io.BytesIO(data))
        while limit > 0:
            piece = reader.read(min(DECODE_STEP, limit))
            if not piece:
                return
            limit -= len(piece)
            out(piece)
    except Exception:
        return


class UsageScanner:
    def __init__(self, content_type: str = "", content_encoding: str = "",
                 max_bytes: int | None = None) -> None:
        self.encoding = (content_encoding or "").strip().lower()
        if self.encoding == "identity":
            self.encoding = ""
        self.streaming = content_type.split(";")[0].strip().lower() == "text/event-stream"
        self.usage = Usage()
        self._partial = bytearray()
        self._skipping = False  # inside an over-long line
        self._buf = bytearray()
        self._overflowed = False
        self._max = max_bytes if max_bytes is not None else scan_max()
        self._inflater = _Inflater(self.encoding, DECODE_MAX_FACTOR * self._max) \
            if self.encoding in _ZLIB else None
        self._raw = bytearray() if self.encoding and self._inflater is None else None
        self._decoded = self._feed_lines if self.streaming else self._keep
        self._lines = _Lines(self.usage)

    def feed(self, chunk: bytes) -> None:
        if not self.encoding:
            self._decoded(chunk)
        elif self._inflater is not None:
            self._inflater.feed(chunk, self._decoded)
        elif len(self._raw) <= self._max:  # zstd (or unknown): kept as sent, up to the cap
            self._raw += chunk

    def _keep(self, chunk: bytes) -> None:
        self._buf += chunk
        if len(self._buf) > self._max:
            self._overflowed = True
            del self._buf[: len(self._buf) - min(SCAN_KEEP, self._max)]

    def _feed_lines(self, chunk: bytes) -> None:
        first = chunk.find(b"\n")
        if first >= 0:
            # the line that earlier chunks began ends here
            lines = self._lines
            if self._skipping:
                self._skipping = False
            elif self._partial:
                self._partial += chunk[:first]
                lines(bytes(self._partial))
            else:
                lines(chunk[:first])
            self._partial.clear()
            last = chunk.rfind(b"\n")
            # The lines in between are whole. Only a line with "usage" in it can carry usage
            # (scan_line passes over any other), so they are looked at one by one only when
            # the chunk has that word between them at all.
            if last > first and lines.misses < MISSES_MAX \
                    and chunk.find(b"sage", first + 1, last) >= 0:
                for line in chunk[first + 1:last].split(b"\n"):
                    if line.find(b"sage") >= 0:
                        lines(line)
            start = last + 1
        else:
            start = 0
        if start < len(chunk) and not self._skipping:
            self._partial += chunk[start:]
            if len(self._partial) > LINE_MAX:
                self._partial.clear()
                self._skipping = True

    def finish(self) -> Usage:
        if self._raw is not None:
            raw, self._raw = bytes(self._raw), None
            if self.encoding == "zstd" and len(raw) <= self._max:
                _unzstd(raw, DECODE_MAX_FACTOR * self._max, self._decoded)
        if self.streaming:
            if self._partial and not self._skipping:
                self._lines(bytes(self._partial))
            self._partial.clear()
            return self.usage
        data = bytes(self._buf)
        self._buf = bytearray()
        if data:
            scan_document(data, self.usage, self._lines)
        return self.usage
