"""The shared machinery of the telegraphic rules: literals, protected names, constraint words,
sentence boundaries and capitals."""

from caveman_engine.catalog.rules import _telegraph
from caveman_engine.catalog.rules._telegraph import Edit, Rule, edit_sentence


def drop(word: str) -> list[Edit]:
    return [Edit(r"[ \t]*\b" + word + r"\b", "")]


def test_literals_never_edited():
    s = "Use 'foo' with `foo` and foo_bar."
    assert edit_sentence(s, drop("foo"), frozenset(), False) == s


def test_protected_names_survive():
    assert edit_sentence("Use page size.", drop("page"), frozenset({"page"}), False) == "Use page size."


def test_constraint_words_unchanged():
    # a constraint sentence may lose a word, never a constraint word
    assert edit_sentence("Must be at most 5 items.", drop("items"), frozenset(), True) == "Must be at most 5."
    assert edit_sentence("Must be at most 5.", drop("most"), frozenset(), True) == "Must be at most 5."
    # a plain sentence may not become a constraint one
    assert edit_sentence("Pick at the most.", drop("the"), frozenset(), False) == "Pick at the most."


def test_capital_and_boundaries():
    first = [Edit(r"^Specifies[ \t]+", "")]
    assert edit_sentence("Specifies page size.", first, frozenset(), False) == "Page size."
    # the new first word cannot take a capital: refused
    assert edit_sentence("Specifies page size.", first, frozenset({"page"}), False) == \
        "Specifies page size."
    assert edit_sentence("Use x. the y", drop("Use x"), frozenset(), False) == "Use x. the y"


def test_rule_order_and_cache():
    rules = [Rule(None, lambda i, s: drop("very"), True), Rule(None, lambda i, s: drop("quite"), True)]
    rw = _telegraph.Rewriter(rules)
    assert rw.text("A very quite long. It is very short.", None, frozenset()) == "A long. It is short."
    assert rw.cache
