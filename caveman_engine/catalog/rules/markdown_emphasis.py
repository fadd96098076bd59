"""markdown_emphasis: drop Markdown bold markers from descriptions (``toolschema-max``).

``**PARAMETERS:**`` costs two tokens more than ``PARAMETERS:`` and says the same words; the
model reads the words, not the typography. Only well-formed pairs go: ``**`` directly before a
non-space and after a non-space, on one line, with no ``*`` or backtick inside, not touching a
word character on the outside (``2**10`` and ``**kwargs`` stay). Code spans and fenced code are
never touched. Tool and schema descriptions; annotations only, so validation is unchanged.
"""

from __future__ import annotations

import re

from ._text import description_rule

NAME = "markdown_emphasis"
SUMMARY = "Drop Markdown bold markers (**text**) from descriptions, outside code"

_CODE = re.compile(r"```[\s\S]*?```|`[^`\n]*`")
_BOLD = re.compile(r"(?<![\w*\\])\*\*(?=[^\s*])([^*`\n]*?[^\s*\\])\*\*(?![\w*])")


def plain(text: str) -> str:
    out = []
    pos = 0
    for m in _CODE.finditer(text):
        out.append(_BOLD.sub(r"\1", text[pos:m.start()]))
        out.append(m.group())
        pos = m.end()
    out.append(_BOLD.sub(r"\1", text[pos:]))
    return "".join(out)


apply, apply_tool = description_rule(plain)
