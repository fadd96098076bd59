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

Both give identical counts (a property test compares them), whatever versions of ``regex``
and tiktoken are installed: the character classes of the split pattern are pinned to shipped
tables (``_unicode_classes``; see "The character classes, pinned" below). If the vocabulary
cannot be loaded the engine counts ``approx-chars/4``: ``max(1, runes // 4)``, 0 for empty input.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import re
import stat
import struct
import sys
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

# -- The character classes, pinned.
#
# \p{L}, \p{N}, \s and (?i:...) mean whatever the Unicode tables of the engine running the
# pattern say, and those move with the installed versions: `regex` 2026.x (Unicode 17) takes
# U+3D000 for a letter, tiktoken 0.14's Rust regex (Unicode 16) does not, so "\U0003d000/A" was
# 3 tokens in Python and 4 in tiktoken. The classes are therefore pinned: `_unicode_classes`
# ships each class of the pattern as explicit code point ranges (probed from tiktoken's encoder
# by tools/gen_unicode_classes.py; a test checks them against the installed tiktoken), and
#
# * tiktoken's encoder runs `explicit_pattern(_PAT_STR)`, every class spelled out as ranges
#   (its Rust regex compiles a class of ranges as fast as a \p{..}: same speed, ~10 ms more
#   to build);
# * the Python path keeps `regex`'s own \p{..} classes (an explicit class of hundreds of
#   ranges is scanned linearly by `regex`: 20x slower) but only on characters whose classes
#   it has checked against the shipped tables (`_Agreement`): ASCII once per process, other
#   characters once each, as they first appear. A text holding a character where `regex`
#   disagrees is split with each such character replaced by a stand-in of the same shipped
#   classes (on which `regex` agrees); the pieces are then cut from the original text.
#
# Both paths thus split every text identically whatever `regex` or tiktoken is installed.
# (`\s` is White_Space in both: `regex`'s own \s would also take U+001C..U+001F.)

# Class name in `_unicode_classes` -> how the pattern spells it (also how it is probed).
CLASS_SPELLINGS = {
    "UPPER": r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]",
    "LOWER": r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]",
    "LETTER_OR_NUMBER": r"[\p{L}\p{N}]",
    "NUMBER": r"\p{N}",
    "SPACE": r"\s",
    **{f"FOLD_{c.upper()}": f"(?i:{c})" for c in "strevmld"},
}
_CONTRACTIONS = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"


def probe_tiktoken_classes() -> dict[str, list[tuple[int, int]]]:
    """Each class of CLASS_SPELLINGS as the installed tiktoken's encoder reads it: inclusive
    code point ranges. Probed with a byte-level encoder whose pattern is the class alone: the
    pieces of the text of all scalar values are exactly its members."""
    import tiktoken

    ranks = {bytes([b]): b for b in range(256)}
    every = "".join(map(chr, range(0xD800))) + "".join(map(chr, range(0xE000, 0x110000)))
    out: dict[str, list[tuple[int, int]]] = {}
    for name, spelling in CLASS_SPELLINGS.items():
        enc = tiktoken.Encoding(f"probe-{name}", pat_str=spelling, mergeable_ranks=ranks,
                                special_tokens={})
        members = sorted(set(map(ord, bytes(enc.encode_ordinary(every)).decode())))
        ranges: list[tuple[int, int]] = []
        for c in members:
            if ranges and ranges[-1][1] == c - 1:
                ranges[-1] = (ranges[-1][0], c)
            else:
                ranges.append((c, c))
        out[name] = ranges
    return out


def _flat(name: str):
    """A shipped class as a flat sequence first, last, first, last, ... (inclusive ranges)."""
    import array
    import base64

    from . import _unicode_classes as uc

    flat = array.array("I")
    flat.frombytes(base64.b64decode(getattr(uc, name)))
    if sys.byteorder == "big":
        flat.byteswap()
    return flat


def _ranges(name: str) -> list[tuple[int, int]]:
    flat = _flat(name)
    return list(zip(flat[::2], flat[1::2]))


def _esc(c: int) -> str:
    # Escapes both engines read alike (`regex` and Rust's regex-syntax).
    if c < 0x80:
        return f"\\x{c:02x}"
    return f"\\u{c:04x}" if c < 0x10000 else f"\\U{c:08x}"


