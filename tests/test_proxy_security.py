"""The proxy's inbound security (issue 27): who may use it and its environment key, what it
never logs, how long a client may take, and the recovery store on the request path.

Every test runs the real ``caveman-engine proxy`` console script as a subprocess on a free
loopback port and talks to it over real HTTP (raw sockets where the bytes on the wire matter),
in front of the in-process fake upstream, which records what reached the "API"."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sqlite3
import subprocess
import threading
import time
import zlib

import pytest
from aiohttp import web

from tests.conftest import console_script
from tests.fixtures.proxy.process import ProxyProcess, free_port as _free_port
from tests.fixtures.proxy.rawhttp import post, request

from .pg import PASSWORD, pg_server, pg_url  # noqa: F401 - fixtures

ENV_KEY = "sk-ant-envkey-Sekr1t-0123456789"
CLIENT_KEY = "sk-ant-client-Sekr1t-9876543210"
TOOLS = [{"name": "grep", "description": "Search files.",
          "input_schema": {"title": "GrepArgs", "type": "object", "$schema": "x",
                           "properties": {"pattern": {"type": "string", "examples": ["a.*"]}},
                           "required": ["pattern"]}}]
BODY = json.dumps({"model": "m", "max_tokens": 8, "tools": TOOLS,
                   "messages": [{"role": "user", "content": "hi"}]}).encode()
PLAIN = b'{"model":"m","max_tokens":8,"messages":[]}'


class Proxy(ProxyProcess):
    """The console script with a config file; its stderr goes to a file, readable while it
    runs."""

    def __init__(self, tmp_path, env, config: str = "", args=()) -> None:
        port_tag = len(list(tmp_path.glob("proxy-*.yaml")))
        cfg = tmp_path / f"proxy-{port_tag}.yaml"
        cfg.write_text(config)
        self.err_path = tmp_path / f"proxy-{port_tag}.err"
        self._err = open(self.err_path, "wb")
        super().__init__(["--config", str(cfg), *args], env, stderr=self._err, start_timeout=30)

    def stderr(self) -> bytes:
        return self.err_path.read_bytes()

    def rss_peak_kib(self) -> int:
        with open(f"/proc/{self.p.pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        raise AssertionError("no VmHWM")

    def stop(self) -> int:
        code, _ = super().stop()
        self._err.close()
        return code


@pytest.fixture
def env(proxy_env):
    return {**proxy_env, "ANTHROPIC_API_KEY": ENV_KEY}


@pytest.fixture
def start(tmp_path, env, upstream):
    running = []

    def go(config: str = "", *, extra_env=None, args=(), base: str | None = None) -> Proxy:
        where = base or upstream.upstream_url
        text = (f"providers:\n  anthropic:\n    base_url: {where}\n"
                f"  openai:\n    base_url: {where}\n") + config
        p = Proxy(tmp_path, {**env, **(extra_env or {})}, text, args)
        running.append(p)
        return p

    yield go
    for p in running:
        p.stop()


def raw(port: int, data: bytes, timeout: float = 5.0) -> bytes:
    """Send bytes on a fresh connection; everything the proxy answers until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        try:
            while chunk := s.recv(65536):
                out += chunk
        except (ConnectionResetError, socket.timeout):
            pass
    return out


def http(port: int, path: str = "/v1/messages", body: bytes = PLAIN, host: str | None = None,
         headers: dict | None = None, method: str = "POST") -> tuple[int, dict, bytes]:
    """One request with exactly these headers (Host included), on a raw socket."""
    host = f"127.0.0.1:{port}" if host is None else host
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}",
             "Content-Type: application/json", f"Content-Length: {len(body)}",
             "Connection: close"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    out = raw(port, ("\r\n".join(lines) + "\r\n\r\n").encode() + body, timeout=30)
    head, _, payload = out.partition(b"\r\n\r\n")
    status_line, *hdrs = head.decode("latin-1").split("\r\n")
    hmap = {}
    for h in hdrs:
        k, _, v = h.partition(":")
        hmap[k.strip().lower()] = v.strip()
    return int(status_line.split()[1]), hmap, payload


def _code(payload: bytes) -> str:
    return json.loads(payload)["error"]["code"]


