"""Offline token counting: OpenAI ``o200k_base``, ``encode_ordinary`` semantics (spec §5).

The vocabulary ships inside the package (``data/o200k_base.tiktoken``) and is checked against
its sha256 when it is read; nothing is ever downloaded, whatever ``TIKTOKEN_CACHE_DIR`` says.

Cold start is the hard part: building tiktoken's Rust encoder from 200k ranks costs ~0.25 s
(and ~100 MiB), more than everything else a small ``compress`` does. So counting is done in
Python, exactly as the encoder would:

* the text is cut into the o200k pre-split pieces (the pattern as the reference applies it:
  U+007F is in no piece, see ``_PAT_STR``) by the stdlib's ``re`` (`_Splitter`), a chunk of
  at most a MiB at a time (`_chunks`);
* each *distinct* piece of a chunk is counted once, through a bounded memo shared by all the
  counts of a counter (catalogs and logs repeat their pieces massively, and the engine's
  second count, of the output, is made of the input's pieces): a piece that is a token costs
  one rank lookup, any other its byte-pair merge. Rank lookups go to an open-addressing hash
  table in a memory-mapped *rank cache* file, written once next to the recovery store and
  validated on every load (format, vocabulary sha256, a CRC-32 of its own body against
  accidental damage, owned by us and not writable by others); loading it costs about 2 ms;
* a text with many repeated quoted stretches (JSON) is first cut into *segments* where no
  piece crosses (see "Segments"); each distinct segment is counted once, through a memo shared
  like the piece memo: a compressor's output repeats most of its input's segments, so its
  count splits only what changed. The new segments of a chunk are split in one batch;
* tiktoken's encoder (built from the same cache) takes over only where it wins: a text made
  of new non-token pieces (random bytes, base64, CJK: see MERGE_BUDGET), and pieces over
  LONG_PIECE bytes (Python's merge is quadratic).

Measured (benchmarks/bench_speed.py --crossover), the Python path costs about what the
encoder's own count does on catalog JSON, logs, JSON arrays and prose (within 10% up to
58 MiB, without the build), so there is no size threshold.

The two give identical counts (property tests compare them), whatever versions of Python,
``regex`` and tiktoken are installed: the character classes of the split pattern are pinned
to shipped tables (``_unicode_classes``; see "The character classes, pinned" below). If the
vocabulary cannot be loaded the engine counts ``approx-chars/4``: ``max(1, runes // 4)``, 0 for
empty input.
"""

from __future__ import annotations

# Imports are cheap ones: every `compress` counts. hashlib (OpenSSL), tempfile and pathlib
# are loaded only to build the rank cache, once per cache directory.
import mmap
import os
import re
import stat
import struct
import sys
import zlib
from _thread import allocate_lock

TYPE_CHECKING = False  # typing costs a few ms to import
if TYPE_CHECKING:
    from pathlib import Path

from . import gotext

VOCAB_NAME = "o200k_base"
VOCAB_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
APPROX_NAME = "approx-chars/4"

# `count` builds the encoder once it has merged more than MERGE_BUDGET bytes in Python, at
# least one byte per MERGE_DENSITY characters counted: the input is mostly new pieces that
# are not tokens (random bytes, base64, CJK), which tiktoken's byte-pair merge takes 10x
# faster than Python. (Catalogs, logs and JSON merge under one byte per 100 characters.)
MERGE_BUDGET = 32 * 1024
MERGE_DENSITY = 32
# Binary input (invalid UTF-8 decodes to U+FFFD, one per byte) is all such pieces: a text of
# at least BINARY_MIN characters, one in BINARY_SHARE or more of them U+FFFD, goes to the
# encoder from its first chunk instead of after MERGE_BUDGET bytes merged in Python (those
# cost about as much as building the encoder).
BINARY_MIN = 1 << 16
BINARY_SHARE = 16
# Pre-split pieces longer than this are merged by the encoder even for small inputs.
LONG_PIECE = 256
# The piece memo (piece -> token count), shared by every count of one counter (the engine
# counts the input, then an output made mostly of the same pieces): at most MEMO_ENTRIES
# pieces of at most MEMO_PIECE characters, ~25 MiB at worst; once full it stops growing.
MEMO_ENTRIES = 1 << 17
MEMO_PIECE = 48
# The Python path splits a text CHUNK characters at a time (a cut where no piece can cross,
# see `_chunks`), so its list of pieces never holds more than one chunk's worth.
CHUNK = 1 << 20
FIRST_CHUNK = 1 << 15
# A text with fewer than one non-ASCII run per SPARSE characters is split run by run.
SPARSE = 256

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
# * the Python path (`_Splitter`) runs `re` on the same pattern with each class cut down to
#   its ASCII members plus one representative character per combination of classes met so
#   far; other characters are replaced by their combination's representative before the
#   split, and the pieces are cut from the original text.
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


