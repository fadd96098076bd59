"""The proxy with the clients people run, through the real console script
(``.venv/bin/caveman-engine proxy``) on loopback, in front of the repository's fake upstream:

* the real caveman-sdk (``caveman_cloud``), which sends its Caveman service key as
  ``Authorization`` and the provider key as ``x-cave-upstream-key``: the provider sees only
  the provider key, in its own header;
* the official ``anthropic`` and ``openai`` SDKs, whose end-to-end headers (user-agent,
  ``x-stainless-*``, …) reach the provider, repeated headers with every value;
* upstream answers and failures: a 4xx reaches the client once (the original bytes are resent
  only after a 400/422 to a rewritten body); a request that reached the upstream is never
  resent on a transport error, a connect failure is;
* ``--level``/config validation: a typo stops the proxy with one line, never a silent ``off``;
* the real Claude Code CLI (tests/npm), whose catalog is rewritten at ``--level toolschema``.
"""

from __future__ import annotations

import json
import signal
import socket
import sqlite3
import subprocess
import threading
import time

import anthropic
import caveman_cloud
import openai
import pytest

from caveman_engine.engine import Engine
from caveman_engine.proxy import catalog
from caveman_engine.store import Store, handle_for
from tests.conftest import console_script, token_counter
from tests.fixtures import claude_code
from tests.fixtures.proxy.fake_upstream import Reply
from tests.fixtures.proxy.process import ProxyProcess, free_port as _free_port
from tests.fixtures.proxy.rawhttp import post

CAVE_KEY = "cave_sk_live_service_key_0123456789"
ANTHROPIC_KEY = "sk-ant-provider-key-abc"
OPENAI_KEY = "sk-openai-provider-key-def"
GEMINI_KEY = "AIza-gemini-provider-key-ghi"

TOOLS = [{"name": "grep", "description": "Search files.",
          "input_schema": {"title": "GrepArgs", "type": "object", "$schema": "x",
                           "properties": {"pattern": {"type": "string", "examples": ["a.*"]}},
                           "required": ["pattern"]}}]
MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture
def env(proxy_env):
    return proxy_env


Running = ProxyProcess  # the console script, ready once /health/ready answers 200


@pytest.fixture
def run_proxy(env, tmp_path):
    """``run_proxy(upstream_url, level, *args, extra_env=..., yaml=...)``: the console script
    with a config file whose three providers point at ``upstream_url``."""
    started = []

    def start(upstream_url: str, level: str = "off", *args, extra_env=None, yaml: str = ""):
        cfg = tmp_path / f"proxy{len(started)}.yaml"
        cfg.write_text(f"toolschema_strip: {level}\nproviders:\n"
                       f"  anthropic:\n    base_url: {upstream_url}\n"
                       f"  openai:\n    base_url: {upstream_url}\n"
                       f"  gemini:\n    base_url: {upstream_url}\n" + yaml)
        r = Running(["--config", str(cfg), *args], {**env, **(extra_env or {})})
        started.append(r)
        return r

    yield start
    for r in started:
        r.stop()


def _get(received, name: str) -> str | None:
    """The value of header ``name`` as the fake received it (None if absent; the one value
    must be the only one)."""
    values = [v for k, v in received.header_list if k.lower() == name]
    assert len(values) <= 1, (name, values)
    return values[0] if values else None


def _names(received) -> list[str]:
    return [k.lower() for k, _ in received.header_list]


def _credentials(received) -> list[tuple[str, str]]:
    return [(k.lower(), v) for k, v in received.header_list
            if k.lower() in ("x-api-key", "authorization", "x-goog-api-key")]


def _assert_no_caveman_credential(received) -> None:
    for k, v in received.header_list:
        assert CAVE_KEY not in v, (k, v)
        assert not k.lower().startswith("x-cave"), k


# --------------------------------------------------------------------------- credentials (24.1)