# -- item 1: who may use the proxy, and its environment key

@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1.nip.io",
                                  "localhost.evil.example:{port}", "", "127.0.0.1:80x",
                                  "localhost:\u0663"])
def test_a_rebound_host_is_refused_before_anything_reaches_the_upstream(start, upstream, host):
    proxy = start()
    status, _, payload = http(proxy.port, host=host.format(port=proxy.port))
    assert status == 403 and _code(payload) == "cave_host_not_allowed"
    status, _, payload = http(proxy.port, "/health/ready", b"", method="GET",
                              host=host.format(port=proxy.port))
    assert status == 403
    assert upstream.fake.received == []


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "127.0.0.1", "localhost:{port}",
                                  "LOCALHOST", "[::1]:{port}", "127.0.0.2:{port}"])
def test_loopback_hosts_are_served(start, upstream, host):
    proxy = start()
    status, _, _ = http(proxy.port, host=host.format(port=proxy.port))
    assert status == 200
    assert upstream.fake.received[-1].headers["x-api-key"] == ENV_KEY


def test_allowed_hosts_extends_the_loopback_names(start, upstream):
    proxy = start("allowed_hosts: [proxy.internal]\n")
    assert http(proxy.port, host=f"proxy.internal:{proxy.port}")[0] == 200
    assert http(proxy.port, host="other.internal")[0] == 403
    env_form = start(extra_env={"CAVEMAN_PROXY_ALLOWED_HOSTS": "a.test, b.test"})
    assert http(env_form.port, host="b.test")[0] == 200


@pytest.mark.parametrize("headers", [{"Origin": "https://evil.example"},
                                     {"Origin": "null"},
                                     {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"},
                                     {"Origin": "http://127.0.0.1:3000"}])
def test_web_pages_are_refused_without_an_opt_in(start, upstream, headers):
    proxy = start()
    status, _, payload = http(proxy.port, headers=headers)
    assert status == 403 and _code(payload) == "cave_origin_not_allowed"
    assert upstream.fake.received == []


def test_an_allowed_origin_is_served_but_never_with_the_environment_key(start, upstream):
    proxy = start("allowed_origins: ['chrome-extension://abcdef']\n")
    status, _, _ = http(proxy.port, headers={"Origin": "chrome-extension://abcdef"})
    assert status == 200
    assert "x-api-key" not in upstream.fake.received[-1].headers
    # its own key goes through
    status, _, _ = http(proxy.port, headers={"Origin": "chrome-extension://abcdef",
                                             "x-api-key": CLIENT_KEY})
    assert status == 200 and upstream.fake.received[-1].headers["x-api-key"] == CLIENT_KEY
    assert http(proxy.port, headers={"Origin": "chrome-extension://other"})[0] == 403


_AS_NOBODY = r"""
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=30)
c.request("POST", "/v1/messages", body=b'{"model":"m","messages":[]}',
          headers={"content-type": "application/json"})
print(c.getresponse().status)
"""


SYSTEM_PYTHON = "/usr/bin/python3"  # one "nobody" can run (the virtualenv's may be private)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0
                    or not os.access(SYSTEM_PYTHON, os.X_OK),
                    reason="needs root and /usr/bin/python3 to run a client as another user")
def test_another_local_user_never_gets_the_environment_key(start, upstream):
    import pwd

    proxy = start()
    nobody = pwd.getpwnam("nobody")
    p = subprocess.run([SYSTEM_PYTHON, "-I", "-c", _AS_NOBODY, str(proxy.port)],
                       user=nobody.pw_uid, group=nobody.pw_gid, extra_groups=[],
                       capture_output=True, timeout=60, cwd="/")
    assert p.stdout.strip() == b"200", p.stderr
    assert "x-api-key" not in upstream.fake.received[-1].headers
    # the proxy's own user still gets it
    assert http(proxy.port)[0] == 200
    assert upstream.fake.received[-1].headers["x-api-key"] == ENV_KEY


# -- item 2: credentials never reach the log or an error body

