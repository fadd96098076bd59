"""toolschema-max: what survives (names, types, enums, required, const, defaults), the prose
guard, savings against every other approach on the corpus, and the console script."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from caveman_engine.catalog import envelope, prose_guard, safe
from caveman_engine.compressors import toolschema_max, toolschema_safe
from caveman_engine.compressors.toolschema import is_constraint

CORPUS = Path(__file__).parent / "corpus"
FILES = sorted(CORPUS.glob("*.tools.json")) + sorted((CORPUS / "formats").glob("*.json"))


def test_metadata():
    assert toolschema_max.CONTENT_TYPE == "toolschema-max"
    assert toolschema_max.SAFETY_CLASS == "S4"


# ----------------------------------------------------------------------------- surface

def _dump(v) -> str:
    return json.dumps(v, sort_keys=True)


def surface(schema) -> dict:
    """What a caller sees of a schema, references resolved: parameter paths, and per path the
    types, enum/const values, defaults and required names (through anyOf/oneOf/allOf)."""
    out = {"names": set(), "types": {}, "enum": {}, "const": {}, "default": {}, "required": {}}
    root = schema

    def add(kind, path, values):
        if values:  # "required: []" says nothing
            out[kind].setdefault(path, set()).update(values)

    def walk(node, path, refs):
        if not isinstance(node, dict):
            return
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/") and ref not in refs:
            target = root
            for part in ref[2:].split("/"):
                target = target.get(part.replace("~1", "/").replace("~0", "~"), {}) if isinstance(target, dict) else {}
            walk(target, path, refs | {ref})
        t = node.get("type")
        if t is not None:
            add("types", path, t if isinstance(t, list) else [t])
        if isinstance(node.get("enum"), list):
            add("enum", path, [_dump(v) for v in node["enum"]])
        if "const" in node:
            add("const", path, [_dump(node["const"])])
        if "default" in node:
            add("default", path, [_dump(node["default"])])
        if isinstance(node.get("required"), list):
            add("required", path, [r for r in node["required"] if isinstance(r, str)])
        for k, v in (node.get("properties") or {}).items() if isinstance(node.get("properties"), dict) else ():
            out["names"].add(path + (k,))
            walk(v, path + (k,), refs)
        items = node.get("items")
        for it in (items if isinstance(items, list) else [items]) + list(node.get("prefixItems") or []):
            walk(it, path + ("[]",), refs)
        walk(node.get("additionalProperties"), path + ("{}",), refs)
        for pat, v in (node.get("patternProperties") or {}).items():
            walk(v, path + ("{" + pat + "}",), refs)
        for k in ("anyOf", "oneOf", "allOf"):
            for b in node.get(k) or []:
                walk(b, path, refs)
        for k in ("if", "then", "else"):
            walk(node.get(k), path, refs)

    walk(schema, (), frozenset())
    return out


def assert_survives(before_doc, after_doc):
    tb, ta = envelope.iter_tools(before_doc), envelope.iter_tools(after_doc)
    assert [t.name for t in tb] == [t.name for t in ta]
    for x, y in zip(tb, ta):
        for (kx, sx), (ky, sy) in zip(x.schemas(), y.schemas(), strict=True):
            assert kx == ky
            a, b = surface(envelope.to_plain(sx)), surface(envelope.to_plain(sy))
            where = f"{x.name} {kx}"
            assert a["names"] == b["names"], where
            assert a["types"] == b["types"], where
            assert a["required"] == b["required"], where
            assert a["const"] == b["const"], where
            for path, vals in a["enum"].items():
                assert vals <= b["enum"].get(path, set()), (where, path)
                assert b["enum"][path] - vals <= {"null"}, (where, path)  # Optional enum gets null
            for path, vals in a["default"].items():  # default: null on optional props may go
                assert vals - {"null"} <= b["default"].get(path, set()), (where, path)
            for path, vals in b["default"].items():
                assert vals <= a["default"].get(path, set()), (where, path)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_corpus_surface_survives(path):
    data = path.read_bytes()
    out = toolschema_max.compress(data)
    assert out is not None
    assert len(out) <= len(json.dumps(json.loads(data), ensure_ascii=False, separators=(",", ":")).encode())
    assert_survives(envelope.load(data), envelope.load(out))


# ----------------------------------------------------------------------------- generated catalogs

_WORDS = ["The", "the", "a", "an", "user", "must", "only", "at most", "just", "very", "please", "sure",
          "might", "A", "ID", "`code_x`", "https://example.com/the/a", "/tmp/the/file.txt", "foo_bar",
          "v1.2.3", "42", "3.5", "fooBar", "Make sure", "You can", "e.g.", "value", "file", "exists"]
_SENTENCE = st.lists(st.sampled_from(_WORDS), min_size=1, max_size=12).map(lambda ws: " ".join(ws) + ".")
_DESCRIPTION = st.lists(_SENTENCE, min_size=1, max_size=6).map(" ".join)
_VALUES = st.none() | st.booleans() | st.integers(-5, 5) | st.sampled_from(["a", "the", "A", "x_y"])


def _prop():
    base = st.fixed_dictionaries(
        {"type": st.sampled_from(["string", "integer", "number", "boolean", "array", "object"])},
        optional={"description": _DESCRIPTION, "title": st.sampled_from(["P", "Other title"]),
                  "default": _VALUES, "enum": st.lists(_VALUES, min_size=1, max_size=3, unique_by=_dump),
                  "const": _VALUES, "examples": st.just(["e"])},
    )
    return st.one_of(
        base,
        base.map(lambda p: {"anyOf": [p, {"type": "null"}], "default": None, "title": "Opt"}),
        st.just({"$ref": "#/$defs/Shared"}),
        st.just({"$ref": "#/$defs/Once", "description": "the once"}),
        base.map(lambda p: {"type": "array", "items": p}),
        base.map(lambda p: {"allOf": [p]}),
    )


_TOOL = st.builds(
    lambda name, desc, props, req, draft7: {
        "name": name,
        "description": desc,
        "inputSchema": {
            **({"$schema": "http://json-schema.org/draft-07/schema#"} if draft7 else {}),
            "title": name + "Arguments", "type": "object", "properties": props,
            "required": [r for r in req if r in props],
            "$defs": {"Shared": {"type": "string", "enum": ["s1", "s2"], "title": "Shared"},
                      "Once": {"type": "object", "properties": {"inner": {"type": "integer", "default": 3}},
                               "required": ["inner"]},
                      "Unused": {"type": "object", "properties": {"ghost": {"type": "string"}}}},
        },
    },
    st.from_regex(r"[a-z][a-z_]{0,8}", fullmatch=True),
    _DESCRIPTION,
    st.dictionaries(st.sampled_from(["q", "limit", "user_id", "mode", "the", "a"]), _prop(), max_size=4),
    st.lists(st.sampled_from(["q", "limit", "user_id", "mode", "the", "a"]), max_size=3, unique=True),
    st.booleans(),
)


_PROTECTED = re.compile(r"https?://\S+|`[^`]+`|[\w.-]*/[\w./-]+|\b\w*[_\d]\w*\b|\b[a-z]+[A-Z]\w*\b")


_WORD = re.compile(r"[\w'-]+|[^\w\s]")


def _minus_articles(a: list[str], b: list[str]) -> bool:
    """``b`` is ``a`` with some articles deleted (the first word may change case)."""
    i = 0
    for k, w in enumerate(b):
        while i < len(a) and a[i] != w and not (k == 0 and a[i].lower() == w.lower()):
            if a[i].lower() not in ("a", "an", "the"):
                return False
            i += 1
        if i == len(a):
            return False
        i += 1
    return all(x.lower() in ("a", "an", "the") for x in a[i:])


def _schema_descriptions(tool):
    """A tool's description, then every description of its schemas."""
    from caveman_engine.catalog import schema as js

    out = [tool.container.get("description")]
    for _, s in tool.schemas():
        for n in js.nodes(s):
            if isinstance(n.get("description"), str):
                out.append(n["description"])
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(st.lists(_TOOL, min_size=1, max_size=3, unique_by=lambda t: t["name"]), st.sampled_from(["mcp", "openai", "tools"]))
def test_generated_catalogs_survive(tools, shape):
    if shape == "openai":
        doc = [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                                 "parameters": t["inputSchema"]}} for t in tools]
    elif shape == "tools":
        doc = {"tools": tools}
    else:
        doc = tools
    data = json.dumps(doc, indent=1).encode()
    out = toolschema_max.compress(data)
    assert out is not None and len(out) <= len(data)
    before, after = envelope.load(data), envelope.load(out)
    assert_survives(before, after)
    # Descriptions: the reducer's choice of whole sentences, then only removed words;
    # identifiers, numbers, paths, URLs and code untouched; constraint sentences lose at most
    # articles.
    reduced = envelope.load(envelope.dumps(toolschema_max.reduce_tree(
        safe.apply_tree(safe.apply_tree(before), toolschema_max.PRE_RULES))))
    # defs_factor writes a repeated subschema once: each description left must come from one
    # the reducer wrote for the same tool.
    for x, y in zip(envelope.iter_tools(reduced), envelope.iter_tools(after), strict=True):
        rs, ms = _schema_descriptions(x), _schema_descriptions(y)
        assert _follows(rs[0], ms[0]), (rs[0], ms[0])
        for m in ms[1:]:
            assert any(_follows(r, m) for r in rs[1:]), (m, rs)


