import pytest

from ._helpers import run, same_calls


def _prop(t: str, desc: str) -> str:
    return '{"type":"object","properties":{"p":{"type":' + t + ',"description":"' + desc + '"}}}'


@pytest.mark.parametrize("t,desc,expected", [
    ('"array"', "A list of tags to add.", "Tags to add."),
    ('"array"', "Array of label names.", "Label names."),
    ('"string"', "A string representing the user's name.", "User's name."),
    ('"integer"', "An integer specifying the port.", "Port."),
    ('["number","null"]', "A number representing the ratio.", "Ratio."),
    ('"boolean"', "A boolean value indicating whether to retry.", "Whether to retry."),
    ('"object"', "A dictionary containing the settings.", "Settings."),
])
def test_dropped(t, desc, expected):
    schema = _prop(t, desc)
    out = run("restated_type", schema)
    assert out == _prop(t, expected)
    assert run("restated_type", out) == out
    assert same_calls(schema, out)


@pytest.mark.parametrize("t,desc", [
    ('"string"', "A list of tags, comma-separated."),     # another type
    ('"string"', "A comma-separated list of tags."),
    ('"array"', "Tags. A list of tags."),                 # not the first sentence
    ('"integer"', "Number of rooms to reserve."),         # "number of" is a count, not the type
    ('"array"', "List of `Tag`."),
])
def test_kept(t, desc):
    schema = _prop(t, desc)
    assert run("restated_type", schema) == schema
