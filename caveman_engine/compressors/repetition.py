"""``repetition`` (spec §6.14, forced only): every run of ≥ 3 identical consecutive non-blank
lines keeps its first line followed by ``… caveman: N identical lines elided …``."""

from __future__ import annotations

from .. import elision, gotext

CONTENT_TYPE = "repetition"
SAFETY_CLASS = "S4"

MIN_BYTES = 200
MIN_RUN = 3
PREFIX = "\u2026 caveman: "


@elision.declines_on_error
def compress(data: bytes) -> bytes | None:
    if len(data) < MIN_BYTES:
        return None
    text = gotext.decode_strict(data)
    if text is None:
        return None
    # The final empty element after a trailing newline is a line too: plain split.
    lines = text.split("\n")
    eol = elision.marker_eol(text)
    out: list[str] = []
    collapsed = False
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        j = i + 1
        while j < n and lines[j] == line:
            j += 1
        if j - i >= MIN_RUN and not gotext.is_blank(line) and not line.startswith(PREFIX):
            out.append(line)
            out.append(f"{PREFIX}{j - i - 1} identical lines elided \u2026{eol}")
            collapsed = True
        else:
            out.extend(lines[i:j])
        i = j
    if not collapsed:
        return None
    result = "\n".join(out).encode("utf-8")
    if len(result) >= len(data):
        return None
    return result
