"""The proxy end to end, in process: the official ``anthropic`` and ``openai`` SDKs (and a raw
stdlib client for exact bytes) talk to the proxy, which talks to a local fake upstream that
records what it received and sent. Loopback only. (proxy_spec §2, §3, §5, §6.)"""

from __future__ import annotations

import functools
import json
import socket
import sqlite3
import threading
import time

import anthropic
import openai
import pytest

from caveman_engine.compressors.toolschema_annotations import strip_annotations
from caveman_engine.engine import Engine
from caveman_engine.proxy import catalog
from caveman_engine.store import Store, handle_for
from tests.conftest import token_counter
from tests.fixtures.proxy.fake_upstream import Reply
from tests.fixtures.proxy.harness import Harness
from tests.fixtures.proxy.rawhttp import post, request

LEVELS = ["annotations", "toolschema", "toolschema-safe", "toolschema-max"]
LEVER = {"annotations": "toolschema-annotation-strip", "toolschema": "toolschema-rewrite",
         "toolschema-safe": "toolschema-safe-rewrite", "toolschema-max": "toolschema-max-rewrite"}
ENGINE_TYPE = {"annotations": "toolschema-annotations", "toolschema": "toolschema",
               "toolschema-safe": "toolschema-safe", "toolschema-max": "toolschema-max"}
STRIP = "toolschema-annotation-strip"

GREP_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "GrepArgs",
    "type": "object",
    "properties": {
        "pattern": {"type": "string", "title": "Pattern",
                    "description": "The regular expression to search for in file contents.",
                    "examples": ["foo.*", "^def "]},
        "title": {"type": "string", "description": "A property literally named title."},
        "path": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None,
                 "title": "Path", "description": "Directory to search in. Defaults to the "
                 "current working directory. Must be an absolute path when given."},
        "mode": {"type": "string", "enum": ["content", "files", "count"], "default": "files",
                 "deprecated": False},
    },
    "required": ["pattern", "title"],
    "additionalProperties": False,
}
ISSUE_SCHEMA = {
    "type": "object",
    "title": "CreateIssue",
    "$defs": {"Label": {"type": "string", "title": "Label", "enum": ["bug", "feature"]}},
    "properties": {
        "repo": {"type": "string", "examples": ["octo/hello"],
                 "description": "Repository in owner/name form."},
        "labels": {"type": "array", "items": {"$ref": "#/$defs/Label"}},
        "body": {"type": "string", "description": "The issue body. It is written in Markdown. "
                 "Please try to keep it short and to the point, if at all possible."},
    },
    "required": ["repo"],
}
DESCRIPTIONS = {
    "grep": "Search file contents with a regular expression. This tool is the preferred way to "
            "search the code base. It is fast and it respects the ignore files of the project. "
            "Use it before reading whole files. Results are sorted by modification time.",
    "create_issue": "Create a new issue in a GitHub repository.",
    "read_file": "Read a file from the local filesystem.",
}


def _read_schema():
    return {"type": "object", "title": "ReadArgs",
            "properties": {"file_path": {"type": "string", "title": "File path",
                                         "description": "Absolute path of the file."}},
            "required": ["file_path"]}


def anthropic_tools() -> list[dict]:
    return [
        {"name": "grep", "description": DESCRIPTIONS["grep"], "input_schema": GREP_SCHEMA},
        {"name": "create_issue", "description": DESCRIPTIONS["create_issue"],
         "input_schema": ISSUE_SCHEMA,
         "annotations": {"title": "Create issue", "readOnlyHint": False}},
        {"name": "read_file", "description": DESCRIPTIONS["read_file"],
         "input_schema": _read_schema(), "cache_control": {"type": "ephemeral"}},
    ]


def chat_tools() -> list[dict]:
    return [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                              "parameters": t["input_schema"]}}
            for t in anthropic_tools()]


def responses_tools() -> list[dict]:
    return [{"type": "function", "name": t["name"], "description": t["description"],
             "parameters": t["input_schema"], "strict": False} for t in anthropic_tools()] + \
        [{"type": "web_search_preview"}]


MESSAGES = [{"role": "user", "content": "Find the TODOs in src/ and file an issue."}]


_BASE_CLIENTS: dict = {}


def _base_client(kind: str):
    """One SDK client per kind for the module (building one costs ~0.1 s); each test derives
    its own with ``with_options(base_url=...)``, which shares the HTTP client."""
    if kind not in _BASE_CLIENTS:
        if kind == "anthropic":
            _BASE_CLIENTS[kind] = anthropic.Anthropic(base_url="http://127.0.0.1:9",
                                                      api_key="sk-ant-test", max_retries=0,
                                                      timeout=30)
        else:
            _BASE_CLIENTS[kind] = openai.OpenAI(base_url="http://127.0.0.1:9/v1",
                                                api_key="sk-test", max_retries=0, timeout=30)
    return _BASE_CLIENTS[kind]