def test_caveman_sdk_provider_key_replaces_the_service_key(upstream, run_proxy):
    """caveman-sdk sends ``Authorization: Bearer <Caveman key>`` and the provider key in
    ``x-cave-upstream-key``; each provider gets the provider key in its own header, and
    neither the Caveman key nor any ``x-cave-*`` header."""
    proxy = run_proxy(upstream.upstream_url)
    cave = caveman_cloud.Cave(api_key=CAVE_KEY, base_url=proxy.url, agent="support-agent",
                              default_workflow="answer-question")
    fake = upstream.fake

    got = cave.anthropic(upstream_key=ANTHROPIC_KEY).create(
        "/v1/messages", {"model": "claude-fake", "max_tokens": 8, "messages": MESSAGES})
    assert got["content"][0]["text"] == "ok"
    r = fake.received[-1]
    assert r.path == "/v1/messages"
    assert [(k.lower(), v) for k, v in r.header_list if k.lower() in
            ("x-api-key", "authorization", "x-goog-api-key")] == [("x-api-key", ANTHROPIC_KEY)]
    assert _get(r, "anthropic-version") == "2023-06-01"
    _assert_no_caveman_credential(r)

    got = cave.openai(upstream_key=OPENAI_KEY).chat["completions"].create(
        {"model": "gpt-fake", "messages": MESSAGES})
    assert got["choices"][0]["message"]["content"] == "ok"
    r = fake.received[-1]
    assert r.path == "/v1/chat/completions"
    assert [(k.lower(), v) for k, v in r.header_list if k.lower() in
            ("x-api-key", "authorization", "x-goog-api-key")] == \
        [("authorization", f"Bearer {OPENAI_KEY}")]
    _assert_no_caveman_credential(r)

    got = cave.openai(upstream_key=OPENAI_KEY).responses.create(
        {"model": "gpt-fake", "input": "hi"})
    assert got["output"][0]["content"][0]["text"] == "ok"
    r = fake.received[-1]
    assert r.path == "/v1/responses" and _get(r, "authorization") == f"Bearer {OPENAI_KEY}"
    _assert_no_caveman_credential(r)

    got = cave.gemini(upstream_key=GEMINI_KEY).create(
        "/v1beta/models/gemini-fake:generateContent", {"contents": []})
    assert got == {"ok": True, "path": "/v1beta/models/gemini-fake:generateContent"}
    r = fake.received[-1]
    assert [(k.lower(), v) for k, v in r.header_list if k.lower() in
            ("x-api-key", "authorization", "x-goog-api-key")] == [("x-goog-api-key", GEMINI_KEY)]
    _assert_no_caveman_credential(r)


def test_caveman_sdk_without_a_provider_key_never_forwards_the_service_key(upstream, run_proxy):
    proxy = run_proxy(upstream.upstream_url)
    cave = caveman_cloud.Cave(api_key=CAVE_KEY, base_url=proxy.url, agent="a")
    cave.anthropic().create("/v1/messages", {"model": "m", "max_tokens": 8,
                                              "messages": MESSAGES})
    r = upstream.fake.received[-1]
    assert "authorization" not in _names(r) and "x-api-key" not in _names(r)
    _assert_no_caveman_credential(r)
    cave.openai().chat["completions"].create({"model": "m", "messages": MESSAGES})
    r = upstream.fake.received[-1]
    assert "authorization" not in _names(r)
    _assert_no_caveman_credential(r)
    # with a provider key in the proxy's environment, that key goes instead
    proxy = run_proxy(upstream.upstream_url, extra_env={"ANTHROPIC_API_KEY": "env-ant-key",
                                                        "OPENAI_API_KEY": "env-oai-key"})
    cave = caveman_cloud.Cave(api_key=CAVE_KEY, base_url=proxy.url, agent="a")
    cave.anthropic().create("/v1/messages", {"model": "m", "max_tokens": 8,
                                              "messages": MESSAGES})
    r = upstream.fake.received[-1]
    assert _credentials(r) == [("x-api-key", "env-ant-key")]
    _assert_no_caveman_credential(r)
    cave.openai().chat["completions"].create({"model": "m", "messages": MESSAGES})
    r = upstream.fake.received[-1]
    assert _credentials(r) == [("authorization", "Bearer env-oai-key")]
    _assert_no_caveman_credential(r)


def test_provider_sdks_credentials_pass_as_sent(upstream, run_proxy):
    """An SDK pointed at the provider's own API: its credential reaches the provider as it
    would without the proxy (Claude Code's subscription login is a bearer token)."""
    proxy = run_proxy(upstream.upstream_url)
    fake = upstream.fake
    for secret, client, call in (
        (ANTHROPIC_KEY, anthropic.Anthropic(base_url=proxy.url, api_key=ANTHROPIC_KEY,
                                            max_retries=0),
         lambda c: c.messages.create(model="m", max_tokens=8, messages=MESSAGES)),
        ("oauth-token", anthropic.Anthropic(base_url=proxy.url, auth_token="oauth-token",
                                            max_retries=0),
         lambda c: c.messages.create(model="m", max_tokens=8, messages=MESSAGES)),
        (OPENAI_KEY, openai.OpenAI(base_url=proxy.url + "/v1", api_key=OPENAI_KEY,
                                   max_retries=0),
         lambda c: c.chat.completions.create(model="m", messages=MESSAGES)),
    ):
        base = upstream.upstream_url + ("/v1" if isinstance(client, openai.OpenAI) else "")
        call(client.with_options(base_url=base))
        want = _credentials(fake.received[-1])
        assert len(want) == 1 and secret in want[0][1]
        call(client)
        assert _credentials(fake.received[-1]) == want


