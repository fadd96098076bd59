"""Content-type detection (spec §3). Never loads the tokenizer.

``detect`` unwraps presentation wrappers (§2.2) and classifies the body in the strict order
empty → json → terminal → diff → html → tabular → code → log → search-result → config → text.

Regexes follow RE2 semantics (§3.6). Most run on the raw bytes: every pattern is ASCII, Python
bytes patterns have ASCII ``\\b``/``\\d``/``\\w``, ``\\s`` is spelled ``[\\t\\n\\f\\r ]``, and a
byte ≥ 0x80 is a non-word, non-space character exactly like a multi-byte (or invalid) rune in
Go. The two places where runes differ from bytes are handled explicitly:

* ``(?i)[A-Z]`` in the log regex also matches U+017F (ſ) and U+212A (K) under Go's simple case
  folding — spelled out as byte sequences;
* the search-result regex counts up to 240 runes (``[^:\\n]{0,240}``) — run on text decoded
  like Go ranges over a string (one U+FFFD per invalid byte) when the input is not ASCII;
* HTML's ``strings.ToLower`` maps U+0130 to ``i`` and U+212A to ``k`` — the only non-ASCII
  runes that lower-case to ASCII, so the ASCII substring tests see them.

Line-count rules: the log and search-result detectors count ``\\n``-separated elements with a
trailing empty one (``count("\\n") + 1``); "matched" lines are counted with a multiline regex
that can match at most once per line.
"""

from __future__ import annotations

import re
import sys
import types

from . import gotext, jsonio, wrappers
from .tables import table_rows, trim_span

# The patterns are compiled where they are first used (re keeps them): JSON, the commonest
# input, is answered before any of them, and every compiled pattern costs start-up time.

# -- terminal ---------------------------------------------------------------------------------
_CSI = rb"\x1b\[[0-9;?]*[ -/]*[@-~]"

# -- diff -------------------------------------------------------------------------------------
_DIFF_LINE = rb"^(?:diff --git |@@ |--- |\+\+\+ |[+-][^+-])"

# -- html -------------------------------------------------------------------------------------
_CODE_STARTS = (
    b"import ", b"export ", b"package ", b"func ", b"def ", b"const ",
    b"#include", b"#!", b"//", b"/*",
)  # fmt: skip
_CODE_LINE_STARTS = (
    b"\nimport ", b"\nexport ", b"\npackage ", b"\nfunc ", b"\ndef ", b"\nclass ", b"\nconst ",
)  # fmt: skip
# "<body", "<article", "<main", "<div", "<p>", "<p " in the lower-cased text
_I = rb"(?:i|\xc4\xb0)"
_HTML_CONTAINER = rb"<(?:body|art%scle|ma%sn|d%sv|p[> ])" % (_I, _I, _I)

# -- code -------------------------------------------------------------------------------------
_KEYWORD = (
    rb"\b(?:func|package|import|def|class|function|return|const|let|var|public|private|"
    rb"protected|static|void|struct|interface|namespace|module|fn|impl|trait|export|async|"
    rb"await)\b"
)
# "(=>|::|->|\){|\) \{|;\n|^\s*#include|^\s*from .+ import )": the literals are plain
# substring tests; no multiline flag in the reference, so both "^" alternatives anchor at the
# start of the input (after whitespace, which may include newlines).
_SYMBOL_LITERALS = (b"=>", b"::", b"->", b"){", b") {", b";\n")
_SYMBOL_START = rb"[\t\n\f\r ]*(?:#include|from .+ import )"

# -- log --------------------------------------------------------------------------------------
# "(?i)(\b(TRACE|…|PANIC)\b|^\s*\[[A-Z]+\]|\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}|\b\d{2}:\d{2}:\d{2}\b)"
# per line. Run case-sensitively on the ASCII-lower-cased input (faster than re.I; none of the
# words contains "k" or "s", the only ASCII letters Go's folding ties to non-ASCII runes, and
# the bracket class spells out U+017F and U+212A). Each match swallows the rest of its line, so
# there is one match per matching line. "^" keeps its line anchor; inside a line RE2's \s is
# [\t\f\r ].
_LOG_LINE = (
    rb"(?:\b(?:trace|debug|info|warn|warning|error|fatal|panic)\b"
    rb"|^[\t\f\r ]*\[(?:[a-z]|\xc5\xbf|\xe2\x84\xaa)+\]"
    rb"|\d{4}-\d{2}-\d{2}[ t]\d{2}:\d{2}:\d{2}"
    rb"|\b\d{2}:\d{2}:\d{2}\b)[^\n]*"
)

