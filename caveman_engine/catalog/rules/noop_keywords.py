"""noop_keywords: drop keywords whose value is the default and constrains nothing.

``description: ""``, empty ``$defs``/``definitions``/``patternProperties``/
``dependentRequired``/``dependentSchemas``, ``minLength``/``minItems``/``minProperties: 0``,
``uniqueItems: false``, ``type: ["x"]`` -> ``"x"``; and, except on OpenAI strict tools,
``required: []``. ``additionalProperties``/``additionalItems``/``items``: ``true`` or ``{}``
go too, unless the schema uses ``unevaluated*`` (there an always-true subschema still marks
members as evaluated). ``properties: {}`` is kept: OpenAI rejects object schemas without it.
"""

from __future__ import annotations

from .. import schema as js

NAME = "noop_keywords"
SUMMARY = "Drop no-op keywords (required: [], additionalProperties: true, minLength: 0, ...)"

_EMPTY_MAPS = ("$defs", "definitions", "patternProperties", "dependentRequired",
               "dependentSchemas")
_ZERO = ("minLength", "minItems", "minProperties")
_TRUE_IS_DEFAULT = ("additionalProperties", "additionalItems", "items")


def _is_true_schema(v) -> bool:
    return v is True or (isinstance(v, dict) and not v)


def apply(root, ctx):
    unevaluated = ctx.analysis.unevaluated
    for node in js.nodes(root):
        if node.get("description") == "":
            del node["description"]
        for k in _EMPTY_MAPS:
            if node.get(k) == {}:
                del node[k]
        for k in _ZERO:
            if k in node and js.is_number(node[k], "0"):
                del node[k]
        if node.get("uniqueItems") is False:
            del node["uniqueItems"]
        t = node.get("type")
        if isinstance(t, list) and len(t) == 1 and isinstance(t[0], str):
            node["type"] = t[0]
        if not ctx.strict and node.get("required") == []:
            del node["required"]
        if not unevaluated and not ctx.strict:
            for k in _TRUE_IS_DEFAULT:
                if k in node and _is_true_schema(node[k]):
                    if k == "items" and "additionalItems" in node:
                        continue  # items: {} would make additionalItems apply to everything
                    del node[k]
    return root
