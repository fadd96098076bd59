"""Comparing a human text with a machine name, for the rules that drop text which only repeats
a name (``titles``, ``echo_description``). Not a rule itself."""

from __future__ import annotations

# Words that add nothing to the name they sit beside: articles and pointers, the copula, the
# linking prepositions, and the schema's own vocabulary for "this slot" ("The page size value"
# says no more than ``page_size``). Anything outside this set makes a text informative.
FILLER = frozenset({
    "a", "an", "the", "this", "that", "its",
    "is",
    "for", "of", "to",
    "arg", "argument", "field", "input", "param", "parameter", "property", "value",
    "given", "provided", "specified",
})


def squash(text: str) -> str:
    """The ASCII letters and digits of ``text``, lower-cased: ``"Page Size"`` and ``pageSize``
    both become ``pagesize``."""
    return "".join(c for c in text.lower() if c.isascii() and c.isalnum())


def _kind(c: str) -> str:
    if c.isascii():
        if c.isdigit():
            return "9"
        if c.isupper():
            return "A"
        if c.islower():
            return "a"
    return " "


def words(text: str) -> list[str]:
    """Lower-case words of an identifier or a phrase. A word ends at anything but an ASCII
    letter or digit, where letters meet digits, where a lower-case letter meets a capital
    (``pageSize``), and before the last capital of a run followed by lower case
    (``HTTPServer`` is ``http``, ``server``). A possessive ``'s`` is not a word."""
    out: list[str] = []
    current: list[str] = []
    kinds = [_kind(c) for c in text]
    for i, c in enumerate(text):
        k = kinds[i]
        if k == " ":
            if current:
                out.append("".join(current).lower())
                current = []
            if c in "'\u2019" and text[i + 1:i + 2] == "s" and _kind(text[i + 2:i + 3] or " ") == " ":
                kinds[i + 1] = " "  # skip the possessive s
            continue
        if current:
            prev = kinds[i - 1]
            boundary = (
                (prev == "9") != (k == "9")
                or (prev == "a" and k == "A")
                or (prev == "A" and k == "A" and i + 1 < len(text) and kinds[i + 1] == "a")
            )
            if boundary:
                out.append("".join(current).lower())
                current = []
        current.append(c)
    if current:
        out.append("".join(current).lower())
    return out


def meaning(text: str) -> frozenset[str]:
    """The words of ``text`` that carry meaning (filler removed). A text with a non-ASCII
    character gets a set no name can equal: its words cannot be compared letter for letter."""
    if not text.isascii():
        return frozenset({"\0" + text})
    return frozenset(words(text)) - FILLER


def description_rule(rewrite):
    """``(apply, apply_tool)`` for a rule that rewrites every description string, in each
    schema node and on the tool itself, with ``rewrite(text) -> text``."""
    from .. import schema as js

    def fix(holder: dict) -> None:
        d = holder.get("description")
        if isinstance(d, str):
            new = rewrite(d)
            if new != d:
                holder["description"] = new

    def apply(root, ctx):
        for node in js.nodes(root):
            fix(node)
        return root

    def apply_tool(tool, ctx) -> None:
        fix(tool.container)

    return apply, apply_tool
