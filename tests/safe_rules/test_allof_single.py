from ._helpers import run, same_calls, differs


def test_merged_into_parent_in_place():
    schema = ('{"type":"object","allOf":[{"properties":{"a":{"type":"string"}},"required":["a"],'
              '"description":"inner"}],"description":"outer"}')
    out = run("allof_single", schema)
    assert out == ('{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],'
                   '"description":"outer"}')
    assert same_calls(schema, out)


def test_kept_when_keywords_collide_or_read_each_other():
    for schema in (
        '{"type":"object","allOf":[{"type":"object","minProperties":1}]}',  # same keyword
        '{"additionalProperties":false,"allOf":[{"properties":{"a":{}}}]}',  # split group
        '{"allOf":[{"$ref":"#/$defs/A"}],"description":"d","$defs":{"A":{"type":"string"}}}',
        '{"allOf":[{"type":"string"},{"minLength":1}]}',  # two branches
        '{"if":{"type":"string"},"allOf":[{"then":{"minLength":1}}]}',
    ):
        assert run("allof_single", schema) == schema, schema


def test_true_branch_dropped():
    assert run("allof_single", '{"type":"string","allOf":[true]}') == '{"type":"string"}'
    assert run("allof_single", '{"type":"string","allOf":[{}]}') == '{"type":"string"}'


def test_split_group_really_differs():
    # The rule's refusal is needed: merging would let "a" through.
    a = '{"additionalProperties":false,"allOf":[{"properties":{"a":{}}}]}'
    b = '{"additionalProperties":false,"properties":{"a":{}}}'
    assert differs(a, b)


_PARTS = [{}, {"type": "object"}, {"type": "string"}, {"properties": {"a": {"type": "integer"}}},
          {"additionalProperties": False}, {"required": ["a"]}, {"minLength": 2}, {"description": "d"},
          {"patternProperties": {"^b": {"type": "string"}}}, {"items": {"type": "integer"}},
          {"additionalItems": False}, {"if": {"required": ["a"]}}, {"then": {"required": ["b"]}},
          {"enum": ["x", 1, {"a": 1}]}, {"not": {"type": "null"}}]
_POOL = [None, 1, "x", "xyz", [], [1], [1, "x"], {}, {"a": 1}, {"a": "x"}, {"b": "s"}, {"b": 1},
         {"a": 1, "b": 2}, {"c": 0}]


def test_exhaustive_pairs_keep_validity():
    import json

    from jsonschema import Draft7Validator, Draft202012Validator

    from caveman_engine.catalog import envelope, safe

    bad = []
    for holder in _PARTS:
        for branch in _PARTS:
            for draft7 in (False, True):
                root = {"allOf": [branch], **holder}
                if draft7:
                    root = {"$schema": "http://json-schema.org/draft-07/schema#", **root}
                doc = envelope.load(json.dumps([{"name": "t", "inputSchema": root}]).encode())
                out = envelope.to_plain(safe.apply_tree(doc, ["allof_single"]))[0]["inputSchema"]
                v = Draft7Validator if draft7 else Draft202012Validator
                va, vb = v(root), v(out)
                if any(va.is_valid(i) != vb.is_valid(i) for i in _POOL):
                    bad.append(root)
    assert bad == []
