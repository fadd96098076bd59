"""Offline token counting: OpenAI ``o200k_base``, ``encode_ordinary`` semantics (spec §5).

The vocabulary ships inside the package (``data/o200k_base.tiktoken``) and is checked against
its sha256 when it is read; nothing is ever downloaded, whatever ``TIKTOKEN_CACHE_DIR`` says.

Cold start is the hard part: building tiktoken's Rust encoder from 200k ranks costs ~0.25 s,
more than everything else a small ``compress`` does. So there are two exact implementations of
the same count:

* **small inputs** are counted in Python: the o200k pre-split regex (as the reference applies
  it: U+007F is in no piece, see ``_PAT_STR``), then byte-pair merges
  whose rank lookups go to an open-addressing hash table in a memory-mapped *rank cache* file.
  The cache is written once, next to the recovery store, and validated on every load (format,
  vocabulary sha256, a sha256 of its own body, owned by us and not writable by others);
  loading it costs a few milliseconds;
* **large inputs** (or once the encoder exists) go to tiktoken's encoder, built from the same
  cache.

Both give identical counts (a property test compares them). If the vocabulary cannot be loaded
the engine counts ``approx-chars/4``: ``max(1, runes // 4)``, 0 for empty input.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import re
import stat
import struct
import tempfile
import zlib
from pathlib import Path

from . import gotext

VOCAB_NAME = "o200k_base"
VOCAB_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
APPROX_NAME = "approx-chars/4"

# Inputs at least this long are counted by tiktoken's encoder (building it pays off there).
LARGE_INPUT = 128 * 1024
# Pre-split pieces longer than this are merged by the encoder even for small inputs.
LONG_PIECE = 256

# The o200k_base split pattern as the reference engine's tokenizer applies it to a DEL-free
# text. It differs from OpenAI's tiktoken in one place: a run of whitespace ending in newlines
# only starts with the spaces/tabs *before* the first newline (`[^\S\r\n]*[\r\n]+` where
# tiktoken has `\s*[\r\n]+`), so "\n \n" is two pieces, "\n" and " \n" (a diff's blank context
# line costs one more token). Every token count of the reference's conformance vectors agrees.
_SEGMENT_PAT_STR = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""[^\S\r\n]*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
# U+007F (DEL) is never part of a piece in the reference: the text is cut at every DEL, each
# DEL-free segment is split and merged on its own, and a DEL costs nothing ("a\x7fb" is 2
# tokens, "ab" is 1; "\x7f" is 0). Rather than cutting the text, the pattern we run excludes
# DEL from every class that could consume it (the two negated classes) and treats it as a
# segment end in the one lookahead (`(?!\S)` becomes `(?![^\s\x7f])`, true at a DEL as at the
# end of a segment). No alternative can then match at a DEL, so the scanner (tiktoken's and the
# `regex` module's alike) steps over it, and no piece crosses it: the pieces are exactly those
# of the segments. It costs nothing when there is no DEL, and nothing per DEL when there are
# many (no per-segment calls).
_PAT_STR = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}\x7f]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}\x7f]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}\x7f]+[\r\n/]*""",
        r"""[^\S\r\n]*[\r\n]+""",
        r"""\s+(?![^\s\x7f])""",
        r"""\s+""",
    ]
)
# For the `regex` module, \s / \S are spelled as the Unicode White_Space property they mean in
# the Rust regex engine (the `regex` module's \s would also take U+001C..U+001F).
_PY_PAT_STR = _PAT_STR.replace(r"\s", r"\p{White_Space}").replace(r"\S", r"\P{White_Space}")

_MAGIC = b"CAVBPE01"
_HEADER = struct.Struct("<8s32s32sIII")  # magic, vocab sha256, body sha256, n, slots, keys_len
_CACHE_NAME = "o200k_base.rankcache"


def vocab_path() -> Path:
    return Path(__file__).with_name("data") / "o200k_base.tiktoken"


class VocabularyError(RuntimeError):
    pass


def load_vocab_ranks() -> list[bytes]:
    """Token bytes by rank, from the packaged vocabulary, sha256-checked."""
    import base64

    raw = vocab_path().read_bytes()
    if hashlib.sha256(raw).hexdigest() != VOCAB_SHA256:
        raise VocabularyError("o200k_base vocabulary does not match its sha256")
    tokens: list[bytes] = []
    for n, line in enumerate(raw.splitlines()):
        tok, rank = line.split()
        if int(rank) != n:
            raise VocabularyError("o200k_base vocabulary ranks are not dense")
        tokens.append(base64.b64decode(tok))
    return tokens


