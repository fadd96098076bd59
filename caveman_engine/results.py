"""Reusing a compress result when the same bytes come back.

Agents resend the same tool catalog on every request. The engine is deterministic: the same
input, content type, options and engine code give the same output and report. So the command
line keeps each result in a small cache beside the tokenizer's rank cache and, when the same
request comes back, replays it: the output and report are the bytes the fresh run produced, and
the original is made sure to be in the store exactly as the fresh run's ``put`` would leave it
(one read when it is already there, which is what a fresh run finds too; otherwise the store's
own ``put``). Nothing is tokenized, no compressor runs, and little is imported: no JSON module,
no pathlib, no tokenizer.

The key is a hash over the input's hash, the forced type, every environment option that
changes a result, and a fingerprint of the engine's code (path, size and modification time of
every file of the package), so an upgrade or an edit never serves an old result. The hash is
BLAKE2b (256 bits), which the interpreter carries itself: SHA-256 would load OpenSSL, whose
loading alone costs more than a replay's other work. A replay that
cannot store its original (budget, store failure) is abandoned: the fresh run then reports the
failure the usual way. Results with an error or an approximate token count are not kept.

Entries are files of at most ``MAX_ENTRY_BYTES``; the directory keeps at most ``MAX_ENTRIES``
of them (oldest dropped first). ``CAVEMAN_RESULT_CACHE=0`` turns the cache off.

An entry (:class:`Kept`) is one ASCII header line after the magic line, then the report line,
the recovery metadata and the output as raw bytes::

    caveman-result 2
    <check> <report length> <metadata length> <passthrough 0|1> <put>
    <report><metadata><output, empty for a pass-through>

where ``<put>`` is ``-`` (nothing stored) or ``content_type,compressor,tokens_before,
tokens_after,handle`` with the two names in hex (UTF-8), and ``<check>`` the BLAKE2b-256 (hex)
of the rest of the header line, a newline and everything after it. The handle is the one the
fresh run's ``put`` returned: the key binds the input, so it is the input's handle.
"""

from __future__ import annotations

import os
import stat

try:
    from _blake2 import blake2b
except ImportError:  # pragma: no cover
    from hashlib import blake2b

ENV = "CAVEMAN_RESULT_CACHE"
# Environment that changes what compress produces.
OPTION_ENV = ("CAVE_ENGINE_TOON", "CAVEMAN_SAFE_RULES", "CAVEMAN_SHRINK_FIELDS")
MAX_ENTRIES = 256
MAX_ENTRY_BYTES = 80 << 20
_MAGIC = b"caveman-result 2\n"
_PKG = os.path.dirname(os.path.realpath(__file__))
_fingerprint: bytes | None = None


def code_fingerprint() -> bytes:
    """Path, size and mtime of every file of the installed package (``__pycache__`` aside),
    and of ``registry.toml`` where it lies outside it (a source checkout), hashed."""
    global _fingerprint
    if _fingerprint is None:
        lines: list[str] = []
        _fingerprint_dir(_PKG, "", lines)
        from .resources import registry_location

        registry = registry_location()
        if os.path.dirname(registry) != _PKG:
            try:
                st = os.stat(registry)
                lines.append(f"{registry}\0{st.st_size}\0{st.st_mtime_ns}\n")
            except OSError:
                pass
        _fingerprint = _hash("".join(lines).encode("utf-8", "surrogateescape")).digest()
    return _fingerprint


def _fingerprint_dir(path: str, rel: str, lines: list[str]) -> None:
    """Files of ``path`` in name order, then its subdirectories in name order (a symbolic
    link to a directory is not followed)."""
    try:
        with os.scandir(path) as it:
            found = sorted(it, key=lambda e: e.name)
    except OSError:
        return
    dirs = []
    for e in found:
        try:
            is_dir = e.is_dir()
        except OSError:
            is_dir = False
        if is_dir:
            if e.name != "__pycache__" and not e.is_symlink():
                dirs.append(e)
            continue
        try:
            st = e.stat()
        except OSError:
            continue
        lines.append(f"{rel}{e.name}\0{st.st_size}\0{st.st_mtime_ns}\n")
    for e in dirs:
        _fingerprint_dir(e.path, f"{rel}{e.name}/", lines)


