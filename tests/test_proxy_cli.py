"""The real ``caveman-engine proxy`` console script as a subprocess, on a free loopback port,
in front of the in-process fake upstream; the handle it returns is retrieved with the real
``caveman-engine retrieve``."""

from __future__ import annotations

import subprocess

import anthropic
import pytest

from caveman_engine.proxy import catalog
from tests.conftest import console_script
from tests.fixtures.proxy.process import ProxyProcess
from tests.fixtures.proxy.rawhttp import post, request


@pytest.fixture
def env(proxy_env):
    return proxy_env


class Running(ProxyProcess):
    def __init__(self, args, env):
        super().__init__(args, env, start_timeout=30)


@pytest.fixture
def run_proxy(env):
    started = []

    def start(*args, extra_env=None):
        r = Running(list(args), {**env, **(extra_env or {})})
        started.append(r)
        return r

    yield start
    for r in started:
        r.stop()


TOOLS = [{"name": "grep", "description": "Search files.",
          "input_schema": {"title": "GrepArgs", "type": "object", "$schema": "x",
                           "properties": {"pattern": {"type": "string", "examples": ["a.*"]}},
                           "required": ["pattern"]},
          "cache_control": {"type": "ephemeral"}}]


def test_console_script_end_to_end(tmp_path, upstream, run_proxy, env):
    cfg = tmp_path / "caveman.yaml"
    cfg.write_text(f"toolschema_strip: annotations\nlabel: e2e\nproviders:\n"
                   f"  anthropic:\n    base_url: {upstream.upstream_url}\n"
                   f"  openai:\n    base_url: {upstream.upstream_url}\n")
    proxy = run_proxy("--config", str(cfg))
    client = anthropic.Anthropic(base_url=proxy.url, api_key="sk-ant-test", max_retries=0)
    raw = client.messages.with_raw_response.create(
        model="claude-fake", max_tokens=8, tools=TOOLS,
        messages=[{"role": "user", "content": "hi"}],
        extra_headers={"x-cave-session": "e2e-1"})
    assert raw.parse().content[0].text == "ok"
    assert raw.http_response.content == upstream.fake.sent[-1].body
    assert raw.headers["x-cave-optimization"] == "toolschema-annotation-strip"
    assert raw.headers["x-cave-project"] == "e2e"
    handle = raw.headers["x-caveman-toolschema-recovery-handle"]
    sent = upstream.fake.received[-1].json()["tools"]
    assert "title" not in sent[0]["input_schema"] and "$schema" not in sent[0]["input_schema"]
    assert sent[0]["cache_control"] == {"type": "ephemeral"}

    # `caveman-engine retrieve HANDLE` gives back the exact catalog bytes the SDK sent
    got = subprocess.run([console_script(), "retrieve", handle], env=env, capture_output=True,
                         timeout=60)
    assert got.returncode == 0, got.stderr
    direct = anthropic.Anthropic(base_url=upstream.upstream_url, api_key="k", max_retries=0)
    direct.messages.create(model="claude-fake", max_tokens=8, tools=TOOLS,
                           messages=[{"role": "user", "content": "hi"}])
    assert got.stdout == catalog.extract(upstream.fake.received[-1].body)[0]

    # OpenAI routes go to providers.openai.base_url; 404 for the rest
    r = post(proxy.url + "/v1/chat/completions", b'{"model":"m","tools":[]}',
             {"authorization": "Bearer sk"})
    assert r.status == 200 and upstream.fake.received[-1].path == "/v1/chat/completions"
    assert request(proxy.url + "/v2/x", b"{}").status == 404

    code, err = proxy.stop()
    assert code == 0, err
    assert b"listening on http://127.0.0.1:" in err and b"level annotations" in err


def test_level_flag_overrides_config_and_env(tmp_path, upstream, run_proxy):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"toolschema_strip: annotations\nproviders:\n"
                   f"  anthropic:\n    base_url: {upstream.upstream_url}\n")
    proxy = run_proxy("--config", str(cfg), "--level", "off",
                      extra_env={"CAVEMAN_TOOLSCHEMA_STRIP": "toolschema-max"})
    body = (b'{"model":"m","tools":[{"name":"x","input_schema":{"title":"T","type":"object"}}],'
            b'"messages":[]}')
    r = post(proxy.url + "/v1/messages", body)
    assert r.status == 200 and upstream.fake.received[-1].body == body
    assert r.header("x-cave-optimization") == "none"


@pytest.mark.parametrize("args, text, message, code", [
    (["--listen", "0.0.0.0:8787"], None, b"only loopback hosts", 2),
    (["--listen", ":8787"], None, b"loopback", 2),
    (["--listen", "192.168.0.10:8787"], None, b"only loopback hosts", 2),
    ([], "listen: 0.0.0.0:8787\n", b"only loopback hosts", 1),
    ([], "toolschema_strip: [unclosed\n", b"invalid YAML", 1),
    ([], "providers:\n  anthropic:\n    base_url: not-a-url\n", b"base_url", 1),
])
def test_configuration_errors_exit_1_or_2(tmp_path, env, args, text, message, code):
    """A bad config file exits 1, a bad command-line value 2 (a usage error)."""
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(text or "")
    p = subprocess.run([console_script(), "proxy", "--config", str(cfg), *args], env=env,
                       capture_output=True, timeout=60)
    assert p.returncode == code
    assert message in p.stderr
    assert p.stderr.count(b"\n") == 1 and p.stderr.startswith(b"caveman-engine proxy: ")