MALFORMED = [
    b"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: " + CLIENT_KEY.encode() +
    b"\x01\r\nContent-Length: 2\r\n\r\n{}",
    b"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " +
    CLIENT_KEY.encode() + b"\r\nContent-Length: x\r\n\r\n{}",
    b"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key " + CLIENT_KEY.encode() +
    b"\r\n\r\n",
    b"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nx-goog-api-key: " + CLIENT_KEY.encode() +
    b"\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
    b"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: " + CLIENT_KEY.encode() +
    b"A" * 9000 + b"\r\nContent-Length: 2\r\n\r\n{}",
]
# Secrets that look like no provider key: only the proxy's own care keeps them out. aiohttp
# quotes the first bytes of a line it cannot take (a header over 8190 bytes, a long URL).
SECRET = "QQplainSekr1tQQ"
PLAIN_SECRETS = [
    *(f"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n{h}{SECRET}{'A' * 9000}"
      f"\r\nContent-Length: 2\r\n\r\n{{}}".encode()
      for h in ("x-api-key: ", "Cookie: session=", "api-key: ", "x-goog-api-key: ",
                "x-cave-upstream-key: ", "Authorization: Basic ", "Proxy-Authorization: ")),
    f"POST /gemini/v1beta/models/m:generateContent?api_key={SECRET}&x={'a' * 9000} HTTP/1.1"
    f"\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{{}}".encode(),
    f"POST http:///v1/messages?key={SECRET} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    f"Content-Length: 2\r\n\r\n{{}}".encode(),
    f"CONNECT u:{SECRET}@:443 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode(),
]


def test_malformed_requests_never_log_or_echo_a_credential(start):
    proxy = start()
    for data in MALFORMED:
        answer = raw(proxy.port, data)
        assert answer.split(b" ", 2)[1] == b"400", answer
        assert CLIENT_KEY.encode() not in answer and b"Sekr1t" not in answer
        assert _code(answer.partition(b"\r\n\r\n")[2]) == "cave_bad_request"
    assert proxy.stop() == 0
    err = proxy.stderr()
    assert b"Sekr1t" not in err, err.decode(errors="replace")
    assert err.count(b"bad request from 127.0.0.1") == len(MALFORMED), err
    assert b"Traceback" not in err


def test_secrets_of_any_shape_are_never_quoted(start):
    proxy = start()
    for data in PLAIN_SECRETS:
        answer = raw(proxy.port, data)
        assert answer.split(b" ", 2)[1] in (b"400", b"403", b"404"), answer[:200]
        assert SECRET.encode() not in answer, answer[:300]
    # an unknown expectation is refused without being repeated
    status, _, payload = http(proxy.port, headers={"Expect": SECRET})
    assert status == 417 and SECRET.encode() not in payload
    assert proxy.stop() == 0
    err = proxy.stderr()
    assert SECRET.encode() not in err, err.decode(errors="replace")
    assert b"a request line or header line is too long" in err


def test_an_unreachable_upstream_logs_no_key(start):
    proxy = start(base=f"http://127.0.0.1:{_free_port()}")
    status, _, payload = http(proxy.port, headers={"x-api-key": CLIENT_KEY})
    assert status == 502 and b"Sekr1t" not in payload
    status, _, payload = http(proxy.port)  # the environment key
    assert status == 502 and b"Sekr1t" not in payload
    proxy.stop()
    assert b"Sekr1t" not in proxy.stderr()


# -- item 5: slow clients and too many connections

def _closed_within(sock: socket.socket, seconds: float) -> tuple[float, bytes]:
    sock.settimeout(seconds)
    t0 = time.monotonic()
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except (ConnectionResetError, socket.timeout):
        pass
    return time.monotonic() - t0, data


def test_headers_that_trickle_in_are_cut_off_at_header_timeout(start):
    proxy = start("header_timeout: 1\n")
    with socket.create_connection(("127.0.0.1", proxy.port)) as s:
        s.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        t0 = time.monotonic()
        answer = b""
        s.settimeout(0.2)
        while time.monotonic() - t0 < 4:
            try:
                s.sendall(b"x-slow: 1\r\n")
                chunk = s.recv(65536)
                if not chunk:
                    break
                answer += chunk
            except socket.timeout:
                continue
            except (BrokenPipeError, ConnectionResetError):
                break
        took = time.monotonic() - t0
    assert took < 2.5, took
    assert answer.startswith(b"HTTP/1.1 408 ") and b"cave_request_timeout" in answer


