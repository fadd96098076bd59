from ._helpers import run_tool


def test_default_hints_dropped():
    tool = ('{"name":"t","inputSchema":{},"annotations":{"title":"Read it","readOnlyHint":false,'
            '"destructiveHint":true,"idempotentHint":false,"openWorldHint":true},'
            '"execution":{"taskSupport":"forbidden"}}')
    assert run_tool("mcp_hints", tool) == '{"name":"t","inputSchema":{},"annotations":{"title":"Read it"}}'


def test_informative_hints_kept():
    tool = ('{"name":"t","inputSchema":{},"annotations":{"readOnlyHint":false,"destructiveHint":false,'
            '"idempotentHint":true,"openWorldHint":false},"execution":{"taskSupport":"optional"}}')
    assert run_tool("mcp_hints", tool) == (
        '{"name":"t","inputSchema":{},"annotations":{"destructiveHint":false,"idempotentHint":true,'
        '"openWorldHint":false},"execution":{"taskSupport":"optional"}}')


def test_read_only_makes_write_hints_moot():
    tool = ('{"name":"t","inputSchema":{},"annotations":{"readOnlyHint":true,"destructiveHint":false,'
            '"idempotentHint":true}}')
    assert run_tool("mcp_hints", tool) == '{"name":"t","inputSchema":{},"annotations":{"readOnlyHint":true}}'


def test_only_mcp_tools_and_booleans():
    tool = '{"name":"t","input_schema":{},"annotations":{"readOnlyHint":false}}'
    assert run_tool("mcp_hints", tool) == tool
    tool = '{"name":"t","inputSchema":{},"annotations":{"readOnlyHint":"false"}}'
    assert run_tool("mcp_hints", tool) == tool


def test_idempotent():
    tool = '{"name":"t","inputSchema":{},"annotations":{"readOnlyHint":true,"openWorldHint":true}}'
    once = run_tool("mcp_hints", tool)
    assert run_tool("mcp_hints", once) == once == '{"name":"t","inputSchema":{},"annotations":{"readOnlyHint":true}}'
