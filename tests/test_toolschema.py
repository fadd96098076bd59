"""`toolschema` (toolschema_spec.md §1 and §3.1): REDUCE/SPLIT/CAP/CONSTRAINT tables, the Go
tests T1-T16 rewritten, the derived cases of §3.4, decoding edge cases, depth, and every
`toolschema` / `toolschema-annotations` case of tests/conformance/toolschema/cases.jsonl run
through the compressor functions."""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

import pytest

from caveman_engine import jsonio
from caveman_engine.compressors import toolschema as ts
from caveman_engine.compressors import toolschema_annotations as ta

from .conftest import count_tokens

ROOT = Path(__file__).resolve().parent.parent
CONF = ROOT / "tests" / "conformance" / "toolschema"


def compress(data: bytes | str) -> bytes | None:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return ts.compress(data)


# --------------------------------------------------------------------------- identity


def test_identity():
    assert ts.CONTENT_TYPE == "toolschema"
    assert ts.SAFETY_CLASS == "S4"
    assert ta.CONTENT_TYPE == "toolschema-annotations"
    assert ta.SAFETY_CLASS == "S4"


# --------------------------------------------------------------------------- SPLIT


@pytest.mark.parametrize(
    "text, sentences",
    [
        ("Use Node.js. Then run it.", ["Use Node.js. Then run it."]),
        ("Version 1.2 is out. Upgrade now.", ["Version 1.2 is out.", "Upgrade now."]),
        ("Plan A. Then B.", ["Plan A. Then B."]),
        ("A. B. C.", ["A. B. C."]),
        ("Done. next step.", ["Done. next step."]),
        ("Done.Next step.", ["Done.Next step."]),
        ("Stop! Go. Now.", ["Stop! Go.", "Now."]),
        ("See Fig. Two.", ["See Fig. Two."]),
        ("Say no. Then", ["Say no. Then"]),
        ("Wait... Next.", ["Wait...", "Next."]),
        ("Go to the 1st. Then stop.", ["Go to the 1st. Then stop."]),
        ("Pi is 3.14. Next.", ["Pi is 3.14.", "Next."]),
        ("At 5 p.m. Then", ["At 5 p.m. Then"]),
        ("Open example.com. Then", ["Open example.com. Then"]),
        ("It is a café. Next one.", ["It is a café.", "Next one."]),
        ("Ends. État.", ["Ends.", "État."]),
        ("Ends.\u00a0Next.", ["Ends.\u00a0Next."]),
        ("Line one.\n\nLine two.", ["Line one.", "Line two."]),
        ("Target path, e.g. /srv/data.", ["Target path, e.g. /srv/data."]),
        # derived from the rules: v1.2 / 3.14 give an empty guard token; VT and FF are WS_SENT
        ("Use v1.2. Next.", ["Use v1.2.", "Next."]),
        ("One.\x0bTwo.\x0cThree.", ["One.", "Two.", "Three."]),
        # Other_Uppercase (Ⓐ, Ⅰ) is not Lu: no split; a period followed only by spaces is no boundary
        ("Ends. \u24b6 next.", ["Ends. \u24b6 next."]),
        ("Ends. \u2160 next.", ["Ends. \u2160 next."]),
        ("Trailing.   ", ["Trailing."]),
        # the 28-word list, case-insensitively; a word not on it splits
        ("See Dr. Who. Bye.", ["See Dr. Who.", "Bye."]),
        ("Acme Inc. Makes it.", ["Acme Inc. Makes it."]),
        ("Short word. Next.", ["Short word.", "Next."]),
    ],
)
def test_split(text, sentences):
    assert ts.split_sentences(text) == sentences


# --------------------------------------------------------------------------- CAP


@pytest.mark.parametrize(
    "text, want",
    [
        ("x" * 81, "x" * 80),
        ("a" * 41 + " " + "b" * 50, "a" * 41),
        ("a" * 40 + " " + "b" * 50, "a" * 40 + " " + "b" * 39),
        ("a" * 79 + "é" + "c" * 10, "a" * 79),
        (
            "The number of items to return in a single page of results, which the server "
            "paginates for you automatically",
            "The number of items to return in a single page of results, which the server",
        ),
        ("x" * 80, "x" * 80),
        # trailing ASCII spaces trimmed after a hard cut; only U+0020 counts for the back-off
        ("a" * 10 + "\u00a0" + "b" * 30 + "\t" + "c" * 30 + "  " + "d" * 20, "a" * 10 + "\u00a0" + "b" * 30 + "\t" + "c" * 30),
        ("a" * 20 + " " + "b" * 58 + " " + "c" * 5, "a" * 20 + " " + "b" * 58),
        # 3- and 4-byte characters straddling byte 80
        ("a" * 78 + "€" + "z" * 10, "a" * 78),
        ("a" * 77 + "😀" + "z" * 10, "a" * 77),
        ("a" * 76 + "😀" + "z" * 10, "a" * 76 + "😀"),
    ],
)
def test_cap(text, want):
    got = ts.cap_lead(text)
    assert got == want
    assert len(got.encode()) <= 80


