from ._helpers import run, same_calls, differs

D7 = '"$schema":"http://json-schema.org/draft-07/schema#",'


def test_dropped_when_draft_invariant():
    schema = '{' + D7 + '"type":"object","properties":{"a":{"type":"string","description":"x"}},"additionalProperties":false}'
    out = run("schema_uri", schema)
    assert out == '{"type":"object","properties":{"a":{"type":"string","description":"x"}},"additionalProperties":false}'
    assert same_calls(schema, out)
    for uri in ("https://json-schema.org/draft/2020-12/schema", "https://json-schema.org/draft/2019-09/schema",
                "http://json-schema.org/draft-04/schema#", "http://json-schema.org/draft-06/schema"):
        assert run("schema_uri", '{"$schema":"' + uri + '","type":"object"}') == '{"type":"object"}'


def test_kept_when_the_draft_matters():
    for body in (
        '"properties":{"a":{"$ref":"#/definitions/S","maxLength":2}},"definitions":{"S":{"type":"string"}}',
        '"dependencies":{"a":["b"]}',
        '"items":[{"type":"string"}],"additionalItems":false',
        '"dependentRequired":{"a":["b"]}',  # unknown to draft 7, active in 2020-12
        '"$id":"https://example.com/s"',
    ):
        schema = '{' + D7 + body + '}'
        assert run("schema_uri", schema) == schema, body
    assert run("schema_uri", '{"$schema":"http://json-schema.org/draft-04/schema#","minimum":1,'
               '"exclusiveMinimum":true}') == ('{"$schema":"http://json-schema.org/draft-04/schema#",'
                                               '"minimum":1,"exclusiveMinimum":true}')
    six = '{"$schema":"http://json-schema.org/draft-06/schema#","if":{"type":"string"},"then":{"minLength":2}}'
    assert run("schema_uri", six) == six
    unknown = '{"$schema":"https://example.com/my-dialect","type":"object"}'
    assert run("schema_uri", unknown) == unknown


def test_ref_sibling_case_really_differs():
    schema = '{' + D7 + '"properties":{"a":{"$ref":"#/definitions/S","maxLength":2}},"definitions":{"S":{"type":"string"}}}'
    assert differs(schema, schema.replace(D7, ""))


def test_only_at_the_root():
    schema = '{"type":"object","properties":{"a":{"$schema":"http://json-schema.org/draft-07/schema#"}}}'
    assert run("schema_uri", schema) == schema