# -- search-result ----------------------------------------------------------------------------
_SEARCH_PATTERN = r"^(?:[./~A-Za-z0-9_-][^:\n]{0,240}:[0-9]+(?::[0-9]+)?:|https?://[^\t\n\f\r ])"
_SEARCH_LINE_BYTES = _SEARCH_PATTERN.encode()

CONFIG_MIN_LINES = 12
TABULAR_MIN_ROWS = 8


def _count(pattern: re.Pattern, data, limit: int | None = None) -> int:
    n = 0
    for _ in pattern.finditer(data):
        n += 1
        if n == limit:
            break
    return n


def is_terminal(body: bytes) -> bool:
    if re.search(_CSI, body):
        return True
    cr = body.count(b"\r")
    return cr >= 3 and cr - body.count(b"\r\n") >= 3


def is_diff(body: bytes) -> bool:
    if _count(re.compile(_DIFF_LINE, re.M), body, 4) < 4:
        return False
    return (
        b"\n@@ " in body
        or b"diff --git " in body
        or (b"\n--- " in body and b"\n+++ " in body)
    )


def _has_code_structure(body: bytes, t: bytes) -> bool:
    if b"=>" in body or b"className=" in body or b"});" in body:
        return True
    if t.startswith(_CODE_STARTS):
        return True
    return any(s in body for s in _CODE_LINE_STARTS)


def is_html(body: bytes, t: bytes) -> bool:
    # s = strings.ToLower(T). Only prefixes and ASCII substrings of s are tested; the runes
    # that lower-case to ASCII are U+0130 -> "i" and U+212A -> "k" (no "k" in any needle).
    if t[:16].lower().startswith((b"<!doctype html", b"<html")):
        return True
    return (
        t.count(b"<") >= 6
        and re.search(_HTML_CONTAINER, t, re.I) is not None
        and not _has_code_structure(body, t)
    )


def is_tabular(body: bytes) -> bool:
    return table_rows(body) >= TABULAR_MIN_ROWS


def is_log(body: bytes) -> bool:
    elements = body.count(b"\n") + 1
    if elements < 4:
        return False
    matched = _count(re.compile(_LOG_LINE, re.M), body.lower())
    return matched >= 3 and 2 * matched >= elements


def is_code(body: bytes, t: bytes, log: bool) -> bool:
    if log:
        return False
    if t.startswith(b"#!"):
        return True
    if _count(re.compile(_KEYWORD), body, 3) < 3:
        return False
    return (
        any(x in body for x in _SYMBOL_LITERALS)
        or re.match(_SYMBOL_START, body) is not None
        or b"{" in body
        or (b"def " in body and b":" in body)
        or b"\n    " in body
    )


def is_search_result(body: bytes) -> bool:
    elements = body.count(b"\n") + 1
    if elements < 6:
        return False
    if body.isascii():
        matched = _count(re.compile(_SEARCH_LINE_BYTES, re.M), body)
    else:
        matched = _count(re.compile(_SEARCH_PATTERN, re.M), gotext.decode(body))
    return matched >= 4 and 3 * matched >= elements


def is_config(body: bytes) -> bool:
    lines = body[:-1] if body.endswith(b"\n") else body
    if lines.count(b"\n") + 1 < CONFIG_MIN_LINES:
        return False
    from . import configfmt

    return configfmt.classify(body) is not None


def classify(body: bytes) -> str:
    """The content type of an already-unwrapped body."""
    lo, hi = trim_span(body)
    if lo == hi:
        return "text"
    t = body[lo:hi] if (lo, hi) != (0, len(body)) else body
    if t[0] in b"{[" and jsonio.valid(t):
        return "json"
    if is_terminal(body):
        return "terminal"
    if is_diff(body):
        return "diff"
    if is_html(body, t):
        return "html"
    if is_tabular(body):
        return "tabular"
    log = is_log(body)
    if is_code(body, t, log):
        return "code"
    if log:
        return "log"
    if is_search_result(body):
        return "search-result"
    if is_config(body):
        return "config"
    return "text"


def detect(data: bytes) -> str:
    body, _ = wrappers.unwrap(data)
    return classify(body)


class _CallableModule(types.ModuleType):
    """``caveman_engine.detect`` is both this module and the public function: importing the
    package stays light (the module loads on first use) and ``caveman_engine.detect(data)``
    works whether or not the module was imported first."""

    def __call__(self, data: bytes) -> str:
        return detect(data)


sys.modules[__name__].__class__ = _CallableModule