# The ASCII members of each class, as inclusive ranges: the splitter's pattern starts from
# these alone (without decoding the shipped tables); a test checks them against the tables.
ASCII_CLASSES = {
    "UPPER": ((0x41, 0x5A),),
    "LOWER": ((0x61, 0x7A),),
    "LETTER_OR_NUMBER": ((0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A)),
    "NUMBER": ((0x30, 0x39),),
    "SPACE": ((0x09, 0x0D), (0x20, 0x20)),
    **{f"FOLD_{c.upper()}": ((ord(c.upper()),) * 2, (ord(c),) * 2) for c in "strevmld"},
}


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
    if done is None:
        done = _explicit_cache[pat] = _spell(pat, _ranges)
    return done


def _spell(pat: str, ranges_of) -> str:
    """``pat`` with each class spelled as the ranges ``ranges_of(class name)``."""

    def body(name: str) -> str:
        return _class_body(ranges_of(name))

    space = ranges_of("SPACE")
    space_body = _class_body(space)
    fold = {c: f"[{body('FOLD_' + c.upper())}]" for c in "strevmld"}
    alts = ("s", "t", "re", "ve", "m", "ll", "d")
    contractions = "(?:'(?:" + "|".join("".join(fold[c] for c in alt) for alt in alts) + "))"
    out = pat
    for spelled, explicit in [
        (_CONTRACTIONS, contractions),
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
    return out


# Characters the pattern names literally (never translated: they are ASCII).
_LITERALS = frozenset(" \r\n/'\x7f")
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")


class _Splitter:
    """Cuts texts into the pieces of ``_PAT_STR`` with the stdlib's `re`, exactly as
    tiktoken's encoder running ``explicit_pattern(_PAT_STR)`` does.

    A piece boundary depends only on which classes of the pattern each character is in (its
    *signature*) and on the literal characters, which are ASCII. So the pattern is compiled
    with every class cut down to its ASCII members plus one *representative* per signature
    met so far (the first character seen with it), and a text with non-ASCII characters is
    split with each of them replaced by its signature's representative; the pieces are then
    cut from the original text at the same places. Small classes are what makes `re` fast
    (2-3x `regex` on \\p{..}; an explicit class of hundreds of ranges would be far slower),
    and the outcome depends on no installed Unicode database: only on the shipped tables.

    Process-wide; grows with the signatures seen (a few dozen exist), under a lock; splits
    run unlocked (see `learn`)."""

    def __init__(self) -> None:
        self._tables = None  # class name -> (firsts, lasts), for `signature` (non-ASCII only)
        self._ascii = {name: list(ranges) for name, ranges in ASCII_CLASSES.items()}
        self.rep: dict[tuple[bool, ...], str] = {}  # signature -> representative
        # code point -> its representative; ASCII maps to itself (spelled out: str.translate
        # is far slower on a missing key than on a hit)
        self.table: dict[int, str] = {c: chr(c) for c in range(128)}
        self._lock = allocate_lock()
        self.pattern = self._compile()

    def signature(self, ch: str) -> tuple[bool, ...]:
        from bisect import bisect_right as bisect

        if self._tables is None:
            tables = {}
            for name in CLASS_SPELLINGS:
                flat = _flat(name)
                tables[name] = (flat[::2].tolist(), flat[1::2].tolist())
            self._tables = tables
        c = ord(ch)
        out = []
        for los, his in self._tables.values():
            i = bisect(los, c) - 1
            out.append(i >= 0 and c <= his[i])
        return tuple(out)

    def _compile(self):
        names = list(CLASS_SPELLINGS)
        reps = list(self.rep.items())

        def ranges_of(name: str):
            k = names.index(name)
            extra = [(ord(r), ord(r)) for sig, r in reps if sig[k]]
            return sorted(self._ascii[name] + extra)

        # One more alternative, `\x7f`: it matches only where no other can (every other
        # character starts a piece), so the pieces are the same, and each DEL is a piece of its
        # own: a text's pieces tile it, and a DEL marks where a text of a DEL-joined batch ends
        # (see `O200kCounter._count_each`). `split` drops them unless asked for them.
        return re.compile(_spell(_PAT_STR, ranges_of) + "|\x7f")

    def learn(self, chars) -> None:
        """Give each of ``chars`` (non-ASCII) its representative. A character enters the
        table only once a pattern knowing its representative is in place (and patterns only
        ever gain representatives), so a concurrent `split` never pairs the two wrongly."""
        with self._lock:
            entries = {}
            grown = False
            for ch in chars:
                sig = self.signature(ch)
                rep = self.rep.get(sig)
                if rep is None:
                    rep = self.rep[sig] = ch
                    grown = True
                entries[ord(ch)] = rep
            if grown:
                self.pattern = self._compile()
            self.table.update(entries)

    def split(self, text: str, marked: bool = False) -> list[str]:
        """The pieces of ``text``; with ``marked``, each DEL is a piece too (see `_compile`)."""
        pieces = self._split(text)
        if not marked and "\x7f" in text:
            return [p for p in pieces if p != "\x7f"]
        return pieces

    def _split(self, text: str) -> list[str]:
        pattern = self.pattern
        if text.isascii():
            return pattern.findall(text)
        runs = _NON_ASCII.findall(text)
        table = self.table
        new = [ch for ch in set("".join(runs)) if ord(ch) not in table]
        if new:
            self.learn(new)
        pattern = self.pattern  # read after the table: it knows every representative there
        if len(runs) * SPARSE > len(text):
            return self._split_translated(text, pattern)
        spans = [m.span() for m in _NON_ASCII.finditer(text)]
        # A few non-ASCII runs (a catalog with some accented words): the ASCII stretches
        # between them are split as they are; only the stretch around each run, from a cut
        # before it to a cut after it (see `_CUT`), is translated.
        out: list[str] = []
        pos = 0
        n = len(text)
        i = 0
        while i < len(spans):
            a, b = spans[i]
            lo = pos
            for m in _CUT.finditer(text, max(pos, a - 4096), a):
                lo = m.end()
            m = _CUT.search(text, b)
            hi = n if m is None else m.end()
            while i + 1 < len(spans) and spans[i + 1][0] < hi:
                i += 1  # a run inside the stretch (it ends before hi: text[hi - 1] is ASCII)
            i += 1
            if lo > pos:
                out += pattern.findall(text, pos, lo)
            out += self._split_translated(text[lo:hi], pattern)
            pos = hi
        if pos < n:
            out += pattern.findall(text, pos)
        return out

    def _split_translated(self, text: str, pattern) -> list[str]:
        translated = text.translate(self.table)
        # Every character is in exactly one piece (DEL too): cut at the running lengths.
        from itertools import accumulate

        ends = list(accumulate(map(len, pattern.findall(translated))))
        return list(map(text.__getitem__, map(slice, [0] + ends[:-1], ends)))


_splitter: _Splitter | None = None


def _get_splitter() -> _Splitter:
    global _splitter
    if _splitter is None:
        _splitter = _Splitter()
    return _splitter


# The body is in native byte order: a cache written on a machine of the other order (a shared
# home directory) must not validate, or every rank would be read wrong.
_MAGIC = b"CAVBPE02" if sys.byteorder == "little" else b"CAVBPEB2"
_HEADER = struct.Struct("<8s32sIIII")  # magic, vocab sha256, body CRC-32, n, slots, keys_len
_CACHE_NAME = "o200k_base.rankcache"


def vocab_path() -> Path:
    from pathlib import Path

    return Path(__file__).with_name("data") / "o200k_base.tiktoken"


class VocabularyError(RuntimeError):
    pass


def load_vocab_ranks() -> list[bytes]:
    """Token bytes by rank, from the packaged vocabulary, sha256-checked."""
    import base64
    import hashlib

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
        _MAGIC, bytes.fromhex(VOCAB_SHA256), zlib.crc32(body), n, slots, len(keys)
    )
    return header + body


