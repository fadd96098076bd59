from ._helpers import run, same_calls


def test_unused_removed_transitive_kept():
    schema = ('{"type":"object","properties":{"a":{"$ref":"#/$defs/A"}},"$defs":{"A":{"type":"object",'
              '"properties":{"b":{"$ref":"#/$defs/B"}}},"B":{"type":"string"},"C":{"type":"integer"},'
              '"D":{"$ref":"#/$defs/C"}}}')
    out = run("defs_unused", schema)
    assert out == ('{"type":"object","properties":{"a":{"$ref":"#/$defs/A"}},"$defs":{"A":{"type":"object",'
                   '"properties":{"b":{"$ref":"#/$defs/B"}}},"B":{"type":"string"}}}')
    assert same_calls(schema, out)


def test_container_removed_when_empty_definitions_too():
    schema = '{"type":"object","definitions":{"X":{"type":"string"}},"$defs":{"Y":{}}}'
    assert run("defs_unused", schema) == '{"type":"object"}'


def test_escaped_names_resolve():
    schema = ('{"properties":{"a":{"$ref":"#/$defs/a~1b"},"c":{"$ref":"#/$defs/x%20y"}},'
              '"$defs":{"a/b":{"type":"string"},"x y":{"type":"integer"},"z":{}}}')
    assert run("defs_unused", schema) == ('{"properties":{"a":{"$ref":"#/$defs/a~1b"},"c":{"$ref":"#/$defs/x%20y"}},'
                                          '"$defs":{"a/b":{"type":"string"},"x y":{"type":"integer"}}}')


def test_nothing_removed_when_references_are_not_plain():
    for schema in (
        '{"properties":{"a":{"$ref":"#/$defs/A/properties/x"}},"$defs":{"A":{"properties":{"x":{}}},"B":{}}}',
        '{"$id":"https://x/s","properties":{"a":{"$ref":"s#/$defs/A"}},"$defs":{"A":{},"B":{}}}',
        '{"properties":{"a":{"$ref":"#/$defs/missing"}},"$defs":{"B":{}}}',
        '{"properties":{"a":{"$ref":"#/$defs/A"}},"$defs":{"A":{"$anchor":"x"},"B":{}}}',
    ):
        assert run("defs_unused", schema) == schema, schema
