"""desc_whitespace: normalise the whitespace of descriptions (annotations: validation-neutral).

Line ends become LF, trailing spaces go, the indentation common to the continuation lines is
removed (docstrings), runs of spaces inside a line shrink to one, blank-line runs to one blank
line, and the text is trimmed. Leading indentation that differs between lines (nested lists)
is kept. Applies to every schema ``description`` and to the tool's own description.
"""

from __future__ import annotations

import re

from ._text import description_rule

NAME = "desc_whitespace"
SUMMARY = "Normalise description whitespace (docstring indentation, trailing spaces, blank-line runs)"

_SPACE = " \t"
_INNER_RUN = re.compile(r"(?<=\S) {2,}(?=\S)")
_TRIM = " \t\n\r\f\v"


def normalise(text: str) -> str:
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = [ln.rstrip(_SPACE) for ln in text.split("\n")]
    rest = [ln for ln in lines[1:] if ln]
    if rest:
        indent = min(len(ln) - len(ln.lstrip(_SPACE)) for ln in rest)
        if indent:
            prefixes = {ln[:indent] for ln in rest}
            if len(prefixes) == 1:  # the same run of spaces/tabs on every line
                lines = [lines[0]] + [ln[indent:] if ln else ln for ln in lines[1:]]
    lines[0] = lines[0].lstrip(_SPACE)
    out: list[str] = []
    for ln in lines:
        if not ln and out and not out[-1]:
            continue
        out.append(_INNER_RUN.sub(" ", ln))
    return "\n".join(out).strip(_TRIM)


apply, apply_tool = description_rule(normalise)
