from ._helpers import run


SCHEMA = ('{"type":"object","properties":{"a":{"type":["string","null"],"default":null},'
          '"b":{"type":["string","null"],"default":null},"c":{"type":"integer","default":0}},'
          '"required":["b"]}')


def test_optional_null_default_dropped_required_and_non_null_kept():
    assert run("null_default", SCHEMA) == (
        '{"type":"object","properties":{"a":{"type":["string","null"]},'
        '"b":{"type":["string","null"],"default":null},"c":{"type":"integer","default":0}},'
        '"required":["b"]}'
    )


def test_strict_tool_keeps_everything():
    assert run("null_default", SCHEMA, strict=True) == SCHEMA


def test_openai_strict_function_detected():
    from caveman_engine.catalog import envelope, safe

    doc = envelope.load(('[{"type":"function","function":{"name":"f","strict":true,"parameters":'
                         + SCHEMA + '}}]').encode())
    out = safe.apply_tree(doc, ["null_default"])
    assert envelope.dumps(out[0]["function"]["parameters"]).decode() == SCHEMA


def test_nested_objects_and_non_list_required():
    schema = ('{"type":"object","properties":{"o":{"type":"object","properties":{"x":{"default":null}}}},'
              '"required":"o"}')
    assert run("null_default", schema) == (
        '{"type":"object","properties":{"o":{"type":"object","properties":{"x":{}}}},"required":"o"}'
    )