# --------------------------------------------------------------------------- 4xx answers (24.2, 27.4)


def test_a_429_reaches_the_client_once_with_its_retry_after(upstream, run_proxy):
    proxy = run_proxy(upstream.upstream_url, "toolschema")
    fake = upstream.fake
    fake.push(Reply("error", status=429, headers={"retry-after": "7"}))
    claude = anthropic.Anthropic(base_url=proxy.url, api_key=ANTHROPIC_KEY, max_retries=0)
    with pytest.raises(anthropic.RateLimitError) as e:
        claude.messages.create(model="m", max_tokens=8, messages=MESSAGES, tools=TOOLS)
    assert len(fake.received) == 1  # sent once: the client decides when to try again
    assert e.value.response.headers["retry-after"] == "7"
    assert e.value.response.content == fake.sent[-1].body
    # the 429 answered the rewritten body: the client is told so
    assert e.value.response.headers["x-cave-optimization"] == "toolschema-rewrite"


def test_only_400_and_422_to_a_rewritten_body_resend_the_original(upstream, run_proxy):
    proxy = run_proxy(upstream.upstream_url, "toolschema")
    fake = upstream.fake
    body = json.dumps({"model": "m", "max_tokens": 8, "messages": MESSAGES,
                       "tools": TOOLS}).encode()
    for status in (401, 403, 404, 408, 409, 413, 429):
        n = len(fake.received)
        fake.push(Reply("error", status=status))
        r = post(proxy.url + "/v1/messages", body, {"x-api-key": "k"})
        assert r.status == status and r.body == fake.sent[-1].body, status
        assert len(fake.received) == n + 1, status
        assert fake.received[-1].body != body  # the rewritten body, sent once
    for status in (400, 422):
        n = len(fake.received)
        fake.push(Reply("error", status=status))
        r = post(proxy.url + "/v1/messages", body, {"x-api-key": "k"})
        assert r.status == 200 and r.header("x-cave-optimization") == "none", status
        assert len(fake.received) == n + 2
        assert fake.received[-2].body != body and fake.received[-1].body == body
    # a 400 to a body that was not rewritten is not resent
    n = len(fake.received)
    fake.push(Reply("error", status=400))
    plain = json.dumps({"model": "m", "max_tokens": 8, "messages": MESSAGES}).encode()
    r = post(proxy.url + "/v1/messages", plain, {"x-api-key": "k"})
    assert r.status == 400 and len(fake.received) == n + 1


# --------------------------------------------------------------------------- transport errors (27.4)


def test_a_request_that_reached_the_upstream_is_never_resent(upstream, run_proxy):
    """The upstream read the whole request, then dropped the connection: the model may be
    running it. One attempt, then 502."""
    proxy = run_proxy(upstream.upstream_url, "toolschema",
                      extra_env={"CAVEMAN_PROXY_UPSTREAM_TIMEOUT": "0.5"})
    fake = upstream.fake
    body = json.dumps({"model": "m", "max_tokens": 8, "messages": MESSAGES}).encode()
    fake.push(Reply("drop"))
    r = post(proxy.url + "/v1/messages", body, {"x-api-key": "k"})
    assert r.status == 502
    assert json.loads(r.body)["error"]["code"] == "cave_upstream_unavailable"
    assert len(fake.received) == 1
    # an upstream that read the request and never answers: one attempt too
    fake.push(Reply("hang"))
    r = post(proxy.url + "/v1/messages", body, {"x-api-key": "k"})
    assert r.status == 502 and len(fake.received) == 2
    assert post(proxy.url + "/v1/messages", body, {"x-api-key": "k"}).status == 200


