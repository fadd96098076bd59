import pytest

from caveman_engine.catalog.rules.markdown_emphasis import plain

from ._helpers import run, run_tool


@pytest.mark.parametrize("text,expected", [
    ("**PARAMETERS:**\n- **region** (optional): AWS region", "PARAMETERS:\n- region (optional): AWS region"),
    ("**MUST** be set. Use **only** one.", "MUST be set. Use only one."),
    # code, exponents, kwargs, unpaired or spaced markers stay
    ("Pass `**kwargs` or ```\n**x**\n``` as 2**10 and 3**2", "Pass `**kwargs` or ```\n**x**\n``` as 2**10 and 3**2"),
    ("a ** b ** c", "a ** b ** c"),
    ("**open only", "**open only"),
    ("**a\nb**", "**a\nb**"),
])
def test_plain(text, expected):
    assert plain(text) == expected
    assert plain(plain(text)) == plain(text)


def test_schema_and_tool_descriptions():
    schema = '{"type":"object","properties":{"x":{"type":"string","description":"**Required** id"}}}'
    assert run("markdown_emphasis", schema) == \
        '{"type":"object","properties":{"x":{"type":"string","description":"Required id"}}}'
    assert run_tool("markdown_emphasis", '{"name":"t","description":"**Note:** slow","inputSchema":{}}') == \
        '{"name":"t","description":"Note: slow","inputSchema":{}}'