class Clients:
    def __init__(self, base: str) -> None:
        self.base = base

    @functools.cached_property
    def anthropic(self):
        return _base_client("anthropic").with_options(base_url=self.base)

    @functools.cached_property
    def openai(self):
        return _base_client("openai").with_options(base_url=self.base + "/v1")

    def call(self, shape: str, *, stream: bool = False, session: str | None = None,
             messages=None, tools=None) -> tuple[dict, bytes]:
        """One SDK call; the raw response headers and body bytes the client received."""
        extra = {"x-cave-session": session} if session else None
        msgs = messages or MESSAGES
        if shape == "messages":
            ctx = self.anthropic.messages.with_streaming_response.create(
                model="claude-fake", max_tokens=64, messages=msgs,
                tools=tools or anthropic_tools(), stream=stream, extra_headers=extra)
        elif shape == "chat":
            kw = {"stream_options": {"include_usage": True}} if stream else {}
            ctx = self.openai.chat.completions.with_streaming_response.create(
                model="gpt-fake", messages=msgs, tools=tools or chat_tools(), stream=stream,
                extra_headers=extra, **kw)
        elif shape == "responses":
            ctx = self.openai.responses.with_streaming_response.create(
                model="gpt-fake", input=msgs, tools=tools or responses_tools(), stream=stream,
                extra_headers=extra)
        else:
            raise ValueError(shape)
        with ctx as r:
            return dict(r.headers), b"".join(r.iter_bytes())


SHAPES = ["messages", "chat", "responses"]


@pytest.fixture
def harness(tmp_path):
    """``harness(level, **kw)``: a started fake upstream + proxy on a fresh store file."""
    made = []

    def make(level: str = "annotations", **kw) -> Harness:
        if "engine" not in kw:
            kw["engine"] = Engine(Store(str(tmp_path / f"ccr{len(made)}.db")), token_counter())
        h = Harness(level, **kw).start()
        made.append(h)
        return h

    yield make
    for h in made:
        h.stop()


def _records(h: Harness) -> list[tuple[str, bytes]]:
    with sqlite3.connect(h.engine.store.path) as c:
        return c.execute("SELECT handle, original FROM recoveries").fetchall()


def _direct(h: Harness, shape: str, **kw) -> bytes:
    """What the SDK sends for this call, captured by sending it straight to the fake."""
    Clients(h.upstream_url).call(shape, **kw)
    return h.fake.received[-1].body


def _expected_span(level: str, span: bytes) -> bytes:
    r = Engine(Store(":memory:"), token_counter()).compress(span, ENGINE_TYPE[level])
    assert r.recovery_handle is not None and len(r.output) < len(span)
    return r.output


# --------------------------------------------------------------------------- the rewrite


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("level", LEVELS)
def test_rewrite_per_shape_and_level(harness, level, shape, stream):
    h = harness(level)
    original = _direct(h, shape, stream=stream)
    span, start, end = catalog.extract(original)
    want = _expected_span(level, span)
    if level == "annotations":
        assert want == strip_annotations(span)[0]  # the engine's compressor IS the strip

    headers, got = Clients(h.proxy_url).call(shape, stream=stream)
    upstream = h.fake.received[-1].body
    assert upstream == original[:start] + want + original[end:]
    assert got == h.fake.sent[-1].body  # the client got the upstream's bytes
    if stream:
        assert headers["content-type"].startswith("text/event-stream")
        assert b"data: " in got
    assert headers["x-cave-optimization"] == LEVER[level]
    assert headers["x-caveman-toolschema-strip"] == level
    assert headers["x-caveman-toolschema-recovery-handle"] == handle_for(span)
    assert headers["x-cave-project"] == "local"
    assert "x-caveman-tripwire" not in headers
    assert h.engine.retrieve(handle_for(span)) == span  # recoverable, exact bytes
    assert _records(h) == [(handle_for(span), span)]


def test_off_forwards_every_byte_and_stores_nothing(harness):
    h = harness("off", engine=None)
    for shape in SHAPES:
        for stream in (False, True):
            original = _direct(h, shape, stream=stream)
            headers, got = Clients(h.proxy_url).call(shape, stream=stream)
            assert h.fake.received[-1].body == original
            assert got == h.fake.sent[-1].body
            assert headers["x-cave-optimization"] == "none"
            assert "x-caveman-toolschema-strip" not in headers
            assert "x-caveman-toolschema-recovery-handle" not in headers
    assert h.proxy.rewriter.engine_calls == 0


