"""Unit tests of the proxy's parts: config normalisation, the tools span, the tripwire ledger,
usage parsing and routing (proxy_spec §1, §2.3, §4, §6 items 15–23)."""

from __future__ import annotations

import gzip
import json
import uuid

import pytest

from caveman_engine.proxy import catalog, config
from caveman_engine.proxy.ledger import Ledger, Usage, session_id
from caveman_engine.proxy.server import match_route, trace_id, uuid7
from caveman_engine.proxy.usage import UsageScanner

STRIP = "toolschema-annotation-strip"

# --------------------------------------------------------------------------- config (§6.23)


def _load(tmp_path, yaml_text: str | None, env: dict | None = None, **kw) -> config.Config:
    """``yaml_text`` as the file named on the command line; None: no file named and none at
    the default place."""
    if yaml_text is None:
        return config.load(env={"CAVEMAN_HOME": str(tmp_path / "nothing-here"), **(env or {})},
                           **kw)
    path = tmp_path / "caveman.yaml"
    path.write_text(yaml_text)
    return config.load(str(path), env=env or {}, **kw)


@pytest.mark.parametrize(
    "yaml_text, level",
    [
        (None, "off"),
        ("", "off"),
        ("label: x\n", "off"),
        ("toolschema_strip:\n", "off"),
        ("toolschema_strip: off\n", "off"),  # YAML reads a bare off as false
        ("toolschema_strip: 'off'\n", "off"),
        ("toolschema_strip: annotations\n", "annotations"),
        ("toolschema_strip: toolschema\n", "toolschema"),
        ("toolschema_strip: toolschema-safe\n", "toolschema-safe"),
        ("toolschema_strip: toolschema-max\n", "toolschema-max"),
    ],
)
def test_level(tmp_path, yaml_text, level):
    assert _load(tmp_path, yaml_text).level == level


LEVEL_LIST = "not one of off, annotations, toolschema, toolschema-safe, toolschema-max"


@pytest.mark.parametrize(
    "value, message",
    [
        ("aggressive", f"aggressive: {LEVEL_LIST}"),
        ("Annotations", f"Annotations: {LEVEL_LIST} (did you mean annotations?)"),
        ("' annotations'", f" annotations: {LEVEL_LIST} (did you mean annotations?)"),
        ("''", "is empty: name one of off, annotations, toolschema, toolschema-safe, "
               "toolschema-max"),
        ("true", f"true: {LEVEL_LIST}"),
        ("toolschema-MAX", f"toolschema-MAX: {LEVEL_LIST} (did you mean toolschema-max?)"),
        ("max", f"max: {LEVEL_LIST} (did you mean toolschema-max?)"),
        ("safe", f"safe: {LEVEL_LIST} (did you mean toolschema-safe?)"),
        ("toolschema_safe", f"toolschema_safe: {LEVEL_LIST} (did you mean toolschema-safe?)"),
        ("toolshema", f"toolshema: {LEVEL_LIST} (did you mean toolschema?)"),
    ],
)
def test_unknown_level_is_an_error_naming_the_closest(tmp_path, value, message):
    """A typo never starts a proxy that quietly rewrites nothing (issue 26); the line names
    the file and key, in the command line's wording for a choice."""
    with pytest.raises(config.ConfigError) as e:
        _load(tmp_path, f"toolschema_strip: {value}\n")
    assert str(e.value).endswith(f": toolschema_strip {message}")
    assert e.value.exit_code == 1


def test_env_overrides_yaml_when_not_blank(tmp_path):
    y = "toolschema_strip: annotations\n"
    assert _load(tmp_path, y, {"CAVEMAN_TOOLSCHEMA_STRIP": "off"}).level == "off"
    assert _load(tmp_path, y, {"CAVEMAN_TOOLSCHEMA_STRIP": "  "}).level == "annotations"
    with pytest.raises(config.ConfigError) as e:
        _load(tmp_path, y, {"CAVEMAN_TOOLSCHEMA_STRIP": "bogus"})
    assert str(e.value) == f"CAVEMAN_TOOLSCHEMA_STRIP bogus: {LEVEL_LIST}"
    assert _load(tmp_path, None, {"CAVEMAN_TOOLSCHEMA_STRIP": "toolschema-max"}).level == \
        "toolschema-max"
    # --level overrides both; an unknown one is a command-line error, before the file is read
    assert _load(tmp_path, y, {"CAVEMAN_TOOLSCHEMA_STRIP": "off"}, level="toolschema").level == \
        "toolschema"
    with pytest.raises(config.CommandLineError) as e:
        _load(tmp_path, "a: [1\n", level="max")
    assert str(e.value) == f"--level max: {LEVEL_LIST} (did you mean toolschema-max?)"
    assert e.value.exit_code == 2