def test_a_connect_failure_is_retried(upstream, run_proxy):
    """No byte of the request left the proxy: tried 3 times (200 ms, then 400 ms apart)."""
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, not listening: every connect is refused
    port = closed.getsockname()[1]
    proxy = run_proxy(f"http://127.0.0.1:{port}")
    body = b'{"model":"m","messages":[]}'
    t = time.monotonic()
    r = post(proxy.url + "/v1/messages", body, {"x-api-key": "k"})
    took = time.monotonic() - t
    assert r.status == 502 and took >= 0.55
    # the upstream comes up after the first refused attempt: the retry gets through
    got = []

    def later():
        time.sleep(0.1)
        closed.listen(1)
        conn, _ = closed.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, rest = data.partition(b"\r\n\r\n")
            length = int([ln.split(b":", 1)[1] for ln in head.split(b"\r\n")
                          if ln.lower().startswith(b"content-length:")][0])
            while len(rest) < length:
                rest += conn.recv(65536)
            got.append(rest)
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                         b"content-length: 2\r\nconnection: close\r\n\r\n{}")

    th = threading.Thread(target=later)
    th.start()
    r = post(proxy.url + "/v1/messages", body, {"x-api-key": "k"})
    th.join(10)
    closed.close()
    assert r.status == 200 and r.body == b"{}" and got == [body]


# --------------------------------------------------------------------------- headers (24.3, 27.7)


def _raw_post(port: int, path: str, header_lines: list[tuple[str, str]], body: bytes) -> bytes:
    head = f"POST {path} HTTP/1.1\r\n".encode()
    for k, v in header_lines:
        head += f"{k}: {v}\r\n".encode()
    head += b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(head + body)
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk


