from ._helpers import run, same_calls


def test_noops_dropped():
    schema = ('{"type":["object"],"description":"","required":[],"additionalProperties":true,'
              '"properties":{"l":{"type":"array","items":{},"minItems":0,"uniqueItems":false},'
              '"s":{"type":"string","minLength":0},"m":{"type":"object","additionalProperties":{},'
              '"patternProperties":{},"minProperties":0}},"$defs":{}}')
    out = run("noop_keywords", schema)
    assert out == ('{"type":"object","properties":{"l":{"type":"array"},"s":{"type":"string"},'
                   '"m":{"type":"object"}}}')
    assert same_calls(schema, out)


def test_properties_empty_and_meaningful_values_kept():
    schema = ('{"type":"object","properties":{},"required":["a"],"additionalProperties":false,'
              '"minItems":1,"minLength":0.5}')
    assert run("noop_keywords", schema) == schema


def test_strict_keeps_required_and_additional_properties():
    schema = '{"type":"object","properties":{},"required":[],"additionalProperties":true}'
    assert run("noop_keywords", schema, strict=True) == schema


def test_unevaluated_guard():
    # additionalProperties: true marks members evaluated for the outer unevaluatedProperties.
    schema = ('{"allOf":[{"additionalProperties":true}],"unevaluatedProperties":false}')
    assert run("noop_keywords", schema) == schema


def test_items_kept_when_additional_items_reads_it():
    schema = '{"type":"array","items":{},"additionalItems":false}'
    assert run("noop_keywords", schema) == schema