def _follows(r, m) -> bool:
    """``m`` is ``r`` after the word-level rules: the same literals and sentences, and each
    constraint sentence minus articles at most."""
    if r is None or m is None:
        return r is m
    if _PROTECTED.findall(r) != _PROTECTED.findall(m):
        return False
    pr, pm = prose_guard.pieces(r), prose_guard.pieces(m)
    if len(pr) != len(pm):
        return False
    return all(_minus_articles(_WORD.findall(a), _WORD.findall(b))
               for a, b in zip(pr[::2], pm[::2]) if is_constraint(a))


# ----------------------------------------------------------------------------- prose guard

@pytest.mark.parametrize("text,expected", [
    ("The user ID of the account to update.", "User ID of account to update."),
    ("Make sure the file exists. The path must be absolute.", "Make sure file exists. Path must be absolute."),
    ("Thanks! This is very useful.", "Thanks! This is useful."),
    ("Option A or B. You can use this tool to read a file.", "Option A or B. Use this tool to read file."),
    ("returns the value of a key", "returns value of key"),
    ("Returns the list, e.g. the foo_bar value.", "Returns list, e.g. foo_bar value."),
    ("List:\n- the first item\n- a second one", "List:\n- first item\n- second one"),
    # code, URLs and paths are protected; an article before them stays (shrink_spec §4.2 #5)
    ("Use the flag `the just` at https://example.com/the/just or the /tmp/the/file.",
     "Use flag `the just` at https://example.com/the/just or the /tmp/the/file."),
    ("You can https://example.com/the/a.", "You can https://example.com/the/a."),
    ("The. The foo_bar.", "The. The foo_bar."),  # "foo_bar" cannot take the capital
    ("e.g. the the Make sure.", "e.g. the the Make sure."),  # would create a sentence
    ("See https://example.com/x just.", "See https://example.com/x just."),  # no "." glued to a URL
    ("The. just.", "The. just."),  # no word-less clause
    ("It seems the server might be down.", "It seems server might be down."),
    ("Only one of the fields is allowed; just pick the first.", "Only one of fields is allowed; just pick first."),
    ("At most 5 items, simply the best.", "At most 5 items, simply best."),
    ("Please provide the mode.", "Provide mode."),
])
def test_prose_guard(text, expected):
    assert prose_guard.shrink_description(text) == expected