def test_worked_example_exact_bytes(harness):
    """proxy_spec §7, byte for byte through the raw client."""
    h = harness("annotations")
    tools = (b'[{"name":"grep","description":"Search files.","input_schema":{"title":"GrepArgs",'
             b'"type":"object","properties":{"pattern":{"type":"string","examples":["foo.*"]},'
             b'"title":{"type":"string"}},"required":["pattern"],"$schema":'
             b'"http://json-schema.org/draft-07/schema#"},"cache_control":{"type":"ephemeral"}}]')
    forwarded = (b'[{"name":"grep","description":"Search files.","input_schema":{"type":"object",'
                 b'"properties":{"pattern":{"type":"string"},"title":{"type":"string"}},'
                 b'"required":["pattern"]},"cache_control":{"type":"ephemeral"}}]')
    head = b'{\n  "model": "claude-fake",\n  "system": [{"type":"text","text":"be \\u00e9 brief",' \
           b'"cache_control":{"type":"ephemeral"}}],\n  "tools": '
    tail = b',\n  "messages": [{"role":"user","content":"hi"}], "max_tokens": 1e3\n}\n'
    r = post(h.proxy_url + "/v1/messages", head + tools + tail, {"x-api-key": "k"})
    assert r.status == 200
    assert h.fake.received[-1].body == head + forwarded + tail
    assert r.header("x-cave-optimization") == "toolschema-annotation-strip"
    assert r.header("x-caveman-toolschema-strip") == "annotations"
    assert r.header("x-caveman-toolschema-recovery-handle") == "ccr_b77cf2bb8ffba1b2f232fdd9fa8cd2ea"
    assert r.body == h.fake.sent[-1].body
    assert _records(h) == [("ccr_b77cf2bb8ffba1b2f232fdd9fa8cd2ea", tools)]


def test_kept_members_and_order(harness):
    """§6.2–6.4: what the strip removes and what it keeps, on the SDK's own body."""
    h = harness("annotations")
    Clients(h.proxy_url).call("messages")
    sent = h.fake.received[-1].json()["tools"]
    assert [t["name"] for t in sent] == ["grep", "create_issue", "read_file"]
    assert sent[2]["cache_control"] == {"type": "ephemeral"}
    assert all("cache_control" not in t for t in sent[:2])
    assert [t["description"] for t in sent] == [DESCRIPTIONS[t["name"]] for t in sent]
    assert sent[1]["annotations"] == {"title": "Create issue", "readOnlyHint": False}
    grep = sent[0]["input_schema"]
    assert "$schema" not in grep and "title" not in grep
    assert "examples" not in grep["properties"]["pattern"]
    assert "deprecated" not in grep["properties"]["mode"]
    assert "title" in grep["properties"] and grep["required"] == ["pattern", "title"]
    assert sent[1]["input_schema"]["$defs"]["Label"] == {"type": "string",
                                                         "enum": ["bug", "feature"]}


@pytest.mark.parametrize("level", LEVELS)
def test_cache_control_stays_on_the_same_tool(harness, level):
    h = harness(level)
    Clients(h.proxy_url).call("messages")
    sent = h.fake.received[-1].json()["tools"]
    assert [("cache_control" in t) for t in sent] == [False, False, True]
    assert sent[2]["cache_control"] == {"type": "ephemeral"}
    assert h.fake.received[-1].body.count(b'"cache_control"') == 1


@pytest.mark.parametrize("level", ["annotations", "toolschema-max"])
def test_same_catalog_same_bytes_every_turn(harness, level):
    """§6.7: identical upstream bodies for a repeated request; a longer later turn keeps the
    identical rewritten span; the engine ran once (the rest were cache hits)."""
    h = harness(level)
    c = Clients(h.proxy_url)
    c.call("messages")
    c.call("messages")
    first, second = h.fake.received[-2].body, h.fake.received[-1].body
    assert first == second
    assert first != _direct(h, "messages")
    longer = MESSAGES + [{"role": "assistant", "content": "On it."},
                         {"role": "user", "content": "Also look in tests/."}]
    c.call("messages", messages=longer)
    span1 = catalog.extract(first)[0]
    span3 = catalog.extract(h.fake.received[-1].body)[0]
    assert span1 == span3
    assert h.proxy.rewriter.engine_calls == 1
    assert len(_records(h)) == 1


def test_concurrent_new_catalog_compressed_once(harness):
    h = harness("toolschema")
    c = Clients(h.proxy_url)
    errors = []

    def one():
        try:
            c.call("chat")
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    bodies = {r.body for r in h.fake.received}
    assert len(bodies) == 1 and len(h.fake.received) == 12
    assert h.proxy.rewriter.engine_calls == 1


