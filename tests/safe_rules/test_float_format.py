from caveman_engine.compressors import toolschema_max

from ._helpers import run, same_calls


def test_float_and_double_go_on_a_number():
    schema = ('{"type":"object","properties":{"x":{"type":"number","format":"float"},'
              '"y":{"type":["number","null"],"format":"double","description":"Y."}}}')
    out = run("float_format", schema)
    assert out == ('{"type":"object","properties":{"x":{"type":"number"},'
                   '"y":{"type":["number","null"],"description":"Y."}}}')
    assert same_calls(schema, out)


def test_other_formats_and_other_types_are_kept():
    for node in ('{"type":"integer","format":"int32"}', '{"type":"integer","format":"int64"}',
                 '{"type":"number","format":"decimal"}', '{"type":"string","format":"float"}',
                 '{"format":"float"}', '{"type":"number","format":"Float"}',
                 '{"type":"number","format":["float"]}'):
        schema = '{"type":"object","properties":{"x":' + node + '}}'
        assert run("float_format", schema) == schema


def test_instance_data_is_not_a_schema():
    # A property named "format" and a default/enum value that looks like a schema stay.
    schema = ('{"type":"object","properties":{"format":{"type":"string","enum":["float"],'
              '"default":"float"},"v":{"type":"number","default":{"type":"number","format":"float"}}}}')
    assert run("float_format", schema) == schema


def test_max_runs_it_and_keeps_the_type():
    data = (b'[{"type":"function","function":{"name":"area","description":"Area.",'
            b'"parameters":{"type":"object","properties":{"r":{"type":"number","format":"float"}},'
            b'"required":["r"]}}}]')
    out = toolschema_max.compress(data)
    assert b'"format"' not in out and b'"r":{"type":"number"}' in out
