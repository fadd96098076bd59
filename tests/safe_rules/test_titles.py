from ._helpers import run, run_tool, same_calls


def test_property_def_and_root_titles():
    schema = ('{"title":"get_timeArguments","type":"object","properties":{"user_id":{"title":"User Id",'
              '"type":"string"},"tz":{"title":"Time zone of the caller","type":"string"}},'
              '"$defs":{"Priority":{"title":"Priority","enum":["low","high"]}}}')
    out = run("titles", schema, name="get_time")
    assert out == ('{"type":"object","properties":{"user_id":{"type":"string"},"tz":'
                   '{"title":"Time zone of the caller","type":"string"}},'
                   '"$defs":{"Priority":{"enum":["low","high"]}}}')
    assert same_calls(schema, out)


def test_root_suffixes_and_informative_root_title():
    for title in ("x_wrapperArguments", "xOutput", "X Params", "x"):
        assert run("titles", '{"title":"' + title + '","type":"object"}', name="x") == '{"type":"object"}'
    schema = '{"title":"Search request","type":"object"}'
    assert run("titles", schema, name="x") == schema


def test_property_named_title_survives():
    schema = '{"type":"object","properties":{"title":{"title":"Title","type":"string"}}}'
    assert run("titles", schema) == '{"type":"object","properties":{"title":{"type":"string"}}}'


def test_mcp_tool_title_stays_and_annotations_title_goes_when_it_spells_the_name():
    """The top-level title is the tool's display name: kept even when it spells the name."""
    tool = ('{"name":"write_file","title":"Write File","description":"d","inputSchema":{},'
            '"annotations":{"title":"Write file","readOnlyHint":false}}')
    assert run_tool("titles", tool) == ('{"name":"write_file","title":"Write File","description":"d",'
                                         '"inputSchema":{},"annotations":{"readOnlyHint":false}}')
    keep = '{"name":"write_file","title":"Write a file","inputSchema":{}}'
    assert run_tool("titles", keep) == keep
    # annotations.title is what clients before the top-level title display: it stays unless
    # it only spells the name
    same = ('{"name":"w","title":"Write a file","inputSchema":{},'
            '"annotations":{"title":"Write a file"}}')
    assert run_tool("titles", same) == same
    other = '{"name":"w","inputSchema":{},"annotations":{"title":"Write a file"}}'
    assert run_tool("titles", other) == other


def test_mcp_tool_title_survives_max():
    import json

    from caveman_engine.compressors import toolschema_max, toolschema_safe

    tool = ('[{"name":"write_file","title":"Write File","description":"Writes a file to the disk.",'
            '"inputSchema":{"type":"object","properties":{"path":{"type":"string"}}}}]')
    for mod in (toolschema_safe, toolschema_max):
        assert json.loads(mod.compress(tool.encode()))[0]["title"] == "Write File", mod.CONTENT_TYPE