# --------------------------------------------------------------------------- CONSTRAINT


@pytest.mark.parametrize(
    "sentence, match",
    [
        ("Minutes to wait.", False),
        ("The min value.", True),
        ("Is maxed out.", False),
        ("The overview.", False),
        ("Over.", True),
        ("Formatted output.", True),
        ("Uses ISO8601.", True),
        ("An rfc-3339 date.", True),
        ("Case sensitive match.", True),
        ("casesensitive", True),
        ("One of a, b.", True),
        ("Only ASCII.", True),
        ("Requirements here.", True),
        ("unrequired", False),
        ("Can't be empty.", True),
        ("Do not exceed it.", True),
        ("Between us.", True),
        # RE2 \b is ASCII: é is not a word character, so `must` matches inside émust
        ("émust", True),
        ("mustard", False),
        # RE2 simple case folding: LONG S folds with s (no alternative has a k); U+0130 and
        # U+0131 do not fold with i (Python's Unicode IGNORECASE would fold them)
        ("mu\u017ft", True),
        ("Ab\u017folute", True),
        ("\u0130nvalid", False),
        ("\u0131nvalid", False),
        ("\u0130so", False),
        # ... and \b stays ASCII: a non-ASCII letter is not a word character on either side
        ("\u017fhall", False),
        ("x\u017fhall", True),
        ("\u212amust", True),
        ("Ran\u212ae", False),
        ("over_flow", False),
        ("MUST", True),
    ],
)
def test_constraint(sentence, match):
    assert ts.is_constraint(sentence) is match


def test_constraint_pattern_folds_like_re2():
    assert "[sS\u017f]" in ts.CONSTRAINT_PATTERN
    assert "[iI]" in ts.CONSTRAINT_PATTERN and "\u0130" not in ts.CONSTRAINT_PATTERN
    # the ASCII fast path and the exact pattern agree on ASCII text
    for s in ("The MIN value", "Is maxed out.", "ISO-8601", "rfc 3339", "CaseSensitive", "Can'T"):
        assert ts.is_constraint(s) is (ts.constraint_regex().search(s) is not None)


# --------------------------------------------------------------------------- REDUCE

_R188 = (
    "The value must be positive. This sentence explains the history of the parameter in far more "
    "detail than anyone needs for tool selection purposes. Another filler sentence goes here as well."
)
_R182 = (
    "Alpha sentence here is the lead.\n\nBeta must hold.   Gamma sentence is filler text that goes on "
    "and on for quite a while to push well past the small budget of one hundred sixty bytes."
)
_R164 = (
    "A single very long sentence without any terminal punctuation that keeps going and going well "
    "past the one hundred and sixty byte small budget so it gets capped hard"
)
_R175 = (
    "Dates must be ISO 8601. Returns the list of calendar entries that the backend has stored for "
    "the selected account and date window. Pagination is automatic. Extra filler words."
)
_COUNT = (
    "The number of items to return in a single page of results, which the server paginates for you "
    "automatically without any further round trips or extra bookkeeping on your side. Values above "
    "100 are not allowed and negative numbers are invalid."
)


@pytest.mark.parametrize(
    "text, want",
    [
        ("  " + "x" * 159 + "  ", "x" * 159),
        ("x" * 160, "x" * 160),
        (_R188, "The value must be positive. This sentence explains the history of the parameter in far more detail than"),
        (_R182, "Alpha sentence here is the lead. Beta must hold."),
        (_R164, "A single very long sentence without any terminal punctuation that keeps going"),
        (_R175, "Dates must be ISO 8601. Returns the list of calendar entries that the backend has stored for the"),
        ("Fetch a page. " * 12, "Fetch a page."),
        (
            _COUNT,
            "The number of items to return in a single page of results, which the server Values above "
            "100 are not allowed and negative numbers are invalid.",
        ),
        ("   spaced   ", "spaced"),
        # WS_GO: U+001C..U+001F are not trimmed (str.strip() would), U+3000 and U+0085 are
        ("\x1chi\x1f", "\x1chi\x1f"),
        ("\u3000\x85hi\u2029", "hi"),
        # 161 bytes is reduced: one unsplittable sentence is capped
        ("x" * 161, "x" * 80),
        # 160 bytes measured in UTF-8 bytes, not characters
        ("é" * 80, "é" * 80),
        ("é" * 81, "é" * 40),
        # the lead is the first NON-constraint sentence, not the first sentence
        (
            "Must be set. Only ASCII letters. This is the lead sentence. This one is dropped. "
            "Also dropped here. Another filler sentence to push the length past the budget. Never above ten.",
            "Must be set. Only ASCII letters. This is the lead sentence. Never above ten.",
        ),
    ],
)
def test_reduce(text, want):
    got = ts.reduce_description(text)
    assert got == want
    assert ts.reduce_description(got) == got  # idempotent


