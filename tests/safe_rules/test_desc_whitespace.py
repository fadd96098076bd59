from caveman_engine.catalog.rules.desc_whitespace import normalise

from ._helpers import run, run_tool


def test_docstring_indentation_trailing_spaces_and_blank_runs():
    text = "Line one.   \n        Line two.\n            indented.\n\n\n\n        End.   \n"
    assert normalise(text) == "Line one.\nLine two.\n    indented.\n\nEnd."


def test_crlf_inner_runs_and_trim():
    assert normalise("  a   b\r\nc\t \r\n\r\n\r\nd  ") == "a b\nc\n\nd"


def test_mixed_indentation_is_not_dedented():
    # A tab on one line and spaces on another: no common prefix to remove.
    assert normalise("x\n\ty\n  z") == "x\n\ty\n  z"


def test_applies_to_schema_descriptions_not_to_instance_data():
    schema = ('{"type":"object","description":"  Top  level. ","properties":{"description":'
              '{"type":"string","description":"a\\n    b","enum":["  keep  me  "],"default":"  x  "}}}')
    assert run("desc_whitespace", schema) == (
        '{"type":"object","description":"Top level.","properties":{"description":'
        '{"type":"string","description":"a\\nb","enum":["  keep  me  "],"default":"  x  "}}}'
    )


def test_tool_description_normalised_too():
    out = run_tool("desc_whitespace", '{"name":"t","description":"Reads.\\n\\n\\n\\nThen  more.  ","inputSchema":{}}')
    assert out == '{"name":"t","description":"Reads.\\n\\nThen more.","inputSchema":{}}'


def test_non_string_description_untouched():
    assert run("desc_whitespace", '{"description":{"a":"  b  "}}') == '{"description":{"a":"  b  "}}'
