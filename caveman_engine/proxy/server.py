"""The proxy's aiohttp application (proxy_spec §1.2, §2, §5).

One handler for every route. Per request: route (404 otherwise) → read the body (32 MiB cap,
413) → maybe rewrite the ``tools`` span (level on, route eligible, session not frozen, all
fail-closed gates passed) → send upstream (transport errors: 3 attempts, then 502; a 4xx on a
rewritten body: once more with the original bytes) → stream the upstream's status, headers and
body bytes back in ≤32 KiB reads, teeing a side copy to the usage scanner → tell the ledger.

Nothing here compresses: :mod:`.rewrite` calls the engine, :mod:`.catalog` splices.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import time
from dataclasses import dataclass

import aiohttp
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

from . import catalog, eager
from .config import Config
from .ledger import Ledger, session_id
from .rewrite import Rewriter
from .usage import UsageScanner, scan_max

log = logging.getLogger("caveman_engine.proxy")

CHUNK = 32 * 1024
DRAIN_4XX = 1024 * 1024
ATTEMPTS = 3
OFFLOOP_BYTES = 256 * 1024  # bodies above this are parsed in a worker thread
RETRY_SLEEPS = (0.2, 0.4)
URL_CACHE = 256  # distinct upstream URLs kept parsed

ANTHROPIC_VERSION = "2023-06-01"
FORWARD_HEADERS = (
    "content-type", "accept", "accept-encoding", "idempotency-key", "openai-organization",
    "openai-project", "anthropic-version", "anthropic-beta", "api-version",
)
HOP_BY_HOP = frozenset((
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
    "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
))
_SLUG = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
_HEX32 = re.compile(r"[0-9a-f]{32}")

STRIP_HEADER = "x-caveman-toolschema-strip"
HANDLE_HEADER = "x-caveman-toolschema-recovery-handle"
TRIPWIRE_HEADER = "x-caveman-tripwire"
OPTIMIZATION_HEADER = "x-cave-optimization"


@dataclass(frozen=True)
class Route:
    provider: str
    eligible: bool  # the catalog may be rewritten
    upstream_path: str


_EXACT = {
    "/v1/messages": ("anthropic", True),
    "/v1/messages/count_tokens": ("anthropic", False),
    "/v1/chat/completions": ("openai", True),
    "/v1/responses": ("openai", True),
    "/v1/embeddings": ("openai", False),
}


def match_route(path: str) -> Route | None:
    """Exact paths, optionally under ``/anthropic`` (Anthropic routes) or ``/openai`` (OpenAI
    routes); ``/gemini/...`` is a prefix route, forwarded untouched."""
    if path.startswith("/gemini/") and len(path) > len("/gemini/"):
        return Route("gemini", False, path[len("/gemini"):])
    for prefix in ("/anthropic", "/openai"):
        if path.startswith(prefix + "/"):
            hit = _EXACT.get(path[len(prefix):])
            if hit and hit[0] == prefix[1:]:
                return Route(hit[0], hit[1], path[len(prefix):])
            return None
    hit = _EXACT.get(path)
    if hit:
        return Route(hit[0], hit[1], path)
    return None


def _uuid_text(value: int) -> str:
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def uuid7(random_bytes: bytes | None = None) -> str:
    """A UUIDv7: the time in ms and 74 random bits (from ``random_bytes``, 10 bytes, when
    given)."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(random_bytes if random_bytes is not None else os.urandom(10), "big")
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | (rand >> 68 & 0xFFF) << 64
    value |= 0b10 << 62 | (rand & ((1 << 62) - 1))
    return _uuid_text(value)


def _uuid4_hex(random_bytes: bytes | None = None) -> str:
    """``uuid.uuid4().hex`` without the UUID object: 122 random bits (from ``random_bytes``,
    16 bytes, when given), version 4, variant RFC 4122."""
    value = int.from_bytes(random_bytes if random_bytes is not None else os.urandom(16), "big")
    value = (value & ~(0xF << 76) & ~(0b11 << 62)) | 0x4 << 76 | 0b10 << 62
    return f"{value:032x}"


