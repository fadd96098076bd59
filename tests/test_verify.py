"""verify: proven / tested / different / inconclusive, counterexamples, and the console script's
exit codes (0 same, 1 different, 2 cannot run, 3 inconclusive)."""

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
    v = verify.compare(a, b, examples=5)
    assert v.status == verify.TESTED and v.counterexample is None
    assert [d.source for d in v.directions] == ["original", "rewritten"]
    assert all(d.generated >= 1 and d.checked >= verify.DEFAULT_MIN_INSTANCES for d in v.directions)
    assert v.detail.startswith(f"{v.directions[0].checked} original → rewritten (")


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


D7 = "http://json-schema.org/draft-07/schema#"


def _d7(schema: dict) -> dict:
    return {"$schema": D7, **schema}


def test_proof_across_drafts_when_jsonschema_reads_every_keyword_alike():
    common = _obj({"q": {"type": "string", "minLength": 1, "format": "uri"},
                   "l": {"type": "array", "items": {"$ref": "#/definitions/Item"}, "maxItems": 3},
                   "m": {"anyOf": [{"type": "integer", "minimum": 0}, {"const": "all"}]},
                   "f": {"if": {"type": "string"}, "then": {"maxLength": 9}}},
                  required=["q"], additionalProperties=False)
    a = _d7({**common, "title": "T", "definitions": {"Item": {"type": "string"},
                                                      "Unused": {"type": "integer"}}})
    b = {**common, "definitions": {"Item": {"type": "string"}}}
    assert not verify.is_proven(a, b)
    assert verify.proof(a, b) == verify.OTHER_DRAFT
    assert verify.compare(a, b).status == verify.PROVEN
    # the same draft on both sides, only an unreferenced definition gone
    assert verify.proof(a, _d7(b)) == verify.SAME_DRAFT


NO_PROOF_ACROSS_DRAFTS = {
    # each is a draft-07 schema against the same without its $schema
    "items as an array (a tuple in draft 7)": _obj({"t": {"type": "array", "items": [{"type": "string"}]}}),
    "$ref with a validating sibling": {**_obj({"a": {"$ref": "#/definitions/S", "maxLength": 2}}),
                                       "definitions": {"S": {"type": "string"}}},
    "dependencies (gone in 2020-12)": _obj({"a": {}, "b": {}}, dependencies={"a": ["b"]}),
    "dependentRequired (unknown to draft 7)": _obj({"a": {}, "b": {}}, dependentRequired={"a": ["b"]}),
    "contains (minContains since 2019-09)": _obj({"l": {"type": "array", "contains": {"const": 1}}}),
    "an identifier": _obj({"a": {"$id": "#a", "type": "string"}}),
    "a nested $schema": _obj({"a": {"$schema": D7, "type": "string"}}),
    "a pattern that does not compile": _obj({"s": {"type": "string", "pattern": "(["}}),
    "a $ref into an unknown keyword": _obj({"a": {"$ref": "#/extra/b"}}, extra={"b": {
        "type": "object", "dependentRequired": {"p": ["q"]}}}),
    "a $ref into a definition's member": {**_obj({"a": {"$ref": "#/definitions/A/properties/b"}}),
                                          "definitions": {"A": {"properties": {"b": {
                                              "dependentRequired": {"p": ["q"]}}}}}},
}


@pytest.mark.parametrize("name", list(NO_PROOF_ACROSS_DRAFTS))
def test_no_proof_across_drafts_where_a_keyword_may_read_differently(name):
    schema = NO_PROOF_ACROSS_DRAFTS[name]
    assert verify.proof(_d7(schema), schema) is None


def test_no_proof_across_drafts_that_type_integers_differently():
    s = _obj({"n": {"type": "integer"}})
    assert verify.proof({"$schema": "http://json-schema.org/draft-04/schema#", **s}, s) is None


# An instance the draft-07 original and its copy without $schema judge differently.
WITNESSES = {
    "$ref with a validating sibling": {"a": "long"},
    "dependentRequired (unknown to draft 7)": {"a": 1},
    "a $ref into an unknown keyword": {"a": {"p": 1}},
    "a $ref into a definition's member": {"a": {"p": 1}},
}


@pytest.mark.parametrize("name", list(WITNESSES))
def test_refused_proofs_are_real_differences(name):
    schema = NO_PROOF_ACROSS_DRAFTS[name]
    x = WITNESSES[name]
    assert Draft7Validator(_d7(schema)).is_valid(x) != Draft202012Validator(schema).is_valid(x)