def _class_body(ranges, drop: frozenset[int] = frozenset()) -> str:
    parts = []
    for lo, hi in ranges:
        for c in sorted(d for d in drop if lo <= d <= hi):  # split the range around c
            if lo < c:
                parts.append((lo, c - 1))
            lo = c + 1
        if lo <= hi:
            parts.append((lo, hi))
    return "".join(_esc(lo) if lo == hi else f"{_esc(lo)}-{_esc(hi)}" for lo, hi in parts)


_explicit_cache: dict[str, str] = {}


def explicit_pattern(pat: str) -> str:
    """``pat`` (the o200k pattern, with or without the DEL rule) with every Unicode class and
    case-insensitive group replaced by the shipped explicit classes."""
    done = _explicit_cache.get(pat)
    if done is not None:
        return done

    def body(name: str) -> str:
        return _class_body(_ranges(name))

    space = _ranges("SPACE")
    space_body = _class_body(space)
    out = pat
    for spelled, explicit in [
        (_CONTRACTIONS, _contractions()),
        (CLASS_SPELLINGS["UPPER"], f"[{body('UPPER')}]"),
        (CLASS_SPELLINGS["LOWER"], f"[{body('LOWER')}]"),
        (r"\p{L}\p{N}", body("LETTER_OR_NUMBER")),  # inside a negated class
        (r"\p{N}", f"[{body('NUMBER')}]"),
        (r"[^\S\r\n]", f"[{_class_body(space, frozenset((10, 13)))}]"),
        (r"(?!\S)", f"(?![^{space_body}])"),
        (r"[^\s", f"[^{space_body}"),
        (r"\s+", f"[{space_body}]+"),
    ]:
        out = out.replace(spelled, explicit)
    if re.search(r"\\[pPsS]|\(\?i", out):
        raise ValueError("pattern has a class explicit_pattern does not know")
    _explicit_cache[pat] = out
    return out


def _contractions() -> str:
    fold = {c: f"[{_class_body(_ranges('FOLD_' + c.upper()))}]"
            for c in "strevmld"}
    alts = ("s", "t", "re", "ve", "m", "ll", "d")
    return "(?:'(?:" + "|".join("".join(fold[c] for c in alt) for alt in alts) + "))"


def python_pattern() -> str:
    """What the Python path compiles: `regex`'s own property classes (checked per character
    by `_Agreement`), the case-insensitive group pinned, whitespace spelled White_Space."""
    return (
        _PAT_STR.replace(_CONTRACTIONS, _contractions())
        .replace(r"\s", r"\p{White_Space}")
        .replace(r"\S", r"\P{White_Space}")
    )


# The property classes `python_pattern` leaves to `regex`, spelled for it.
_PY_PROPERTIES = {
    name: CLASS_SPELLINGS[name].replace(r"\s", r"\p{White_Space}")
    for name in ("UPPER", "LOWER", "LETTER_OR_NUMBER", "NUMBER", "SPACE")
}
# Characters the pattern names literally: a stand-in must never be one of them.
_LITERALS = frozenset(" \r\n/'\x7f")
# Stand-in candidates, one per usual class combination (checked like any other character).
_SEEDS = "".join(map(chr, range(128))) + "\u4e2d\u0301\u01c5\u02b0\u00aa\u00b2\u2160\u3000\u017f"
_EXPLICIT = object()  # "split this text with the explicit pattern"