def trace_id(headers, random_bytes: bytes | None = None) -> str:
    t = headers.get("x-cave-trace-id", "")
    if len(t) == 32:
        return t
    tp = headers.get("traceparent", "")
    if len(tp) >= 55:
        return tp[3:35]
    return _uuid4_hex(random_bytes)


class UpstreamUnavailable(Exception):
    pass


class _StartWithFirstChunk(web.StreamResponse):
    """A stream response whose headers wait for its first write, as aiohttp's own
    :class:`web.Response` does: used only when that first chunk is already in hand, so the
    headers and the chunk leave in one write and nothing is held back. (An aiohttp without
    this switch sends the headers first: the same bytes in two writes.)"""

    _send_headers_immediately = False


class _Runner(web.ServerRunner):
    """aiohttp's runner for a low-level server, made and torn down with the proxy's upstream
    client session."""

    def __init__(self, proxy: Proxy) -> None:
        super().__init__(None, handle_signals=False, shutdown_timeout=2)
        self._proxy = proxy

    async def _make_server(self) -> web.Server:
        await self._proxy._start()
        return web.Server(self._proxy.dispatch, access_log=None, auto_decompress=False,
                          handler_cancellation=True)  # client gone: stop the upstream call

    async def _cleanup_server(self) -> None:
        await self._proxy._stop()


