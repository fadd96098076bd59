from ._helpers import run, same_calls


def test_inlined_once_with_annotation_siblings():
    schema = ('{"type":"object","properties":{"priority":{"$ref":"#/$defs/Priority","default":"normal"}},'
              '"$defs":{"Priority":{"enum":["low","normal","high"],"type":"string","description":"P"}}}')
    out = run("defs_inline", schema)
    assert out == ('{"type":"object","properties":{"priority":{"enum":["low","normal","high"],'
                   '"type":"string","description":"P","default":"normal"}}}')
    assert same_calls(schema, out)


def test_site_annotation_wins_and_chains_inline():
    schema = ('{"properties":{"a":{"description":"site","$ref":"#/$defs/A"}},"$defs":{"A":{"description":'
              '"def","type":"object","properties":{"b":{"$ref":"#/$defs/B"}}},"B":{"type":"string"}}}')
    out = run("defs_inline", schema)
    assert out == ('{"properties":{"a":{"description":"site","type":"object","properties":'
                   '{"b":{"type":"string"}}}}}')
    assert same_calls(schema, out)


def test_kept():
    for schema in (
        # used twice
        '{"properties":{"a":{"$ref":"#/$defs/A"},"b":{"$ref":"#/$defs/A"}},"$defs":{"A":{"type":"string"}}}',
        # recursive
        '{"properties":{"n":{"$ref":"#/$defs/N"}},"$defs":{"N":{"type":"object","properties":'
        '{"next":{"$ref":"#/$defs/N"}}}}}',
        # validation sibling: ignored up to draft 7, applied since 2019-09
        '{"properties":{"a":{"$ref":"#/$defs/A","maxLength":3}},"$defs":{"A":{"type":"string"}}}',
        # boolean definition
        '{"properties":{"a":{"$ref":"#/$defs/A"}},"$defs":{"A":true}}',
    ):
        assert run("defs_inline", schema) == schema, schema


def test_mutual_recursion_kept():
    schema = ('{"properties":{"a":{"$ref":"#/$defs/A"}},"$defs":{"A":{"properties":{"b":{"$ref":"#/$defs/B"}}},'
              '"B":{"properties":{"a":{"$ref":"#/$defs/A"}}}}}')
    assert run("defs_inline", schema) == schema


def test_root_reference_inlined_keeping_other_defs():
    schema = ('{"$ref":"#/$defs/Args","$defs":{"Args":{"type":"object","properties":{"x":{"$ref":"#/$defs/X"},'
              '"y":{"$ref":"#/$defs/X"}}},"X":{"type":"string"}}}')
    out = run("defs_inline", schema)
    assert out == ('{"type":"object","properties":{"x":{"$ref":"#/$defs/X"},"y":{"$ref":"#/$defs/X"}},'
                   '"$defs":{"X":{"type":"string"}}}')
    assert same_calls(schema, out)
