"""``html`` (spec §6.7): readability-style article extraction to plain text.

The document is parsed with an HTML5-conformant parser (lexbor through ``selectolax``, with
scripting enabled like Go's ``golang.org/x/net/html``). Script, style, noscript, svg, iframe,
form, button, input and template subtrees are dropped (comments never produce text).

Scoring: every p/pre/td/blockquote/li/h1–h6 whose trimmed text is at least 25 bytes scores
``1 + commas + min(len/100, 3)`` into each container ancestor (div/article/main/section/td,
never body). A container that received points gets ±25 once when its ``class``+``id`` match
the positive/negative patterns. Each candidate's score is discounted by its link density
(``int(score × (1 − link/text))``); the best one wins, document order breaking ties.

Declines: no body, no candidate, link text ≥ half of the winner's text, extracted text under
200 bytes, or output not smaller than the input.

Output: block elements start and end a line, inline elements are a space, runs of ASCII spaces
and tabs within a line collapse to one space and each line is then trimmed of Go whitespace (so
a U+00A0 between two inline elements stays, with a space on each side, while one at either end
of a line goes), source line breaks inside text are kept, runs of blank lines become one,
``<pre>`` content is copied verbatim; no trailing newline.

Every walk is iterative (no recursion limit) and scoring aggregates bottom-up, so the work is
linear in the size of the document.
"""

from __future__ import annotations

import re

from .. import gotext

CONTENT_TYPE = "html"
SAFETY_CLASS = "S4"

MIN_SCORED_BYTES = 25
MIN_OUTPUT_BYTES = 200
CLASS_WEIGHT = 25

_REMOVED = frozenset(
    ("script", "style", "noscript", "svg", "iframe", "form", "button", "input", "template")
)
_SCORED = frozenset(("p", "pre", "td", "blockquote", "li", "h1", "h2", "h3", "h4", "h5", "h6"))
_CONTAINERS = frozenset(("div", "article", "main", "section", "td"))
# Elements rendered as line breaks; everything else (a, span, code, dt, dd, details, summary,
# custom elements, …) is inline and rendered as a space.
_BLOCKS = frozenset(
    (
        "p", "div", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "pre", "blockquote",
        "table", "tr", "section", "article", "main", "header", "footer", "nav", "aside",
    )
)
# Void elements that are a single line break.
_BREAKS = frozenset(("br", "hr"))

_POSITIVE = re.compile(r"(?i)(article|body|content|entry|main|page|post|story|text|blog)")
_NEGATIVE = re.compile(
    r"(?i)(comment|nav|sidebar|footer|header|menu|promo|banner|ad-|share|social|related"
    r"|breadcrumb|cookie|popup|modal|widget)"
)
# Go's unicode.IsSpace set (strings.TrimSpace): trims text for scoring and trims output lines.
_GO_SPACE = gotext.GO_SPACE
# What collapses inside an output line: runs of ASCII space and tab only. U+00A0 (&nbsp;) and the
# other Unicode spaces are kept as they are; they only go when a line is trimmed.
_RUN = re.compile("[ \t]+")


class _El:
    __slots__ = ("tag", "attrs", "kids", "parent")

    def __init__(self, tag: str, attrs: dict, parent: _El | None) -> None:
        self.tag = tag
        self.attrs = attrs
        self.kids: list[_El | str] = []
        self.parent = parent


def _build(data: bytes) -> _El | None:
    """Parse and copy the ``<body>`` subtree, minus removed elements and comments."""
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(data, scripting=True)
    src = tree.body
    if src is None or src.tag != "body":
        return None
    body = _El("body", {}, None)
    stack = [(src.child, body)]
    while stack:
        node, parent = stack.pop()
        if node is None:
            continue
        stack.append((node.next, parent))
        tag = node.tag
        if tag == "-text":
            text = node.text_content
            if text:
                parent.kids.append(text)
        elif node.is_element_node and tag not in _REMOVED:
            el = _El(tag, node.attributes, parent)
            parent.kids.append(el)
            stack.append((node.child, el))
    return body


def _postorder(root: _El) -> list[_El]:
    order: list[_El] = []
    stack = [root]
    while stack:
        el = stack.pop()
        order.append(el)
        for kid in el.kids:
            if type(kid) is _El:
                stack.append(kid)
    order.reverse()  # children before parents
    return order


class _Span:
    """Byte-level summary of an element's text: total, commas, Go-trimmed length."""

    __slots__ = ("size", "commas", "lead", "trail", "blank")

    def __init__(self, size: int, commas: int, lead: int, trail: int, blank: bool) -> None:
        self.size = size
        self.commas = commas
        self.lead = lead  # whitespace bytes before the first non-space
        self.trail = trail  # whitespace bytes after the last non-space
        self.blank = blank  # all whitespace (then lead == trail == size)

    @property
    def trimmed(self) -> int:
        return 0 if self.blank else self.size - self.lead - self.trail