_KEYWORDS = ("type", "properties", "items", "required", "enum", "const", "minimum", "maxLength",
             "anyOf", "not", "if", "then", "additionalProperties", "dependentRequired",
             "dependencies", "contains", "minContains", "prefixItems", "additionalItems", "$ref",
             "propertyNames", "uniqueItems", "unevaluatedProperties", "exclusiveMinimum")
_VALUES = (0, 1, -1, 1.5, "a", "ab", "", None, True, [], [1], [1, 1], {}, {"p": 1}, {"p": 1, "q": "x"})


def _random_schema(rnd, depth=0):
    if depth > 2 or rnd.random() < 0.15:
        return rnd.choice([True, False, {}, {"type": "string"}, {"type": "integer"}])
    s = {}
    for _ in range(rnd.randint(1, 3)):
        k = rnd.choice(_KEYWORDS)
        sub = lambda: _random_schema(rnd, depth + 1)  # noqa: E731
        s[k] = {
            "type": lambda: rnd.choice(["object", "array", "string", "integer", ["string", "null"]]),
            "properties": lambda: {"p": sub(), "q": sub()},
            "items": lambda: sub() if rnd.random() < 0.7 else [sub()],
            "required": lambda: rnd.sample(["p", "q"], rnd.randint(0, 2)),
            "enum": lambda: [rnd.choice(_VALUES), rnd.choice(_VALUES)],
            "const": lambda: rnd.choice(_VALUES),
            "anyOf": lambda: [sub(), sub()], "prefixItems": lambda: [sub()],
            "dependentRequired": lambda: {"p": ["q"]}, "dependencies": lambda: {"p": ["q"]},
            "$ref": lambda: rnd.choice(["#/definitions/A", "#/$defs/A"]),
            "uniqueItems": lambda: True,
        }.get(k, lambda: sub() if k in ("not", "if", "then", "additionalProperties", "contains",
                                        "propertyNames", "additionalItems",
                                        "unevaluatedProperties") else rnd.choice([0, 1, 2]))()
    return s


def test_proof_across_drafts_never_claims_what_the_validators_disagree_on():
    """Random draft-06/07/2019-09 schemas against their copy without $schema (and without an
    unused definition): wherever the proof holds, both drafts' validators agree on every
    instance tried."""
    import random
    from jsonschema import Draft6Validator, Draft201909Validator

    drafts = {"http://json-schema.org/draft-06/schema#": Draft6Validator, D7: Draft7Validator,
              "https://json-schema.org/draft/2019-09/schema": Draft201909Validator}
    rnd = random.Random(20261201)
    instances = [*_VALUES, {"p": {"p": 1}}, {"p": [1]}, [[1]], ["a", 2], {"q": None}]
    proven = 0
    for _ in range(1500):
        body = _random_schema(rnd)
        if not isinstance(body, dict):
            continue
        body["definitions"] = {"A": _random_schema(rnd, 1), "Unused": _random_schema(rnd, 1)}
        body["$defs"] = {"A": _random_schema(rnd, 1)}
        uri = rnd.choice(list(drafts))
        a = {"$schema": uri, **json.loads(json.dumps(body))}
        del body["definitions"]["Unused"]
        if verify.proof(a, body) is None:
            continue
        proven += 1
        va, vb = drafts[uri](a), Draft202012Validator(body)
        for x in instances:
            try:
                ra = va.is_valid(x)
            except RecursionError:
                ra = "recursion"
            try:
                rb = vb.is_valid(x)
            except RecursionError:
                rb = "recursion"
            assert ra == rb, (a, x)
    assert proven >= 300


def test_proofs_across_drafts_agree_with_sampling_on_real_catalogs():
    """Every pair of two corpus catalogs that the second proof settles, tested by sampling as
    if there were no proof: no difference."""
    settled = 0
    for name in ("filesystem", "memory", "github"):
        doc = _catalog(CORPUS / f"{name}.tools.json")
        new = safe.apply_tree(doc)
        for ta, tb in zip(envelope.iter_tools(doc), envelope.iter_tools(new)):
            a = envelope.to_plain(dict(ta.schemas())[ta.schema_key])
            b = envelope.to_plain(dict(tb.schemas())[tb.schema_key])
            if verify.proof(a, b) not in (verify.SAME_DRAFT, verify.OTHER_DRAFT):
                continue
            settled += 1
            assert verify._test(a, b, 5, verify.DEFAULT_MUTANTS, 1).status == verify.TESTED, ta.name
    assert settled >= 20


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
    lines = r.stdout.decode().splitlines()
    assert lines[-1].startswith("12 schemas: ") and " 0 inconclusive, 0 different - same" in lines[-1]
    # one line per schema, naming its evidence
    assert len(lines) == 13
    assert all(line.startswith(("proven ", "tested ")) for line in lines[:-1])


