"""Presentation wrappers (engine_cli_spec §2.2): line-number gutter and `<file>` element,
unwrap and rewrap, layering."""

from __future__ import annotations

import pytest

from caveman_engine.wrappers import Wrapper, rewrap, unwrap

SRC = [b"alpha", b"beta", b"gamma", b"delta", b"epsilon", b"zeta", b"eta", b"theta", b"iota"]


def listing(lines, style: bytes = b"\t", width: int = 6, trailing: bool = True) -> bytes:
    out = b"\n".join(b"%*d%s%s" % (width, i, style, line) for i, line in enumerate(lines, 1))
    return out + (b"\n" if trailing else b"")


# ---------------------------------------------------------------------------------------------
# <file> — the spec's [test] examples


def test_file_wrapper_spec_example():
    data = b' \n<file name="C:\\x\\a>b.go">\n<go source>\n</file>\n\t'
    body, layers = unwrap(data)
    assert body == b"\n<go source>\n"
    assert layers == [Wrapper("file", prefix=b' \n<file name="C:\\x\\a>b.go">', suffix=b"</file>\n\t")]
    assert rewrap(b"compressed", layers) == b' \n<file name="C:\\x\\a>b.go">compressed</file>\n\t'


@pytest.mark.parametrize(
    "data",
    [
        b"plain text",
        b"package main\nfunc f() {}\n",
        b"<html><body>x</body></html>",
        b'<file name="a">x</file>\n<file name="b">y</file>',
        b'<file name="a">',
        b"</file>",
        b"<files>x</files>",
        b'<file name="x"</file>',
        b"<file name='a>b'\nsome prose here\n</file>",
        # more: blank inner, unterminated quote, too short, tag not followed by space/tab/>
        b'<file name="a">  \n\t</file>',
        b'<file name="a>x</file>',
        b"<file>",
        b"<filex>a</file>",
        b"",
        b"   \n\t ",
    ],
)
def test_not_wrappers(data: bytes):
    assert unwrap(data) == (data, [])


def test_file_wrapper_shortest_and_tab():
    assert unwrap(b"<file>x</file>") == (b"x", [Wrapper("file", prefix=b"<file>", suffix=b"</file>")])
    body, layers = unwrap(b"\xe3\x80\x80<file\tp='>'>\nbody\n</file>\xc2\xa0")
    assert body == b"\nbody\n"
    assert layers[0].prefix == b"\xe3\x80\x80<file\tp='>'>"
    assert layers[0].suffix == b"</file>\xc2\xa0"


def test_file_wrapper_keeps_invalid_utf8():
    data = b'<file path="\xff">\n\xfe\xfd\n</file>'
    body, layers = unwrap(data)
    assert body == b"\n\xfe\xfd\n"
    assert rewrap(body, layers) == data


# ---------------------------------------------------------------------------------------------
# gutter recognition


@pytest.mark.parametrize("style", [b"\t", b" | ", b": "])
def test_gutter_styles(style: bytes):
    data = listing(SRC, style)
    body, layers = unwrap(data)
    assert body == b"\n".join(SRC) + b"\n"
    assert [l.kind for l in layers] == ["gutter"]
    assert layers[0].numbers == tuple(range(1, 10))


def test_gutter_numbered_empty_lines_and_blank_lines():
    data = (
        b"     1\tone\n     2\n     3\tthree\n   \n     4\tfour\n\t\n     5\tfive\n"
        b"     6\tsix\n     7\tseven\n     8\teight\n"
    )
    body, layers = unwrap(data)
    assert body == b"one\n\nthree\n\nfour\n\nfive\nsix\nseven\neight\n"
    # a whitespace-only line takes the previous number
    assert layers[0].numbers == (1, 2, 3, 3, 4, 4, 5, 6, 7, 8)


def test_gutter_no_trailing_newline_and_crlf():
    data = listing([l + b"\r" for l in SRC], trailing=False)
    body, _ = unwrap(data)
    assert body == b"\r\n".join(SRC) + b"\r"


def test_gutter_numbers_may_skip_but_must_increase():
    data = b"".join(b"%d\tx%d\n" % (n, n) for n in (3, 5, 6, 10, 11, 12, 20, 21))
    body, layers = unwrap(data)
    assert body == b"".join(b"x%d\n" % n for n in (3, 5, 6, 10, 11, 12, 20, 21))
    assert layers[0].numbers == (3, 5, 6, 10, 11, 12, 20, 21)
    for bad in ((1, 2, 3, 3, 4, 5, 6, 7), (1, 2, 3, 2, 4, 5, 6, 7), (0, 1, 2, 3, 4, 5, 6, 7)):
        data = b"".join(b"%d\tx\n" % n for n in bad)
        assert unwrap(data) == (data, [])


