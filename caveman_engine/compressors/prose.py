"""prose: the caveman-shrink rules (``shrink_spec.md`` §4) as a forced-only compressor.

Drops articles, fillers, hedges, pleasantries and leading "I will"/"you can"-style leaders,
normalises whitespace and capitalises sentence starts, while code fences, inline code, URLs,
paths, CONST_CASE identifiers, calls, parentheticals and version numbers are protected behind
sentinels and restored verbatim.

The original is JavaScript; its regexes are reproduced with JS semantics (ASCII ``\\b \\w \\d``,
JS ``\\s`` spelt out, multiline ``^`` after LF/CR/U+2028/U+2029). Two defects of the original
are deliberately not reproduced (vectors marked ``expected_divergence``):

* placeholder collision: the original's sentinel is ``NUL digits NUL``; an input that already
  contains such text had it replaced by the word ``undefined``. Here the sentinel delimiter is
  NUL only when the input has no NUL; otherwise a private-use character absent from the input is
  used, so input text can never be mistaken for a sentinel. (Both delimiters are non-word,
  non-space, non-letter, non-punctuation characters, so every rule behaves the same.)
* path gluing: the original protected ``./the/file`` as ``the/file``, leaving ``./`` in prose
  where "whitespace before punctuation" removal glued it to the previous word
  (``Read./the/file``). Here a path that starts with a separator (``/x``, ``./x``, ``../x``,
  ``~/x``, backslash forms) is protected from that separator on, so the space before it is kept.

Public API: :func:`shrink` (str -> str), used in-process by the MCP middleware and by
``toolschema-max``; :func:`compress` (bytes) for the engine.
"""

from __future__ import annotations

import re

CONTENT_TYPE = "prose"
SAFETY_CLASS = "S4"

# JavaScript's \s (WhiteSpace + LineTerminator); also the set String.prototype.trim strips.
_JS_SPACE = "\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_S = "[" + _JS_SPACE + "]"
_NOT_S = "[^" + _JS_SPACE + "]"
_TRIM = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
# JS multiline ^: start of input or after a line terminator.
_LINE_START = r"(?:^|(?<=[\n\r\u2028\u2029]))"

_A = re.ASCII
_AI = re.ASCII | re.IGNORECASE

# §4.1 protect patterns, applied in this order.
# The JS regexes are given verbatim in comments. Where the verbatim form backtracks
# quadratically on long runs, the compiled form is an equivalent one (same matches, same
# order): possessive quantifiers where giving characters back can never lead to a match, and a
# lookbehind that skips start positions which can only succeed if an earlier start already has.
_P0 = re.compile(r"```[\s\S]*?```", _A)  # fenced code: /```[\s\S]*?```/g
_P1 = re.compile(r"`[^`\n]+`", _A)  # inline code: /`[^`\n]+`/g
_P2 = re.compile(r"\bhttps?://" + _NOT_S + "+", _AI)  # URLs: /\bhttps?:\/\/\S+/gi
# Paths: /\b[\w.-]*[\/\\][\w.\/\\\-]+/g. Deliberate difference: a path that starts with a
# separator ("/x", "./x", "../x", "~/x", or "\" forms) is protected from that separator on,
# and so are a path's leading dots/dashes; the original left "./" in prose, where rule 7 glued
# it to the word before ("Read ./the/file" -> "Read./the/file").
_P3 = re.compile(
    r"(?<![\w.-])(?:"
    r"(?:\.{1,2}|~)?[/\\](?=[\w.-])[\w./\\\-]*+"  # separator-led
    r"|[.-]*+\b[\w.-]*+[/\\][\w./\\\-]+"  # the original's form
    r")",
    _A,
)
# CONST_CASE: /\b[A-Z][A-Za-z0-9]*(?:_[A-Z][A-Za-z0-9]*)+\b/g
_P4 = re.compile(r"\b[A-Z][A-Za-z0-9]*(?:_[A-Z][A-Za-z0-9]*)+\b", _A)
# Dotted call: /\b\w+\.\w+(?:\.\w+)*\(\)?/g (a start right after "word." is covered by the
# start of that word's chain).
_P5 = re.compile(r"(?<!\w\.)\b\w++\.\w++(?:\.\w++)*+\(\)?", _A)
# Call / parenthetical: /[A-Za-z_][A-Za-z0-9_]*\s*\([^)]*\)/g. A start inside an identifier is
# covered by the identifier's first letter; leading digits are matched but stay outside the
# protected segment (group 1), exactly as in the original.
_P6 = re.compile(r"(?<![A-Za-z0-9_])([0-9]*+)([A-Za-z_][A-Za-z0-9_]*+" + _S + r"*+\([^)]*+\))", _A)
_P7 = re.compile(r"\b\d+\.\d+\.\d+\b", _A)  # versions: /\b\d+\.\d+\.\d+\b/g

