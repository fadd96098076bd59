"""The Caveman runtime protocol on the proxy's port (docs/sdk.md), driven by the real clients.

One ``caveman-engine proxy`` subprocess (level ``off``: the routes open the store themselves)
on loopback, with its own recovery store, in front of the fake upstream. The clients are the
published packages: ``caveman_cloud`` (``Cave.compress``, ``Cave.tool_search``,
``MiddlewareRuntime``) and the ``caveman_middleware`` adapters for the official OpenAI and
Anthropic SDKs and for LangChain. What they get is checked against the console script itself
(``compress``, ``retrieve``).

Figures (tokens saved through each adapter) are printed with ``-s``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import console_script
from tests.fixtures.proxy.harness import Harness
from tests.fixtures.proxy.process import ProxyProcess
from tests.fixtures.proxy.rawhttp import request

caveman_cloud = pytest.importorskip("caveman_cloud")
from caveman_cloud import Cave, CaveTool  # noqa: E402
from caveman_cloud.middleware import (  # noqa: E402
    Adapter, Candidate, MiddlewareError, MiddlewareRuntime, Scope,
)

ROOT = Path(__file__).resolve().parent
CATALOG = ROOT / "corpus" / "github.tools.json"  # MCP shape, 26 tools
API_RESULTS = ROOT / "conformance" / "general" / "xjson__api_results.json.in"
MARKER = "[caveman: shortened; exact original via caveman_retrieve handle="


class Proxy(ProxyProcess):
    """``caveman-engine proxy`` on a free loopback port, its store under ``home``."""

    def __init__(self, home: Path, upstream: str, cache_dir: Path,
                 ccr_db: Path | None = None, extra_env: dict | None = None,
                 level: str = "off", yaml: str = "") -> None:
        if ccr_db is None:
            (home / "store").mkdir(mode=0o700)
            ccr_db = home / "store" / "ccr.db"
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("CAVEMAN_", "ANTHROPIC_", "OPENAI_"))}
        self.env.update(CAVEMAN_CCR_DB=str(ccr_db), CAVEMAN_HOME=str(home / "home"),
                        CAVEMAN_CACHE_DIR=str(cache_dir), **(extra_env or {}))
        cfg = home / "caveman.yaml"
        cfg.write_text(f"toolschema_strip: {level}\n{yaml}"
                       f"providers:\n  anthropic:\n    base_url: {upstream}\n"
                       f"  openai:\n    base_url: {upstream}\n")
        super().__init__(["--config", str(cfg)], self.env, start_timeout=30)

    def cli(self, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess:
        """The console script on the proxy's store."""
        return subprocess.run([console_script(), *args], input=input, capture_output=True,
                              env=self.env, timeout=60)

    def tokens(self, data: bytes) -> int:
        """The engine's token count of ``data``, from a pass-through report of the CLI."""
        return json.loads(self.cli("compress", "--type", "none", input=data).stderr)[
            "tokens_before"]


@pytest.fixture
def start_proxy(tmp_path, upstream, rank_cache_dir):
    """``start_proxy(level=…, yaml=…, extra_env=…)``: a :class:`Proxy` of the test's own (its
    home in tmp_path, the test's fake upstream), stopped when the test ends."""
    started = []

    def start(**options) -> Proxy:
        home = tmp_path / "p"
        home.mkdir()
        started.append(Proxy(home, upstream.upstream_url, rank_cache_dir, **options))
        return started[-1]

    yield start
    for p in started:
        p.stop()


@pytest.fixture(scope="module")
def upstream():
    h = Harness(proxy=False).start()
    yield h
    h.stop()


@pytest.fixture(scope="module")
def proxy(tmp_path_factory, upstream, rank_cache_dir):
    p = Proxy(tmp_path_factory.mktemp("sdkproxy"), upstream.upstream_url, rank_cache_dir)
    yield p
    p.stop()


@pytest.fixture(scope="module")
def runtime(proxy):
    rt = MiddlewareRuntime(endpoint=proxy.url)
    rt.ready()
    yield rt
    rt.close()


FIGURES: dict[str, str] = {}


@pytest.fixture(scope="module", autouse=True)
def _print_figures():
    yield
    if FIGURES:
        print("\nSDK protocol figures:")
        for k, v in FIGURES.items():
            print(f"  {k}: {v}")


def _cave(proxy) -> Cave:
    return Cave(api_key="local", base_url=proxy.url, agent="tests")


def _catalog() -> list[dict]:
    return json.loads(CATALOG.read_text())


def _api_results() -> str:
    return API_RESULTS.read_text()


def _post(proxy, path: str, doc) -> tuple[int, dict]:
    """POST ``doc`` (GET when it is None) and the JSON answer."""
    if doc is None:
        r = request(proxy.url + path, method="GET")
        return r.status, json.loads(r.body)
    body = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    r = request(proxy.url + path, body)
    return r.status, json.loads(r.body)


# -- /sdk/v1/compress


@pytest.mark.parametrize("source,ctype", [
    (CATALOG, "toolschema"),
    (API_RESULTS, None),
    (ROOT / "conformance" / "general" / "terminal__pytest-color.ansi.in", None),
])
def test_compress_is_the_engines_compress_and_its_handle_retrieves(proxy, source, ctype):
    data = source.read_bytes()
    text = data.decode()
    result = _cave(proxy).compress(text, content_type=ctype)
    assert result.recovery_handle and result.recovery_handle.startswith("ccr_")
    # the original is in the proxy's store before the CLI ever sees these bytes
    got = proxy.cli("retrieve", result.recovery_handle)
    assert got.returncode == 0 and got.stdout == data

    cli = proxy.cli("compress", *(("--type", ctype) if ctype else ()), input=data)
    assert cli.returncode == 0
    assert result.output.encode() == cli.stdout
    report = json.loads(cli.stderr)
    assert (result.content_type, result.tokens_before, result.tokens_after, result.method,
            result.lossless_to_model, result.recovery_handle, result.token_count_basis) == (
        report["content_type"], report["tokens_before"], report["tokens_after"],
        report["method"], report["lossless_to_model"], report["recovery_handle"],
        report["token_count_basis"])
    assert result.tokens_after < result.tokens_before
    # on the wire: the CLI's report, byte for byte, then the output
    raw = request(proxy.url + "/sdk/v1/compress",
                  json.dumps({"input": text, **({"content_type": ctype} if ctype else {})})
                  .encode())
    assert raw.status == 200
    assert raw.body.startswith(cli.stderr.rstrip(b"\n")[:-1] + b',"output":')
    assert json.loads(raw.body)["output"].encode() == cli.stdout
    FIGURES[f"compress {source.name} ({ctype or 'auto'})"] = (
        f"{result.tokens_before} -> {result.tokens_after} tokens")