def test_gutter_needs_eight_numbered_lines():
    assert unwrap(listing(SRC[:7])) == (listing(SRC[:7]), [])
    assert unwrap(listing(SRC[:8]))[1][0].kind == "gutter"
    # 8 lines but only 7 numbered
    data = listing(SRC[:7]) + b"  \n"
    assert unwrap(data) == (data, [])


def test_gutter_rejects_unnumbered_content_and_bad_gutters():
    data = listing(SRC) + b"not numbered\n"
    assert unwrap(data) == (data, [])
    for style in (b" ", b"|", b" |", b":", b".\t"):
        data = listing(SRC, style)
        assert unwrap(data) == (data, [])
    # tabs are not allowed before the digits; 13 digits is too many
    data = b"".join(b"\t%d\tx\n" % i for i in range(1, 10))
    assert unwrap(data) == (data, [])
    data = b"".join(b"%013d\tx\n" % i for i in range(1, 10))
    assert unwrap(data) == (data, [])
    data = b"".join(b"%012d\tx\n" % i for i in range(1, 10))
    assert unwrap(data)[0] == b"x\n" * 9


# ---------------------------------------------------------------------------------------------
# gutter rewrap


def test_rewrap_traces_lines_and_marks_gaps():
    data = listing(SRC, b" | ", width=3)
    body, layers = unwrap(data)
    out = b"alpha\n... 6 lines elided ...\ntheta\niota\n"
    # the marker takes the number at the cursor: the line after "alpha"
    assert rewrap(out, layers) == b"1\talpha\n2\t... 6 lines elided ...\n8\ttheta\n9\tiota\n"


def test_rewrap_identity_renumbers_with_tabs():
    data = listing(SRC, b": ", width=4, trailing=False)
    body, layers = unwrap(data)
    assert rewrap(body, layers) == listing(SRC, b"\t", width=1, trailing=False)


def test_rewrap_repeated_lines_advance_the_cursor():
    src = [b"}", b"a", b"}", b"b", b"}", b"c", b"}", b"d", b""]
    data = listing(src)
    _, layers = unwrap(data)
    out = b"}\n}\n}\nd\n\n"
    # blank output lines take the number at the cursor
    assert rewrap(out, layers) == b"1\t}\n3\t}\n5\t}\n8\td\n9\t\n"


def test_rewrap_declined_when_less_than_half_traced():
    _, layers = unwrap(listing(SRC))
    out = b"x\ny\nalpha\nz\n"  # 1 of 4 non-blank lines traced
    assert rewrap(out, layers) == out
    out = b"x\nalpha\nbeta\nz\n\n\n"  # 2 of 4: exactly half is enough
    assert rewrap(out, layers) == b"1\tx\n1\talpha\n2\tbeta\n3\tz\n3\t\n3\t\n"


def test_rewrap_cursor_past_the_end_uses_last_number():
    _, layers = unwrap(listing(SRC))
    assert rewrap(b"iota\n(end)\n", layers) == b"9\tiota\n9\t(end)\n"


# ---------------------------------------------------------------------------------------------
# layers


def test_gutter_inside_file_and_file_inside_gutter():
    go = [b"package main", b"", b"func a() int { return 1 }", b"func b() int { return 2 }",
          b"func c() int { return 3 }", b"func d() int { return 4 }", b"func e() int { return 5 }",
          b"func f() int { return 6 }"]
    inner = b"\n".join(go) + b"\n"
    data = b'<file path="m.go">\n' + listing(go) + b"</file>\n"
    body, layers = unwrap(data)
    assert [l.kind for l in layers] == ["file", "gutter"]
    assert body == b"\n" + inner
    out = b"package main\n\nfunc a() int { return 1 }\n"
    assert rewrap(out, layers) == b'<file path="m.go">1\tpackage main\n2\t\n3\tfunc a() int { return 1 }\n</file>\n'

    data = listing([b'<file path="m.go">'] + go + [b"</file>"])
    body, layers = unwrap(data)
    assert [l.kind for l in layers] == ["gutter", "file"]
    assert body == b"\n" + inner


