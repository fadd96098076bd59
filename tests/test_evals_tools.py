"""``evals tools``: BFCL loading and conversion, ground-truth validity, the BM25 and LLM graders,
the JSONL user format, and end-to-end runs through the console script."""

from __future__ import annotations

import http.server
import json
import math
import threading
from pathlib import Path

import pytest

from caveman_engine.evals import bfcl, lexical, tools
from caveman_engine.evals.llm import LLMError, LLMGrader, chat_tools

FIXTURES = Path(__file__).parent / "fixtures" / "bfcl"

jsonschema = pytest.importorskip("jsonschema")


def _mcp(name, description, props=None, required=None):
    schema = {"type": "object", "properties": props or {}}
    if required:
        schema["required"] = required
    return {"name": name, "description": description, "inputSchema": schema}


FILES = [
    _mcp("read_file", "Read a file from disk.",
         {"path": {"type": "string", "description": "Path of the file to read."}}, ["path"]),
    _mcp("write_file", "Write text to a file on disk.",
         {"path": {"type": "string", "description": "Where to write."},
          "content": {"type": "string", "description": "Text to write."}}, ["path", "content"]),
    _mcp("search_web", "Search the web for pages.",
         {"query": {"type": "string", "description": "Search terms."}}, ["query"]),
]


def _case(query, catalog, expected, calls=()):
    return bfcl.Case("c", "d", query, [{"role": "user", "content": query}], catalog,
                     list(expected), list(calls))


def _by_id() -> dict[str, bfcl.Case]:
    return {c.id: c for cases in bfcl.load_bfcl_dir(FIXTURES) for c in cases}


# --------------------------------------------------------------------------- lexical grader


def test_words_split_case_and_drop_stop_words():
    assert lexical.words("Please getUserID for the user_name of HTTPServer.v2") == \
        ["get", "user", "id", "user", "name", "http", "server", "v", "2"]


def test_bm25_ranks_hand_made_catalog():
    ranked = lexical.rank("read the file at this path", FILES)
    assert [n for n, _ in ranked] == ["read_file", "write_file", "search_web"]
    assert ranked[0][1] > ranked[1][1] > ranked[2][1] == 0.0
    assert [n for n, _ in lexical.rank("search the web for cats", FILES)] == \
        ["search_web", "read_file", "write_file"]  # 0-score tools keep catalog order
    assert [n for n, _ in lexical.rank("write some text", FILES)][0] == "write_file"


def test_bm25_ties_keep_catalog_order_and_camel_case_matches():
    assert [n for n, _ in lexical.rank("zebra", FILES)] == ["read_file", "write_file", "search_web"]
    cat = [{"type": "function", "function": {"name": n, "description": d,
                                             "parameters": {"type": "object", "properties": {}}}}
           for n, d in [("get_stock_price", "Latest price of a stock."),
                        ("getWeatherForecast", "Forecast for a city."),
                        ("weather_history", "Past observations.")]]
    assert [n for n, _ in lexical.rank("weather forecast for tomorrow", cat)] == \
        ["getWeatherForecast", "weather_history", "get_stock_price"]


def test_bm25_score_formula():
    # N=2, df(a)=1: idf = ln(1 + 1.5/1.5) = ln 2; doc 0 has length 2, avgdl 1.5
    scores = lexical.bm25(["a"], [["a", "b"], ["b"]])
    norm = lexical.K1 * (1 - lexical.B + lexical.B * 2 / 1.5)
    assert scores[0] == pytest.approx(math.log(2) * (lexical.K1 + 1) / (1 + norm))
    assert scores[1] == 0.0