def test_compress_pass_through_is_the_input(proxy):
    text = "hello\n"
    result = _cave(proxy).compress(text)
    assert result.output == text and result.recovery_handle is None
    assert result.tokens_before == result.tokens_after > 0
    assert json.loads(proxy.cli("compress", input=text.encode()).stderr)["content_type"] == \
        result.content_type


@pytest.mark.parametrize("body,message", [
    (b"{", "The body is not a JSON object."),
    (b"[1]", "The body is not a JSON object."),
    (b'{"input": 3}', "'input' must be a string of well-formed text."),
    (b'{"input": "\\ud800"}', "'input' must be a string of well-formed text."),
    (b'{"input": "x", "content_type": 1}', "'content_type' must be a string."),
])
def test_compress_bad_request_is_a_one_line_json_400(proxy, body, message):
    r = request(proxy.url + "/sdk/v1/compress", body)
    assert r.status == 400
    assert b"\n" not in r.body
    err = json.loads(r.body)["error"]
    assert (err["code"], err["message"]) == ("cave_invalid_request", message)


def test_compress_takes_post_only(proxy):
    r = request(proxy.url + "/sdk/v1/compress", method="GET")
    assert r.status == 405 and json.loads(r.body)["error"]["code"] == "cave_method_not_allowed"


@pytest.mark.parametrize("method,path", [
    ("POST", "/sdk/v1/context/pack"), ("GET", "/sdk/v1/cave-plan"),
    ("GET", "/sdk/v1/runtime-policy"), ("POST", "/sdk/v1/artifacts"),
])
def test_other_sdk_routes_answer_501_naming_the_route(proxy, method, path):
    r = request(proxy.url + path, b"{}" if method == "POST" else None, method=method)
    assert r.status == 501 and r.header("content-type").startswith("application/json")
    err = json.loads(r.body)["error"]
    assert err["code"] == "cave_not_implemented"
    assert err["message"].startswith(f"{method} {path} is not served by caveman-engine proxy")


def test_real_client_sees_the_501(proxy):
    import urllib.error

    with pytest.raises(urllib.error.HTTPError) as e:
        _cave(proxy).cave_plan()
    assert e.value.code == 501


# -- /sdk/v1/tool-search


def test_tool_search_sends_the_top_tools_and_counts_tokens(proxy):
    catalog = _catalog()
    tools = [CaveTool(t["name"], t["description"], t["inputSchema"],
                      always_load=t["name"] == "get_file_contents") for t in catalog]
    found = _cave(proxy).tool_search(tools, "create a pull request", max_tools=4)
    names = [t["name"] for t in found.tools]
    assert names[0] == "get_file_contents"  # always_load first
    assert names[1] == "create_pull_request"
    assert len(names) == 4 and all("pull_request" in n for n in names[1:])
    assert found.deferred_count == len(catalog) - 4
    assert found.method == "bm25" and found.token_basis == "o200k_base"
    # counted on the compact UTF-8 JSON of the lists, full and sent
    wire = [{"name": t.name, "description": t.description, "input_schema": t.input_schema,
             "read_only": t.read_only, "idempotent": t.idempotent,
             "always_load": t.always_load} for t in tools]

    def compact(v):
        return json.dumps(v, ensure_ascii=False, separators=(",", ":")).encode()

    assert found.full_schema_tokens == proxy.tokens(compact(wire))
    by_name = {w["name"]: w for w in wire}
    assert found.sent_schema_tokens == proxy.tokens(compact([by_name[n] for n in names]))
    assert 0 < found.sent_schema_tokens < found.full_schema_tokens
    FIGURES["tool-search github (26 tools, 4 sent)"] = (
        f"{found.full_schema_tokens} -> {found.sent_schema_tokens} schema tokens "
        f"({found.reduction_pct}% less)")


def test_tool_search_sends_nothing_unrelated(proxy):
    tools = [CaveTool(t["name"], t["description"], t["inputSchema"]) for t in _catalog()]
    found = _cave(proxy).tool_search(tools, "zzzz qqqq")
    assert found.tools == [] and found.deferred_count == len(tools)
    assert found.sent_schema_tokens == 0 < found.full_schema_tokens


def test_tool_search_max_tools_caps_always_load_too(proxy):
    """max_tools is the cap on returned tools (the SDK's word): always_load tools take the
    first places, in catalog order, and none past the cap."""
    catalog = _catalog()
    tools = [CaveTool(t["name"], t["description"], t["inputSchema"], always_load=i < 5)
             for i, t in enumerate(catalog)]
    found = _cave(proxy).tool_search(tools, "create a pull request", max_tools=2,
                                     session_id="s-1")
    assert [t["name"] for t in found.tools] == [t["name"] for t in catalog[:2]]
    assert found.deferred_count == len(catalog) - 2
    assert found.session_id is None  # no tool session is kept, none is claimed


