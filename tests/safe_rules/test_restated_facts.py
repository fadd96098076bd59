import pytest

from ._helpers import run, same_calls


def _obj(prop: str, required: str = "[]") -> str:
    return '{"type":"object","properties":{"p":' + prop + '},"required":' + required + '}'


@pytest.mark.parametrize("prop,expected", [
    ('{"type":"boolean","default":true,"description":"Compute area. Default is true."}',
     '{"type":"boolean","default":true,"description":"Compute area."}'),
    ('{"type":"string","default":"wellFormed","description":"Filter by state. Defaults to \'wellFormed\'."}',
     '{"type":"string","default":"wellFormed","description":"Filter by state."}'),
    ('{"type":"integer","default":100,"description":"Lines to return (default: 100)"}',
     '{"type":"integer","default":100,"description":"Lines to return"}'),
    ('{"type":"string","description":"Optional: the branch to read."}',
     '{"type":"string","description":"The branch to read."}'),
    ('{"type":"string","description":"Branch name (optional)"}',
     '{"type":"string","description":"Branch name"}'),
    ('{"type":"string","optional":true,"description":"Optional."}', '{"type":"string"}'),
])
def test_restatements_dropped(prop, expected):
    schema = _obj(prop)
    out = run("restated_facts", schema)
    assert out == _obj(expected)
    assert run("restated_facts", out) == out  # idempotent
    assert same_calls(schema, out)


@pytest.mark.parametrize("prop", [
    # BFCL's type note (kept: dropping it moved BFCL's tool choice), another default, no default
    # keyword, a constraint sentence, a required property
    '{"type":"number","format":"float","description":"Radius of circle. This is a float type value."}',
    '{"type":"integer","description":"Count. This is a float type value."}',
    '{"type":"integer","default":10,"description":"Count. Defaults to 100."}',
    '{"type":"integer","description":"Count. Defaults to 100."}',
    '{"type":"integer","default":100,"description":"Count. Default is 100, maximum 500."}',
    '{"type":"integer","default":null,"description":"Count. Default is null."}',
    '{"type":"string","description":"Optional expiration time"}',
])
def test_informative_kept(prop):
    schema = _obj(prop)
    assert run("restated_facts", schema) == schema


def test_required_property_keeps_optional_words():
    schema = _obj('{"type":"string","optional":true,"description":"Branch (optional)"}', '["p"]')
    assert run("restated_facts", schema) == schema
