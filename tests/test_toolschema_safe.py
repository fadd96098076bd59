"""toolschema-safe: envelopes, selection of rules, idempotence, and zero verify differences
over the whole corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from caveman_engine.catalog import envelope, rules, safe, verify
from caveman_engine.compressors import toolschema_safe

CORPUS = Path(__file__).parent / "corpus"
FILES = sorted(CORPUS.glob("*.tools.json")) + sorted((CORPUS / "formats").glob("*.json"))

SCHEMA = ('{"$schema":"http://json-schema.org/draft-07/schema#","title":"fArguments","type":"object",'
          '"properties":{"q":{"title":"Q","anyOf":[{"type":"string"},{"type":"null"}],"default":null,'
          '"description":"Query  <b>  text"}},"required":[]}')
SLIM = '{"type":"object","properties":{"q":{"type":["string","null"],"description":"Query <b> text"}}}'


def _c(text: str) -> bytes | None:
    return toolschema_safe.compress(text.encode())


def test_metadata():
    assert toolschema_safe.CONTENT_TYPE == "toolschema-safe"
    assert toolschema_safe.SAFETY_CLASS == "S4"


@pytest.mark.parametrize(
    "wrap",
    [
        # MCP tools/list result array, MCP result object with cursor, JSON-RPC response
        '[{"name":"f","description":"d","inputSchema":%s}]',
        '{"tools":[{"name":"f","inputSchema":%s}],"nextCursor":"c2"}',
        '{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"f","inputSchema":%s}]}}',
        # Anthropic
        '[{"name":"f","description":"d","input_schema":%s,"cache_control":{"type":"ephemeral"}}]',
        # OpenAI Chat Completions and Responses
        '[{"type":"function","function":{"name":"f","description":"d","parameters":%s}}]',
        '{"tools":[{"type":"function","name":"f","parameters":%s}],"model":"m"}',
        # a single tool object
        '{"name":"f","inputSchema":%s}',
    ],
)
def test_envelopes_come_back_as_they_went_in(wrap):
    assert _c(wrap % SCHEMA) == (wrap % SLIM).encode()


def test_bare_schema_and_pretty_input_compact_output():
    pretty = json.dumps(json.loads(SCHEMA), indent=2)
    # A bare schema has no tool name: its root title is not "the tool name", so it stays.
    assert _c(pretty) == SLIM.replace('{"type"', '{"title":"fArguments","type"', 1).encode()


def test_numbers_and_characters_verbatim():
    text = '[{"name":"f","inputSchema":{"type":"object","properties":{"n":{"type":"number","maximum":1E+2,"default":1.50,"description":"a<b & \\u2028"}}}}]'
    assert _c(text) == ('[{"name":"f","inputSchema":{"type":"object","properties":{"n":{"type":"number",'
                        '"maximum":1E+2,"default":1.50,"description":"a<b & \u2028"}}}}]').encode()


@pytest.mark.parametrize("text", ["", "not json", "1", '"s"', "null", "[1,2]", "{} {}", "\ufeff{}"])
def test_declines(text):
    assert _c(text) is None


def test_declines_too_deep_without_recursion_error():
    deep = '[{"name":"f","inputSchema":' + '{"not":' * 3000 + "{}" + "}" * 3000 + "}]"
    assert _c(deep) is None


def test_rule_selection_env(monkeypatch):
    doc = '[{"name":"f","inputSchema":' + SCHEMA + "}]"
    monkeypatch.setenv(rules.ENV, "-anyof_null,-null_default")
    out = json.loads(_c(doc))[0]["inputSchema"]
    assert out == {"type": "object", "properties": {"q": {"anyOf": [{"type": "string"}, {"type": "null"}],
                                                         "default": None, "description": "Query <b> text"}}}
    monkeypatch.setenv(rules.ENV, "titles")  # bare names: only these
    out = json.loads(_c(doc))[0]["inputSchema"]
    assert "title" not in out and out["$schema"] and out["required"] == []
    monkeypatch.setenv(rules.ENV, "none")
    assert _c(doc) == doc.encode()


def test_select_spec():
    assert rules.select(None) == rules.ORDER
    assert rules.select("-defs_inline,-anyof-null") == tuple(
        n for n in rules.ORDER if n not in ("defs_inline", "anyof_null"))
    assert rules.select("titles,schema_uri") == ("titles", "schema_uri")
    assert rules.select("none,+titles") == ("titles",)
    assert rules.select("-bogus") == rules.ORDER
    with pytest.raises(rules.UnknownRule):
        rules.select("-bogus", strict_names=True)


def test_every_rule_has_a_module():
    for m in rules.all_rules():
        assert m.NAME in rules.ORDER and m.SUMMARY and callable(m.apply)


def test_input_not_modified():
    doc = envelope.load(('[{"name":"f","inputSchema":' + SCHEMA + "}]").encode())
    before = envelope.dumps(doc)
    safe.apply_tree(doc)
    assert envelope.dumps(doc) == before


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_corpus_idempotent_and_never_larger(path):
    data = path.read_bytes()
    once = toolschema_safe.compress(data)
    assert once is not None
    assert len(once) <= len(json.dumps(json.loads(data), ensure_ascii=False, separators=(",", ":")).encode())
    assert toolschema_safe.compress(once) == once
    # every tool keeps its name, in order
    assert [t.name for t in envelope.iter_tools(envelope.load(once))] == \
        [t.name for t in envelope.iter_tools(envelope.load(data))]


def _verify_corpus(examples: int) -> list[str]:
    problems = []
    for path in FILES:
        doc = envelope.load(path.read_bytes())
        report = verify.verify_docs(doc, safe.apply_tree(doc), examples=examples,
                                    mutants=20 if examples < 10 else 40)
        if report.verdict != "same":
            problems += [f"{path.name}: {report.verdict}: {line}"
                         for line in verify.format_report(report).splitlines()]
    return problems


def test_corpus_verify_finds_no_difference():
    assert _verify_corpus(examples=2) == []


@pytest.mark.slow
def test_corpus_verify_finds_no_difference_exhaustive():
    assert _verify_corpus(examples=40) == []


# ----------------------------------------------------------------------------- differential

_NAMES = st.sampled_from(["a", "b", "c"])
_TYPES = st.sampled_from(["string", "integer", "number", "boolean", "array", "object", "null"])


def _leaf():
    return st.one_of(
        st.builds(lambda t: {"type": t, "title": "A"}, _TYPES),
        st.builds(lambda t, d: {"type": t, "default": d}, _TYPES, st.none() | st.integers(0, 2)),
        st.just({"type": "string", "minLength": 0, "maxLength": 3, "description": " x  y "}),
        st.just({"type": "integer", "minimum": 1}),
        st.just({"enum": ["x", "y"], "type": "string"}),
        st.just({"$ref": "#/$defs/D1", "description": "d"}),
        st.just({"$ref": "#/$defs/D2"}),
        st.just({"type": "array", "items": {}, "uniqueItems": False}),
        # a type-specific keyword on a random type (it constrains only its own type)
        st.builds(lambda t, kv: {"type": t, **kv}, _TYPES, st.sampled_from(
            [{"minimum": 1}, {"maxLength": 2}, {"minItems": 1}, {"required": ["a"]},
             {"pattern": "^x"}, {"multipleOf": 2}, {"minProperties": 1}, {"format": "date"},
             {"properties": {"a": {"type": "integer"}}, "additionalProperties": False}])),
    )


def _schemas():
    return st.recursive(
        _leaf(),
        lambda inner: st.one_of(
            st.builds(lambda bs, k, holder: {k: bs, **holder}, st.lists(inner, min_size=1, max_size=3),
                      st.sampled_from(["anyOf", "oneOf", "allOf"]),
                      st.sampled_from([{}, {}, {"additionalProperties": False}, {"minLength": 2},
                                       {"properties": {"b": {}}}, {"description": "h"}])),
            st.builds(lambda x: {"anyOf": [x, {"type": "null"}], "default": None}, inner),
            st.builds(lambda props, req, ap: {"type": "object", "properties": props, "required": req,
                                              **({"additionalProperties": ap} if ap is not None else {})},
                      st.dictionaries(_NAMES, inner, max_size=3), st.lists(_NAMES, max_size=2, unique=True),
                      st.none() | st.booleans()),
            st.builds(lambda x: {"type": "array", "items": x}, inner),
        ),
        max_leaves=6,
    )


_KW = st.sampled_from(
    [{}, {"minimum": 1}, {"maxLength": 2}, {"minItems": 1}, {"required": ["a"]}, {"pattern": "^x"},
     {"multipleOf": 2}, {"format": "date"}, {"enum": ["x", 1]}, {"description": "b"},
     {"properties": {"a": {"type": "integer"}}, "additionalProperties": False}])


def _unions():
    """anyOf/oneOf of typed branches with type-specific keywords: what anyof_null merges."""
    branch = st.builds(lambda t, kv: {"type": t, **kv}, _TYPES | st.lists(_TYPES, min_size=1, max_size=2,
                                                                          unique=True), _KW)
    holder = st.sampled_from([{}, {}, {"additionalProperties": False}, {"minLength": 2},
                              {"description": "h"}, {"maximum": 2}])
    kind = st.sampled_from(["anyOf", "oneOf"])
    return st.one_of(
        st.builds(lambda bs, null, k, h: {k: bs + ([{"type": "null"}] if null else []), **h},
                  st.lists(branch, min_size=1, max_size=3), st.booleans(), kind, holder),
        # the Optional[X] shape, X with any keyword
        st.builds(lambda b, k, h, first: {k: [b, {"type": "null"}] if first else [{"type": "null"}, b], **h},
                  branch, kind, holder, st.booleans()),
        # numeric overlaps
        st.builds(lambda ts, k: {k: [{"type": t} for t in ts]},
                  st.permutations(["integer", "number", "string"]), kind),
    )


_DEFS = {"D1": {"type": "string", "title": "D1", "maxLength": 2},
         "D2": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
         "D3": {"type": "null"}}

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([1.5, "", "x", "xyz", "y", "2026-01-01"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_NAMES, inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(_schemas() | _unions(), st.lists(_JSON, min_size=5, max_size=12), st.booleans())
def test_random_schemas_accept_the_same_instances(schema, instances, draft7):
    from jsonschema import Draft7Validator, Draft202012Validator

    root = {"type": "object", "properties": {"p": schema, "q": {"type": "string"}}, "$defs": dict(_DEFS)}
    if draft7:
        root = {"$schema": "http://json-schema.org/draft-07/schema#", **root}
    doc = envelope.load(json.dumps([{"name": "f", "inputSchema": root}]).encode())
    out = envelope.to_plain(safe.apply_tree(doc))[0]["inputSchema"]
    assert safe.apply_tree(envelope.load(json.dumps([{"name": "f", "inputSchema": out}]).encode())) \
        == envelope.load(json.dumps([{"name": "f", "inputSchema": out}]).encode())  # idempotent
    va = (Draft7Validator if draft7 else Draft202012Validator)(root)
    vb = (Draft7Validator if "$schema" in out else Draft202012Validator)(out)
    for inst in instances:
        for candidate in ({"p": inst}, {"p": inst, "q": "s"}, inst):
            assert va.is_valid(candidate) == vb.is_valid(candidate), (root, out, candidate)