class RankTable:
    """Rank lookups over a rank-cache blob (bytes or mmap)."""

    def __init__(self, blob) -> None:
        magic, vocab_sha, body_crc, n, slots, keys_len = _HEADER.unpack_from(blob, 0)
        if magic != _MAGIC or vocab_sha.hex() != VOCAB_SHA256:
            raise VocabularyError("rank cache is for another vocabulary or format")
        h = _HEADER.size
        o_end = h + 4 * (n + 1)
        t_end = o_end + 4 * slots
        if len(blob) != t_end + keys_len or slots & (slots - 1):
            raise VocabularyError("rank cache has the wrong size")
        view = memoryview(blob)
        if zlib.crc32(view[h:]) != body_crc:
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


def _cache_usable(path) -> bool:
    try:
        st = os.lstat(path)
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
        path = os.path.join(cache_dir, _CACHE_NAME)
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
    import tempfile

    try:
        fd, tmp = tempfile.mkstemp(prefix=".rankcache.", dir=cache_dir)
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, os.path.join(cache_dir, _CACHE_NAME))
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
        self._encoding = None
        self._memo: dict[str, int] = {}
        self._merged = 0  # bytes merged in Python by `count` (see MERGE_BUDGET)
        self._seen = 0  # characters counted by `count` on the Python path
        # The segment memo (segment -> token count, see `_SEGMENT`) and the sentence memo:
        # together at most SEG_MEMO_CHARS characters; once full they stop growing.
        self._segs: dict[str, int] = {}
        self._sentences: dict[str, int] = {}  # sentence -> token count (`_count_sentences`)
        self._seg_room = SEG_MEMO_CHARS

    # -- loading

    def _rank_table(self) -> RankTable:
        if self._table is None:
            self._table = load_rank_table(self._cache_dir)
        return self._table

    def _pieces(self, text: str) -> list[str]:
        """The pre-split pieces of ``text``, as tiktoken's encoder (explicit pattern) cuts it."""
        return _get_splitter().split(text)

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
        if (self._encoding is None and len(text) >= BINARY_MIN
                and text.count("\ufffd") * BINARY_SHARE >= len(text)):
            self.encoding()
        total = 0
        segments = [True]
        for chunk in _chunks(text):
            n = self._encoder_count(chunk) if self._encoding is not None else None
            total += self._count_chunk(chunk, True, True, segments) if n is None else n
        return total

    def _encoder_count(self, text: str) -> int | None:
        if _long_blank_run(text):
            return None
        try:
            return len(self._encoding.encode_ordinary(text))
        except BaseException as exc:  # pyo3's PanicException is not an Exception
            if type(exc).__name__ != "PanicException":
                raise
        return None

    def count_small(self, text: str, memo: bool = True) -> int:
        """The count of ``text`` (DEL runs already collapsed) on the Python path alone (the
        encoder only for pieces over LONG_PIECE bytes), through the memo unless ``memo`` is
        false. `count` is this, except that it turns to the encoder when that pays off."""
        total = 0
        segments = [memo]
        for chunk in _chunks(text):
            total += self._count_chunk(chunk, memo, False, segments)
        return total

    def _count_chunk(self, text: str, use_memo: bool, adaptive: bool,
                     segments: list[bool] | None = None) -> int:
        """The count of ``text``: segment by segment when that saves splitting (`_SEGMENT`:
        JSON that repeats itself, or repeats what was counted before), else piece by piece
        (`_count_pieces`). ``segments[0]``: whether to try segments; set false for the chunks
        after one that does not pay and is large (SEG_STICKY) or far from paying (a text that
        does not pay once will not later: a log, records of distinct values)."""
        if segments is None:
            segments = [use_memo]
        if segments[0] and "\x7f" not in text:
            parts = _SEGMENT.split(text)
            n = None
            if len(parts) >= SEG_MIN_PARTS:
                n = self._count_segments(parts, len(text), adaptive, segments)
            elif len(text) >= SEG_STICKY:
                segments[0] = False
            del parts
            if n is not None:
                return n
        return self._count_pieces(text, use_memo, adaptive)

    def _count_segments(self, parts: list[str], size: int, adaptive: bool,
                        segments: list[bool]) -> int | None:
        """The count of the text (``size`` characters) ``_SEGMENT.split`` cut into ``parts``:
        each distinct segment counted once (the segment memo, else `_count_sentences`), times
        the number of its occurrences. None when the new segments would cost more than the
        text piece by piece (a log with quotes, records of distinct values): splitting costs
        per character of new segments, and each new segment about SEG_COST more."""
        middle = _tally(parts[1:-1])
        segs = self._segs
        new = list(middle.keys() - segs.keys())
        cost = (sum(map(len, new)) + SEG_COST * len(new)) / size
        if cost > (SEG_SHARE if size >= SEG_STICKY else SEG_SHARE_SMALL):
            if size >= SEG_STICKY or cost > SEG_HOPELESS:
                segments[0] = False
            return None
        if adaptive:  # the whole text is counted (MERGE_DENSITY is against it)
            self._seen += size
        letters, openers = _LETTERS, _OPENERS
        texts = [("" if seg[0] in letters else '"') + seg + ('"' if seg[-1] in openers else "")
                 for seg in new]
        first, last = parts[0], parts[-1]
        texts.append(first + '"' if first[-1] in openers else first)
        texts.append(last if last[:1] in letters else '"' + last)
        counts = self._count_sentences(texts, adaptive)
        total = counts[-1] + counts[-2]
        del counts[-2:]
        room = self._seg_room - sum(map(len, new))
        if room >= 0:
            segs.update(zip(new, counts))
            self._seg_room = room
            found = segs
        else:  # the memo is full
            found = dict(zip(new, counts))
            found.update((seg, segs[seg]) for seg in middle.keys() - found.keys())
        from operator import mul

        return total + sum(map(mul, map(found.__getitem__, middle), middle.values()))

    def _count_sentences(self, texts: list[str], adaptive: bool) -> list[int]:
        """The count of each of ``texts`` (none empty), a long one sentence by sentence
        (`_SENTENCE`): descriptions share sentences, and a compressor that shortens one keeps
        some of them. Each distinct sentence is counted once and remembered (with the
        segments' room); everything new is counted in one batch (`_count_each`)."""
        long = [i for i, text in enumerate(texts) if len(text) >= SENTENCE_MIN]
        if not long:
            return self._count_each(texts, adaptive)
        sentences = self._sentences
        split = _SENTENCE.split
        plan = {}  # index of a long text -> its sentences
        batch = dict.fromkeys(texts)  # text or sentence -> its count (None: to count)
        for i in long:
            parts = split(texts[i])
            if len(parts) > 1:
                units = plan[i] = [parts[0]] + ["." + p for p in parts[1:]]
                batch.pop(texts[i], None)
                batch.update(dict.fromkeys(units))
        for unit in batch.keys() & sentences.keys():
            batch[unit] = sentences[unit]
        todo = [unit for unit, n in batch.items() if n is None]
        if todo:
            counts = self._count_each(todo, adaptive)
            batch.update(zip(todo, counts))
            room = self._seg_room
            for unit, n in zip(todo, counts):
                if len(unit) >= SENTENCE_KEEP and room >= len(unit):
                    sentences[unit] = n
                    room -= len(unit)
            self._seg_room = room
        out = list(map(batch.get, texts))
        for i, units in plan.items():
            out[i] = sum(map(batch.__getitem__, units))
        return out

    def _count_each(self, texts: list[str], adaptive: bool) -> list[int]:
        """The count of each of ``texts`` (DEL-free, none empty), each split on its own, from
        one split of their DEL-joined concatenation: no piece crosses a DEL (see `_PAT_STR`),
        and the splitter returns each DEL as a piece of its own when asked, where a text ends."""
        pieces = _get_splitter().split("\x7f".join(texts), marked=True)
        # A text's count is its number of pieces, plus n - 1 for each of its pieces of n != 1
        # tokens: those are rare (1-5% of a catalog's or a log's pieces), so only they are
        # looked up one by one; the rest is C (the DELs are found by `list.index`).
        memo = self._memo
        distinct = set(pieces)
        distinct.discard("\x7f")
        new = distinct.difference(memo)
        extra = self._new_piece_counts(new, adaptive) if new else {}
        get = memo.get
        odd = {p for p in distinct if get(p) != 1}  # None: a piece of `extra`
        ends = []
        index = pieces.index
        end = -1
        for _ in range(len(texts) - 1):
            end = index("\x7f", end + 1)
            ends.append(end)
        ends.append(len(pieces))
        counts = list(map(int.__sub__, ends, [0, *map((1).__add__, ends[:-1])]))
        if odd:
            from bisect import bisect_left
            from itertools import compress, count

            for i in compress(count(), map(odd.__contains__, pieces)):
                piece = pieces[i]
                n = get(piece)
                counts[bisect_left(ends, i)] += (extra[piece] if n is None else n) - 1
        return counts

    def _new_piece_counts(self, pieces, adaptive: bool) -> dict[str, int]:
        """Count each of ``pieces`` (none in the memo) into the memo while it has room and
        the piece is short (`_count_pieces` does the same, inline); the others are returned.
        ``adaptive``: as in `_count_pieces`, the chunk already in ``_seen``."""
        rank = self._rank_table().rank
        memo = self._memo
        room = MEMO_ENTRIES - len(memo)
        single = None
        out = {}
        for piece in pieces:
            b = piece.encode()
            if rank(b) is not None:
                n = 1
            elif single is not None:
                n = len(single(b))
            elif len(b) > LONG_PIECE:
                n = self._long_piece_count(b)
            else:
                n = _merge_count(b, rank)
                if adaptive:
                    self._merged += len(b)
                    if (self._merged > MERGE_BUDGET
                            and self._merged * MERGE_DENSITY > self._seen):
                        single = getattr(self.encoding(), "_encode_single_piece", None)
            if room > 0 and len(piece) <= MEMO_PIECE:
                memo[piece] = n
                room -= 1
            else:
                out[piece] = n
        return out

    def _count_pieces(self, text: str, use_memo: bool, adaptive: bool) -> int:
        """Split ``text`` and count each distinct piece once: a memo hit, else one rank
        lookup for a piece that is a token, else its byte-pair merge. ``adaptive``: once
        MERGE_BUDGET bytes were merged in Python (text of mostly new, non-token pieces:
        random bytes, base64, CJK), the encoder is built and merges the rest, and `count`
        hands it the following chunks."""
        pieces = self._pieces(text)
        if len(pieces) < 16:
            distinct: dict[str, int] = {}
            for piece in pieces:
                distinct[piece] = distinct.get(piece, 0) + 1
        else:
            distinct = _tally(pieces)  # C: ~10x faster than the loop above
        del pieces
        rank = self._rank_table().rank
        memo = self._memo if use_memo else {}
        get = memo.get
        room = MEMO_ENTRIES - len(memo) if use_memo else 0
        single = None
        total = 0
        for piece, k in distinct.items():
            n = get(piece)
            if n is None:
                b = piece.encode()
                if rank(b) is not None:
                    n = 1
                elif single is not None:
                    n = len(single(b))
                elif len(b) > LONG_PIECE:
                    n = self._long_piece_count(b)
                else:
                    n = _merge_count(b, rank)
                    if adaptive:
                        self._merged += len(b)
                        if (self._merged > MERGE_BUDGET
                                and self._merged * MERGE_DENSITY > self._seen + len(text)):
                            single = getattr(self.encoding(), "_encode_single_piece", None)
                if room > 0 and len(piece) <= MEMO_PIECE:
                    memo[piece] = n
                    room -= 1
            total += n * k
        if adaptive:
            self._seen += len(text)
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

