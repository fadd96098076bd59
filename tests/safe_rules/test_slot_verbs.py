import pytest

from caveman_engine.catalog.rules import _telegraph, slot_verbs

from ._helpers import run, run_tool, same_calls


def edit(text: str) -> str:
    return _telegraph.edit_text(text, [slot_verbs.RULE], {"type": "string"}, frozenset())


@pytest.mark.parametrize("text,expected", [
    ("Specifies the page size.", "Page size."),
    ("Indicates whether restaurant has seating.", "Whether restaurant has seating."),
    ("Indicates if house should have laundry.", "Whether house should have laundry."),
    ("Determines the maximum number of rows.", "Maximum number of rows."),
    ("Flag indicating whether user group is active.", "Whether user group is active."),
    ("A flag that indicates if archived items count.", "Whether archived items count."),
    ("Flag to determine if tokens should be included.", "Whether tokens should be included."),
    ("Boolean flag specifying whether to retry.", "Whether to retry."),
])
def test_dropped(text, expected):
    assert edit(text) == expected
    assert edit(expected) == expected


@pytest.mark.parametrize("text", [
    "Page size. Specifies the cursor.",      # only the first sentence
    "Specifies `mode`.",                     # no plain word follows
    "Specifies X or Y.",
    "Flag to include disabled alarms.",      # "flag to" is not "flag indicating whether"
])
def test_kept(text):
    assert edit(text) == text


def test_tool_descriptions_untouched():
    tool = '{"name":"t","description":"Sets the user status.","inputSchema":{}}'
    assert run_tool("slot_verbs", tool) == tool


def test_schema():
    schema = '{"type":"object","properties":{"p":{"type":"integer","description":"Specifies the page size."}}}'
    out = run("slot_verbs", schema)
    assert out == '{"type":"object","properties":{"p":{"type":"integer","description":"Page size."}}}'
    assert same_calls(schema, out)