def test_label_and_providers(tmp_path):
    c = _load(tmp_path, "label: team-a\nproviders:\n  anthropic:\n    base_url: http://127.0.0.1:9/\n"
                        "  openai:\n    base_url: http://localhost:10\n  bedrock:\n    x: 1\n")
    assert c.label == "team-a"
    assert c.upstreams["anthropic"] == "http://127.0.0.1:9"
    assert c.upstreams["openai"] == "http://localhost:10"
    assert c.upstream_url("anthropic", "/v1/messages", "beta=true") == \
        "http://127.0.0.1:9/v1/messages?beta=true"
    assert _load(tmp_path, "label: a\n", {"CAVEMAN_LABEL": "b"}).label == "b"
    d = config.load(env={"CAVEMAN_HOME": str(tmp_path / "no-home")})  # no file: defaults
    assert (d.label, d.host, d.port) == ("local", "127.0.0.1", 8787)
    assert d.upstreams["anthropic"] == "https://api.anthropic.com"
    assert d.upstreams["openai"] == "https://api.openai.com"


@pytest.mark.parametrize("text", ["a: [1\n", "- just\n- a list\n", "providers: 3\n",
                                  "providers:\n  openai:\n    base_url: ftp://x\n",
                                  "listen: 0.0.0.0:8787\n", "upstream_timeout: soon\n",
                                  "toolschema_stirp: toolschema\n",
                                  "providers:\n  antropic:\n    base_url: http://x\n",
                                  "providers:\n  openai:\n    url: http://x\n"])
def test_bad_config_is_an_error(tmp_path, text):
    with pytest.raises(config.ConfigError) as e:
        _load(tmp_path, text)
    assert e.value.exit_code == 1


def test_a_named_config_file_must_exist(tmp_path):
    missing = str(tmp_path / "missing.yaml")
    for kw in ({"path": missing, "env": {}}, {"env": {"CAVEMAN_CONFIG": missing}}):
        with pytest.raises(config.ConfigError) as e:
            config.load(**kw)
        assert str(e.value) == f"config {missing}: no such file"


def test_config_file_location(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "caveman.yaml").write_text("toolschema_strip: annotations\n")
    other = tmp_path / "other.yaml"
    other.write_text("toolschema_strip: toolschema\n")
    assert config.load(env={"CAVEMAN_HOME": str(home)}).level == "annotations"
    assert config.load(env={"CAVEMAN_HOME": str(home), "CAVEMAN_CONFIG": str(other)}).level == \
        "toolschema"
    assert config.load(str(other), env={"CAVEMAN_HOME": str(home)}).level == "toolschema"


@pytest.mark.parametrize("value, ok", [
    ("127.0.0.1:8787", ("127.0.0.1", 8787)), ("127.0.0.2:0", ("127.0.0.2", 0)),
    ("localhost:1", ("localhost", 1)), ("[::1]:8787", ("::1", 8787)),
    ("0.0.0.0:8787", None), ("[::]:8787", None), (":8787", None), ("192.168.1.5:8787", None),
    ("10.0.0.1:80", None), ("example.com:80", None), ("127.0.0.1", None),
    ("127.0.0.1:99999", None),
])
def test_listen_loopback_only(value, ok):
    if ok is None:
        with pytest.raises(config.ConfigError):
            config.parse_listen(value)
    else:
        assert config.parse_listen(value) == ok


def test_timeout_from_env(tmp_path):
    assert _load(tmp_path, "upstream_timeout: 5\n").upstream_timeout == 5.0
    assert _load(tmp_path, None, {"CAVEMAN_PROXY_UPSTREAM_TIMEOUT": "0.25"}).upstream_timeout == 0.25


# --------------------------------------------------------------------------- extraction (§6.21–22)

TOOLS = b'[ {"name":"a","input_schema":{"type":"object","title":"A"}} ]'


def test_extract_exact_span_and_splice():
    body = b'{"model":"m", "messages":[{"role":"user","content":"tools"}],\n "tools" : ' + TOOLS + \
        b' ,"stream":true}'
    span, start, end = catalog.extract(body)
    assert span == TOOLS
    assert body[start:end] == TOOLS
    out = catalog.splice(body, start, end, b"[]")
    assert out == body[:start] + b"[]" + body[end:]