def test_a_connection_that_sends_nothing_is_closed_at_header_timeout(start):
    proxy = start("header_timeout: 1\n")
    with socket.create_connection(("127.0.0.1", proxy.port)) as s:
        took, data = _closed_within(s, 4)
    assert took < 2.5 and data.startswith(b"HTTP/1.1 408 ")


def test_a_body_that_stalls_gets_408_at_body_timeout(start, upstream):
    proxy = start("body_timeout: 1\n")
    with socket.create_connection(("127.0.0.1", proxy.port)) as s:
        s.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"model\":")
        took, data = _closed_within(s, 4)
    assert took < 2.5, took
    assert data.startswith(b"HTTP/1.1 408 ") and b"cave_request_timeout" in data
    assert upstream.fake.received == []


def test_a_keep_alive_connection_gets_a_new_header_timeout_per_request(start, upstream):
    proxy = start("header_timeout: 1\n")
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as s:
        req = (b"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/"
               b"json\r\nContent-Length: " + str(len(PLAIN)).encode() + b"\r\n\r\n" + PLAIN)
        for _ in range(3):  # idle between requests longer than header_timeout: still open
            s.sendall(req)
            assert s.recv(65536).startswith(b"HTTP/1.1 200 ")
            time.sleep(1.5)
    assert len(upstream.fake.received) == 3


def test_connections_beyond_max_connections_get_503(start, upstream):
    proxy = start("max_connections: 4\nheader_timeout: 30\n")
    held = [socket.create_connection(("127.0.0.1", proxy.port)) for _ in range(4)]
    try:
        time.sleep(0.2)
        with socket.create_connection(("127.0.0.1", proxy.port)) as extra:
            took, data = _closed_within(extra, 3)
        assert data.startswith(b"HTTP/1.1 503 ") and b"cave_too_many_connections" in data
        held.pop().close()
        time.sleep(0.2)
        assert http(proxy.port)[0] == 200
    finally:
        for s in held:
            s.close()


def _keep_alive_request(port: int) -> socket.socket:
    """A connection that made one request, read its answer and stays open (kept alive)."""
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
              b"application/json\r\nContent-Length: " + str(len(PLAIN)).encode() +
              b"\r\n\r\n" + PLAIN)
    s.settimeout(10)
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(65536)
    assert data.startswith(b"HTTP/1.1 200 "), data
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:")))
    while len(body) < length:
        body += s.recv(65536)
    return s