def test_cli_different_exit_1_prints_counterexample(cli, files):
    src, _, bad = files
    r = cli("verify", str(src), str(bad), "--examples", "3")
    assert r.returncode == 1
    lines = r.stdout.decode().splitlines()
    assert lines[0].startswith("DIFFERENT git_log (input): ")
    assert "accepted by the rewritten and rejected by the original" in lines[0]
    assert " 1 different - DIFFERENT" in lines[-1]
    j = cli("verify", str(src), str(bad), "--examples", "3", "--format", "json")
    assert j.returncode == 1
    out = json.loads(j.stdout)
    assert out["same"] is False and out["verdict"] == "different" and out["exit_code"] == 1
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
    # a FILE that cannot be read has every command's wording (docs/cli.md); the rest is verify's
    prefix = "caveman-engine verify: " + ("cannot read " if case == "missing" else "")
    assert err.startswith(prefix) and err.count("\n") == 1
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


# ----------------------------------------------------------------------------- evidence or not
#
# "same" (exit 0) needs evidence for every schema: proven (a proof) or tested (sampling, with at
# least --min-instances instances checked in each direction). Everything else is a difference
# (exit 1) or inconclusive (exit 3).


def _tool_file(tmp_path, name: str, schema) -> Path:
    p = tmp_path / f"{name}.json"
    p.write_text(json.dumps([{"name": "t", "inputSchema": schema}]))
    return p


def _pair(tmp_path, a, b) -> tuple[str, str]:
    return str(_tool_file(tmp_path, "a", a)), str(_tool_file(tmp_path, "b", b))


NO_EVIDENCE = {
    # both accept nothing: truly the same, but no instance can be generated from either
    "unsatisfiable": (_obj({"a": {"allOf": [{"type": "string"}, {"type": "integer"}]}}, required=["a"]),
                      _obj({"a": {"not": {}}}, required=["a"])),
    # hypothesis-jsonschema cannot draw from recursive references
    "generator-hostile": (_obj({"n": {"$ref": "#"}, "v": {"type": "string"}}),
                          _obj({"n": {"$ref": "#"}, "v": {"type": "string"}}, required=[])),
    # a regex jsonschema (Python re) cannot run, in the original already
    "original does not compile": (_obj({"s": {"type": "string", "pattern": "\\p{L}+"}}),
                                  _obj({"s": {"type": "string", "pattern": "\\p{L}+"}}, required=[])),
}


@pytest.mark.parametrize("case", list(NO_EVIDENCE))
def test_cli_no_evidence_is_inconclusive_exit_3(cli, tmp_path, case):
    a, b = NO_EVIDENCE[case]
    r = cli("verify", *_pair(tmp_path, a, b), "--examples", "3")
    assert r.returncode == 3, (r.stdout, r.stderr)
    lines = r.stdout.decode().splitlines()
    assert lines[0].startswith("inconclusive t (input): ")
    assert lines[-1] == ("1 schemas: 0 proven, 0 tested, 1 inconclusive, 0 different - "
                         "inconclusive: no difference found, but not every schema has evidence")
    reason = {"unsatisfiable": "no instance", "generator-hostile": "generation failed: ",
              "original does not compile": "the original schema does not compile"}[case]
    assert reason in lines[0]
    j = cli("verify", *_pair(tmp_path, a, b), "--examples", "3", "--format", "json")
    out = json.loads(j.stdout)
    assert j.returncode == 3 and out["verdict"] == "inconclusive" and out["same"] is False
    assert out["exit_code"] == 3 and out["schemas"][0]["status"] == "inconclusive"


