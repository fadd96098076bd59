"""The proxy's aiohttp application (proxy_spec §1.2, §2, §5).

One handler for every route. Per request: route (404 otherwise) → read the body (32 MiB cap,
413) → maybe rewrite the ``tools`` span (level on, route eligible, session not frozen, all
fail-closed gates passed) → send upstream (a failed connect: 3 attempts, then 502; any other
transport error: 502; a 400/422 to a rewritten body: once more with the original bytes) → stream the upstream's status, headers and
body bytes back in ≤32 KiB reads, teeing a side copy to the usage scanner → tell the ledger.

Nothing here compresses: :mod:`.rewrite` calls the engine, :mod:`.catalog` splices.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import os
import re
import sys
import time
from dataclasses import dataclass

import aiohttp
from aiohttp import web
from aiohttp.web_protocol import RequestHandler
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
HOSTS_SEEN = 64  # distinct allowed Host values kept for the one-lookup check
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")

ANTHROPIC_VERSION = "2023-06-01"
HOP_BY_HOP = frozenset((
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
    "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
))
# Request headers that are not forwarded besides hop-by-hop ones, those named in Connection and
# x-cave-*: the upstream connection has its own Host and Content-Length, and the proxy has
# already answered an Expect.
NOT_FORWARDED = HOP_BY_HOP | {"host", "content-length", "expect"}
CREDENTIALS = ("authorization", "x-api-key", "x-goog-api-key")
UPSTREAM_KEY = "x-cave-upstream-key"
# A request with one of these comes from a Caveman client (caveman-sdk): its Authorization is
# the Caveman service key, which never goes to a provider.
CAVEMAN_CLIENT = frozenset((UPSTREAM_KEY, "x-cave-workflow", "x-cave-retention"))
# where each provider takes the key of x-cave-upstream-key
PROVIDER_KEY = {"anthropic": ("x-api-key", ""), "openai": ("authorization", "Bearer "),
                "gemini": ("x-goog-api-key", "")}
RESEND_4XX = (400, 422)  # a rewritten body refused as such: the original bytes are sent once
NAME_CACHE = 1024  # distinct request header spellings kept classified
# what a request header is, by its name: forwarded, a credential (forwarded), not forwarded,
# x-cave-* (not forwarded), a Caveman client's, its x-cave-upstream-key
_H_FORWARD, _H_CREDENTIAL, _H_SKIP, _H_CAVE, _H_CAVEMAN, _H_UPSTREAM_KEY = range(6)
_names: dict[str, tuple[int, str, str]] = {}  # name as sent -> (kind, name to send, lowercase)
_spelling: dict[str, str] = {}  # lowercase name -> the one spelling it is sent with


def _header_name(name: str) -> tuple[int, str, str]:
    """What a request header name is, and the spelling to send it with: the first one seen
    for that name, so that two spellings of one name in a request (``x-custom``/``X-Custom``)
    go as one name, every value kept (aiohttp's client keeps a repeated name's values only
    when they are spelt alike). Cached: clients send the same names on every request."""
    lk = name.lower()
    if lk.startswith("x-cave"):
        kind = _H_UPSTREAM_KEY if lk == UPSTREAM_KEY else _H_CAVEMAN if lk in CAVEMAN_CLIENT \
            else _H_CAVE
    elif lk in NOT_FORWARDED:
        kind = _H_SKIP
    else:
        kind = _H_CREDENTIAL if lk in CREDENTIALS else _H_FORWARD
    entry = _names[name] = (kind, _spelling.setdefault(lk, name), lk)
    return entry
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


def _proc_address(ip: str, port: int) -> str | None:
    """An address as /proc/net/tcp{,6} writes it (the kernel's byte order, in hex)."""
    try:
        packed = ipaddress.ip_address(ip).packed
    except ValueError:
        return None
    if len(packed) == 4:
        text = packed[::-1].hex()
    else:
        text = "".join(packed[i:i + 4][::-1].hex() for i in range(0, 16, 4))
    return f"{text.upper()}:{port:04X}"


def peer_uid(peer, ours) -> int | None:
    """The user id owning the other end of a loopback TCP connection from ``peer`` to
    ``ours`` (Linux: the socket in /proc/net/tcp{,6} whose local address is the peer's and
    whose remote address is ours); -1 when it is not found; None on other systems, which do
    not tell."""
    if not sys.platform.startswith("linux"):
        return None
    local, remote = _proc_address(peer[0], peer[1]), _proc_address(ours[0], ours[1])
    if local is None or remote is None:
        return -1
    try:
        with open("/proc/net/tcp6" if ":" in peer[0] else "/proc/net/tcp", "rb") as fh:
            table = fh.read().decode("ascii", "replace")
    except OSError:
        return -1  # Linux always tells: a table we cannot read vouches for no one
    for line in table.splitlines()[1:]:
        f = line.split()
        if len(f) > 7 and f[1] == local and f[2] == remote:
            return int(f[7])
    return -1


class UpstreamUnavailable(Exception):
    pass


# A write that leaves the transport's buffer at or below this (its default high-water mark)
# never waits for the client, so it needs no stall timeout.
_NO_WAIT = 64 * 1024


try:  # the socket's unsent + unacknowledged bytes (Linux's SIOCOUTQ)
    import fcntl
    import termios

    _TIOCOUTQ = termios.TIOCOUTQ if sys.platform.startswith("linux") else None
except (ImportError, AttributeError):  # pragma: no cover - not Linux
    _TIOCOUTQ = None


def _unsent(transport) -> int:
    """Bytes written to ``transport`` that the client has not taken yet: the transport's own
    buffer, plus (on Linux) the socket's send queue. The kernel wakes a writer only once much
    of a large send buffer is free, so the transport's buffer alone stands still for seconds
    while a slow client reads."""
    n = transport.get_write_buffer_size()
    if _TIOCOUTQ is not None:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                n += int.from_bytes(fcntl.ioctl(sock.fileno(), _TIOCOUTQ, b"\0\0\0\0"),
                                    sys.byteorder, signed=True)
            except (OSError, ValueError):
                pass
    return n


async def _progressing(write, transport, stall: float):
    """``await write`` (a write to the client that may wait for it to read), or TimeoutError
    once the client took no byte for ``stall`` seconds (:func:`_unsent` did not shrink over
    that time). A slow reader that keeps reading is never cut."""
    task = asyncio.ensure_future(write)
    try:
        # the task's first step puts its bytes in the buffer; progress is measured from there
        done, _ = await asyncio.wait((task,), timeout=0)
        if done:
            return task.result()
        last = _unsent(transport) if transport is not None else 0
        while True:
            done, _ = await asyncio.wait((task,), timeout=stall)
            if done:
                return task.result()
            size = _unsent(transport) if transport is not None else last
            if size >= last:
                raise TimeoutError
            last = size
    finally:
        if not task.done():
            task.cancel()


class _StartWithFirstChunk(web.StreamResponse):
    """A stream response whose headers wait for its first write, as aiohttp's own
    :class:`web.Response` does: used only when that first chunk is already in hand, so the
    headers and the chunk leave in one write and nothing is held back. (An aiohttp without
    this switch sends the headers first: the same bytes in two writes.)"""

    _send_headers_immediately = False


# -- credentials never reach a log line or an error body

CREDENTIAL_HEADERS = ("x-api-key", "authorization", "proxy-authorization", "x-goog-api-key",
                      "x-cave-upstream-key", "api-key")
_NAME = r"['\"]?\s*[:=,]\s*['\"]?)"
_CREDENTIAL = re.compile(
    r"(?i)((?:" + "|".join(re.escape(n) for n in CREDENTIAL_HEADERS) + ")" + _NAME +
    r"(?:(?:bearer|basic|token)\s+)?[^\s'\",;\\]+"
    r"|((?:set-)?cookie" + _NAME + r"[^\r\n'\"\\]+"
    r"|\b(?:sk|rk|pk)-[A-Za-z0-9_\-]{6,}|\bAIza[0-9A-Za-z_\-]{10,}"
    r"|\bbearer\s+[^\s'\",;\\]+"
    r"|(://[^/\s:@'\"]*:)[^/\s@'\"]+(?=@)")  # the password of a URL
ENV_KEYS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")
REDACTED = "[redacted]"


def redact(text: str) -> str:
    """``text`` with every credential header's value, every string shaped like a provider key,
    the password of any URL and the proxy's own environment keys replaced by ``[redacted]``."""
    for var in ENV_KEYS:
        key = os.environ.get(var)
        if key and len(key) >= 8 and key in text:
            text = text.replace(key, REDACTED)
    return _CREDENTIAL.sub(lambda m: (m.group(1) or m.group(2) or m.group(3) or "") + REDACTED,
                           text)


class _RedactFilter(logging.Filter):
    """Formats a record once, redacted (message, arguments and traceback alike)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a record whose arguments do not fit its format
            message = str(record.msg)
        record.msg, record.args = redact(message), ()
        if record.exc_info:
            import traceback

            record.exc_text = redact("".join(
                traceback.format_exception(*record.exc_info)).rstrip("\n"))
            record.exc_info = None
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


REDACT_FILTER = _RedactFilter()
LOGGERS = ("caveman_engine", "caveman_engine.proxy", "aiohttp", "aiohttp.server",
           "aiohttp.access", "aiohttp.client", "aiohttp.internal", "aiohttp.web", "asyncio")


def install_redaction() -> None:
    """Redact every record of the proxy's, aiohttp's and asyncio's loggers and every record
    the root logger's handlers write (a filter on a logger does not see its children's)."""
    for name in LOGGERS:
        lg = logging.getLogger(name)
        if REDACT_FILTER not in lg.filters:
            lg.addFilter(REDACT_FILTER)
    for handler in logging.getLogger().handlers:
        if REDACT_FILTER not in handler.filters:
            handler.addFilter(REDACT_FILTER)


# -- connections: how many, and how long a request may take to arrive

KEEPALIVE_TIMEOUT = 75.0  # an idle connection between requests is closed after this


def _raw_error(status: int, reason: str, code: str, message: str) -> bytes:
    body = json.dumps({"error": {"type": "cave_gateway_error", "code": code,
                                 "message": message}}, separators=(",", ":")).encode()
    return (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode() + body


# aiohttp's parser errors (aiohttp.http_exceptions), by class name: what a 400 says
_FAULTS = {
    "LineTooLong": "a request line or header line is too long",
    "BadStatusLine": "malformed request line",
    "BadHttpMethod": "malformed request method",
    "InvalidURLError": "malformed request target",
    "InvalidHeader": "malformed header",
    "ContentLengthError": "malformed body length",
    "TransferEncodingError": "malformed chunked body",
    "PayloadEncodingError": "malformed body",
    "ContentEncodingError": "malformed body encoding",
}


class _Connection(RequestHandler):
    """One client connection: refused with a 503 beyond ``max_connections``; closed (408)
    when a request's headers take longer than ``header_timeout`` from its first byte (or from
    the connection's start); errors answered without echoing what the client sent."""

    __slots__ = ("peer_uid", "_header_timer", "_limits")

    def __init__(self, manager: _Server, **kwargs) -> None:
        super().__init__(manager, **kwargs)
        self.peer_uid = False  # not looked up yet (Proxy._may_use_env_key)
        self._header_timer: asyncio.TimerHandle | None = None
        self._limits = manager.limits

    def idle(self) -> bool:
        """Between two requests, with no byte of the next one yet (kept alive)."""
        return (self._waiter is not None and not self._waiter.done() and not self._messages
                and not self._request_in_progress and self._header_timer is None)

    def connection_made(self, transport) -> None:
        manager = self._manager
        if manager is not None and len(manager._connections) >= self._limits.max_connections:
            # The oldest idle kept-alive connection makes room (a client may always find its
            # idle connection closed, and opens another), so idle connections never lock the
            # proxy; only when every one is busy is the new one refused.
            idle = next((c for c in manager._connections
                         if isinstance(c, _Connection) and c.idle()), None)
            if idle is not None:
                idle.force_close()
                super().connection_made(transport)
                self._arm()
                return
            self._manager = None  # never registered: connection_lost has nothing to undo
            self._force_close = True  # and nothing it may still receive is parsed
            log.warning("proxy: %d connections open, refusing one more",
                        len(manager._connections))
            transport.write(_raw_error(503, "Service Unavailable", "cave_too_many_connections",
                                       "Too many open connections to the proxy."))
            transport.close()
            return
        super().connection_made(transport)
        self._arm()

    def _arm(self) -> None:
        self._header_timer = self._loop.call_later(self._limits.header_timeout,
                                                   self._headers_late)

    def _headers_late(self) -> None:
        self._header_timer = None
        if self._messages or self._request_in_progress or self.transport is None:
            return
        try:
            self.transport.write(_raw_error(408, "Request Timeout", "cave_request_timeout",
                                            "The request headers did not arrive in time."))
        except Exception:
            pass
        self.force_close()

    def data_received(self, data: bytes) -> None:
        if self._header_timer is None and not self._request_in_progress \
                and not self._messages:
            self._arm()  # the first bytes of the connection's next request
        super().data_received(data)
        if self._messages and self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def connection_lost(self, exc) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        super().connection_lost(exc)

    def handle_error(self, request, status: int = 500, exc=None, message=None):
        """aiohttp's error answer, without the bytes it would quote (a malformed header line
        is often the credential): one redacted line in the log, a JSON error body."""
        if status == 400:
            # aiohttp's message quotes the bytes it choked on (a header's value, the URL with
            # its query): only what kind of fault it was is said, never its text
            what = _FAULTS.get(type(exc).__name__, "malformed request")
            log.warning("proxy: bad request from %s: %s", request.remote, what)
            code, text = "cave_bad_request", f"Malformed HTTP request: {what}."
        else:
            log.error("proxy: error handling a request from %s: %s", request.remote,
                      redact(repr(exc)) if exc is not None else status)
            log.debug("proxy: traceback", exc_info=exc)
            code, text = "cave_internal_error", "Internal error in the proxy."
        if request.writer.output_size > 0:
            raise ConnectionError("the response has started: no error answer possible")
        body = json.dumps({"error": {"type": "cave_gateway_error", "code": code,
                                     "message": text}}, separators=(",", ":")).encode()
        resp = web.Response(status=status, body=body, content_type="application/json")
        resp.force_close()
        return resp