def test_tool_search_ranks_by_embeddings_when_asked(proxy):
    tools = [CaveTool(t["name"], t["description"], t["inputSchema"]) for t in _catalog()]
    found = _cave(proxy).tool_search(tools, "create a pull request", max_tools=3,
                                     ranker="embeddings")
    assert found.method == "embeddings"
    # the semantic grader's order (evals), which is not BM25's here
    from caveman_engine.evals import lexical, semantic

    cosine = [n for n, _ in semantic.rank("create a pull request", _catalog())][:3]
    bm25 = [n for n, _ in lexical.rank("create a pull request", _catalog())][:3]
    assert [t["name"] for t in found.tools] == cosine != bm25
    assert found.deferred_count == len(tools) - 3


def test_tool_search_embeddings_without_wordllama_is_bm25(tmp_path, start_proxy):
    """Without the optional wordllama (here: a package of that name that cannot be imported
    shadows it), ranker "embeddings" is answered with BM25 and says so, as the SDK expects of
    a gateway with no embedding provider."""
    shadow = tmp_path / "shadow" / "wordllama"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('wordllama is not installed')\n")
    p = start_proxy(extra_env={"PYTHONPATH": str(shadow.parent)})
    tools = [CaveTool(t["name"], t["description"], t["inputSchema"]) for t in _catalog()]
    found = _cave(p).tool_search(tools, "create a pull request", max_tools=4,
                                 ranker="embeddings")
    assert found.method == "bm25"
    from caveman_engine.evals import lexical

    assert [t["name"] for t in found.tools] == [
        n for n, _ in lexical.rank("create a pull request", _catalog())][:4]


@pytest.mark.parametrize("doc,code", [
    ({"tools": "x", "query": "a"}, "cave_invalid_request"),
    ({"tools": [], "query": 1}, "cave_invalid_request"),
    ({"tools": [], "query": "a", "max_tools": 0}, "cave_invalid_request"),
    ({"tools": [{"x": 1}], "query": "a"}, "cave_invalid_request"),
    ({"tools": [], "query": "a", "ranker": "cosine"}, "cave_unsupported_ranker"),
])
def test_tool_search_bad_request(proxy, doc, code):
    status, out = _post(proxy, "/sdk/v1/tool-search", doc)
    assert status == 400 and out["error"]["code"] == code


TOOL = {"name": "t", "description": "d", "input_schema": {"type": "object"}}


@pytest.mark.parametrize("doc,status,code", [
    ({"tools": [TOOL] * 4097, "query": "a"}, 413, "cave_request_too_large"),
    ({"tools": [TOOL], "query": "a " * 40000}, 413, "cave_request_too_large"),
    ({"tools": [TOOL], "query": "a", "context": "b " * 40000}, 413, "cave_request_too_large"),
    ({"tools": [TOOL], "query": "\ud800 a", "ranker": "embeddings"}, 400,
     "cave_invalid_request"),
])
def test_tool_search_refuses_what_would_tie_up_a_worker(proxy, doc, status, code):
    """A catalog past the middleware's manifest limit, a query or context past 64 KiB, and
    text that is not well formed are refused before any work (a 17 MB query took 90 s)."""
    got, out = _post(proxy, "/sdk/v1/tool-search", doc)
    assert got == status and out["error"]["code"] == code


def test_tool_search_always_load_at_scale_is_linear(proxy):
    tools = [{**TOOL, "name": f"t{i}", "always_load": True} for i in range(4096)]
    status, out = _post(proxy, "/sdk/v1/tool-search",
                        {"tools": tools, "query": "a", "max_tools": 10**9})
    assert status == 200 and len(out["tools"]) == 4096


@pytest.mark.parametrize("path", ["/sdk/v1/compress", "/sdk/v1/tool-search"])
def test_deep_nesting_is_a_bad_request(proxy, path):
    status, out = _post(proxy, path, b"[" * 5000 + b"]" * 5000)
    assert status == 400 and out["error"]["code"] == "cave_invalid_request"


@pytest.mark.parametrize("path", ["/sdk/v1/compress", "/caveman/v1/middleware/optimize"])
def test_a_runtime_body_that_stalls_gets_408_at_once(start_proxy, path):
    import socket
    import time

    p = start_proxy(yaml="body_timeout: 1\n")
    with socket.create_connection(("127.0.0.1", p.port)) as s:
        s.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                  "application/json\r\nContent-Length: 1000\r\n\r\n{".encode())
        s.settimeout(10)
        t0, data = time.monotonic(), b""
        while chunk := s.recv(65536):
            data += chunk
        took = time.monotonic() - t0
    assert data.startswith(b"HTTP/1.1 408 ") and took < 3, (took, data[:200])


# -- middleware protocol 1.1


def test_ready_and_preflight(proxy, runtime):
    caps = runtime.ready()
    assert caps["schema_version"] == 1 and caps["protocol"] == {"min": 1, "max": 1}
    assert caps["persistent"] is True and caps["recovery"] is True and caps["mode"] == "compress"
    assert [t["recovery"] for t in caps["transforms"]] == ["exact_ccr"]
    report = runtime.preflight()
    assert (report.status, report.reason, report.runtime_build) == (
        "ready", "ready", "caveman-engine/0.1.0")


def _optimize(runtime, scope, contents, **kw):
    binding = runtime.recovery(scope)
    return runtime.optimize(
        scope=scope, adapter=Adapter("tests", "1", "1", "tests-v1"),
        candidates=[Candidate(id=f"c{i}", content=c, **kw) for i, c in enumerate(contents)],
        manifest=[], binding=binding)


def _read_all(runtime, scope, handle, limit) -> tuple[str, int]:
    text, offset, pages = "", 0, 0
    while True:
        page = runtime.retrieve(scope, handle=handle, offset=offset, limit=limit)
        assert page["kind"] == "original_page" and page["offset"] == offset
        text += page["text"]
        pages += 1
        if page["next_offset"] is None:
            return text, pages
        offset = page["next_offset"]


