"""float_format: drop ``format: "float"`` / ``"double"`` on a number (``toolschema-max``).

``float`` and ``double`` are OpenAPI's names for the width of a number; JSON Schema defines no
such format, so no validator checks them, and ``"type": "number"`` already admits every JSON
number. The keyword goes only where the node's ``type`` is ``number`` (alone or in a type list
with ``number``); ``int32``/``int64`` and every other format are kept (those bound a value or
name a string syntax), as is a ``format`` on a node without a ``type``. Annotations only: the
set of valid calls is unchanged.
"""

from __future__ import annotations

from .. import schema as js

NAME = "float_format"
SUMMARY = 'Drop format "float"/"double" on a number (not a JSON Schema format; number says it)'

WIDTHS = frozenset(("float", "double"))


def apply(root, ctx):
    for node in js.nodes(root):
        f = node.get("format")
        if isinstance(f, str) and f in WIDTHS and "number" in (js.type_set(node.get("type")) or ()):
            del node["format"]
    return root
