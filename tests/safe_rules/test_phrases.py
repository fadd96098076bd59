import pytest

from caveman_engine.catalog.rules import _telegraph, phrases

from ._helpers import run_tool


def edit(text: str) -> str:
    return _telegraph.edit_text(text, [phrases.RULE], {}, frozenset())


@pytest.mark.parametrize("text,expected", [
    ("City, in format of 'City, State', such as 'Berkeley, CA'.", "City, in format 'City, State', like 'Berkeley, CA'."),
    ("Such as 'a'.", "Like 'a'."),
    ("If not provided, defaults to today.", "If omitted, defaults to today."),
    ("Uses cache if not specified.", "Uses cache if omitted."),
    ("Retries in order to recover.", "Retries to recover."),
    ("Names as well as ids.", "Names and ids."),
    ("Run prior to deploy.", "Run before deploy."),
    ("Whether or not to retry.", "Whether to retry."),
    ("City and state, e.g., 'Berkeley, CA'.", "City and state, like 'Berkeley, CA'."),
    ("Units (e.g., km or mi).", "Units (like km or mi)."),
    ("Date in format YYYY-MM-DD, e.g., 2024-01-31.", "Date in format YYYY-MM-DD, like 2024-01-31."),
    ("E.g., 'a'.", "Like 'a'."),
])
def test_shorter(text, expected):
    assert edit(text) == expected
    assert edit(expected) == expected


@pytest.mark.parametrize("text", [
    "Value 'such as x' stays.",       # inside quotes
    "Format of the output.",          # not before a literal
    "If not found, fails.",
    "City, e.g. 'Berkeley, CA'.",     # "e.g." alone is as long as "like": the rules only shorten
    "Fruit, vegetables, e.g.,",       # nothing after it
    "Value 'e.g., x' stays.",         # inside quotes
    "Path a.e.g., x",                 # part of a dotted word
    "Tag e.g.,x",                     # no space before what follows
])
def test_kept(text):
    assert edit(text) == text


def test_tool():
    assert run_tool("phrases", '{"name":"t","description":"Lists files such as logs.","inputSchema":{}}') == \
        '{"name":"t","description":"Lists files like logs.","inputSchema":{}}'