def build_rank_table(tokens: list[bytes]) -> bytes:
    """Serialise the rank cache: header, offsets (n+1 u32), hash slots (u32, rank+1 or 0), keys."""
    import array

    n = len(tokens)
    slots = 1
    while slots < 2 * n:
        slots <<= 1
    mask = slots - 1
    offsets = array.array("I", [0]) * (n + 1)
    pos = 0
    for r, tok in enumerate(tokens):
        offsets[r] = pos
        pos += len(tok)
    offsets[n] = pos
    table = array.array("I", [0]) * slots
    crc = zlib.crc32
    for r, tok in enumerate(tokens):
        i = crc(tok) & mask
        while table[i]:
            i = (i + 1) & mask
        table[i] = r + 1
    keys = b"".join(tokens)
    body = offsets.tobytes() + table.tobytes() + keys
    header = _HEADER.pack(
        _MAGIC, bytes.fromhex(VOCAB_SHA256), hashlib.sha256(body).digest(), n, slots, len(keys)
    )
    return header + body


class RankTable:
    """Rank lookups over a rank-cache blob (bytes or mmap)."""

    def __init__(self, blob) -> None:
        magic, vocab_sha, body_sha, n, slots, keys_len = _HEADER.unpack_from(blob, 0)
        if magic != _MAGIC or vocab_sha.hex() != VOCAB_SHA256:
            raise VocabularyError("rank cache is for another vocabulary or format")
        h = _HEADER.size
        o_end = h + 4 * (n + 1)
        t_end = o_end + 4 * slots
        if len(blob) != t_end + keys_len or slots & (slots - 1):
            raise VocabularyError("rank cache has the wrong size")
        view = memoryview(blob)
        if hashlib.sha256(view[h:]).digest() != body_sha:
            raise VocabularyError("rank cache is corrupt")
        self._blob = blob
        self.n = n
        self._offsets = view[h:o_end].cast("I")
        self._table = view[o_end:t_end].cast("I")
        self._keys_at = t_end
        self._mask = slots - 1

    def rank(self, b: bytes) -> int | None:
        table, mask = self._table, self._mask
        i = zlib.crc32(b) & mask
        offsets, blob, base = self._offsets, self._blob, self._keys_at
        while True:
            e = table[i]
            if not e:
                return None
            r = e - 1
            if blob[base + offsets[r] : base + offsets[r + 1]] == b:
                return r
            i = (i + 1) & mask

    def tokens(self) -> list[bytes]:
        offsets, blob, base = self._offsets, self._blob, self._keys_at
        return [bytes(blob[base + offsets[r] : base + offsets[r + 1]]) for r in range(self.n)]


def _cache_usable(path: Path) -> bool:
    try:
        st = path.lstat()
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode):
        return False
    if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        return False
    return not st.st_mode & 0o022


def load_rank_table(cache_dir: Path | None) -> RankTable:
    """The rank table from ``cache_dir``'s rank cache, building (and writing) it if needed."""
    if cache_dir is not None:
        path = cache_dir / _CACHE_NAME
        if _cache_usable(path):
            try:
                with open(path, "rb") as f:
                    mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                return RankTable(mm)
            except (OSError, ValueError, VocabularyError, struct.error):
                pass  # rebuild below
    blob = build_rank_table(load_vocab_ranks())
    if cache_dir is not None:
        _write_cache(cache_dir, blob)
    return RankTable(blob)


