"""``text`` (spec §6.6): elide redundant sections (paragraphs, or lines when the text has no
blank line) of long prose, keeping the first/last two, headings and flagged sections."""

from __future__ import annotations

import re

from .. import elision, gotext

CONTENT_TYPE = "text"
SAFETY_CLASS = "S4"

MIN_BYTES = 1600
MIN_SECTIONS = 7  # "more than 6"
HEAD = 2
TAIL = 2
HEADING_MAX = 96
HEADING_MAX_WORDS = 8

_KEEP = re.compile(
    r"(?i)\b(ERROR|WARNING|IMPORTANT|NOTE|ACTION|FOLLOWUP|SECURITY|SUMMARY|CONCLUSION|DECISION"
    r"|RECOMMENDATION)\b",
    re.ASCII,
)
_HTML_BLOCK = re.compile(
    r"(?is)<script\b[^>]*>.*?</script\s*>|<style\b[^>]*>.*?</style\s*>|<svg\b[^>]*>.*?</svg\s*>"
)
_HTML_COMMENT = re.compile(r"(?s)<!--.*?-->")
_FENCE = re.compile(r"[\t\n\f\r ]*(`{3,}|~{3,})")


def marker(n: int) -> str:
    return f"\u2026 {n} sections elided (caveman) \u2026"


def _looks_html(text: str) -> bool:
    low = gotext.to_lower(gotext.trim(text))
    return low.startswith("<!doctype html") or low.startswith("<html") or "<body" in low


def split_sections(text: str) -> list[str]:
    r"""Paragraphs when the trimmed text has an empty line (contains ``\n\n``), else one line
    per section; a fenced code block is always one section. Sections come back trimmed.

    The two tests differ on purpose: a whitespace-only line (a diff's blank context line ``" "``,
    ``\r`` in CRLF text) does not switch paragraph mode on, but once it is on, such a line
    separates paragraphs like an empty one."""
    lines = gotext.trim(text).split("\n")
    by_paragraph = "" in lines
    sections: list[str] = []
    cur: list[str] = []

    def flush() -> None:
        if cur:
            s = gotext.trim("\n".join(cur))
            if s:
                sections.append(s)
            cur.clear()

    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        m = _FENCE.match(line)
        if m:
            flush()
            fence = m.group(1)
            block = [line]
            i += 1
            while i < n:
                block.append(lines[i])
                cm = _FENCE.match(lines[i])
                i += 1
                if cm and cm.group(1)[0] == fence[0] and len(cm.group(1)) >= len(fence):
                    break
            s = gotext.trim("\n".join(block))
            if s:
                sections.append(s)
            continue
        if by_paragraph:
            if gotext.is_blank(line):
                flush()
            else:
                cur.append(line)
        else:
            cur.append(line)
            flush()
        i += 1
    flush()
    return sections


def is_heading(section: str) -> bool:
    if section.startswith("#"):
        return True
    if elision.utf8_len(section) > HEADING_MAX:
        return False
    if any(c in section for c in ".!?"):
        return False
    words = len(gotext.fields(section))
    return 1 <= words <= HEADING_MAX_WORDS


@elision.declines_on_error
def compress(data: bytes) -> bytes | None:
    text = gotext.decode_strict(data)
    if text is None:
        return None
    if elision.utf8_len(gotext.trim(text)) < MIN_BYTES:
        return None
    if _looks_html(text):
        text = _HTML_BLOCK.sub(marker(1), text)
        text = _HTML_COMMENT.sub("", text)
    sections = split_sections(text)
    n = len(sections)
    if n < MIN_SECTIONS:
        return None
    keep = [i < HEAD or i >= n - TAIL for i in range(n)]
    for i, s in enumerate(sections):
        if not keep[i] and (elision.is_marker(s) or is_heading(s) or _KEEP.search(s)):
            keep[i] = True
    keep = elision.keep_non_redundant(sections, keep)
    out = elision.render_runs(sections, keep, marker)
    if out is None:
        return None
    return "\n\n".join(out).encode("utf-8")