class _Agreement:
    """Which characters `regex`'s property classes put where the shipped tables do.

    Process-wide; grows by the characters seen. Sets and dicts are only ever added to (atomic
    under the GIL), so counters on several threads at worst repeat a check."""

    def __init__(self) -> None:
        import bisect

        import regex

        self._bisect = bisect.bisect_right
        self._tables = {}
        for name in CLASS_SPELLINGS:
            flat = _flat(name)
            self._tables[name] = (flat[::2].tolist(), flat[1::2].tolist())
        self._native = {
            name: regex.compile(spelling, flags=regex.V0)
            for name, spelling in _PY_PROPERTIES.items()
        }
        self._non_ascii = regex.compile(r"[^\x00-\x7f]+", flags=regex.V0)
        self.agree: set[str] = set()
        self.subst: dict[int, str] = {}  # disagreeing character -> stand-in
        self.no_stand_in: set[str] = set()
        self.stand_in: dict[tuple[bool, ...], str] = {}
        self.check(_SEEDS)
        for ch in _SEEDS:
            if ch in self.agree and ch not in _LITERALS:
                self.stand_in.setdefault(self.signature(ch), ch)
        self.ascii_ok = all(chr(c) in self.agree for c in range(128))

    def _member(self, name: str, c: int) -> bool:
        los, his = self._tables[name]
        i = self._bisect(los, c) - 1
        return i >= 0 and c <= his[i]

    def signature(self, ch: str) -> tuple[bool, ...]:
        c = ord(ch)
        return tuple(self._member(name, c) for name in CLASS_SPELLINGS)

    def check(self, chars: str) -> None:
        """Classify ``chars`` (distinct, not yet checked)."""
        bisect = self._bisect
        differ: set[str] = set()
        for name, pattern in self._native.items():
            native = set(pattern.findall(chars))
            los, his = self._tables[name]
            for ch in chars:
                c = ord(ch)
                i = bisect(los, c) - 1
                if (i >= 0 and c <= his[i]) != (ch in native):
                    differ.add(ch)
        for ch in chars:
            if ch not in differ:
                self.agree.add(ch)
                continue
            rep = None if ch in _LITERALS else self._find_stand_in(self.signature(ch))
            if rep is None:
                self.no_stand_in.add(ch)
            else:
                self.subst[ord(ch)] = rep

    def _find_stand_in(self, sig: tuple[bool, ...]) -> str | None:
        rep = self.stand_in.get(sig)
        if rep is None:
            for ch in list(self.agree):
                if ch not in _LITERALS and self.signature(ch) == sig:
                    rep = self.stand_in.setdefault(sig, ch)
                    break
        return rep

    def plan(self, text: str):
        """None: split ``text`` as it is. A translate table: split ``text.translate(table)``
        and cut the pieces from ``text``. _EXPLICIT: split with the explicit pattern."""
        if self.ascii_ok and text.isascii():
            return None
        # (`regex` gathers the non-ASCII runs 4x faster than set() hashes every character)
        chars = set("".join(self._non_ascii.findall(text)) if self.ascii_ok else text)
        agree = self.agree
        if chars <= agree:
            return None
        new = chars - agree
        unseen = [ch for ch in new if ord(ch) not in self.subst and ch not in self.no_stand_in]
        if unseen:
            self.check("".join(unseen))
        new -= agree
        if not new:
            return None
        if not new.isdisjoint(self.no_stand_in):
            return _EXPLICIT
        return self.subst


_agreement: _Agreement | None = None


def _get_agreement() -> _Agreement:
    global _agreement
    if _agreement is None:
        _agreement = _Agreement()
    return _agreement


# The body is in native byte order: a cache written on a machine of the other order (a shared
# home directory) must not validate, or every rank would be read wrong.
_MAGIC = b"CAVBPE01" if sys.byteorder == "little" else b"CAVBPEB1"
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
        self._agreement: _Agreement | None = None
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

            self._agreement = _get_agreement()
            self._pattern = regex.compile(python_pattern(), flags=regex.V0)
        return self._pattern

    def _pieces(self, text: str) -> list[str]:
        """The pre-split pieces of ``text``, as tiktoken's encoder (explicit pattern) cuts it."""
        pattern = self._split()
        plan = self._agreement.plan(text)
        if plan is None:
            return pattern.findall(text)
        if plan is _EXPLICIT:  # a character `regex` misreads and no stand-in: slow but exact
            return _explicit_python_pattern().findall(text)
        return [text[m.start() : m.end()] for m in pattern.finditer(text.translate(plan))]

    def encoding(self):
        """tiktoken's encoder for o200k_base, built offline from the rank cache."""
        if self._encoding is None:
            import tiktoken

            tokens = self._rank_table().tokens()
            self._encoding = tiktoken.Encoding(
                VOCAB_NAME,
                pat_str=explicit_pattern(_PAT_STR),
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
        for piece in self._pieces(text):
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


_explicit_compiled = None


def _explicit_python_pattern():
    global _explicit_compiled
    if _explicit_compiled is None:
        import regex

        _explicit_compiled = regex.compile(explicit_pattern(_PAT_STR), flags=regex.V0)
    return _explicit_compiled


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
