"""``toolschema-max``: the most a tool catalog can shrink while every tool, parameter, type,
enum, ``required``, ``const`` and non-null ``default`` survives.

1. the safe rules (``toolschema-safe``; ``CAVEMAN_SAFE_RULES`` applies here too);
2. the reducer (:func:`reduce_tree`): schema titles, examples and ``$comment`` dropped, long
   descriptions cut to whole sentences — their lead, every instruction or constraint sentence,
   no catalog boilerplate (:mod:`caveman_engine.catalog.sentences`; never ``toolschema``'s
   80-byte lead cap, which leaves sentences unfinished); MCP output schemas alike;
3. the max-only rules (:data:`MAX_RULES`, modules of :mod:`caveman_engine.catalog.rules`, not
   part of ``toolschema-safe``): whitespace normalised again after the cut, Markdown bold
   markers dropped (``markdown_emphasis``), MCP hints equal to the specification's defaults
   (``mcp_hints``), descriptions repeated down unions, items and members said once
   (``branch_descriptions``), sentences restating the default or optionality
   (``restated_facts``) — annotations only, never a constraint sentence —, ``format:
   "float"``/``"double"`` on a number, not a JSON Schema format (``float_format``), and a
   subschema repeated inside a schema written once under its definitions (``defs_factor``);
4. description prose shrunk sentence by sentence (:mod:`caveman_engine.catalog.prose_guard`):
   articles and fillers go, constraint sentences lose at most articles, identifiers, numbers,
   paths, URLs and code never change;
5. the telegraphic rules (:data:`POST_RULES`, one walk): openers that only restate the slot or
   the type ("Specifies the", "A list of", "Flag indicating whether" → "Whether"), the
   auxiliary before a participle ("is
   held" → "held"), "specified"/"given"/"provided" before their noun, shorter stock phrases
   ("such as" → "like", "if not provided" → "if omitted"), and the articles step 4 left.
   Literals, protected names and every constraint word stay (see
   :mod:`caveman_engine.catalog.rules._telegraph`).
6. the full stop that ends a description (:data:`FINAL_RULES`: ``final_period``), last, so
   that no rule above sees a sentence without its stop on the first pass.

Compact JSON in the input's envelope and key order. Declines (None) input that is not a
catalog or a schema, and any result larger than the input.
"""

from __future__ import annotations

from typing import Any

CONTENT_TYPE = "toolschema-max"
SAFETY_CLASS = "S4"

# Rules that only toolschema-max runs (after the safe rules): they rewrite annotations and tool
# metadata that restate what the schema or the MCP specification already says.
# markdown_emphasis also runs before the reducer, so that its sentence split sees what a second
# compression would see.
PRE_RULES = ("markdown_emphasis",)
MAX_RULES = ("desc_whitespace", "markdown_emphasis", "mcp_hints", "branch_descriptions", "restated_facts",
             "float_format", "defs_factor")
# Telegraphic rules, after the prose shrink (they also clean up what it refused): words that
# carry no meaning in a description or only restate the schema. They run in one walk
# (:func:`caveman_engine.catalog.rules._telegraph.apply_tree`), sentence by sentence in this
# order; ``echo_description`` (a safe rule) then runs again on the schemas they changed: a
# description they reduced to its property's name goes, as a second compression would drop it.
# ``self_reference`` ("This function retrieves" → "Retrieves") is not run: on BFCL it cost a
# lexical pick for almost no token (docs/catalog.md).
POST_RULES = ("slot_verbs", "restated_type", "copula", "filler_adjectives", "phrases", "articles")

# Last of all, once the prose is final: the full stop that ends a description goes.
FINAL_RULES = ("final_period",)

_ENVELOPE_KEYS = frozenset(("name", "input_schema", "inputSchema", "parameters", "function", "tools"))


def shrink_description(text: str, protected: set[str]) -> str:
    """The prose guard's shrink, repeated until it changes nothing (a drop can expose another
    one: "You can You can." loses one leader per pass), so compressing twice changes nothing."""
    from ..catalog import prose_guard

    for _ in range(4):
        new = prose_guard.shrink_description(text, protected)
        if new == text:
            break
        text = new
    return text


def _shrink_schema(schema: Any, protected: set[str]) -> None:
    from ..catalog import schema as js

    for node in js.nodes(schema):
        d = node.get("description")
        if isinstance(d, str):
            node["description"] = shrink_description(d, protected)


