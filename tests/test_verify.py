"""verify: proven / tested / different, counterexamples, and the console script's exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jsonschema import Draft7Validator, Draft202012Validator

from caveman_engine.catalog import envelope, safe, verify

CORPUS = Path(__file__).parent / "corpus"


def test_strip_annotations_only_at_schema_positions():
    s = {"title": "T", "type": "object", "x-ui": 1, "properties": {"title": {"description": "d",
         "enum": [{"title": "kept"}], "default": {"description": "kept"}}}}
    assert verify.strip_annotations(s) == {"type": "object", "properties": {"title": {
        "enum": [{"title": "kept"}]}}}


def test_proven_when_only_annotations_differ():
    a = {"type": "object", "title": "A", "properties": {"q": {"type": "string", "description": "x"}}}
    b = {"type": "object", "properties": {"q": {"type": "string"}}}
    assert verify.compare_schemas(a, b)[0] == verify.PROVEN


def test_tested_when_equivalent_but_not_identical():
    a = {"type": "object", "properties": {"q": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}
    b = {"type": "object", "properties": {"q": {"type": ["string", "null"]}}}
    status, ce, _, detail = verify.compare_schemas(a, b, examples=5)
    assert status == verify.TESTED and ce is None and detail.endswith("instances")


def _obj(props: dict, **kw) -> dict:
    return {"type": "object", "properties": props, **kw}


UNSAFE = {
    "null dropped": (_obj({"a": {"anyOf": [{"type": "string"}, {"type": "null"}]}}), _obj({"a": {"type": "string"}})),
    "required dropped": (_obj({"a": {"type": "string"}}, required=["a"]), _obj({"a": {"type": "string"}})),
    "enum dropped": (_obj({"a": {"type": "string", "enum": ["x", "y"]}}), _obj({"a": {"type": "string"}})),
    "enum narrowed": (_obj({"a": {"enum": ["x", "y"]}}), _obj({"a": {"enum": ["x"]}})),
    "additionalProperties dropped": (_obj({"a": {}}, additionalProperties=False), _obj({"a": {}})),
    "minimum dropped": (_obj({"n": {"type": "integer", "minimum": 1}}), _obj({"n": {"type": "integer"}})),
    "maxLength loosened": (_obj({"s": {"type": "string", "maxLength": 5}}), _obj({"s": {"type": "string", "maxLength": 6}})),
    "integer to number": (_obj({"n": {"type": "integer"}}), _obj({"n": {"type": "number"}})),
    "pattern dropped": (_obj({"s": {"type": "string", "pattern": "^[a-z]+$"}}), _obj({"s": {"type": "string"}})),
    "items dropped": (_obj({"l": {"type": "array", "items": {"type": "string"}}}), _obj({"l": {"type": "array"}})),
    "nested required": (_obj({"o": _obj({"x": {}}, required=["x"])}), _obj({"o": _obj({"x": {}})})),
    "wrong merge": (_obj({"d": {"anyOf": [{"type": "string", "minLength": 3}, {"type": "integer"}]}}),
                    _obj({"d": {"type": ["string", "integer"]}})),
    "draft-07 $ref sibling": (
        {"$schema": "http://json-schema.org/draft-07/schema#", **_obj({"a": {"$ref": "#/definitions/S", "maxLength": 2}}),
         "definitions": {"S": {"type": "string"}}},
        {**_obj({"a": {"$ref": "#/definitions/S", "maxLength": 2}}), "definitions": {"S": {"type": "string"}}}),
    "oneOf to anyOf": (_obj({"n": {"oneOf": [{"type": "integer"}, {"type": "number"}]}}),
                       _obj({"n": {"anyOf": [{"type": "integer"}, {"type": "number"}]}})),
}


def _validator(s):
    return (Draft7Validator if s.get("$schema", "").endswith("draft-07/schema#") else Draft202012Validator)(s)


@pytest.mark.parametrize("name", list(UNSAFE))
def test_unsafe_rewrite_found_with_a_real_counterexample(name):
    a, b = UNSAFE[name]
    status, ce, accepted_by, _ = verify.compare_schemas(a, b, examples=5)
    assert status == verify.DIFFERENT
    ra, rb = _validator(a).is_valid(ce), _validator(b).is_valid(ce)
    assert ra != rb
    assert accepted_by == ("original" if ra else "rewritten")


def _catalog(path: Path):
    return envelope.load(path.read_bytes())


def test_hand_made_unsafe_rewrite_of_a_real_catalog_is_found_and_only_there():
    doc = _catalog(CORPUS / "github.tools.json")
    bad = safe.apply_tree(doc)
    target = next(t for t in envelope.iter_tools(bad) if t.name == "create_issue")
    target.container["inputSchema"]["required"].remove("title")
    report = verify.verify_docs(doc, bad, examples=3)
    assert [(o.name, o.part) for o in report.different] == [("create_issue", "input")]
    assert "title" not in report.different[0].counterexample
    text = verify.format_report(report)
    assert text.splitlines()[0].startswith("DIFFERENT create_issue (input): {")
    assert "is accepted by the rewritten and rejected by the original" in text.splitlines()[0]


def test_missing_and_extra_tools_are_differences():
    a = [{"name": "x", "inputSchema": {}}, {"name": "y", "inputSchema": {}}]
    b = [{"name": "x", "inputSchema": {}}, {"name": "z", "inputSchema": {}}]
    report = verify.verify_docs(a, b)
    assert sorted((o.name, o.detail) for o in report.different) == [
        ("y", "only in the original catalog"), ("z", "only in the rewritten catalog")]


def test_output_schema_compared_too():
    a = [{"name": "x", "inputSchema": {}, "outputSchema": _obj({"r": {"type": "string"}}, required=["r"])}]
    b = [{"name": "x", "inputSchema": {}, "outputSchema": _obj({"r": {"type": "string"}})}]
    report = verify.verify_docs(a, b, examples=3)
    assert [(o.name, o.part, o.status) for o in report.outcomes] == [
        ("x", "input", verify.PROVEN), ("x", "output", verify.DIFFERENT)]


def test_envelopes_may_differ():
    mcp = [{"name": "f", "inputSchema": _obj({"a": {"type": "string"}})}]
    openai = [{"type": "function", "function": {"name": "f", "parameters": _obj({"a": {"type": "string"}})}}]
    assert verify.verify_docs(mcp, openai).different == []


# ----------------------------------------------------------------------------- console script

@pytest.fixture
def files(tmp_path):
    orig = (CORPUS / "git.tools.json").read_bytes()
    doc = envelope.load(orig)
    good = tmp_path / "safe.json"
    good.write_bytes(envelope.dumps(safe.apply_tree(doc)))
    bad_doc = safe.apply_tree(doc)
    t = next(t for t in envelope.iter_tools(bad_doc) if t.name == "git_log")
    t.container["inputSchema"]["properties"]["max_count"]["type"] = "number"
    bad = tmp_path / "bad.json"
    bad.write_bytes(envelope.dumps(bad_doc))
    src = tmp_path / "orig.json"
    src.write_bytes(orig)
    return src, good, bad


def test_cli_same_exit_0(cli, files):
    src, good, _ = files
    r = cli("verify", str(src), str(good), "--examples", "3")
    assert r.returncode == 0, r.stderr
    last = r.stdout.decode().splitlines()[-1]
    assert last.startswith("12 schemas: ") and last.endswith(" 0 different")


def test_cli_different_exit_1_prints_counterexample(cli, files):
    src, _, bad = files
    r = cli("verify", str(src), str(bad), "--examples", "3")
    assert r.returncode == 1
    lines = r.stdout.decode().splitlines()
    assert lines[0].startswith("DIFFERENT git_log (input): ")
    assert "accepted by the rewritten and rejected by the original" in lines[0]
    assert lines[-1].endswith(" 1 different")
    j = cli("verify", str(src), str(bad), "--examples", "3", "--format", "json")
    assert j.returncode == 1
    out = json.loads(j.stdout)
    assert out["same"] is False
    diff = [s for s in out["schemas"] if s["status"] == "different"]
    assert [d["tool"] for d in diff] == ["git_log"]
    ce = diff[0]["counterexample"]
    assert isinstance(ce["max_count"], float) and not float(ce["max_count"]).is_integer()


def test_cli_stdin_for_one_side(cli, files):
    src, good, _ = files
    r = cli("verify", "-", str(good), "--examples", "2", input=src.read_bytes())
    assert r.returncode == 0


@pytest.mark.parametrize("case", ["missing", "invalid", "no_tools", "both_stdin"])
def test_cli_bad_input_exit_2_one_line(cli, files, tmp_path, case):
    src, good, _ = files
    invalid = tmp_path / "invalid.json"
    invalid.write_bytes(b"{not json")
    notools = tmp_path / "n.json"
    notools.write_bytes(b"[1,2]")
    args = {
        "missing": [str(tmp_path / "nope.json"), str(good)],
        "invalid": [str(src), str(invalid)],
        "no_tools": [str(notools), str(good)],
        "both_stdin": ["-", "-"],
    }[case]
    r = cli("verify", *args)
    assert r.returncode == 2
    err = r.stderr.decode()
    assert err.startswith("verify: ") and err.count("\n") == 1
    assert r.stdout == b""


def test_cli_without_the_extra_says_which_to_install(cli, files, tmp_path):
    blocker = tmp_path / "block"
    (blocker / "jsonschema").mkdir(parents=True)
    (blocker / "jsonschema" / "__init__.py").write_text("raise ImportError('blocked for the test')\n")
    src, good, _ = files
    r = cli("verify", str(src), str(good), env={"PYTHONPATH": str(blocker)})
    assert r.returncode == 2
    err = r.stderr.decode()
    assert err.count("\n") == 1 and "caveman-engine[verify]" in err
