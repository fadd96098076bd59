"""What the command-line front doors share, without click: one-line errors and warnings,
reading FILE or stdin, complete writes, opening the store. The console script's fast paths
(`detect`, a plain `compress`) use these before click is imported."""

from __future__ import annotations

import os
import sys

COMPRESS_USAGE = "usage: caveman-engine compress [--type TYPE] [FILE]"
RETRIEVE_USAGE = "usage: caveman-engine retrieve HANDLE [QUERY]"
TOON_USAGE = "usage: caveman-engine toon encode|decode [FILE]"
_ON_TERMINAL = "  (no FILE given and stdin is a terminal; see --help)"
# Printed (exit 2) when a command would read stdin and stdin is a terminal.
TERMINAL_USAGE = {
    "compress": COMPRESS_USAGE + _ON_TERMINAL,
    "toon": TOON_USAGE + _ON_TERMINAL,
    "detect": "usage: caveman-engine detect [FILE]..." + _ON_TERMINAL,
    "measure": "usage: caveman-engine measure [--type TYPE] [FILE|-]" + _ON_TERMINAL,
    "diff": "usage: caveman-engine diff --type TYPE [FILE|-]" + _ON_TERMINAL,
}
STRICT_TYPES_ENV = "CAVEMAN_STRICT_TYPES"


def did_you_mean(word: str, choices) -> str:
    """`` (did you mean X?)`` for the choice closest to a mistyped ``word``, or ``""``. The one
    helper behind every "did you mean" of the command line (options, --type, --format, ...)."""
    import difflib

    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {found[0]}?)" if found else ""


def bad_value(option: str, value: str, choices, kind: str | None = None, also=()) -> str:
    """The one wording for a value an option does not take: ``--format jsn: not one of text,
    json (did you mean json?)``; with ``kind``, ``--type x: unknown content type (...)``.
    ``also``: accepted spellings that are not listed but may be suggested."""
    choices = list(choices)
    what = f"unknown {kind}" if kind else "not one of " + ", ".join(choices)
    return f"{option} {value}: {what}{did_you_mean(value, choices + list(also))}"


def usage_error(command: str, message: str) -> None:
    """A usage error: one line naming the command, exit 2."""
    fail(f"caveman-engine {command}: {message}", 2)


def cannot_read(command: str, path: str, exc: OSError) -> str:
    """The one wording for a FILE that cannot be read (exit 1 unless the command says)."""
    return f"caveman-engine {command}: cannot read {path}: {exc.strerror or exc}"


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
        fail(cannot_read(command, path, exc))


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