def test_count_tokens_and_embeddings_never_rewritten(harness):
    h = harness("toolschema-max")
    c = Clients(h.proxy_url)
    raw = c.anthropic.messages.with_raw_response.count_tokens(
        model="claude-fake", messages=MESSAGES, tools=anthropic_tools())
    assert raw.parse().input_tokens == 42
    assert raw.headers["x-cave-optimization"] == "none"
    body = h.fake.received[-1].body
    assert h.fake.received[-1].path == "/v1/messages/count_tokens"
    assert json.loads(body)["tools"] == anthropic_tools()
    emb = json.dumps({"model": "e", "input": "x", "tools": chat_tools()}).encode()
    r = post(h.proxy_url + "/v1/embeddings", emb, {"authorization": "Bearer k"})
    assert r.status == 200 and h.fake.received[-1].body == emb
    assert h.proxy.rewriter.engine_calls == 0


def test_sdks_parse_streams_through_the_proxy(harness):
    h = harness("toolschema-safe")
    c = Clients(h.proxy_url)
    with c.anthropic.messages.stream(model="claude-fake", max_tokens=8, messages=MESSAGES,
                                     tools=anthropic_tools()) as s:
        assert s.get_final_message().content[0].text == "ok"
    chunks = list(c.openai.chat.completions.create(
        model="gpt-fake", messages=MESSAGES, tools=chat_tools(), stream=True,
        stream_options={"include_usage": True}))
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices) == "ok"
    assert chunks[-1].usage.prompt_tokens == 100
    events = list(c.openai.responses.create(model="gpt-fake", input=MESSAGES,
                                            tools=responses_tools(), stream=True))
    assert [e.type for e in events] == ["response.created", "response.output_text.delta",
                                        "response.completed"]
    resp = c.openai.responses.create(model="gpt-fake", input=MESSAGES, tools=responses_tools())
    assert resp.output_text == "ok"


# --------------------------------------------------------------------------- fail closed


def _anthropic_body(tools: bytes) -> bytes:
    return b'{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],' \
           b'"tools":' + tools + b'}'


@pytest.mark.parametrize("body", [
    b'{"model":"m",',  # invalid JSON
    b'not json',
    b'[{"tools":[]}]',  # root not an object
    b'{"model":"m","tools":{"name":"x","input_schema":{"title":"T"}}}',  # tools not an array
    b'{"model":"m","tools":null}',
    b'{"model":"m","tools":"[{\\"title\\":1}]"}',
    b'{"model":"m","tools":[]}',
    b'{"model":"m","tools":[{"name":"x","input_schema":{"type":"object"}}]}',  # nothing to strip
    b'{"model":"m","tools":[{"name":"x","input_schema":{"title":"T"}}]} trailing',
    b'{"tools":{"a":1},"tools":[{"name":"x","input_schema":{"title":"T","type":"object"}}]}',
    b'',
])
def test_unextractable_or_unshrinkable_bodies_pass_untouched(harness, body):
    h = harness("annotations")
    r = post(h.proxy_url + "/v1/messages", body, {"x-api-key": "k"})
    assert r.status == 200
    assert h.fake.received[-1].body == body
    assert r.header("x-cave-optimization") == "none"
    assert r.header("x-caveman-toolschema-strip") is None
    assert r.header("x-caveman-toolschema-recovery-handle") is None
    assert _records(h) == []


def test_store_over_budget_fails_closed(harness):
    h = harness("annotations", engine=Engine(Store(":memory:", max_bytes=65536), token_counter()))
    big = [{"name": f"t{i}", "description": "d" * 1000,
            "input_schema": {"title": "T", "type": "object"}} for i in range(80)]
    original = _direct(h, "messages", tools=big)
    headers, _ = Clients(h.proxy_url).call("messages", tools=big)
    assert h.fake.received[-1].body == original
    assert headers["x-cave-optimization"] == "none"
    assert "x-caveman-toolschema-recovery-handle" not in headers
    small = _anthropic_body(b'[{"name":"x","input_schema":{"title":"T","type":"object"}}]')
    assert post(h.proxy_url + "/v1/messages", small).header("x-cave-optimization") == STRIP


def test_compressed_request_body_is_not_rewritten(harness):
    import gzip as gz

    h = harness("annotations")
    body = gz.compress(_anthropic_body(b'[{"name":"x","input_schema":{"title":"T"}}]'))
    r = post(h.proxy_url + "/v1/messages", body, {"content-encoding": "gzip"})
    assert r.status == 200 and h.fake.received[-1].body == body
    assert h.fake.received[-1].headers["Content-Encoding"] == "gzip"


# --------------------------------------------------------------------------- retries and errors


