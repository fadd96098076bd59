"""`toolschema-annotations` (toolschema_spec.md §2 and §3.2): the byte-span strip. TA1-TA4
rewritten, the separator rule of §2.3.2, the entry points of §2.4, the derived rows of §3.4, the
documentation example, depth. The conformance vectors run in tests/test_toolschema.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from caveman_engine import jsonio
from caveman_engine.compressors import toolschema_annotations as ta

CONF = Path(__file__).resolve().parent / "conformance" / "toolschema"


def strip(data: str | bytes) -> tuple[bytes, bool]:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return ta.strip_annotations(data)


def _check_ok_row(inp: bytes, want: bytes, ok: bool) -> None:
    out, got_ok = ta.strip_annotations(inp)
    assert (out, got_ok) == (want, ok)
    assert ta.compress(inp) == (want if ok else None)
    if ok:
        assert jsonio.valid(out)
        assert ta.strip_annotations(out) == (out, True)


# --------------------------------------------------------------------------- TA1

TA1 = [
    (
        '[{"name":"Read","input_schema":{"$schema":"https://json-schema.org/draft/2020-12/schema","title":"Read args",'
        '"deprecated":false,"examples":[{"path":"a.go"}],"type":"object"}}]',
        '[{"name":"Read","input_schema":{"type":"object"}}]',
        True,
    ),
    (
        '[{"name":"Read","description":"Read a file. Returns its contents.","input_schema":{"description":"args","title":"x"}}]',
        '[{"name":"Read","description":"Read a file. Returns its contents.","input_schema":{"description":"args"}}]',
        True,
    ),
    (
        '[{"name":"Read","title":"Read a file","deprecated":true,"examples":["read a.go"],"input_schema":{"title":"drop"}}]',
        '[{"name":"Read","title":"Read a file","deprecated":true,"examples":["read a.go"],"input_schema":{}}]',
        True,
    ),
    (
        '[{"name":"Read","annotations":{"title":"Read a file","readOnlyHint":true},"inputSchema":{"title":"drop","type":"object"}}]',
        '[{"name":"Read","annotations":{"title":"Read a file","readOnlyHint":true},"inputSchema":{"type":"object"}}]',
        True,
    ),
    (
        '[{"name":"Read","x-vendor":{"title":"vendor label","examples":[1],"nested":{"deprecated":true}},"_meta":'
        '{"title":"meta"},"input_schema":{"title":"drop"}}]',
        '[{"name":"Read","x-vendor":{"title":"vendor label","examples":[1],"nested":{"deprecated":true}},"_meta":'
        '{"title":"meta"},"input_schema":{}}]',
        True,
    ),
    (
        '[{"name":"Read","input_schema":{"type":"object","x-ui":{"title":"Widget","examples":[1]},"$comment":"kept","title":"drop"}}]',
        '[{"name":"Read","input_schema":{"type":"object","x-ui":{"title":"Widget","examples":[1]},"$comment":"kept"}}]',
        True,
    ),
    (
        '[{"type":"function","title":"envelope","function":{"name":"read","description":"d","strict":true,'
        '"parameters":{"title":"drop","type":"object"}}}]',
        '[{"type":"function","title":"envelope","function":{"name":"read","description":"d","strict":true,'
        '"parameters":{"type":"object"}}}]',
        True,
    ),
    (
        '[{"name":"Write","input_schema":{"type":"object","title":"Write args","properties":{"title":{"type":"string",'
        '"title":"The title"},"examples":{"type":"array","examples":[1]}},"required":["title"]}}]',
        '[{"name":"Write","input_schema":{"type":"object","properties":{"title":{"type":"string"},"examples":'
        '{"type":"array"}},"required":["title"]}}]',
        True,
    ),
    (
        '[{"name":"T","input_schema":{"$defs":{"title":{"type":"string","title":"x"}},"properties":{"a":{"$ref":"#/$defs/title"}}}}]',
        '[{"name":"T","input_schema":{"$defs":{"title":{"type":"string"}},"properties":{"a":{"$ref":"#/$defs/title"}}}}]',
        True,
    ),
    (
        '[{"name":"T","input_schema":{"properties":{"mode":{"enum":[{"title":"keep"},"deprecated"],"title":"Mode"},'
        '"a":{"const":{"title":"c"}},"b":{"default":{"examples":[1]}}}}}]',
        '[{"name":"T","input_schema":{"properties":{"mode":{"enum":[{"title":"keep"},"deprecated"]},'
        '"a":{"const":{"title":"c"}},"b":{"default":{"examples":[1]}}}}}]',
        True,
    ),
    (
        '[{"name":"T","input_schema":{"anyOf":[{"title":"a","type":"string"},{"title":"b"}],"items":{"title":"i",'
        '"type":"number"},"not":{"examples":[1]}}}]',
        '[{"name":"T","input_schema":{"anyOf":[{"type":"string"},{}],"items":{"type":"number"},"not":{}}}]',
        True,
    ),
    (
        '[{"name":"A","input_schema":{"title":"a"}},{"name":"B","input_schema":{"title":"b"},"cache_control":{"type":"ephemeral"}}]',
        '[{"name":"A","input_schema":{}},{"name":"B","input_schema":{},"cache_control":{"type":"ephemeral"}}]',
        True,
    ),
    (
        '[{"name":"A","input_schema":{"title":"a","type":"object"}}]',
        '[{"name":"A","input_schema":{"type":"object"}}]',
        True,
    ),
    (
        '[{"name":"A","input_schema":{"title":"a","examples":[1]}}]',
        '[{"name":"A","input_schema":{}}]',
        True,
    ),
    (
        '[{"name":"A","input_schema":{"\\u0074itle":"a","type":"object"}}]',
        '[{"name":"A","input_schema":{"type":"object"}}]',
        True,
    ),
    (
        '[{"name":"A","description":"d","input_schema":{"type":"object"}}]',
        '[{"name":"A","description":"d","input_schema":{"type":"object"}}]',
        True,
    ),
    ('[{"name":"A",', '[{"name":"A",', False),
    ('[{"name":"A"}] {', '[{"name":"A"}] {', False),
    ("", "", False),
]


@pytest.mark.parametrize("inp, want, ok", TA1, ids=[f"ta1_{i + 1}" for i in range(len(TA1))])
def test_ta1(inp, want, ok):
    _check_ok_row(inp.encode(), want.encode(), ok)


def test_ta1_nothing_to_strip_returns_the_same_object():
    inp = b'[{"name":"A","description":"d","input_schema":{"type":"object"}}]'
    out, ok = ta.strip_annotations(inp)
    assert ok and out is inp


# --------------------------------------------------------------------------- TA2, TA3

TA2_IN = (
    "[\n  { \"name\" : \"First\" ,\n    \"input_schema\" : { \"type\" : \"object\" ,\n"
    "      \"title\" : \"drop me\" ,\n      \"maxItems\" : 1.50 } } ,\n"
    "  { \"name\" : \"Second\" , \"description\" : \"tab\\there\" }\n]"
)
TA2_WANT = (
    "[\n  { \"name\" : \"First\" ,\n    \"input_schema\" : { \"type\" : \"object\" ,\n"
    "      \"maxItems\" : 1.50 } } ,\n"
    "  { \"name\" : \"Second\" , \"description\" : \"tab\\there\" }\n]"
)


def test_ta2_preserves_order_and_spacing():
    out, ok = strip(TA2_IN)
    assert ok and out == TA2_WANT.encode()
    assert [t["name"] for t in json.loads(out)] == ["First", "Second"]
    # the bytes removed run from just after "object" to just after "drop me"
    start = TA2_IN.index('"object"') + len('"object"')
    end = TA2_IN.index('"drop me"') + len('"drop me"')
    assert ta.strip_ranges(TA2_IN.encode()) == [(start, end)]


def test_ta3_deterministic():
    inp = (
        b'[{"name":"A","input_schema":{"title":"a","properties":{"p":{"title":"t","type":"string"}}}},'
        b'{"name":"B","input_schema":{"examples":[1,2]},"cache_control":{"type":"ephemeral"}}]'
    )
    want = (
        b'[{"name":"A","input_schema":{"properties":{"p":{"type":"string"}}}},{"name":"B","input_schema":{},'
        b'"cache_control":{"type":"ephemeral"}}]'
    )
    first = ta.strip_annotations(inp)
    assert first == (want, True)
    for _ in range(8):
        assert ta.strip_annotations(inp) == first


def test_ta4_registered_forced_only_s4():
    from caveman_engine import registry

    found = registry.compressor("toolschema-annotations")
    assert found is not None
    module, cls = found
    assert module.CONTENT_TYPE == "toolschema-annotations"
    assert cls.name == "S4" and cls.byte_safe is False and cls.requires_ccr is True
    assert registry.entry("toolschema-annotations").detected is False
    assert registry.entry("toolschema").detected is False
    assert module.compress(b'[{"name":"A","input_schema":{"title":"a","type":"object"}}]') == (
        b'[{"name":"A","input_schema":{"type":"object"}}]'
    )
    assert module.strip_annotations(b"{") == (b"{", False)
    manifest = registry.manifest()
    assert b"caveman.engine.toolschema.v1" in manifest
    assert b"caveman.engine.toolschema-annotations.v1" not in manifest


# --------------------------------------------------------------------------- §2.3.2 separators


@pytest.mark.parametrize(
    "obj, want",
    [
        ('{"title":"a","type":"object"}', '{"type":"object"}'),
        ('{"type":"object","title":"a"}', '{"type":"object"}'),
        ('{"a":1,"title":2,"title":3,"b":4}', '{"a":1,"b":4}'),
        ('{"title":"a","examples":[1]}', "{}"),
        ('{ "title" : "a" , "examples" : [1] }', "{ }"),
        ('{ "type":1 ,\n "title" : "x" }', '{ "type":1 }'),
        (
            '{ "type" : "object" ,\n      "title" : "drop me" ,\n      "maxItems" : 1.50 }',
            '{ "type" : "object" ,\n      "maxItems" : 1.50 }',
        ),
        # derived: deleted, kept, deleted; all four DROP keys; a deleted member after a walked one
        ('{"title":1,"type":2,"$schema":3}', '{"type":2}'),
        ('{"$schema":1,"title":2,"examples":3,"deprecated":4}', "{}"),
        ('{"items":{"title":"x","a":1},"deprecated":true}', '{"items":{"a":1}}'),
        ('{\n\t"title" : {"x":[1,{"y":"}"}]},\r\n\t"type" : "a"\n}', '{\n\t"type" : "a"\n}'),
    ],
)
def test_separator_rule(obj, want):
    inp = '[{"name":"A","input_schema":' + obj + "}]"
    _check_ok_row(inp.encode(), ('[{"name":"A","input_schema":' + want + "}]").encode(), True)


# --------------------------------------------------------------------------- §2.4 entry points, §3.4 rows


@pytest.mark.parametrize(
    "inp, want",
    [
        ('{"tools":[{"name":"A","input_schema":{"title":"x"}}]}', None),
        ('{"name":"A","input_schema":{"title":"x"}}', '{"name":"A","input_schema":{}}'),
        ('{"title":"bare","type":"object"}', None),
        ('"str"', None),
        ("null", None),
        ("  12  ", None),
        ("[]", None),
        ("{}", None),
        ('[[{"input_schema":{"title":"x"}}]]', '[[{"input_schema":{}}]]'),
        ('[{"name":"A","input_schema":{"a":1,"title":2,"title":3,"b":4}}]', '[{"name":"A","input_schema":{"a":1,"b":4}}]'),
        (
            '[{"name":"A","input_schema":{"dependencies":{"x":{"title":"t"}},"example":1,"$comment":"c","deprecated":true}}]',
            '[{"name":"A","input_schema":{"dependencies":{"x":{"title":"t"}},"example":1,"$comment":"c"}}]',
        ),
        (
            '{"type":"function","title":"T","function":{"name":"f","parameters":{"title":"P","type":"object"}}}',
            '{"type":"function","title":"T","function":{"name":"f","parameters":{"type":"object"}}}',
        ),
        # function may hold an array of envelopes; scalars in a catalog array are skipped
        ('[1,"s",null,{"function":[{"parameters":{"title":"a"}},[{"inputSchema":{"examples":[]}}]]}]',
         '[1,"s",null,{"function":[{"parameters":{}},[{"inputSchema":{}}]]}]'),
        # name maps: every key survives (no DROP), arrays under properties are not walked
        ('[{"input_schema":{"properties":{"title":{"title":"x"},"$schema":{},"deprecated":{"examples":[1]}}}}]',
         '[{"input_schema":{"properties":{"title":{},"$schema":{},"deprecated":{}}}}]'),
        ('[{"input_schema":{"properties":[{"title":"x"}],"patternProperties":{"^a":{"title":"p"}}}}]',
         '[{"input_schema":{"properties":[{"title":"x"}],"patternProperties":{"^a":{}}}}]'),
        ('[{"input_schema":{"$defs":{"d":{"title":"x"}},"definitions":{"e":{"deprecated":1}},"dependentSchemas":{"f":{"title":2}},"dependentRequired":{"g":{"title":3}}}}]',
         '[{"input_schema":{"$defs":{"d":{}},"definitions":{"e":{}},"dependentSchemas":{"f":{}},"dependentRequired":{"g":{"title":3}}}}]'),
        # every CHILD allowlist keyword is descended; contentSchema and description are not
        (
            '[{"input_schema":{' + ",".join(
                f'"{k}":{{"title":1}}' for k in (
                    "items", "prefixItems", "additionalItems", "unevaluatedItems", "additionalProperties",
                    "unevaluatedProperties", "propertyNames", "contains", "not", "if", "then", "else",
                    "allOf", "anyOf", "oneOf", "contentSchema", "description",
                )
            ) + "}}]",
            '[{"input_schema":{' + ",".join(
                f'"{k}":{{}}' for k in (
                    "items", "prefixItems", "additionalItems", "unevaluatedItems", "additionalProperties",
                    "unevaluatedProperties", "propertyNames", "contains", "not", "if", "then", "else",
                    "allOf", "anyOf", "oneOf",
                )
            ) + ',"contentSchema":{"title":1},"description":{"title":1}}}]',
        ),
        # a draft-4 tuple `items` and schemas nested in arrays of arrays
        ('[{"parameters":{"items":[{"title":1},[{"title":2}],true]}}]', '[{"parameters":{"items":[{},[{}],true]}}]'),
        # keys match after unescaping, every duplicate goes; an escaped non-DROP key stays
        ('[{"parameters":{"\\u0024schema":1,"ti\\u0074le":2,"\\u0061":3,"title":4}}]', '[{"parameters":{"\\u0061":3}}]'),
    ],
)
def test_entry_points_and_walk(inp, want):
    _check_ok_row(inp.encode(), (want if want is not None else inp).encode(), True)


def test_bytes_outside_ranges_are_untouched():
    # invalid UTF-8 inside strings, number spellings and escapes survive byte for byte
    inp = b'[{"name":"\xff\xfe","parameters":{"title":"\xc3","minimum":1E+2,"x":"\\u00e9\\/","default":-0.0}}]'
    out, ok = ta.strip_annotations(inp)
    assert ok and out == b'[{"name":"\xff\xfe","parameters":{"minimum":1E+2,"x":"\\u00e9\\/","default":-0.0}}]'


@pytest.mark.parametrize(
    "inp",
    [b"\xef\xbb\xbf[]", b"[NaN]", b"[1,]", b"[] x", b"{}}", b"   ", b'["\x01"]', b"[" * 10001 + b"]" * 10001],
)
def test_invalid_input_declines(inp):
    assert ta.strip_annotations(inp) == (inp, False)
    assert ta.compress(inp) is None


def test_apply_ranges_is_defensive():
    data = b"0123456789"
    assert ta.apply_ranges(data, [(1, 3), (5, 6)]) == b"0346789"
    for bad in ([(3, 1)], [(1, 5), (4, 6)], [(8, 11)]):
        with pytest.raises(Exception):
            ta.apply_ranges(data, bad)


# --------------------------------------------------------------------------- documentation example


def test_documentation_example():
    inp = (CONF / "seed_tools_array_min.json.in").read_bytes()
    assert len(inp) == 1830
    out, ok = ta.strip_annotations(inp)
    assert ok and len(out) == 1727
    assert out.startswith(
        b'[{"name":"write_file","description":"Write bytes to a file on disk. This trailing sentence is pure '
        b"filler that carries no rule and should be dropped once the description grows past the small budget. "
        b'The path must be an absolute path. Provide exactly one of body or body_b64.","inputSchema":{"type":'
        b'"object","properties":{"path":{"type":"string","description":"Target path, e.g. /srv/data/out.txt. '
        b'It must be absolute, not relative."},'
    )
    # the {"tools": ...} wrapper around the same catalog is left alone
    wrapped = (CONF / "seed_catalog_min.json.in").read_bytes()
    assert ta.strip_annotations(wrapped) == (wrapped, True)


# --------------------------------------------------------------------------- depth


def _deep(levels: int) -> bytes:
    inner = levels - 3
    return b'[{"inputSchema":' + b'{"not":' * inner + b'{"title":"t"}' + b"}" * inner + b"}]"


def test_depth_limit():
    ok = _deep(10000)
    out, flag = ta.strip_annotations(ok)
    assert flag and out == ok.replace(b'"title":"t"', b"")
    bad = _deep(10001)
    assert ta.strip_annotations(bad) == (bad, False)
    assert ta.compress(b"[" * 200000) is None