UNCOMPILABLE = {
    "unresolvable $ref": (_obj({"a": {"type": "string"}}), _obj({"a": {"$ref": "#/$defs/gone"}}),
                          "cannot resolve $ref '#/$defs/gone' (at #/properties/a)"),
    "dangling $defs $ref": ({**_obj({"a": {"$ref": "#/$defs/S"}}), "$defs": {"S": {"type": "string"}}},
                            _obj({"a": {"$ref": "#/$defs/S"}}), "cannot resolve $ref '#/$defs/S'"),
    "remote $ref (never fetched)": (_obj({"a": {"type": "string"}}),
                                    _obj({"a": {"$ref": "https://example.invalid/s.json"}}),
                                    "cannot resolve $ref 'https://example.invalid/s.json'"),
    "invalid pattern": (_obj({"s": {"type": "string", "pattern": "^[a-z]+$"}}),
                        _obj({"s": {"type": "string", "pattern": "^[a-z+$"}}),
                        "'^[a-z+$' is not a 'regex' (at #/properties/s/pattern)"),
    "invalid patternProperties key": (_obj({}, patternProperties={"^x": {"type": "string"}}),
                                      _obj({}, patternProperties={"^(x": {"type": "string"}}),
                                      "'^(x' is not a 'regex'"),
}


@pytest.mark.parametrize("case", list(UNCOMPILABLE))
def test_cli_uncompilable_rewrite_is_different_exit_1(cli, tmp_path, case):
    a, b, why = UNCOMPILABLE[case]
    r = cli("verify", *_pair(tmp_path, a, b), "--examples", "3")
    assert r.returncode == 1, (r.stdout, r.stderr)
    first = r.stdout.decode().splitlines()[0]
    assert first.startswith("DIFFERENT t (input): the rewritten schema does not compile (the original does): ")
    assert why in first


def test_rewrite_adding_a_compile_error_to_a_broken_original_is_different():
    a = _obj({"s": {"type": "string", "pattern": "\\p{L}"}, "t": {"type": "string"}})
    b = _obj({"s": {"type": "string", "pattern": "\\p{L}"}, "t": {"$ref": "#/$defs/T"}})
    v = verify.compare(a, b, examples=2)
    assert v.status == verify.DIFFERENT
    assert v.detail == "the rewritten schema adds a compile error: cannot resolve $ref '#/$defs/T' (at #/properties/t)"


def test_compile_errors_ignore_place_and_resolve_locally():
    assert verify.compile_errors({"$defs": {"S": {"type": "string"}}, "properties": {"a": {"$ref": "#/$defs/S"}}}) == []
    assert verify.compile_errors({"$id": "https://x.test/root", "$defs": {"S": {"$id": "s", "type": "string"}},
                                  "properties": {"a": {"$ref": "s"}}}) == []
    assert verify.compile_errors(True) == []
    moved = verify.compile_errors({"properties": {"b": {"pattern": "(["}}})
    assert [m for m, _ in moved] == [m for m, _ in verify.compile_errors({"items": {"pattern": "(["}})]


def test_a_reference_into_an_annotation_is_no_proof():
    a = {"default": {"type": "string"}, "properties": {"a": {"$ref": "#/default"}}, "required": ["a"]}
    b = {"default": {"type": "integer"}, "properties": {"a": {"$ref": "#/default"}}, "required": ["a"]}
    assert verify.strip_annotations(a) == verify.strip_annotations(b)
    assert not verify.is_proven(a, b)
    assert verify.compare(a, b, examples=3).status == verify.DIFFERENT


FAKE_GENERATOR = '''
from hypothesis import strategies as st

_calls = [0]


def _boom(x):
    _calls[0] += 1
    if _calls[0] > 3:  # a few instances, then the generator breaks mid-run
        raise RuntimeError("injected generation failure")
    return {}


def from_schema(schema, **kwargs):
    return st.integers().map(_boom)
'''


def test_cli_injected_generation_error_is_inconclusive_not_swallowed(cli, files, tmp_path):
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "hypothesis_jsonschema.py").write_text(FAKE_GENERATOR)
    src, good, _ = files
    r = cli("verify", str(src), str(good), "--examples", "3", env={"PYTHONPATH": str(shim)})
    assert r.returncode == 3, (r.stdout, r.stderr)
    lines = r.stdout.decode().splitlines()
    inconclusive = [line for line in lines if line.startswith("inconclusive ")]
    assert inconclusive and all(
        "generation failed: RuntimeError: injected generation failure" in line for line in inconclusive)
    # proven schemas need no generator and stay proven; nothing is "tested"
    assert not any(line.startswith("tested ") for line in lines)
    assert " 0 tested, " in lines[-1] and " 0 different - inconclusive" in lines[-1]