@pytest.mark.parametrize("status", [400, 422])
def test_400_or_422_on_a_rewritten_body_is_retried_with_the_original(harness, status):
    h = harness("annotations")
    original = _direct(h, "messages")
    h.fake.push(Reply("error", status=status))
    headers, got = Clients(h.proxy_url).call("messages", session="retry-1")
    rewritten, retried = h.fake.received[-2].body, h.fake.received[-1].body
    assert rewritten != original and retried == original
    assert got == h.fake.sent[-1].body and json.loads(got)["type"] == "message"
    assert headers["x-cave-optimization"] == "none"
    assert "x-caveman-toolschema-strip" not in headers
    assert "x-caveman-toolschema-recovery-handle" not in headers
    assert h.proxy.ledger.session("retry-1").previous_levers == frozenset()


def test_4xx_retry_answer_reaches_the_client_as_is(harness):
    h = harness("annotations")
    h.fake.push(Reply("error", status=400), Reply("error", status=401))
    with pytest.raises(anthropic.AuthenticationError):
        Clients(h.proxy_url).call("messages")
    assert len(h.fake.received) == 2


def test_4xx_without_a_rewrite_and_5xx_are_not_retried(harness):
    h = harness("annotations")
    body = _anthropic_body(b'[{"name":"x","input_schema":{"type":"object"}}]')
    h.fake.push(Reply("error", status=400))
    r = post(h.proxy_url + "/v1/messages", body)
    assert r.status == 400 and r.body == h.fake.sent[-1].body and len(h.fake.received) == 1
    h.fake.push(Reply("error", status=529))
    rewritable = _anthropic_body(b'[{"name":"x","input_schema":{"title":"T","type":"object"}}]')
    r = post(h.proxy_url + "/v1/messages", rewritable)
    assert r.status == 529 and r.body == h.fake.sent[-1].body and len(h.fake.received) == 2
    assert r.header("x-cave-optimization") == STRIP  # 5xx: strip headers stay
    assert r.header("x-caveman-toolschema-strip") == "annotations"


@pytest.mark.parametrize("status", [401, 403, 404, 408, 409, 413, 429])
def test_other_4xx_on_a_rewritten_body_reach_the_client_once(harness, status):
    """Not a refused body (a rate limit, a bad key, a timeout): sending the original would
    only be the same request twice (issue 24)."""
    h = harness("annotations")
    rewritable = _anthropic_body(b'[{"name":"x","input_schema":{"title":"T","type":"object"}}]')
    h.fake.push(Reply("error", status=status, headers={"retry-after": "3"}))
    r = post(h.proxy_url + "/v1/messages", rewritable, {"x-cave-session": "s-4xx"})
    assert r.status == status and r.body == h.fake.sent[-1].body
    assert len(h.fake.received) == 1 and h.fake.received[0].body != rewritable
    assert r.header("retry-after") == "3"
    assert r.header("x-cave-optimization") == STRIP
    assert h.proxy.ledger.session("s-4xx").previous_levers == frozenset({STRIP})


def test_transport_error_after_the_request_was_sent_is_a_502(harness):
    """The upstream read the request, then dropped the connection: it may be running it, so
    it is not sent again (issue 27)."""
    h = harness("annotations")
    body = _anthropic_body(b'[{"name":"x","input_schema":{"title":"T","type":"object"}}]')
    h.fake.push(Reply("drop"))
    r = post(h.proxy_url + "/v1/messages", body, {"x-cave-trace-id": "f" * 32})
    assert r.status == 502 and len(h.fake.received) == 1
    err = json.loads(r.body)["error"]
    assert err["type"] == "cave_gateway_error" and err["code"] == "cave_upstream_unavailable"
    assert err["message"] == "Upstream service error."
    assert err["trace_id"] == "f" * 32 and err["request_id"] == r.header("x-cave-request-id")


def test_upstream_that_never_answers_gives_502(harness):
    h = harness("annotations", upstream_timeout=0.3)
    h.fake.push(Reply("hang"))
    t = time.monotonic()
    r = post(h.proxy_url + "/v1/messages", _anthropic_body(b"[]"))
    assert r.status == 502
    assert json.loads(r.body)["error"]["code"] == "cave_upstream_unavailable"
    assert time.monotonic() - t < 5
    assert len(h.fake.received) == 1  # it had the request: never sent twice


def test_upstream_breaking_off_mid_stream_is_not_a_clean_end(harness):
    import http.client

    h = harness("annotations")
    h.fake.push(Reply("break"))
    with pytest.raises((http.client.IncompleteRead, ConnectionError)):
        post(h.proxy_url + "/v1/messages", _anthropic_body(b"[]"))
    with pytest.raises(Exception):  # the SDK sees a broken stream (transport error)
        h.fake.push(Reply("break"))
        with Clients(h.proxy_url).anthropic.messages.stream(
                model="m", max_tokens=5, messages=MESSAGES) as s:
            s.get_final_message()
    # the proxy is still fine
    assert Clients(h.proxy_url).call("messages")[1] == h.fake.sent[-1].body