def test_extract_first_tools_member_and_escaped_key():
    body = b'{"\\u0074ools":' + TOOLS + b',"tools":[1]}'
    assert catalog.extract(body)[0] == TOOLS
    body = b'{"tools":{"a":1},"tools":' + TOOLS + b'}'
    assert catalog.extract(body) is None  # the FIRST member decides


@pytest.mark.parametrize("body", [
    b'', b'[]', b'"tools"', b'{}', b'{"tool":[1]}', b'{"tools":null}', b'{"tools":{}}',
    b'{"tools":"[]"}', b'{"messages":[{"tools":[1]}]}', b'{"tools":[1]', b'{"tools":[1]} x',
    b'{"tools":[1],}', b'{"tools":[NaN]}', b'\xef\xbb\xbf{"tools":[1]}',
    b'{"model":"m","tools":[{"name":"x"}]',
])
def test_not_extracted(body):
    assert catalog.extract(body) is None


LEAN_BODIES = [
    b'{"model":"m", "messages":[{"role":"user","content":"a \\" ] } [ {"}],\n "tools" : '
    + TOOLS + b' ,"stream":true}',
    b'{"n":-1.5e+3,"t":true,"f":false,"z":null,"s":"x\\\\","tools":' + TOOLS + b'}',
    b'{"a":{"tools":[1]},"b":[[],{}],"tools":[{"d":"\\u0022]"}]}',
    b'{"a":"\xe9\xff","tools":"[1]"}',
    b'{"tools":[]}',
]


@pytest.mark.parametrize("body", LEAN_BODIES)
def test_lean_skipper_finds_the_same_span(monkeypatch, body):
    fast = catalog.extract(body)
    monkeypatch.setattr(catalog, "DECODE_SKIP_MAX", 0)
    assert catalog.extract(body) == fast
    assert fast is None or fast[0].startswith(b"[")


def test_splice_refuses_invalid_replacement():
    body = b'{"tools":[1]}'
    assert catalog.splice(body, 9, 12, b"[1") is None
    assert catalog.splice(body, 9, 12, b"") is None


def test_extract_non_utf8_and_deep_bodies():
    body = b'{"system":"caf\xe9 \xff","tools":[{"name":"x"}]}'
    assert catalog.extract(body)[0] == b'[{"name":"x"}]'
    deep = b'{"messages":' + b"[" * 5000 + b"]" * 5000 + b',"tools":[1]}'
    assert catalog.extract(deep) in (None, (b"[1]", len(deep) - 5, len(deep) - 2))


# --------------------------------------------------------------------------- ledger (§6.15–20)


def _u(c: int) -> Usage:
    return Usage(input_tokens=10, cache_read=5, cache_creation=c)


def test_session_header_validation():
    assert session_id(None) is None
    assert session_id("") is None
    assert session_id("   ") is None
    assert session_id(" abc.DEF_1:2-3 ") == "abc.DEF_1:2-3"
    assert session_id("a" * 256) == "a" * 256
    assert session_id("a" * 257) is None
    assert session_id("has space") is None
    assert session_id("slash/no") is None


def test_empty_session_is_never_tracked():
    led = Ledger()
    for _ in range(10):
        led.observe(None, [STRIP], _u(1000))
        led.observe("", [STRIP], _u(900_000))
    assert len(led) == 0
    assert led.frozen("") == [] and led.frozen(None) == []
    assert led.allowed(None, STRIP)


def test_three_strikes_freeze_only_the_active_lever():
    led = Ledger()
    for _ in range(4):
        led.observe("s", [STRIP], _u(1000))
    led.observe("s", [STRIP], _u(500_000))
    assert led.allowed("s", STRIP)
    led.observe("s", [STRIP], _u(500_000))
    assert led.allowed("s", STRIP)
    led.observe("s", [STRIP], _u(500_000))
    assert led.frozen("s") == [STRIP]
    assert led.allowed("s", "cache-breakpoint-plan")
    for _ in range(50):
        led.observe("s", [], _u(1000))
    assert led.frozen("s") == [STRIP]  # no thaw
    assert led.allowed("other", STRIP)
    assert led.session("s").strikes == {STRIP: 3}