def test_optimize_plan_is_accepted_and_its_handles_retrieve_byte_exact(proxy, runtime):
    original = _api_results().replace('"eu"', '"eü — 東京"')  # multi-byte characters
    small = "ok"
    scope = Scope("tests", "optimize-1")
    result = _optimize(runtime, scope, [original, small])
    # the client validated the plan in full (digest, marker, counts) before returning it
    assert (result.status, result.reason) == ("optimized", "eligible")
    assert [r["segment_id"] for r in result.replacements] == ["c0"]
    assert result.plan["skipped"] == [{"segment_id": "c1", "reason": "not_smaller"}]
    r = result.replacements[0]
    handle = r["recovery_handle"]
    assert r["text"].startswith(f"{MARKER}{handle}]\n")
    # the replacement is the engine's own output for the same bytes
    cli = proxy.cli("compress", input=original.encode())
    assert r["text"].split("\n", 1)[1].encode() == cli.stdout
    assert r["tokens_before"] == json.loads(cli.stderr)["tokens_before"]
    # cmw_ maps onto the ccr_ handle the store has
    ccr = json.loads(cli.stderr)["recovery_handle"]
    assert handle[4:36] == ccr[4:]
    # paged, on odd limits that fall inside multi-byte characters
    for limit in (5, 999, 262144):
        text, pages = _read_all(runtime, scope, handle, limit)
        assert text.encode() == original.encode()
        size = len(original.encode())
        # a page ends early only to keep a character whole (at most 3 bytes short)
        assert -(-size // limit) <= pages <= -(-size // max(limit - 3, 1))
    one = runtime.retrieve(scope, handle=handle)
    assert one["complete"] is True and one["total_bytes"] == len(original.encode())
    FIGURES["optimize api_results.json"] = (
        f"{r['tokens_before']} -> {r['tokens_after']} tokens (marker included; "
        f"recovery tool overhead {result.plan['measurement']['recovery_overhead_tokens']})")


def test_retrieve_excerpt_other_scope_and_unknown_handle(proxy, runtime):
    scope = Scope("tests", "optimize-2")
    result = _optimize(runtime, scope, [_api_results()])
    handle = result.replacements[0]["recovery_handle"]
    page = runtime.retrieve(scope, handle=handle, query="region ap latency")
    assert page["kind"] == "excerpt" and page["next_offset"] == 0 and not page["complete"]
    assert 0 < len(page["text"].encode()) < page["total_bytes"]
    with pytest.raises(MiddlewareError) as e:
        runtime.retrieve(Scope("tests", "someone-else"), handle=handle)
    assert e.value.code == "not_found"
    with pytest.raises(MiddlewareError) as e:
        runtime.retrieve(scope, handle="cmw_" + "0" * 48)
    assert e.value.code == "not_found"


def test_delete_session_revokes_its_handles(proxy, runtime):
    scope = Scope("tests", "to-delete")
    result = _optimize(runtime, scope, [_api_results()])
    handle = result.replacements[0]["recovery_handle"]
    assert runtime.retrieve(scope, handle=handle)["complete"]
    assert runtime.delete_session(scope) == {
        "schema_version": 1, "status": "revoked", "originals_deleted": False,
        "deleted": {"scopes": 1, "choices": 0, "grants": 0, "originals": 0}}
    with pytest.raises(MiddlewareError) as e:
        runtime.retrieve(scope, handle=handle)
    assert e.value.code == "deleted"
    # the original stays in the store (shared by other scopes and tools)
    assert proxy.cli("retrieve", "ccr_" + handle[4:36]).stdout == _api_results().encode()


def _wire(scope: Scope) -> dict:
    return {"namespace": scope.namespace, "session_id": scope.session_id,
            "branch_id": scope.branch_id, "cache_epoch": scope.cache_epoch}


def test_a_handle_cannot_be_made_for_another_scope(proxy, runtime):
    """The scope tag is an HMAC under the key in CAVEMAN_HOME: the ccr_ handle (or a digest
    of the content) and a public formula are not enough to read an original in another scope."""
    import hashlib

    scope, other = Scope("tests", "owner"), Scope("tests", "intruder")
    handle = _optimize(runtime, scope, [_api_results()]).replacements[0]["recovery_handle"]
    ccr = "ccr_" + handle[4:36]
    key = Path(proxy.env["CAVEMAN_HOME"]) / "middleware.key"
    assert key.stat().st_mode & 0o777 == 0o600 and len(key.read_text().strip()) == 64
    for secret in (b"", b"caveman-middleware-handle\0"):  # no key / the formula of 1.0
        scope_json = json.dumps(list(_wire(other).values()), separators=(",", ":")).encode()
        tag = hashlib.sha256(secret + scope_json + b"\0" + ccr.encode()).hexdigest()[:16]
        with pytest.raises(MiddlewareError) as e:
            runtime.retrieve(other, handle=handle[:36] + tag)
        assert e.value.code == "not_found"
    assert runtime.retrieve(scope, handle=handle)["complete"]


def test_handles_and_revocations_outlive_the_proxy(proxy, runtime, upstream, rank_cache_dir):
    """A second proxy on the same CAVEMAN_HOME and store (a restart, or a neighbour) resolves
    the first one's handles, and honours its revocations, and the first honours the second's."""
    kept, gone = Scope("tests", "kept"), Scope("tests", "gone")
    h_kept = _optimize(runtime, kept, [_api_results()]).replacements[0]["recovery_handle"]
    h_gone = _optimize(runtime, gone, [_api_results()]).replacements[0]["recovery_handle"]
    runtime.delete_session(gone)
    home = Path(proxy.env["CAVEMAN_HOME"]).parent
    second = Proxy(home, upstream.upstream_url, rank_cache_dir,
                   ccr_db=Path(proxy.env["CAVEMAN_CCR_DB"]))
    rt2 = MiddlewareRuntime(endpoint=second.url)
    try:
        rt2.ready()
        assert rt2.retrieve(kept, handle=h_kept)["text"] == _api_results()
        with pytest.raises(MiddlewareError) as e:
            rt2.retrieve(gone, handle=h_gone)
        assert e.value.code == "deleted"
        assert rt2.delete_session(kept)["deleted"]["scopes"] == 1
        with pytest.raises(MiddlewareError) as e:
            runtime.retrieve(kept, handle=h_kept)  # the first proxy sees it at once
        assert e.value.code == "deleted"
    finally:
        rt2.close()
        second.stop()


def test_a_torn_revocation_file_cannot_swallow_a_revocation(tmp_path, upstream, rank_cache_dir):
    """A line cut short (a crash, a full disk) at the end of middleware.revoked: the next
    revocation starts a line of its own, so a restarted proxy still refuses the scope."""
    home = tmp_path / "p"
    home.mkdir()
    first = Proxy(home, upstream.upstream_url, rank_cache_dir)
    rt = MiddlewareRuntime(endpoint=first.url)
    try:
        rt.ready()
        scope = Scope("tests", "victim")
        handle = _optimize(rt, scope, [_api_results()]).replacements[0]["recovery_handle"]
        revoked = Path(first.env["CAVEMAN_HOME"]) / "middleware.revoked"
        revoked.write_bytes(b"41ffa9ca95f57")  # no newline
        revoked.chmod(0o600)
        rt.delete_session(scope)
    finally:
        rt.close()
        first.stop()
    assert revoked.read_bytes().split(b"\n")[1:] != [b""]  # the digest has its own line
    again = Proxy(home, upstream.upstream_url, rank_cache_dir,
                  ccr_db=Path(first.env["CAVEMAN_CCR_DB"]))
    rt = MiddlewareRuntime(endpoint=again.url)
    try:
        rt.ready()
        with pytest.raises(MiddlewareError) as e:
            rt.retrieve(scope, handle=handle)
        assert e.value.code == "deleted"
    finally:
        rt.close()
        again.stop()


def test_a_key_file_that_is_a_symlink_is_refused(tmp_path, start_proxy):
    p = start_proxy()
    key_home = Path(p.env["CAVEMAN_HOME"])
    key_home.mkdir(mode=0o700)
    (tmp_path / "elsewhere").write_text("ab" * 32 + "\n")
    (key_home / "middleware.key").symlink_to(tmp_path / "elsewhere")
    status, caps = _post(p, "/caveman/v1/middleware/capabilities", None)
    assert status == 200 and caps["recovery"] is False
    doc = {"schema_version": 1, "scope": _wire(Scope("a", "b")), "handle": "cmw_" + "0" * 48}
    status, out = _post(p, "/caveman/v1/middleware/retrieve", doc)
    assert status == 503 and out["error"]["code"] == "recovery_unavailable"
    assert "not a regular file" in out["error"]["message"]
    assert str(tmp_path) not in out["error"]["message"]  # no path reaches a client


def test_retrieve_takes_integral_floats(proxy, runtime):
    """A model writes 1000.0 for 1000; JSON has one number type, and the client forwards it."""
    scope = Scope("tests", "floats")
    handle = _optimize(runtime, scope, [_api_results()]).replacements[0]["recovery_handle"]
    doc = {"schema_version": 1, "scope": _wire(scope), "handle": handle}
    status, page = _post(proxy, "/caveman/v1/middleware/retrieve",
                         {**doc, "offset": 10.0, "limit": 1000.0})
    assert status == 200, page
    assert page["text"] == _api_results().encode()[10:1010].decode()
    status, page = _post(proxy, "/caveman/v1/middleware/retrieve", {**doc, "limit": 1000.5})
    assert status == 400 and page["error"]["code"] == "invalid_request"
    for query in (0, False, [], {}):  # not text: no query, nor a silent "none"
        status, page = _post(proxy, "/caveman/v1/middleware/retrieve", {**doc, "query": query})
        assert status == 400 and page["error"]["code"] == "invalid_request", query


def test_record_mode_is_left_alone(proxy):
    with MiddlewareRuntime(endpoint=proxy.url, mode="record") as rt:
        assert rt.preflight().reason == "record_only"
        result = _optimize(rt, Scope("tests", "record"), [_api_results()])
        assert (result.status, result.reason, result.replacements) == ("record", "record", [])



@pytest.mark.parametrize("change,reason", [
    ({"protected": True}, "protected"), ({"opaque": True}, "opaque_part"),
    ({"kind": "system_prompt"}, "unsupported_shape"),
])
def test_segments_the_plan_leaves_alone(proxy, runtime, change, reason):
    doc = _raw_optimize(proxy, runtime.ready(), _api_results())
    doc["segments"][0].update(change)
    status, out = _post(proxy, "/caveman/v1/middleware/optimize", doc)
    assert status == 200 and (out["status"], out["reason"]) == ("bypassed", reason)
    assert out["replacements"] == [] and out["skipped"] == [
        {"segment_id": "s1", "reason": reason}]


def _raw_optimize(proxy, caps, content: str, digest: str | None = None) -> dict:
    import hashlib

    return {
        "schema_version": 1, "request_id": "r1", "logical_call_id": "r1", "attempt_id": "a1",
        "idempotency_key": "r1",
        "scope": {"namespace": "raw", "session_id": "s", "branch_id": "main",
                  "cache_epoch": "0"},
        "sequence": 0, "adapter": {"id": "raw", "version": "1", "framework_version": "1",
                                   "serialization_revision": "r"},
        "model": None, "mode": "compress",
        "policy": {"revision": caps["policy_revision"],
                   "transforms": [t["transform_id"] for t in caps["transforms"]]},
        "segments": [{"id": "s1", "source_id": "s1", "kind": "tool_result",
                      "cache_region": "live_zone", "content": content,
                      "sha256": digest or hashlib.sha256(content.encode()).hexdigest(),
                      "protected": False, "opaque": False}],
        "context_manifest": [], "recovery_binding": {"id": "b", "kind": "host_tool",
                                                     "tool_name": "caveman_retrieve",
                                                     "overhead_text": "x"},
    }


def test_optimize_checks_digests_and_answers_protocol_errors(proxy, runtime):
    import hashlib

    caps = runtime.ready()
    base = "/caveman/v1/middleware/"
    doc = _raw_optimize(proxy, caps, "hello", digest="0" * 64)
    status, out = _post(proxy, base + "optimize", doc)
    assert status == 400 and out["error"]["code"] == "invalid_request"
    assert "sha256" in out["error"]["message"]
    body = json.dumps(_raw_optimize(proxy, caps, _api_results())).encode()
    status, out = _post(proxy, base + "optimize", body)
    assert status == 200 and out["input_digest"] == hashlib.sha256(body).hexdigest()
    assert out["status"] == "optimized"
    status, out = _post(proxy, base + "optimize", {**doc, "schema_version": 2})
    assert status == 400 and out["error"]["code"] == "unsupported_version"
    status, out = _post(proxy, base + "optimize", {**doc, "scope": {"namespace": "a b"}})
    assert status == 400 and out["error"]["code"] == "invalid_scope"
    status, out = _post(proxy, base + "nope", {})
    assert status == 404 and out["error"]["code"] == "not_found"
    r = request(proxy.url + base + "optimize", method="GET")
    assert r.status == 405 and json.loads(r.body)["error"]["code"] == "invalid_request"
    big = b'{"x":"' + b"a" * (3 << 20) + b'"}'
    r = request(proxy.url + base + "optimize", big)
    assert r.status == 413 and json.loads(r.body)["error"]["code"] == "payload_limit"
    status, out = _post(proxy, base + "receipts", {
        "schema_version": 1, "scope": doc["scope"], "event_kind": "completed"})
    assert (status, out) == (202, {"schema_version": 1, "status": "accepted"})


# -- the adapters


def _openai_chat_tools() -> list[dict]:
    return json.loads((ROOT / "corpus" / "formats" / "github.openai.json").read_text())


def _tool_text_received(upstream, path: str) -> str:
    got = [r for r in upstream.fake.received if r.path == path][-1].json()
    if path == "/v1/chat/completions":
        return next(m["content"] for m in got["messages"] if m.get("role") == "tool")
    return next(p["content"] if isinstance(p["content"], str) else p["content"][0]["text"]
                for m in got["messages"] if m["role"] == "user" and isinstance(m["content"], list)
                for p in m["content"] if p.get("type") == "tool_result")


def _figure(proxy, name: str, original: str, sent: str) -> None:
    before, after = proxy.tokens(original.encode()), proxy.tokens(sent.encode())
    assert after < before
    FIGURES[name] = f"tool result {before} -> {after} tokens ({before - after} saved)"


def test_openai_adapter_compresses_the_tool_result_and_recovers_it(proxy, runtime, upstream):
    openai = pytest.importorskip("openai")
    from caveman_middleware.openai import with_caveman_openai_tools

    tools = _openai_chat_tools()
    original = _api_results()
    functions = {t["function"]["name"]: (lambda args: original) for t in tools}
    scope = Scope("openai", "chat-1")
    client = openai.OpenAI(api_key="test", base_url=proxy.url + "/v1", max_retries=0)
    loop = with_caveman_openai_tools(client, runtime=runtime, scope=scope,
                                     protocol="openai-chat", tools=tools, functions=functions)
    assert [t["function"]["name"] for t in loop.tools][-1] == "caveman_retrieve"
    messages = [
        {"role": "user", "content": "Which hosts are slow?"},
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "search_issues", "arguments": '{"q": "slow"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": original},
    ]
    reply = loop.client.chat.completions.create(model="gpt-test", messages=messages,
                                                tools=loop.tools)
    assert reply.choices[0].message.content is not None
    assert runtime.last_report.status == "applied"
    sent = _tool_text_received(upstream, "/v1/chat/completions")
    assert sent.startswith(MARKER)
    handle = sent[len(MARKER):].split("]", 1)[0]
    # the model's recovery call, through the loop's own dispatch map
    page = loop.functions["caveman_retrieve"]({"handle": handle})
    assert page["complete"] is True and page["text"] == original
    _figure(proxy, "openai chat adapter (github catalog, api_results tool result)",
            original, sent)
    # the whole request (26 tools + caveman_retrieve + messages), as sent and as it would be
    got = [r for r in upstream.fake.received if r.path == "/v1/chat/completions"][-1].json()
    whole = proxy.tokens(json.dumps(got).encode())
    for m in got["messages"]:
        if m.get("role") == "tool":
            m["content"] = original
    unchanged = proxy.tokens(json.dumps(got).encode())
    assert whole < unchanged
    FIGURES["openai chat adapter, whole request"] = f"{unchanged} -> {whole} tokens"


@pytest.mark.parametrize("level", ["toolschema", "toolschema-max"])
def test_the_recovery_tool_reaches_the_model_as_the_adapter_wrote_it(start_proxy, upstream,
                                                                    level):
    """At a catalog level the proxy rewrites every tool but the middleware's caveman_retrieve,
    whose text the adapter checks and the model needs whole; the stored original is the
    catalog as sent."""
    openai = pytest.importorskip("openai")
    from caveman_middleware.openai import with_caveman_openai_tools

    p = start_proxy(level=level)
    rt = MiddlewareRuntime(endpoint=p.url)
    try:
        rt.ready()
        tools = _openai_chat_tools()
        client = openai.OpenAI(api_key="test", base_url=p.url + "/v1", max_retries=0)
        loop = with_caveman_openai_tools(client, runtime=rt, scope=Scope("openai", level),
                                         protocol="openai-chat", tools=tools,
                                         functions={t["function"]["name"]: (lambda a: "x")
                                                    for t in tools})
        raw = client.chat.completions.with_raw_response.create(
            model="gpt-test", messages=[{"role": "user", "content": "hi"}], tools=loop.tools)
        got = [r for r in upstream.fake.received if r.path == "/v1/chat/completions"][-1]
        sent_tools = got.json()["tools"]
        assert sent_tools[-1] == loop.tools[-1]  # caveman_retrieve, whole
        assert sent_tools[-1]["function"]["name"] == "caveman_retrieve"
        assert sent_tools[:-1] != loop.tools[:-1]  # the others were rewritten
        handle = raw.headers["x-caveman-toolschema-recovery-handle"]
        back = p.cli("retrieve", handle)
        assert back.returncode == 0 and json.loads(back.stdout) == loop.tools
    finally:
        rt.close()


def test_the_recovery_tool_is_kept_when_its_name_is_escaped(start_proxy, upstream):
    """A JSON escape in the name ("caveman\\u005fretrieve") names the same tool."""
    from caveman_cloud.middleware.runtime import RECOVERY_DESCRIPTION, RECOVERY_SCHEMA

    p = start_proxy(level="toolschema")
    recovery = json.dumps({"name": "caveman_retrieve", "description": RECOVERY_DESCRIPTION,
                           "input_schema": RECOVERY_SCHEMA}).replace(
        "caveman_retrieve", "caveman\\u005fretrieve")
    others = json.dumps(json.loads((ROOT / "corpus" / "formats" /
                                    "github.anthropic.json").read_text()))[1:-1]
    body = ('{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}],'
            f'"tools":[{others},{recovery}]}}').encode()
    r = request(p.url + "/v1/messages", body)
    assert r.status == 200
    sent = [x for x in upstream.fake.received if x.path == "/v1/messages"][-1].body
    assert recovery.encode() in sent  # byte for byte
    assert others.encode() not in sent  # the rest rewritten


def test_async_openai_adapter_through_the_async_runtime(proxy, runtime, upstream):
    import asyncio

    openai = pytest.importorskip("openai")
    from caveman_middleware.openai import with_caveman_openai_tools

    tools = _openai_chat_tools()
    original = _api_results()

    async def recover_later(args):
        return original

    async def main():
        client = openai.AsyncOpenAI(api_key="test", base_url=proxy.url + "/v1", max_retries=0)
        loop = with_caveman_openai_tools(
            client, runtime=runtime, scope=Scope("openai", "async-1"), protocol="openai-chat",
            tools=tools, functions={t["function"]["name"]: recover_later for t in tools})
        messages = [
            {"role": "user", "content": "Which hosts are slow?"},
            {"role": "assistant", "content": None, "tool_calls": [{
                "id": "call_1", "type": "function",
                "function": {"name": "search_issues", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": original},
        ]
        await loop.client.chat.completions.create(model="gpt-test", messages=messages,
                                                  tools=loop.tools)
        sent = _tool_text_received(upstream, "/v1/chat/completions")
        handle = sent[len(MARKER):].split("]", 1)[0]
        page = await loop.functions["caveman_retrieve"]({"handle": handle})
        await client.close()
        return sent, page

    sent, page = asyncio.run(main())
    assert sent.startswith(MARKER) and page["text"] == original


def test_openai_responses_adapter_compresses_the_function_output(proxy, runtime, upstream):
    openai = pytest.importorskip("openai")
    from caveman_middleware.openai import with_caveman_openai_tools

    tools = [{"type": "function", **t["function"]} for t in _openai_chat_tools()]
    original = _api_results()
    client = openai.OpenAI(api_key="test", base_url=proxy.url + "/v1", max_retries=0)
    loop = with_caveman_openai_tools(client, runtime=runtime, scope=Scope("openai", "resp-1"),
                                     protocol="openai-responses", tools=tools,
                                     functions={t["name"]: (lambda a: original) for t in tools})
    items = [
        {"role": "user", "content": "Which hosts are slow?"},
        {"type": "function_call", "call_id": "call_1", "name": "search_issues",
         "arguments": '{"q": "slow"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": original},
    ]
    # a stored response would outlive the call: the adapter compresses only with store=False
    loop.client.responses.create(model="gpt-test", input=items, tools=loop.tools, store=False)
    assert runtime.last_report.status == "applied"
    got = [r for r in upstream.fake.received if r.path == "/v1/responses"][-1].json()
    sent = next(i["output"] for i in got["input"] if i.get("type") == "function_call_output")
    assert sent.startswith(MARKER)
    handle = sent[len(MARKER):].split("]", 1)[0]
    assert loop.functions["caveman_retrieve"]({"handle": handle})["text"] == original
    loop.client.responses.create(model="gpt-test", input=items, tools=loop.tools)
    assert runtime.last_report.reason == "provider_state_retained"
    got = [r for r in upstream.fake.received if r.path == "/v1/responses"][-1].json()
    assert got["input"][2]["output"] == original
    _figure(proxy, "openai responses adapter (github catalog, api_results output)",
            original, sent)


def test_anthropic_adapter_compresses_the_tool_result(proxy, runtime, upstream):
    anthropic = pytest.importorskip("anthropic")
    from anthropic.lib.tools import beta_tool
    from caveman_middleware.anthropic import with_caveman_anthropic

    original = _api_results()
    catalog = json.loads((ROOT / "corpus" / "formats" / "github.anthropic.json").read_text())

    @beta_tool
    def search_issues(q: str) -> str:
        """Search issues and pull requests."""
        return original

    client = anthropic.Anthropic(api_key="test", base_url=proxy.url, max_retries=0)
    # anthropic 2.x is past the adapter's tested range (<2): accepted explicitly here
    wrapped = with_caveman_anthropic(client, runtime=runtime, scope=Scope("anthropic", "m-1"),
                                     accept_framework_version=True)
    messages = [
        {"role": "user", "content": "Which hosts are slow?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1",
                                           "name": "search_issues", "input": {"q": "slow"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                      "content": original}]},
    ]
    others = [t for t in catalog if t["name"] != "search_issues"]
    runner = wrapped.beta.messages.tool_runner(model="claude-test", max_tokens=64,
                                               messages=messages,
                                               tools=[*others, search_issues],
                                               max_iterations=1)
    final = runner.until_done()
    assert final.content[0].text == "ok"
    assert runtime.last_report.status == "applied"
    got = [r for r in upstream.fake.received if r.path == "/v1/messages"][-1].json()
    assert [t["name"] for t in got["tools"]] == [t["name"] for t in others] + [
        "search_issues", "caveman_retrieve"]
    sent = _tool_text_received(upstream, "/v1/messages")
    assert sent.startswith(MARKER)
    _figure(proxy, "anthropic tool_runner adapter (github catalog, api_results tool result)",
            original, sent)


def test_langchain_agent_adapter_compresses_the_tool_message(proxy, runtime):
    pytest.importorskip("langchain_core")
    pytest.importorskip("langgraph")
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.tools import StructuredTool
    from caveman_middleware.langchain import with_caveman_agent

    original = _api_results()
    seen: list = []

    class Model(GenericFakeChatModel):
        """The model end of the agent: answers from a script and keeps what it was sent."""

        def bind_tools(self, tools, **kw):
            return self

        def _generate(self, messages, stop=None, run_manager=None, **kw):
            seen.append(list(messages))
            return super()._generate(messages, stop=stop, run_manager=run_manager, **kw)

    script = iter([AIMessage(content="", tool_calls=[{"id": "call_1", "name": "search_issues",
                                                      "args": {"q": "slow"}}]),
                   AIMessage(content="done")])

    def search_issues(q: str) -> str:
        """Search issues and pull requests."""
        return original

    options = with_caveman_agent(
        {"model": Model(messages=script), "tools": [StructuredTool.from_function(search_issues)]},
        runtime=runtime, scope=Scope("langchain", "agent-1"))
    recover = options["tools"][-1]
    assert recover.name == "caveman_retrieve"
    out = create_agent(**options).invoke({"messages": [HumanMessage("Which hosts are slow?")]})
    assert out["messages"][-1].content == "done"
    # the tool message in the graph state is the original; the model saw the replacement
    assert [m.content for m in out["messages"] if isinstance(m, ToolMessage)] == [original]
    sent = [m.content for m in seen[-1] if isinstance(m, ToolMessage)][0]
    assert sent.startswith(MARKER)
    handle = sent[len(MARKER):].split("]", 1)[0]
    page = json.loads(recover.invoke({"handle": handle},
                                     config={"configurable": {"thread_id": "x"}}))
    assert page["text"] == original
    _figure(proxy, "langchain agent adapter (api_results tool message)", original, sent)



def test_a_store_that_cannot_open_is_a_clear_503(tmp_path, upstream, rank_cache_dir):
    bad = tmp_path / "open"
    bad.mkdir()
    bad.chmod(0o777)  # the store refuses a group/world-writable parent
    p = Proxy(tmp_path, upstream.upstream_url, rank_cache_dir, ccr_db=bad / "ccr.db")
    try:
        status, out = _post(p, "/sdk/v1/compress", {"input": "x"})
        assert status == 503 and out["error"]["code"] == "cave_ccr_unavailable"
        assert out["error"]["message"].startswith("Cannot open the recovery store: ")
        with MiddlewareRuntime(endpoint=p.url) as rt:
            report = rt.preflight()
            assert (report.status, report.reason) == ("unavailable", "recovery_unavailable")
        # tool search only counts tokens: it still answers
        status, out = _post(p, "/sdk/v1/tool-search", {
            "tools": [{"name": "grep", "description": "Search files."}], "query": "grep"})
        assert status == 200 and [t["name"] for t in out["tools"]] == ["grep"]
    finally:
        p.stop()


def test_mcp_adapter_shortens_a_tool_result_and_recovers_it(proxy, runtime):
    import asyncio

    pytest.importorskip("mcp")
    from mcp.types import CallToolResult, TextContent, Tool
    from caveman_middleware.mcp import CavemanMCPHost, MCPToolBinding

    original = _api_results()
    spec = next(t for t in _catalog() if t["name"] == "search_issues")  # the github catalog's
    tool = Tool(name=spec["name"], description=spec["description"],
                input_schema=spec["inputSchema"])

    async def call(arguments=None, **_):
        return CallToolResult(content=[TextContent(type="text", text=original)])

    async def main():
        host = CavemanMCPHost(runtime=runtime, scope=Scope("mcp", "host-1"), server_id="github",
                              protocol_version="2025-06-18")
        tools = host.register([MCPToolBinding(tool, call)])
        assert [b.tool.name for b in tools] == ["search_issues", "caveman_retrieve"]
        result = await call()
        view = await host.project_result(result, tool=tool, call_id="call-1",
                                         context_manifest=[], registered_tools=tools)
        sent = view.content[0].text
        handle = sent[len(MARKER):].split("]", 1)[0]
        page = await tools[-1].execute({"handle": handle})
        return result, sent, json.loads(page.content[0].text)

    result, sent, page = asyncio.run(main())
    assert result.content[0].text == original  # the host keeps the original result
    assert sent.startswith(MARKER) and page["text"] == original
    _figure(proxy, "mcp host adapter (github search_issues, api_results result)", original, sent)


def test_langchain_document_compressor_shortens_artifacts(proxy, runtime):
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document
    from caveman_middleware.langchain import CavemanDocumentCompressor

    original = _api_results()
    scope = Scope("langchain", "rag-1")
    reader = runtime.recovery(scope)  # the application's source reader
    compressor = CavemanDocumentCompressor(runtime=runtime, scope=scope, source_expansion=reader)
    docs = [Document(page_content=original, id="results"), Document(page_content="short note")]
    out = compressor.compress_documents(docs, "slow hosts")
    assert out[1].page_content == "short note"
    sent = out[0].page_content
    assert sent.startswith(MARKER)
    handle = sent[len(MARKER):].split("]", 1)[0]
    assert reader.execute({"handle": handle})["text"] == original
    _figure(proxy, "langchain document compressor (api_results as an artifact)", original, sent)