def test_cli_min_instances_out_of_reach_is_inconclusive(cli, files):
    src, good, _ = files
    r = cli("verify", str(src), str(good), "--examples", "2", "--min-instances", "100000")
    assert r.returncode == 3
    lines = r.stdout.decode().splitlines()
    assert any("need 100000" in line for line in lines if line.startswith("inconclusive "))
    assert " 0 tested, " in lines[-1]


def test_cli_a_schema_uri_that_is_not_a_string_does_not_compile(cli, tmp_path):
    bad, good = tmp_path / "bad.json", tmp_path / "good.json"
    bad.write_text(json.dumps([{"name": "t", "inputSchema": {"$schema": 5, "type": "object"}}]))
    good.write_text(json.dumps([{"name": "t", "inputSchema": {"type": "object"}}]))
    r = cli("verify", str(bad), str(good))
    assert (r.returncode, r.stderr) == (3, b"")
    assert r.stdout.decode().splitlines()[0] == (
        "inconclusive t (input): the original schema does not compile, so nothing can be "
        "checked against it: 5 is not of type 'string' (at #/$schema)")
    r = cli("verify", str(good), str(bad))
    assert r.returncode == 1
    assert r.stdout.decode().startswith("DIFFERENT t (input): the rewritten schema does not compile")


@pytest.mark.parametrize("catalog", ["git.tools.json", "time.tools.json", "everything.tools.json"])
def test_cli_corpus_safe_output_is_same_exit_0(cli, tmp_path, catalog):
    """The real toolschema-safe output of corpus catalogs: every schema proven or tested."""
    src = CORPUS / catalog
    c = cli("compress", "--type", "toolschema-safe", input=src.read_bytes())
    assert c.returncode == 0 and json.loads(c.stderr)["method"] == "toolschema-safe"
    slim = tmp_path / "slim.json"
    slim.write_bytes(c.stdout)
    r = cli("verify", str(src), str(slim), "--examples", "3", "--format", "json")
    assert r.returncode == 0, r.stdout
    out = json.loads(r.stdout)
    assert out["verdict"] == "same" and out["same"] is True and out["exit_code"] == 0
    statuses = {s["status"] for s in out["schemas"]}
    assert statuses <= {"proven", "tested"} and statuses
    for s in out["schemas"]:
        if s["status"] == "tested":
            assert [(e["from"], e["to"]) for e in s["evidence"]] == [
                ("original", "rewritten"), ("rewritten", "original")]
            assert all(e["generated"] >= 1 and e["instances"] >= out["min_instances"] for e in s["evidence"])
    text = cli("verify", str(src), str(slim), "--examples", "3")
    assert text.returncode == 0
    lines = text.stdout.decode().splitlines()
    assert lines[-1].endswith(" 0 inconclusive, 0 different - same: every schema proven or tested")
    for line in lines[:-1]:
        assert line.startswith(("proven ", "tested "))
        if line.startswith("tested "):
            assert " original → rewritten (" in line and " rewritten → original (" in line


def test_cli_proven_only_exit_0(cli, tmp_path):
    a = [{"name": "t", "inputSchema": _obj({"a": {"type": "string", "description": "A thing."}})}]
    b = [{"name": "t", "inputSchema": _obj({"a": {"type": "string"}})}]
    pa, pb = tmp_path / "a.json", tmp_path / "b.json"
    pa.write_text(json.dumps(a))
    pb.write_text(json.dumps(b))
    r = cli("verify", str(pa), str(pb))
    assert r.returncode == 0
    assert r.stdout.decode().splitlines() == [
        "proven t (input): identical once annotations are stripped",
        "1 schemas: 1 proven, 0 tested, 0 inconclusive, 0 different - same: every schema proven or tested"]


def test_cli_help_documents_exit_codes(cli):
    r = cli("verify", "--help")
    text = r.stdout.decode()
    assert r.returncode == 0
    for needle in ("0  same", "1  different", "2  cannot run", "3  inconclusive", "--min-instances",
                   "is a proof", "is sampling, not a proof"):
        assert needle in text


# ----------------------------------------------------------------------------- speed-ups