def test_client_disconnect_mid_stream_closes_the_upstream(harness):
    h = harness("annotations")
    h.fake.push(Reply("trickle", events=500, delay=0.01))
    body = _anthropic_body(b"[]")
    port = int(h.proxy_url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  b"Content-Type: application/json\r\n"
                  b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        got = b""
        t = time.monotonic()
        while got.count(b"content_block_delta") < 3:
            got += s.recv(65536)
        assert got.startswith(b"HTTP/1.1 200 ")
        assert time.monotonic() - t < 3  # events arrive as sent (the stream takes 5 s)
    deadline = time.monotonic() + 5
    while not h.fake.events and time.monotonic() < deadline:
        time.sleep(0.02)
    assert h.fake.events and h.fake.events[0][0] == "client-gone"
    assert h.fake.events[0][2] < 400  # the upstream stream was cut short, not drained
    assert Clients(h.proxy_url).call("messages")[1] == h.fake.sent[-1].body


def test_body_over_32_mib_is_413(harness):
    h = harness("annotations")
    big = b'{"model":"m","messages":[{"role":"user","content":"' + b"x" * (33 * 1024 * 1024) + \
        b'"}]}'
    r = post(h.proxy_url + "/v1/messages", big)
    assert r.status == 413
    err = json.loads(r.body)["error"]
    assert err["code"] == "cave_request_too_large" and err["type"] == "cave_gateway_error"
    assert h.fake.received == []
    exactly = b'"' + b"y" * (32 * 1024 * 1024 - 2) + b'"'
    r = post(h.proxy_url + "/v1/messages", exactly)
    assert r.status == 200 and h.fake.received[-1].body == exactly


# --------------------------------------------------------------------------- routes and headers


def test_routes_health_and_404(harness):
    h = harness("annotations")
    for path in ("/health/live", "/health/ready"):
        r = request(h.proxy_url + path, method="GET")
        assert r.status == 200 and json.loads(r.body)["status"] in ("ok", "ready")
    for method, path in (("POST", "/v1/models"), ("GET", "/v1/messages"), ("POST", "/nope"),
                         ("PUT", "/v1/chat/completions"), ("POST", "/w/BAD/v1/messages"),
                         ("POST", "/w/" + "a" * 65 + "/v1/messages"),
                         ("POST", "/openai/v1/messages")):
        r = request(h.proxy_url + path, b"{}", method=method)
        assert r.status == 404, path
        assert json.loads(r.body)["error"]["code"] == "cave_route_not_found"
    assert h.fake.received == []


def test_health_answers_head_and_other_methods_are_routed(harness):
    h = harness("annotations")
    for path in ("/health/live", "/health/ready"):
        r = request(h.proxy_url + path, method="HEAD")
        assert r.status == 200 and r.body == b""
        r = request(h.proxy_url + path, b"{}", method="POST")
        assert r.status == 404
        assert json.loads(r.body)["error"]["code"] == "cave_route_not_found"
    assert h.fake.received == []


def _raw_exchange(port: int, head: bytes, body: bytes) -> tuple[bytes, bytes]:
    """Send ``head``; wait for an interim answer before sending ``body``. (What came back
    before the body, everything after it up to the end of the final response.)"""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(head)
        early = s.recv(65536)
        s.sendall(body)
        rest = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            rest += chunk
        return early, rest


def test_expect_100_continue_is_answered_before_the_body(harness):
    h = harness("annotations")
    port = int(h.proxy_url.rsplit(":", 1)[1])
    body = _anthropic_body(b'[{"name":"x","input_schema":{"title":"T","type":"object"}}]')
    head = (b"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Connection: close\r\nExpect: 100-continue\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n")
    early, rest = _raw_exchange(port, head, body)
    assert early == b"HTTP/1.1 100 Continue\r\n\r\n"
    assert rest.startswith(b"HTTP/1.1 200 ")
    assert rest.endswith(h.fake.sent[-1].body)
    assert h.fake.received[-1].body != body  # rewritten as usual
    # an expectation the proxy cannot meet: 417, nothing sent upstream
    n = len(h.fake.received)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(head.replace(b"100-continue", b"200-ok"))
        assert s.recv(65536).startswith(b"HTTP/1.1 417 ")
    assert len(h.fake.received) == n


def test_upstream_cookies_are_never_sent_back_upstream(harness):
    h = harness("off", engine=None)
    # by name: a cookie jar keeps no cookies of an IP-address host
    h.proxy.config.upstreams["anthropic"] = h.upstream_url.replace("127.0.0.1", "localhost")
    h.fake.push(Reply(headers={"set-cookie": "upstream=secret; Path=/"}))
    r = post(h.proxy_url + "/v1/messages", b"{}", {"x-api-key": "client-a"})
    assert r.header("set-cookie") == "upstream=secret; Path=/"  # the client gets it as sent
    post(h.proxy_url + "/v1/messages", b"{}", {"x-api-key": "client-b"})
    assert "cookie" not in {k.lower() for k in h.fake.received[-1].headers}


def test_prefixes_agent_slug_and_query(harness):
    h = harness("annotations")
    body = _anthropic_body(b'[{"name":"x","input_schema":{"title":"T","type":"object"}}]')
    r = post(h.proxy_url + "/w/agent-1.x/anthropic/v1/messages?beta=true&x=%2F", body)
    assert r.status == 200 and r.header("x-cave-agent") == "agent-1.x"
    got = h.fake.received[-1]
    assert (got.path, got.query) == ("/v1/messages", "beta=true&x=%2F")
    assert r.header("x-cave-optimization") == STRIP
    post(h.proxy_url + "/openai/v1/chat/completions", b'{"model":"m"}')
    assert h.fake.received[-1].path == "/v1/chat/completions"
    post(h.proxy_url + "/gemini/v1beta/models/g:generateContent", b'{"contents":[]}')
    assert h.fake.received[-1].path == "/v1beta/models/g:generateContent"


def test_upstream_request_headers_are_the_end_to_end_ones(harness):
    h = harness("off", engine=None)
    post(h.proxy_url + "/v1/messages", b"{}", {
        "x-api-key": "sk-ant-1", "anthropic-beta": "prompt-caching-2024-07-31",
        "x-cave-session": "s", "x-cave-trace-id": "t" * 32, "cookie": "c=1",
        "user-agent": "ua", "x-stainless-os": "Linux", "accept": "application/json",
        "idempotency-key": "idem", "keep-alive": "timeout=5", "x-caveman-anything": "1"})
    got = {k.lower(): v for k, v in h.fake.received[-1].headers.items()}
    assert got["x-api-key"] == "sk-ant-1"
    assert got["anthropic-version"] == "2023-06-01"
    assert got["anthropic-beta"] == "prompt-caching-2024-07-31"
    assert got["idempotency-key"] == "idem" and got["accept"] == "application/json"
    assert got["cookie"] == "c=1" and got["user-agent"] == "ua"
    assert got["x-stainless-os"] == "Linux"
    for name in ("x-cave-session", "x-cave-trace-id", "x-caveman-anything", "keep-alive",
                 "authorization"):
        assert name not in got
    post(h.proxy_url + "/v1/chat/completions", b"{}", {"authorization": "Bearer sk-1",
                                                        "anthropic-version": "2024-01-01",
                                                        "openai-organization": "org"})
    got = {k.lower(): v for k, v in h.fake.received[-1].headers.items()}
    assert got["authorization"] == "Bearer sk-1" and got["openai-organization"] == "org"
    assert got["anthropic-version"] == "2024-01-01"


def test_response_headers_hop_by_hop_and_cave_headers_replaced(harness):
    h = harness("annotations")
    h.fake.push(Reply(headers={"x-cave-optimization": "forged", "x-caveman-tripwire": "x=frozen",
                               "X-Cave-Project": "evil", "anthropic-ratelimit-requests-limit": "50",
                               "keep-alive": "timeout=5", "x-secret": "1", "Connection": "x-secret",
                               "proxy-authenticate": "Basic"}))
    r = post(h.proxy_url + "/v1/messages",
             _anthropic_body(b'[{"name":"x","input_schema":{"title":"T","type":"object"}}]'),
             {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})
    names = r.header_names()
    assert r.header("anthropic-ratelimit-requests-limit") == "50"
    assert r.header("x-cave-optimization") == STRIP
    assert r.header("x-cave-project") == "local"
    assert "x-caveman-tripwire" not in names
    assert not {"keep-alive", "x-secret", "proxy-authenticate"} & names
    assert r.header("x-cave-trace-id") == "0af7651916cd43dd8448eb211c80319c"
    assert [k for k, _ in r.headers if k.lower() == "x-cave-project"] == ["x-cave-project"]


def test_gzip_response_passes_through_compressed(harness):
    h = harness("annotations")
    h.fake.push(Reply(gzip=True, cache_creation=7777))
    r = post(h.proxy_url + "/v1/messages", _anthropic_body(b"[]"),
             {"x-cave-session": "gz", "accept-encoding": "gzip"})
    assert r.header("content-encoding") == "gzip"
    assert r.body == h.fake.sent[-1].body and r.body[:2] == b"\x1f\x8b"
    assert h.proxy.ledger.session("gz").cache_creation_total == 7777


# --------------------------------------------------------------------------- the tripwire


@pytest.mark.parametrize("shape, stream", [("messages", True), ("messages", False),
                                           ("chat", False), ("responses", True)])
def test_tripwire_freezes_a_session(harness, shape, stream):
    """§6.13: 1 000, 500 000 ×3, 1 000 cache-creation tokens → the 5th request carries the
    tripwire header and is forwarded byte-identical; the rewrite ran 4 times; other sessions
    are still rewritten."""
    h = harness("annotations")
    original = _direct(h, shape, stream=stream)
    c = Clients(h.proxy_url)
    h.fake.push(*(Reply(cache_creation=n) for n in (1000, 500_000, 500_000, 500_000, 1000)))
    seen = [c.call(shape, stream=stream, session="sess-A")[0] for _ in range(5)]
    rewritten = [x["x-cave-optimization"] == STRIP for x in seen]
    assert rewritten == [True, True, True, True, False]
    assert ["x-caveman-tripwire" in x for x in seen] == [False] * 4 + [True]
    assert seen[4]["x-caveman-tripwire"] == "toolschema-annotation-strip=frozen"
    assert "x-caveman-toolschema-strip" not in seen[4]
    assert h.fake.received[-1].body == original
    # every later request of the session stays frozen; another session is unaffected
    headers, _ = c.call(shape, stream=stream, session="sess-A")
    assert headers["x-caveman-tripwire"] == "toolschema-annotation-strip=frozen"
    headers, _ = c.call(shape, stream=stream, session="sess-B")
    assert headers["x-cave-optimization"] == STRIP and "x-caveman-tripwire" not in headers
    # count_tokens of the frozen session also says so
    r = post(h.proxy_url + "/v1/messages/count_tokens", b"{}", {"x-cave-session": "sess-A"})
    assert r.header("x-caveman-tripwire") == "toolschema-annotation-strip=frozen"


def test_no_session_never_trips(harness):
    """§6.14: no session header, 6 huge responses: never a tripwire header, rewrite every time."""
    h = harness("toolschema")
    c = Clients(h.proxy_url)
    h.fake.push(Reply(cache_creation=1000), *(Reply(cache_creation=900_000) for _ in range(5)))
    for _ in range(6):
        headers, _ = c.call("messages", stream=True)
        assert headers["x-cave-optimization"] == "toolschema-rewrite"
        assert "x-caveman-tripwire" not in headers
    assert len(h.proxy.ledger) == 0


def test_tripwire_counts_upstream_errors_but_not_proxy_errors(harness):
    h = harness("annotations", upstream_timeout=0.3)
    body = _anthropic_body(b'[{"name":"x","input_schema":{"title":"T","type":"object"}}]')
    hdr = {"x-cave-session": "e"}
    h.fake.push(Reply(cache_creation=10), Reply("error", status=500))
    post(h.proxy_url + "/v1/messages", body, hdr)
    post(h.proxy_url + "/v1/messages", body, hdr)
    assert h.proxy.ledger.session("e").calls == 2
    h.fake.push(Reply("drop"), Reply("drop"), Reply("drop"))
    assert post(h.proxy_url + "/v1/messages", body, hdr).status == 502
    assert h.proxy.ledger.session("e").calls == 2


def test_large_body_rewritten_with_bounded_skipping(harness):
    """A body over 4 MiB (messages before ``tools``) is skipped without decoding, off the event
    loop; the rewrite and every other byte are as for a small one."""
    h = harness("annotations")
    msgs = b",".join(b'{"role":"user","content":[{"type":"text","text":"m%d \\"]}%s"}]}'
                     % (i, b"w" * 800) for i in range(5_500))
    tools = b'[{"name":"x","input_schema":{"title":"T","type":"object"}}]'
    body = b'{"model":"m","messages":[' + msgs + b'],"tools":' + tools + b',"max_tokens":1}'
    assert len(body) > 4 * 1024 * 1024
    r = post(h.proxy_url + "/v1/messages", body)
    assert r.status == 200 and r.header("x-cave-optimization") == STRIP
    assert h.fake.received[-1].body == body.replace(tools, b'[{"name":"x","input_schema":'
                                                           b'{"type":"object"}}]')


def test_client_disconnect_before_the_answer_cancels_the_upstream_call(harness):
    h = harness("annotations", upstream_timeout=30)
    h.fake.push(Reply("hang"))
    body = _anthropic_body(b'[{"name":"x","input_schema":{"title":"T","type":"object"}}]')
    port = int(h.proxy_url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  b"Content-Type: application/json\r\n"
                  b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        deadline = time.monotonic() + 5
        while not h.fake.received and time.monotonic() < deadline:
            time.sleep(0.02)
    deadline = time.monotonic() + 5
    while not h.fake.events and time.monotonic() < deadline:
        time.sleep(0.02)
    assert h.fake.events == [("client-gone", 0, 0)]
    assert len(h.fake.received) == 1  # no retry of a request nobody waits for
    assert Clients(h.proxy_url).call("messages")[1] == h.fake.sent[-1].body
