"""Property tests for `toolschema` and `toolschema-annotations` over generated tool catalogs in
every envelope (MCP `inputSchema`, Anthropic `input_schema`, OpenAI `function.parameters`, a
`{"tools": ...}` wrapper, a single envelope, a bare schema), serialised with varied whitespace.

Checked against an independent reading of toolschema_spec.md §1.3-1.5 and §2.3 (the walkers
below work on Python trees, not bytes): valid output, survival of the selection surface (tool
names, name-map keys, type/enum/required/default/const/$ref), constraint sentences kept whole,
idempotence, and for the strip: the output is the input minus byte ranges that each hold exactly
one DROP member of a schema position (plus one separator)."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from caveman_engine import jsonio
from caveman_engine.compressors import toolschema as ts
from caveman_engine.compressors import toolschema_annotations as ta

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SMALL_SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --------------------------------------------------------------------------- generators

KEYWORD_NAMES = [
    "title", "description", "examples", "example", "$comment", "$schema", "default", "required", "enum",
    "const", "deprecated", "type", "items", "properties", "$ref", "$defs", "not", "name", "inputSchema",
]
names = st.one_of(
    st.sampled_from(KEYWORD_NAMES),
    st.text(alphabet="abcXYZ_$-é😀<&\u2028 ", min_size=1, max_size=6),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(alphabet="ab \"\\/<>&\u2028\x01é😀.", max_size=8),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(names, inner, max_size=3)),
    max_leaves=4,
)

SENTENCES = [
    "Search the workspace for files.",
    "This tool walks the entire tree, honours .gitignore, and returns ranked matches with context lines.",
    "The path must be an absolute path.",
    "Provide exactly one of body or body_b64.",
    "Values above 100 are not allowed and negative numbers are invalid.",
    "Use Node.js. Then run it.",
    "Target path, e.g. /srv/data.",
    "Pi is 3.14.",
    "See Fig. Two for the layout of the returned object and its nested fields.",
    "Plan A. Then B.",
    "It is a café.",
    "État des lieux complet du dépôt, avec les fichiers modifiés et les branches distantes.",
    "Wait...",
    "Format: ISO 8601 or RFC3339.",
    "The number of items to return in a single page of results, which the server paginates for you.",
    "Stop! Go.",
    "Dates are rendered in the caller's local time zone unless told otherwise.",
    "😀 emoji 漢字 text that is not ASCII at all and goes on for a while longer than eighty bytes.",
    "Use <b>bold</b> & more.",
]
SEPARATORS = [" ", "  ", "\n", "\n\n", "\t", " \u00a0", "\u2028"]


@st.composite
def descriptions(draw):
    parts = draw(st.lists(st.sampled_from(SENTENCES), min_size=1, max_size=7))
    out = draw(st.sampled_from(["", " ", "\n"]))
    for i, p in enumerate(parts):
        if i:
            out += draw(st.sampled_from(SEPARATORS))
        out += p
    if draw(st.booleans()):
        out += draw(st.text(alphabet="aé .XZ", max_size=40))
    return out + draw(st.sampled_from(["", " ", "\n"]))


leaf_schemas = st.fixed_dictionaries(
    {},
    optional={
        "type": st.one_of(st.sampled_from(["string", "object", "array", "integer"]), st.just(["string", "null"])),
        "description": st.one_of(descriptions(), json_values),
        "title": st.text(max_size=5),
        "examples": st.lists(json_values, max_size=2),
        "example": json_values,
        "$comment": st.text(max_size=5),
        "$schema": st.just("https://json-schema.org/draft/2020-12/schema"),
        "deprecated": st.booleans(),
        "enum": st.lists(json_values, max_size=3),
        "required": st.lists(names, max_size=3),
        "default": json_values,
        "const": json_values,
        "$ref": st.sampled_from(["#/$defs/a", "#/properties/title", "#"]),
        "format": st.sampled_from(["uri", "date-time"]),
        "minimum": st.integers(0, 5),
        "x-ui": st.dictionaries(names, json_values, max_size=2),
        "dependentRequired": st.dictionaries(names, st.lists(names, max_size=2), max_size=2),
    },
)


def _extend(inner):
    return st.fixed_dictionaries(
        {},
        optional={
            "type": st.just("object"),
            "title": st.text(max_size=5),
            "description": descriptions(),
            "deprecated": st.booleans(),
            "properties": st.dictionaries(names, inner, max_size=3),
            "$defs": st.dictionaries(names, inner, max_size=2),
            "definitions": st.dictionaries(names, inner, max_size=1),
            "patternProperties": st.dictionaries(names, inner, max_size=1),
            "dependentSchemas": st.dictionaries(names, inner, max_size=1),
            "dependencies": st.dictionaries(names, st.one_of(inner, st.lists(names, max_size=2)), max_size=1),
            "items": st.one_of(inner, st.lists(inner, max_size=2)),
            "anyOf": st.lists(inner, max_size=2),
            "not": inner,
            "additionalProperties": st.one_of(st.booleans(), inner),
            "x-vendor": st.dictionaries(names, inner, max_size=1),
            "contentSchema": inner,
        },
    )


schemas = st.recursive(leaf_schemas, _extend, max_leaves=6)


@st.composite
def envelopes(draw):
    kind = draw(st.sampled_from(["mcp", "anthropic", "openai"]))
    name = draw(names)
    desc = draw(st.one_of(descriptions(), json_values))
    schema = draw(schemas)
    if kind == "mcp":
        env = {"name": name, "description": desc, "inputSchema": schema}
        if draw(st.booleans()):
            env["annotations"] = {"title": draw(st.text(max_size=6)), "readOnlyHint": draw(st.booleans())}
        if draw(st.booleans()):
            env["_meta"] = {"title": "vendor", "examples": [1]}
        if draw(st.booleans()):
            env["title"] = draw(st.text(max_size=6))
        return env
    if kind == "anthropic":
        env = {"name": name, "description": desc, "input_schema": schema}
        if draw(st.booleans()):
            env["cache_control"] = {"type": "ephemeral"}
        return env
    return {
        "type": "function",
        "function": {"name": name, "description": desc, "parameters": schema, "strict": draw(st.booleans())},
    }


@st.composite
def documents(draw):
    form = draw(st.sampled_from(["array", "tools", "envelope", "bare", "nested"]))
    tools = draw(st.lists(envelopes(), max_size=3))
    if form == "array":
        doc = tools
    elif form == "tools":
        doc = {"tools": tools, "description": draw(descriptions()), "title": "catalog"}
    elif form == "envelope":
        doc = draw(envelopes())
    elif form == "bare":
        doc = draw(schemas)
    else:
        doc = [tools, draw(scalars)]
    indent, seps = draw(
        st.sampled_from(
            [(None, (",", ":")), (2, (",", ": ")), ("\t", (" , ", " : ")), (None, (", ", ": ")), (1, ("\n,", ":\r\n"))]
        )
    )
    text = json.dumps(doc, indent=indent, separators=seps, ensure_ascii=draw(st.booleans()))
    return text.encode("utf-8", "surrogatepass")


# --------------------------------------------------------------------------- toolschema reference reading

DOORS = ("input_schema", "inputSchema", "parameters")
TS_DROP = {"examples", "example", "$comment", "title", "$schema"}
TS_VERBATIM = {"enum", "required", "default", "const"}
TS_USER_MAPS = {
    "properties", "$defs", "definitions", "patternProperties", "dependentSchemas", "dependentRequired",
    "dependencies",
}
GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"


def check_description(before: str, after: str) -> None:
    t = before.strip(GO_SPACE)
    if len(t.encode()) <= 160:
        assert after == t
        return
    assert len(after.encode()) <= len(t.encode())
    pos = 0
    constraints = [s for s in ts.split_sentences(t) if ts.is_constraint(s)]
    for s in constraints:  # every constraint sentence survives whole, in order
        found = after.find(s, pos)
        assert found >= 0, (s, after)
        pos = found + len(s)
    # at most one non-constraint lead of at most 80 bytes is added
    assert len(after.encode()) <= sum(len(s.encode()) + 1 for s in constraints) + 80


def check_schema(before, after, user: bool) -> None:
    if type(before) is dict:
        assert type(after) is dict
        if user:
            assert set(after) == set(before)  # every name survives, whatever it spells
            for k in before:
                check_schema(before[k], after[k], False)
            return
        assert set(after) == set(before) - TS_DROP
        for k in after:
            if k in TS_VERBATIM:
                assert after[k] == before[k]
            elif k == "description" and type(before[k]) is str:
                check_description(before[k], after[k])
            else:
                check_schema(before[k], after[k], k in TS_USER_MAPS)
    elif type(before) is list:
        assert type(after) is list and len(after) == len(before)
        for b, a in zip(before, after):
            check_schema(b, a, False)
    else:
        assert after == before  # type, $ref, format, names in required lists...


def check_envelope(before, after) -> None:
    if type(before) is dict:
        assert type(after) is dict and set(after) == set(before)
        for k in before:
            if k in DOORS:
                check_schema(before[k], after[k], False)
            elif k == "function":
                check_envelope(before[k], after[k])
            elif k == "description" and type(before[k]) is str:
                check_description(before[k], after[k])
            else:
                assert after[k] == before[k]  # name, annotations, _meta, cache_control, ...
    elif type(before) is list:
        assert type(after) is list and len(after) == len(before)
        for b, a in zip(before, after):
            check_envelope(b, a)
    else:
        assert after == before


def check_document(before, after) -> None:
    if type(before) is list:
        check_envelope(before, after)
    elif type(before) is dict and "tools" in before:
        assert set(after) == set(before)
        for k in before:
            if k == "tools":
                check_envelope(before[k], after[k])
            else:
                assert after[k] == before[k]
    elif type(before) is dict and {"name", "input_schema", "inputSchema", "parameters", "function"} & set(before):
        check_envelope(before, after)
    else:
        check_schema(before, after, False)


def reduce_is_stable(text: str) -> bool:
    """REDUCE is idempotent on ``text`` unless the capped lead ends in whitespace other than
    U+0020 (the cap trims only spaces; the reference behaves the same, see
    test_toolschema.py::test_reduce_not_idempotent_when_the_capped_lead_ends_in_whitespace)."""
    t = text.strip(GO_SPACE)
    if len(t.encode()) <= 160:
        return True
    lead = next((s for s in ts.split_sentences(t) if not ts.is_constraint(s)), None)
    if lead is None:
        return True
    capped = ts.cap_lead(lead)
    return not (capped and capped[-1] in GO_SPACE)


def descriptions_stable(tree) -> bool:
    stack = [tree]
    while stack:
        v = stack.pop()
        if type(v) is dict:
            for k, x in v.items():
                if k == "description" and type(x) is str and not reduce_is_stable(x):
                    return False
                stack.append(x)
        elif type(v) is list:
            stack.extend(v)
    return True


@SETTINGS
@given(documents())
def test_toolschema_properties(data):
    out = ts.compress(data)
    assert out is not None
    assert jsonio.valid(out)
    out.decode("utf-8")
    check_document(jsonio.loads(data), jsonio.loads(out))
    again = ts.compress(out)
    if descriptions_stable(jsonio.loads(data)):
        assert again == out  # idempotent
    else:
        check_document(jsonio.loads(out), jsonio.loads(again))
    # compress_tree agrees with compress and does not modify its input
    tree = jsonio.loads(data)
    snapshot = jsonio.dumps(tree)
    assert jsonio.dumps(ts.compress_tree(tree)) == out
    assert jsonio.dumps(tree) == snapshot


@SETTINGS
@given(
    st.lists(
        st.sampled_from(SENTENCES + ["A. B.", "x" * 90, "Must.", "é" * 50, "## Usage", "- item", "Plan A.\n\n    b"]),
        min_size=1,
        max_size=8,
    ),
    st.sampled_from(SEPARATORS + ["\n\n    ", "\x0b", "\r\n"]),
)
def test_reduce_properties(parts, sep):
    text = sep.join(parts)
    out = ts.reduce_description(text)
    check_description(text, out)
    if reduce_is_stable(text):
        assert ts.reduce_description(out) == out


# --------------------------------------------------------------------------- annotation strip reference reading

TA_DROP = {"$schema", "title", "examples", "deprecated"}
TA_NAME_MAPS = {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
TA_CHILDREN = {
    "items", "prefixItems", "additionalItems", "unevaluatedItems", "additionalProperties", "unevaluatedProperties",
    "propertyNames", "contains", "not", "if", "then", "else", "allOf", "anyOf", "oneOf",
}


class Obj(list):
    """A decoded object as its list of (key, value) pairs: duplicates and order kept."""


def _pairs(data: bytes):
    return jsonio.loads(data, object_pairs_hook=Obj)


def expect_catalog(v):
    if type(v) is list:
        return [expect_catalog(e) for e in v]
    if type(v) is Obj:
        return Obj(
            (k, expect_schema(x) if k in DOORS else expect_catalog(x) if k == "function" else x) for k, x in v
        )
    return v


def expect_schema(v):
    if type(v) is Obj:
        return Obj(
            (k, expect_namemap(x) if k in TA_NAME_MAPS else expect_schema(x) if k in TA_CHILDREN else x)
            for k, x in v
            if k not in TA_DROP
        )
    if type(v) is list:
        return [expect_schema(e) for e in v]
    return v


def expect_namemap(v):
    if type(v) is Obj:
        return Obj((k, expect_schema(x)) for k, x in v)
    return v


def _same(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if type(a) is Obj:
        return len(a) == len(b) and all(ka == kb and _same(va, vb) for (ka, va), (kb, vb) in zip(a, b))
    if type(a) is list:
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


@SETTINGS
@given(documents())
def test_annotation_strip_properties(data):
    out, ok = ta.strip_annotations(data)
    assert ok
    assert jsonio.valid(out)
    assert ta.strip_annotations(out) == (out, True)  # idempotent
    # the output is the input with some byte ranges removed ...
    ranges = ta.strip_ranges(data)
    if not ranges:
        assert out is data
    assert ta.apply_ranges(data, ranges) == out
    assert all(a < b for a, b in ranges)
    assert all(ranges[i][1] <= ranges[i + 1][0] for i in range(len(ranges) - 1))
    # ... each holding exactly one DROP member plus separators/whitespace ...
    for a, b in ranges:
        core = data[a:b].strip(b" \t\n\r,")
        member = json.loads(b"{" + core + b"}", object_pairs_hook=list)
        assert len(member) == 1 and member[0][0] in TA_DROP
    # ... and exactly the DROP members of schema positions are gone, everything else is in place
    assert _same(_pairs(out), expect_catalog(_pairs(data)))


@SMALL_SETTINGS
@given(documents(), st.sampled_from([b"", b" ", b"\n", b" \t\r\n "]))
def test_both_accept_surrounding_whitespace(data, pad):
    padded = pad + data + pad
    assert ts.compress(padded) == ts.compress(data)
    out, ok = ta.strip_annotations(padded)
    assert ok and out.startswith(pad) and out.endswith(pad)