def test_reduce_not_idempotent_when_the_capped_lead_ends_in_whitespace():
    # The cap trims only U+0020, so a lead cut just after "\n\n" keeps it; joined with " " to the
    # next kept sentence, that becomes a sentence boundary on a second pass. The reference does
    # the same (conformance vector aws-docs: its expected output is not a fixed point), so I7
    # ("idempotent") has this exception.
    api = "Search AWS documentation using the official AWS Documentation Search API."
    c1 = "Values must be positive and below the configured account limit."
    c2 = "Requests are rejected when the quota is exceeded for the day."
    text = api + "\n\n    ## Usage\n\n    This tool searches everything. " + c1 + " " + c2
    once = ts.reduce_description(text)
    assert once == api + "\n\n " + c1 + " " + c2
    assert ts.reduce_description(once) == api + " " + c1 + " " + c2
    vector = (CONF / "aws-docs.tools.json.compress-type-toolschema.out").read_bytes()
    assert ts.compress(vector) != vector


def test_reduce_lengths_from_spec():
    assert len(_R188.encode()) == 188
    assert len(_R182.encode()) == 182
    assert len(_R164.encode()) == 164
    assert len(_R175.encode()) == 175
    assert len(("Fetch a page. " * 12).encode()) == 168
    assert len(_COUNT.encode()) == 241


# --------------------------------------------------------------------------- §3.1 sample catalog

SAMPLE_CATALOG = """{
  "tools": [
    {
      "name": "search_files",
      "description": "Search the workspace for files. This tool walks the entire tree, honours .gitignore, and returns ranked matches with surrounding context lines so the agent can decide which file to open next.",
      "inputSchema": {
        "type": "object",
        "title": "SearchFilesArgs",
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "properties": {
          "query": {
            "type": "string",
            "description": "The search query string to match against file contents using ranked relevance.",
            "examples": ["needle", "func main"]
          },
          "mode": {
            "type": "string",
            "enum": ["regex", "literal", "glob"],
            "default": "literal",
            "description": "How to interpret the query."
          },
          "description": {
            "type": "string",
            "description": "A free-text note the caller may attach to the search for logging."
          }
        },
        "required": ["query"]
      }
    }
  ]
}""".encode()

SAMPLE_OUT = (
    b'{"tools":[{"description":"Search the workspace for files.","inputSchema":{"properties":'
    b'{"description":{"description":"A free-text note the caller may attach to the search for logging.",'
    b'"type":"string"},"mode":{"default":"literal","description":"How to interpret the query.",'
    b'"enum":["regex","literal","glob"],"type":"string"},"query":{"description":"The search query '
    b'string to match against file contents using ranked relevance.","type":"string"}},"required":'
    b'["query"],"type":"object"},"name":"search_files"}]}'
)


def test_sample_catalog_exact():
    assert len(SAMPLE_CATALOG) == 1092
    out = compress(SAMPLE_CATALOG)
    assert out == SAMPLE_OUT
    assert len(out) == 509


def test_t1_preserves_selection_tokens():
    out = compress(SAMPLE_CATALOG)
    assert jsonio.valid(out) and len(out) < len(SAMPLE_CATALOG)
    for s in (b'"search_files"', b'"query"', b'"mode"', b'"regex"', b'"literal"', b'"glob"', b'"required"'):
        assert s in out
    for s in (b'"examples"', b'"title"', b'"$schema"', b'"func main"', b'"SearchFilesArgs"', b"honours .gitignore"):
        assert s not in out