def test_idle_kept_alive_connections_make_room_for_a_new_one(start, upstream):
    """At max_connections, the oldest idle kept-alive connection is closed for a new one:
    idle connections cannot lock clients out (busy ones still can, up to header_timeout)."""
    proxy = start("max_connections: 4\n")
    idle = [_keep_alive_request(proxy.port) for _ in range(4)]
    try:
        assert http(proxy.port)[0] == 200  # a fifth client is served
        took, data = _closed_within(idle[0], 3)  # the oldest idle one was closed
        assert data == b"" and took < 3
        for s in idle[1:]:  # the others are still open and serve a second request
            s.sendall(b"GET /health/live HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert s.recv(65536).startswith(b"HTTP/1.1 200 ")
    finally:
        for s in idle:
            s.close()


class OneRoute:
    """A fake upstream on its own event loop thread that answers POST /v1/messages with
    ``_answer``; a context manager."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.runner = None
        self.url = ""

    async def _answer(self, request):
        raise NotImplementedError

    async def _start(self):
        app = web.Application()
        app.router.add_post("/v1/messages", self._answer)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"

    def __enter__(self):
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(30)
        return self

    def __exit__(self, *exc):
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


class EndlessUpstream(OneRoute):
    """Answers with a body of ``size`` bytes, written 1 MiB at a time; records whether the
    proxy went away before the end."""

    def __init__(self, size: int = 256 << 20) -> None:
        super().__init__()
        self.size = size
        self.cut = threading.Event()

    async def _answer(self, request):
        await request.read()
        resp = web.StreamResponse(headers={"content-type": "application/octet-stream"})
        resp.content_length = self.size
        await resp.prepare(request)
        block = b"x" * (1 << 20)
        try:
            for _ in range(self.size >> 20):
                await resp.write(block)
        except (ConnectionError, asyncio.CancelledError):
            self.cut.set()
            raise
        return resp


def _endless_request(proxy) -> socket.socket:
    """A client with a small receive buffer that has sent one request for an endless answer."""
    s = socket.create_connection(("127.0.0.1", proxy.port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
              b"application/json\r\nContent-Length: 2\r\n\r\n{}")
    return s


def test_a_client_that_stops_reading_is_cut_off_at_body_timeout(start):
    with EndlessUpstream() as up:
        proxy = start("body_timeout: 1\n", base=up.url)
        s = _endless_request(proxy)
        try:
            # reads nothing: the proxy's writes stall, then it gives up on both connections
            assert up.cut.wait(15), "the upstream answer was never cut off"
        finally:
            s.close()
    assert proxy.stop() == 0
    assert b"took no byte for 1 s" in proxy.stderr()


def test_a_slow_reader_that_keeps_reading_is_never_cut(start):
    """body_timeout measures progress, not the wait for the whole buffer to drain: a client
    that reads a little all the time keeps its answer however long it takes."""
    with EndlessUpstream() as up:
        proxy = start("body_timeout: 1\n", base=up.url)
        s = _endless_request(proxy)
        try:
            got, t0 = 0, time.monotonic()
            while time.monotonic() - t0 < 4:  # four times body_timeout, 16 KiB per 50 ms
                got += len(s.recv(16384))
                time.sleep(0.05)
            assert not up.cut.is_set() and got > 16384
        finally:
            s.close()
    proxy.stop()
    assert b"took no byte" not in proxy.stderr()


@pytest.mark.parametrize("text", ["header_timeout: 0\n", "max_connections: many\n",
                                  "body_timeout: -1\n", "allowed_hosts: 3\n",
                                  "max_connections: 1.5\n"])
def test_bad_limits_stop_the_proxy_with_one_line(tmp_path, env, text):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(text)
    p = subprocess.run([console_script(), "proxy", "--config", str(cfg)], env=env,
                       capture_output=True, timeout=60)
    assert p.returncode == 1
    assert p.stderr.count(b"\n") == 1 and p.stderr.startswith(b"caveman-engine proxy: ")
    assert text.split(":")[0].encode() in p.stderr


# -- item 6: a gzip bomb from the upstream, and a PostgreSQL outage

def _gzip_bomb() -> bytes:
    """A gzip body that inflates to 256 MiB, usage first."""
    co = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = [co.compress(b'{"usage":{"input_tokens":1,"cache_creation_input_tokens":7},'
                         b'"pad":"')]
    zeros = b"0" * (1 << 20)
    parts += [co.compress(zeros) for _ in range(256)]
    parts += [co.compress(b'"}'), co.flush()]
    return b"".join(parts)


class BombUpstream(OneRoute):
    """One answer, the same to every request: ``body`` with ``encoding``."""

    def __init__(self, body: bytes, encoding: str = "gzip") -> None:
        super().__init__()
        self.body, self.encoding = body, encoding

    async def _answer(self, request):
        await request.read()
        headers = {"content-type": "application/json"}
        if self.encoding:
            headers["content-encoding"] = self.encoding
        return web.Response(body=self.body, headers=headers)


def _probe_while(proxy: Proxy, work) -> tuple[object, float]:
    """Run ``work()`` while probing /health/live every 20 ms; its result and the slowest probe."""
    worst = 0.0
    stop = threading.Event()

    def probe():
        nonlocal worst
        while not stop.is_set():
            t0 = time.monotonic()
            request(proxy.url + "/health/live", method="GET", timeout=30)
            worst = max(worst, time.monotonic() - t0)
            time.sleep(0.02)

    t = threading.Thread(target=probe)
    t.start()
    try:
        result = work()
    finally:
        stop.set()
        t.join(60)
    return result, worst


@pytest.mark.parametrize("body,encoding", [
    (None, "gzip"),
    # a zlib header, then empty stored blocks without end: no output at all (32 MiB)
    (b"\x78\x9c" + b"\x00\x00\x00\xff\xff" * ((32 << 20) // 5), "deflate"),
    # 2 MiB of lines that name usage and are no JSON, each a failed parse
    (b"sage\n" * ((2 << 20) // 5), ""),
], ids=["gzip-bomb", "deflate-empty-blocks", "usage-lines"])
def test_a_hostile_answer_costs_neither_memory_nor_the_event_loop(start, body, encoding):
    with BombUpstream(body if body is not None else _gzip_bomb(), encoding) as bomb:
        proxy = start(base=bomb.url)
        before = proxy.rss_peak_kib()
        r, worst = _probe_while(proxy, lambda: post(proxy.url + "/v1/messages", PLAIN,
                                                    {"x-cave-session": "bomb-1"}))
        assert r.status == 200 and r.body == bomb.body  # relayed byte for byte
        grown = proxy.rss_peak_kib() - before
    assert grown < 32 * 1024 and worst < 0.25, \
        f"peak RSS grew by {grown} KiB; a health check waited {worst:.3f} s"


def test_a_postgresql_outage_never_stalls_the_proxy(start, pg_server, pg_url):  # noqa: F811
    proxy = start("toolschema_strip: annotations\nstore_timeout: 1\n",
                  extra_env={"CAVEMAN_CCR_DB": pg_url})
    # a few catalogs at once, so the store has had concurrent users (a pool), then cached
    bodies = [BODY.replace(b"Search files.", f"Search files {i}.".encode()) for i in range(6)]
    threads = [threading.Thread(target=post, args=(proxy.url + "/v1/messages", b))
               for b in bodies]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    first = post(proxy.url + "/v1/messages", BODY)
    assert first.header("x-caveman-toolschema-recovery-handle")
    pg_server.stop()
    try:
        time.sleep(1.2)
        t0 = time.monotonic()
        r, worst = _probe_while(proxy, lambda: post(proxy.url + "/v1/messages", BODY))
        took = time.monotonic() - t0
        assert r.status == 200
        # nothing can vouch for the original: the catalog goes as sent, without a handle
        assert r.header("x-caveman-toolschema-recovery-handle") is None
        assert r.header("x-cave-optimization") == "none"
        assert worst < 0.5, f"a health check waited {worst:.3f} s during the outage"
        assert took < 4, took
        r, worst = _probe_while(proxy, lambda: post(proxy.url + "/v1/messages", bodies[0]))
        assert r.status == 200 and worst < 0.5
    finally:
        pg_server.start()
    # the store is back: rewrites (and their handles) come back with it
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        r = post(proxy.url + "/v1/messages", BODY)
        if r.header("x-caveman-toolschema-recovery-handle"):
            break
        time.sleep(0.5)
    assert r.header("x-caveman-toolschema-recovery-handle") == \
        first.header("x-caveman-toolschema-recovery-handle")
    assert PASSWORD.encode() not in proxy.stderr()


# -- item 7: a rewrite is never served once its original is gone

def test_no_handle_is_served_after_its_original_is_purged(start, env):
    proxy = start("toolschema_strip: annotations\n")
    db = env["CAVEMAN_CCR_DB"]

    def served() -> str | None:
        r = post(proxy.url + "/v1/messages", BODY)
        assert r.status == 200
        handle = r.header("x-caveman-toolschema-recovery-handle")
        if handle is not None:  # the original is in the store as the client reads the handle
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
                row = c.execute("SELECT original FROM recoveries WHERE handle = ?",
                                (handle,)).fetchone()
            assert row is not None, f"{handle} served, its original is gone"
        return handle

    for _ in range(3):
        assert served() is not None
        purge = subprocess.Popen([console_script(), "store", "purge", "--all", "--yes"],
                                 env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        while purge.poll() is None:  # the proxy keeps serving (and checking) meanwhile
            post(proxy.url + "/v1/messages", BODY)
        assert purge.returncode == 0, purge.stderr.read()
        for _ in range(30):  # every request sent after the purge
            served()
    got = subprocess.run([console_script(), "retrieve", served()], env=env,
                         capture_output=True, timeout=60)
    assert got.returncode == 0 and json.loads(got.stdout) == TOOLS