# -- Segments.
#
# JSON repeats whole stretches (keys with their punctuation, "type":"string", enum values), and
# the output of a compressor repeats the input's strings (descriptions kept as they were). So
# a text with quotes is cut into *segments* at places where no piece crosses and where each
# side is split exactly as inside the whole text; the count of the text is then the sum of the
# counts of its segments, each distinct segment counted once and remembered (the segment memo,
# shared by the counts of one counter, like the piece memo). The two places involve ASCII
# characters only, whose classes are the same in both patterns and in the shipped tables:
#
# (1) between an ASCII letter and a '"' that is not followed by an ASCII letter or '"'. A letter
#     is only ever in a letter piece (the first two alternatives: no other takes a letter),
#     which goes on only with letters, marks or an apostrophe contraction, so it ends before
#     the quote, and the quote starts the next piece. The letter piece is the same when the
#     text ends after the letter. (The lookahead only makes the places unambiguous, below.)
# (2) after a '"' preceded by one of ':', ',', ' ', '{', '[' and followed by an ASCII letter.
#     The character before the quote cannot be the optional first character of a letter piece
#     (a quote follows it, not a letter), nor in a whitespace piece that ends at or after the
#     quote: a whitespace run before a quote ends before it (alternatives 5-7 hold only white
#     space); if the run is one space, ` ?[^\s\p{L}\p{N}]+` takes it with the quote first,
#     if it is longer `\s+(?!\S)` leaves its last space, which does the same. Otherwise it is
#     punctuation, in ` ?[^\s\p{L}\p{N}]+[\r\n/]*`, which takes the quote and stops at the
#     letter (in neither class). Either way a piece ends exactly between the quote and the
#     letter, by a greedy run that the end of the text stops alike, and no lookahead decides.
#
# A segment starts where the text or a place starts and ends at the next place or the end, so
# each segment is split as the scanner of the whole text splits it (it arrives at every place,
# and every piece before a place is found within the text before it). `_SEGMENT` matches the
# quote at each place; the quote belongs to the segment after a place (1), to the one before a
# place (2). A segment `s` of `_SEGMENT.split` other than the first and the last thus stands for
#   ('"' unless s starts with a letter: it follows a place (1) exactly when it does not)
#   + s + ('"' if s ends with one of ':, {[': it precedes a place (2) exactly then),
# a text of its own, whatever its neighbours: the memo is keyed by `s`.
#
# Inside a segment, a long one (a description) is also cut before each '.' that follows an
# ASCII letter and precedes a space (`_SENTENCE`, the '.' going with the text after it): the
# letter piece ends at the letter (a '.' is no letter, mark or apostrophe), and the '.' starts
# the next piece wherever the text begins, so each side splits as inside the whole.
_SENTENCE = re.compile(r"\.(?<=[A-Za-z]\.)(?= )")
_SEGMENT = re.compile(r'"(?:(?<=[A-Za-z]")(?![A-Za-z"])|(?<=[:, {\[]")(?=[A-Za-z]))')
_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_OPENERS = frozenset(':, {[')
# A chunk is counted by segments when it has at least SEG_MIN_PARTS of them and its new
# segments (not in the memo) hold less than SEG_SHARE of its characters, each new segment
# counting SEG_COST characters more; else piece by piece, as a text without quotes is.
# Measured (chunks of catalogs, their outputs, JSON records): the segments win below about
# 0.7 (a catalog: 0.45-0.6; the output after it: 0.4-0.5), lose above (records of distinct
# values, with many short new segments: 0.8-1.4). A chunk under SEG_STICKY characters (the
# first ones of a text) is given SEG_SHARE_SMALL: little is lost, and the segments it puts in
# the memo serve the chunks and the counts after it. After a chunk over SEG_HOPELESS, or a
# large one that does not pay, the rest of the text is counted piece by piece (the check
# itself costs a split and a tally: ~8% of counting JSON records).
SEG_MIN_PARTS = 64
SEG_SHARE = 0.75
SEG_SHARE_SMALL = 0.9
SEG_HOPELESS = 1.2
SEG_COST = 40
SEG_STICKY = 1 << 19
SEG_MEMO_CHARS = 1 << 22
# Texts of SENTENCE_MIN characters or more are counted sentence by sentence; sentences of
# SENTENCE_KEEP characters or more are remembered.
SENTENCE_MIN = 160
SENTENCE_KEEP = 24