class Replay:
    """A kept result served again: the output and the report line (without its newline)."""

    __slots__ = ("output", "report")

    def __init__(self, output: bytes, report: bytes) -> None:
        self.output = output
        self.report = report

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return (self.output, self.report) == (other.output, other.report)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Replay(output={self.output!r}, report={self.report!r})"


class Kept:
    """One cache entry: ``report`` (bytes), ``output`` (bytes, or None for a pass-through:
    the input itself) and ``put`` (None, or the keyword arguments of ``Store.put`` plus the
    ``handle`` it returned)."""

    __slots__ = ("report", "output", "put")

    def __init__(self, report: bytes, output: bytes | None, put: dict | None) -> None:
        self.report = report
        self.output = output
        self.put = put

    def to_bytes(self) -> bytes:
        put = self.put
        meta = b""
        if put is None:
            put_field = b"-"
        else:
            meta = put.get("metadata") or b""
            put_field = b",".join([
                _hex(put["content_type"]), _hex(put["compressor"]),
                b"%d" % put["tokens_before"], b"%d" % put["tokens_after"],
                put["handle"].encode("ascii"),
            ])
        body = b"" if self.output is None else self.output
        payload = self.report + meta + body
        fields = b"%d %d %d %s" % (len(self.report), len(meta), self.output is None, put_field)
        return _MAGIC + _digest(fields, payload) + b" " + fields + b"\n" + payload

    @classmethod
    def parse(cls, blob: bytes) -> Kept | None:
        """The entry in ``blob``, or None when it is not one (or is damaged)."""
        if not blob.startswith(_MAGIC):
            return None
        line_end = blob.find(b"\n", len(_MAGIC))
        if line_end < 0:
            return None
        try:
            digest, fields = blob[len(_MAGIC):line_end].split(b" ", 1)
            payload = memoryview(blob)[line_end + 1:]
            if _digest(fields, payload) != digest:
                return None
            report_len, meta_len, passthrough, put_field = fields.split(b" ")
            report_len, meta_len = _size(report_len), _size(meta_len)
            if passthrough not in (b"0", b"1") or report_len + meta_len > len(payload):
                return None
            report = bytes(payload[:report_len])
            meta = bytes(payload[report_len:report_len + meta_len])
            rest = payload[report_len + meta_len:]
            if passthrough == b"1":
                if len(rest):
                    return None
                output = None
            else:
                output = bytes(rest)
            put = None
            if put_field != b"-":
                ctype, compressor, before, after, handle = put_field.split(b",")
                put = {"content_type": _unhex(ctype), "compressor": _unhex(compressor),
                       "tokens_before": _size(before), "tokens_after": _size(after),
                       "metadata": meta or None, "handle": handle.decode("ascii")}
            elif meta:
                return None
        except (ValueError, UnicodeDecodeError):
            return None
        return cls(report, output, put)


def _hash(data=b""):
    return blake2b(data, digest_size=32)


def _digest(fields: bytes, payload) -> bytes:
    """The entry's check: a hash of its header fields and everything after the header."""
    h = _hash(fields + b"\n")
    h.update(payload)
    return h.hexdigest().encode()


