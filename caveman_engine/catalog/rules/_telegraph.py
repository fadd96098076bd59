"""Sentence editing for the telegraphic ``toolschema-max`` rules (``articles``, ``copula``,
``filler_adjectives``, ``slot_verbs``, ``self_reference``, ``restated_type``, ``phrases``).
Not a rule itself.

A rule gives, per sentence, a list of edits (regular-expression substitutions); this module
applies them only where they are safe and keeps everything else byte for byte:

* literals are never edited: code spans, quoted text (``'City, State'``, ``"x"``), URLs, paths
  and words that are identifiers (``snake_case``, ``camelCase``, digits inside) — a match that
  overlaps one is skipped;
* a word equal to a protected name (the tool name, a property name, an enum/const value) is
  never removed;
* in a *constraint* sentence (the ``toolschema`` CONSTRAINT regex: must, only, at most,
  format…) a rule runs only if it says it may, and the constraint words the regex finds must
  be exactly the same after the edit;
* the edit must not create or merge a sentence boundary, and a sentence that lost its first
  word starts with a capital again (the edit is refused when the new first word is an
  identifier or a protected name that cannot take one).

Each description is split into sentences as the prose guard splits it
(:func:`caveman_engine.catalog.prose_guard.pieces`).
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from typing import Callable, Iterable

# Literals: code spans, quoted text (an apostrophe inside a word is not a quote), URLs, paths.
_LITERAL = re.compile(
    r"`[^`\n]*`"
    r"|(?<![\w'\u2019])'[^'\n]*'(?![\w'])"
    r"|\"[^\"\n]*\""
    r"|\u201c[^\u201d\n]*\u201d"
    r"|\bhttps?://\S+"
    r"|[^\s/\\]*[/\\]\S+",
)
# Punctuation with no word before it: at the start, or after whitespace or other punctuation.
_ORPHAN = re.compile(r"(?:^|(?<=[\s.,;:!?]))[.,;:!?]")
# Identifiers: a word with an underscore, letters and digits mixed, or a lower-case letter
# followed by a capital (snake_case, v2beta, camelCase).
_TOKEN = re.compile(r"\w+")
_IDENT = re.compile(r"_|[0-9][A-Za-z]|[A-Za-z][0-9]|[a-z][A-Z]")
_FIRST_WORD = re.compile(r"[A-Za-z]+(?:[-'\u2019][A-Za-z]+)*(?=[\s,;:!?]|\.(?:\s|\Z)|\Z)")


def names(schema, into: set[str]) -> set[str]:
    """Property names, ``$defs`` keys, ``required`` entries and string enum/const values of
    ``schema`` (the words a rule must never remove), added to ``into``."""
    from .. import schema as js

    for node in js.nodes(schema):
        for m in ("properties", "patternProperties", "$defs", "definitions"):
            if isinstance(node.get(m), dict):
                into.update(k for k in node[m] if isinstance(k, str))
        for k in ("enum", "const"):
            v = node.get(k)
            vals = v if isinstance(v, list) else [v]
            into.update(x for x in vals if isinstance(x, str))
        req = node.get("required")
        if isinstance(req, list):
            into.update(x for x in req if isinstance(x, str))
    return into


@functools.lru_cache(maxsize=4096)
def _literal_spans(sentence: str) -> tuple[tuple[int, int], ...]:
    spans = [m.span() for m in _LITERAL.finditer(sentence)]
    spans.extend(m.span() for m in _TOKEN.finditer(sentence) if _IDENT.search(m.group()))
    return tuple(spans)


def _literals(sentence: str) -> list[str]:
    return sorted(sentence[a:b] for a, b in _literal_spans(sentence))


def _constraint_terms(sentence: str) -> list[str]:
    from ...compressors.toolschema import constraint_regex

    return [m.group().lower() for m in constraint_regex().finditer(sentence)]


_PROTECTED_WORD = re.compile(r"[\w'\u2019-]+")


def _protected_counts(sentence: str, protected: frozenset[str]) -> Counter:
    return Counter(w.lower() for w in _PROTECTED_WORD.findall(sentence)
                   if w in protected or w.lower() in protected)


class Edit:
    """``pattern`` (compiled) → ``repl`` (a string or a function of the match), applied to each
    match that does not overlap a literal."""

    __slots__ = ("pattern", "repl")

    def __init__(self, pattern: str | re.Pattern, repl: str | Callable[[re.Match], str]) -> None:
        self.pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
        self.repl = repl

    def apply(self, sentence: str) -> str:
        matches = list(self.pattern.finditer(sentence))
        if not matches:
            return sentence
        spans = _literal_spans(sentence)
        out: list[str] = []
        pos = 0
        for m in matches:
            s, e = m.span()
            if s < pos or any(a < e and s < b for a, b in spans):
                continue
            new = self.repl(m) if callable(self.repl) else m.expand(self.repl)
            if new is None:
                continue
            out.append(sentence[pos:s])
            out.append(new)
            pos = e
        if not out:
            return sentence
        out.append(sentence[pos:])
        return "".join(out)


def _recapitalise(old: str, new: str, protected: frozenset[str]) -> str | None:
    """``new`` with the capital ``old`` started with (None when its first word cannot take one)."""
    old_s, new_s = old.lstrip(), new.lstrip()
    if not old_s or not new_s or not old_s[0].isupper() or not new_s[0].islower():
        return new
    first = old_s.split(None, 1)[0]
    if new_s.startswith(first):
        return new
    m = _FIRST_WORD.match(new_s)
    if not m or m.group() in protected or not m.group().isascii():
        return None
    lead = new[: len(new) - len(new_s)]
    return lead + new_s[0].upper() + new_s[1:]


def edit_sentence(sentence: str, edits: Iterable[Edit], protected: frozenset[str],
                  constraint: bool) -> str:
    """``sentence`` after ``edits`` (in order), or unchanged when the result is not safe."""
    from ...compressors.toolschema import is_constraint
    from ..prose_guard import pieces

    new = sentence
    while True:  # until nothing changes: an edit can expose another ("The The x")
        before = new
        for e in edits:
            new = e.apply(new)
        if len(new) >= len(before):  # every edit shortens, so this ends
            if new != before:
                return sentence
            break
    if new == sentence:
        return sentence
    fixed = _recapitalise(sentence, new, protected)
    if fixed is None or not fixed.strip() or len(fixed) >= len(sentence):
        return sentence
    new = fixed
    if len(_ORPHAN.findall(new)) > len(_ORPHAN.findall(sentence)):
        return sentence  # a clause lost all its words ("Use x. the y" → ". the y")
    if len(pieces(new)) != 1:
        return sentence  # a new sentence boundary
    if _literals(new) != _literals(sentence):
        return sentence
    if protected and _protected_counts(new, protected) != _protected_counts(sentence, protected):
        return sentence
    if constraint:
        if _constraint_terms(new) != _constraint_terms(sentence):
            return sentence
    elif is_constraint(new):
        return sentence  # a constraint word made out of what was left ("at the most" → "at most")
    return new


class Rule:
    """What a telegraphic rule edits: ``schema(node, index, sentence)`` gives the edits for a
    sentence of a schema description (``index`` 0 for the first sentence), ``tool(index,
    sentence)`` those for the tool's description; either may be None. ``in_constraints``:
    whether constraint sentences are edited too (their constraint words always stay)."""

    __slots__ = ("schema", "tool", "in_constraints")

    def __init__(self, schema: Callable[[dict, int, str], list[Edit]] | None,
                 tool: Callable[[int, str], list[Edit]] | None, in_constraints: bool) -> None:
        self.schema = schema
        self.tool = tool
        self.in_constraints = in_constraints


def edit_text(text: str, rules: Iterable[Rule], node: dict | None, protected: frozenset[str]) -> str:
    """``text`` with ``rules`` applied sentence by sentence, in order (``node`` is the schema
    the description belongs to; None for a tool description)."""
    from ...compressors.toolschema import is_constraint
    from ..prose_guard import pieces

    parts = pieces(text)
    n = 0
    changed = False
    for k in range(0, len(parts), 2):
        part = parts[k]
        if not part.strip():
            continue
        index = n
        n += 1
        constraint = is_constraint(part)
        new = part
        for r in rules:
            if constraint and not r.in_constraints:
                continue
            fn = r.tool if node is None else r.schema
            if fn is None:
                continue
            edits = fn(index, new) if node is None else fn(node, index, new)
            if edits:
                new = edit_sentence(new, edits, protected, constraint)
        if new != part:
            parts[k] = new
            changed = True
    return "".join(parts) if changed else text


def _types(node: dict) -> tuple:
    t = node.get("type")
    return tuple(t) if isinstance(t, list) else (t,)


CACHE_SIZE = 20_000
_SHARED: dict[tuple[str, ...], dict] = {}


class Rewriter:
    """Applies rules to every description of a catalog, with a cache (catalogs repeat their
    descriptions: one parameter in many tools)."""

    def __init__(self, rules: list[Rule], cache: dict | None = None) -> None:
        self.rules = rules
        self.cache: dict = {} if cache is None else cache

    def text(self, text: str, node: dict | None, protected: frozenset[str]) -> str:
        key = (text, None if node is None else _types(node), protected)
        out = self.cache.get(key)
        if out is None:
            if len(self.cache) >= CACHE_SIZE:
                self.cache.clear()
            out = self.cache[key] = edit_text(text, self.rules, node, protected)
        return out

    def schema(self, root, protected: frozenset[str]) -> bool:
        """Rewrite every description under ``root`` in place; whether any changed."""
        from .. import schema as js

        changed = False
        for node in js.nodes(root):
            d = node.get("description")
            if isinstance(d, str) and d.strip():
                new = self.text(d, node, protected)
                if new != d:
                    node["description"] = new
                    changed = True
        return changed

    def tool(self, container: dict, protected: frozenset[str]) -> None:
        d = container.get("description")
        if isinstance(d, str) and d.strip():
            new = self.text(d, None, protected)
            if new != d:
                container["description"] = new


def tool_protected(tool) -> frozenset[str]:
    out = {tool.name} if isinstance(tool.name, str) else set()
    for _, s in tool.schemas():
        names(s, out)
    return frozenset(out)


def rule(r: Rule):
    """``(apply, apply_tool)`` of a telegraphic rule module (see :mod:`.`)."""

    def apply(root, ctx):
        if r.schema is None or not isinstance(root, dict):
            return root
        protected = {ctx.tool_name} if ctx is not None and ctx.tool_name else set()
        Rewriter([r]).schema(root, frozenset(names(root, protected)))
        return root

    def apply_tool(tool, ctx) -> None:
        if r.tool is not None:
            Rewriter([r]).tool(tool.container, tool_protected(tool))

    return apply, apply_tool


def apply_tree(tree, rule_names: Iterable[str]):
    """The rules ``rule_names`` (modules of this package, each with a ``RULE``) applied to the
    catalog or bare schema ``tree`` in one walk, in place; then ``echo_description`` on every
    schema whose descriptions changed (a description reduced to its property's name goes, as
    a second compression would drop it). Returns ``tree``."""
    from .. import envelope
    from . import echo_description, module

    key = tuple(rule_names)
    rw = Rewriter([module(n).RULE for n in key], _SHARED.setdefault(key, {}))
    tools = envelope.iter_tools(tree)
    if tools:
        for tool in tools:
            protected = tool_protected(tool)
            for _, schema in tool.schemas():
                if rw.schema(schema, protected):
                    echo_description.apply(schema, None)
            rw.tool(tool.container, protected)
    elif envelope.is_bare_schema(tree) and isinstance(tree, dict):
        if rw.schema(tree, frozenset(names(tree, set()))):
            echo_description.apply(tree, None)
    return tree