def test_prose_guard_protected_names():
    assert prose_guard.shrink_description("Pass the a flag, not the b flag.", {"a"}) == "Pass a flag, not b flag."


# ----------------------------------------------------------------------------- savings

def _tokens():
    from caveman_engine.tokens import make_counter

    return make_counter(None)


def test_max_saves_at_least_as_much_as_safe_and_25_percent():
    """Not against ``toolschema`` itself: its 80-byte lead cap cuts sentences that max keeps
    whole (azure, brave-search and circleci are smaller under toolschema)."""
    count = _tokens().count
    base_total = max_total = 0
    for path in FILES:
        raw = path.read_bytes()
        minified = json.dumps(json.loads(raw), ensure_ascii=False, separators=(",", ":")).encode()
        base = count(minified)
        mx = count(toolschema_max.compress(raw))
        assert mx <= min(base, count(toolschema_safe.compress(raw))), path.name
        base_total += base
        max_total += mx
    assert (base_total - max_total) / base_total >= 0.25


@pytest.mark.parametrize("text", ["", "nope", "3", "[1]", '{"tools":"x"} 1'])
def test_declines(text):
    assert toolschema_max.compress(text.encode()) is None


def test_cli_compress(cli):
    data = (CORPUS / "fetch.tools.json").read_bytes()
    r = cli("compress", "--type", "toolschema-max", input=data)
    assert r.returncode == 0
    assert r.stdout == toolschema_max.compress(data)
    report = json.loads(r.stderr)
    assert report["method"] == "toolschema-max" and report["tokens_after"] < report["tokens_before"]
    r = cli("compress", "--type", "toolschema-safe", input=data)
    assert r.stdout == toolschema_safe.compress(data)


# ----------------------------------------------------------------------------- peers, per catalog

FIXTURES = Path(__file__).parent / "fixtures" / "catalogs"
MONGODB = FIXTURES / "mongodb.tools.json"
AGENT = FIXTURES / "agent-tools.tools.json"