def _hex(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass").hex().encode()


def _unhex(field: bytes) -> str:
    return bytes.fromhex(field.decode("ascii")).decode("utf-8", "surrogatepass")


def _size(field: bytes) -> int:
    """A non-negative decimal integer, or ValueError."""
    if not field.isdigit():
        raise ValueError(field)
    return int(field)


class ResultCache:
    def __init__(self, directory) -> None:
        self.directory = directory

    @classmethod
    def beside(cls, store) -> ResultCache | None:
        """The cache for the CLI's store, or None (off, or an in-memory store)."""
        if os.environ.get(ENV, "1") == "0":
            return None
        if store is None or store.path == ":memory:":
            return None
        explicit = os.environ.get("CAVEMAN_CACHE_DIR")
        base = explicit if explicit else store.cache_location()
        return cls(os.path.join(base, "results")) if base is not None else None

    def key(self, data: bytes, content_type: str | None) -> str:
        h = _hash(code_fingerprint())
        h.update(b"\0type\0" + (content_type or "").encode("utf-8", "surrogateescape"))
        for name in OPTION_ENV:
            h.update(f"\0{name}\0{os.environ.get(name, '')}".encode("utf-8", "surrogateescape"))
        h.update(b"\0input\0" + _hash(data).digest())
        return h.hexdigest()

    # -- reading

    def replay(self, key: str, data: bytes, store) -> Replay | None:
        """The cached result for ``key`` with its original in the store, or None."""
        blob = self._read(key)
        kept = Kept.parse(blob) if blob is not None else None
        if kept is None:
            return None
        put = kept.put
        if put is not None:
            handle = put["handle"]
            args = {k: put[k] for k in ("content_type", "compressor", "tokens_before",
                                        "tokens_after", "metadata")}
            try:
                # What a fresh run's put finds when it has nothing to write; else that put.
                if not store.holds(data, handle=handle, **args):
                    if store.put(data, **args) != handle:
                        return None
            except Exception:  # the fresh run reports budget and store failures
                return None
        return Replay(data if kept.output is None else kept.output, kept.report)

    def _read(self, key: str) -> bytes | None:
        path = os.path.join(self.directory, key)
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if (not stat.S_ISREG(st.st_mode) or st.st_mode & 0o077
                    or (hasattr(os, "geteuid") and st.st_uid != os.geteuid())
                    or st.st_size > MAX_ENTRY_BYTES):
                return None
            with os.fdopen(fd, "rb", closefd=False) as f:
                return f.read()
        except OSError:
            return None
        finally:
            os.close(fd)

    # -- writing

    def save(self, key: str, data: bytes, result) -> None:
        """Keep ``result`` (an engine Result) for ``key``; best effort, never raises."""
        if result.error is not None or result.token_count_basis != "o200k_base":
            return
        passthrough = result.output == data
        put = result.store_args
        kept_put = None if put is None else {
            **{k: put[k] for k in ("content_type", "compressor", "tokens_before", "tokens_after")},
            "metadata": put.get("metadata") or None,
            "handle": result.recovery_handle,
        }
        kept = Kept(result.report(), None if passthrough else result.output, kept_put)
        try:
            blob = kept.to_bytes()
        except (ValueError, TypeError, UnicodeError, AttributeError):
            return
        if len(blob) > MAX_ENTRY_BYTES:
            return
        try:
            self._write(key, blob)
            self._trim()
        except OSError:
            pass

    def _write(self, key: str, blob: bytes) -> None:
        d = self.directory
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            pass
        st = os.lstat(d)
        if (not stat.S_ISDIR(st.st_mode) or st.st_mode & 0o077
                or (hasattr(os, "geteuid") and st.st_uid != os.geteuid())):
            return  # not ours alone: keep nothing there
        tmp = os.path.join(d, f".{key}.{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                     0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
            os.replace(tmp, os.path.join(d, key))
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

    def _trim(self) -> None:
        with os.scandir(self.directory) as it:
            kept = [e for e in it if not e.name.startswith(".")]
        if len(kept) <= MAX_ENTRIES:
            return  # counted by name: no file is looked at until there are too many
        entries = []
        for e in kept:
            try:
                entries.append((e.stat(follow_symlinks=False).st_mtime_ns, e.path))
            except OSError:
                pass
        if len(entries) <= MAX_ENTRIES:
            return
        entries.sort()
        for _, path in entries[:len(entries) - MAX_ENTRIES]:
            try:
                os.unlink(path)
            except OSError:
                pass

    def clear(self) -> int:
        """Delete every kept result; returns how many."""
        n = 0
        try:
            with os.scandir(self.directory) as it:
                for e in it:
                    try:
                        os.unlink(e.path)
                        n += 1
                    except OSError:
                        pass
        except OSError:
            pass
        return n
