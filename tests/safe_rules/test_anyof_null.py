from ._helpers import run, same_calls, differs


def _p(inner: str) -> str:
    return '{"type":"object","properties":{"p":' + inner + '}}'


def test_pydantic_optional():
    schema = _p('{"anyOf":[{"type":"string"},{"type":"null"}],"default":null,"title":"P"}')
    out = run("anyof_null", schema)
    assert out == _p('{"type":["string","null"],"default":null,"title":"P"}')
    assert same_calls(schema, out)


def test_type_specific_keywords_move_up():
    schema = _p('{"anyOf":[{"type":"string","format":"date","maxLength":10},{"type":"null"}],'
                '"description":"When"}')
    out = run("anyof_null", schema)
    assert out == _p('{"type":["string","null"],"format":"date","maxLength":10,"description":"When"}')
    assert same_calls(schema, out)
    arrays = _p('{"anyOf":[{"type":"string"},{"type":"array","items":{"type":"string"}},{"type":"null"}]}')
    out = run("anyof_null", arrays)
    assert out == _p('{"type":["string","array","null"],"items":{"type":"string"}}')
    assert same_calls(arrays, out)


def test_enum_gets_null():
    schema = _p('{"anyOf":[{"type":"string","enum":["light","dark"]},{"type":"null"}]}')
    out = run("anyof_null", schema)
    assert out == _p('{"type":["string","null"],"enum":["light","dark",null]}')
    assert same_calls(schema, out)


def test_oneof_with_disjoint_types():
    schema = _p('{"oneOf":[{"type":"string"},{"type":"array","items":{"type":"string"}}]}')
    out = run("anyof_null", schema)
    assert out == _p('{"type":["string","array"],"items":{"type":"string"}}')
    assert same_calls(schema, out)


def test_branch_annotation_moves_up_holder_wins():
    schema = _p('{"anyOf":[{"type":"object","description":"inner","properties":{"a":{}}},{"type":"null"}],'
                '"title":"t"}')
    assert run("anyof_null", schema) == _p(
        '{"type":["object","null"],"description":"inner","properties":{"a":{}},"title":"t"}')
    schema = _p('{"anyOf":[{"type":"object","description":"inner"},{"type":"null"}],"description":"outer"}')
    assert run("anyof_null", schema) == _p('{"type":["object","null"],"description":"outer"}')


def test_holder_keywords_apply_to_every_branch_alike():
    schema = _p('{"anyOf":[{"type":"string","minLength":2},{"type":"integer"}],"maxLength":9}')
    out = run("anyof_null", schema)
    assert out == _p('{"type":["string","integer"],"minLength":2,"maxLength":9}')
    assert same_calls(schema, out)


def test_not_merged():
    for inner in (
        '{"anyOf":[{"type":"integer","minimum":1},{"type":"number"}]}',  # integers are numbers
        '{"oneOf":[{"type":"string"},{"type":"string","minLength":2}]}',  # same type
        '{"anyOf":[{"type":"string","minLength":2},{"type":"integer"}],"minLength":3}',
        '{"anyOf":[{"type":"string","format":"int32"},{"type":"integer"}]}',  # format: maybe numeric
        '{"anyOf":[{"type":"string","const":"a"},{"type":"null"}]}',
        '{"anyOf":[{"type":"string","enum":["a"]},{"type":"integer"}]}',
        '{"anyOf":[{"$ref":"#/$defs/X"},{"type":"null"}]}',
        '{"anyOf":[{"type":"string"},{"type":"null"}],"type":"string"}',
        '{"anyOf":[{"minLength":1},{"type":"null"}]}',
        '{"anyOf":[{"type":"string","description":"a"},{"type":"integer","description":"b"}]}',
        '{"anyOf":[{"type":"object","properties":{"a":{}}},{"type":"null"}],"additionalProperties":false}',
    ):
        schema = _p(inner)
        if '"$ref"' in inner:
            schema = schema[:-1] + ',"$defs":{"X":{"type":"string"}}}'
        assert run("anyof_null", schema) == schema, inner


def test_wrong_merges_would_differ():
    # What the refusals protect against, checked with verify.
    # A branch keyword for a type another branch also has would constrain that branch too.
    assert differs(_p('{"anyOf":[{"type":"integer","minimum":5},{"type":"number"}]}'),
                          _p('{"type":["integer","number"],"minimum":5}'))
    assert differs(_p('{"anyOf":[{"type":"object","properties":{"a":{}}},{"type":"null"}],'
                             '"additionalProperties":false}'),
                          _p('{"type":["object","null"],"properties":{"a":{}},"additionalProperties":false}'))


def test_pointer_into_anyof_blocks_rewrite():
    schema = ('{"type":"object","properties":{"p":{"anyOf":[{"type":"string"},{"type":"null"}]},'
              '"q":{"$ref":"#/properties/p/anyOf/0"}}}')
    assert run("anyof_null", schema) == schema


# Exhaustive over small unions: every type x keyword x position x holder, validated on a fixed
# pool of instances with jsonschema (original vs rewritten must agree everywhere).
_TYPES = ["string", "integer", "number", "boolean", "array", "object", "null"]
_KW = [{}, {"minimum": 1}, {"maxLength": 2}, {"minItems": 1}, {"required": ["a"]}, {"pattern": "^x"},
       {"multipleOf": 2}, {"format": "date"}, {"enum": ["x", 1]}, {"description": "b"},
       {"properties": {"a": {"type": "integer"}}, "additionalProperties": False},
       {"properties": {"a": {"type": "integer"}}}]
_HOLDERS = [{}, {"additionalProperties": False}, {"minLength": 2}, {"description": "h"}, {"maximum": 2},
            {"properties": {"b": {}}}]
_POOL = [None, True, False, 0, 1, -1, 2, 1.5, "", "x", "xyz", "2026-01-01", [], [1], ["x", "x"], {},
         {"a": 1}, {"a": "x"}, {"b": 1}, {"a": 1, "b": 2}]


def _agree(p: dict) -> bool:
    import json

    from jsonschema import Draft202012Validator

    from caveman_engine.catalog import envelope, safe

    root = {"type": "object", "properties": {"p": p}}
    doc = envelope.load(json.dumps([{"name": "t", "inputSchema": root}]).encode())
    out = envelope.to_plain(safe.apply_tree(doc, ["anyof_null"]))[0]["inputSchema"]
    va, vb = Draft202012Validator(root), Draft202012Validator(out)
    return all(va.is_valid({"p": i}) == vb.is_valid({"p": i}) for i in _POOL)


def test_exhaustive_optional_shapes():
    bad = []
    for t in _TYPES:
        for kw in _KW:
            for holder in _HOLDERS:
                for kind in ("anyOf", "oneOf"):
                    for branches in ([{"type": t, **kw}, {"type": "null"}], [{"type": "null"}, {"type": t, **kw}]):
                        p = {kind: branches, **holder}
                        if not _agree(p):
                            bad.append(p)
    assert bad == []


def test_exhaustive_two_typed_branches():
    bad = []
    for t1 in _TYPES:
        for t2 in _TYPES:
            for kw in _KW:
                for kind in ("anyOf", "oneOf"):
                    p = {kind: [{"type": t1, **kw}, {"type": t2}]}
                    if not _agree(p):
                        bad.append(p)
    assert bad == []
