"""Token usage of one upstream response, read from a side copy of its bytes (proxy_spec §4.3).

The client's bytes are never touched: :class:`UsageScanner` only looks at copies of the chunks
the proxy forwards. Two ways in, one usage reader:

* identity-encoded SSE (``text/event-stream``): parsed line by line as the chunks pass, so a
  stream of any length costs one partial line of memory and ``message_start`` is never lost;
* anything else (JSON, NDJSON, gzip/deflate/zstd bodies): a side buffer capped at 2 MiB (over
  the cap only the last 1 MiB is kept), decoded and parsed at the end: as one JSON document if
  it is one, else line by line as SSE/NDJSON.

Usage objects: ``usage``, ``usageMetadata``, ``message.usage``, ``response.usage``,
``response.usageMetadata``; values merge by maximum across events. Anthropic
``cache_creation_input_tokens`` (or the ``cache_creation`` ephemeral 5m + 1h sum) and
``cache_read_input_tokens``; OpenAI ``*_tokens_details.cache_write_tokens`` and
``*_tokens_details.cached_tokens`` / ``cached_input_tokens``. Anything unreadable counts 0.
"""

from __future__ import annotations

import json
import os
import zlib

from .ledger import Usage

SCAN_MAX = 2 * 1024 * 1024
SCAN_KEEP = 1024 * 1024
LINE_MAX = 1024 * 1024


def _scan_max() -> int:
    try:
        v = int(os.environ.get("CAVE_USAGE_SCAN_MAX_BYTES", ""))
        return v if v > 0 else SCAN_MAX
    except ValueError:
        return SCAN_MAX


def _int(v) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0


def _get(d, *path):
    for k in path:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def usage_of(u: dict) -> Usage:
    """One usage object → (input, cache read, cache creation)."""
    cc = _int(u.get("cache_creation_input_tokens"))
    if "cache_creation_input_tokens" not in u and isinstance(u.get("cache_creation"), dict):
        cd = u["cache_creation"]
        cc = _int(cd.get("ephemeral_5m_input_tokens")) + _int(cd.get("ephemeral_1h_input_tokens"))
    cr = _int(u.get("cache_read_input_tokens"))
    for details in ("prompt_tokens_details", "input_tokens_details"):
        d = u.get(details)
        if isinstance(d, dict):
            cc = max(cc, _int(d.get("cache_write_tokens")))
            cr = max(cr, _int(d.get("cached_tokens")))
    cr = max(cr, _int(u.get("cached_input_tokens")))
    inp = max(_int(u.get("input_tokens")), _int(u.get("prompt_tokens")),
              _int(u.get("promptTokenCount")))
    return Usage(inp, cr, cc)


def _merge(acc: Usage, u: Usage) -> None:
    acc.input_tokens = max(acc.input_tokens, u.input_tokens)
    acc.cache_read = max(acc.cache_read, u.cache_read)
    acc.cache_creation = max(acc.cache_creation, u.cache_creation)


def scan_value(doc, acc: Usage) -> None:
    if not isinstance(doc, dict):
        return
    for path in (("usage",), ("usageMetadata",), ("message", "usage"), ("response", "usage"),
                 ("response", "usageMetadata")):
        u = _get(doc, *path)
        if isinstance(u, dict):
            _merge(acc, usage_of(u))


def scan_line(line: bytes, acc: Usage) -> None:
    line = line.strip()
    if not line or line.startswith((b"event:", b":", b"id:", b"retry:")):
        return
    if line.startswith(b"data:"):
        line = line[5:].strip()
    if line == b"[DONE]" or b"sage" not in line:  # usage / usageMetadata
        return
    try:
        scan_value(json.loads(line), acc)
    except (ValueError, RecursionError):
        pass


def scan_document(data: bytes, acc: Usage) -> None:
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        for line in data.split(b"\n"):
            scan_line(line, acc)
        return
    scan_value(doc, acc)


def _decode(data: bytes, encoding: str) -> bytes | None:
    enc = encoding.strip().lower()
    if enc in ("", "identity"):
        return data
    try:
        if enc in ("gzip", "x-gzip"):
            return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data, 64 * SCAN_MAX)
        if enc == "deflate":
            try:
                return zlib.decompressobj().decompress(data, 64 * SCAN_MAX)
            except zlib.error:
                return zlib.decompressobj(-zlib.MAX_WBITS).decompress(data, 64 * SCAN_MAX)
        if enc == "zstd":
            try:
                from compression import zstd  # Python 3.14+
            except ImportError:
                try:
                    import zstandard
                except ImportError:
                    return None
                return zstandard.ZstdDecompressor().decompressobj().decompress(data)
            return zstd.decompress(data)
    except Exception:
        return None
    return None


class UsageScanner:
    def __init__(self, content_type: str = "", content_encoding: str = "") -> None:
        self.encoding = content_encoding or ""
        self.streaming = (
            self.encoding.strip().lower() in ("", "identity")
            and content_type.split(";")[0].strip().lower() == "text/event-stream"
        )
        self.usage = Usage()
        self._partial = bytearray()
        self._skipping = False  # inside an over-long line
        self._buf = bytearray()
        self._overflowed = False
        self._max = _scan_max()

    def feed(self, chunk: bytes) -> None:
        if self.streaming:
            self._feed_lines(chunk)
            return
        self._buf += chunk
        if len(self._buf) > self._max:
            self._overflowed = True
            del self._buf[: len(self._buf) - min(SCAN_KEEP, self._max)]

    def _feed_lines(self, chunk: bytes) -> None:
        first = chunk.find(b"\n")
        if first >= 0:
            # the line that earlier chunks began ends here
            if self._skipping:
                self._skipping = False
            elif self._partial:
                self._partial += chunk[:first]
                scan_line(bytes(self._partial), self.usage)
            else:
                scan_line(chunk[:first], self.usage)
            self._partial.clear()
            last = chunk.rfind(b"\n")
            # The lines in between are whole. Only a line with "usage" in it can carry usage
            # (scan_line passes over any other), so they are looked at one by one only when
            # the chunk has that word between them at all.
            if last > first and chunk.find(b"sage", first + 1, last) >= 0:
                for line in chunk[first + 1:last].split(b"\n"):
                    if b"sage" in line:
                        scan_line(line, self.usage)
            start = last + 1
        else:
            start = 0
        if start < len(chunk) and not self._skipping:
            self._partial += chunk[start:]
            if len(self._partial) > LINE_MAX:
                self._partial.clear()
                self._skipping = True

    def finish(self) -> Usage:
        if self.streaming:
            if self._partial and not self._skipping:
                scan_line(bytes(self._partial), self.usage)
            self._partial.clear()
            return self.usage
        data = bytes(self._buf)
        self._buf = bytearray()
        if self._overflowed and self.encoding.strip().lower() not in ("", "identity"):
            return self.usage  # the tail of a compressed stream cannot be decoded
        decoded = _decode(data, self.encoding)
        if decoded:
            scan_document(decoded, self.usage)
        return self.usage