def test_strikes_need_not_be_consecutive_and_spikes_stay_out_of_the_baseline():
    led = Ledger()
    led.observe("s", [STRIP], _u(1000))
    for _ in range(3):
        led.observe("s", [STRIP], _u(600_000))
        led.observe("s", [STRIP], _u(1000))
    s = led.session("s")
    assert s.baseline_calls == 4 and s.baseline_sum == 4000
    assert led.frozen("s") == [STRIP]


def test_threshold_edges():
    led = Ledger()
    led.observe("s", [STRIP], _u(1000))
    for _ in range(5):
        led.observe("s", [STRIP], _u(50_000))  # exactly 50 000 never trips
    assert led.session("s").strikes == {}
    led2 = Ledger()
    led2.observe("t", [STRIP], _u(400_000))
    for _ in range(5):
        led2.observe("t", [STRIP], _u(800_000))  # < 3 × a 400 000 mean... mean moves up too
    assert led2.frozen("t") == []
    led3 = Ledger()
    led3.observe("u", [STRIP], _u(0))
    for _ in range(3):
        led3.observe("u", [STRIP], _u(50_001))  # any C > 50 000 against a zero mean
    assert led3.frozen("u") == [STRIP]


def test_lever_free_previous_call_and_first_call_never_strike():
    led = Ledger()
    led.observe("s", [STRIP], _u(900_000))  # first call: baseline, never anomalous
    for _ in range(5):
        led.observe("s", [], _u(1000))
        led.observe("s", [STRIP], _u(900_000))  # previous call had no lever
    assert led.session("s").strikes == {}
    assert led.frozen("s") == []


def test_lru_cap():
    led = Ledger(max_sessions=1024)
    led.observe("warm", [STRIP], _u(1000))
    for _ in range(3):
        led.observe("warm", [STRIP], _u(900_000))
    led.observe("frozen-old", [STRIP], _u(1000))
    for _ in range(3):
        led.observe("frozen-old", [STRIP], _u(900_000))
    assert led.frozen("frozen-old") == [STRIP]
    for i in range(1100):
        led.observe(f"churn{i}", [], _u(1))
        if i % 100 == 0:
            assert led.frozen("warm") == [STRIP]  # touching keeps it alive
    assert len(led) == 1024
    assert led.frozen("warm") == [STRIP]
    assert led.session("frozen-old") is None
    assert led.allowed("frozen-old", STRIP)  # eviction forgets the freeze
    assert led.session("churn0") is None and led.session("churn1099") is not None


def test_totals():
    led = Ledger()
    led.observe("s", [STRIP], Usage(100, 20, 3))
    led.observe("s", [], Usage(50, 7, 4))
    s = led.session("s")
    assert (s.calls, s.input_total, s.cache_read_total, s.cache_creation_total) == (2, 150, 27, 7)
    assert s.last == Usage(50, 7, 4)
    assert s.previous_levers == frozenset()


# --------------------------------------------------------------------------- usage (§4.3)


def _scan(data: bytes, ctype="application/json", enc="", chunk=7) -> Usage:
    s = UsageScanner(ctype, enc)
    for i in range(0, len(data), chunk):
        s.feed(data[i:i + chunk])
    return s.finish()


def test_usage_anthropic_json_and_sse():
    doc = {"usage": {"input_tokens": 9, "cache_creation_input_tokens": 1234,
                     "cache_read_input_tokens": 55}}
    assert _scan(json.dumps(doc, indent=2).encode()) == Usage(9, 55, 1234)
    doc = {"usage": {"input_tokens": 1, "cache_creation": {"ephemeral_5m_input_tokens": 10,
                                                          "ephemeral_1h_input_tokens": 5}}}
    assert _scan(json.dumps(doc).encode()).cache_creation == 15
    sse = (b'event: message_start\r\ndata: {"type":"message_start","message":{"usage":'
           b'{"input_tokens":3,"cache_creation_input_tokens":70000,"cache_read_input_tokens":1}}}'
           b'\r\n\r\n: comment\n\nevent: message_delta\ndata: {"type":"message_delta","usage":'
           b'{"output_tokens":5,"cache_creation_input_tokens":60000}}\n\n')
    assert _scan(sse, "text/event-stream") == Usage(3, 1, 70000)
    assert _scan(sse, "application/octet-stream") == Usage(3, 1, 70000)  # line fallback