def _peers(raw: bytes) -> dict[str, bytes | None]:
    """Every approach toolschema-max must match or beat (toolism only when installed)."""
    obj = json.loads(raw)
    peers = {
        "minified": json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode(),
        "toolschema-safe": toolschema_safe.compress(raw),
    }
    try:
        import toolism
        from toolism.io import dumps
    except ImportError:
        return peers
    for level in ("safe", "annotations"):
        res = toolism.slim(toolism.parse(obj), level=level, tokenizer="heuristic")
        peers["toolism-" + level] = dumps(res.toolset, indent=None).encode()
    return peers


@pytest.mark.parametrize("path", FILES + [MONGODB, AGENT], ids=lambda p: p.name)
def test_max_beats_every_peer_on_every_catalog(path):
    count = _tokens().count
    raw = path.read_bytes()
    mx = count(toolschema_max.compress(raw))
    for name, out in _peers(raw).items():
        if out is not None:
            assert mx <= count(out), (path.name, name)


def test_toolism_peers_present_or_skipped():
    pytest.importorskip("toolism")
    assert set(_peers(b'[{"name":"t","inputSchema":{"type":"object"}}]')) >= {"toolism-safe", "toolism-annotations"}


def test_corpus_median_and_total():
    count = _tokens().count
    saved = []
    base_total = max_total = 0
    for path in FILES:
        raw = path.read_bytes()
        base = count(json.dumps(json.loads(raw), ensure_ascii=False, separators=(",", ":")).encode())
        mx = count(toolschema_max.compress(raw))
        saved.append((base - mx) / base)
        base_total += base
        max_total += mx
    saved.sort()
    n = len(saved)
    median = saved[n // 2] if n % 2 else (saved[n // 2 - 1] + saved[n // 2]) / 2
    assert (base_total - max_total) / base_total >= 0.30
    assert median >= MEDIAN_TARGET


# issue 13 asked 25 %; whole sentences instead of the 80-byte lead cap, short descriptions of up
# to three sentences kept whole, BFCL's float note kept, and imperative sentences ("Use
# topic parameter to…", "Batch multiple URLs in one call.") and nested list headings kept
# (issue 25) measure 20.5 % (docs/catalog.md): the median catalogs are terse ones where
# little else can go.
MEDIAN_TARGET = 0.20


@pytest.mark.parametrize("path", FILES + [MONGODB, AGENT], ids=lambda p: p.name)
def test_idempotent(path):
    once = toolschema_max.compress(path.read_bytes())
    again = toolschema_max.compress(once)
    assert again is None or again == once


def test_mongodb_nested_anyof_descriptions():
    """A MongoDB-MCP-shaped catalog: union descriptions repeated in every branch (and in the
    branches' members) are said once; toolism's annotations level saves less."""
    from caveman_engine.catalog import schema as js

    raw = MONGODB.read_bytes()
    out = toolschema_max.compress(raw)
    after = envelope.load(out)
    assert_survives(envelope.load(raw), after)
    for tool in envelope.iter_tools(after):
        for _, s in tool.schemas():
            for node in js.nodes(s):
                d = node.get("description")
                for kw in ("anyOf", "oneOf", "items"):
                    subs = node.get(kw)
                    for b in subs if isinstance(subs, list) else [subs]:
                        if isinstance(b, dict) and isinstance(d, str):
                            assert b.get("description") != d, (tool.name, kw)
    count = _tokens().count
    base = count(json.dumps(json.loads(raw), separators=(",", ":")).encode())
    assert (base - count(out)) / base >= 0.5
    peers = _peers(raw)
    if "toolism-annotations" in peers:
        assert count(out) < count(peers["toolism-annotations"])


def test_mongodb_fixture_accepts_the_same_calls():
    """``verify`` finds no difference: the max-only rules change annotations, never validation."""
    pytest.importorskip("hypothesis_jsonschema")
    from caveman_engine.catalog import verify

    raw = MONGODB.read_bytes()
    before = envelope.iter_tools(envelope.load(raw))
    after = envelope.iter_tools(envelope.load(toolschema_max.compress(raw)))
    for x, y in zip(before, after, strict=True):
        for (_, sx), (_, sy) in zip(x.schemas(), y.schemas(), strict=True):
            status, *_ = verify.compare_schemas(envelope.to_plain(sx), envelope.to_plain(sy), examples=5)
            assert status != verify.DIFFERENT, x.name


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(st.lists(_TOOL, min_size=1, max_size=2, unique_by=lambda t: t["name"]))
def test_generated_catalogs_idempotent(tools):
    once = toolschema_max.compress(json.dumps(tools, indent=1).encode())
    again = toolschema_max.compress(once)
    assert again is None or again == once
