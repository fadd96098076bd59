"""null_default: drop ``"default": null`` on properties that are not required.

``default`` never affects validation; on an optional property, ``null`` only restates "may be
left out". Kept on OpenAI ``strict: true`` tools, where every property is required and the
default documents the null branch.
"""

from __future__ import annotations

from .. import schema as js

NAME = "null_default"
SUMMARY = "Drop default: null on optional properties (kept for strict tools)"


def apply(root, ctx):
    if ctx.strict:
        return root
    for node in js.nodes(root):
        props = node.get("properties")
        if not isinstance(props, dict):
            continue
        req = node.get("required", [])
        if not isinstance(req, list):
            continue
        required = {r for r in req if isinstance(r, str)}
        for name, sub in props.items():
            if name not in required and isinstance(sub, dict) and "default" in sub:
                if sub["default"] is None:
                    del sub["default"]
    return root