def test_t2_envelope_and_mcp_annotation_title():
    inp = (
        '{"tools":[{"name":"Read","description":"Read one file with all provider-visible selection detail intact.",'
        '"annotations":{"title":"Read a file","readOnlyHint":true},"_meta":{"title":"vendor title","examples":[1]},'
        '"inputSchema":{"title":"ReadArgs","type":"object","properties":{"path":{"type":"string","title":"Path",'
        '"description":"Target path."}}}}],"title":"catalog title"}'
    )
    want = (
        b'{"title":"catalog title","tools":[{"_meta":{"examples":[1],"title":"vendor title"},"annotations":'
        b'{"readOnlyHint":true,"title":"Read a file"},"description":"Read one file with all provider-visible '
        b'selection detail intact.","inputSchema":{"properties":{"path":{"description":"Target path.","type":'
        b'"string"}},"type":"object"},"name":"Read"}]}'
    )
    out = compress(inp)
    assert out == want
    doc = json.loads(out)
    tool = doc["tools"][0]
    assert doc["title"] == "catalog title"
    assert tool["annotations"] == {"title": "Read a file", "readOnlyHint": True}
    assert tool["_meta"]["title"] == "vendor title"
    assert "title" not in tool["inputSchema"] and "title" not in tool["inputSchema"]["properties"]["path"]


def test_t3_property_named_description_survives():
    doc = json.loads(compress(SAMPLE_CATALOG))
    props = doc["tools"][0]["inputSchema"]["properties"]
    assert "description" in props and "query" in props


def test_t4_dependency_property_names_survive():
    inp = (
        '{"type":"object","dependentSchemas":{"title":{"properties":{"example":{"type":"string"}}},'
        '"$comment":{"required":["title"]}},"dependentRequired":{"example":["title"],"$comment":["example"]},'
        '"dependencies":{"title":{"properties":{"$comment":{"type":"boolean"}}},"example":["title"]}}'
    )
    want = (
        b'{"dependencies":{"example":["title"],"title":{"properties":{"$comment":{"type":"boolean"}}}},'
        b'"dependentRequired":{"$comment":["example"],"example":["title"]},"dependentSchemas":{"$comment":'
        b'{"required":["title"]},"title":{"properties":{"example":{"type":"string"}}}},"type":"object"}'
    )
    out = compress(inp)
    assert out == want
    assert len(out) == len(inp.encode()) == 282
    doc = json.loads(out)
    assert set(doc["dependentSchemas"]) == {"title", "$comment"}
    assert set(doc["dependentRequired"]) == {"example", "$comment"}
    assert set(doc["dependencies"]) == {"title", "example"}


@pytest.mark.parametrize(
    "inp",
    [b"{not valid json", b"{} {}", b"", b"1x", b'{"a":NaN}', b"\xef\xbb\xbf{}", b"   ", b"{} ,", b"{}x",
     b"1 2", b"[1,]", b"/*c*/{}", b'{"a":Infinity}', b'"a\x01"', b'{"a":-Infinity}'],
)
def test_t5_declines_malformed(inp):
    assert ts.compress(inp) is None


@pytest.mark.parametrize(
    "inp, want",
    [
        (b"{}}", b"{}"),
        (b"[1]]", b"[1]"),
        (b'{"a":1} ]', b'{"a":1}'),
        (b'{"a":1} ] junk', b'{"a":1}'),
        (b" {} ", b"{}"),
        (b'"abc"', b'"abc"'),
        (b'"a<b"', b'"a\\u003cb"'),
        (b"null", b"null"),
        (b"-0", b"-0"),
    ],
)
def test_t5_trailing_bracket_quirk_and_scalars(inp, want):
    # Go's Decoder.More() answers "no more" before ] or }: the tail is discarded (pinned).
    assert ts.compress(inp) == want


def test_t6_idempotent():
    once = compress(SAMPLE_CATALOG)
    assert compress(once) == once


def test_t7_truncation_stays_utf8():
    d = "a" * 79 + "é" + "b" * 200
    inp = (
        '{"tools":[{"name":"t","inputSchema":{"type":"object","properties":{"p":{"type":"string",'
        '"description":"' + d + '"}},"$defs":{"d":{"description":"' + d + '"}}}}]}'
    ).encode()
    assert len(inp) == 705
    aaa = "a" * 79
    want = (
        '{"tools":[{"inputSchema":{"$defs":{"d":{"description":"' + aaa + '"}},"properties":{"p":'
        '{"description":"' + aaa + '","type":"string"}},"type":"object"},"name":"t"}]}'
    ).encode()
    out = ts.compress(inp)
    assert out == want
    out.decode("utf-8")
    assert "\ufffd" not in out.decode() and b"\\ufffd" not in out


_T8_LONG = (
    "This is a deliberately long lead sentence describing pagination behaviour that the server handles "
    "for you automatically without any further round trips or bookkeeping so it easily clears the small "
    "budget. Values above 100 are not allowed."
)