def _fresh_caches():
    """Forget every memo, so that a run computes everything again (and forked workers inherit
    nothing from an earlier run)."""
    verify._MEMO.clear()
    verify._DRAWN.clear()
    verify._STRATEGIES.clear()


def _same_report(a, b, **kw):
    _fresh_caches()
    serial = verify.report_json(verify.verify_docs(a, b, jobs=1, **kw))
    _fresh_caches()
    seen = []
    parallel = verify.report_json(verify.verify_docs(a, b, jobs=2, progress=lambda d, t: seen.append((d, t)), **kw))
    assert parallel == serial
    return serial, seen


def test_parallel_deduplicated_cached_run_gives_the_serial_report_on_a_real_catalog():
    doc = _catalog(CORPUS / "aws-docs.tools.json")  # five pairs that no proof settles
    out, seen = _same_report(doc, safe.apply_tree(doc), examples=3)
    tested = [s for s in out["schemas"] if s["status"] == verify.TESTED]
    assert len(tested) >= 4  # enough distinct pairs for the pool to be used
    assert out["verdict"] == "same"
    # progress: from nothing settled to every tool settled, never backwards
    tools = len(list(envelope.iter_tools(doc)))
    assert seen[-1] == (tools, tools) and [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert all(t == tools for _, t in seen)


def test_a_difference_in_one_of_two_identical_looking_tools_is_found():
    """Pairs are deduplicated on the full (original, rewritten) pair: an original shared by two
    tools, or a rewrite shared by two tools, does not make them one test."""
    s = _obj({"n": {"type": "integer"}, "s": {"type": "string"}}, required=["n"])
    ok = _obj({"n": {"type": ["integer"]}, "s": {"type": "string"}}, required=["n"])  # same calls
    loose = _obj({"n": {"type": "number"}, "s": {"type": "string"}}, required=["n"])
    other = _obj({"n": {"type": "integer", "minimum": 0}, "s": {"type": "string"}}, required=["n"])
    a = [{"name": f"t{i}", "inputSchema": x} for i, x in enumerate([s, s, s, other, s])]
    b = [{"name": f"t{i}", "inputSchema": x} for i, x in enumerate([ok, loose, ok, ok, ok])]
    out, _ = _same_report(a, b, examples=5)
    assert [(x["tool"], x["status"]) for x in out["schemas"]] == [
        ("t0", verify.TESTED), ("t1", verify.DIFFERENT), ("t2", verify.TESTED),
        ("t3", verify.DIFFERENT), ("t4", verify.TESTED)]
    assert out["schemas"][0] == {**out["schemas"][2], "tool": "t0"}


def test_jobs_serial_when_asked_or_too_few_pairs(monkeypatch):
    monkeypatch.delenv("CAVEMAN_VERIFY_JOBS", raising=False)
    assert verify._jobs(None, 1) == 1
    assert verify._jobs(None, verify.PARALLEL_MIN_PAIRS - 1) == 1
    assert verify._jobs(1, 50) == 1 and verify._jobs(2, 1) == 1
    monkeypatch.setenv("CAVEMAN_VERIFY_JOBS", "1")
    assert verify._jobs(None, 50) == 1


def test_sample_source_keeps_what_is_accepted():
    s = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "T", "type": "object",
         "properties": {"a": {"$ref": "#/definitions/A", "description": "d"}},
         "definitions": {"A": {"$ref": "#/definitions/B"}, "B": {"type": "string"},
                         "unused": {"type": "integer"}}}
    assert verify._sample_source(s) == {
        "type": "object", "properties": {"a": {"$ref": "#/definitions/A"}},
        "definitions": {"A": {"$ref": "#/definitions/B"}, "B": {"type": "string"}}}
    # anything but plain local references: definitions are left alone
    for ref in ("#/definitions/missing", "other.json#/definitions/B", "#", "#/definitions/B%20"):
        t = {"properties": {"a": {"$ref": ref}}, "definitions": {"B": {}, "unused": {}}}
        assert verify._sample_source(t)["definitions"] == {"B": {}, "unused": {}}
    # a reference into an annotation: the schema itself
    r = {"default": {"type": "string"}, "properties": {"a": {"$ref": "#/default"}}}
    assert verify._sample_source(r) is r


def test_cli_no_progress_when_stderr_is_not_a_terminal(cli, files):
    src, good, _ = files
    r = cli("verify", str(src), str(good), "--examples", "2")
    assert r.returncode == 0 and b"verify:" not in r.stderr
