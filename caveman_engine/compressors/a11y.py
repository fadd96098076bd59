"""``a11y``: a Chrome DevTools accessibility tree rendered as a compact outline.

Forced only (method ``a11y``). Input: the node array of CDP ``Accessibility.getFullAXTree``,
bare or as ``{"nodes": […]}`` — a full, depth-limited or partial result. Each rendered line is

    <2 spaces per depth>[uid] role "name" = "value" {state,…}

* text (names, values) is whitespace-normalised first: runs of Go ``unicode.IsSpace`` runes
  (NBSP, figure space, newlines …) become one space, ends trimmed;
* ``[uid]`` for every node with a backend DOM node id whose role is not one of the plain
  document-structure roles (page, text, label, paragraph, heading, list, listitem, table, row,
  cell, columnheader, rowheader, image, figure, separator, form, banner, main, navigation):
  ``u`` + the id in base 36, ``_2``, ``_3`` … on collisions. Focusability does not matter (the
  focusable page gets none; ``code``, ``term``, ``listmarker``, ``linebreak`` … get one);
* role lower-cased, with ``RootWebArea`` → ``page``, ``StaticText`` → ``text``,
  ``LabelText`` → ``label``;
* name and value quoted like Go's ``strconv.Quote``; the value only when non-empty and
  different from the name; the name only when non-empty;
* states, in this order: disabled, checked|unchecked, expanded|collapsed, selected, focused,
  editable.

The walk starts at the roots (nodes no other node lists as a child), in input order, and
follows ``childIds`` depth-first; ids missing from a partial result are skipped. Ignored nodes
are flattened (their children take their place); ``InlineTextBox`` nodes are dropped with their
subtree; empty ``LabelText`` and empty generic/presentational/none wrappers are flattened
unless they are focusable/clickable or carry a state other than ``editable``; a ``StaticText``
whose text equals, ignoring case, the name or value of any non-ignored node that is not text
(``StaticText``/``InlineTextBox``) is flattened. The uid → DOM mapping is returned as recovery
metadata ``{"uids":{uid:{"backendDOMNodeId":n,"frameId":…,"nodeId":…}}}`` (compact JSON).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from .. import gotext, jsonio
from . import Compressed

CONTENT_TYPE = "a11y"
SAFETY_CLASS = "S4"

_ROLE_NAMES = {"rootwebarea": "page", "statictext": "text", "labeltext": "label"}
_WRAPPERS = frozenset({"generic", "presentation", "none", "genericcontainer"})
# Lower-cased CDP roles that never get a uid: the plain structure of a document.
_STRUCTURAL = frozenset(
    {
        "rootwebarea", "statictext", "labeltext", "paragraph", "heading", "list", "listitem",
        "table", "row", "cell", "columnheader", "rowheader", "image", "figure", "separator",
        "form", "banner", "main", "navigation",
    }
)
_TEXT_ROLES = frozenset({"StaticText", "InlineTextBox"})
_SPACE_RUN = re.compile("[" + re.escape(gotext.GO_SPACE) + "]+")
_B36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def _norm(s: str) -> str:
    """Whitespace runs (Go ``unicode.IsSpace``) collapsed to one space, ends trimmed."""
    return " ".join(w for w in _SPACE_RUN.split(s) if w)


def _fold(s: str) -> str:
    """The key under which two texts count as the same: normalised, lower-cased."""
    return gotext.to_lower(_norm(s))


def _base36(n: int) -> str:
    if n == 0:
        return "0"
    out = []
    while n:
        n, r = divmod(n, 36)
        out.append(_B36[r])
    return "".join(reversed(out))


def go_quote(s: str) -> str:
    """strconv.Quote: printable runes raw (unicode.IsPrint), the rest escaped the Go way."""
    out = ['"']
    for ch in s:
        o = ord(ch)
        if 0x20 <= o < 0x7F:
            out.append("\\" + ch if ch in '"\\' else ch)
        elif o >= 0x80 and _go_printable(ch):
            out.append(ch)
        elif ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif o < 0x80:
            out.append(f"\\x{o:02x}")
        elif o < 0x10000:
            out.append(f"\\u{o:04x}")
        else:
            out.append(f"\\U{o:08x}")
    out.append('"')
    return "".join(out)


_GO_ESCAPES = {
    "\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
    "\v": "\\v",
}


def _go_printable(ch: str) -> bool:
    """unicode.IsPrint for a non-ASCII rune: letters, marks, numbers, punctuation, symbols."""
    if "\ud800" <= ch <= "\udfff":
        return False
    return unicodedata.category(ch)[0] in "LMNPS"


def _ax_value(v: Any) -> Any:
    """The ``value`` of a CDP AXValue object, or None."""
    if isinstance(v, dict):
        return v.get("value")
    return None


def _text(v: Any) -> str:
    """AXValue payload as display text."""
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, jsonio.Number):
        return v.literal
    return ""


def _props(node: dict) -> dict[str, Any]:
    out: dict[str, Any] = {}
    props = node.get("properties")
    if isinstance(props, list):
        for p in props:
            if isinstance(p, dict) and isinstance(p.get("name"), str):
                out[p["name"]] = _ax_value(p.get("value"))
    return out


def _truthy(v: Any) -> bool:
    return v is True or v == "true"


def _states(props: dict[str, Any]) -> list[str]:
    states = []
    if _truthy(props.get("disabled")):
        states.append("disabled")
    checked = props.get("checked")
    if checked is not None:
        if _truthy(checked):
            states.append("checked")
        elif checked is False or checked == "false":
            states.append("unchecked")
    expanded = props.get("expanded")
    if expanded is not None:
        if _truthy(expanded):
            states.append("expanded")
        elif expanded is False or expanded == "false":
            states.append("collapsed")
    if _truthy(props.get("selected")):
        states.append("selected")
    if _truthy(props.get("focused")):
        states.append("focused")
    editable = props.get("editable")
    if editable not in (None, False, "", "false"):
        states.append("editable")
    return states


def _backend_id(node: dict) -> int:
    b = node.get("backendDOMNodeId")
    if isinstance(b, jsonio.Number):
        lit = b.literal
        if lit.isdigit():
            return int(lit)
    return 0


def _role(node: dict) -> str:
    r = _ax_value(node.get("role"))
    return r if isinstance(r, str) else ""


def compress(data: bytes) -> Compressed | None:
    try:
        doc = jsonio.loads(data, trailing="go-decoder")
    except ValueError:
        return None
    if isinstance(doc, dict):
        doc = doc.get("nodes")
    if not isinstance(doc, list) or not doc:
        return None
    nodes: dict[str, dict] = {}
    order: list[str] = []
    for n in doc:
        if not isinstance(n, dict):
            return None
        nid = n.get("nodeId")
        if isinstance(nid, jsonio.Number):
            nid = nid.literal
        if not isinstance(nid, str) or not nid or nid in nodes:
            return None
        nodes[nid] = n
        order.append(nid)
    children: dict[str, list[str]] = {}
    is_child: set[str] = set()
    any_visible = False
    for nid in order:
        n = nodes[nid]
        kids = []
        ch = n.get("childIds")
        if isinstance(ch, list):
            for c in ch:
                if isinstance(c, jsonio.Number):
                    c = c.literal
                if isinstance(c, str) and c in nodes and c != nid:
                    kids.append(c)
                    is_child.add(c)
        children[nid] = kids
        if n.get("ignored") is not True:
            if not _role(n):
                return None
            any_visible = True
    if not any_visible:
        return None

    # texts already carried by other nodes (case-insensitively): a StaticText repeating one is
    # flattened. Only non-ignored nodes that are not text themselves count.
    carried: set[str] = set()
    for nid in order:
        n = nodes[nid]
        if n.get("ignored") is True or _role(n) in _TEXT_ROLES:
            continue
        for t in (_text(_ax_value(n.get("name"))), _text(_ax_value(n.get("value")))):
            t = _fold(t)
            if t:
                carried.add(t)

    lines: list[str] = []
    uids: dict[str, dict] = {}
    used: set[str] = set()
    seen: set[str] = set()
    roots = [nid for nid in order if nid not in is_child]
    # stack of (node id, depth), processed depth-first in document order
    stack = [(nid, 0) for nid in reversed(roots)]
    while stack:
        nid, depth = stack.pop()
        if nid in seen:
            continue
        seen.add(nid)
        n = nodes[nid]
        role = _role(n)
        if role == "InlineTextBox" and n.get("ignored") is not True:
            continue
        line = None
        if n.get("ignored") is not True and not (
            role == "StaticText" and _fold(_text(_ax_value(n.get("name")))) in carried
        ):
            line = _render(n, role, used, uids)
        child_depth = depth
        if line is not None:
            lines.append("  " * depth + line)
            child_depth = depth + 1
        stack.extend((c, child_depth) for c in reversed(children[nid]))
    if not lines:
        return None
    meta = jsonio.dumps({"uids": uids})
    return Compressed("\n".join(lines).encode(), method="a11y", metadata=meta)


def _render(n: dict, role: str, used: set[str], uids: dict[str, dict]) -> str | None:
    """The line for a visible node, or None to flatten it (its children take its place)."""
    props = _props(n)
    name = _norm(_text(_ax_value(n.get("name"))))
    value = _norm(_text(_ax_value(n.get("value"))))
    states = _states(props)
    lrole = gotext.to_lower(role)
    focusable = _truthy(props.get("focusable")) or _truthy(props.get("clickable"))
    if lrole in _WRAPPERS and not name and not value and not focusable:
        # "editable" alone does not keep a wrapper: it is the inner editor of a text field
        if all(s == "editable" for s in states):
            return None
    if lrole == "labeltext" and not name:
        return None
    uid = ""
    backend = _backend_id(n)
    if backend > 0 and lrole not in _STRUCTURAL:
        base = "u" + _base36(backend)
        uid, k = base, 1
        while uid in used:
            k += 1
            uid = f"{base}_{k}"
        used.add(uid)
        ref: dict[str, Any] = {"backendDOMNodeId": backend}
        frame = n.get("frameId")
        if isinstance(frame, str) and frame:
            ref["frameId"] = frame
        nid = n.get("nodeId")
        ref["nodeId"] = nid.literal if isinstance(nid, jsonio.Number) else nid
        uids[uid] = ref
    parts = []
    if uid:
        parts.append(f"[{uid}]")
    parts.append(_ROLE_NAMES.get(lrole, lrole))
    if name:
        parts.append(go_quote(name))
    if value and value != name:
        parts.append("= " + go_quote(value))
    if states:
        parts.append("{" + ",".join(states) + "}")
    return " ".join(parts)