@pytest.mark.parametrize(
    "desc, want_desc",
    [
        ("Sets the limit. Anything over 100 errors.", "Sets the limit. Anything over 100 errors."),
        ("Values above 100 are not allowed.", "Values above 100 are not allowed."),
        ("Negative numbers are invalid.", "Negative numbers are invalid."),
        (
            _T8_LONG,
            "This is a deliberately long lead sentence describing pagination behaviour that Values above "
            "100 are not allowed.",
        ),
    ],
)
def test_t8_markerless_constraints(desc, want_desc):
    inp = (
        '{"tools":[{"name":"t","inputSchema":{"type":"object","properties":{"p":{"type":"string",'
        '"description":' + json.dumps(desc) + "}}}}]}"
    )
    want = (
        '{"tools":[{"inputSchema":{"properties":{"p":{"description":' + json.dumps(want_desc)
        + ',"type":"string"}},"type":"object"},"name":"t"}]}'
    ).encode()
    assert compress(inp) == want


def test_t9_abbreviation_not_split():
    inp = (
        '{"tools":[{"name":"t","inputSchema":{"type":"object","properties":{"path":{"type":"string",'
        '"description":"Target path, e.g. /srv/data."}}}}]}'
    )
    want = (
        b'{"tools":[{"inputSchema":{"properties":{"path":{"description":"Target path, e.g. /srv/data.",'
        b'"type":"string"}},"type":"object"},"name":"t"}]}'
    )
    out = compress(inp)
    assert out == want
    assert b'"Target path, e."' not in out


def test_t10_keeps_default():
    inp = (
        '{"tools":[{"name":"t","inputSchema":{"type":"object","properties":{"mode":{"type":"string",'
        '"enum":["a","b"],"default":"a","description":"Mode."}}}}]}'
    )
    want = (
        b'{"tools":[{"inputSchema":{"properties":{"mode":{"default":"a","description":"Mode.","enum":'
        b'["a","b"],"type":"string"}},"type":"object"},"name":"t"}]}'
    )
    assert compress(inp) == want


# ---- the ref-resolution helper (T12-T15) and its use in T11/T16

_DOOR_KEYS = ("inputSchema", "input_schema", "parameters")
_USER_KEY_MAPS = (
    "properties", "$defs", "definitions", "patternProperties", "dependentSchemas", "dependentRequired",
    "dependencies",
)


def _resolve(root, pointer: str) -> bool:
    if pointer == "#":
        return True
    parts = urllib.parse.unquote(pointer[1:]).split("/")[1:]
    cur = root
    for raw in parts:
        tok, i = [], 0
        while i < len(raw):
            if raw[i] == "~":
                nxt = raw[i + 1 : i + 2]
                if nxt == "0":
                    tok.append("~")
                elif nxt == "1":
                    tok.append("/")
                else:
                    return False
                i += 2
            else:
                tok.append(raw[i])
                i += 1
        key = "".join(tok)
        if isinstance(cur, dict):
            if key not in cur:
                return False
            cur = cur[key]
        elif isinstance(cur, list):
            if not key.isdigit() or not key.isascii() or (len(key) > 1 and key[0] == "0"):
                return False
            if int(key) >= len(cur):
                return False
            cur = cur[int(key)]
        else:
            return False
    return True


def unresolved_refs(doc) -> list[str]:
    bad: list[str] = []

    def walk(v, root, user_map: bool):
        if isinstance(v, dict):
            if not user_map:
                if isinstance(v.get("$id"), str) and v["$id"]:
                    root = v
                ref = v.get("$ref")
                if isinstance(ref, str) and (ref == "#" or ref.startswith("#/")) and not _resolve(root, ref):
                    bad.append(ref)
            for k, x in v.items():
                if user_map:
                    walk(x, root, False)
                elif k in _USER_KEY_MAPS and isinstance(x, dict):
                    walk(x, root, True)
                elif k in _DOOR_KEYS and isinstance(x, dict):
                    walk(x, x, False)
                else:
                    walk(x, root, False)
        elif isinstance(v, list):
            for x in v:
                walk(x, root, False)

    walk(doc, doc, False)
    return bad


