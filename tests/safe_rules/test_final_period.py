import pytest

from caveman_engine.catalog.rules.final_period import strip_final_period
from caveman_engine.compressors import toolschema_max

from ._helpers import run, run_tool


@pytest.mark.parametrize("text, want", [
    ("Height of triangle.", "Height of triangle"),
    ("Sorts results. Newest first.", "Sorts results. Newest first"),
    ("Version of the API, e.g. 2.1.", "Version of the API, e.g. 2.1"),
    ("Use 'dontcare'.", "Use 'dontcare'"),
    ("Name (full).", "Name (full)"),
])
def test_the_stop_that_ends_a_sentence_goes(text, want):
    assert strip_final_period(text) == want


@pytest.mark.parametrize("text", [
    "Colours, shapes, etc.",          # abbreviation
    "Only in the U.S.",               # initials
    "Some fruit, e.g.",               # abbreviation with inner dots
    "Point A.",                       # a single letter reads as an initial
    "And so on...",                   # ellipsis
    "Matches ^a\\.",                  # a literal's escaped dot
    "Path like ./",                   # not a sentence end
    "Files under /tmp/.",             # a path it follows directly
    "Size of page. Must be at most 100.",  # last sentence is a constraint: kept to the byte
    "Date in format YYYY-MM-DD.",          # constraint (format)
    ".",
    "",
    "No stop",
])
def test_kept_where_the_stop_is_part_of_something(text):
    assert strip_final_period(text) == text


def test_schema_and_tool_descriptions_not_instance_data():
    schema = ('{"type":"object","description":"Top.","properties":{"description":'
              '{"type":"string","description":"Text.","enum":["A."],"default":"B."}}}')
    assert run("final_period", schema) == (
        '{"type":"object","description":"Top","properties":{"description":'
        '{"type":"string","description":"Text","enum":["A."],"default":"B."}}}')
    assert run_tool("final_period", '{"name":"t","description":"Reads files.","inputSchema":{}}') == \
        '{"name":"t","description":"Reads files","inputSchema":{}}'


def test_max_drops_it_last_and_is_stable():
    data = (b'[{"type":"function","function":{"name":"area","description":"Calculate the area of a '
            b'triangle.","parameters":{"type":"object","properties":{"base":{"type":"integer",'
            b'"description":"The base of the triangle."},"n":{"type":"integer","description":'
            b'"Number of sides. Must be at least 3."}},"required":["base"]}}}]')
    out = toolschema_max.compress(data)
    assert b'"description":"Base of triangle"}' in out
    assert b'"description":"Calculate area of triangle"' in out
    assert b'Must be at least 3."' in out
    assert toolschema_max.compress(out) == out
