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

The parser is not: an HTML5 tree builder checks "is there a p/li/... in scope" by walking the
stack of open elements, at nearly every tag, and reopens every pending formatting element
(b, i, a, font, ...) after a misnested end tag, so ``<div>`` x 100,000 costs ~13 s and
``<b>`` x n then ``</p>`` x n is quadratic too. Before the parser sees a document, a linear
scan of its tags (`nesting_work`) adds up the parser's walks: the depth of the open elements,
pending formatting elements included, at every tag. A document whose work exceeds
``MAX_WORK_BASE + MAX_AVERAGE_DEPTH x (number of "<")`` is declined (passed through), the scan
stopping as soon as it gets there. Real pages are far below: the conformance pages peak at
depth 18 and average at most 9 steps of work per tag; the bound is reached by ``<div>`` x
6,055 (~50 ms in the parser) and would take a large page averaging 256. The scan costs about
1 µs per tag in Python (a third of what the rest of this compressor spends per element); it
is skipped when there are too few tags for the bound to be reachable.
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


# -- the nesting pre-scan

MAX_WORK_BASE = 1 << 24  # ~50 ms of the parser's stack walks, whatever the size
MAX_AVERAGE_DEPTH = 256  # beyond MAX_WORK_BASE: the average walk per tag
# A pending formatting element costs the parser a clone each time it is reopened, ~200 times
# a step of a stack walk; counted as PENDING_WEIGHT steps at every tag.
PENDING_WEIGHT = 64


def _names(words: str) -> frozenset[bytes]:
    return frozenset(words.encode().split())


_VOID = _names(
    "area base basefont bgsound br col embed frame hr image img input keygen link meta param "
    "source track wbr"
)
# Elements whose content is raw text: no tags inside until their own end tag.
_RAW = _names("script style textarea title xmp iframe noembed noframes noscript plaintext")
# The formatting elements (the adoption agency algorithm and its list of them).
_FORMATTING = _names("a b big code em font i nobr s small strike strong tt u")
# A start tag of these closes an open p (when it is near the top of the stack).
_CLOSES_P = _names(
    "address article aside blockquote center details dialog dir div dl fieldset figcaption "
    "figure footer form h1 h2 h3 h4 h5 h6 header hgroup hr li listing main menu nav ol p pre "
    "section summary table ul dd dt search"
)
# A start tag of the key closes the deepest open element of the first set found near the top
# of the stack, looking no further than an element of the second set.
_CELLS = _names("tbody thead tfoot tr td th")
_CLOSES_SAME = {
    b"li": (_names("li"), _names("ul ol menu table td th")),
    b"dt": (_names("dt dd"), _names("dl table td th")),
    b"dd": (_names("dt dd"), _names("dl table td th")),
    b"option": (_names("option"), _names("select datalist optgroup")),
    b"optgroup": (_names("optgroup option"), _names("select datalist")),
    b"tr": (_names("tr td th"), _names("table tbody thead tfoot")),
    b"td": (_names("td th"), _names("tr table")),
    b"th": (_names("td th"), _names("tr table")),
    b"tbody": (_CELLS, _names("table")),
    b"thead": (_CELLS, _names("table")),
    b"tfoot": (_CELLS, _names("table")),
    b"rp": (_names("rp rt"), _names("ruby")),
    b"rt": (_names("rp rt"), _names("ruby")),
    b"a": (_names("a"), frozenset()),  # a new <a> closes an open one (adoption agency)
    b"nobr": (_names("nobr"), frozenset()),
}
_NEAR = 8  # how far down the stack the implied end tags above are looked for
_K_VOID, _K_RAW, _K_FORMATTING, _K_CLOSES_P, _K_RULE = 1, 2, 4, 8, 16
_KIND: dict[bytes, int] = {}
for _flag, _set in ((_K_VOID, _VOID), (_K_RAW, _RAW), (_K_FORMATTING, _FORMATTING),
                    (_K_CLOSES_P, _CLOSES_P), (_K_RULE, _CLOSES_SAME)):
    for _name in _set:
        _KIND[_name] = _KIND.get(_name, 0) | _flag
_TAG = re.compile(
    rb"<(?:!--.*?(?:-->|\Z)|[!?][^>]*>?|(/?)([A-Za-z][^\t\n\f\r />]*)"
    rb"""([^>"']*(?:(?:"[^"]*"|'[^']*')[^>"']*)*)>?)""",
    re.S,
)


