"""jsonio's two writers give the same bytes: orjson, and the Python writer that serves small
values while orjson is not imported (and what orjson refuses)."""

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
        return jsonio._write(value, sort_keys, indent)[0]


@settings(max_examples=400, deadline=None)
@given(_values, st.booleans(), st.booleans())
def test_python_writer_matches_orjson(value, sort_keys, indent):
    ours, _ = jsonio._write(value, sort_keys, indent, budget=10**6)
    assert ours == _orjson_bytes(value, sort_keys, indent)


def test_python_writer_matches_orjson_on_every_corpus_catalog():
    for path in sorted(CORPUS.glob("*.tools.json")):
        value = jsonio.loads(path.read_bytes())
        for indent in (False, True):
            assert jsonio._write(value, True, indent, budget=10**7)[0] == _orjson_bytes(
                value, True, indent), path.name


def test_budget_and_floats_hand_over_to_orjson():
    assert jsonio._write([1, 2, 3], True, False, budget=3) == (None, 0)  # 4 nodes
    assert jsonio._write([1, 2, 3], True, False, budget=5) == (b"[1,2,3]", 1)
    assert jsonio._write({"x": 1.5}, True, False, budget=100) == (None, 0)
    assert jsonio._write([orjson.Fragment(b"1.50")], True, False, budget=100) == (b"[1.50]", 98)


def test_small_output_without_orjson_and_the_rest_with_it():
    """In a fresh interpreter a small value is written without importing orjson; a large one,
    or many small ones past SMALL_NODES in all, with it; all give the bytes orjson gives."""
    probe = (
        "import sys\n"
        "from caveman_engine import jsonio\n"
        "small = jsonio.dumps({'b': [jsonio.Number('1.0'), '<&>'], 'a': None})\n"
        "print('orjson' in sys.modules, small.decode())\n"
        f"big = jsonio.dumps(list(range({jsonio.SMALL_NODES + 1})))\n"
        "print('orjson' in sys.modules, len(big))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    first, second = out.stdout.splitlines()
    assert first == 'False {"a":null,"b":[1.0,"\\u003c\\u0026\\u003e"]}'
    assert second == f"True {len(orjson.dumps(list(range(jsonio.SMALL_NODES + 1))))}"
    many = (
        "import sys\n"
        "from caveman_engine import jsonio\n"
        f"outs = [jsonio.dumps([i, 'x']) for i in range({jsonio.SMALL_NODES})]\n"
        "print(all(o == b'[%d,\"x\"]' % i for i, o in enumerate(outs)), 'orjson' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", many], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True"]


def test_node_count_stops_at_the_budget():
    assert jsonio._nodes_within([1, 2, 3], 4)
    assert not jsonio._nodes_within([1, 2, 3], 3)
    assert jsonio._nodes_within({"a": [1]}, 4)  # the object, its key, the array, 1
    assert not jsonio._nodes_within({"a": [1]}, 3)
    assert not jsonio._nodes_within({"a": 1, "b": 2}, 4)