def test_document_length_counts_only_indexed_words():
    # Standard BM25 after an analyzer: a document's length is its indexed terms. Stop words,
    # punctuation and the JSON around a description change no score, so a rewrite that only
    # drops articles or a full stop cannot move a near-tie.
    terse = [_mcp("read_file", "Read file from disk", {"path": {"type": "string", "description": "Path of file"}}),
             _mcp("write_file", "Write text to file", {"path": {"type": "string", "description": "Where to write"}})]
    wordy = [_mcp("read_file", "Please read the file that is on the disk, if you can...",
                  {"path": {"type": "string", "description": "The path of the file, which it is."}}),
             _mcp("write_file", "Write the text to a file.",
                  {"path": {"type": "string", "description": "Where to write."}})]
    for query in ("read the file", "write text", "disk path"):
        assert lexical.rank(query, wordy) == lexical.rank(query, terse)
    # ...while one more indexed word does change the lengths (and so the scores).
    longer = [terse[0], _mcp("write_file", "Write text to file now", terse[1]["inputSchema"]["properties"])]
    assert lexical.rank("read the file", longer) != lexical.rank("read the file", terse)


def test_parameter_descriptions_count():
    cat = [_mcp("alpha", "Does things.", {"q": {"type": "string", "description": "A colour name."}}),
           _mcp("beta", "Does things.", {"q": {"type": "string", "description": "A number."}})]
    assert lexical.LexicalGrader().choose(_case("colour", cat, ["alpha"]), cat) == "alpha"
    assert lexical.rank("number", cat)[0][0] == "beta"


# --------------------------------------------------------------------------- BFCL conversion


def test_bfcl_conversion_like_the_openai_handler():
    cases = _by_id()
    fn = cases["simple_python_38"].catalog[0]["function"]
    props = fn["parameters"]["properties"]
    assert fn["parameters"]["type"] == "object"
    assert props["charge1"] == {"type": "number",
                                "description": "The quantity of charge on the first body. "
                                               "This is a float type value.",
                                "format": "float"}
    # array items: type mapped, no float note (as BFCL)
    interval = cases["simple_python_13"].catalog[0]["function"]["parameters"]["properties"]["interval"]
    assert interval["type"] == "array" and interval["items"] == {"type": "number"}
    # dotted names → underscores; tuple → array
    multi = cases["multiple_5"].catalog
    assert [t["type"] for t in multi] == ["function"] * 3
    assert [t["function"]["name"] for t in multi] == [
        "weather_get_by_city_date", "weather_get_forecast_by_coordinates",
        "weather_get_by_coordinates_date"]
    assert multi[2]["function"]["parameters"]["properties"]["coordinates"]["type"] == "array"
    # nested dict → object, its properties mapped too
    drink = cases["live_parallel_multiple_0-0-0"].catalog[1]["function"]
    prefs = drink["parameters"]["properties"]["new_preferences"]
    assert prefs["type"] == "object" and prefs["properties"]["size"]["type"] == "string"


def test_bfcl_type_mapping_rules():
    fn = {"name": "a.b.c", "description": "x", "parameters": {"type": "dict", "properties": {
        "any": {"type": "any", "description": "d"},
        "missing": {"description": "d"},
        "odd": {"type": "Set", "description": "d"},
        "lst": {"type": "list", "items": {"type": "tuple", "items": {"type": "long"}}},
        "objs": {"type": "array", "items": {"type": "dict", "properties": {
            "f": {"type": "float", "description": "v"}}}},
    }}}
    tool = bfcl.to_openai_tool(fn)
    p = tool["function"]["parameters"]["properties"]
    assert tool["function"]["name"] == "a_b_c"
    assert p["any"]["type"] == "string" and p["missing"]["type"] == "string"
    assert p["odd"]["type"] == "string"
    assert p["lst"]["items"] == {"type": "array", "items": {"type": "integer"}}
    assert p["objs"]["items"]["properties"]["f"] == {
        "type": "number", "description": "v This is a float type value.", "format": "float"}
    assert fn["parameters"]["type"] == "dict"  # the input is not modified