# Schema annotations the reducer drops (``toolschema``'s list; ``$schema`` only goes through the
# safe ``schema_uri`` rule, when the schema means the same without it).
DROP = ("title", "examples", "example", "$comment")


def _reduce_schema(schema: Any, shared: frozenset[str] = frozenset()) -> None:
    from ..catalog import schema as js
    from ..catalog import sentences

    for node in js.nodes(schema):
        for k in DROP:
            node.pop(k, None)
        d = node.get("description")
        if isinstance(d, str):
            node["description"] = sentences.select(d, shared)


def reduce_tree(doc: Any) -> Any:
    """Step 2 on a decoded tree (a new tree is returned): schema titles, examples and
    ``$comment`` dropped, every description cut to whole units
    (:func:`caveman_engine.catalog.sentences.select`), boilerplate shared by many of the
    catalog's tool descriptions dropped from them."""
    from ..catalog import envelope, sentences

    tree = envelope.copy_tree(doc)
    tools = envelope.iter_tools(tree)
    if not tools:
        if envelope.is_bare_schema(tree):
            _reduce_schema(tree)
        return tree
    shared = sentences.boilerplate(t.container.get("description") for t in tools)
    for tool in tools:
        c = tool.container
        for _, s in tool.schemas():
            if isinstance(s, dict):
                _reduce_schema(s)
        d = c.get("description")
        if isinstance(d, str):
            c["description"] = sentences.select(d, shared)
        if c is not tool.element and isinstance(tool.element.get("description"), str):
            tool.element["description"] = sentences.select(tool.element["description"], shared)
    return tree


def compress_tree(doc: Any) -> Any:
    """The whole transform on a decoded tree; returns a new tree (``doc`` is not modified)."""
    from ..catalog import envelope, safe
    from ..catalog.rules import _telegraph as telegraph

    tree = safe.apply_tree(safe.apply_tree(doc), PRE_RULES)
    tree = safe.apply_tree(reduce_tree(tree), MAX_RULES)
    tools = envelope.iter_tools(tree)
    if not tools:
        if envelope.is_bare_schema(tree):
            protected: set[str] = set()
            telegraph.names(tree, protected)
            tree = envelope.copy_tree(tree)
            _shrink_schema(tree, protected)
            tree = _final(telegraph.apply_tree(tree, POST_RULES))
        return tree
    tree = envelope.copy_tree(tree)
    for tool in envelope.iter_tools(tree):
        c = tool.container
        out = c.get(envelope.OUTPUT_DOOR)
        protected = {tool.name}
        schemas = [s for _, s in tool.schemas()]
        for s in schemas:
            telegraph.names(s, protected)
        for s in schemas:
            _shrink_schema(s, protected)
        d = c.get("description")
        if isinstance(d, str):
            c["description"] = shrink_description(d, protected)
    return _final(telegraph.apply_tree(tree, POST_RULES))


def _final(tree: Any) -> Any:
    """:data:`FINAL_RULES` on ``tree`` in place (a private copy by then). They rewrite
    description strings only, so they run straight over every schema and tool, without the safe
    rules' copy, analysis and fixed-point passes."""
    from ..catalog import envelope
    from ..catalog.rules import module

    mods = [module(n) for n in FINAL_RULES]
    tools = envelope.iter_tools(tree)
    if tools:
        for tool in tools:
            for _, schema in tool.schemas():
                for m in mods:
                    m.apply(schema, None)
            for m in mods:
                m.apply_tool(tool, None)
    elif envelope.is_bare_schema(tree):
        for m in mods:
            m.apply(tree, None)
    return tree


def compress(data: bytes) -> bytes | None:
    from ..catalog import envelope

    doc = envelope.load_catalog(data)
    if doc is None:
        return None
    out = envelope.dumps(compress_tree(doc))
    # A later step can open a sentence to an earlier one (dropping "The" lets the prose shrink
    # take "The ID just." next time): rewrite the rewrite until it is stable, so that
    # compressing the output again changes nothing. Two passes for almost every catalog.
    for _ in range(4):
        again = envelope.dumps(compress_tree(envelope.load_catalog(out)))
        if again == out:
            break
        out = again
    return out if len(out) <= len(data) else None