def test_usage_openai_shapes():
    chat = {"usage": {"prompt_tokens": 8, "prompt_tokens_details": {"cached_tokens": 4,
                                                                     "cache_write_tokens": 77}}}
    assert _scan(json.dumps(chat).encode()) == Usage(8, 4, 77)
    stream = (b'data: {"choices":[]}\n\ndata: {"choices":[],"usage":{"prompt_tokens":8,'
              b'"prompt_tokens_details":{"cache_write_tokens":99}}}\n\ndata: [DONE]\n\n')
    assert _scan(stream, "text/event-stream; charset=utf-8").cache_creation == 99
    resp = (b'event: response.completed\ndata: {"type":"response.completed","response":{"usage":'
            b'{"input_tokens":6,"input_tokens_details":{"cached_tokens":2,'
            b'"cache_write_tokens":5}}}}\n\n')
    assert _scan(resp, "text/event-stream") == Usage(6, 2, 5)
    assert _scan(b'{"usage":{"cached_input_tokens":12}}').cache_read == 12


def test_usage_encoded_capped_and_garbage(monkeypatch):
    body = json.dumps({"usage": {"cache_creation_input_tokens": 4242}}).encode()
    assert _scan(gzip.compress(body), enc="gzip").cache_creation == 4242
    assert _scan(b"\x00garbage{", enc="gzip").cache_creation == 0
    assert _scan(b"not json at all").cache_creation == 0
    assert _scan(b'{"usage":{"cache_creation_input_tokens":"9"}}').cache_creation == 0
    # over the side-buffer cap only the tail is kept: usage at the end still counts
    monkeypatch.setenv("CAVE_USAGE_SCAN_MAX_BYTES", "1000")
    big = b'data: {"pad":"' + b"x" * 5000 + b'"}\n\n' + \
        b'data: {"usage":{"cache_creation_input_tokens":31}}\n\n'
    assert _scan(big, "application/x-ndjson", chunk=300).cache_creation == 31
    # SSE parsing is incremental: an over-long line is skipped, later lines still count
    sse = b'data: {"pad":"' + b"y" * (1024 * 1024 + 10) + b'"}\n\n' + \
        b'data: {"message":{"usage":{"cache_creation_input_tokens":8}}}\n\n'
    assert _scan(sse, "text/event-stream", chunk=65536).cache_creation == 8


# --------------------------------------------------------------------------- routes and ids


@pytest.mark.parametrize("path, want", [
    ("/v1/messages", ("anthropic", True, "/v1/messages")),
    ("/anthropic/v1/messages", ("anthropic", True, "/v1/messages")),
    ("/v1/messages/count_tokens", ("anthropic", False, "/v1/messages/count_tokens")),
    ("/anthropic/v1/messages/count_tokens", ("anthropic", False, "/v1/messages/count_tokens")),
    ("/v1/chat/completions", ("openai", True, "/v1/chat/completions")),
    ("/openai/v1/chat/completions", ("openai", True, "/v1/chat/completions")),
    ("/v1/responses", ("openai", True, "/v1/responses")),
    ("/openai/v1/responses", ("openai", True, "/v1/responses")),
    ("/v1/embeddings", ("openai", False, "/v1/embeddings")),
    ("/gemini/v1beta/models/x:generateContent", ("gemini", False,
                                                 "/v1beta/models/x:generateContent")),
    ("/v1/messages/", None), ("/v1/message", None), ("/anthropic/v1/chat/completions", None),
    ("/openai/v1/messages", None), ("/", None), ("/v1/models", None), ("/gemini/", None),
    ("/v1/responses/resp_1", None),
])
def test_routes(path, want):
    r = match_route(path)
    assert (None if r is None else (r.provider, r.eligible, r.upstream_path)) == want


def test_ids():
    u = uuid.UUID(uuid7())
    assert u.version == 7 and u.variant == uuid.RFC_4122
    assert trace_id({"x-cave-trace-id": "a" * 32}) == "a" * 32
    tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    assert trace_id({"traceparent": tp}) == "0af7651916cd43dd8448eb211c80319c"
    assert len(trace_id({"x-cave-trace-id": "short"})) == 32


def test_known_catalog_is_found_by_prefix():
    body = b'{"messages":[],"tools":' + TOOLS + b',"x":1}'
    span = catalog.extract(body)
    assert catalog.extract(body, known=(b"[1]", TOOLS)) == span
    # a known catalog that is only a prefix of a longer array is not taken: "[1]" is not a
    # prefix of '[ {...} ]', and a non-matching known list falls back to the scan
    other = b'{"tools":[1,2]}'
    assert catalog.extract(other, known=(b"[1]",))[0] == b"[1,2]"


