import pytest

from caveman_engine.catalog.rules import _telegraph, articles

from ._helpers import run, run_tool, same_calls


def edit(text: str, protected=()) -> str:
    return _telegraph.edit_text(text, [articles.RULE], {}, frozenset(protected))


@pytest.mark.parametrize("text,expected", [
    # what the prose shrink refuses: a first article before a hyphenated word or an acronym
    ("The check-in date for the reservation, in the format 'YYYY-MM-DD'.",
     "Check-in date for reservation, in format 'YYYY-MM-DD'."),
    ("The IATA code or the name of the airport.", "IATA code or name of airport."),
    ("A comma-separated list of the tags.", "Comma-separated list of tags."),
    ("Resonant frequency of an LC circuit.", "Resonant frequency of LC circuit."),
    ("Use the 'dontcare' value. The 5 items.", "Use 'dontcare' value. 5 items."),
])
def test_dropped(text, expected):
    assert edit(text) == expected
    assert edit(expected) == expected


@pytest.mark.parametrize("text", [
    "Choose a or b.",                    # a name, not an article
    "The The The.",                      # before another article: one of them is a name
    "user A the a.",
    "Value of point a",                  # at the end
    "Where a is positive.",              # before a verb
    "Option A or Option B.",             # capitalised inside the sentence
    "Run `the thing` on \"a b\".",       # code and quotes
    "Path /the/a/file and https://x.y/the",
    "user-the item",
])
def test_kept(text):
    assert edit(text) == text


def test_protected_name():
    assert edit("Roots of a quadratic equation.", {"a"}) == "Roots of a quadratic equation."


def test_schema_and_tool():
    schema = ('{"type":"object","properties":{"a":{"type":"integer","description":"The first term."},'
              '"d":{"type":"string","description":"The check-in date, in the format \'YYYY-MM-DD\'."}}}')
    out = run("articles", schema)
    assert out == ('{"type":"object","properties":{"a":{"type":"integer","description":"First term."},'
                   '"d":{"type":"string","description":"Check-in date, in format \'YYYY-MM-DD\'."}}}')
    assert run("articles", out) == out
    assert same_calls(schema, out)
    assert run_tool("articles", '{"name":"t","description":"The IATA code of an airport.","inputSchema":{}}') == \
        '{"name":"t","description":"IATA code of airport.","inputSchema":{}}'