def test_at_most_four_layers():
    data = b"x\n"
    for _ in range(5):
        data = b"<file>" + data + b"</file>"
    # nested <file> elements are not a single element: not even one layer
    assert unwrap(data) == (data, [])

    payload = [b"line %d" % i for i in range(8)]
    layer1 = listing(payload)
    layer2 = listing(layer1.split(b"\n")[:-1])  # a listing of a listing
    layer3 = b"<file a='1'>" + layer2 + b"</file>"
    layer4 = listing(layer3.split(b"\n"), width=3)
    layer5 = listing(layer4.split(b"\n")[:-1], b" | ")
    body, layers = unwrap(layer5)
    assert [l.kind for l in layers] == ["gutter", "gutter", "file", "gutter"]
    assert body == layer1  # the fifth (innermost gutter) stays
    assert detect_kinds(layer3) == ["file", "gutter", "gutter"]
    body3, _ = unwrap(layer3)
    assert body3 == b"\n".join(payload) + b"\n"


def detect_kinds(data: bytes) -> list[str]:
    return [l.kind for l in unwrap(data)[1]]


def test_unwrap_is_linear_on_large_listings():
    import time

    lines = [b"value = compute(%d)  # note" % i for i in range(200_000)]
    data = listing(lines)
    t0 = time.perf_counter()
    body, layers = unwrap(data)
    assert body == b"\n".join(lines) + b"\n"
    kept = b"\n".join(lines[::50]) + b"\n"
    again = rewrap(kept, layers)
    assert again.startswith(b"1\tvalue = compute(0)  # note\n51\tvalue = compute(50)")
    assert time.perf_counter() - t0 < 5.0


# ---------------------------------------------------------------------------------------------
# the bulk gutter parser against a line-by-line transcription of §2.2

import re  # noqa: E402

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from caveman_engine import gotext  # noqa: E402

_SPEC_GUTTER = re.compile(rb" *([0-9]{1,12})(?:\t| \| |: |\Z)")


def spec_gutter(data: bytes):
    trailing = data.endswith(b"\n")
    lines = (data[:-1] if trailing else data).split(b"\n")
    if len(lines) < 8:
        return None
    source, numbers, previous, numbered = [], [], 0, 0
    for line in lines:
        m = _SPEC_GUTTER.match(line)
        if m:
            n = int(m.group(1))
            if n <= previous:
                return None
            previous, numbered = n, numbered + 1
            source.append(line[m.end() :])
            numbers.append(n)
        elif gotext.is_blank(line.decode("utf-8", "surrogateescape")):
            source.append(b"")
            numbers.append(previous)
        else:
            return None
    if numbered < 8:
        return None
    return b"\n".join(source) + (b"\n" if trailing else b""), tuple(numbers)


_PIECES = st.sampled_from(
    [b"1", b"2", b"3", b"7", b"9", b"\t", b" | ", b": ", b" ", b"x", b"\xc2\xa0", b"\r", b"\x0b", b"|"]
)
_LINE = st.lists(_PIECES, max_size=5).map(b"".join)


@st.composite
def listings(draw):
    n = draw(st.integers(8, 12))
    out = []
    for i in range(1, n + 1):
        kind = draw(st.sampled_from(["tab"] * 6 + ["pipe", "colon", "eol", "blank", "random"]))
        if kind == "random":
            out.append(draw(_LINE))
        elif kind == "blank":
            out.append(draw(st.sampled_from([b"", b"  ", b"\t", b"\xe3\x80\x80", b"\r"])))
        else:
            num = i * draw(st.sampled_from([1] * 12 + [0, 2]))
            style = {"tab": b"\t", "pipe": b" | ", "colon": b": ", "eol": b""}[kind]
            rest = b"" if kind == "eol" else draw(_LINE)
            out.append(b" " * draw(st.integers(0, 3)) + b"%d" % num + style + rest)
    return b"\n".join(out) + draw(st.sampled_from([b"", b"\n", b"\n\n"]))


@settings(max_examples=200, deadline=None)
@given(listings())
def test_gutter_matches_spec_transcription(data: bytes):
    expected = spec_gutter(data)
    got = wrappers_unwrap_gutter(data)
    assert got == expected


def wrappers_unwrap_gutter(data: bytes):
    from caveman_engine import wrappers

    r = wrappers._unwrap_gutter(data)
    return None if r is None else (r[0], r[1].numbers)
