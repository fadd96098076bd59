"""jsonio's three writers give the same bytes: orjson, the standard library's encoder that
serves small values while orjson is not imported, and the Python writer for what orjson
refuses."""

from __future__ import annotations

import subprocess
import sys

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from caveman_engine import jsonio

from .conftest import CORPUS

_text = st.text(st.characters(codec="utf-8"), max_size=12) | st.sampled_from(
    ["", "<a&b>", "\u2028\u2029", "\x00\x1f\x7f", '"\\/', "\ud800x", "caf\u00e9 \U0001f600"])
_scalar = (st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | _text
           | st.sampled_from(["1", "-0", "1e400", "0.10", "123456789012345678901234567890"])
           .map(jsonio.Number))
_values = st.recursive(
    _scalar, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_text, inner, max_size=5),
    max_leaves=40)


def _orjson_bytes(value, sort_keys: bool, indent: bool) -> bytes:
    option = (orjson.OPT_SORT_KEYS if sort_keys else 0) | (orjson.OPT_INDENT_2 if indent else 0)
    try:
        return orjson.dumps(value, default=jsonio._default, option=option)
    except orjson.JSONEncodeError:
        return jsonio._write(value, sort_keys, indent)


@settings(max_examples=400, deadline=None)
@given(_values, st.booleans(), st.booleans())
def test_python_writer_matches_orjson(value, sort_keys, indent):
    assert jsonio._write(value, sort_keys, indent) == _orjson_bytes(value, sort_keys, indent)


@settings(max_examples=400, deadline=None)
@given(_values, st.booleans(), st.booleans())
def test_stdlib_writer_matches_orjson_or_declines(value, sort_keys, indent):
    """Declines only for lone surrogates, which the other writers replace with U+FFFD."""
    ours = jsonio._stdlib_write(value, sort_keys, indent)
    expected = _orjson_bytes(value, sort_keys, indent)
    if ours is None:
        assert "\ufffd".encode() in expected
    else:
        assert ours == expected


def test_both_writers_match_orjson_on_every_corpus_catalog():
    for path in sorted(CORPUS.glob("*.tools.json")):
        value = jsonio.loads(path.read_bytes())
        for indent in (False, True):
            expected = _orjson_bytes(value, True, indent)
            assert jsonio._write(value, True, indent) == expected, path.name
            assert jsonio._stdlib_write(value, True, indent) == expected, path.name


def test_stdlib_writer_declines_what_it_cannot_write_like_orjson():
    mark = jsonio._NUMBER_MARK
    assert jsonio._stdlib_write([jsonio.Number("1.50"), "x"], True, False) == b'[1.50,"x"]'
    # a string equal to the mark, as a value or a key, cannot be told from a Number
    assert jsonio._stdlib_write([jsonio.Number("1"), mark], True, False) is None
    assert jsonio._stdlib_write({mark: jsonio.Number("1")}, True, False) is None
    assert jsonio._stdlib_write(["a" + mark], True, False) == orjson.dumps(["a" + mark])
    assert jsonio._stdlib_write(["\ud800"], True, False) is None
    assert jsonio._stdlib_write([object()], True, False) is None
    deep = []
    for _ in range(100_000):
        deep = [deep]
    assert jsonio._stdlib_write(deep, True, False) is None
    assert jsonio.dumps(deep) == b"[" * 100_001 + b"]" * 100_001


def test_floats_and_the_budget_hand_over_to_orjson():
    assert jsonio._nodes_left([1, 2, 3], 4) == 0
    assert jsonio._nodes_left([1, 2, 3], 3) == -1
    assert jsonio._nodes_left({"a": [1]}, 4) == 0  # the object, its key, the array, 1
    assert jsonio._nodes_left({"a": [1]}, 3) == -1
    assert jsonio._nodes_left({"a": 1, "b": 2}, 4) == -1
    assert jsonio._nodes_left({"x": [1.5]}, 100) == -1


def test_small_output_without_orjson_and_the_rest_with_it():
    """In a fresh interpreter a small value is written without importing orjson; a large one,
    many small ones past STDLIB_NODES in all, or one with a float, with it; all give the bytes
    orjson gives."""
    n = jsonio.STDLIB_NODES
    probe = (
        "import sys\n"
        "from caveman_engine import jsonio\n"
        "small = jsonio.dumps({'b': [jsonio.Number('1.0'), '<&>'], 'a': None})\n"
        "pretty = jsonio.dumps({'b': [jsonio.Number('2')], 'a': {}}, indent=True)\n"
        "print('orjson' in sys.modules, small.decode(), pretty.decode().split())\n"
        f"big = jsonio.dumps(list(range({n + 1})))\n"
        "print('orjson' in sys.modules, len(big))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    first, second = out.stdout.splitlines()
    assert first == ("False {\"a\":null,\"b\":[1.0,\"\\u003c\\u0026\\u003e\"]} "
                     "['{', '\"a\":', '{},', '\"b\":', '[', '2', ']', '}']")
    assert second == f"True {len(orjson.dumps(list(range(n + 1))))}"
    many = (
        "import sys\n"
        "from caveman_engine import jsonio\n"
        f"outs = [jsonio.dumps([i, 'x']) for i in range({n // 3 + 1})]\n"
        "print(all(o == b'[%d,\"x\"]' % i for i, o in enumerate(outs)), 'orjson' in sys.modules)\n"
        "print(jsonio.dumps([]).decode())\n"
    )
    out = subprocess.run([sys.executable, "-c", many], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True", "[]"]
    floats = ("import sys\nfrom caveman_engine import jsonio\n"
              "print(jsonio.dumps([1.5]).decode(), 'orjson' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", floats], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["[1.5]", "True"]
