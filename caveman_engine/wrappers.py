"""Presentation wrappers (spec §2.2): a `cat -n` style line-number gutter and a single
`<file …>…</file>` element. Up to four layers are peeled before detection/compression and put
back, innermost first, on the output.

Everything works on bytes: a wrapper never decodes or re-encodes the payload, so invalid UTF-8
passes through untouched. "Blank"/"whitespace" always means Go's ``unicode.IsSpace`` set.
"""

from __future__ import annotations

import re

from .tables import _Value, is_blank, trim_span

MAX_LAYERS = 4
MIN_GUTTER_LINES = 8


class Wrapper(_Value):
    """One peeled layer. ``kind`` is "gutter" or "file"; a file layer keeps ``prefix``
    (leading whitespace + opening tag) and ``suffix`` (closing tag + trailing whitespace); a
    gutter layer keeps the unwrapped ``source`` and the gutter number of each of its lines
    (``numbers``; a blank, un-numbered line carries the previous number)."""

    __slots__ = ("kind", "prefix", "suffix", "source", "numbers")
    kind: str
    prefix: bytes
    suffix: bytes
    source: bytes
    numbers: tuple[int, ...]

    def __init__(
        self,
        kind: str,
        prefix: bytes = b"",
        suffix: bytes = b"",
        source: bytes = b"",
        numbers: tuple[int, ...] = (),
    ) -> None:
        self._init(kind=kind, prefix=prefix, suffix=suffix, source=source, numbers=numbers)


def unwrap(data: bytes) -> tuple[bytes, list[Wrapper]]:
    """Peel up to four wrapper layers, outermost first. Returns (body, layers)."""
    layers: list[Wrapper] = []
    body = data
    while len(layers) < MAX_LAYERS:
        peeled = _unwrap_gutter(body) or _unwrap_file(body)
        if peeled is None:
            break
        body, layer = peeled
        layers.append(layer)
    return body, layers


def rewrap(out: bytes, layers: list[Wrapper]) -> bytes:
    """Re-apply ``layers`` (as returned by :func:`unwrap`) around compressed ``out``.

    A gutter layer whose output cannot be traced to its source (fewer than half of the
    non-blank output lines found) is skipped: that layer's body is emitted without a gutter;
    outer layers are still applied."""
    for layer in reversed(layers):
        if layer.kind == "gutter":
            regut = _rewrap_gutter(out, layer)
            if regut is not None:
                out = regut
        else:
            out = layer.prefix + out + layer.suffix
    return out


# ---------------------------------------------------------------------------------------------
# Line-number gutter

# optional spaces, 1-12 ASCII digits, then TAB, " | ", ": " or the end of the line. The
# patterns here are compiled on first use: every compress unwraps, few inputs are wrapped.
_GUTTER = rb" *([0-9]{1,12})(?:\t| \| |: |\Z)"


def _split_lines(data: bytes) -> tuple[list[bytes], bool]:
    """Lines after removing one final empty line produced by a trailing newline."""
    if data.endswith(b"\n"):
        return data[:-1].split(b"\n"), True
    return data.split(b"\n"), False


# Every line of a listing, in one pass: a gutter prefix (group 1 = the number) or a whole
# whitespace-only line (group 1 empty), then the line's source text (group 2; empty for a
# blank line).
_GO_SPACE_NO_LF = rb"(?:[\t\v\f\r ]|\xc2[\x85\xa0]|\xe1\x9a\x80|\xe2\x80[\x80-\x8a\xa8\xa9\xaf]|\xe2\x81\x9f|\xe3\x80\x80)"
_LISTING_LINE = rb"^(?: *([0-9]{1,12})(?:\t| \| |: |$)|%s*$)([^\n]*)" % _GO_SPACE_NO_LF