KNOWN_BODIES = [
    b'{"model":"m","messages":[{"role":"user","content":"x"}],\n "tools" :\t' + TOOLS + b' }',
    b'{"messages":[{"tools":' + TOOLS + b'}],"tools":' + TOOLS + b'}',  # nested copy first
    b'{"a":{"tools":' + TOOLS + b'}}',  # only nested
    b'[{"tools":' + TOOLS + b'}]',  # root is not an object
    b'{"tools":{"a":1},"tools":' + TOOLS + b'}',  # an earlier member decides
    b'{"\\u0074ools":[1],"tools":' + TOOLS + b'}',
    b'{"tools":' + TOOLS + b',"tools":[1]}',
    b'{"tools":' + TOOLS + b'} x',
    b'{"tools":' + TOOLS + b',}',
    b'{"tools":' + TOOLS,
    b'\xef\xbb\xbf{"tools":' + TOOLS + b'}',
    b'{"s":"caf\xe9 \xff","tools":' + TOOLS + b'}',  # not UTF-8: simdjson declines
    b'{"s":"\\"tools\\":' + TOOLS.replace(b'"', b'\\"') + b'","tools":' + TOOLS + b'}',
    b'{"tools":' + TOOLS[:-1] + b',1]}',
]


@pytest.mark.parametrize("body", KNOWN_BODIES)
def test_known_catalog_shortcut_agrees_with_the_scan(body):
    assert catalog.extract(body, known=(b"[1]", TOOLS)) == catalog.extract(body)


def test_known_catalog_shortcut_is_taken():
    body = KNOWN_BODIES[0]
    start = body.index(TOOLS)
    known = bytes(TOOLS)
    assert catalog._known_span(body, (known,)) == (start, start + len(TOOLS), known)
    assert catalog.extract(body, known=(known,))[0] is known  # no copy, hash already known
    assert catalog._known_span(KNOWN_BODIES[1], (TOOLS,)) is None  # the nested copy: scan


def test_splice_of_a_found_span_needs_no_second_parse():
    body = KNOWN_BODIES[0]
    span, start, end = catalog.extract(body)
    out = catalog.splice(body, start, end, b'[{"name":"a"}]', nested_valid=True)
    assert out == body[:start] + b'[{"name":"a"}]' + body[end:]
    assert json.loads(out)["tools"] == [{"name": "a"}]


# --------------------------------------------------------------------------- the rewriter's gates


class _StubEngine:
    """A compressor with a fixed answer, over a real in-memory store (the original is stored
    as the engine would store it, so the rewriter's store checks see the real thing)."""

    def __init__(self, output: bytes, handle: str | None = "stored", error=None):
        from caveman_engine.store import Store

        self.output, self.handle, self.error, self.calls = output, handle, error, 0
        self.store = Store(":memory:")

    def compress(self, data, content_type):
        from caveman_engine.engine import Result

        self.calls += 1
        handle = self.handle
        if handle == "stored" and self.error is None:
            handle = self.store.put(data, content_type=content_type, compressor=content_type,
                                    tokens_before=10, tokens_after=5)
        r = Result(self.output, content_type, 10, 5, "o200k_base", recovery_handle=handle)
        r.error = self.error
        return r


def test_rewriter_fails_closed():
    from caveman_engine.proxy.rewrite import Rewriter

    cat = b'[{"name":"x","input_schema":{"title":"T"}}]'
    assert not Rewriter(_StubEngine(b"[]"), "off").enabled
    assert not Rewriter(_StubEngine(b"[]"), "bogus").enabled
    # invalid JSON from the compressor, not shorter, no handle, store error: all None
    for eng in (_StubEngine(b"[{"), _StubEngine(cat + b" "), _StubEngine(b"[]", handle=None),
                _StubEngine(b"[]", error="cave_ccr_budget_exceeded")):
        assert Rewriter(eng, "annotations").rewrite_sync(cat) is None
    ok = _StubEngine(b"[]")
    rw = Rewriter(ok, "annotations")
    assert rw.rewrite_sync(cat).catalog == b"[]"
    assert rw.rewrite_sync(cat).catalog == b"[]" and ok.calls == 1  # cached
    # the original disappears from the store (purged, wiped): the very next hit finds out
    # and stores it again, so the handle sent always retrieves
    handle = rw.rewrite_sync(cat).handle
    ok.store._conn.execute("DELETE FROM recoveries WHERE handle = ?", (handle,))
    assert rw.rewrite_sync(cat).handle == handle and ok.calls == 2
    assert ok.store.get(handle) == cat
    err = _StubEngine(b"[]", error="cave_ccr_unavailable")
    rw = Rewriter(err, "annotations")
    rw.rewrite_sync(cat)
    rw.rewrite_sync(cat)
    assert err.calls == 2  # store failures are not cached: the store may come back


