"""The MCP stdio middleware: list rewriting (in process) and real servers end to end.

Real servers: ``mcp-server-time`` (PyPI, test extra) and ``@modelcontextprotocol/server-everything``
(npm, installed into a cache directory when node/npm exist), driven byte-exactly by a raw
JSON-RPC peer and by the official ``mcp`` Python SDK client.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from caveman_engine.engine import Engine
from caveman_engine.mcp.rewrite import META_HANDLE, RETRIEVE_TOOL, Rewriter, prose_edits
from caveman_engine.store import open_store
from caveman_engine.compressors.prose import shrink
from tests.conftest import CORPUS, console_script
from tests.fixtures.mcp.rawpeer import RawPeer



# --------------------------------------------------------------------------- in process


@pytest.fixture
def engine(tmp_path, rank_cache_dir, monkeypatch):
    monkeypatch.setenv("CAVEMAN_CACHE_DIR", str(rank_cache_dir))
    store = open_store(str(tmp_path / "ccr.db"))
    yield Engine(store)
    store.close()


def rewriter(engine, **kw) -> Rewriter:
    return Rewriter(lambda: engine, **kw)


def rewrite(rw: Rewriter, line: bytes, method: str, first_page: bool = True) -> bytes | None:
    return rw.rewrite(line, method, json.loads(line), first_page)


WORKED_EXAMPLE = (
    b'{"jsonrpc":"2.0","id":1,"result":{"tools":['
    b'{"name":"get_weather","description":"Get the current weather for a given location.",'
    b'"title":"The weather tool","inputSchema":{"type":"object","properties":{'
    b'"city":{"type":"string","description":"The name of the city","title":"The city"},'
    b'"description":{"type":"string","description":"Just a free-form description"}},'
    b'"required":["city"]}},'
    b'{"name":"noop","description":"Noop"},'
    b'{"description":"The nameless tool"}]}}'
)


def test_worked_example_prose_type(engine):
    # shrink_spec §3.3, tools through --type prose: item descriptions and every description
    # string inside inputSchema shrunk; titles untouched; nothing else changes.
    out = rewrite(rewriter(engine, tool_type="prose"), WORKED_EXAMPLE, "tools/list")
    handle = json.loads(out)["result"]["_meta"][META_HANDLE]
    assert out == (
        b'{"jsonrpc":"2.0","id":1,"result":{"_meta":{"caveman/recovery_handle":"'
        + handle.encode()
        + b'"},"tools":['
        b'{"name":"get_weather","description":"Get current weather for given location.",'
        b'"title":"The weather tool","inputSchema":{"type":"object","properties":{'
        b'"city":{"type":"string","description":"Name of city","title":"The city"},'
        b'"description":{"type":"string","description":"free-form description"}},'
        b'"required":["city"]}},'
        b'{"name":"noop","description":"Noop"},'
        b'{"description":"Nameless tool"}]}}'
    )
    original = WORKED_EXAMPLE[WORKED_EXAMPLE.index(b"[") : -2]
    assert engine.retrieve(handle) == original


def test_prompts_and_templates(engine):
    rw = rewriter(engine)
    prompts = (
        b'{"jsonrpc":"2.0","id":"p","result":{"prompts":[{"name":"p","description":'
        b'"The prompt does a thing","arguments":[{"name":"a","description":"The argument"}]}]}}'
    )
    out = json.loads(rewrite(rw, prompts, "prompts/list"))
    assert out["result"]["prompts"] == [
        {"name": "p", "description": "Prompt does thing",
         "arguments": [{"name": "a", "description": "The argument"}]}
    ]
    templates = (
        b'{"jsonrpc":"2.0","id":2,"result":{"resourceTemplates":[{"name":"f","uriTemplate":'
        b'"file:///{path}","description":"The file at the path"}]}}'
    )
    out = json.loads(rewrite(rw, templates, "resources/templates/list"))
    assert out["result"]["resourceTemplates"][0]["description"] == "File at path"
    assert out["result"]["resourceTemplates"][0]["uriTemplate"] == "file:///{path}"


def test_everything_else_byte_for_byte(engine):
    # Odd spacing, key order, big and float literals, escapes, CRLF: all kept; only the
    # description string and the inserted _meta member differ.
    line = (
        b'{ "id" : 7, "jsonrpc":"2.0",  "result" : {"b":1, "2": 0, "n": 12345678901234567890123,'
        b' "f": 1.0, "resources" : [ {"uri":"x:\\/\\/a", "description" : "The \\u00e9 file of'
        b' the user", "size": 1e3} , null, "odd", 5, [ {"description":"The x thing"} ] ] ,'
        b' "nextCursor":"c"} }\r'
    )
    out = rewrite(rewriter(engine), line, "resources/list")
    handle = json.loads(out)["result"]["_meta"][META_HANDLE]
    assert out == (
        b'{ "id" : 7, "jsonrpc":"2.0",  "result" : {"_meta":{"caveman/recovery_handle":"'
        + handle.encode()
        + b'"},"b":1, "2": 0, "n": 12345678901234567890123,'
        b' "f": 1.0, "resources" : [ {"uri":"x:\\/\\/a", "description" : "The \xc3\xa9 file of'
        b' user", "size": 1e3} , null, "odd", 5, [ {"description":"The x thing"} ] ] ,'
        b' "nextCursor":"c"} }\r'
    )
    start = line.index(b"[ {")
    assert engine.retrieve(handle) == line[start : line.index(b"] ,") + 1]


def test_existing_meta(engine):
    rw = rewriter(engine)
    base = b'"prompts":[{"name":"p","description":"The prompt does the thing"}]'
    out = rewrite(rw, b'{"id":1,"result":{"_meta":{"k":[1]},' + base + b"}}", "prompts/list")
    meta = json.loads(out)["result"]["_meta"]
    assert list(meta) == [META_HANDLE, "k"] and meta["k"] == [1]
    out = rewrite(rw, b'{"id":1,"result":{"_meta":{},' + base + b"}}", "prompts/list")
    assert list(json.loads(out)["result"]["_meta"]) == [META_HANDLE]
    out = rewrite(
        rw, b'{"id":1,"result":{"_meta":{"caveman/recovery_handle":"old"},' + base + b"}}",
        "prompts/list",
    )
    assert out.count(b"caveman/recovery_handle") == 1
    assert json.loads(out)["result"]["_meta"][META_HANDLE].startswith("ccr_")
    # a _meta that is not an object: the response is left alone
    assert rewrite(rw, b'{"id":1,"result":{"_meta":3,' + base + b"}}", "prompts/list") is None


def test_not_rewritten(engine):
    rw = rewriter(engine)
    # nothing to shrink
    assert rewrite(rw, b'{"id":1,"result":{"prompts":[{"name":"p","description":"Noop"}]}}',
                   "prompts/list") is None
    # a list key that is not an array, or the wrong method for the key
    assert rewrite(rw, b'{"id":1,"result":{"prompts":"The thing"}}', "prompts/list") is None
    assert rewrite(rw, b'{"id":1,"result":{"prompts":[{"description":"The thing"}]}}',
                   "tools/list") is None
    # no store: nothing lossy is emitted
    assert Rewriter(lambda: None).rewrite(
        b'{"id":1,"result":{"prompts":[{"description":"The big thing"}]}}', "prompts/list",
        {"result": {"prompts": [{}]}},
    ) is None


def test_fields_option(engine):
    line = b'{"id":1,"result":{"prompts":[{"name":"p","title":"The big one","description":"The big one"}]}}'
    out = json.loads(rewrite(rewriter(engine, fields=("title",)), line, "prompts/list"))
    assert out["result"]["prompts"][0] == {"name": "p", "title": "Big one", "description": "The big one"}
    assert rewrite(rewriter(engine, fields=()), line, "prompts/list") is None


def test_tools_through_toolschema(engine):
    catalog = json.dumps(json.loads((CORPUS / "filesystem.tools.json").read_bytes()),
                         separators=(",", ":"), ensure_ascii=False).encode()
    line = b'{"result":{"tools":' + catalog + b',"nextCursor":"n2"},"jsonrpc":"2.0","id":3}'
    out = rewrite(rewriter(engine), line, "tools/list")
    expected = engine.compress(catalog, "toolschema")
    assert expected.recovery_handle is not None
    assert out == (
        b'{"result":{"_meta":{"caveman/recovery_handle":"' + expected.recovery_handle.encode()
        + b'"},"tools":' + expected.output + b',"nextCursor":"n2"},"jsonrpc":"2.0","id":3}'
    )
    assert engine.retrieve(expected.recovery_handle) == catalog
    before = [(t["name"], sorted(t["inputSchema"].get("properties", {}))) for t in json.loads(catalog)]
    after = [(t["name"], sorted(t["inputSchema"].get("properties", {})))
             for t in json.loads(out)["result"]["tools"]]
    assert before == after


def test_tools_with_null_items(engine):
    line = (b'{"id":1,"result":{"tools":[null,{"name":"t","description":"The tool that does '
            b'the thing","inputSchema":{"type":"object","title":"T","properties":{}}},7]}}')
    out = rewrite(rewriter(engine), line, "tools/list")
    # toolschema drops the schema title and leaves the odd items where they are
    assert json.loads(out)["result"]["tools"] == [
        None,
        {"description": "The tool that does the thing",
         "inputSchema": {"properties": {}, "type": "object"}, "name": "t"},
        7,
    ]
    out = rewrite(rewriter(engine, tool_type="prose"), line, "tools/list")
    assert json.loads(out)["result"]["tools"][0] is None


def test_retrieve_tool_added(engine):
    rw = rewriter(engine, retrieve_tool=True)
    tool = json.dumps(RETRIEVE_TOOL, ensure_ascii=False, separators=(",", ":")).encode()
    assert rewrite(rw, b'{"id":1,"result":{"tools":[]}}', "tools/list") == (
        b'{"id":1,"result":{"tools":[' + tool + b"]}}"
    )
    assert rewrite(rw, b'{"id":1,"result":{"tools":[ {"name":"x"} ] }}', "tools/list") == (
        b'{"id":1,"result":{"tools":[ {"name":"x"},' + tool + b"] }}"
    )
    # later pages, or a server that already has one: not added again
    assert rewrite(rw, b'{"id":1,"result":{"tools":[{"name":"x"}]}}', "tools/list", False) is None
    assert rewrite(rw, b'{"id":1,"result":{"tools":[{"name":"caveman_retrieve"}]}}',
                   "tools/list") is None


def test_repeated_list_reuses_result_but_stays_recoverable(engine, tmp_path):
    import sqlite3

    rw = rewriter(engine, tool_type="prose")
    first = rewrite(rw, WORKED_EXAMPLE, "tools/list")
    assert rewrite(rw, WORKED_EXAMPLE, "tools/list") == first
    handle = json.loads(first)["result"]["_meta"][META_HANDLE]
    # the original disappears from the store behind the middleware's back: stored again
    with sqlite3.connect(str(tmp_path / "ccr.db")) as db:
        db.execute("DELETE FROM recoveries WHERE handle = ?", (handle,))
    assert rewrite(rw, WORKED_EXAMPLE, "tools/list") == first
    assert engine.retrieve(handle) == WORKED_EXAMPLE[WORKED_EXAMPLE.index(b"[") : -2]


def test_prose_edits_deep_schema_iterative():
    depth = 5000
    schema = '{"description":"The x","items":' * depth + "{}" + "}" * depth
    text = '[{"name":"t","inputSchema":' + schema + "}]"
    edits = prose_edits(text, 0, len(text), frozenset({"description"}), True, shrink)
    assert len(edits) == depth and all(e[2] == '"X"' for e in edits)


# --------------------------------------------------------------------------- real servers


def _env(tmp: Path, rank_cache_dir: Path) -> dict:
    env = dict(os.environ)
    env["CAVEMAN_CCR_DB"] = str(tmp / "ccr.db")
    env["CAVEMAN_CACHE_DIR"] = str(rank_cache_dir)
    return env


def _time_server() -> list[str]:
    exe = Path(sys.executable).with_name("mcp-server-time")
    if not exe.exists():
        pytest.skip("mcp-server-time is not installed (pip install -e '.[test]')")
    return [str(exe), "--local-timezone", "UTC"]


def _everything_server() -> list[str]:
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        pytest.skip("node/npm not found: @modelcontextprotocol/server-everything cannot run")
    cache = Path(os.environ.get("CAVEMAN_TEST_NPM_CACHE",
                                Path.home() / ".cache" / "caveman-engine-tests" / "npm"))
    entry = cache / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
    if not entry.exists():
        cache.mkdir(parents=True, exist_ok=True)
        try:
            subprocess.run(
                [npm, "install", "--prefix", str(cache), "--no-audit", "--no-fund",
                 "--loglevel=error", "@modelcontextprotocol/server-everything"],
                check=True, capture_output=True, timeout=300,
            )
        except (subprocess.SubprocessError, OSError) as exc:
            pytest.skip(f"cannot npm install @modelcontextprotocol/server-everything: {exc}")
    if not entry.exists():
        pytest.skip("server-everything installed without dist/index.js")
    return [node, str(entry), "stdio"]


SERVERS = {"time": _time_server, "everything": _everything_server}
TIME_CALL = ("convert_time", {"source_timezone": "UTC", "time": "12:00",
                              "target_timezone": "Europe/Paris"})
EVERYTHING_CALL = ("echo", {"message": "the just very long message, 12345678901234567890"})


def _session(argv: list[str], env: dict, server: str) -> dict:
    """One raw session: every response line, byte for byte."""
    peer = RawPeer(argv, env=env)
    try:
        lines = {"initialize": peer.initialize(), "tools/list": peer.request("tools/list")}
        name, args = TIME_CALL if server == "time" else EVERYTHING_CALL
        lines["tools/call"] = peer.request("tools/call", {"name": name, "arguments": args})
        if server == "everything":
            for method in ("prompts/list", "resources/list", "resources/templates/list"):
                lines[method] = peer.request(method)
        lines["ping"] = peer.request("ping")
    finally:
        rc = peer.close()
    lines["rc"] = rc
    lines["stderr"] = bytes(peer.stderr)
    return lines


@pytest.fixture(scope="module", params=sorted(SERVERS))
def sessions(request, tmp_path_factory, rank_cache_dir):
    server = request.param
    argv = SERVERS[server]()
    tmp = tmp_path_factory.mktemp(f"mcp-{server}")
    env = _env(tmp, rank_cache_dir)
    direct = _session(argv, env, server)
    proxied = _session([console_script(), "mcp", "--", *argv], env, server)
    return server, argv, env, direct, proxied


def _count(data: bytes) -> int:
    from caveman_engine.tokens import make_counter

    return make_counter(None).count(data)


def test_tool_list_smaller_same_names_and_parameters(sessions):
    _, _, _, direct, proxied = sessions
    d = json.loads(direct["tools/list"])["result"]["tools"]
    p = json.loads(proxied["tools/list"])["result"]["tools"]
    assert _count(proxied["tools/list"]) < _count(direct["tools/list"])
    assert [t["name"] for t in p] == [t["name"] for t in d]
    for dt, pt in zip(d, p):
        assert sorted(pt["inputSchema"].get("properties", {})) == sorted(
            dt["inputSchema"].get("properties", {}))
        assert pt["inputSchema"].get("required") == dt["inputSchema"].get("required")


def test_other_lines_byte_identical(sessions):
    _, _, _, direct, proxied = sessions
    for key in ("initialize", "tools/call", "ping"):
        assert proxied[key] == direct[key], key
    assert proxied["rc"] == direct["rc"] == 0
    assert b"Traceback" not in proxied["stderr"]


def test_meta_handle_retrieves_original_list(sessions):
    server, _, env, direct, proxied = sessions
    methods = ["tools/list"] + (["prompts/list", "resources/templates/list"]
                                if server == "everything" else [])
    for method in methods:
        result = json.loads(proxied[method])["result"]
        handle = result["_meta"][META_HANDLE]
        got = subprocess.run([console_script(), "retrieve", handle], env=env,
                             capture_output=True, timeout=60)
        assert got.returncode == 0, got.stderr
        key = {"tools/list": "tools", "prompts/list": "prompts",
               "resources/templates/list": "resourceTemplates"}[method]
        # exactly the bytes of the list in the server's own response
        assert b'"' + key.encode() + b'":' + got.stdout in direct[method]
        assert json.loads(got.stdout) == json.loads(direct[method])["result"][key]


def test_everything_prompts_shrunk(sessions):
    server, _, _, direct, proxied = sessions
    if server != "everything":
        pytest.skip("prompts only on server-everything")
    d = json.loads(direct["prompts/list"])["result"]["prompts"]
    p = json.loads(proxied["prompts/list"])["result"]["prompts"]
    assert [x["name"] for x in p] == [x["name"] for x in d]
    for dx, px in zip(d, p):
        assert px.get("arguments") == dx.get("arguments")
        assert px.get("description") == shrink(dx["description"])
    # resources/list has nothing to shrink here: forwarded byte for byte
    assert proxied["resources/list"] == direct["resources/list"]


def test_sdk_client_with_retrieve_tool(sessions):
    import anyio
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    server, argv, env, direct, _ = sessions
    name, args = TIME_CALL if server == "time" else EVERYTHING_CALL
    params = StdioServerParameters(
        command=console_script(), args=["mcp", "--retrieve-tool", "--", *argv], env=env
    )

    async def drive():
        with anyio.fail_after(90):
            async with stdio_client(params, errlog=open(os.devnull, "w")) as (r, w):
                async with ClientSession(r, w) as s:
                    await s.initialize()
                    listed = await s.list_tools()
                    handle = listed.meta[META_HANDLE]
                    names = [t.name for t in listed.tools]
                    call = await s.call_tool(name, args)
                    got = await s.call_tool("caveman_retrieve", {"handle": handle})
                    narrowed = await s.call_tool("caveman_retrieve",
                                                 {"handle": handle, "query": "timezone echo"})
                    missing = await s.call_tool("caveman_retrieve", {"handle": "ccr_" + "0" * 32})
                    return names, call, got, narrowed, missing

    names, call, got, narrowed, missing = anyio.run(drive)
    direct_tools = json.loads(direct["tools/list"])["result"]["tools"]
    assert names == [t["name"] for t in direct_tools] + ["caveman_retrieve"]
    assert not call.is_error
    assert not got.is_error
    original = got.content[0].text.encode()
    assert b'"tools":' + original in direct["tools/list"]
    assert not narrowed.is_error
    assert 0 < len(narrowed.content[0].text) <= len(got.content[0].text)
    assert missing.is_error and "not found" in missing.content[0].text
