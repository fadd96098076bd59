from ._helpers import run, run_tool


def _prop(name: str, description: str) -> str:
    return '{"type":"object","properties":{"' + name + '":{"type":"string","description":"' + description + '"}}}'


def test_echo_dropped():
    assert run("echo_description", _prop("user_id", "The user ID")) == \
        '{"type":"object","properties":{"user_id":{"type":"string"}}}'
    assert run("echo_description", _prop("userId", "User id.")) == \
        '{"type":"object","properties":{"userId":{"type":"string"}}}'
    assert run("echo_description", _prop("page_size", "The page size value")) == \
        '{"type":"object","properties":{"page_size":{"type":"string"}}}'


def test_informative_kept():
    for d in ("Unique user ID", "User ID to fetch", "The ID", "Identifiant de l\u2019utilisateur"):
        schema = _prop("user_id", d)
        assert run("echo_description", schema) == schema


def test_only_property_descriptions():
    schema = '{"type":"object","description":"T","items":{"description":"items"}}'
    assert run("echo_description", schema, name="t") == schema
    tool = '{"name":"read","description":"Read","inputSchema":{}}'
    assert run_tool("echo_description", tool) == tool
