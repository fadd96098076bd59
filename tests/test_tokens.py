"""The offline o200k_base counter: both implementations agree with tiktoken's encoder, the
rank cache is validated, nothing touches the network, and the fallback is exact."""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caveman_engine import gotext, tokens

from .conftest import CONFORMANCE, CORPUS


def _samples() -> list[Path]:
    files = sorted(CORPUS.glob("*.json")) + sorted(CONFORMANCE.glob("*/*.in"))
    return [f for f in files if f.stat().st_size < 400_000]


def test_python_counter_matches_tiktoken_on_every_sample(counter, encoder):
    mismatched = []
    for f in _samples():
        text = gotext.decode(f.read_bytes())
        if counter.count_small(text) != len(encoder.encode_ordinary(text)):
            mismatched.append(f.name)
    assert mismatched == []


_odd_text = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8"),
        st.sampled_from(list(" \t\r\n\x0b\x0c\x1c\x1d\x7f\x85\xa0\u2028\u3000'sSdD0123456789")),
    ),
    max_size=200,
)


@settings(max_examples=200, deadline=None)
@given(_odd_text)
def test_python_counter_matches_tiktoken_on_any_text(counter, encoder, text):
    assert counter.count_small(text) == len(encoder.encode_ordinary(text))


# -- Unicode versions: the classes are pinned (`_unicode_classes`), so both paths split alike
# whatever `regex` (2026.x: Unicode 17) or tiktoken (0.14: Unicode 16) is installed.


def _disagreement() -> list[str]:
    """Characters the installed `regex` classes otherwise than the shipped tables (splitting
    no longer uses `regex`; these remain the characters where Unicode versions differ)."""
    regex = pytest.importorskip("regex")

    every = "".join(map(chr, range(0xD800))) + "".join(map(chr, range(0xE000, 0x110000)))
    differ: set[str] = set()
    for name in ("UPPER", "LOWER", "LETTER_OR_NUMBER", "NUMBER", "SPACE"):
        spelling = tokens.CLASS_SPELLINGS[name].replace(r"\s", r"\p{White_Space}")
        native = set(regex.findall(spelling, every))
        shipped = {chr(c) for lo, hi in tokens._ranges(name) for c in range(lo, hi + 1)}
        differ |= native ^ shipped
    return sorted(differ)


@pytest.fixture(scope="module")
def disagreement(counter) -> list[str]:
    return _disagreement()


# Letters (or numbers, marks) in Unicode 17 that tiktoken 0.14's tables do not know.
NEW_CODE_POINTS = ["\U0003d000", "\U000107bb", "\U00011de0", "\U00010ecb"]


@pytest.mark.parametrize("ch", NEW_CODE_POINTS)
@pytest.mark.parametrize("form", ["{c}/A", "a{c}b", "{c}", "A{c}{c}1", " {c}'s", "é{c} 12{c}\n"])
def test_new_code_points_split_alike_on_both_paths(counter, encoder, ch, form):
    text = form.format(c=ch)
    n = len(encoder.encode_ordinary(text))
    assert counter.count_small(text) == n
    assert counter.count(text.encode()) == n


def test_the_hypothesis_find_regression(counter, encoder):
    assert counter.count_small("\U0003d000/A") == len(encoder.encode_ordinary("\U0003d000/A"))


