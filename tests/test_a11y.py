"""`a11y` compressor (spec §6.13, §9.10, §10.2 #35)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from caveman_engine import jsonio
from caveman_engine.compressors import a11y

from .conftest import console_script


def ax(value):
    return {"type": "string", "value": value}


def prop(name, value):
    return {"name": name, "value": {"type": "booleanOrUndefined", "value": value}}


def node(nid, role, name=None, children=(), backend=None, ignored=False, value=None, props=(),
         **extra):
    n = {"nodeId": nid, "ignored": ignored, "role": {"type": "role", "value": role}}
    if name is not None:
        n["name"] = ax(name)
    if value is not None:
        n["value"] = ax(value)
    if props:
        n["properties"] = list(props)
    if children:
        n["childIds"] = list(children)
    if backend is not None:
        n["backendDOMNodeId"] = backend
    n.update(extra)
    return n


# The 6-node fixture of #35: page → button (focused, its StaticText child repeats the name and
# holds an InlineTextBox), textbox with a value, and an unknown role.
FIXTURE = [
    node("1", "RootWebArea", "Caveman Console", ["2", "4", "5"], backend=1),
    node("2", "button", "Save settings", ["3"], backend=42,
         props=[prop("focusable", True), prop("focused", True)], frameId="F1"),
    node("3", "StaticText", "Save settings", ["6"], backend=44),
    node("4", "textbox", "Email address", backend=43, value="ops@example.com",
         props=[{"name": "editable", "value": {"type": "token", "value": "plaintext"}},
                prop("focusable", True)]),
    node("5", "custom-widget", "Mystery", backend=45),
    node("6", "InlineTextBox", "Save settings"),
]
FIXTURE_BYTES = json.dumps(FIXTURE).encode()
EXPECTED_35 = (
    'page "Caveman Console"\n'
    '  [u16] button "Save settings" {focused}\n'
    '  [u17] textbox "Email address" = "ops@example.com" {editable}\n'
    '  custom-widget "Mystery"'
).encode()


def render(nodes):
    res = a11y.compress(json.dumps(nodes).encode())
    return None if res is None else res.data.decode()


def test_example_35_output_and_metadata():
    res = a11y.compress(FIXTURE_BYTES)
    assert res.data == EXPECTED_35
    assert res.method == "a11y"
    assert res.lossless_to_model in (None, False)
    meta = jsonio.loads(res.metadata)
    assert meta["uids"]["u16"]["backendDOMNodeId"] == jsonio.Number("42")
    assert res.metadata == (
        b'{"uids":{"u16":{"backendDOMNodeId":42,"frameId":"F1","nodeId":"2"},'
        b'"u17":{"backendDOMNodeId":43,"nodeId":"4"}}}'
    )


def test_nodes_envelope_form():
    assert a11y.compress(json.dumps({"nodes": FIXTURE}).encode()).data == EXPECTED_35


def test_ignored_nodes_are_flattened():
    nodes = [
        node("1", "RootWebArea", "P", ["2"]),
        node("2", "none", ignored=True, children=["3"]),
        node("3", "heading", "Title", ["4"]),
        node("4", "StaticText", "Body"),
    ]
    assert render(nodes) == 'page "P"\n  heading "Title"\n    text "Body"'


def test_empty_wrappers_and_labels_flatten_unless_actionable_or_stateful():
    nodes = [
        node("1", "RootWebArea", "P", ["2", "5", "7", "9"]),
        node("2", "generic", "", ["3"]),
        node("3", "LabelText", "", ["4"]),
        node("4", "link", "Docs", backend=36),
        node("5", "generic", None, ["6"], backend=37, props=[prop("clickable", True)]),
        node("6", "StaticText", "Go"),
        node("7", "none", None, ["8"], props=[prop("expanded", False)]),
        node("8", "StaticText", "Menu"),
        node("9", "LabelText", "Name"),
    ]
    assert render(nodes) == (
        'page "P"\n'
        '  [u10] link "Docs"\n'
        "  [u11] generic\n"
        '    text "Go"\n'
        "  none {collapsed}\n"
        '    text "Menu"\n'
        '  label "Name"'
    )


def test_states_order_and_value():
    nodes = [
        node("1", "checkbox", "Agree", backend=1, value="Agree", props=[
            prop("focused", True), prop("selected", True), prop("expanded", True),
            {"name": "checked", "value": {"type": "tristate", "value": "false"}},
            prop("disabled", True), {"name": "editable", "value": {"type": "token",
                                                                    "value": "richtext"}},
        ]),
    ]
    assert render(nodes) == (
        '[u1] checkbox "Agree" {disabled,unchecked,expanded,selected,focused,editable}'
    )


def test_uid_collisions_get_suffixes():
    nodes = [
        node("r", "RootWebArea", "P", ["a", "b", "c"]),
        node("a", "button", "A", backend=71),
        node("b", "button", "B", backend=71, frameId="other"),
        node("c", "button", "C", backend=71),
    ]
    res = a11y.compress(json.dumps(nodes).encode())
    assert res.data.decode() == (
        'page "P"\n  [u1z] button "A"\n  [u1z_2] button "B"\n  [u1z_3] button "C"'
    )
    assert jsonio.loads(res.metadata)["uids"]["u1z_2"] == {
        "backendDOMNodeId": jsonio.Number("71"), "frameId": "other", "nodeId": "b"
    }


def test_static_text_kept_when_it_repeats_nothing():
    nodes = [node("1", "paragraph", None, ["2"]), node("2", "StaticText", "hello")]
    assert render(nodes) == 'paragraph\n  text "hello"'


def test_strconv_quote_escaping():
    assert a11y.go_quote('a"b\\c\n\t\x01\x7f') == '"a\\"b\\\\c\\n\\t\\x01\\x7f"'
    # printable non-ASCII stays raw; non-printable runes use \u / \U escapes
    assert a11y.go_quote("caf\u00e9 \U0001f600") == '"caf\u00e9 \U0001f600"'
    assert a11y.go_quote("\u00a0\u200b\x85\U000e0001") == '"\\u00a0\\u200b\\u0085\\U000e0001"'
    nodes = [node("1", "heading", "line1\nline2 \u00e9")]
    assert render(nodes) == 'heading "line1\\nline2 \u00e9"'


@pytest.mark.parametrize(
    "doc",
    [
        [],
        {"nodes": []},
        {"other": FIXTURE},
        [node("1", "button", "x"), node("1", "button", "y")],  # duplicate id
        [node("", "button", "x")],  # empty id
        [node("1", "button", "x", ignored=True)],  # nothing visible
        [{"nodeId": "1", "ignored": False}],  # visible without a role
        [1, 2],
        "text",
    ],
)
def test_declines_invalid_trees(doc):
    assert a11y.compress(json.dumps(doc).encode()) is None


@pytest.mark.parametrize("data", [b"", b"not json", b"[", b"\xff"])
def test_declines_non_json(data):
    assert a11y.compress(data) is None


def test_cycles_do_not_loop():
    nodes = [
        node("1", "RootWebArea", "P", ["2"]),
        node("2", "group", "G", ["3"]),
        node("3", "group", "H", ["2"]),
    ]
    assert render(nodes) == 'page "P"\n  group "G"\n    group "H"'


def test_deep_tree_is_iterative():
    n = 3000
    nodes = [node(str(i), "group", f"g{i}", [str(i + 1)] if i + 1 < n else []) for i in range(n)]
    lines = render(nodes).split("\n")
    assert len(lines) == n and lines[-1] == "  " * (n - 1) + f'group "g{n - 1}"'


def test_cli_example_35(tmp_path):
    exe = console_script()
    db = tmp_path / "s" / "ccr.db"
    db.parent.mkdir(mode=0o700)
    env = {**os.environ, "CAVEMAN_CCR_DB": str(db)}
    r = subprocess.run([exe, "compress", "--type", "a11y"], input=FIXTURE_BYTES,
                       capture_output=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == EXPECTED_35
    report = json.loads(r.stderr)
    assert report["method"] == "a11y" and report["lossless_to_model"] is False
    assert report["ratio"] > 0 and report["basis"] == "inferred"
    back = subprocess.run([exe, "retrieve", report["recovery_handle"]], capture_output=True,
                          env=env, timeout=60)
    assert back.stdout == FIXTURE_BYTES