@pytest.mark.parametrize(
    "doc, want",
    [
        ('{"properties":{"x":{"$ref":"#/$defs/gone"}},"$defs":{"kept":{"type":"string"}}}', ["#/$defs/gone"]),
        ('{"properties":{"x":{"$ref":"#/$defs/kept"}},"$defs":{"kept":{"type":"string"}}}', []),
        (
            '{"tools":[{"name":"broken","inputSchema":{"properties":{"x":{"$ref":"#/$defs/shared"}},"$defs":{}}},'
            '{"name":"other","inputSchema":{"$defs":{"shared":{"type":"string"}}}}]}',
            ["#/$defs/shared"],
        ),
        (
            '{"$defs":{"shared":{"type":"string"}},"properties":{"nested":{"$id":"nested.json","properties":'
            '{"x":{"$ref":"#/$defs/shared"}},"$defs":{}}}}',
            ["#/$defs/shared"],
        ),
        ('{"properties":{"x":{"$ref":"#/items/+0"}},"items":[{"type":"string"}]}', ["#/items/+0"]),
        ('{"properties":{"x":{"$ref":"#/items/0"}},"items":[{"type":"string"}]}', []),
        ('{"properties":{"x":{"$ref":"#/items/01"}},"items":[{"type":"string"}]}', ["#/items/01"]),
    ],
    ids=["t12_drop", "t12_kept", "t13_roots", "t14_id_root", "t15_plus_index", "index_ok", "leading_zero"],
)
def test_t12_t15_ref_guard(doc, want):
    assert unresolved_refs(json.loads(doc)) == want


def test_t11_ref_integrity():
    inp = (
        '{"name":"t","inputSchema":{"type":"object","properties":{"x":{"$ref":"#/$defs/title"},"slash":'
        '{"$ref":"#/$defs/a~1b"},"tilde":{"$ref":"#/$defs/til~0de"}},"$defs":{"title":{"type":"string",'
        '"enum":["a","b"]},"a/b":{"type":"number"},"til~de":{"type":"boolean"},"Widget":{"type":"object"}}}}'
    )
    want = (
        b'{"inputSchema":{"$defs":{"Widget":{"type":"object"},"a/b":{"type":"number"},"til~de":{"type":'
        b'"boolean"},"title":{"enum":["a","b"],"type":"string"}},"properties":{"slash":{"$ref":"#/$defs/a~1b"},'
        b'"tilde":{"$ref":"#/$defs/til~0de"},"x":{"$ref":"#/$defs/title"}},"type":"object"},"name":"t"}'
    )
    out = compress(inp)
    assert out == want
    assert b'"title":{' in out and b'"a","b"' in out
    assert unresolved_refs(json.loads(out)) == []


GOLDEN_COMPACT = (
    b'{"tools":[{"description":"Write bytes to a file on disk. The path must be an absolute path. Provide '
    b'exactly one of body or body_b64.","inputSchema":{"properties":{"body":{"description":"UTF-8 text '
    b'contents. Exactly one of body or body_b64 is required.","type":"string"},"body_b64":{"description":'
    b'"Base64-encoded contents. Rejected if body is also set.","type":"string"},"count":{"description":'
    b'"The number of items to return in a single page of results, which the server Values above 100 are '
    b'not allowed and negative numbers are invalid.","type":"integer"},"limit":{"description":"Sets the '
    b'limit. Anything over 100 errors.","type":"integer"},"mode":{"default":"overwrite","description":'
    b'"How to write the file.","enum":["overwrite","append"],"type":"string"},"path":{"description":'
    b'"Target path, e.g. /srv/data/out.txt. It must be absolute, not relative.","type":"string"}},'
    b'"required":["path"],"type":"object"},"name":"write_file"},{"description":"Create a calendar event.",'
    b'"inputSchema":{"$defs":{"ISO8601Duration":{"description":"An ISO 8601 duration. Must match the '
    b'P#DT#H#M#S grammar.","type":"string"},"default":{"description":"A definition whose name collides '
    b'with a metadata key. It must not be dropped.","type":"string"}},"properties":{"duration":{"$ref":'
    b'"#/$defs/ISO8601Duration"},"start":{"description":"Event start time. The format must be RFC3339, '
    b'e.g. 2026-08-08T14:00:00Z. Values without a timezone are rejected.","type":"string"}},"required":'
    b'["start"],"type":"object"},"name":"schedule_event"}]}'
)


def test_t16_golden_constraints_catalog():
    inp = (CONF / "seed_catalog_pretty.json.in").read_bytes()  # testdata/toolschema_constraints_catalog.json
    assert len(inp) == 2587
    out = ts.compress(inp)
    assert out == GOLDEN_COMPACT
    assert len(out) == 1507
    golden = (json.dumps(json.loads(out), indent=2, ensure_ascii=False) + "\n").encode()
    assert len(golden) == 2302
    for s in (
        "must be an absolute path", "exactly one of body", "is required", "Rejected if body", "must be absolute",
        "format must be RFC3339", "are rejected", "ISO 8601 duration", "Must match the P#DT", "must not be dropped",
        '"default":"overwrite"', "Anything over 100 errors", "Values above 100 are not allowed",
        "negative numbers are invalid",
    ):
        assert s.encode() in out, s
    assert b"carries no rule and should be dropped" not in out
    assert b"paginates for you automatically" not in out
    assert unresolved_refs(json.loads(out)) == []
    assert ts.compress(out) == out
    # the documentation fixture is the same catalog minified: same output
    assert ts.compress((CONF / "seed_catalog_min.json.in").read_bytes()) == GOLDEN_COMPACT