def nesting_work(data: bytes, limit: int | None = None) -> tuple[int, int, int]:
    """(work, tags, max depth) of an approximate, linear model of the HTML5 tree builder: the
    sum over tags of what the parser's scope checks walk (the open elements) and reopens (the
    pending formatting elements, PENDING_WEIGHT each), the number of tags, the deepest stack.
    Stops as soon as the work exceeds ``limit``."""
    if limit is None:
        limit = 1 << 62
    stack: list[bytes] = []
    on_stack: dict[bytes, int] = {}  # name -> how many of the stack's elements have it
    # Formatting elements closed by an ancestor's end tag stay in the parser's list of
    # active formatting elements (at most 3 alike: its "Noah's Ark" clause) and are reopened
    # after every implicit close: name -> [(name, attributes)], and the count of each.
    pending_by_name: dict[bytes, list[tuple[bytes, bytes]]] = {}
    pending: dict[tuple[bytes, bytes], int] = {}
    n_pending = 0
    attrs_of: dict[int, bytes] = {}  # stack index -> attributes of a formatting element
    work = tags = deepest = 0
    pos = 0
    n = len(data)
    search = _TAG.search

    def pop() -> bytes:
        nonlocal n_pending
        top = stack.pop()
        on_stack[top] -= 1
        if top in _FORMATTING:
            key = (top, attrs_of.pop(len(stack), b""))
            k = pending.get(key, 0)
            if k < 3:
                pending[key] = k + 1
                pending_by_name.setdefault(top, []).append(key)
                n_pending += 1
        return top

    while pos < n:
        m = search(data, pos)
        if m is None:
            break
        pos = m.end()
        end, name, attrs = m.group(1, 2, 3)
        if name is None:  # comment, doctype, processing instruction
            continue
        if work > limit:
            break
        tag = name.lower()
        tags += 1
        depth = len(stack)
        if depth > deepest:
            deepest = depth
        work += PENDING_WEIGHT * n_pending
        if end:
            # the end tag of an open element walks down to it; any other, the whole stack
            if on_stack.get(tag):
                k = len(stack) - 1
                while stack[k] != tag:
                    k -= 1
                work += len(stack) - k
                while True:
                    top = stack.pop()
                    on_stack[top] -= 1
                    if top == tag:
                        attrs_of.pop(len(stack), None)
                        break
                    stack.append(top)
                    on_stack[top] += 1
                    pop()
                continue
            work += depth
            if pending_by_name.get(tag):
                key = pending_by_name[tag].pop()
                pending[key] -= 1
                n_pending -= 1
            continue
        work += depth  # a start tag: "is there a p in button scope?" and the like
        kind = _KIND.get(tag, 0)
        if not kind:
            if attrs[-1:] == b"/" and (on_stack.get(b"svg") or on_stack.get(b"math")):
                continue  # self-closing in foreign content
            stack.append(tag)
            on_stack[tag] = on_stack.get(tag, 0) + 1
            continue
        if kind & _K_CLOSES_P and on_stack.get(b"p") and b"p" in stack[-_NEAR:]:
            while pop() != b"p":
                pass
        if kind & _K_RULE:
            closes, stops = _CLOSES_SAME[tag]
            match = -1
            for k in range(len(stack) - 1, max(-1, len(stack) - 1 - _NEAR), -1):
                if stack[k] in closes:
                    match = k
                elif stack[k] in stops:
                    break
            if match >= 0:
                while len(stack) > match + 1:
                    pop()
                top = stack.pop()  # itself: not left pending (the adoption agency drops it)
                on_stack[top] -= 1
                attrs_of.pop(len(stack), None)
        if kind & _K_VOID:
            continue
        if attrs.endswith(b"/") and (on_stack.get(b"svg") or on_stack.get(b"math")):
            continue  # self-closing in foreign content
        if kind & _K_RAW:
            close = re.compile(rb"</" + re.escape(tag) + rb"[\t\n\f\r />]", re.I).search(data, pos)
            pos = n if close is None else close.start()
        if kind & _K_FORMATTING:
            attrs_of[len(stack)] = attrs
        stack.append(tag)
        on_stack[tag] = on_stack.get(tag, 0) + 1
    return work, tags, deepest


def too_deep(data: bytes) -> bool:
    """Whether the parser would spend superlinear time on ``data``: its nesting work (see
    `nesting_work`) exceeds MAX_WORK_BASE + MAX_AVERAGE_DEPTH x the number of "<"."""
    lts = data.count(b"<")  # at least the number of tags
    limit = MAX_WORK_BASE + MAX_AVERAGE_DEPTH * lts
    if lts * lts * (1 + 3 * PENDING_WEIGHT) <= limit:
        return False  # so few tags that their work cannot add up to the bound
    work, _, _ = nesting_work(data, limit)
    return work > limit


def compress(data: bytes) -> bytes | None:
    if too_deep(data):
        return None
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
