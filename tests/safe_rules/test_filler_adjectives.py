import pytest

from caveman_engine.catalog.rules import _telegraph, filler_adjectives

from ._helpers import run_tool


def edit(text: str) -> str:
    return _telegraph.edit_text(text, [filler_adjectives.RULE], {}, frozenset())


@pytest.mark.parametrize("text,expected", [
    ("Retrieves weather for specified city on given date.", "Retrieves weather for city on date."),
    ("Returns the provided token's owner.", "Returns the token's owner."),
    ("Given date, in format 'YYYY-MM-DD'.", "Date, in format 'YYYY-MM-DD'."),
    ("Search flights between two cities on specified date.", "Search flights between two cities on date."),
])
def test_dropped(text, expected):
    assert edit(text) == expected


@pytest.mark.parametrize("text", [
    "Use the date if provided.",
    "Range as specified in the request.",
    "Items are given priority.",          # a verb: no determiner or preposition before it
    "Runs provided that cache is warm.",
    "The user-specified value.",
    "Reserve specified number of rooms.",  # after a verb
    "Only ids given by the list.",
])
def test_kept(text):
    assert edit(text) == text


def test_tool_description():
    assert run_tool("filler_adjectives",
                    '{"name":"t","description":"Plays the specified track on a given device.","inputSchema":{}}') == \
        '{"name":"t","description":"Plays the track on a device.","inputSchema":{}}'