def test_end_to_end_headers_pass_with_every_repeated_value(upstream, run_proxy):
    proxy = run_proxy(upstream.upstream_url, "toolschema")
    body = json.dumps({"model": "m", "max_tokens": 8, "messages": MESSAGES,
                       "tools": TOOLS}).encode()
    sent = [
        ("Host", f"127.0.0.1:{proxy.port}"),
        ("Content-Type", "application/json"),
        ("x-api-key", "k"),
        ("User-Agent", "claude-cli/2.1.332 (external, cli)"),
        ("x-app", "cli"),
        ("X-Claude-Code-Session-Id", "5f0c9d1e-session"),
        ("X-Stainless-Lang", "js"),
        ("X-Stainless-Retry-Count", "0"),
        ("anthropic-dangerous-direct-browser-access", "true"),
        ("anthropic-beta", "claude-code-20250219"),
        ("anthropic-beta", "interleaved-thinking-2025-05-14"),
        ("x-custom", "one"),
        ("X-Custom", "two, three"),
        ("Cookie", "a=1"),
        ("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
        # never forwarded: hop-by-hop, named in Connection, x-cave-*
        ("Keep-Alive", "timeout=5"),
        ("TE", "trailers"),
        ("Upgrade", "h2c"),
        ("Proxy-Authorization", "Basic eDp5"),
        ("Connection", "x-hop-private"),
        ("x-hop-private", "secret"),
        ("x-cave-session", "s-1"),
        ("X-Cave-Api-Key", CAVE_KEY),
    ]
    out = _raw_post(proxy.port, "/v1/messages", sent, body)
    assert out.startswith(b"HTTP/1.1 200 ")
    r = upstream.fake.received[-1]
    got = [(k.lower(), v) for k, v in r.header_list]
    forwarded = [(k.lower(), v) for k, v in sent[1:15]]
    # every end-to-end header, in order, repeated names with every value
    assert [kv for kv in got if kv[0] in {k for k, _ in forwarded}] == forwarded
    names = {k for k, _ in got}
    for hop in ("keep-alive", "te", "upgrade", "proxy-authorization", "x-hop-private",
                "x-cave-session", "x-cave-api-key"):
        assert hop not in names, hop
    assert dict(got)["host"] == upstream.upstream_url.removeprefix("http://")
    assert [v for k, v in got if k == "content-length"] == [str(len(r.body))]
    assert r.body != body  # rewritten: the length is the forwarded body's
    _assert_no_caveman_credential(r)


def test_sdk_headers_reach_the_provider(upstream, run_proxy):
    proxy = run_proxy(upstream.upstream_url)
    claude = anthropic.Anthropic(base_url=proxy.url, api_key=ANTHROPIC_KEY, max_retries=0,
                                 default_headers={"x-app": "cli",
                                                  "anthropic-dangerous-direct-browser-access":
                                                      "true"})
    direct = claude.with_options(base_url=upstream.upstream_url)
    direct.messages.create(model="m", max_tokens=8, messages=MESSAGES)
    want = {k.lower(): v for k, v in upstream.fake.received[-1].header_list}
    claude.messages.create(model="m", max_tokens=8, messages=MESSAGES)
    got = {k.lower(): v for k, v in upstream.fake.received[-1].header_list}
    assert got["user-agent"].startswith("Anthropic/Python")
    assert any(k.startswith("x-stainless-") for k in got)
    for k in ("host", "connection"):  # the proxy's own connection
        want.pop(k, None), got.pop(k, None)
    assert got == want  # the same headers as straight to the provider
    gpt = openai.OpenAI(base_url=proxy.url + "/v1", api_key=OPENAI_KEY, max_retries=0)
    gpt.chat.completions.create(model="m", messages=MESSAGES)
    got = {k.lower(): v for k, v in upstream.fake.received[-1].header_list}
    assert got["user-agent"].startswith("OpenAI/Python")
    assert got["x-stainless-lang"] == "python"


# --------------------------------------------------------------------------- validation (26)


def _run_cli(env, *args, timeout=30):
    return subprocess.run([console_script(), "proxy", "--listen", f"127.0.0.1:{_free_port()}",
                           *args], env=env, capture_output=True, timeout=timeout)


LEVEL_LIST = "not one of off, annotations, toolschema, toolschema-safe, toolschema-max"


@pytest.mark.parametrize("level, message", [
    ("max", f"--level max: {LEVEL_LIST} (did you mean toolschema-max?)"),
    ("Annotations", f"--level Annotations: {LEVEL_LIST} (did you mean annotations?)"),
    ("toolschema_safe", f"--level toolschema_safe: {LEVEL_LIST} (did you mean "
                        "toolschema-safe?)"),
    ("aggressive", f"--level aggressive: {LEVEL_LIST}"),
    ("", "--level is empty: name one of off, annotations, toolschema, toolschema-safe, "
         "toolschema-max"),
])
def test_bad_level_on_the_command_line_exits_2(env, level, message):
    p = _run_cli(env, "--level", level)
    assert p.returncode == 2
    assert p.stderr == f"caveman-engine proxy: {message}\n".encode()
    assert p.stdout == b""


def test_bad_listen_on_the_command_line_exits_2(env):
    p = subprocess.run([console_script(), "proxy", "--listen", "0.0.0.0:8787"], env=env,
                       capture_output=True, timeout=30)
    assert p.returncode == 2 and p.stderr.count(b"\n") == 1
    assert p.stderr.startswith(b"caveman-engine proxy: listen address '0.0.0.0:8787'")


@pytest.mark.parametrize("text, message", [
    ("toolschema_strip: max\n", f"toolschema_strip max: {LEVEL_LIST} (did you mean "
                                "toolschema-max?)"),
    ("toolschema_strip: true\n", f"toolschema_strip true: {LEVEL_LIST}"),
    ("toolschema_stirp: toolschema\n", "unknown key 'toolschema_stirp' (did you mean "
                                       "'toolschema_strip'?)"),
    ("level: toolschema\n", "unknown key 'level' (did you mean 'toolschema_strip'?)"),
    ("colour: red\n", "unknown key 'colour' (expected one of toolschema_strip, label, "),
    ("providers:\n  antropic:\n    base_url: http://127.0.0.1:9\n",
     "unknown provider 'providers.antropic' (did you mean 'anthropic'?)"),
    ("providers:\n  anthropic:\n    baseurl: http://127.0.0.1:9\n",
     "unknown key 'providers.anthropic.baseurl' (did you mean 'base_url'?)"),
    ("label: [1, 2]\n", "label must be a non-empty string"),
    ("label: ''\n", "label must be a non-empty string"),
])
def test_bad_config_file_exits_1(tmp_path, env, text, message):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(text)
    p = _run_cli(env, "--config", str(cfg))
    assert p.returncode == 1, p.stderr
    assert p.stderr.startswith(f"caveman-engine proxy: config {cfg}: {message}".encode())
    assert p.stderr.count(b"\n") == 1 and b"Traceback" not in p.stderr


def test_missing_config_file_exits_1(tmp_path, env):
    missing = tmp_path / "nope.yaml"
    p = _run_cli(env, "--config", str(missing))
    assert p.returncode == 1
    assert p.stderr == f"caveman-engine proxy: config {missing}: no such file\n".encode()
    p = _run_cli({**env, "CAVEMAN_CONFIG": str(missing)})
    assert p.returncode == 1
    assert p.stderr == f"caveman-engine proxy: config {missing}: no such file\n".encode()


def test_an_empty_config_name_is_a_usage_error(env):
    p = _run_cli(env, "--config", "")
    assert p.returncode == 2
    assert p.stderr == (b"caveman-engine proxy: --config needs a file name (an empty one "
                        b"names no file)\n")


def test_a_bad_base_url_is_reported_without_its_password(tmp_path, env):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("providers:\n  anthropic:\n    base_url: htps://user:Sekr1tPW@host\n")
    p = _run_cli(env, "--config", str(cfg))
    assert p.returncode == 1 and p.stderr.count(b"\n") == 1
    assert b"Sekr1tPW" not in p.stderr and b"expected http(s)://host[:port]" in p.stderr


@pytest.mark.parametrize("listen", ["127.0.0.1:\u0663", "127.0.0.1:8_787", "127.0.0.1: 80"])
def test_a_port_is_ascii_digits(env, listen):
    p = subprocess.run([console_script(), "proxy", "--listen", listen], env=env,
                       capture_output=True, timeout=30)
    assert p.returncode == 2 and b"bad port" in p.stderr


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 0)])
def test_ctrl_c_is_an_interruption_sigterm_a_stop(env, sig, code):
    proxy = ProxyProcess([], env)
    proxy.p.send_signal(sig)
    assert proxy.p.wait(timeout=30) == code
    assert b"Traceback" not in proxy.stderr()


