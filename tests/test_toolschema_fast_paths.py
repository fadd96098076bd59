"""Fast paths of the toolschema compressor give what the exact paths give."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from caveman_engine.compressors import toolschema as ts

# Pattern letters and their case, word characters and not, the two non-ASCII characters that
# fold with a pattern letter (KELVIN SIGN, LONG S), others that Python alone would fold (U+0130,
# U+0131), and other non-ASCII letters.
_sentence = st.lists(
    st.sampled_from(["must", "MUST", "Shall", "iso", "rfc", "8601", "-", " ", "_", "x", "é",
                     "\u212a", "\u017f", "\u0130", "\u0131", "ü", "over", "ma", "xed", "'t",
                     "can", "mini", "mum", "case", "sensitive", "中", "not", "allowed", "at",
                     "least", "one", "of", "more", "than", "exactly", "format", "ted",
                     "require", "d", "less", "greater", "exceed", "s", "-", "3339"]),
    max_size=10,
).map("".join)


@settings(max_examples=500, deadline=None)
@given(_sentence)
def test_is_constraint_is_the_exact_pattern(sentence):
    assert ts.is_constraint(sentence) is (ts.constraint_regex().search(sentence) is not None)