def test_rewriter_without_the_compressor_never_calls_the_engine(monkeypatch):
    from caveman_engine import registry
    from caveman_engine.proxy.rewrite import Rewriter

    monkeypatch.setattr(registry, "compressor", lambda t: None)
    eng = _StubEngine(b"[]")
    assert Rewriter(eng, "toolschema-max").rewrite_sync(b'[{"name":"x"}]') is None
    assert eng.calls == 0


def test_event_loop_is_uvloop_when_installed_else_asyncio(monkeypatch):
    import sys

    from caveman_engine.proxy import cli

    monkeypatch.setitem(sys.modules, "uvloop", None)  # as if not installed
    assert cli._loop_factory() is None
    monkeypatch.delitem(sys.modules, "uvloop")
    try:
        import uvloop
    except ImportError:
        return
    assert cli._loop_factory() is uvloop.new_event_loop


# --------------------------------------------------------------------------- eager body writes


def _loop_factories():
    import asyncio

    out = [asyncio.new_event_loop]
    try:
        import uvloop
    except ImportError:
        return out
    return out + [uvloop.new_event_loop]


class _BodyServer:
    """A blocking HTTP/1.1 server on a thread: reads one request after another on one
    connection (``pause`` seconds before reading each body), notes when each whole body had
    arrived and answers with the body's SHA-256."""

    def __init__(self, pause: float = 0.0) -> None:
        import socket
        import threading

        self.pause = pause
        self.arrived: list[float] = []
        self.got_bytes = 0
        self.closed_early = threading.Event()
        self.done = threading.Event()  # the connection has ended
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            self._serve_one()
        finally:
            self.done.set()

    def _serve_one(self) -> None:
        import hashlib
        import time

        conn, _ = self.sock.accept()
        with conn:
            buf = b""
            while True:
                while b"\r\n\r\n" not in buf:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                head, _, buf = buf.partition(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                time.sleep(self.pause)
                while len(buf) < length:
                    chunk = conn.recv(1 << 20)
                    if not chunk:
                        self.got_bytes = len(buf)
                        self.closed_early.set()
                        return
                    buf += chunk
                body, buf = buf[:length], buf[length:]
                self.arrived.append(time.monotonic())
                digest = hashlib.sha256(body).hexdigest().encode()
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s"
                             % (len(digest), digest))


def _run(loop_factory, coro_fn):
    import asyncio

    loop = loop_factory()
    try:
        return loop.run_until_complete(coro_fn(loop))
    finally:
        loop.close()
        asyncio.set_event_loop(None)


@pytest.mark.parametrize("loop_factory", _loop_factories())
def test_eager_body_is_on_the_wire_before_queued_work_runs(loop_factory):
    import asyncio
    import sys
    import time

    import aiohttp

    from caveman_engine.proxy import eager

    server = _BodyServer()

    async def main(loop):
        installed = eager.install(loop)
        assert installed == (sys.version_info < (3, 12))
        try:
            async with aiohttp.ClientSession() as s:
                url = f"http://127.0.0.1:{server.port}/"
                async with s.post(url, data=b"warm") as r:  # a kept-alive connection
                    await r.read()
                # work queued before the request, as other requests' steps would be
                loop.call_soon(time.sleep, 0.5)
                t0 = time.monotonic()
                async with s.post(url, data=b"x" * 20000) as r:
                    await r.read()
                return server.arrived[-1] - t0
        finally:
            eager.uninstall(loop)

    # the body went out in the step that sent the headers, not after the queued 0.5 s
    assert _run(loop_factory, main) < 0.25


@pytest.mark.parametrize("loop_factory", _loop_factories())
def test_eager_body_that_must_wait_is_written_whole(loop_factory):
    import hashlib

    import aiohttp

    from caveman_engine.proxy import eager

    server = _BodyServer(pause=0.2)  # the body fills the socket buffers: the write waits
    body = bytes(range(256)) * (64 * 1024)  # 16 MiB

    async def main(loop):
        eager.install(loop)
        try:
            async with aiohttp.ClientSession() as s:
                async with s.post(f"http://127.0.0.1:{server.port}/", data=body) as r:
                    return await r.read()
        finally:
            eager.uninstall(loop)

    assert _run(loop_factory, main) == hashlib.sha256(body).hexdigest().encode()


