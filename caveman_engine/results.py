"""Reusing a compress result when the same bytes come back.

Agents resend the same tool catalog on every request. The engine is deterministic: the same
input, content type, options and engine code give the same output and report. So the command
line keeps each result in a small cache beside the tokenizer's rank cache and, when the same
request comes back, replays it: the stored original is written again through the store's own
``put`` (a no-op read when it is already there, exactly what a fresh run does), and the output
and report are the bytes the fresh run produced. Nothing is tokenized, no compressor runs.

The key is a SHA-256 over the input's hash, the forced type, every environment option that
changes a result, and a fingerprint of the engine's code (path, size and modification time of
every file of the package), so an upgrade or an edit never serves an old result. A replay that
cannot store its original (budget, store failure) is abandoned: the fresh run then reports the
failure the usual way. Results with an error or an approximate token count are not kept.

Entries are files of at most ``MAX_ENTRY_BYTES``; the directory keeps at most ``MAX_ENTRIES``
of them (oldest dropped first). ``CAVEMAN_RESULT_CACHE=0`` turns the cache off.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

ENV = "CAVEMAN_RESULT_CACHE"
# Environment that changes what compress produces.
OPTION_ENV = ("CAVE_ENGINE_TOON", "CAVEMAN_SAFE_RULES", "CAVEMAN_SHRINK_FIELDS")
MAX_ENTRIES = 256
MAX_ENTRY_BYTES = 80 << 20
_MAGIC = b"caveman-result 1\n"
_PKG = Path(__file__).resolve().parent
_fingerprint: bytes | None = None


def code_fingerprint() -> bytes:
    """Path, size and mtime of every file of the installed package, hashed."""
    global _fingerprint
    if _fingerprint is None:
        h = hashlib.sha256()
        for root, dirs, files in os.walk(_PKG):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                path = os.path.join(root, name)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                h.update(f"{os.path.relpath(path, _PKG)}\0{st.st_size}\0{st.st_mtime_ns}\n"
                         .encode())
        _fingerprint = h.digest()
    return _fingerprint


@dataclass
class Replay:
    output: bytes
    report: bytes  # the report line, without its newline


class ResultCache:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @classmethod
    def beside(cls, store) -> ResultCache | None:
        """The cache for the CLI's store, or None (off, or an in-memory store)."""
        if os.environ.get(ENV, "1") == "0":
            return None
        if store is None or store.path == ":memory:":
            return None
        explicit = os.environ.get("CAVEMAN_CACHE_DIR")
        base = Path(explicit) if explicit else store.cache_dir()
        return cls(base / "results") if base is not None else None

    def key(self, data: bytes, content_type: str | None) -> str:
        h = hashlib.sha256(code_fingerprint())
        h.update(b"\0type\0" + (content_type or "").encode("utf-8", "surrogateescape"))
        for name in OPTION_ENV:
            h.update(f"\0{name}\0{os.environ.get(name, '')}".encode("utf-8", "surrogateescape"))
        h.update(b"\0input\0" + hashlib.sha256(data).digest())
        return h.hexdigest()

    # -- reading

    def replay(self, key: str, data: bytes, store) -> Replay | None:
        """The cached result for ``key`` with its original stored again, or None."""
        entry = self._read(key)
        if entry is None:
            return None
        head, output = entry
        if output is None:
            output = data
        if hashlib.sha256(output).hexdigest() != head.get("output_sha256"):
            return None
        put = head.get("put")
        if put is not None:
            try:
                meta = put.get("metadata")
                handle = store.put(
                    data, content_type=put["content_type"], compressor=put["compressor"],
                    tokens_before=put["tokens_before"], tokens_after=put["tokens_after"],
                    metadata=base64.b64decode(meta) if meta is not None else None)
            except Exception:  # the fresh run reports budget and store failures
                return None
            if handle != put.get("handle"):
                return None
        return Replay(output, base64.b64decode(head["report"]))

    def _read(self, key: str):
        path = self.directory / key
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
                blob = f.read()
        except OSError:
            return None
        finally:
            os.close(fd)
        if not blob.startswith(_MAGIC):
            return None
        line_end = blob.find(b"\n", len(_MAGIC))
        if line_end < 0:
            return None
        try:
            head = json.loads(blob[len(_MAGIC):line_end])
        except ValueError:
            return None
        if not isinstance(head, dict) or not isinstance(head.get("report"), str):
            return None
        body = blob[line_end + 1:]
        return head, (None if head.get("passthrough") else body)

    # -- writing

    def save(self, key: str, data: bytes, result) -> None:
        """Keep ``result`` (an engine Result) for ``key``; best effort, never raises."""
        if result.error is not None or result.token_count_basis != "o200k_base":
            return
        passthrough = result.output == data
        put = result.store_args
        head = {
            "report": base64.b64encode(result.report()).decode(),
            "output_sha256": hashlib.sha256(result.output).hexdigest(),
            "passthrough": passthrough,
            "put": None if put is None else {
                **{k: put[k] for k in ("content_type", "compressor", "tokens_before",
                                       "tokens_after")},
                "metadata": (base64.b64encode(put["metadata"]).decode()
                             if put.get("metadata") else None),
                "handle": result.recovery_handle,
            },
        }
        body = b"" if passthrough else result.output
        blob = _MAGIC + json.dumps(head, separators=(",", ":")).encode() + b"\n" + body
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
        tmp = d / f".{key}.{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                     0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
            os.replace(tmp, d / key)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

    def _trim(self) -> None:
        entries = []
        with os.scandir(self.directory) as it:
            for e in it:
                if not e.name.startswith("."):
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