def _tally(items) -> dict:
    from collections import Counter

    return Counter(items)


# Where a text can be cut without changing its pieces (shipped classes, either pattern):
# * after a "\n" followed by a printable ASCII character other than "/": no alternative
#   continues a piece over a newline into such a character (only `[\r\n/]*` after
#   punctuation and the whitespace runs reach past a newline), and the whitespace run ending
#   at the newline is taken by `[^\S\r\n]*[\r\n]+` whatever follows it, so the one lookahead
#   (`(?!\S)`) never decides there;
# * between an ASCII letter and a double quote: a piece holding a letter continues only with
#   letters, marks or an apostrophe contraction;
# * after a DEL: no piece holds one or goes past one, and the lookahead reads it as the end
#   (DEL-joined batches of segments, see `_count_each`, have no other places).
# Each side is then split exactly as inside the whole text (a cut never falls inside a piece,
# and the scanner of the whole text arrives at it). Catalog JSON, logs and prose have such
# places every few dozen characters; a text without one within a chunk is taken whole.
_CUT = re.compile(r'\n(?=[!-.0-~])|[A-Za-z](?=")|\x7f')


def _chunks(text: str):
    """``text`` in consecutive pieces cut at `_CUT` places: the first about FIRST_CHUNK
    characters (so that `count` learns early what kind of text it has), each next one four
    times longer, up to CHUNK."""
    n = len(text)
    size = FIRST_CHUNK
    start = 0
    while n - start > size + size // 2:
        m = _CUT.search(text, start + size)
        if m is None:
            break
        cut = m.end()
        yield text[start:cut]
        start = cut
        size = min(4 * size, CHUNK)
    yield text[start:]


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
    """Number of tokens tiktoken's byte-pair merge produces for ``piece`` (not in the vocab):
    repeatedly merge the leftmost pair of adjacent parts whose concatenation has the lowest
    rank. The scans for that pair are C calls (min, index), so a merge costs few bytecodes."""
    big = 1 << 62
    n = len(piece)
    if n == 1:
        return 1
    # starts[i]: where part i starts; ranks[i]: rank of parts i and i+1 merged (big: none)
    starts = list(range(n + 1))
    ranks = [big] * (n + 1)
    for i in range(n - 1):
        r = rank(piece[i : i + 2])
        if r is not None:
            ranks[i] = r
    while True:
        best = min(ranks)
        if best == big:
            break
        bi = ranks.index(best)
        del starts[bi + 1]
        del ranks[bi + 1]
        last = len(starts) - 1
        if bi + 2 <= last:
            r = rank(piece[starts[bi] : starts[bi + 2]])
            ranks[bi] = big if r is None else r
        else:
            ranks[bi] = big
        if bi > 0:
            r = rank(piece[starts[bi - 1] : starts[bi + 1]])
            ranks[bi - 1] = big if r is None else r
    return len(starts) - 1


def make_counter(cache_dir: Path | None) -> Counter:
    """The o200k_base counter, or the approximation if the vocabulary cannot be loaded."""
    counter = O200kCounter(cache_dir)
    try:
        counter.load()
    except Exception:
        return Counter()
    return counter
