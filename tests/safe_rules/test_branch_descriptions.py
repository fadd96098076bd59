from ._helpers import run, same_calls

D = "The sort order. Keys are fields, values are directions (1 or -1)."


def test_branch_repeating_parent_dropped():
    schema = ('{"type":"object","properties":{"sort":{"description":"' + D + '","anyOf":['
              '{"type":"number","enum":[1,-1],"description":"' + D + '"},'
              '{"type":"string","description":"The sort order."}]}}}')
    out = run("branch_descriptions", schema)
    assert out == ('{"type":"object","properties":{"sort":{"description":"' + D + '","anyOf":['
                   '{"type":"number","enum":[1,-1]},{"type":"string"}]}}}')
    assert same_calls(schema, out)


def test_identical_branch_descriptions_hoisted():
    schema = ('{"type":"object","properties":{"x":{"oneOf":[{"type":"string","description":"An id."},'
              '{"type":"integer","description":"An  id"}]}}}')
    assert run("branch_descriptions", schema) == (
        '{"type":"object","properties":{"x":{"oneOf":[{"type":"string"},{"type":"integer"}],'
        '"description":"An id."}}}')


def test_nested_and_items():
    schema = ('{"type":"array","description":"Stages to run.","items":{"type":"object",'
              '"description":"Stages to run.","properties":{"a":{"type":"string","description":"Stages to run."},'
              '"b":{"type":"string","description":"Stage name."}}}}')
    assert run("branch_descriptions", schema) == (
        '{"type":"array","description":"Stages to run.","items":{"type":"object",'
        '"properties":{"a":{"type":"string"},"b":{"type":"string","description":"Stage name."}}}}')


def test_different_descriptions_kept():
    schema = ('{"type":"object","properties":{"x":{"description":"Either.","anyOf":['
              '{"type":"string","description":"A name."},{"type":"integer","description":"An index."}]}}}')
    assert run("branch_descriptions", schema) == schema
    # a property description that only shares a sentence with its parent stays
    schema = ('{"type":"object","description":"Filter. Must be small.","properties":{"x":'
              '{"type":"string","description":"Filter."}}}')
    assert run("branch_descriptions", schema) == schema


def test_idempotent():
    schema = ('{"anyOf":[{"type":"string","description":"Same."},{"type":"null","description":"Same."}]}')
    once = run("branch_descriptions", schema)
    assert run("branch_descriptions", once) == once == '{"anyOf":[{"type":"string"},{"type":"null"}],"description":"Same."}'


def test_definitions_start_afresh():
    schema = ('{"type":"object","description":"A point.","properties":{"p":{"$ref":"#/$defs/P"}},'
              '"$defs":{"P":{"type":"object","description":"A point.","properties":{"x":{"type":"number"}}}}}')
    assert run("branch_descriptions", schema) == schema
