import pytest

from caveman_engine.catalog.rules import _telegraph, copula

from ._helpers import run, same_calls


def edit(text: str) -> str:
    return _telegraph.edit_text(text, [copula.RULE], {}, frozenset())


@pytest.mark.parametrize("text,expected", [
    ("City where event is held.", "City where event held."),
    ("Token that is used for paging.", "Token used for paging."),
    ("Token which is being refreshed.", "Token refreshed."),
    ("Location for which weather is being requested.", "Location for which weather requested."),
    ("If city is not in US, give country.", "If city not in US, give country."),
    ("Any date will be considered.", "Any date considered."),
    ("Alarms user has configured.", "Alarms user configured."),
    ("Rows that have been deleted.", "Rows deleted."),
    # a constraint sentence keeps every constraint word
    ("Field is required when mode is set.", "Field required when mode set."),
])
def test_dropped(text, expected):
    assert edit(text) == expected
    assert edit(expected) == expected


@pytest.mark.parametrize("text", [
    "This is used to verify.",          # after a pronoun
    "It is required.",
    "Token is used to verify requests.",  # "used to" would read as a habit
    "Value is string.",                 # not a participle
    "Group is active or not.",
    "Must be deleted first.",           # modal + be
    "Name to be shown.",                # "to be"
    "Users have access to it.",
    "Name is 'pending'.",               # a literal
])
def test_kept(text):
    assert edit(text) == text


def test_schema():
    schema = '{"type":"object","properties":{"c":{"type":"string","description":"City where event is held."}}}'
    out = run("copula", schema)
    assert out == '{"type":"object","properties":{"c":{"type":"string","description":"City where event held."}}}'
    assert same_calls(schema, out)