# --------------------------------------------------------------------------- §3.4 derived cases


@pytest.mark.parametrize(
    "inp, want",
    [
        (
            '{"type":"object","description":"a<b & c>d","x-ui":{"title":"t","description":"keep"},"deprecated":true,'
            '"example":1,"$comment":"c","n":1.50,"e":1E+2,"big":12345678901234567890123}',
            '{"big":12345678901234567890123,"deprecated":true,"description":"a\\u003cb \\u0026 c\\u003ed","e":1E+2,'
            '"n":1.50,"type":"object","x-ui":{"description":"keep"}}',
        ),
        (
            '{"name":"t","description":{"title":"x"},"inputSchema":{"description":{"title":"x","type":"string"}}}',
            '{"description":{"title":"x"},"inputSchema":{"description":{"type":"string"}},"name":"t"}',
        ),
        (
            '{"tools":[{"name":"t","description":"   spaced   "}],"description":"   top   ","inputSchema":{"title":"x"}}',
            '{"description":"   top   ","inputSchema":{"title":"x"},"tools":[{"description":"spaced","name":"t"}]}',
        ),
        (
            '[{"title":"x","type":"object"},"str",[{"inputSchema":{"title":"y"}}]]',
            '[{"title":"x","type":"object"},"str",[{"inputSchema":{}}]]',
        ),
        (
            '{"type":"function","function":{"name":"f","parameters":{"title":"P","type":"object","properties":'
            '{"a":{"title":"A","type":"string"}}}}}',
            '{"function":{"name":"f","parameters":{"properties":{"a":{"type":"string"}},"type":"object"}},"type":"function"}',
        ),
        ('{"a":"\\u2028\\u0008\\u000b\\u007f/"}', '{"a":"\\u2028\\b\\u000b\x7f/"}'),
        # §1.7 examples
        ('{"description":"a<b"}', '{"description":"a\\u003cb"}'),
        (
            '{\n  "type": "object",\n  "properties": {\n    "a": {"type": "string"}\n  }\n}',
            '{"properties":{"a":{"type":"string"}},"type":"object"}',
        ),
    ],
)
def test_derived_cases(inp, want):
    assert compress(inp) == want.encode()


# --------------------------------------------------------------------------- classification and walks


@pytest.mark.parametrize(
    "inp, want",
    [
        # rule 3: any envelope key makes an envelope (title kept); otherwise a bare schema (title dropped)
        ('{"name":"n","title":"T"}', '{"name":"n","title":"T"}'),
        ('{"parameters":{"title":"P"},"title":"T"}', '{"parameters":{},"title":"T"}'),
        ('{"function":"f","title":"T"}', '{"function":"f","title":"T"}'),
        ('{"description":"d","title":"T"}', '{"description":"d"}'),
        # tools with any value; only tools is walked
        ('{"tools":{"name":"a","inputSchema":{"title":"T"}},"title":"x"}', '{"title":"x","tools":{"inputSchema":{},"name":"a"}}'),
        ('{"tools":"none","title":"x"}', '{"title":"x","tools":"none"}'),
        # function may be an array of envelopes; nested tools inside an envelope are not walked
        ('{"function":[{"parameters":{"title":"a"}},{"function":{"parameters":{"title":"b"}}}]}',
         '{"function":[{"parameters":{}},{"function":{"parameters":{}}}]}'),
        ('[{"name":"n","tools":[{"inputSchema":{"title":"x"}}]}]', '[{"name":"n","tools":[{"inputSchema":{"title":"x"}}]}]'),
        ('{"name":"n","tools":[{"inputSchema":{"title":"x"}}]}', '{"name":"n","tools":[{"inputSchema":{}}]}'),
        # verbatim members are never walked; user-key maps keep every name; arrays under a map hold schemas
        ('{"enum":[{"title":"k"}],"default":{"examples":1},"const":{"$comment":1},"required":["title"]}',
         '{"const":{"$comment":1},"default":{"examples":1},"enum":[{"title":"k"}],"required":["title"]}'),
        ('{"properties":{"title":{"title":"x"},"examples":[{"title":"y"},"s"],"s":"long text"}}',
         '{"properties":{"examples":[{},"s"],"s":"long text","title":{}}}'),
        ('{"items":[{"title":"a"},{"anyOf":[{"examples":[1],"type":"string"}]}]}',
         '{"items":[{},{"anyOf":[{"type":"string"}]}]}'),
        # non-string description inside a schema is walked as a schema
        ('{"description":[{"title":"x","description":"   y "}]}', '{"description":[{"description":"y"}]}'),
        ('{"description":5,"title":null}', '{"description":5}'),
        # envelope description: only strings are reduced
        ('{"name":"n","description":null}', '{"description":null,"name":"n"}'),
        # duplicate keys: last wins
        ('{"name":"a","name":"b","inputSchema":{"type":"x","type":"y"}}', '{"inputSchema":{"type":"y"},"name":"b"}'),
    ],
)
def test_classification_and_walk(inp, want):
    assert compress(inp) == want.encode()