def _write_cache(cache_dir: Path, blob: bytes) -> None:
    """Atomically write the cache (0600). Failure only costs the next cold start."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".rankcache.", dir=cache_dir)
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, cache_dir / _CACHE_NAME)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


class Counter:
    """Counts tokens of byte strings. ``name`` is the ``token_count_basis`` of the report."""

    name = APPROX_NAME

    def count(self, data: bytes) -> int:
        return approx_count(data)


def approx_count(data: bytes) -> int:
    if not data:
        return 0
    return max(1, len(gotext.decode(data)) // 4)


class O200kCounter(Counter):
    name = VOCAB_NAME

    def __init__(self, cache_dir: Path | None = None) -> None:
        self._cache_dir = cache_dir
        self._table: RankTable | None = None
        self._pattern = None
        self._encoding = None
        self._memo: dict[str, int] = {}

    # -- loading

    def _rank_table(self) -> RankTable:
        if self._table is None:
            self._table = load_rank_table(self._cache_dir)
        return self._table

    def _split(self):
        if self._pattern is None:
            import regex

            self._pattern = regex.compile(_PY_PAT_STR)
        return self._pattern

    def encoding(self):
        """tiktoken's encoder for o200k_base, built offline from the rank cache."""
        if self._encoding is None:
            import tiktoken

            tokens = self._rank_table().tokens()
            self._encoding = tiktoken.Encoding(
                VOCAB_NAME,
                pat_str=_PAT_STR,
                mergeable_ranks={tok: r for r, tok in enumerate(tokens)},
                special_tokens={},
            )
        return self._encoding

    def load(self) -> None:
        """Load what counting needs; raises if the vocabulary is unusable."""
        self._rank_table()

    # -- counting

    def count(self, data: bytes) -> int:
        if not data:
            return 0
        text = gotext.decode(data)
        if b"\x7f" in data:
            # A run of DEL is one cut, as a single DEL is. Collapsing it matters to tiktoken:
            # its scanner counts every position where nothing matches toward one backtrack
            # limit per search, and ~150k DEL in a row make it panic.
            text = _DEL_RUN.sub("\x7f", text)
        if (self._encoding is not None or len(data) >= LARGE_INPUT) and not _long_blank_run(text):
            try:
                return len(self.encoding().encode_ordinary(text))
            except BaseException as exc:  # pyo3's PanicException is not an Exception
                if type(exc).__name__ != "PanicException":
                    raise
        return self.count_small(text)

    def count_small(self, text: str) -> int:
        table = self._rank_table()
        rank = table.rank
        memo = self._memo
        total = 0
        for piece in self._split().findall(text):
            n = memo.get(piece)
            if n is None:
                b = piece.encode()
                if rank(b) is not None:
                    n = 1
                elif len(b) > LONG_PIECE:
                    n = self._long_piece_count(b)
                else:
                    n = _merge_count(b, rank)
                if len(memo) < 65536:
                    memo[piece] = n
            total += n
        return total


    def _long_piece_count(self, piece: bytes) -> int:
        """Merging is quadratic in Python; long pieces (a minified blob, a run of one letter)
        go to the encoder's byte-pair merge for that single piece."""
        encoding = self.encoding()
        single = getattr(encoding, "_encode_single_piece", None)
        if single is None:
            return _merge_count(piece, self._rank_table().rank)
        return len(single(piece))


_DEL_RUN = re.compile("\x7f{2,}")

# tiktoken's splitter recurses once per character of a run of non-newline whitespace: at ~1M
# characters it overflows the stack and panics (printing a Rust backtrace to stderr). A text
# holding a run of _BLANK_RUN or more is split by the Python path instead (same pieces).
_BLANK_RUN = 32768
_BLANK = re.compile(r"[^\S\r\n]+")


def _long_blank_run(text: str) -> bool:
    """Whether ``text`` may hold a run of >= _BLANK_RUN non-newline whitespace characters
    (runs of half that length may also answer True). Linear: such a run covers a whole
    window [p, p + half) for some p that is a multiple of half."""
    half = _BLANK_RUN // 2
    for p in range(0, len(text) - half + 1, half):
        m = _BLANK.match(text, p, p + half)
        if m is not None and m.end() - p == half:
            return True
    return False


def _merge_count(piece: bytes, rank) -> int:
    """Number of tokens tiktoken's byte-pair merge produces for ``piece`` (not in the vocab)."""
    big = 1 << 62
    n = len(piece)
    if n == 1:
        return 1
    # parts[i] = [start, rank of piece[start:start of part i+2]]
    starts = list(range(n + 1))
    ranks = [big] * (n + 1)
    for i in range(n - 1):
        r = rank(piece[i : i + 2])
        if r is not None:
            ranks[i] = r

    def window_rank(i: int) -> int:
        if i + 3 < len(starts):
            r = rank(piece[starts[i] : starts[i + 3]])
            return big if r is None else r
        return big

    while len(starts) > 1:
        best = big
        bi = -1
        for i in range(len(ranks) - 1):
            if ranks[i] < best:
                best, bi = ranks[i], i
        if bi < 0:
            break
        ranks[bi] = window_rank(bi)
        if bi > 0:
            ranks[bi - 1] = window_rank(bi - 1)
        del starts[bi + 1]
        del ranks[bi + 1]
    return len(starts) - 1


def make_counter(cache_dir: Path | None) -> Counter:
    """The o200k_base counter, or the approximation if the vocabulary cannot be loaded."""
    counter = O200kCounter(cache_dir)
    try:
        counter.load()
    except Exception:
        return Counter()
    return counter