def _unwrap_gutter(data: bytes) -> tuple[bytes, Wrapper] | None:
    # Cheap pre-checks before splitting: enough lines, first line plausible.
    if data.count(b"\n") < MIN_GUTTER_LINES - 1:
        return None
    first = data[: data.find(b"\n")]
    head = first[:64].lstrip(b" ")  # a digit after the spaces, or the pattern cannot match
    maybe = head[:1].isdigit() if head else True
    if not (maybe and re.match(_GUTTER, first)) and not is_blank(first):
        return None
    trailing = data.endswith(b"\n")
    body = data[:-1] if trailing else data
    lines = body.count(b"\n") + 1
    if lines < MIN_GUTTER_LINES:
        return None
    found = re.findall(_LISTING_LINE, body, re.M)  # at most one match per line, each at its start
    if len(found) != lines:
        return None  # some line is neither numbered nor blank
    numbered = [int(n) for n, _ in found if n]
    if len(numbered) < MIN_GUTTER_LINES or numbered[0] < 1:
        return None
    if not all(a < b for a, b in zip(numbered, numbered[1:])):
        return None
    if len(numbered) == lines:
        numbers = tuple(numbered)
    else:  # a blank line takes the previous number (0 before the first)
        previous = 0
        out = []
        it = iter(numbered)
        for n, _ in found:
            if n:
                previous = next(it)
            out.append(previous)
        numbers = tuple(out)
    inner = b"\n".join([src for _, src in found]) + (b"\n" if trailing else b"")
    return inner, Wrapper("gutter", source=inner, numbers=numbers)


def _rewrap_gutter(out: bytes, layer: Wrapper) -> bytes | None:
    """Prefix every output line with ``N\t``. A non-blank line equal to the next identical
    source line at/after the cursor takes that line's number and moves the cursor past it;
    other lines (markers, blank lines) take the number at the cursor (the last number once the
    cursor is past the end). None when fewer than half the non-blank lines were traced."""
    from bisect import bisect_left

    src_lines, _ = _split_lines(layer.source)
    numbers = layer.numbers
    if not numbers or len(src_lines) != len(numbers):
        return None
    positions: dict[bytes, list[int]] = {}
    for i, line in enumerate(src_lines):
        positions.setdefault(line, []).append(i)
    last = len(numbers) - 1
    lines, trailing = _split_lines(out)
    cursor = 0
    traced = 0
    nonblank = 0
    parts: list[bytes] = []
    for line in lines:
        n = numbers[min(cursor, last)]
        if not is_blank(line):
            nonblank += 1
            found = positions.get(line)
            if found:
                k = bisect_left(found, cursor)
                if k < len(found):
                    j = found[k]
                    n = numbers[j]
                    cursor = j + 1
                    traced += 1
        parts.append(b"%d\t%s" % (n, line))
    if 2 * traced < nonblank:
        return None
    return b"\n".join(parts) + (b"\n" if trailing else b"")


# ---------------------------------------------------------------------------------------------
# <file …>…</file>

_OPEN = b"<file"
_CLOSE = b"</file>"
_TAG_SCAN = rb"[>\"']"


def _tag_scan() -> re.Pattern:
    return re.compile(_TAG_SCAN)  # cached by re after the first call


def _unwrap_file(data: bytes) -> tuple[bytes, Wrapper] | None:
    lo, hi = trim_span(data)
    if hi - lo < 9 or not data.startswith(_OPEN, lo) or data[lo + 5] not in b" \t>":
        return None
    if not data.endswith(_CLOSE, lo, hi):
        return None
    if data.count(_OPEN, lo, hi) != 1 or data.count(_CLOSE, lo, hi) != 1:
        return None
    close = hi - len(_CLOSE)
    # The opening tag's ">" from byte 5, skipping quoted attribute values.
    i = lo + 5
    scan = _tag_scan()
    while True:
        m = scan.search(data, i, hi)
        if m is None:
            return None
        c = data[m.start()]
        if c == 0x3E:  # ">"
            gt = m.start()
            break
        q = data.find(bytes((c,)), m.start() + 1, hi)
        if q < 0:
            return None  # unterminated quote
        i = q + 1
    if gt >= close:
        return None
    inner = data[gt + 1 : close]
    if is_blank(inner):
        return None
    return inner, Wrapper("file", prefix=data[: gt + 1], suffix=data[close:])
