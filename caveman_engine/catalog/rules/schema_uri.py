"""schema_uri: drop the root ``$schema`` URI when the schema means the same in every draft.

Without ``$schema``, a tool schema is read as JSON Schema 2020-12 (MCP's default; what
OpenAI and Anthropic accept). The URI is dropped when it names a known draft (04, 06, 07,
2019-09, 2020-12) and every keyword the document uses has the same meaning in that draft and
in 2020-12: annotations, unknown keywords, and the common validation vocabulary; ``$ref``
only with annotation siblings (validation siblings are ignored up to draft 7 and apply since
2019-09); ``items`` only as one schema (the array form became ``prefixItems``); no
``dependencies`` or ``additionalItems`` (gone in 2020-12); no boolean ``exclusiveMinimum``
(draft 04); no keyword the declared draft does not know but 2020-12 does (``if`` in draft 06,
``dependentRequired`` in draft 07, …) and no identifiers.
"""

from __future__ import annotations

from .. import schema as js

NAME = "schema_uri"
SUMMARY = "Drop the root $schema URI when the draft does not change the meaning"

_CORE = frozenset((
    "type", "enum", "properties", "required", "additionalProperties", "patternProperties",
    "minProperties", "maxProperties", "minItems", "maxItems", "uniqueItems", "minLength",
    "maxLength", "pattern", "format", "minimum", "maximum", "multipleOf", "allOf", "anyOf",
    "oneOf", "not", "items", "$ref", "$defs", "definitions",
))
_D6 = _CORE | {"const", "contains", "propertyNames", "exclusiveMinimum", "exclusiveMaximum"}
_D7 = _D6 | {"if", "then", "else", "contentMediaType", "contentEncoding"}
_D2019 = _D7 | {"dependentRequired", "dependentSchemas", "minContains", "maxContains",
                "unevaluatedProperties", "unevaluatedItems", "$anchor", "contentSchema"}
SAME_AS_2020 = {"4": _CORE, "6": _D6, "7": _D7, "2019-09": _D2019}
# Every keyword any draft gives a meaning to (the rest are unknown everywhere: ignored).
_KNOWN = _D2019 | {
    "dependencies", "additionalItems", "prefixItems", "$id", "id", "$dynamicRef",
    "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor", "$vocabulary", "$schema",
}


def equivalent_without_uri(root, draft: str) -> bool:
    if draft == "2020-12":
        return True
    same = SAME_AS_2020.get(draft)
    if same is None:
        return False
    for node in js.nodes(root):
        if draft == "4" and any(isinstance(c, bool) for _, _, c in js.children(node)):
            return False  # boolean schemas exist since draft 06
        for k, v in node.items():
            if k in js.ANNOTATIONS or k == "$comment":
                continue
            if k == "$schema" and node is root:
                continue
            if k not in _KNOWN:
                continue  # unknown in every draft: ignored either way
            if k not in same:
                return False
            if k == "items" and not isinstance(v, (dict, bool)):
                return False
            if k in ("exclusiveMinimum", "exclusiveMaximum") and not js.is_number(v):
                return False
            if k == "$ref" and draft in ("4", "6", "7"):
                if any(s != "$ref" and s not in js.ANNOTATIONS and s in _KNOWN for s in node):
                    return False
    return True


def apply(root, ctx):
    if not isinstance(root, dict) or "$schema" not in root:
        return root
    draft = js.draft_of_uri(root["$schema"])
    if draft is None or ctx.analysis.dynamic:
        return root
    if equivalent_without_uri(root, draft):
        del root["$schema"]
    return root
