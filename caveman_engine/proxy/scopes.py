"""What binds a middleware ``cmw_`` handle to its scope, kept in the Caveman home directory
(``CAVEMAN_HOME``, else ``~/.caveman``, 0700) so that it outlives the proxy:

* ``middleware.key``: 32 random bytes (hex, mode 0600), made once; like the store's files it
  must be a regular file of this user (a symlink is refused) and is tightened to 0600. A handle's scope tag is an
  HMAC-SHA256 under it, so nobody without the file can make a handle for another scope out of
  a ``ccr_`` handle or a digest of the content (the store's owner can read every original
  anyway). Proxies that share the directory share the key.
* ``middleware.revoked``: one line per scope revoked by ``sessions/delete`` (the SHA-256 of
  the scope), appended and flushed to disk before the answer; read again whenever it grew, so
  every proxy on the directory sees a revocation, and a restart forgets none.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import threading

KEY_FILE = "middleware.key"
REVOKED_FILE = "middleware.revoked"


class Unusable(Exception):
    """The key or the revocation list cannot be read or written (one line)."""


def scope_key(scope: tuple[str, ...]) -> bytes:
    return json.dumps(list(scope), separators=(",", ":")).encode("utf-8")


def _home() -> str:
    from ..store import StoreError, _mkdir_all, caveman_home

    try:
        home = caveman_home()
        _mkdir_all(home, 0o700)
    except (StoreError, OSError) as exc:
        raise Unusable(f"cannot create the Caveman home directory: "
                       f"{getattr(exc, 'strerror', None) or exc}") from None
    return home


def _own(path: str, name: str) -> None:
    """What the recovery store asks of its own files: ``path`` is a regular file (no symlink)
    of this user, tightened to 0600."""
    import stat

    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        raise Unusable(f"{name} is not a regular file")
    if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        raise Unusable(f"{name} belongs to another user")
    if stat.S_IMODE(st.st_mode) != 0o600:
        os.chmod(path, 0o600)


def load_key(home: str) -> bytes:
    """The directory's key, made (atomically, 0600) when there is none yet. Messages name
    the file, not the directory (they reach clients)."""
    path = os.path.join(home, KEY_FILE)
    for _ in range(2):
        try:
            _own(path, KEY_FILE)
            with open(path, "rb") as fh:
                raw = fh.read().strip()
            key = bytes.fromhex(raw.decode("ascii"))
            if len(key) < 32:
                raise ValueError
            return key
        except FileNotFoundError:
            pass
        except (ValueError, UnicodeDecodeError):
            raise Unusable(f"{KEY_FILE} in the Caveman home is not a key (64 hex digits); "
                           "remove it to make a new one (handles issued under it stop "
                           "resolving)") from None
        except OSError as exc:
            raise Unusable(f"cannot read {KEY_FILE}: {exc.strerror or exc}") from None
        tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, os.urandom(32).hex().encode("ascii") + b"\n")
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(tmp, path)  # fails when another process made the key first
            except FileExistsError:
                pass
        except OSError as exc:
            raise Unusable(f"cannot write {KEY_FILE}: {exc.strerror or exc}") from None
        finally:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    raise Unusable(f"cannot read {KEY_FILE}")


class Scopes:
    """The key and the revoked scopes of one Caveman home directory (opened on first use)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: bytes | None = None
        self._path = ""
        self._revoked: set[str] = set()
        self._read = 0  # bytes of the revocation file already read

    def _open(self) -> bytes:
        if self._key is None:
            home = _home()
            self._key = load_key(home)
            self._path = os.path.join(home, REVOKED_FILE)
        return self._key

    def check(self) -> None:
        """:class:`Unusable` unless the key can be read (or made): handles can be issued."""
        with self._lock:
            self._open()

    def tag(self, scope: tuple[str, ...], ccr: str) -> str:
        """16 hex digits binding ``ccr`` (``ccr_`` + 32 hex digits) to ``scope``."""
        with self._lock:
            key = self._open()
        mac = hmac.new(key, scope_key(scope) + b"\0" + ccr.encode("ascii"), hashlib.sha256)
        return mac.hexdigest()[:16]

    def _refresh(self) -> None:
        try:
            size = os.stat(self._path).st_size
        except FileNotFoundError:
            return
        except OSError as exc:
            raise Unusable(f"cannot read {REVOKED_FILE}: {exc.strerror or exc}") from None
        if size == self._read:
            return
        try:
            with open(self._path, "rb") as fh:
                fh.seek(self._read if size > self._read else 0)
                data = fh.read()
        except OSError as exc:
            raise Unusable(f"cannot read {REVOKED_FILE}: {exc.strerror or exc}") from None
        whole = data[:data.rfind(b"\n") + 1]  # a line still being written waits
        self._revoked.update(line.decode("ascii", "replace")
                             for line in whole.split(b"\n") if line)
        self._read = (self._read if size > self._read else 0) + len(whole)

    def revoked(self, scope: tuple[str, ...]) -> bool:
        with self._lock:
            self._open()
            self._refresh()
            return hashlib.sha256(scope_key(scope)).hexdigest() in self._revoked

    def revoke(self, scope: tuple[str, ...]) -> bool:
        """Record ``scope`` as revoked (on disk first); False when it already was."""
        digest = hashlib.sha256(scope_key(scope)).hexdigest()
        with self._lock:
            self._open()
            self._refresh()
            if digest in self._revoked:
                return False
            line = digest.encode("ascii") + b"\n"
            try:
                fd = os.open(self._path, os.O_RDWR | os.O_APPEND | os.O_CREAT
                             | getattr(os, "O_NOFOLLOW", 0), 0o600)
                try:
                    _own(self._path, REVOKED_FILE)
                    end = os.lseek(fd, 0, os.SEEK_END)
                    # a line cut short before (a crash, a full disk) must not swallow this one
                    if end and os.pread(fd, 1, end - 1) != b"\n":
                        line = b"\n" + line
                    view = memoryview(line)
                    while view:
                        view = view[os.write(fd, view):]
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError as exc:
                raise Unusable(f"cannot write {REVOKED_FILE}: {exc.strerror or exc}") from None
            self._revoked.add(digest)
            return True
