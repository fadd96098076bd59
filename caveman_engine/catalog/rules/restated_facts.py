"""restated_facts: drop description text that only restates what the schema's keywords say
(``toolschema-max``).

Removed, each only when the schema says the same thing itself:

* a sentence "Default is X." / "Defaults to X." / "Default: X." / "The default value is X.",
  or a parenthetical "(default: X)" / "(defaults to X)", when the node's ``default`` is X
  (quotes and backticks around X ignored; ``default: null`` never matches);
* on a property that is not ``required``: the marker "(optional)", a sentence "Optional." /
  "This field is optional.", a leading "Optional:" / "Optional." / "Optional -", and a
  non-standard ``"optional": true`` keyword.

BFCL's "This is a float type value." stays, though ``type`` says it: dropping it from every
number parameter moved BFCL's tool choice (both graders lost picks; docs/catalog.md).

A sentence that states a constraint (the ``toolschema`` CONSTRAINT regex: must, only, at most,
maximum, format…) is never removed, nor any part of it. What remains keeps its bytes; a
description left empty goes. Annotations only: validation is unchanged.
"""

from __future__ import annotations

import re

from .. import schema as js

NAME = "restated_facts"
SUMMARY = "Drop description sentences that restate the default or optionality"

_Q = r"[`'\"]?"
_DEFAULT_SENTENCE = re.compile(
    r"(?:The\s+)?(?:Default(?:\s+value)?\s+is|Defaults?\s+to|Default\s*:|Default\s+value\s*:)\s+"
    + _Q + r"(?P<v>[^`'\"]*?)" + _Q + r"\.?", re.IGNORECASE)
_DEFAULT_PAREN = re.compile(
    r"\s*\((?:default|defaults\s+to|default\s+is)\s*:?\s*" + _Q + r"(?P<v>[^`'\"()]*?)" + _Q + r"\)",
    re.IGNORECASE)
_OPTIONAL_PAREN = re.compile(r"\s*\(optional\)", re.IGNORECASE)
_OPTIONAL_SENTENCE = re.compile(
    r"\(?(?:Optional|This (?:field|parameter|argument|value|param) is optional"
    r"|This is (?:an? )?optional (?:field|parameter|argument|value|param))\)?\.?", re.IGNORECASE)
_OPTIONAL_LEAD = re.compile(r"Optional(?:\s*[.:]|\s+-)\s+(?=[A-Za-z])")


def _default_text(node: dict) -> str | None:
    if "default" not in node or node["default"] is None:
        return None
    from ..envelope import dumps

    d = node["default"]
    if isinstance(d, str):
        return d
    if isinstance(d, (dict, list)):
        return None
    return dumps(d).decode()


def _constraint(sentence: str) -> bool:
    from ...compressors.toolschema import is_constraint

    return is_constraint(sentence)


def _clean(desc: str, node: dict, optional: bool) -> str:
    from ..prose_guard import pieces

    parts = pieces(desc)
    default = _default_text(node)
    keep: list[str] = []
    for k, part in enumerate(parts):
        if k % 2 == 1:
            keep.append(part)
            continue
        s = part.strip()
        if not s or _constraint(s):
            keep.append(part)
            continue
        m = _DEFAULT_SENTENCE.fullmatch(s)
        if m and default is not None and m.group("v").strip() == default:
            keep.append(None)
            continue
        if optional and _OPTIONAL_SENTENCE.fullmatch(s):
            keep.append(None)
            continue
        if default is not None:
            part = _DEFAULT_PAREN.sub(lambda m: "" if m.group("v").strip() == default else m.group(0), part)
        if optional:
            part = _OPTIONAL_PAREN.sub("", part)
            if k == 0 and _OPTIONAL_LEAD.match(part):
                part = part[_OPTIONAL_LEAD.match(part).end():]
                if part.split(" ", 1)[0].isalpha() and part.split(" ", 1)[0].islower():
                    part = part[0].upper() + part[1:]
        keep.append(part)
    # Re-join: drop removed sentences together with the separator before them (or after, for
    # the first one).
    out: list[str] = []
    pending_sep = ""
    for k, part in enumerate(keep):
        if k % 2 == 1:
            pending_sep = part
            continue
        if part is None:
            continue
        if out:
            out.append(pending_sep)
        out.append(part)
        pending_sep = ""
    return "".join(out).strip()


def apply(root, ctx):
    for node in js.nodes(root):
        props = node.get("properties")
        if not isinstance(props, dict):
            continue
        req = node.get("required")
        required = set(req) if isinstance(req, list) else set()
        for name, sub in props.items():
            if not isinstance(sub, dict):
                continue
            optional = name not in required and not ctx.strict
            if optional and sub.get("optional") is True:
                del sub["optional"]
            d = sub.get("description")
            if isinstance(d, str) and d.strip():
                new = _clean(d, sub, optional)
                if new != d:
                    if new:
                        sub["description"] = new
                    else:
                        del sub["description"]
    return root