def test_large_input_with_new_code_points_counts_alike(tmp_path, counter, disagreement):
    tmp_path.chmod(0o700)
    text = gotext.decode((CORPUS / "zereight-gitlab.tools.json").read_bytes())
    odd = (disagreement or NEW_CODE_POINTS)[:: max(1, len(disagreement) // 3000)]
    text = "".join(text[i : i + 40] + odd[(i // 40) % len(odd)] for i in range(0, len(text), 40))
    big = tokens.O200kCounter(tmp_path)
    big.encoding()  # then `count` hands every chunk to tiktoken's encoder
    n = big.count(text.encode())
    assert counter.count_small(text) == n
    assert tokens.O200kCounter(tmp_path).count(text.encode()) == n


def test_every_character_gets_a_representative_of_its_classes(disagreement):
    """The Python splitter replaces each non-ASCII character by the representative of its
    combination of classes: same classes, never a character the pattern names literally."""
    splitter = tokens._get_splitter()
    chars = [chr(c) for c in range(0x80, 0x110000, 97) if not 0xD800 <= c < 0xE000]
    chars += list(disagreement) + NEW_CODE_POINTS + list("\u00a0\u0085\u2028\u3000\u017f")
    splitter.learn(chars)
    for ch in chars:
        rep = splitter.table[ord(ch)]
        assert splitter.signature(rep) == splitter.signature(ch), ch
        assert not rep.isascii() and rep not in tokens._LITERALS
    assert all(splitter.table[c] == chr(c) for c in range(128))
    assert len(splitter.rep) < 64  # a few dozen combinations exist


def test_splitter_pattern_classes_are_ascii_plus_representatives():
    splitter = tokens._get_splitter()
    splitter.learn(["\u4e2d", "\u00e9", "\u0301", "\u00b2", "\u3000"])
    pattern = splitter.pattern.pattern
    assert len(pattern) < 4000  # small classes: what makes `re` fast
    assert not re.search(r"\\[pPsS]|\(\?i", pattern)


def test_ascii_classes_are_the_ascii_part_of_the_shipped_ones():
    assert list(tokens.ASCII_CLASSES) == list(tokens.CLASS_SPELLINGS)
    for name in tokens.CLASS_SPELLINGS:
        shipped = [(lo, min(hi, 0x7F)) for lo, hi in tokens._ranges(name) if lo <= 0x7F]
        assert (name, list(tokens.ASCII_CLASSES[name])) == (name, shipped)


def test_shipped_classes_are_the_installed_tiktokens():
    """The shipped tables are what tiktoken's own \\p{..} classes say. If this fails after a
    tiktoken upgrade, both paths still agree with each other (both run the shipped tables);
    regenerate with tools/gen_unicode_classes.py to follow tiktoken's new Unicode version."""
    probed = tokens.probe_tiktoken_classes()
    assert list(probed) == list(tokens.CLASS_SPELLINGS)
    for name, ranges in probed.items():
        assert (name, tokens._ranges(name)) == (name, ranges)


def test_explicit_pattern_is_the_spelled_pattern_for_tiktoken(counter, encoder):
    """With the installed tiktoken, the explicit and the \\p{..} spellings split alike."""
    import tiktoken

    ranks = {tok: r for r, tok in enumerate(counter._rank_table().tokens())}
    spelled = tiktoken.Encoding("spelled", pat_str=tokens._PAT_STR, mergeable_ranks=ranks,
                                special_tokens={})
    sample = "".join(f.read_text(errors="replace")[:3000] for f in _samples()[:40])
    sample += "Don'T WE'LL ſ 'ſ 'S x\u2028 \u3000\n\r\n \t\x0b\x1c 12345 \u0301é Ǆǅ ʰ ²"
    for text in [sample] + sample.split(" "):
        assert spelled.encode_ordinary(text) == encoder.encode_ordinary(text)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_python_counter_matches_tiktoken_with_new_code_points(counter, encoder, disagreement,
                                                              data):
    odd = (disagreement or NEW_CODE_POINTS)[:: max(1, len(disagreement) // 500)]
    alphabet = st.one_of(st.sampled_from(odd),
                         st.sampled_from(list(" \t\n\r'/sSdD0123aAé中\u0301\x7f\u3000")))
    text = data.draw(st.text(alphabet=alphabet, max_size=60))
    assert counter.count_small(text) == len(encoder.encode_ordinary(text))


# -- U+007F (DEL): the reference cuts the text at every DEL and counts each DEL-free segment on
# its own; the DEL itself costs nothing. The oracle below does exactly that, literally: split the
# text, count each segment with an encoder built from the plain (DEL-unaware) split pattern.


@pytest.fixture(scope="module")
def segment_encoder(counter):
    import tiktoken

    ranks = {tok: r for r, tok in enumerate(counter._rank_table().tokens())}
    return tiktoken.Encoding("o200k_segments",
                             pat_str=tokens.explicit_pattern(tokens._SEGMENT_PAT_STR),
                             mergeable_ranks=ranks, special_tokens={})


@pytest.fixture(scope="module")
def by_segments(segment_encoder):
    def count(text: str) -> int:
        return sum(len(segment_encoder.encode_ordinary(seg)) for seg in text.split("\x7f") if seg)

    return count


# (text, tokens) -- each count is the sum over the DEL-split segments, worked out by hand from
# the pieces of each segment (all of which are single o200k tokens).
DEL_CASES = [
    ("\x7f", 0),  # no segment at all
    ("\x7f\x7f\x7f", 0),
    ("ab", 1),
    ("a\x7fb", 2),  # "a" | "b"
    ("hello \x7fworld", 3),  # "hello", " " | "world"
    ("bell\x7fdel", 2),  # "bell" | "del"
    ("\x7fab", 1),  # DEL at the start
    ("ab\x7f", 1),  # DEL at the end
    ("\x7f\x7fab\x7f\x7f", 1),
    ("a\x7f\x7f\x7fb", 2),  # a run of DEL is one cut
    ("a  \x7fb", 3),  # "a", "  " (whitespace at a segment end is one piece) | "b"
    ("a\x7f  b", 3),  # "a" | " ", " b"
    ("x\x7f \ny", 3),  # "x" | " \n", "y"
    ("\t\x7f\n", 2),  # "\t" | "\n": no DEL-spanning whitespace piece
    ("hello world", 2),
    ("hello\x7f world", 2),  # "hello" | " world"
    ("日本\x7f語", 2),  # "日本" | "語"
    ("é\x7fé", 2),
    ("e\x7f\u0301", 2),  # a combining mark does not reach back over a DEL
]


@pytest.mark.parametrize("text,expected", DEL_CASES)
def test_del_cuts_the_text_and_costs_nothing(counter, by_segments, text, expected):
    assert by_segments(text) == expected
    assert counter.count_small(text) == expected
    assert counter.count(text.encode()) == expected
    assert len(counter.encoding().encode_ordinary(text)) == expected


def test_del_next_to_invalid_utf8(counter, by_segments):
    # b"\xe2\x82" is a truncated sequence: two U+FFFD (one per byte), then the DEL cut.
    data = b"\xe2\x82\x7fa\xff\x7f\x7f"
    assert gotext.decode(data) == "\ufffd\ufffd\x7fa\ufffd\x7f\x7f"
    assert counter.count(data) == by_segments("\ufffd\ufffd") + by_segments("a\ufffd")
    assert counter.count(data) == by_segments(gotext.decode(data))


@pytest.mark.parametrize("ch", ["\x00", "\x08", "\x1b", "\x1f", "\x7e", "\x80", "\x9f", "\ufffd"])
def test_no_other_code_point_cuts(counter, segment_encoder, ch):
    text = f"ab{ch}cd {ch}{ch}ef"
    assert counter.count(text.encode()) == len(segment_encoder.encode_ordinary(text))


def test_the_del_pattern_is_the_segment_pattern_with_del_excluded():
    assert tokens._PAT_STR.replace(r"\x7f", "").replace(r"(?![^\s])", r"(?!\S)") == (
        tokens._SEGMENT_PAT_STR
    )


def test_del_vectors_count_as_the_reference_does(counter, by_segments):
    """The reference's counts (tokens_before of each vector's compress report)."""
    import json

    expected = {}
    for suite in ("general", "general2"):
        for line in (CONFORMANCE / suite / "cases.jsonl").read_text().splitlines():
            case = json.loads(line)
            if case["args"][:1] == ["compress"] and case["stderr"].startswith("{"):
                expected[(suite, case["case"])] = json.loads(case["stderr"])["tokens_before"]
    seen = 0
    for (suite, name), n in expected.items():
        data = (CONFORMANCE / suite / name).read_bytes()
        if b"\x7f" in data:
            seen += 1
            assert (name, counter.count(data)) == (name, n)
            assert by_segments(gotext.decode(data)) == n
    assert seen >= 3  # tok__del-in-words, tok__del-terminal-backspaces, xedge__binary.bin
    assert expected[("general", "xedge__binary.bin.in")] == 1257


@settings(max_examples=200, deadline=None)
@given(_odd_text)
def test_both_counters_follow_the_del_rule_on_any_text(counter, encoder, by_segments, text):
    n = by_segments(text)
    assert counter.count_small(text) == n
    assert len(encoder.encode_ordinary(text)) == n


def test_large_input_with_del_counts_by_segments_on_both_paths(tmp_path, by_segments,
                                                               segment_encoder):
    tmp_path.chmod(0o700)
    data = (CORPUS / "zereight-gitlab.tools.json").read_bytes()
    text = gotext.decode(data)
    # A DEL every 37 characters, runs of them, and DEL at both ends.
    text = "\x7f" + "".join(
        text[i : i + 37] + ("\x7f\x7f\x7f" if i % 3 else "\x7f") for i in range(0, len(text), 37)
    ) + "\x7f"
    big_data = text.encode()
    assert big_data.count(b"\x7f") > 3000
    expected = by_segments(text)
    assert expected != len(segment_encoder.encode_ordinary(text))  # the rule matters here
    big = tokens.O200kCounter(tmp_path)
    big.encoding()
    assert big.count(big_data) == expected  # by tiktoken's encoder, chunk by chunk
    assert tokens.O200kCounter(tmp_path).count(big_data) == expected  # in Python
    small = tokens.O200kCounter(tmp_path)
    assert small.count_small(text) == expected


def test_long_del_run_is_one_cut_without_a_panic(tmp_path, by_segments, capfd):
    """Regression: with DEL in no piece, tiktoken's scanner fails at every DEL of a run inside
    one search, and ~150k of them exceed its backtrack limit (a Rust panic and backtrace on
    stderr, then the Python fallback). A run is one cut, so it is collapsed first."""
    tmp_path.chmod(0o700)
    text = "left " + "\x7f" * 400_000 + " right" + "\x7f" * 200_000
    assert by_segments(text) == 3  # "left", " " | " right"
    c = tokens.O200kCounter(tmp_path)
    c.encoding()
    assert c.count(text.encode()) == 3
    assert c.count(b"\x7f" * 300_000) == 0
    assert tokens.O200kCounter(tmp_path).count(text.encode()) == 3
    assert "panicked" not in capfd.readouterr().err


def test_known_counts(counter):
    fixture = (CONFORMANCE / "toolschema" / "seed_catalog_min.json.in").read_bytes()
    assert counter.count(fixture) == 436
    assert counter.count(b"") == 0
    # special tokens are ordinary text
    assert counter.count(b"<|endoftext|>") > 1


def test_invalid_utf8_counts_one_replacement_per_byte(counter, encoder):
    # A truncated 3-byte sequence is two bad bytes: two U+FFFD, as Go sees it.
    data = b"ab\xe2\x82cd"
    assert gotext.decode(data) == "ab\ufffd\ufffdcd"
    assert counter.count(data) == len(encoder.encode_ordinary("ab\ufffd\ufffdcd"))


def test_catalogs_are_counted_without_building_the_encoder(tmp_path, encoder):
    """Cold start: a 220 KB catalog is counted in Python (building tiktoken's encoder costs
    ~0.25 s and ~100 MiB), with tiktoken's count."""
    tmp_path.chmod(0o700)
    data = (CORPUS / "zereight-gitlab.tools.json").read_bytes()
    c = tokens.O200kCounter(tmp_path)
    n = c.count(data)
    assert c._encoding is None
    assert n == len(encoder.encode_ordinary(gotext.decode(data)))
    with_encoder = tokens.O200kCounter(tmp_path)
    with_encoder.encoding()
    assert with_encoder.count(data) == n


def test_approximation_is_runes_over_four():
    assert tokens.approx_count(b"") == 0
    assert tokens.approx_count(b"abc") == 1
    assert tokens.approx_count("ééééééééé".encode()) == 2
    assert tokens.approx_count(b"\xff" * 8) == 2  # invalid bytes count one rune each


def test_cache_is_written_once_and_reused(tmp_path):
    tmp_path.chmod(0o700)
    tokens.O200kCounter(tmp_path).load()
    cache = tmp_path / "o200k_base.rankcache"
    assert cache.is_file()
    assert cache.stat().st_mode & 0o077 == 0
    mtime = cache.stat().st_mtime_ns
    tokens.O200kCounter(tmp_path).load()
    assert cache.stat().st_mtime_ns == mtime


def test_corrupt_cache_is_rebuilt(tmp_path):
    tmp_path.chmod(0o700)
    tokens.O200kCounter(tmp_path).load()
    cache = tmp_path / "o200k_base.rankcache"
    blob = bytearray(cache.read_bytes())
    blob[-10] ^= 0xFF  # flip a byte in the token keys
    cache.write_bytes(bytes(blob))
    c = tokens.O200kCounter(tmp_path)
    assert c.count(b"hello world") == 2
    assert cache.read_bytes() != bytes(blob)  # rewritten


def test_cache_writable_by_others_is_ignored(tmp_path):
    tmp_path.chmod(0o700)
    tokens.O200kCounter(tmp_path).load()
    cache = tmp_path / "o200k_base.rankcache"
    cache.chmod(0o666)
    assert not tokens._cache_usable(cache)
    assert tokens.O200kCounter(tmp_path).count(b"hello world") == 2


def test_unwritable_cache_dir_still_counts(tmp_path):
    missing = tmp_path / "does-not-exist"
    assert tokens.O200kCounter(missing).count(b"hello world") == 2


def test_rank_table_rejects_other_vocabularies():
    blob = bytearray(tokens.build_rank_table([b"a", b"b", b"ab"]))
    table = tokens.RankTable(bytes(blob))
    assert table.rank(b"ab") == 2 and table.rank(b"zz") is None
    blob[8] ^= 1  # vocabulary sha
    with pytest.raises(tokens.VocabularyError):
        tokens.RankTable(bytes(blob))
    other = bytearray(tokens.build_rank_table([b"a", b"b", b"ab"]))
    other[:8] = b"CAVBPEB1" if sys.byteorder == "little" else b"CAVBPE01"  # other byte order
    with pytest.raises(tokens.VocabularyError):
        tokens.RankTable(bytes(other))


def test_no_network_whatever_tiktoken_cache_dir_says(tmp_path):
    """Counting in a fresh process with a bogus TIKTOKEN_CACHE_DIR and proxies pointing
    nowhere: the vocabulary comes from the package."""
    env = dict(os.environ, TIKTOKEN_CACHE_DIR=str(tmp_path / "nope"),
               HTTPS_PROXY="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9")
    code = (
        "import sys; from caveman_engine import tokens; "
        "c = tokens.O200kCounter(None); print(c.count(b'x' * 200000), c.name)"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[1] == b"o200k_base"


def test_corrupt_vocabulary_falls_back_to_the_approximation(tmp_path):
    """A damaged install (vocabulary failing its sha256): the engine still works and says
    it counted approx-chars/4. Runs a copy of the package whose vocabulary is corrupted."""
    import shutil

    import caveman_engine

    pkg = Path(caveman_engine.__file__).parent
    copy = tmp_path / "site" / "caveman_engine"
    shutil.copytree(pkg, copy, ignore=shutil.ignore_patterns("__pycache__"))
    for extra in ("registry.toml", "store"):
        src = pkg.parent / extra
        if src.exists() and not (copy / extra).exists():
            dst = copy / ("_store" if extra == "store" else extra)
            (shutil.copytree if src.is_dir() else shutil.copy)(src, dst)
    vocab = copy / "data" / "o200k_base.tiktoken"
    vocab.write_bytes(vocab.read_bytes()[:-100])
    store = tmp_path / "s"
    store.mkdir(mode=0o700)
    env = dict(os.environ, PYTHONPATH=str(copy.parent), CAVEMAN_CCR_DB=str(store / "ccr.db"),
               CAVEMAN_CACHE_DIR=str(store))
    code = "from caveman_engine.cli import main; main()"
    out = subprocess.run([sys.executable, "-c", code, "compress"], input=b"abcdefgh",
                         env=env, capture_output=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout == b"abcdefgh"
    assert out.stderr == (
        b'{"content_type":"text","tokens_before":2,"tokens_after":2,'
        b'"token_count_basis":"approx-chars/4","ratio":0,"basis":"inferred"}\n'
    )


# -- Speed without a different count: the piece memo, chunking, the sparse split, the
# switch to the encoder. Each must leave every count exactly tiktoken's.


def test_memo_changes_no_count(tmp_path, encoder):
    tmp_path.chmod(0o700)
    c = tokens.O200kCounter(tmp_path)
    for f in _samples():
        text = gotext.decode(f.read_bytes())
        text = tokens._DEL_RUN.sub("\x7f", text)
        n = c.count_small(text, memo=False)
        assert (f.name, c.count_small(text)) == (f.name, n)  # fills the memo
        assert (f.name, c.count_small(text)) == (f.name, n)  # from the memo
    assert c._memo  # shared across counts


def test_memo_is_bounded(tmp_path, monkeypatch, encoder):
    """A text of many distinct pieces: the memo stops at MEMO_ENTRIES entries of at most
    MEMO_PIECE characters, and the counts stay exact past that point."""
    tmp_path.chmod(0o700)
    monkeypatch.setattr(tokens, "MEMO_ENTRIES", 500)
    monkeypatch.setattr(tokens, "MEMO_PIECE", 6)
    rnd = random.Random(5)
    words = ["".join(rnd.choices("abcdefghijklmnopqrstuvwxyz", k=rnd.randint(2, 12)))
             for _ in range(3000)]
    text = " ".join(words)
    c = tokens.O200kCounter(tmp_path)
    n = c.count(text.encode())
    assert len(c._memo) == 500
    assert max(map(len, c._memo)) <= 6
    assert n == len(encoder.encode_ordinary(text))
    assert c.count(text.encode()) == n


def test_the_real_memo_bound_is_small():
    # worst case: MEMO_ENTRIES pieces of MEMO_PIECE ASCII characters, with their dict slots
    per_entry = sys.getsizeof("x" * tokens.MEMO_PIECE) + 8 + 3 * 8 * 2
    assert tokens.MEMO_ENTRIES * per_entry < 32 * 1024 * 1024


def test_chunks_cut_only_between_pieces(monkeypatch, counter, encoder):
    """Tiny chunks: every sample is cut at hundreds of places and still counts as a whole."""
    monkeypatch.setattr(tokens, "FIRST_CHUNK", 16)
    monkeypatch.setattr(tokens, "CHUNK", 64)
    cuts = 0
    for f in _samples()[::3]:
        text = tokens._DEL_RUN.sub("\x7f", gotext.decode(f.read_bytes()))
        chunks = list(tokens._chunks(text))
        assert "".join(chunks) == text
        cuts += len(chunks) - 1
        pieces = [p for chunk in chunks for p in counter._pieces(chunk)]
        assert (f.name, pieces) == (f.name, counter._pieces(text))
        assert counter.count_small(text, memo=False) == len(encoder.encode_ordinary(text))
    assert cuts > 1000


_cut_text = st.text(
    alphabet=st.sampled_from(list('"aZ\n /\'\t \x7f1{}:,é\u3000\u0301中')), max_size=300
)


@settings(max_examples=300, deadline=None)
@given(_cut_text)
def test_chunked_count_matches_tiktoken_on_any_text(counter, encoder, text):
    text = tokens._DEL_RUN.sub("\x7f", text)
    saved = tokens.FIRST_CHUNK, tokens.CHUNK
    tokens.FIRST_CHUNK, tokens.CHUNK = 4, 8
    try:
        chunks = list(tokens._chunks(text))
        n = counter.count_small(text, memo=False)
    finally:
        tokens.FIRST_CHUNK, tokens.CHUNK = saved
    assert "".join(chunks) == text
    assert n == len(encoder.encode_ordinary(text))


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_sparse_non_ascii_split_matches_tiktoken(counter, encoder, data):
    """A mostly ASCII text (a catalog) with a few non-ASCII characters anywhere: only the
    stretches around them are translated."""
    base = gotext.decode((CORPUS / "github.tools.json").read_bytes())
    at = sorted(data.draw(st.lists(st.integers(0, len(base)), min_size=1, max_size=5)))
    odd = data.draw(st.lists(st.sampled_from(["é", "\u3000", "中文", "\u0301", "²", "ſ",
                                               "\U0003d000", "\ufffd", "\u00a0\n"]),
                             min_size=len(at), max_size=len(at)))
    parts, prev = [], 0
    for i, ch in zip(at, odd):
        parts += [base[prev:i], ch]
        prev = i
    text = "".join(parts) + base[prev:]
    assert len(tokens._NON_ASCII.findall(text)) * tokens.SPARSE <= len(text)  # sparse path
    assert counter._pieces(text) == [text[a:b] for a, b in _tiktoken_spans(encoder, text)]
    assert counter.count_small(text, memo=False) == len(encoder.encode_ordinary(text))


def _tiktoken_spans(encoder, text: str):
    """The pieces of ``text`` as the explicit pattern cuts it (`regex`, as tiktoken's)."""
    import regex

    return [m.span() for m in regex.finditer(tokens.explicit_pattern(tokens._PAT_STR), text)]


def test_new_pieces_turn_to_the_encoder(tmp_path, encoder):
    """Text of new pieces that are not tokens (base64 here; binary input goes to the encoder
    at once, see below): after MERGE_BUDGET bytes merged in Python, the encoder merges the
    rest and counts the next chunks; same count."""
    import base64

    tmp_path.chmod(0o700)
    data = base64.b64encode(random.Random(3).randbytes(300_000))
    c = tokens.O200kCounter(tmp_path)
    n = c.count(data)
    assert c._encoding is not None
    assert tokens.MERGE_BUDGET < c._merged < 4 * tokens.MERGE_BUDGET
    assert n == len(encoder.encode_ordinary(gotext.decode(data)))


def test_logs_and_catalogs_stay_in_python(tmp_path, encoder):
    tmp_path.chmod(0o700)
    lines = [f"2026-01-{d:02d}T10:{m:02d}:00Z INFO worker[{d * m}]: job {d}-{m} done in "
             f"{d * 37 % 1000} ms, request_id={d * 7919 * m:08x}\n"
             for d in range(1, 29) for m in range(60)]
    catalog = (CORPUS / "zereight-gitlab.tools.json").read_bytes()
    for data in ("".join(lines).encode() * 3, catalog * 3):
        c = tokens.O200kCounter(tmp_path)
        n = c.count(data)
        assert c._encoding is None
        assert n == len(encoder.encode_ordinary(gotext.decode(data)))


def test_binary_input_goes_to_the_encoder_from_the_start_and_counts_alike(tmp_path, counter):
    """Invalid UTF-8 from BINARY_MIN characters on (one U+FFFD per byte) builds the encoder
    before the first chunk; a text just below either threshold keeps the Python path. Either
    way the count is the Python path's."""
    import random

    tmp_path.chmod(0o700)
    rng = random.Random(7)
    binary = bytes(rng.getrandbits(8) for _ in range(tokens.BINARY_MIN + 1000))
    fresh = tokens.O200kCounter(tmp_path)
    n = fresh.count(binary)
    assert fresh._encoding is not None
    assert n == counter.count_small(gotext.decode(binary), memo=False)
    # ASCII with one U+FFFD per BINARY_SHARE + 1 characters: below the share
    sparse = (b"a" * tokens.BINARY_SHARE + b"\xff") * (tokens.BINARY_MIN // tokens.BINARY_SHARE)
    fresh = tokens.O200kCounter(tmp_path)
    n = fresh.count(sparse)
    assert fresh._encoding is None
    assert n == counter.count_small(gotext.decode(sparse), memo=False)