class Proxy:
    def __init__(self, config: Config, engine=None, *, ledger: Ledger | None = None,
                 retry_sleeps: tuple[float, ...] = RETRY_SLEEPS) -> None:
        self.config = config
        self.ledger = ledger if ledger is not None else Ledger()
        self.rewriter = Rewriter(engine, config.level)
        self.retry_sleeps = retry_sleeps
        self._client: aiohttp.ClientSession | None = None
        self._urls: dict[tuple[str, str, str], URL] = {}
        self._eager_loop: asyncio.AbstractEventLoop | None = None
        self._scan_max = scan_max()  # read once, not for every response
        self.requests = 0

    # -- lifecycle

    async def dispatch(self, request: web.BaseRequest) -> web.StreamResponse:
        """Every request of the server: the two health checks, else :meth:`handle`. (The
        proxy has one handler, so it runs on aiohttp's low-level server, without an
        application's router and middleware chain.)"""
        if request.method in ("GET", "HEAD"):
            path = request.rel_url.path
            if path == "/health/live":
                return await self._live(request)
            if path == "/health/ready":
                return await self._ready(request)
        expect = request.headers.get("expect")
        if expect:
            # as aiohttp's router does: let a client that waits for it send its body
            if request.version == aiohttp.HttpVersion11:
                if expect.lower() != "100-continue":
                    return web.Response(status=417, text=f"Unknown Expect: {expect}")
                await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                request.writer.output_size = 0
        if request.rel_url.path.startswith(("/sdk/v1/", "/caveman/v1/middleware/")):
            from . import sdk  # the Caveman runtime protocol (docs/sdk.md)

            return await sdk.handle(self, request)
        return await self.handle(request)

    async def _start(self) -> None:
        # the upstream body goes out in the step that sends its headers (see eager)
        self._eager_loop = asyncio.get_running_loop() \
            if eager.install(asyncio.get_running_loop()) else None
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self.config.connect_timeout,
            sock_read=self.config.upstream_timeout,
        )
        self._client = aiohttp.ClientSession(
            timeout=timeout,
            auto_decompress=False,
            skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
            connector=aiohttp.TCPConnector(limit=0, enable_cleanup_closed=True),
            # one upstream session serves every client: never replay one client's cookies
            # to another (and no cookie work per request)
            cookie_jar=aiohttp.DummyCookieJar(),
            trust_env=False,
        )

    async def _stop(self) -> None:
        if self._client is not None:
            await self._client.close()
        if self._eager_loop is not None:
            eager.uninstall(self._eager_loop)
            self._eager_loop = None

    def runner(self) -> web.BaseRunner:
        """A runner for the proxy's server: request bodies kept as sent (no inbound
        decompression), the handler cancelled when its client disconnects, no access log.
        Its setup opens the upstream client session and its cleanup closes it."""
        return _Runner(self)

    async def _live(self, request):
        return web.json_response({"status": "ok"})

    async def _ready(self, request):
        ok = self._client is not None and not self._client.closed
        return web.json_response(
            {"status": "ready" if ok else "starting", "level": self.config.level},
            status=200 if ok else 503,
        )

    # -- helpers

    def _base_headers(self, rid: str, trace: str) -> dict[str, str]:
        return {"x-cave-request-id": rid, "x-cave-trace-id": trace,
                "x-cave-project": self.config.label}

    def _error(self, status: int, code: str, message: str, rid: str, trace: str,
               extra: dict | None = None) -> web.Response:
        body = json.dumps({"error": {"type": "cave_gateway_error", "code": code,
                                     "message": message, "request_id": rid,
                                     "trace_id": trace}}, separators=(",", ":")).encode()
        headers = self._base_headers(rid, trace)
        headers[OPTIMIZATION_HEADER] = "none"
        headers.update(extra or {})
        return web.Response(status=status, body=body, content_type="application/json",
                            headers=headers)

    async def _read_body(self, request) -> bytes | None:
        """The whole body, or None when it exceeds the cap (the rest is read and dropped, up
        to twice the cap, so the client sees the 413 instead of a reset)."""
        cap = self.config.body_cap
        cl = request.content_length
        if cl is not None and cl > 2 * cap:
            return None
        chunks: list[bytes] = []
        seen = 0
        while True:
            chunk = await request.content.read(256 * 1024)
            if not chunk:
                break
            seen += len(chunk)
            if seen > cap:
                chunks.clear()
                if seen > 2 * cap:
                    return None
                continue
            chunks.append(chunk)
        # one copy at most: a body that came in one read is that read's bytes
        return None if seen > cap else b"".join(chunks)

    def _upstream_headers(self, request, provider: str) -> dict[str, str]:
        h = {}
        inbound = request.headers
        for name in FORWARD_HEADERS:
            v = inbound.get(name)
            if v is not None:
                h[name] = v
        ce = inbound.get("content-encoding")
        if ce is not None:
            h["content-encoding"] = ce
        key = inbound.get("x-api-key")
        auth = inbound.get("authorization")
        if key:
            h["x-api-key"] = key
        elif auth and auth[:7].lower() == "bearer ":
            h["authorization"] = "Bearer " + auth[7:].strip()
        elif provider == "anthropic" and os.environ.get("ANTHROPIC_API_KEY"):
            h["x-api-key"] = os.environ["ANTHROPIC_API_KEY"]
        elif provider == "openai" and os.environ.get("OPENAI_API_KEY"):
            h["authorization"] = "Bearer " + os.environ["OPENAI_API_KEY"]
        if provider == "gemini" and inbound.get("x-goog-api-key"):
            h["x-goog-api-key"] = inbound["x-goog-api-key"]
        if provider == "anthropic" and "anthropic-version" not in h:
            h["anthropic-version"] = ANTHROPIC_VERSION
        return h

    def _upstream_url(self, route: Route, query: str) -> URL:
        """The upstream URL of a route and query string, parsed once per distinct pair."""
        key = (route.provider, route.upstream_path, query)
        url = self._urls.get(key)
        if url is None:
            if len(self._urls) >= URL_CACHE:
                self._urls.clear()
            url = self._urls[key] = URL(
                self.config.upstream_url(route.provider, route.upstream_path, query),
                encoded=True)
        return url

    async def _send(self, url: URL, headers: dict, body: bytes) -> aiohttp.ClientResponse:
        """One upstream response (headers received), retrying transport errors."""
        last: BaseException | None = None
        for attempt in range(ATTEMPTS):
            try:
                return await self._client.post(url, data=body, headers=headers,
                                               allow_redirects=False)
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
                last = exc
                log.info("proxy: upstream attempt %d failed: %r", attempt + 1, exc)
            if attempt < ATTEMPTS - 1:
                await asyncio.sleep(self.retry_sleeps[min(attempt, len(self.retry_sleeps) - 1)])
        raise UpstreamUnavailable(str(last))

    @staticmethod
    def _copy_headers(up: aiohttp.ClientResponse, out: CIMultiDict) -> None:
        src = up.headers
        named = frozenset()
        if "connection" in src:
            named = {t.strip().lower() for v in src.getall("connection")
                     for t in v.split(",") if t.strip()}
        for k, v in src.items():
            lk = k.lower()
            if lk in HOP_BY_HOP or lk.startswith("x-cave") or lk in named:
                continue
            out.add(k, v)

    # -- the handler

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        rnd = os.urandom(26)  # one system call for both ids
        rid, trace = uuid7(rnd[:10]), trace_id(request.headers, rnd[10:])
        path = request.rel_url.raw_path
        agent = None
        if path.startswith("/w/"):
            slug, sep, rest = path[3:].partition("/")
            if not sep or not _SLUG.fullmatch(slug):
                return self._error(404, "cave_route_not_found", "No route for this path.",
                                   rid, trace)
            agent, path = slug, "/" + rest
        route = match_route(path)
        if route is None or request.method != "POST":
            return self._error(404, "cave_route_not_found", "No route for this path.", rid, trace)
        body = await self._read_body(request)
        extra = {"x-cave-agent": agent} if agent else {}
        if body is None:
            resp = self._error(413, "cave_request_too_large",
                               f"Request body exceeds {self.config.body_cap} bytes.", rid, trace,
                               extra)
            resp.force_close()
            return resp

        sid = session_id(request.headers.get("x-cave-session"))
        frozen = self.ledger.frozen(sid)
        if frozen:
            extra[TRIPWIRE_HEADER] = ",".join(f"{lever}=frozen" for lever in frozen)
        forward, rewritten = body, None
        rw = self.rewriter
        if (route.eligible and rw.enabled and rw.lever not in frozen
                and request.headers.get("content-encoding", "identity").lower() == "identity"):
            forward, rewritten = await self._rewrite(body)

        url = self._upstream_url(route, request.rel_url.raw_query_string)
        headers = self._upstream_headers(request, route.provider)
        try:
            up = await self._send(url, headers, forward)
            if rewritten is not None and 400 <= up.status < 500:
                # The rewrite may be what the upstream refused: drain, then the original once.
                try:
                    await asyncio.wait_for(up.content.read(DRAIN_4XX), self.config.upstream_timeout)
                except Exception:
                    pass
                up.close()
                log.warning("proxy: upstream answered %d to a rewritten catalog; "
                            "retrying with the original bytes", up.status)
                forward, rewritten = body, None
                up = await self._send(url, headers, forward)
        except UpstreamUnavailable:
            return self._error(502, "cave_upstream_unavailable", "Upstream service error.",
                               rid, trace, extra)
        return await self._relay(request, up, rid, trace, extra, rewritten, sid)

    async def _rewrite(self, body: bytes):
        big = len(body) > OFFLOOP_BYTES
        known = tuple(self.rewriter.recent)
        found = await asyncio.to_thread(catalog.extract, body, known) if big else \
            catalog.extract(body, known)
        if found is None:
            return body, None
        span, start, end = found
        rw = self.rewriter
        result = await rw.rewrite(span)
        if result is None:
            return body, None
        # The body is valid, the span is its top-level catalog and the rewrite is valid one
        # level down: the spliced body is valid by construction (spec §2.6 step 5).
        spliced = catalog.splice(body, start, end, result.catalog, nested_valid=True)
        if spliced is None:
            log.warning("proxy: spliced body is not valid JSON; forwarding the original")
            return body, None
        return spliced, result

    def _headers(self, out: CIMultiDict, up: aiohttp.ClientResponse, rid, trace, extra,
                 rewritten) -> None:
        """The client's response headers, written into the response's own header map."""
        self._copy_headers(up, out)
        out.update(self._base_headers(rid, trace))
        rw = self.rewriter
        if rewritten is not None:
            out[OPTIMIZATION_HEADER] = rw.lever
            out[STRIP_HEADER] = rw.level
            out[HANDLE_HEADER] = rewritten.handle
        else:
            out[OPTIMIZATION_HEADER] = "none"
        for k, v in extra.items():
            out[k] = v

    async def _relay(self, request, up: aiohttp.ClientResponse, rid, trace, extra, rewritten,
                     sid) -> web.StreamResponse:
        rw = self.rewriter
        # Only a session's usage is ever read (the ledger tracks nothing else).
        scanner = UsageScanner(up.headers.get("content-type", ""),
                               up.headers.get("content-encoding", ""),
                               self._scan_max) if sid else None
        levers = [rw.lever] if rewritten is not None else []
        observed = False

        def observe() -> None:
            # Before the client can see the end of the response: its next request of the
            # session is then gated on this call's usage.
            nonlocal observed
            if not observed:
                observed = True
                if scanner is not None:
                    self.ledger.observe(sid, levers, scanner.finish())

        length = up.content_length
        first = b""
        if length is not None and 0 < length <= CHUNK:
            try:
                first = up.content.read_nowait(length)  # what already arrived, no waiting
            except Exception:
                first = b""  # the read loop below meets the same error
            if len(first) == length:
                # The whole body came with the headers (the usual JSON answer): send both in
                # one write instead of the headers first.
                if scanner is not None:
                    scanner.feed(first)
                observe()
                up.release()
                resp = web.Response(status=up.status, reason=up.reason, body=first)
                self._headers(resp.headers, up, rid, trace, extra, rewritten)
                return resp
        if not first:
            try:
                first = up.content.read_nowait(CHUNK)
            except Exception:
                first = b""  # the read loop below meets the same error
        # Bytes that are already here go out in one write with the headers; with nothing here
        # yet, the headers go at once (the client sees the response start while it waits).
        kind = _StartWithFirstChunk if first else web.StreamResponse
        resp = kind(status=up.status, reason=up.reason)
        self._headers(resp.headers, up, rid, trace, extra, rewritten)
        sent = 0
        upstream_broken = client_gone = False
        finished = False
        try:
            await resp.prepare(request)
            while True:
                if first:
                    chunk, first = first, b""
                else:
                    try:
                        chunk = await up.content.read(CHUNK)
                    except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
                        log.warning("proxy: upstream body broke off: %r", exc)
                        upstream_broken = True
                        break
                if not chunk:
                    finished = True
                    break
                if scanner is not None:
                    scanner.feed(chunk)
                sent += len(chunk)
                if up.content.at_eof():
                    # The upstream's last bytes: they go out with the end of the response.
                    finished = True
                    observe()
                    await resp.write_eof(chunk)
                    break
                if length is not None and sent >= length:
                    observe()
                await resp.write(chunk)
        except (ConnectionError, aiohttp.ClientConnectionResetError):
            client_gone = True
        finally:
            if finished:
                up.release()
            else:
                up.close()  # broken, client gone or cancelled: never drain a stream nobody reads
            observe()
        if upstream_broken:
            # Headers are out: the only honest signal left is an unfinished response.
            if request.transport is not None:
                request.transport.abort()
            return resp
        if client_gone:
            return resp
        try:
            await resp.write_eof()
        except (ConnectionError, aiohttp.ClientConnectionResetError):
            pass
        return resp