def test_bad_level_in_the_environment_exits_1(env):
    p = _run_cli({**env, "CAVEMAN_TOOLSCHEMA_STRIP": "toolschema-MAX"})
    assert p.returncode == 1
    assert p.stderr == (f"caveman-engine proxy: CAVEMAN_TOOLSCHEMA_STRIP toolschema-MAX: "
                        f"{LEVEL_LIST} (did you mean toolschema-max?)\n").encode()


# --------------------------------------------------------------------------- Claude Code


def test_claude_code_through_the_proxy(upstream, run_proxy, env, tmp_path):
    claude_code.require()
    fake = upstream.fake
    home = tmp_path / "cc-home"
    home.mkdir()
    # straight to the fake: the catalog Claude Code sends
    direct = claude_code.run(upstream.upstream_url, str(home))
    assert direct.returncode == 0, direct.stderr
    first = [r for r in fake.received if catalog.extract(r.body)]
    assert first, "Claude Code sent no tool catalog"
    original = catalog.extract(first[-1].body)[0]

    proxy = run_proxy(upstream.upstream_url, "toolschema")
    n = len(fake.received)
    got = claude_code.run(proxy.url, str(home))
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == b"ok"  # the fake's answer reached Claude Code
    seen = [r for r in fake.received[n:] if catalog.extract(r.body)]
    assert seen
    r = seen[-1]
    # Claude Code's own headers reached the upstream
    assert _get(r, "user-agent").startswith("claude-cli/")
    assert _get(r, "x-app") == "cli"
    assert "claude-code-" in _get(r, "anthropic-beta")
    assert _get(r, "x-claude-code-session-id")
    assert _get(r, "anthropic-dangerous-direct-browser-access") == "true"
    assert _get(r, "x-api-key") == "test-key"
    assert any(k.lower().startswith("x-stainless-") for k, _ in r.header_list)
    # its catalog was rewritten, and the store gives back the exact original
    sent = catalog.extract(r.body)[0]
    with sqlite3.connect(env["CAVEMAN_CCR_DB"]) as c:
        stored = c.execute("SELECT handle, original FROM recoveries").fetchall()
    assert len(stored) == 1
    handle, kept = stored[0]
    back = subprocess.run([console_script(), "retrieve", handle], env=env, capture_output=True,
                          timeout=60)
    assert back.returncode == 0, back.stderr
    assert back.stdout == kept and handle == handle_for(kept)
    want = Engine(Store(":memory:"), token_counter()).compress(kept, "toolschema").output
    assert sent == want and len(sent) < len(kept)
    assert kept == original  # what Claude Code sends without the proxy, byte for byte
    count = token_counter().count
    print(f"\nClaude Code {len(json.loads(kept))}-tool catalog at toolschema: {len(kept)} -> "
          f"{len(sent)} bytes, {count(kept)} -> {count(sent)} tokens")