def test_bfcl_ground_truth_calls():
    cases = _by_id()
    assert cases["simple_python_0"].calls == [
        ("calculate_triangle_area", {"base": 10, "height": 5, "unit": "units"})]
    assert cases["simple_python_38"].calls == [("calculate_electrostatic_potential", {
        "charge1": 1e-09, "charge2": 2e-09, "distance": 0.05, "constant": 8990000000.0})]
    assert cases["parallel_0"].expected == ["spotify_play"]
    assert len(cases["parallel_0"].calls) == 2
    lpm = cases["live_parallel_multiple_0-0-0"]
    assert lpm.expected == ["ChaFod", "ChaDri_change_drink"]
    assert lpm.calls == [
        ("ChaFod", {"foodItem": "Caesar salad", "removeIngredients": "anchovies"}),
        ("ChaDri_change_drink", {"drink_id": "123", "new_preferences": {
            "size": "large", "temperature": "hot", "sweetness_level": "regular",
            "milk_type": "almond"}}),
    ]
    assert lpm.query.startswith("I'd like to change my food order")


def test_category_names_do_not_match_longer_ones(tmp_path):
    for name in ("BFCL_v4_multiple.json", "BFCL_v4_parallel_multiple.json",
                 "BFCL_v4_live_multiple.json", "BFCL_v3_multiple.json"):
        (tmp_path / name).write_text("")
    assert bfcl.category_file(tmp_path, "multiple").name == "BFCL_v4_multiple.json"
    assert bfcl.category_file(tmp_path, "live_simple") is None


# --------------------------------------------------------------------------- validity


def test_call_validity():
    pick = tools._validator_class()
    schemas = tools._schemas_by_name(FILES)
    assert tools.call_valid(schemas, "read_file", {"path": "/x"}, pick)
    assert not tools.call_valid(schemas, "read_file", {}, pick)
    assert not tools.call_valid(schemas, "read_file", {"path": 3}, pick)
    assert not tools.call_valid(schemas, "nope", {"path": "/x"}, pick)


class _Fixed:
    name = "fixed"

    def __init__(self, answers):
        self.answers = answers

    def choose(self, case, catalog):
        names = [t["name"] for t in catalog]
        return self.answers[len(names) > 2]


def test_runner_reports_disagreement_and_flips(monkeypatch):
    """A 'rewrite' that drops a required property changes validity and the top-1."""
    case = _case("read the file", FILES, ["read_file"], [("read_file", {"path": "/x", "n": 1})])
    loose = json.loads(json.dumps(FILES))
    loose[0]["inputSchema"]["additionalProperties"] = False
    runner = tools.Runner(["toolschema-safe"], _Fixed({True: "read_file", False: "write_file"}))
    monkeypatch.setattr(runner, "rewrite", lambda t, m: json.dumps(loose[:2]).encode())
    st = runner.run_dataset("d", [case])
    ts = st.per_type["toolschema-safe"]
    assert (st.valid, ts.valid, ts.disagree) == (1, 0, ["c:read_file"])
    assert (st.top1, ts.top1, ts.flips, ts.lost, ts.gained) == (1, 0, 1, 1, 0)


# --------------------------------------------------------------------------- user JSONL


def test_user_jsonl(tmp_path):
    (tmp_path / "cat.json").write_text(json.dumps({"tools": FILES}))
    rows = [
        {"catalog": "cat.json", "query": "read the file", "expected_tool": "read_file",
         "arguments": {"path": "/etc/hosts"}},
        {"catalog": FILES, "query": "look this up on the web",
         "expected_tool": ["search_web", "read_file"], "id": "web"},
    ]
    p = tmp_path / "mine.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (cases,) = bfcl.resolve(str(p))
    assert [c.id for c in cases] == ["1", "web"]
    assert cases[0].catalog == {"tools": FILES} and cases[0].calls == [("read_file", {"path": "/etc/hosts"})]
    assert cases[1].expected == ["search_web", "read_file"] and cases[1].calls == []
    assert cases[0].dataset == "mine"
    assert len(bfcl.resolve(str(p), limit=1)[0]) == 1


