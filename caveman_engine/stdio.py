"""Standard streams that never lose bytes quietly.

Python's own ``sys.stdout.buffer`` is an unbuffered ``FileIO`` under ``PYTHONUNBUFFERED=1`` (and
``-u``): its ``write`` may write part of the data and return the count, which callers ignore.
:func:`install` replaces stdout and stderr with buffered writers over the same descriptors: a
buffered writer retries short writes until every byte is out, and any failure (a full disk, a
closed descriptor) surfaces as :class:`OutputError`, which the console script turns into one
line on stderr and exit 1. A reader that went away (``EPIPE``: ``| head`` took what it wanted)
is not an error to report: the console script ends by SIGPIPE, quietly, as other Unix tools
do (:func:`die_of_sigpipe`).

A descriptor 0, 1 or 2 that is closed when the process starts is first reopened on
``/dev/null``, so that no file the engine opens later (the recovery store) can take its number
and receive our output. Reading a stdin that was closed, or writing a stdout that was closed,
then fails with ``EBADF`` instead of silently reading nothing or writing nowhere.
"""

from __future__ import annotations

import codecs
import errno
import io
import os
import sys

_NAMES = {0: "stdin", 1: "stdout", 2: "stderr"}
# Which of 0, 1, 2 were closed when the process started (filled by install()).
closed_at_start: set[int] = set()


class OutputError(Exception):
    """Writing to stdout or stderr failed; ``detail`` says why (``No space left on device``)."""

    def __init__(self, stream: str, exc: OSError) -> None:
        self.stream = stream
        self.detail = exc.strerror or str(exc)
        # the reader closed its end: what it read was whole, it just wanted no more
        self.broken_pipe = exc.errno == errno.EPIPE
        super().__init__(f"write {stream}: {self.detail}")


class _Sink(io.RawIOBase):
    """A raw writer on one descriptor. After its first failure it swallows further writes, so
    the interpreter's final flush cannot print a second error after ours."""

    def __init__(self, fd: int, closed: bool) -> None:
        super().__init__()
        self._fd = fd
        self._was_closed = closed
        self.failed = False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return not self._was_closed and os.isatty(self._fd)

    def write(self, b) -> int:
        if self.failed:
            return len(b)
        try:
            if self._was_closed:
                raise OSError(errno.EBADF, f"{_NAMES[self._fd]} is closed")
            return os.write(self._fd, b)
        except OSError as exc:
            self.failed = True
            raise OutputError(_NAMES[self._fd], exc) from None


class _ClosedSource(io.RawIOBase):
    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        raise OSError(errno.EBADF, "stdin is closed")


def _occupy_closed() -> set[int]:
    closed = set()
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            closed.add(fd)
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
    return closed


def _escape(exc: UnicodeError):
    """The error handler of stderr: a byte of a file name that is not UTF-8 (which Python
    holds as a surrogate escape) is shown as ``\\xff``, any other unencodable character as its
    ``\\uXXXX`` escape. An error line names such a file readably and stays UTF-8."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    out = []
    for ch in exc.object[exc.start:exc.end]:
        n = ord(ch)
        out.append(f"\\x{n - 0xDC00:02x}" if 0xDC80 <= n <= 0xDCFF else f"\\u{n:04x}")
    return "".join(out), exc.end


codecs.register_error("caveman.escape", _escape)


def _writer(fd: int, closed: bool, line_buffering: bool) -> io.TextIOWrapper:
    """Stdout writes a file name that is not UTF-8 as the bytes it is (as ls does on a pipe);
    stderr escapes it (see :func:`_escape`)."""
    raw = _Sink(fd, closed)
    return io.TextIOWrapper(io.BufferedWriter(raw, 1 << 16), encoding="utf-8",
                            errors="caveman.escape" if fd == 2 else "surrogateescape",
                            line_buffering=line_buffering)


def install() -> None:
    """Put the guarded streams in place of ``sys.stdin`` (if closed), stdout and stderr."""
    closed = _occupy_closed()
    closed_at_start.update(closed)
    if 0 in closed:
        sys.stdin = io.TextIOWrapper(io.BufferedReader(_ClosedSource()), encoding="utf-8")
    sys.stdout = _writer(1, 1 in closed, line_buffering=1 not in closed and os.isatty(1))
    sys.stderr = _writer(2, 2 in closed, line_buffering=True)


def flush() -> None:
    """Flush stdout then stderr; raises :class:`OutputError`."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()


def one_line(text: str) -> str:
    """``text`` as one line that cannot drive a terminal: a control or other invisible
    character (a newline or an escape in a file name or a handle) is shown as its escape
    (``\\n`` as ``\\x0a``). Surrogate escapes (bytes of a name that is not UTF-8) are left to
    stderr's error handler, which shows them as ``\\xff``."""
    if text.isprintable():
        return text
    out = []
    for ch in text:
        n = ord(ch)
        if ch.isprintable() or ch == " " or 0xDC80 <= n <= 0xDCFF:
            out.append(ch)
        else:
            out.append(f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000
                       else f"\\U{n:08x}")
    return "".join(out)


def say(line: str) -> None:
    """One line on stderr, best effort: when stderr itself is broken there is nobody to tell.
    Whatever the line quotes (a file name, a handle) cannot break it: see :func:`one_line`."""
    try:
        sys.stderr.write(one_line(line) + "\n")
        sys.stderr.flush()
    except (OutputError, OSError, ValueError):
        pass


def die_of_sigpipe() -> None:
    """End the process as SIGPIPE ends ``cat`` when its reader goes away: no message, and
    the shell reports 141 (128 + 13). Python ignores SIGPIPE, so it is restored and raised."""
    import signal

    for stream in (sys.stdout, sys.stderr):  # nothing more may be written on the way out
        raw = getattr(getattr(stream, "buffer", None), "raw", None)
        if isinstance(raw, _Sink):
            raw.failed = True
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGPIPE)
    os._exit(128 + signal.SIGPIPE)  # pragma: no cover - only if the signal could not end us
