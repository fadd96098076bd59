"""Counting by segments (tokens._SEGMENT, O200kCounter._count_segments): the places where a
text with quotes is cut must never change a count. Checked against tiktoken's encoder on
random catalogs, on random text made of the characters the places are about, and on the
corpus, with the thresholds lowered so that even tiny texts are counted by segments."""

from __future__ import annotations

import contextlib
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from caveman_engine import gotext, tokens
from caveman_engine.compressors import toolschema

from .conftest import CORPUS


@contextlib.contextmanager
def always_segments():
    """Every text with two places is counted by segments, however distinct they are, and
    every segment sentence by sentence, every sentence remembered."""
    names = ("SEG_MIN_PARTS", "SEG_SHARE", "SEG_SHARE_SMALL", "SENTENCE_MIN", "SENTENCE_KEEP")
    saved = [getattr(tokens, name) for name in names]
    for name, value in zip(names, (3, float("inf"), float("inf"), 2, 1)):
        setattr(tokens, name, value)
    try:
        yield
    finally:
        for name, value in zip(names, saved):
            setattr(tokens, name, value)


def _texts_of(parts: list[str]) -> list[str]:
    """The texts the segments of ``parts`` stand for (module comment "Segments")."""
    out = []
    last = len(parts) - 1
    for i, s in enumerate(parts):
        lead = "" if i == 0 or s[:1] in tokens._LETTERS else '"'
        trail = '"' if i < last and s[-1:] in tokens._OPENERS else ""
        out.append(lead + s + trail)
    return out


def _fresh(counter) -> tokens.O200kCounter:
    """A counter with empty memos (the rank cache of ``counter``)."""
    return tokens.O200kCounter(counter._cache_dir)


# The characters the two places are about, their neighbours in the split pattern (white space,
# newline, slash, apostrophe, DEL, digits), and non-ASCII letters, marks, numbers and spaces.
_ALPHABET = list('"""aZs:, {[}]./\'\n\r\t 1\x7féÉ\u0301\u3000中\U0003d000ſ')
_place_text = st.text(alphabet=st.sampled_from(_ALPHABET), max_size=200)


@settings(max_examples=400, deadline=None)
@given(_place_text)
def test_each_segment_splits_as_inside_the_text(encoder, text):
    """The theory itself, against tiktoken: the texts the segments stand for tile the text,
    and their counts add up to the text's (DEL-free: `_count_chunk` only cuts those)."""
    text = text.replace("\x7f", "")
    parts = tokens._SEGMENT.split(text)
    texts = _texts_of(parts)
    assert "".join(texts) == text
    assert sum(len(encoder.encode_ordinary(t)) for t in texts) == len(
        encoder.encode_ordinary(text))


_sentence_text = st.text(alphabet=st.sampled_from(list(".. aZé\u0301'\"\n1,")), max_size=120)


@settings(max_examples=400, deadline=None)
@given(_sentence_text)
def test_each_sentence_splits_as_inside_the_text(encoder, text):
    """The sentence places, against tiktoken: the sentences tile the text and their counts
    add up to the text's."""
    parts = tokens._SENTENCE.split(text)
    units = [parts[0]] + ["." + p for p in parts[1:]]
    assert "".join(units) == text
    assert sum(len(encoder.encode_ordinary(u)) for u in units) == len(
        encoder.encode_ordinary(text))


@settings(max_examples=300, deadline=None)
@given(_place_text)
def test_count_by_segments_matches_tiktoken_on_any_text(counter, encoder, text):
    text = tokens._DEL_RUN.sub("\x7f", text)
    with always_segments():
        n = counter.count_small(text)
    assert n == len(encoder.encode_ordinary(text))


_json_text = st.text(alphabet=st.sampled_from(_ALPHABET + list("abcdefghxyzABC")), max_size=40)
_leaf = st.one_of(_json_text, st.integers(-1000, 1000), st.booleans(), st.none())
_schema = st.recursive(
    st.dictionaries(_json_text, _leaf, max_size=4),
    lambda inner: st.dictionaries(_json_text, st.one_of(inner, st.lists(inner, max_size=3)),
                                  max_size=4),
    max_leaves=12,
)
_tool = st.fixed_dictionaries(
    {"name": _json_text, "description": _json_text, "inputSchema": _schema})


@settings(max_examples=150, deadline=None)
@given(st.lists(_tool, min_size=1, max_size=6), st.sampled_from([None, 1, 2]),
       st.booleans())
def test_count_by_segments_matches_tiktoken_on_random_catalogs(counter, encoder, tools, indent,
                                                               ascii_only):
    """A catalog, then its toolschema output, through one counter (the second count reuses
    the segments of the first): both exactly tiktoken's counts."""
    c = _fresh(counter)
    data = json.dumps({"tools": tools}, indent=indent, ensure_ascii=ascii_only).encode()
    out = toolschema.compress(data)
    for blob in (data, out or b"", data):
        text = tokens._DEL_RUN.sub("\x7f", gotext.decode(blob))
        with always_segments():
            n = c.count(blob)
        assert n == len(encoder.encode_ordinary(text))


def test_corpus_and_outputs_count_alike_by_segments(counter, encoder):
    """Every corpus catalog and its output, in a row through one counter (real thresholds):
    the counts are tiktoken's, and the segment memo did serve them."""
    c = _fresh(counter)
    for f in sorted(CORPUS.glob("*.tools.json")):
        data = f.read_bytes()
        out = toolschema.compress(data) or b""
        for blob in (data, out):
            text = tokens._DEL_RUN.sub("\x7f", gotext.decode(blob))
            assert (f.name, c.count(blob)) == (f.name, len(encoder.encode_ordinary(text)))
    assert len(c._segs) > 1000


def test_marked_split_is_the_split_of_each_text(counter):
    """The DEL-joined batch of `_count_each`: the marked pattern gives each text's pieces,
    with one DEL piece between two texts, ASCII or not, sparse or dense."""
    splitter = tokens._get_splitter()
    base = gotext.decode((CORPUS / "github.tools.json").read_bytes())
    texts = [base[:3000], '"a', "é\u0301 x", base[3000:9000] + "中文", " \n", "'s", "\t"]
    joined = "\x7f".join(texts)
    want = []
    for i, t in enumerate(texts):
        want += (["\x7f"] if i else []) + splitter.split(t)
    assert splitter.split(joined, marked=True) == want
    assert splitter.split(joined) == [p for p in want if p != "\x7f"]


def test_count_each_counts_every_text_on_its_own(counter, encoder, monkeypatch):
    """Memo full and long pieces (the pieces the memo does not take) included."""
    monkeypatch.setattr(tokens, "MEMO_ENTRIES", 5)
    c = _fresh(counter)
    texts = ['"description', '":"', "x" * 300, "Zürich's " * 20, "\n\n", "12345", '"}]']
    assert c._count_each(texts, False) == [len(encoder.encode_ordinary(t)) for t in texts]
    assert c._count_each(texts, False) == [len(encoder.encode_ordinary(t)) for t in texts]


def test_mostly_distinct_segments_are_counted_piece_by_piece(counter, encoder):
    """A log with quotes: no two segments alike, so no segment memo to fill."""
    lines = [f'{i:06d} user="u{i * 7919 % 10007}" said "hello {i}"\n' for i in range(400)]
    text = "".join(lines)
    c = _fresh(counter)
    assert c.count(text.encode()) == len(encoder.encode_ordinary(text))
    assert not c._segs
