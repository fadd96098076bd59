"""defs_factor (toolschema-max): repeated subschemas moved to the root's definitions."""

from __future__ import annotations

import json

from caveman_engine.catalog import envelope

from ._helpers import run, same_calls

# A project-tracker-shaped input schema: the same "member" and "label" objects written out in
# several properties, as OpenAPI-generated MCP servers do.
MEMBER = {"type": "object", "properties": {"id": {"type": "string", "format": "uuid"},
                                           "display_name": {"type": "string"},
                                           "email": {"type": "string", "format": "email"}},
          "required": ["id"], "additionalProperties": False}
LABEL = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 255},
                                          "color": {"type": "string", "pattern": "^#[0-9a-f]{6}$"}},
         "required": ["name"]}
ISSUE = {"type": "object", "properties": {
    "assignee": MEMBER, "reviewer": MEMBER, "created_by": MEMBER,
    "labels": {"type": "array", "items": LABEL}, "default_label": LABEL,
    "watchers": {"type": "array", "items": MEMBER}}, "required": ["assignee"]}


def _c(v) -> str:
    return json.dumps(v, separators=(",", ":"))


def test_repeated_objects_become_definitions():
    src = _c(ISSUE)
    out = json.loads(run("defs_factor", src))
    assert out["$defs"] == {"assignee": MEMBER, "labels": LABEL}
    refs = [v for v in out["properties"].values() if "$ref" in v]
    assert len(refs) == 4  # assignee, reviewer, created_by, default_label
    assert out["properties"]["watchers"]["items"]["$ref"] == out["properties"]["assignee"]["$ref"]
    assert sorted(out["$defs"].values(), key=_c) == sorted([MEMBER, LABEL], key=_c)
    assert len(run("defs_factor", src)) < len(src)
    assert same_calls(src, run("defs_factor", src), examples=10)


def test_exact_output():
    src = _c({"type": "object", "properties": {"a": MEMBER, "b": MEMBER}})
    assert run("defs_factor", src) == _c({
        "type": "object", "properties": {"a": {"$ref": "#/$defs/a"}, "b": {"$ref": "#/$defs/a"}},
        "$defs": {"a": MEMBER}})


def test_a_copy_of_an_existing_definition_references_it():
    src = _c({"type": "object", "properties": {"a": {"$ref": "#/$defs/Member"}, "b": MEMBER},
              "$defs": {"Member": MEMBER}})
    assert run("defs_factor", src) == _c({
        "type": "object", "properties": {"a": {"$ref": "#/$defs/Member"}, "b": {"$ref": "#/$defs/Member"}},
        "$defs": {"Member": MEMBER}})


def test_draft_07_uses_definitions_and_names_are_numbered():
    src = _c({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
              "properties": {"a": MEMBER, "b": MEMBER, "x": LABEL, "y": LABEL},
              "definitions": {"a": {"type": "integer"}}})
    out = json.loads(run("defs_factor", src))
    assert set(out["definitions"]) == {"a", "a2", "x"}
    assert out["properties"]["b"] == {"$ref": "#/definitions/a2"}
    assert same_calls(src, _c(out), examples=10)


def test_small_or_single_subschemas_stay():
    for schema in ({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}},
                   {"type": "object", "properties": {"a": MEMBER, "b": LABEL}}):
        assert run("defs_factor", _c(schema)) == _c(schema)


def test_declined_with_identifiers_or_foreign_refs():
    for extra in ({"$id": "https://example.com/s"}, {"properties": {"z": {"$ref": "other.json#/x"}}}):
        schema = dict(ISSUE)
        schema.update({k: v for k, v in extra.items() if k != "properties"})
        if "properties" in extra:
            schema["properties"] = dict(ISSUE["properties"], **extra["properties"])
        assert run("defs_factor", _c(schema)) == _c(schema)


def test_max_factors_and_verify_finds_the_same_calls(cli, tmp_path):
    """Round trip through the console script: ``verify ORIGINAL REWRITTEN`` exits 0, and the
    rewritten tool holds references."""
    from caveman_engine.compressors import toolschema_max

    tools = [{"name": "update_issue", "description": "Updates an issue of a project.",
              "inputSchema": ISSUE},
             {"name": "create_issue", "description": "Creates an issue in a project.",
              "inputSchema": dict(ISSUE, properties=dict(ISSUE["properties"], title={"type": "string"}))}]
    raw = json.dumps(tools, indent=2).encode()
    out = toolschema_max.compress(raw)
    after = envelope.load(out)
    for t in envelope.iter_tools(after):
        assert "$defs" in t.container["inputSchema"], t.name
        assert '"$ref":"#/$defs/' in envelope.dumps(t.container["inputSchema"]).decode()
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_bytes(raw)
    b.write_bytes(out)
    r = cli("verify", str(a), str(b), "--format", "json", timeout=300)
    assert r.returncode == 0, r.stdout.decode() + r.stderr.decode()
    rep = json.loads(r.stdout)
    assert rep["same"] is True
    assert {s["status"] for s in rep["schemas"]} <= {"proven", "tested"}
