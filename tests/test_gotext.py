"""gotext.decode against a byte-by-byte decoder written from UTF-8's table of well-formed
sequences (RFC 3629 §4), the way Go's utf8.DecodeRune reads them: a byte that does not start
a well-formed sequence is one U+FFFD, and decoding goes on at the next byte."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from caveman_engine import gotext

CONT = range(0x80, 0xC0)
# lead byte -> the allowed range of each following byte
WELL_FORMED = {
    **{b: [CONT] for b in range(0xC2, 0xE0)},
    0xE0: [range(0xA0, 0xC0), CONT],
    **{b: [CONT, CONT] for b in range(0xE1, 0xED)},
    0xED: [range(0x80, 0xA0), CONT],
    **{b: [CONT, CONT] for b in range(0xEE, 0xF0)},
    0xF0: [range(0x90, 0xC0), CONT, CONT],
    **{b: [CONT, CONT, CONT] for b in range(0xF1, 0xF4)},
    0xF4: [range(0x80, 0x90), CONT, CONT],
}


def go_decode(data: bytes) -> str:
    out = []
    i = 0
    while i < len(data):
        b = data[i]
        if b < 0x80:
            out.append(chr(b))
            i += 1
            continue
        follow = WELL_FORMED.get(b)
        n = len(follow) if follow else 0
        tail = data[i + 1:i + 1 + n]
        if follow and len(tail) == n and all(c in r for c, r in zip(tail, follow)):
            out.append(data[i:i + 1 + n].decode("utf-8"))
            i += 1 + n
        else:
            out.append("\ufffd")
            i += 1
    return "".join(out)


# Bytes that make the interesting cases likely: leads, continuations, the bounds of each range.
_edges = st.sampled_from([0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1,
                          0xC2, 0xDF, 0xE0, 0xE1, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3,
                          0xF4, 0xF5, 0xFF])


@settings(max_examples=3000, deadline=None)
@given(st.lists(_edges | st.integers(0, 255), max_size=24).map(bytes))
def test_decode_is_go_byte_by_byte(data):
    assert gotext.decode(data) == go_decode(data)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40), st.binary(max_size=8), st.text(max_size=40))
def test_valid_text_around_invalid_bytes(a, junk, b):
    data = a.encode("utf-8", "surrogatepass") + junk + b.encode("utf-8", "surrogatepass")
    assert gotext.decode(data) == go_decode(data)


def test_cases_where_go_and_python_replace_differ():
    # a truncated three-byte sequence: Python's "replace" gives one U+FFFD, Go two
    assert gotext.decode(b"\xe2\x82A") == "\ufffd\ufffdA"
    assert b"\xe2\x82A".decode("utf-8", "replace") == "\ufffdA"
    # an encoded surrogate and a code point past U+10FFFF: one U+FFFD per byte
    assert gotext.decode(b"\xed\xa0\x80") == "\ufffd" * 3
    assert gotext.decode(b"\xf4\x90\x80\x80") == "\ufffd" * 4
    assert gotext.decode("caf\u00e9 \U0001f600".encode()) == "caf\u00e9 \U0001f600"