def test_decoding_edge_cases():
    # per-byte U+FFFD, lone surrogates, pairs, escapes in keys
    assert ts.compress(b'{"d\\u0065scription":"\xff\xfe ok \xe2\x82","\\ud800":"\\udc00\\ud83d\\ude00"}') == (
        '{"description":"\ufffd\ufffd ok \ufffd\ufffd","\ufffd":"\ufffd\U0001f600"}'.encode()
    )
    # numbers are written back as their literals
    assert ts.compress(b'[1.50,1E+2,-0,12345678901234567890123,' + b"9" * 5000 + b"]") == (
        b"[1.50,1E+2,-0,12345678901234567890123," + b"9" * 5000 + b"]"
    )


def test_compress_tree_does_not_modify_input():
    value = jsonio.loads(SAMPLE_CATALOG)
    before = jsonio.dumps(value)
    tree = ts.compress_tree(value)
    assert jsonio.dumps(value) == before
    assert jsonio.dumps(tree) == SAMPLE_OUT
    assert ts.compress_tree(tree) is not tree and jsonio.dumps(ts.compress_tree(tree)) == SAMPLE_OUT


def test_description_number_is_not_a_string():
    # a Number literal is not a JSON string: never reduced, even if long
    long_num = "1" * 300
    inp = '{"name":"n","description":' + long_num + ',"inputSchema":{"description":' + long_num + "}}"
    assert compress(inp) == ('{"description":' + long_num + ',"inputSchema":{"description":' + long_num + '},"name":"n"}').encode()


# --------------------------------------------------------------------------- depth


def _nested_schema(levels: int) -> bytes:
    """A catalog whose total nesting is exactly ``levels`` (outermost array = level 1)."""
    inner = levels - 3  # [ , envelope {, inputSchema {  ... then (levels-3) items objects
    return (
        b'[{"inputSchema":' + b'{"items":' * inner + b'{"title":"t","type":"x"}' + b"}" * inner + b',"name":"deep"}]'
    )


def test_depth_limit():
    ok = _nested_schema(10000)
    out = ts.compress(ok)
    assert out == ok.replace(b'"title":"t",', b"")
    assert ts.compress(_nested_schema(10001)) is None
    assert ts.compress(b"[" * 10000 + b"]" * 10000) == b"[" * 10000 + b"]" * 10000
    assert ts.compress(b"[" * 10001 + b"]" * 10001) is None
    assert ts.compress(b"[" * 200000) is None  # unterminated and far too deep: declines, no RecursionError
    deep_tree = jsonio.loads(ok)
    assert jsonio.dumps(ts.compress_tree(deep_tree)) == out


# --------------------------------------------------------------------------- conformance vectors


def _cases():
    rows = [json.loads(line) for line in (CONF / "cases.jsonl").read_text().splitlines() if line.strip()]
    return [r for r in rows if r["args"][:2] == ["compress", "--type"] and r["args"][2] in ("toolschema", "toolschema-annotations")]


_CASES = _cases()


def test_conformance_case_count():
    kinds = [r["args"][2] for r in _CASES]
    assert kinds.count("toolschema") == 83 and kinds.count("toolschema-annotations") == 83


@pytest.mark.parametrize("row", _CASES, ids=[f'{r["case"]}:{r["args"][2]}' for r in _CASES])
def test_conformance(row):
    data = (CONF / row["case"]).read_bytes()
    mod = ts if row["args"][2] == "toolschema" else ta
    out = mod.compress(data)
    report = json.loads(row["stderr"])
    if row["stdout"] is not None:
        assert out == (CONF / row["stdout"]).read_bytes()
        assert count_tokens(out) == report["tokens_after"] < report["tokens_before"] == count_tokens(data)
    else:
        # passed through: declined, byte-identical, or not fewer tokens
        assert out is None or out == data or count_tokens(out) >= count_tokens(data)