@pytest.mark.parametrize("loop_factory", _loop_factories())
def test_eager_body_write_is_cancelled_with_its_request(loop_factory):
    import asyncio

    import aiohttp

    from caveman_engine.proxy import eager

    server = _BodyServer(pause=1.0)  # reads nothing for a second: the write is waiting
    body = b"y" * (64 * 1024 * 1024)

    async def main(loop):
        eager.install(loop)
        try:
            async with aiohttp.ClientSession() as s:
                task = asyncio.ensure_future(s.post(f"http://127.0.0.1:{server.port}/",
                                                    data=body))
                await asyncio.sleep(0.3)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
            for _ in range(100):  # the loop runs on while the connection winds down
                if server.done.is_set():
                    break
                await asyncio.sleep(0.1)
        finally:
            eager.uninstall(loop)

    _run(loop_factory, main)
    # The request is gone and so is its connection. (Bytes the write had already handed to
    # the transport may still be flushed before it closes, as with aiohttp's own eager
    # start on Python 3.12+.)
    assert server.done.wait(10)
    assert server.closed_early.is_set() or len(server.arrived) == 1


def test_eager_factory_is_installed_only_when_free():
    import asyncio
    import sys

    from caveman_engine.proxy import eager

    loop = asyncio.new_event_loop()
    try:
        assert eager.install(loop) == (sys.version_info < (3, 12))
        assert eager.install(loop) is False  # a factory is already set
        eager.uninstall(loop)
        assert loop.get_task_factory() is None

        def other(lp, coro, **kw):
            return asyncio.Task(coro, loop=lp, **kw)

        loop.set_task_factory(other)
        assert eager.install(loop) is False
        eager.uninstall(loop)
        assert loop.get_task_factory() is other  # someone else's factory stays
    finally:
        loop.close()


@pytest.mark.parametrize("cancel_first", [False, True])
def test_eager_rest_resumes_or_cancels_the_started_coroutine(cancel_first):
    import asyncio

    from caveman_engine.proxy.eager import _Rest

    async def main():
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        log = []

        async def body():
            log.append("started")
            try:
                value = await fut
            except asyncio.CancelledError:
                log.append("cancelled")
                raise
            log.append("resumed")
            return value * 2

        coro = body()
        waiting = coro.send(None)  # the eager first step: runs up to the wait
        task = asyncio.Task(_Rest(coro, waiting))
        if cancel_first:
            task.cancel()  # before the task's first step: the cancel still reaches body()
            with pytest.raises(asyncio.CancelledError):
                await task
            return log
        await asyncio.sleep(0)
        fut.set_result(21)
        assert await task == 42
        return log

    log = asyncio.run(main())
    assert log == (["started", "cancelled"] if cancel_first else ["started", "resumed"])


@pytest.mark.parametrize("loop_factory", _loop_factories())
def test_eager_handler_runs_as_its_own_task(loop_factory):
    import asyncio
    import contextvars
    import sys

    import aiohttp
    from aiohttp import web

    from caveman_engine.proxy import eager

    var = contextvars.ContextVar("var", default="unset")
    seen = []

    async def handler(request):
        first = asyncio.current_task()
        before = var.get()
        var.set(request.path)  # must not leak into the next request's handler
        await asyncio.sleep(0.01)
        seen.append((first is asyncio.current_task(), before, first))
        return web.Response(text="ok")

    async def main(loop):
        assert eager.install(loop) == (sys.version_info < (3, 12))
        runner = web.ServerRunner(web.Server(handler, access_log=None))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        try:
            async with aiohttp.ClientSession() as s:
                for path in ("/a", "/b"):  # one kept-alive connection
                    async with s.get(f"http://127.0.0.1:{port}{path}") as r:
                        assert await r.text() == "ok"
        finally:
            await runner.cleanup()
            eager.uninstall(loop)

    _run(loop_factory, main)
    # the same task before and after the first wait, a new one per request, no leaked context
    assert [(same, before) for same, before, _ in seen] == [(True, "unset"), (True, "unset")]
    assert seen[0][2] is not seen[1][2]
