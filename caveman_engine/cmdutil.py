"""What the command-line front doors share, without click: one-line errors and warnings,
reading FILE or stdin, complete writes, opening the store. The console script's fast paths
(`detect`, a plain `compress`) use these before click is imported."""

from __future__ import annotations

import os
import sys

COMPRESS_USAGE = "usage: caveman-engine compress [--type <content-type>]"
RETRIEVE_USAGE = "usage: caveman-engine retrieve <handle> [query]"
TOON_USAGE = "usage: caveman-engine toon encode|decode"
# Printed (exit 2) when a command would read stdin and stdin is a terminal.
TERMINAL_USAGE = {
    "compress": "usage: caveman-engine compress [--type TYPE] [FILE]  "
                "(no FILE given and stdin is a terminal; see --help)",
    "toon": "usage: caveman-engine toon encode|decode [FILE]  "
            "(no FILE given and stdin is a terminal; see --help)",
}
STRICT_TYPES_ENV = "CAVEMAN_STRICT_TYPES"


def fail(message: str, code: int = 1) -> None:
    from .stdio import say

    say(message)
    sys.exit(code)


def warn(message: str, quiet: bool = False) -> None:
    if not quiet:
        from .stdio import say

        say(message)


def read_input(command: str, path: str | None) -> bytes:
    """The bytes of ``path``, or of stdin for ``None`` and ``-``. Stdin that is a terminal
    with no file named is a usage error (exit 2) rather than a silent wait."""
    from .limits import InputTooLarge, read_bounded, read_path

    if path is None and command in TERMINAL_USAGE and sys.stdin.isatty():
        fail(TERMINAL_USAGE[command], 2)
    if path is None or path == "-":
        try:
            return read_bounded(sys.stdin.buffer)
        except InputTooLarge as exc:
            fail(f"read stdin: {exc}")
        except OSError as exc:
            fail(f"{command}: read stdin: {exc.strerror or exc}")
    try:
        return read_path(path)
    except InputTooLarge:
        from .limits import MAX_INPUT

        fail(f"{command}: {path}: larger than {MAX_INPUT} bytes")
    except OSError as exc:
        fail(f"{command}: cannot read {path}: {exc.strerror or exc}")


def write_stdout(data: bytes) -> None:
    """All of ``data`` or :class:`stdio.OutputError` (reported by the console script)."""
    out = sys.stdout.buffer
    out.write(data)
    out.flush()


def write_file(command: str, path: str, data: bytes) -> None:
    """``data`` into ``path`` completely, or the file is left as it was (write then rename)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        fail(f"{command}: cannot write {path}: {exc.strerror or exc}")


def open_store_or_fail():
    from .store import StoreError, open_store

    try:
        return open_store()
    except StoreError as exc:
        fail(f"cannot open recovery store: {exc}")


def ignored_arguments(command: str, extra: tuple[str, ...], quiet: bool) -> None:
    """The reference ignores extra arguments here; we keep that, and say so."""
    if extra:
        warn(f"{command}: ignoring extra arguments: {' '.join(extra)}", quiet)
