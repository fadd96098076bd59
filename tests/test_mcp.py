"""The MCP stdio middleware: list rewriting (in process) and real servers end to end.

Real servers: ``mcp-server-time`` (PyPI, test extra) and ``@modelcontextprotocol/server-everything``
(npm, pinned in tests/npm and installed there by ``npm ci``), driven byte-exactly by a raw
JSON-RPC peer and by the official ``mcp`` Python SDK client.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from caveman_engine.engine import Engine
from caveman_engine.mcp.rewrite import (
    LIST_KEYS, META_HANDLE, RETRIEVE_TOOL, Rewriter, _last, object_members, prose_edits, splice,
)
from caveman_engine.store import NotFound, handle_for, open_store
from caveman_engine.compressors.prose import shrink
from tests.conftest import CORPUS, console_script
from tests.fixtures.mcp.npm import npm_bin
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


def rewritten(engine, rw: Rewriter, line: bytes, method: str) -> bytes:
    """``rewrite``, which must rewrite, into a response with fewer tokens than ``line``."""
    out = rewrite(rw, line, method)
    assert out is not None and out != line
    assert engine.count(out) < engine.count(line)
    return out


def items(template: bytes, n: int, sep: bytes = b",") -> bytes:
    """``n`` copies of an item's JSON text, ``{i}`` in each replaced by the copy's number."""
    return sep.join(template.replace(b"{i}", b"%d" % i) for i in range(n))


def ungated(engine, line: bytes, method: str) -> bytes | None:
    """The response the middleware (default options) would build from ``line`` without the
    whole-response token gate: the list replaced by its shrunk form (toolschema for tools, else
    the prose rules on item descriptions, kept only when the list itself has fewer tokens) and
    the handle of the original list added to ``result._meta``. None: the list does not shrink."""
    text = line.decode("utf-8")
    r_start, _ = _last(object_members(text, text.index("{")), "result")
    members = object_members(text, r_start)
    l_start, l_end = _last(members, LIST_KEYS[method])
    original = text[l_start:l_end]
    if method == "tools/list":
        res = engine.compress(original.encode(), "toolschema")
        if res.recovery_handle is None:
            return None
        assert res.recovery_handle == handle_for(original.encode())
        new = res.output.decode()
    else:
        edits = prose_edits(original, 0, len(original), frozenset({"description"}), False, shrink)
        new = splice(original, edits)
        if engine.count(new.encode()) >= engine.count(original.encode()):
            return None
    member = '"' + META_HANDLE + '":' + json.dumps(handle_for(original.encode()))
    meta = _last(members, "_meta")
    if meta is None:
        edit = (r_start + 1, r_start + 1, '"_meta":{' + member + "},")
    else:
        assert text[meta[0]] == "{" and META_HANDLE not in text[meta[0]:meta[1]]
        empty = not object_members(text, meta[0])
        edit = (meta[0] + 1, meta[0] + 1, member + ("" if empty else ","))
    return splice(text, [edit, (l_start, l_end, new)]).encode("utf-8")


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


def _times(line: bytes, n: int) -> bytes:
    """The worked example with its tool list repeated ``n`` times (names made distinct)."""
    head, _, rest = line.partition(b'"tools":[')
    body = rest[: -len(b"]}}")]
    copies = [body.replace(b'"get_weather"', b'"get_weather_%d"' % i).replace(
        b'"noop"', b'"noop_%d"' % i) for i in range(n)]
    return head + b'"tools":[' + b",".join(copies) + b"]}}"


def test_worked_example_is_smaller_than_its_handle(engine):
    """shrink_spec §3.3's list saves fewer tokens than the _meta handle costs: the token gate
    counts the whole response, so it goes out unchanged rather than larger."""
    assert rewrite(rewriter(engine, tool_type="prose"), WORKED_EXAMPLE, "tools/list") is None
    rw = rewriter(engine, tool_type="prose", retrieve_tool=True)
    out = rewrite(rw, WORKED_EXAMPLE, "tools/list")
    tool = json.dumps(RETRIEVE_TOOL, ensure_ascii=False, separators=(",", ":")).encode()
    assert out == WORKED_EXAMPLE[:-3] + b"," + tool + b"]}}"


# --------------------------------------------------------------------------- the token gate
# The whole rewritten response, _meta handle included, must have fewer tokens than the server's
# (with --retrieve-tool: than the server's plus the added tool); otherwise it goes out as it came.

SMALL_PROMPTS = (b'{"jsonrpc":"2.0","id":__ID__,"result":{"prompts":[{"name":"p","description":'
                 b'"The prompt does the thing"}]}}')
SMALL_TOOLS = (b'{"jsonrpc":"2.0","id":__ID__,"result":{"tools":[{"name":"t","description":'
               b'"Get the weather","inputSchema":{"type":"object","title":"T","$schema":'
               b'"http://json-schema.org/draft-07/schema#","properties":{}}}]}}')
RESOURCES = (b'{"jsonrpc":"2.0","id":__ID__,"result":{"resources":['
             + items(b'{"uri":"file:///r{i}","name":"r{i}","description":"The file at the path'
                     b' that the user gave"}', 20)
             + b"]}}")
TOOL_BYTES = json.dumps(RETRIEVE_TOOL, ensure_ascii=False, separators=(",", ":")).encode()


def _id(line: bytes, rid: int = 1) -> bytes:
    return line.replace(b"__ID__", b"%d" % rid)


def _member(would: bytes) -> bytes:
    """The _meta member ``ungated`` added to a result that had no _meta."""
    handle = json.loads(would)["result"]["_meta"][META_HANDLE]
    return b'"_meta":{"caveman/recovery_handle":"' + handle.encode() + b'"},'


@pytest.mark.parametrize("line,method", [(SMALL_PROMPTS, "prompts/list"),
                                         (SMALL_TOOLS, "tools/list")])
def test_small_list_larger_with_its_handle_is_forwarded(engine, line, method):
    line = _id(line)
    would = ungated(engine, line, method)
    # the list itself shrinks, but by less than the handle costs: rewritten it would be larger
    assert would is not None
    assert engine.count(would.replace(_member(would), b"")) < engine.count(line)
    assert engine.count(would) > engine.count(line)
    assert rewrite(rewriter(engine), line, method) is None


def test_small_list_with_retrieve_tool_gets_only_the_tool(engine):
    line = _id(SMALL_TOOLS)
    out = rewrite(rewriter(engine, retrieve_tool=True), line, "tools/list")
    assert out == line[: -len(b"]}}")] + b"," + TOOL_BYTES + b"]}}"
    assert b'"_meta"' not in out
    # a list that pays for its handle gets both; the gate counts the tool on both sides
    big = _id(b'{"jsonrpc":"2.0","id":__ID__,"result":{"tools":['
              + items(b'{"name":"t{i}","description":"Get the weather","inputSchema":{'
                      b'"type":"object","title":"T","$schema":'
                      b'"http://json-schema.org/draft-07/schema#","properties":{}}}', 3)
              + b"]}}")
    out = rewrite(rewriter(engine, retrieve_tool=True), big, "tools/list")
    plain = big[: -len(b"]}}")] + b"," + TOOL_BYTES + b"]}}"
    would = ungated(engine, big, "tools/list")
    assert out == would[: -len(b"]}}")] + b"," + TOOL_BYTES + b"]}}"
    assert engine.count(out) < engine.count(plain)


def test_gate_decides_at_every_size(engine):
    """The rewrite goes out exactly when it has fewer tokens than the server's response; the
    smallest list that pays is rewritten, the one just smaller is not."""
    rw = rewriter(engine)

    def line(n: int) -> bytes:
        return (b'{"jsonrpc":"2.0","id":1,"result":{"prompts":['
                + items(b'{"name":"p{i}","description":"The prompt does the thing"}', n)
                + b"]}}")

    first = None
    for n in range(1, 80):
        out, would = rewrite(rw, line(n), "prompts/list"), ungated(engine, line(n), "prompts/list")
        assert would is not None  # every list shrinks...
        if engine.count(would) < engine.count(line(n)):  # ...but only these pay for the handle
            assert out == would
            first = n if first is None else first
        else:
            assert out is None
        if first is not None and n > first + 3:
            break
    assert first is not None and first > 1
    just = line(first)
    out = rewrite(rw, just, "prompts/list")
    assert engine.count(out) < engine.count(just)
    handle = json.loads(out)["result"]["_meta"][META_HANDLE]
    assert engine.retrieve(handle) == just[just.index(b"[") : -2]
    assert rewrite(rw, line(first - 1), "prompts/list") is None


def test_gate_through_console_script(engine, tmp_path, rank_cache_dir):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"prompts/list": SMALL_PROMPTS.decode() + "\n",
                                  "tools/list": SMALL_TOOLS.decode() + "\n",
                                  "resources/list": RESOURCES.decode() + "\n"}))
    server = [sys.executable, str(Path(__file__).parent / "fixtures" / "mcp" / "scripted.py"),
              str(script)]
    requests = b"".join(b'{"jsonrpc":"2.0","id":%d,"method":"%s"}\n' % (i, m)
                        for i, m in enumerate([b"prompts/list", b"tools/list",
                                               b"resources/list"], 1))
    env = _env(tmp_path, rank_cache_dir)
    env["CAVEMAN_CCR_DB"] = str(tmp_path / "proxy.db")
    resources = rewritten(engine, rewriter(engine), _id(RESOURCES, 3), "resources/list")
    for options, tools in (((), _id(SMALL_TOOLS, 2)),
                           (("--retrieve-tool",),
                            _id(SMALL_TOOLS, 2)[: -len(b"]}}")] + b"," + TOOL_BYTES + b"]}}")):
        p = subprocess.run([console_script(), "mcp", *options, "--", *server], input=requests,
                           capture_output=True, env=env, timeout=60)
        assert p.returncode == 0 and b"Traceback" not in p.stderr, p.stderr
        assert p.stdout.split(b"\n") == [_id(SMALL_PROMPTS, 1), tools, resources, b""]
    handle = json.loads(resources)["result"]["_meta"][META_HANDLE]
    got = subprocess.run([console_script(), "retrieve", handle], env=env, capture_output=True,
                         timeout=60)
    assert got.stdout == RESOURCES[RESOURCES.index(b"[") : -2]


def test_worked_example_prose_type(engine):
    # shrink_spec §3.3, tools through --type prose: item descriptions and every description
    # string inside inputSchema shrunk; titles untouched; nothing else changes. Repeated five
    # times, so that the savings pay for the _meta handle.
    line = _times(WORKED_EXAMPLE, 5)
    out = rewrite(rewriter(engine, tool_type="prose"), line, "tools/list")
    handle = json.loads(out)["result"]["_meta"][META_HANDLE]
    shrunk = _times(
        b'{"jsonrpc":"2.0","id":1,"result":{"tools":['
        b'{"name":"get_weather","description":"Get current weather for given location.",'
        b'"title":"The weather tool","inputSchema":{"type":"object","properties":{'
        b'"city":{"type":"string","description":"Name of city","title":"The city"},'
        b'"description":{"type":"string","description":"free-form description"}},'
        b'"required":["city"]}},'
        b'{"name":"noop","description":"Noop"},'
        b'{"description":"Nameless tool"}]}}', 5)
    assert out == shrunk.replace(
        b'"result":{', b'"result":{"_meta":{"caveman/recovery_handle":"' + handle.encode() + b'"},')
    assert len(out) < len(line) and engine.count(out) < engine.count(line)
    original = line[line.index(b"[") : -2]
    assert engine.retrieve(handle) == original


# A prompt whose description loses four tokens to the prose rules; twelve of them pay for the
# _meta handle (about 30 tokens), one does not.
PROMPT = (b'{"name":"p{i}","description":"The prompt just really does a thing for the user",'
          b'"arguments":[{"name":"a","description":"The argument"}]}')
PROMPT_SHRUNK = "Prompt does thing for user"


def prompts_line(n: int) -> bytes:
    return b'{"jsonrpc":"2.0","id":"p","result":{"prompts":[' + items(PROMPT, n) + b"]}}"


def test_prompts_and_templates(engine):
    rw = rewriter(engine)
    out = json.loads(rewritten(engine, rw, prompts_line(12), "prompts/list"))
    assert out["result"]["prompts"] == [
        {"name": f"p{i}", "description": PROMPT_SHRUNK,
         "arguments": [{"name": "a", "description": "The argument"}]}
        for i in range(12)
    ]
    templates = (
        b'{"jsonrpc":"2.0","id":2,"result":{"resourceTemplates":['
        + items(b'{"name":"f{i}","uriTemplate":"file:///{path}","description":"The file at the'
                b' path that the user gave"}', 20)
        + b"]}}"
    )
    out = json.loads(rewritten(engine, rw, templates, "resources/templates/list"))
    assert [t["description"] for t in out["result"]["resourceTemplates"]] == [
        "File at path that user gave"] * 20
    assert [t["uriTemplate"] for t in out["result"]["resourceTemplates"]] == ["file:///{path}"] * 20


def test_everything_else_byte_for_byte(engine):
    # Odd spacing, key order, big and float literals, escapes, CRLF: all kept; only the
    # description strings and the inserted _meta member differ.
    def line(description: bytes, n: int = 8) -> bytes:
        resource = (b' {"uri":"x:\\/\\/a{i}", "description" : "' + description
                    + b'", "size": 1e3} ')
        return (
            b'{ "id" : 7, "jsonrpc":"2.0",  "result" : {"b":1, "2": 0, '
            b'"n": 12345678901234567890123, "f": 1.0, "resources" : ['
            + items(resource, n, b",")
            + b', null, "odd", 5, [ {"description":"The x thing"} ] ] , "nextCursor":"c"} }\r'
        )

    original = line(b"The \\u00e9 file of the user, which is really just the file that the user"
                    b" wants")
    out = rewritten(engine, rewriter(engine), original, "resources/list")
    handle = json.loads(out)["result"]["_meta"][META_HANDLE]
    assert out == line(b"The \xc3\xa9 file of user, which is file that user wants").replace(
        b'"result" : {', b'"result" : {"_meta":{"caveman/recovery_handle":"' + handle.encode()
        + b'"},')
    assert out.count(b'"result" : {"_meta"') == 1
    start = original.index(b"[ {")
    assert engine.retrieve(handle) == original[start : original.index(b"] ,") + 1]


def test_existing_meta(engine):
    rw = rewriter(engine)
    base = b'"prompts":[' + items(PROMPT, 12) + b"]"
    out = rewritten(engine, rw, b'{"id":1,"result":{"_meta":{"k":[1]},' + base + b"}}",
                    "prompts/list")
    meta = json.loads(out)["result"]["_meta"]
    assert list(meta) == [META_HANDLE, "k"] and meta["k"] == [1]
    out = rewritten(engine, rw, b'{"id":1,"result":{"_meta":{},' + base + b"}}", "prompts/list")
    assert list(json.loads(out)["result"]["_meta"]) == [META_HANDLE]
    out = rewritten(
        engine, rw,
        b'{"id":1,"result":{"_meta":{"caveman/recovery_handle":"old"},' + base + b"}}",
        "prompts/list",
    )
    assert out.count(b"caveman/recovery_handle") == 1
    assert json.loads(out)["result"]["_meta"][META_HANDLE].startswith("ccr_")
    # a _meta that is not an object: the response is left alone
    assert rewrite(rw, b'{"id":1,"result":{"_meta":3,' + base + b"}}", "prompts/list") is None


def test_not_rewritten(engine):
    rw = rewriter(engine)
    # nothing to shrink
    assert rewrite(rw, b'{"id":1,"result":{"prompts":[' + items(
        b'{"name":"p{i}","description":"Noop"}', 40) + b"]}}", "prompts/list") is None
    # a list key that is not an array, or the wrong method for the key
    assert rewrite(rw, b'{"id":1,"result":{"prompts":"The thing"}}', "prompts/list") is None
    assert rewrite(rw, prompts_line(12), "tools/list") is None
    # no store: nothing lossy is emitted (with one, this list is rewritten)
    assert Rewriter(lambda: None).rewrite(
        prompts_line(12), "prompts/list", json.loads(prompts_line(12))) is None
    rewritten(engine, rw, prompts_line(12), "prompts/list")


def test_fields_option(engine):
    big = "The big one that is really just a very big one"
    line = (b'{"id":1,"result":{"prompts":['
            + items(b'{"name":"p{i}","title":"%s","description":"%s"}' % (big.encode(),
                                                                         big.encode()), 12)
            + b"]}}")
    out = json.loads(rewritten(engine, rewriter(engine, fields=("title",)), line, "prompts/list"))
    assert out["result"]["prompts"] == [
        {"name": f"p{i}", "title": "Big one that is big one", "description": big}
        for i in range(12)
    ]
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
    description = "The tool that just really does the thing for the user"
    tool = (b'{"name":"t{i}","description":"%s","inputSchema":{"type":"object","title":"T{i}",'
            b'"$schema":"http://json-schema.org/draft-07/schema#","properties":{}}}'
            % description.encode())
    line = b'{"id":1,"result":{"tools":[null,' + items(tool, 10) + b",7]}}"
    out = rewritten(engine, rewriter(engine), line, "tools/list")
    # toolschema drops the schema title and $schema and leaves the odd items where they are
    assert json.loads(out)["result"]["tools"] == [
        None,
        *({"description": description, "inputSchema": {"properties": {}, "type": "object"},
           "name": f"t{i}"} for i in range(10)),
        7,
    ]
    tools = json.loads(rewritten(engine, rewriter(engine, tool_type="prose"), line,
                                 "tools/list"))["result"]["tools"]
    assert tools[0] is None and tools[-1] == 7
    assert [t["description"] for t in tools[1:-1]] == ["Tool that does thing for user"] * 10
    assert [t["inputSchema"]["title"] for t in tools[1:-1]] == [f"T{i}" for i in range(10)]


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

    line = _times(WORKED_EXAMPLE, 5)
    rw = rewriter(engine, tool_type="prose")
    first = rewritten(engine, rw, line, "tools/list")
    assert rewrite(rw, line, "tools/list") == first
    handle = json.loads(first)["result"]["_meta"][META_HANDLE]
    # the original disappears from the store behind the middleware's back: stored again
    with sqlite3.connect(str(tmp_path / "ccr.db")) as db:
        assert db.execute("DELETE FROM recoveries WHERE handle = ?", (handle,)).rowcount == 1
    with pytest.raises(NotFound):
        engine.retrieve(handle)
    assert rewrite(rw, line, "tools/list") == first
    assert engine.retrieve(handle) == line[line.index(b"[") : -2]


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
    # tests/npm's pinned install; never an npm install at test time (a skip offline, before)
    return [npm_bin("mcp-server-everything"), "stdio"]


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


def test_meta_handle_retrieves_original_list(sessions, engine):
    """Each list response is rewritten exactly when the rewrite, handle included, has fewer
    tokens than what the server sent; then its handle retrieves the server's list bytes."""
    server, _, env, direct, proxied = sessions
    methods = ["tools/list"] + (["prompts/list", "resources/list", "resources/templates/list"]
                                if server == "everything" else [])
    for method in methods:
        would = ungated(engine, direct[method], method)
        pays = would is not None and engine.count(would) < engine.count(direct[method])
        if server == "everything" and method == "tools/list":
            assert pays  # so that this test cannot pass on pass-through alone
        if not pays:
            assert proxied[method] == direct[method], method
            continue
        assert proxied[method] == would, method
        assert engine.count(proxied[method]) < engine.count(direct[method])
        result = json.loads(proxied[method])["result"]
        handle = result["_meta"][META_HANDLE]
        got = subprocess.run([console_script(), "retrieve", handle], env=env,
                             capture_output=True, timeout=60)
        assert got.returncode == 0, got.stderr
        key = LIST_KEYS[method]
        # exactly the bytes of the list in the server's own response
        assert b'"' + key.encode() + b'":' + got.stdout in direct[method]
        assert json.loads(got.stdout) == json.loads(direct[method])["result"][key]


def test_everything_prompts_shrunk(sessions, engine):
    server, _, _, direct, proxied = sessions
    if server != "everything":
        pytest.skip("prompts only on server-everything")
    would = ungated(engine, direct["prompts/list"], "prompts/list")
    assert would is not None
    d = json.loads(direct["prompts/list"])["result"]["prompts"]
    w = json.loads(would)["result"]["prompts"]
    assert [x["name"] for x in w] == [x["name"] for x in d]
    for dx, wx in zip(d, w):
        assert wx.get("arguments") == dx.get("arguments")
        assert wx.get("description") == shrink(dx["description"])
    if engine.count(would) < engine.count(direct["prompts/list"]):
        assert proxied["prompts/list"] == would
    else:
        # the descriptions shrink by less than the _meta handle costs: left as the server sent
        # them
        stripped = engine.count(would.replace(_member(would), b""))
        saved = engine.count(direct["prompts/list"]) - stripped
        assert 0 < saved <= engine.count(would) - stripped
        assert proxied["prompts/list"] == direct["prompts/list"]


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