@pytest.mark.parametrize("row, message", [
    ({"query": "q", "expected_tool": "a"}, "missing 'catalog'"),
    ({"catalog": [], "query": "q", "expected_tool": "a"}, "no tools"),
    ({"catalog": "absent.json", "query": "q", "expected_tool": "a"}, "cannot read catalog"),
    ({"catalog": FILES, "query": "q", "expected_tool": 3}, "expected_tool"),
    ({"catalog": FILES, "query": "q", "expected_tool": "a", "arguments": []}, "arguments"),
])
def test_user_jsonl_errors(tmp_path, row, message):
    p = tmp_path / "bad.jsonl"
    p.write_text(json.dumps(row) + "\n")
    with pytest.raises(bfcl.DatasetError, match=message):
        bfcl.resolve(str(p))


# --------------------------------------------------------------------------- LLM grader


class _FakeChat(http.server.BaseHTTPRequestHandler):
    requests: list = []
    reply_tool = "write_file"
    status = 200

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, "auth": self.headers.get("Authorization"),
                                    "body": body})
        if type(self).status != 200:
            self.send_response(type(self).status)
            self.end_headers()
            self.wfile.write(b'{"error": "no"}')
            return
        msg = {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": type(self).reply_tool, "arguments": "{}"}}]}
        data = json.dumps({"choices": [{"index": 0, "message": msg}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_endpoint():
    _FakeChat.requests = []
    _FakeChat.status = 200
    server = http.server.HTTPServer(("127.0.0.1", 0), _FakeChat)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_llm_grader_against_fake_endpoint(fake_endpoint):
    grader = LLMGrader("fake-model", base_url=fake_endpoint, api_key="sk-test", timeout=10)
    case = _case("write hello to a.txt", FILES, ["write_file"])
    assert grader.choose(case, FILES) == "write_file"
    (req,) = _FakeChat.requests
    assert req["path"] == "/v1/chat/completions" and req["auth"] == "Bearer sk-test"
    body = req["body"]
    assert body["model"] == "fake-model" and body["tool_choice"] == "required"
    assert body["messages"] == [{"role": "user", "content": "write hello to a.txt"}]
    assert [t["function"]["name"] for t in body["tools"]] == ["read_file", "write_file", "search_web"]
    assert body["tools"][0]["function"]["parameters"] == FILES[0]["inputSchema"]


def test_llm_grader_client_error_is_one_line(fake_endpoint):
    _FakeChat.status = 401
    grader = LLMGrader("m", base_url=fake_endpoint, timeout=10)
    with pytest.raises(LLMError, match="HTTP 401"):
        grader.choose(_case("q", FILES, ["read_file"]), FILES)
    assert len(_FakeChat.requests) == 1  # no retry on a client error


def test_chat_tools_from_openai_shape():
    cat = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    assert chat_tools(cat) == cat


def test_console_script_llm_grader(cli, fake_endpoint):
    _FakeChat.reply_tool = "calculate_triangle_area"
    r = cli("evals", "tools", str(FIXTURES / "BFCL_v4_simple_python.json"), "--grader", "llm",
            "--model", "fake", "--type", "toolschema-max", "--format", "json", "--limit", "1",
            env={"CAVEMAN_EVALS_BASE_URL": fake_endpoint, "CAVEMAN_EVALS_API_KEY": "k"})
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["grader"] == "llm"
    assert rep["total"]["top1"] == 1 and rep["total"]["types"]["toolschema-max"]["top1"] == 1
    assert len(_FakeChat.requests) == 2  # original and rewritten catalog


# --------------------------------------------------------------------------- end to end


def test_console_script_on_bundled_fixtures(cli):
    r = cli("evals", "tools", str(FIXTURES), "--format", "json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["types"] == ["toolschema", "toolschema-safe", "toolschema-max"]
    assert rep["grader"] == "lexical" and rep["tokenizer"] == "o200k_base"
    assert [d["name"] for d in rep["datasets"]] == [
        "simple", "multiple", "parallel", "live_parallel_multiple"]
    total = rep["total"]
    assert (total["cases"], total["calls"], total["valid"]) == (6, 8, 8)
    for t, row in total["types"].items():
        assert row["valid"] == 8 and row["disagree"] == [], t
        assert row["saved"] == total["tokens"] - row["tokens"] >= 0
    assert total["types"]["toolschema-max"]["saved_percent"] > 0
    assert sum(d["tokens"] for d in rep["datasets"]) == total["tokens"]


def test_console_script_table_and_errors(cli, tmp_path):
    r = cli("evals", "tools", str(FIXTURES), "--type", "toolschema-max", "--limit", "1")
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    assert "toolschema-max" in out and "total" in out and "toolschema-safe" not in out
    assert b"evals tools" not in r.stderr  # no progress when stderr is not a terminal
    r = cli("evals", "tools", str(FIXTURES), "--type", "no-such-type")
    assert r.returncode == 2 and b"unknown or unavailable content type" in r.stderr
    r = cli("evals", "tools", str(tmp_path / "nothing-here"))  # a word is a FILE
    assert (r.returncode, r.stderr.decode()) == (
        1, f"caveman-engine evals tools: cannot read {tmp_path / 'nothing-here'}: No such file or "
           "directory\n")
    r = cli("evals", "tools", str(FIXTURES), "--grader", "llm", env={"CAVEMAN_EVALS_MODEL": None})
    assert r.returncode == 2 and b"--model" in r.stderr


def test_user_jsonl_through_console_script(cli, tmp_path):
    (tmp_path / "cat.json").write_text(json.dumps(FILES))
    p = tmp_path / "mine.jsonl"
    p.write_text(json.dumps({"catalog": "cat.json", "query": "read the file at this path",
                             "expected_tool": "read_file", "arguments": {"path": "/x"}}) + "\n")
    r = cli("evals", "tools", str(p), "--format", "json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["total"]["top1"] == 1 and rep["total"]["valid"] == 1


# --------------------------------------------------------------------------- installed package


def test_installed_bfcl_eval_package():
    data = bfcl.package_data_dir()
    if data is None:
        pytest.skip("bfcl-eval is not installed (pip install --no-deps bfcl-eval to run this)")
    groups = bfcl.resolve("bfcl", limit=3)
    assert [g[0].dataset for g in groups] == list(bfcl.CATEGORIES)
    assert all(len(g) == 3 and all(c.expected for c in g) for g in groups)
    # the bundled fixtures are verbatim copies of the package's entries
    mine = _by_id()
    theirs = {c.id: c for g in bfcl.load_bfcl_dir(data, ["simple", "live_parallel_multiple"])
              for c in g}
    for cid in ("simple_python_38", "live_parallel_multiple_0-0-0"):
        assert mine[cid].catalog == theirs[cid].catalog and mine[cid].calls == theirs[cid].calls


def test_runner_rewrite_is_what_compress_emits():
    from caveman_engine.catalog.diff import run_compressor

    runner = tools.Runner(list(tools.DEFAULT_TYPES), lexical.LexicalGrader())
    for case in _by_id().values():
        minified = json.dumps(case.catalog, ensure_ascii=False, separators=(",", ":")).encode()
        for t in tools.DEFAULT_TYPES:
            assert runner.rewrite(t, minified) == (run_compressor(t, minified) or minified), (case.id, t)


def test_progress_only_on_a_terminal(monkeypatch, capsys):
    import sys

    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    show, done = tools._progress()
    assert show is None
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    show, done = tools._progress()
    for i in range(1, 4):
        show("simple", i, 3)
    done()
    err = capsys.readouterr().err
    assert "evals tools: simple 1/3" in err and "simple 3/3" in err and "2/3" not in err


def test_bfcl_names_without_the_package_say_what_to_install(monkeypatch):
    monkeypatch.setattr(bfcl, "package_data_dir", lambda: None)
    with pytest.raises(bfcl.DatasetError, match="bfcl-eval"):
        bfcl.resolve("live_multiple")
    assert len(bfcl.resolve(str(FIXTURES))) == 4  # bundled files need no package