@dataclass(frozen=True)
class _Limits:
    max_connections: int
    header_timeout: float


class _Server(web.Server):
    """aiohttp's low-level server with :class:`_Connection` for every connection."""

    def __init__(self, handler, *, limits: _Limits, **kwargs) -> None:
        super().__init__(handler, **kwargs)
        self.limits = limits

    def __call__(self) -> _Connection:
        return _Connection(self, loop=self._loop, **self._kwargs)


class _Runner(web.ServerRunner):
    """aiohttp's runner for a low-level server, made and torn down with the proxy's upstream
    client session."""

    def __init__(self, proxy: Proxy) -> None:
        super().__init__(None, handle_signals=False, shutdown_timeout=2)
        self._proxy = proxy

    async def _make_server(self) -> web.Server:
        await self._proxy._start()
        install_redaction()
        cfg = self._proxy.config
        return _Server(self._proxy.dispatch, access_log=None, auto_decompress=False,
                       handler_cancellation=True,  # client gone: stop the upstream call
                       keepalive_timeout=KEEPALIVE_TIMEOUT,
                       limits=_Limits(cfg.max_connections, cfg.header_timeout))

    async def _cleanup_server(self) -> None:
        await self._proxy._stop()


class Proxy:
    def __init__(self, config: Config, engine=None, *, ledger: Ledger | None = None,
                 retry_sleeps: tuple[float, ...] = RETRY_SLEEPS) -> None:
        self.config = config
        self.ledger = ledger if ledger is not None else Ledger()
        self.rewriter = Rewriter(engine, config.level, store_timeout=config.store_timeout)
        self.retry_sleeps = retry_sleeps
        self._client: aiohttp.ClientSession | None = None
        self._urls: dict[tuple[str, str, str], URL] = {}
        self._eager_loop: asyncio.AbstractEventLoop | None = None
        self._scan_max = scan_max()  # read once, not for every response
        self.requests = 0
        self._init_access()

    # -- who may connect (SECURITY.md "The proxy's trust model")

    def _init_access(self) -> None:
        cfg = self.config
        listen = f"[{cfg.host}]" if ":" in cfg.host else cfg.host
        self._host_names = frozenset((*LOOPBACK_HOSTS, listen.lower(), *cfg.allowed_hosts))
        self._origins_ok = frozenset(cfg.allowed_origins)
        # exact Host values already let through: the check per request is one set lookup
        self._hosts_ok: set = set()

    def _host_allowed(self, value: str | None) -> bool:
        """A Host of a loopback name or address, or of ``allowed_hosts``, with or without a
        port. (A page that rebinds its own name to 127.0.0.1 still sends that name.)"""
        if value is None:
            return False
        v = value.lower()
        if v.startswith("["):
            end = v.find("]") + 1
            if end == 0:
                return False
        else:
            end = v.find(":")
            end = len(v) if end < 0 else end
        name, port = v[:end], v[end:]
        if port and not (port[0] == ":" and 1 < len(port) <= 6 and port[1:].isascii()
                         and port[1:].isdigit()):
            return False
        if name in self._host_names:
            ok = True
        else:
            try:
                ok = ipaddress.ip_address(name.strip("[]") if name[:1] == "[" else name
                                          ).is_loopback
            except ValueError:
                ok = False
        if ok and len(self._hosts_ok) < HOSTS_SEEN:
            self._hosts_ok.add(value)
        return ok

    def _refuse(self, request: web.BaseRequest) -> web.Response | None:
        """The answer to a request from where the proxy does not serve (a Host that is not
        loopback or allowed, a browser page whose Origin is not allowed), or None."""
        h = request.headers
        code = None
        if h.get("host") not in self._hosts_ok and not self._host_allowed(h.get("host")):
            code, message = "cave_host_not_allowed", \
                "Host is not a loopback name or address (see allowed_hosts)."
        elif ("origin" in h or "sec-fetch-site" in h) and h.get("origin") not in self._origins_ok:
            code, message = "cave_origin_not_allowed", \
                "Requests from web pages are refused (see allowed_origins)."
        if code is None:
            return None
        rnd = os.urandom(26)
        return self._error(403, code, message, uuid7(rnd[:10]), _uuid4_hex(rnd[10:]))

    def _may_use_env_key(self, request: web.BaseRequest) -> bool:
        """Whether a request without its own credential may be sent with the proxy's
        environment key (``ANTHROPIC_API_KEY`` / ``OPENAI_API_KEY``): only a request that
        :meth:`dispatch` let through (loopback or allowed Host), that no web page sent (no
        ``Origin`` or ``Sec-Fetch-*``, even an allowed one), from a loopback peer, and, where
        the system tells (Linux), from a process of the proxy's own user."""
        h = request.headers
        if "origin" in h or "sec-fetch-site" in h or "sec-fetch-mode" in h:
            return False
        if h.get("host") not in self._hosts_ok and not self._host_allowed(h.get("host")):
            return False
        proto = request.protocol
        uid = getattr(proto, "peer_uid", False)  # once per connection
        if uid is False:
            uid = -1
            transport = request.transport
            peer = transport.get_extra_info("peername") if transport is not None else None
            ours = transport.get_extra_info("sockname") if transport is not None else None
            try:
                if peer and ours and ipaddress.ip_address(peer[0]).is_loopback:
                    uid = peer_uid(peer, ours)
            except ValueError:
                pass
            if isinstance(proto, _Connection):
                proto.peer_uid = uid
        return uid is None or uid == os.geteuid()

    # -- lifecycle

    async def dispatch(self, request: web.BaseRequest) -> web.StreamResponse:
        """Every request of the server: first who sent it (:meth:`_refuse`, every path,
        health checks included), then the two health checks, else :meth:`handle`. (The
        proxy has one handler, so it runs on aiohttp's low-level server, without an
        application's router and middleware chain.)"""
        h = request.headers
        if h.get("host") not in self._hosts_ok or "origin" in h or "sec-fetch-site" in h:
            refused = self._refuse(request)
            if refused is not None:
                return refused
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
                if expect.lower() != "100-continue":  # its value is not echoed
                    return web.Response(status=417, text="Unknown Expect value.")
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
        self.rewriter.close()
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

    @staticmethod
    async def _answer_and_close(request, resp: web.StreamResponse) -> web.StreamResponse:
        """``resp`` sent and the connection closed now: no lingering read of a body that
        stalls (the 408 of ``body_timeout``)."""
        await resp.prepare(request)
        await resp.write_eof()
        request.protocol.force_close()
        return resp

    async def _read_body(self, request) -> bytes | None:
        """The whole body, or None when it exceeds the cap (the rest is read and dropped, up
        to twice the cap, so the client sees the 413 instead of a reset). TimeoutError when
        it has not all arrived ``body_timeout`` seconds after the headers."""
        cap = self.config.body_cap
        cl = request.content_length
        if cl is not None and cl > 2 * cap:
            return None
        chunks: list[bytes] = []
        seen = 0
        # the whole body within body_timeout of its headers (raises TimeoutError)
        async with asyncio.timeout(self.config.body_timeout):
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

    def _upstream_headers(self, request, provider: str) -> CIMultiDict:
        """The inbound headers in one pass, every value of a repeated one kept, less the
        hop-by-hop ones (and those named in Connection), Host, Content-Length, Expect and
        x-cave-*. A Caveman client's credentials are replaced: ``x-cave-upstream-key`` becomes
        the provider's own credential header and its Authorization (the Caveman key) is
        dropped."""
        h: CIMultiDict[str] = CIMultiDict()
        add = h.add
        inbound = request.headers
        named = None
        if "connection" in inbound:
            named = {t.strip().lower() for v in inbound.getall("connection")
                     for t in v.split(",") if t.strip()}
        if len(_names) >= NAME_CACHE:  # between requests: a request's names share spellings
            _names.clear()
            _spelling.clear()
        known = _names.get
        caveman = credential = False
        upstream_key = None
        for k, v in inbound.items():
            kind, name, lk = known(k) or _header_name(k)
            if kind <= _H_CREDENTIAL:
                if named is None or lk not in named:
                    add(name, v)
                    credential = credential or kind == _H_CREDENTIAL
            elif kind >= _H_CAVEMAN:
                caveman = True
                if kind == _H_UPSTREAM_KEY and v.strip():
                    upstream_key = v.strip()
        if caveman:
            for name in CREDENTIALS:
                h.popall(name, None)
            credential = False
            if upstream_key is not None:
                name, prefix = PROVIDER_KEY[provider]
                h[name] = prefix + upstream_key
                credential = True
        if not credential and self._may_use_env_key(request):
            if provider == "anthropic" and os.environ.get("ANTHROPIC_API_KEY"):
                h["x-api-key"] = os.environ["ANTHROPIC_API_KEY"]
            elif provider == "openai" and os.environ.get("OPENAI_API_KEY"):
                h["authorization"] = "Bearer " + os.environ["OPENAI_API_KEY"]
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

    async def _send(self, url: URL, headers: CIMultiDict, body: bytes) -> aiohttp.ClientResponse:
        """One upstream response (headers received). Only a failure to connect is retried:
        then no byte of the request has left. Any later transport error (the connection
        dropped or timed out once the request was on its way) may mean the upstream is running
        it, so it is never sent twice."""
        last: BaseException | None = None
        for attempt in range(ATTEMPTS):
            try:
                return await self._client.post(url, data=body, headers=headers,
                                               allow_redirects=False)
            except aiohttp.ClientConnectorCertificateError as exc:
                last = exc  # the same certificate on every attempt
                log.info("proxy: upstream certificate refused: %r", exc)
                break
            except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
                last = exc
                log.info("proxy: upstream connect attempt %d failed: %r", attempt + 1, exc)
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
                log.info("proxy: upstream request failed after it was sent: %r", exc)
                raise UpstreamUnavailable(str(exc)) from None
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
        extra = {"x-cave-agent": agent} if agent else {}
        try:
            body = await self._read_body(request)
        except TimeoutError:
            resp = self._error(408, "cave_request_timeout",
                               f"The request body did not arrive within "
                               f"{self.config.body_timeout:g} s.", rid, trace, extra)
            return await self._answer_and_close(request, resp)
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
            if rewritten is not None and up.status in RESEND_4XX:
                # The rewrite may be what the upstream refused: drain, then the original once.
                # (Any other 4xx, a 429 say, is about the request, not its catalog: it reaches
                # the client as it is, once.)
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
        stall = self.config.body_timeout  # a client that takes no byte this long is cut off
        try:
            await _progressing(resp.prepare(request), request.transport, stall)
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
                    await _progressing(resp.write_eof(chunk), request.transport, stall)
                    break
                if length is not None and sent >= length:
                    observe()
                transport = request.transport
                if transport is not None and \
                        transport.get_write_buffer_size() + len(chunk) <= _NO_WAIT:
                    await resp.write(chunk)  # below the high-water mark: cannot wait
                else:
                    await _progressing(resp.write(chunk), transport, stall)
        except (ConnectionError, aiohttp.ClientConnectionResetError):
            client_gone = True
        except TimeoutError:
            # The client stopped reading: its connection goes, and so does the upstream's.
            log.warning("proxy: a client took no byte for %.0f s; connection closed", stall)
            client_gone = True
            finished = False
            if request.transport is not None:
                request.transport.abort()
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
            await _progressing(resp.write_eof(), request.transport, stall)
        except (ConnectionError, aiohttp.ClientConnectionResetError):
            pass
        except TimeoutError:
            if request.transport is not None:
                request.transport.abort()
        return resp
