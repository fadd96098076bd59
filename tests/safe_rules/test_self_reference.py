import pytest

from ._helpers import run, run_tool


@pytest.mark.parametrize("desc,expected", [
    ("This function retrieves the weather.", "Retrieves the weather."),
    ("This tool allows you to list files. This tool is fast.", "Allows you to list files. This tool is fast."),
    ("The API returns at most 10 items.", "Returns at most 10 items."),
])
def test_dropped(desc, expected):
    tool = '{"name":"t","description":"' + desc + '","inputSchema":{}}'
    assert run_tool("self_reference", tool) == '{"name":"t","description":"' + expected + '","inputSchema":{}}'


@pytest.mark.parametrize("desc", [
    "This function is used to test.",
    "This function has no side effects.",
    "This tool status.",
    "Retrieves the weather.",
])
def test_kept(desc):
    tool = '{"name":"t","description":"' + desc + '","inputSchema":{}}'
    assert run_tool("self_reference", tool) == tool


def test_schema_untouched():
    schema = '{"type":"object","properties":{"p":{"type":"string","description":"This function retrieves x."}}}'
    assert run("self_reference", schema) == schema