def _text_span(text: str) -> _Span:
    size = len(text.encode("utf-8"))
    stripped = text.strip(_GO_SPACE)
    if not stripped:
        return _Span(size, 0, size, size, True)
    lead = len(text[: len(text) - len(text.lstrip(_GO_SPACE))].encode("utf-8"))
    trail = len(text[len(text.rstrip(_GO_SPACE)) :].encode("utf-8"))
    return _Span(size, text.count(","), lead, trail, False)


def _concat(spans: list[_Span]) -> _Span:
    size = commas = lead = trail = 0
    blank = True
    for s in spans:
        if blank:
            lead += s.lead if not s.blank else s.size
        if s.blank:
            trail += s.size
        else:
            trail = s.trail
            blank = False
        size += s.size
        commas += s.commas
    if blank:
        return _Span(size, 0, size, size, True)
    return _Span(size, commas, lead, trail, False)


def _pick(body: _El) -> tuple[_El, int, int] | None:
    """The winning container with its trimmed text length and link text length."""
    spans: dict[int, _Span] = {}
    links: dict[int, int] = {}  # summed trimmed text of <a> descendants
    below: dict[int, int] = {}  # summed scores of scored descendants
    counted: dict[int, int] = {}  # number of scored descendants
    for el in _postorder(body):
        parts: list[_Span] = []
        link = score = count = 0
        for kid in el.kids:
            if type(kid) is str:
                parts.append(_text_span(kid))
                continue
            key = id(kid)
            span = spans[key]
            parts.append(span)
            if kid.tag == "a":
                link += span.trimmed
            else:
                link += links[key]
            score += below[key]
            count += counted[key]
            if kid.tag in _SCORED and span.trimmed >= MIN_SCORED_BYTES:
                score += 1 + span.commas + min(span.trimmed // 100, 3)
                count += 1
        key = id(el)
        spans[key] = _concat(parts)
        links[key] = link
        below[key] = score
        counted[key] = count

    best: tuple[_El, int, int] | None = None
    best_score = 0
    stack = [body]
    while stack:  # document order
        el = stack.pop()
        for kid in reversed(el.kids):
            if type(kid) is _El:
                stack.append(kid)
        if el is body or el.tag not in _CONTAINERS:
            continue
        key = id(el)
        if not counted[key]:
            continue
        score = below[key]
        marks = (el.attrs.get("class") or "") + " " + (el.attrs.get("id") or "")
        if _POSITIVE.search(marks):
            score += CLASS_WEIGHT
        if _NEGATIVE.search(marks):
            score -= CLASS_WEIGHT
        text_len = spans[key].trimmed
        density = links[key] / text_len if text_len else 0.0
        final = int(score * (1.0 - density))
        if best is None or final > best_score:
            best, best_score = (el, text_len, links[key]), final
    return best


def _render(root: _El) -> str:
    lines: list[str] = []
    cur: list[str] = []
    cur_pre = False

    def end_line() -> None:
        nonlocal cur_pre
        joined = "".join(cur)
        if cur_pre:
            lines.append(joined)
        else:
            lines.append(gotext.trim(_RUN.sub(" ", joined)))
        cur.clear()
        cur_pre = False

    # (node, inside <pre>, closing)
    stack: list[tuple[_El | str, bool, bool]] = [(root, False, False)]
    while stack:
        node, pre, closing = stack.pop()
        if type(node) is str:
            pieces = node.split("\n")
            for i, piece in enumerate(pieces):
                if i:
                    end_line()
                cur.append(piece)
                if pre:
                    cur_pre = True
            continue
        tag = node.tag
        if not pre:
            if tag in _BREAKS:
                if not closing:
                    end_line()
                continue
            if tag in _BLOCKS:
                end_line()
            else:
                cur.append(" ")
        if closing:
            continue
        stack.append((node, pre, True))
        inner = pre or tag == "pre"
        for kid in reversed(node.kids):
            stack.append((kid, inner, False))
    end_line()

    out: list[str] = []
    for line in lines:
        if not line and (not out or not out[-1]):
            continue
        out.append(line)
    return gotext.trim("\n".join(out))


def compress(data: bytes) -> bytes | None:
    body = _build(data)
    if body is None:
        return None
    picked = _pick(body)
    if picked is None:
        return None
    winner, text_len, link_len = picked
    if winner is body:
        return None
    if text_len and 2 * link_len >= text_len:
        return None
    out = _render(winner).encode("utf-8")
    if len(out) < MIN_OUTPUT_BYTES or len(out) >= len(data):
        return None
    return out