# §4.2 transforms, in order.
_LEADERS = re.compile(
    _LINE_START + r"(?:i'?ll|i will|i can|i'?d|you can|we will|we can|let me|let'?s)" + _S + "+",
    _AI,
)
_PLEASANTRIES = re.compile(
    r"\b(?:please|kindly|thank you|thanks|sure|certainly|of course|happy to|i'?d be happy)\b[,.]?"
    + _S
    + "*",
    _AI,
)
_HEDGES = re.compile(
    r"\b(?:perhaps|maybe|might|could potentially|would like to|i think|in my opinion|it seems|it appears)\b"
    + _S
    + "*",
    _AI,
)
_FILLERS = re.compile(
    r"\b(?:just|really|basically|actually|simply|quite|very|essentially|literally)\b", _AI
)
_ARTICLES = re.compile(r"\b(?:a|an|the)" + _S + "+(?=[a-z])", _AI)
_SPACE_RUNS = re.compile(r"[ \t]{2,}")
# /\s+([,.;:!?])/g; a start inside a whitespace run is covered by the run's start.
_SPACE_BEFORE_PUNCT = re.compile("(?<!" + _S + ")" + _S + r"++([,.;:!?])")
_NEWLINE_RUNS = re.compile(r"\n{3,}")
_CAPITALISE = re.compile(r"(^|[.!?]" + _S + r"+)([a-z])", _A)

MAX_RESTORE_PASSES = 8

_NUL_SENTINEL = re.compile("\x00([0-9]+)\x00")


def _delimiter(text: str) -> str:
    if "\x00" not in text:
        return "\x00"
    # A private-use character the input does not contain (the input cannot hold them all).
    present = set(text)
    cp = 0xE000
    while chr(cp) in present:
        cp += 1
        if cp == 0xF900:
            cp = 0xF0000
    return chr(cp)


def _capitalise(m: re.Match[str]) -> str:
    return m.group(1) + m.group(2).upper()


def shrink(text: str) -> str:
    """Apply the prose rules to ``text``; empty input returns empty."""
    if not text:
        return text
    delim = _delimiter(text)
    segments: list[str] = []

    def stash(m: re.Match[str]) -> str:
        segments.append(m.group(0))
        return delim + str(len(segments) - 1) + delim

    def stash_call(m: re.Match[str]) -> str:
        segments.append(m.group(2))
        return m.group(1) + delim + str(len(segments) - 1) + delim

    s = text
    for pattern in (_P0, _P1, _P2, _P3, _P4, _P5):
        s = pattern.sub(stash, s)
    # Every P6 match ends with ")": nothing after the last ")" can match, and leaving it out
    # keeps unclosed "name(" runs linear.
    end = s.rfind(")") + 1
    if end:
        s = _P6.sub(stash_call, s[:end]) + s[end:]
    s = _P7.sub(stash, s)

    s = _LEADERS.sub("", s)
    s = _PLEASANTRIES.sub("", s)
    s = _HEDGES.sub("", s)
    s = _FILLERS.sub("", s)
    s = _ARTICLES.sub("", s)
    s = _SPACE_RUNS.sub(" ", s)
    s = _SPACE_BEFORE_PUNCT.sub(r"\1", s)
    s = _NEWLINE_RUNS.sub("\n\n", s)
    s = _CAPITALISE.sub(_capitalise, s)
    s = s.strip(_TRIM)

    if segments:
        sentinel = (
            _NUL_SENTINEL
            if delim == "\x00"
            else re.compile(re.escape(delim) + "([0-9]+)" + re.escape(delim))
        )

        def restore(m: re.Match[str]) -> str:
            i = int(m.group(1))
            return segments[i] if i < len(segments) else m.group(0)

        for _ in range(MAX_RESTORE_PASSES):
            if delim not in s:
                break
            s = sentinel.sub(restore, s)
    return s


def compress(data: bytes) -> bytes | None:
    """Shrink UTF-8 prose; declines on invalid UTF-8 or empty input.

    A trailing newline of the input is kept (the rules trim it), so a shrunk file still ends
    with a line break.
    """
    if not data:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    out = shrink(text)
    if out and data.endswith(b"\n"):
        out += "\n"
    return out.encode("utf-8")
