"""The offline o200k_base counter: both implementations agree with tiktoken's encoder, the
rank cache is validated, nothing touches the network, and the fallback is exact."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caveman_engine import gotext, tokens

from .conftest import CONFORMANCE, CORPUS


@pytest.fixture(scope="module")
def counter(tmp_path_factory) -> tokens.O200kCounter:
    d = tmp_path_factory.mktemp("rc")
    d.chmod(0o700)
    c = tokens.O200kCounter(d)
    c.load()
    return c


@pytest.fixture(scope="module")
def encoder(counter):
    return counter.encoding()


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
        st.sampled_from(list(" \t\r\n\x0b\x0c\x1c\x1d\x85\xa0\u2028\u3000'sSdD0123456789")),
    ),
    max_size=200,
)


@settings(max_examples=200, deadline=None)
@given(_odd_text)
def test_python_counter_matches_tiktoken_on_any_text(counter, encoder, text):
    assert counter.count_small(text) == len(encoder.encode_ordinary(text))


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


def test_large_inputs_use_the_encoder_with_the_same_count(tmp_path):
    tmp_path.chmod(0o700)
    data = (CORPUS / "zereight-gitlab.tools.json").read_bytes()
    assert len(data) >= tokens.LARGE_INPUT
    big = tokens.O200kCounter(tmp_path)
    n = big.count(data)
    assert big._encoding is not None
    small = tokens.O200kCounter(tmp_path)
    assert small.count_small(gotext.decode(data)) == n


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
