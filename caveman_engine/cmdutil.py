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
    "toon encode": TOON_USAGE + _ON_TERMINAL,
    "toon decode": TOON_USAGE + _ON_TERMINAL,
    "detect": "usage: caveman-engine detect [FILE]..." + _ON_TERMINAL,
    "measure": "usage: caveman-engine measure [--type TYPE] [FILE|-]" + _ON_TERMINAL,
    "diff": "usage: caveman-engine diff --type TYPE [FILE|-]" + _ON_TERMINAL,
}
STRICT_TYPES_ENV = "CAVEMAN_STRICT_TYPES"


def did_you_mean(word: str, choices) -> str:
    """`` (did you mean X?)`` for the choice closest to a mistyped ``word`` (:func:`closest`),
    or ``""``. The one helper behind every "did you mean" of the command line (options,
    --type, --format, the proxy's level and config keys, ...)."""
    found = closest(word, choices)
    return f" (did you mean {found}?)" if found is not None and found != word else ""


def closest(word: str, choices) -> str | None:
    """The choice ``word`` most likely meant: one that differs only in case, surrounding
    blanks or ``_`` for ``-``; else difflib's closest match (ratio 0.6 or more, case
    ignored); else the one choice that ``word`` is a whole ``-``-separated part of (``max``:
    ``toolschema-max``); else None."""
    import difflib

    def norm(text: str) -> str:
        return text.strip().lower().replace("_", "-")

    choices = [c for c in choices if isinstance(c, str)]
    by_norm: dict[str, str] = {}
    for c in choices:
        by_norm.setdefault(norm(c), c)
    low = norm(word)
    if not low:
        return None
    if low in by_norm:
        return by_norm[low]
    by_lower: dict[str, str] = {}
    for c in choices:
        by_lower.setdefault(c.lower(), c)
    found = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=0.6)
    if found:
        return by_lower[found[0]]
    parts = {c for n, c in by_norm.items() if low in n.split("-")}
    return parts.pop() if len(parts) == 1 else None


def option_problem(word: str, names, flags=()) -> str | None:
    """Why ``word`` (starting with ``-``, not ``-`` itself) is not one of the options
    ``names`` of a command, or None when it is one. ``flags``: the names that take no value.
    The one rule of every command, click's and the fast paths': a single-dash word longer than
    two characters is one word (``-output`` is not ``-o utput``; no attached values), a long
    option may carry ``=VALUE`` only when it takes a value."""
    names = list(names)
    if word.startswith("--"):
        name, eq, _ = word.partition("=")
        if name in names:
            return f"option {name} does not take a value" if eq and name in flags else None
        return f"no such option: {name}" + did_you_mean(name, names)
    if word in names:
        return None
    if len(word) > 2:
        longer = "-" + word  # -output: --output
        hint = (f" (did you mean {longer}?)" if longer in names
                else did_you_mean(longer, [n for n in names if n.startswith("--")])
                or did_you_mean(word, names))
        return f"no such option: {word}{hint}"
    return f"no such option: {word}" + did_you_mean(word, names)


def bad_value(option: str, value: str, choices, kind: str | None = None, also=()) -> str:
    """The one wording for a value an option does not take: ``--format jsn: not one of text,
    json (did you mean json?)``; with ``kind``, ``--type x: unknown or unavailable content
    type (...)``. ``also``: accepted spellings that are not listed but may be suggested."""
    choices = list(choices)
    if not kind and not value.strip():
        return f"{option} is empty: name one of " + ", ".join(choices)
    what = f"unknown {kind}" if kind else "not one of " + ", ".join(choices)
    return f"{option} {value}: {what}{did_you_mean(value, choices + list(also))}"


CONTENT_TYPE = "or unavailable content type"


def bad_type(option: str, value: str, types) -> str:
    """``--type X: unknown or unavailable content type (did you mean Y?)``: the one line for
    a content type an option does not take (compress --strict, measure, diff, evals tools,
    mcp)."""
    return bad_value(option, value, types, kind=CONTENT_TYPE)


def line(command: str | None, message: str) -> str:
    """An error line: ``caveman-engine CMD: message`` (``caveman-engine: message`` when no
    command was named)."""
    return f"caveman-engine {command}: {message}" if command else f"caveman-engine: {message}"


def error(command: str | None, message: str, code: int = 1) -> None:
    """One error line naming the command, then exit ``code``."""
    fail(line(command, message), code)


def usage_error(command: str, message: str) -> None:
    """A usage error: one line naming the command, exit 2."""
    error(command, message, 2)


def _reason(exc: OSError | str) -> str:
    return exc if isinstance(exc, str) else (exc.strerror or str(exc))


def cannot_read(command: str, path: str, exc: OSError | str) -> str:
    """The one wording for a FILE (or stdin) that cannot be read, too large included (exit 1
    unless the command says): ``caveman-engine CMD: cannot read FILE: reason``."""
    return line(command, f"cannot read {path}: {_reason(exc)}")


def fail(message: str, code: int = 1) -> None:
    from .stdio import say

    say(message)
    sys.exit(code)


def warn(message: str, quiet: bool = False) -> None:
    if not quiet:
        from .stdio import say

        say(message)


def read_input(command: str, path: str | None, code: int = 1) -> bytes:
    """The bytes of ``path``, or of stdin for ``None`` and ``-``, at most MAX_INPUT. Stdin
    that is a terminal with no file named is a usage error (exit 2) rather than a silent
    wait. What cannot be read (a missing FILE, a closed stdin, more than MAX_INPUT bytes) is
    one ``cannot read`` line and exit ``code``."""
    from .limits import InputTooLarge, read_bounded, read_path

    if path is None and command in TERMINAL_USAGE and sys.stdin.isatty():
        fail(TERMINAL_USAGE[command], 2)
    stdin = path is None or path == "-"
    name = "stdin" if stdin else path
    try:
        return read_bounded(sys.stdin.buffer) if stdin else read_path(path)
    except InputTooLarge:
        fail(cannot_read(command, name, too_large()), code)
    except OSError as exc:
        fail(cannot_read(command, name, exc), code)


def too_large() -> str:
    from .limits import MAX_INPUT

    return f"larger than {MAX_INPUT} bytes"


def write_stdout(data: bytes) -> None:
    """All of ``data`` or :class:`stdio.OutputError` (reported by the console script)."""
    out = sys.stdout.buffer
    out.write(data)
    out.flush()


def text_bytes(text: str) -> bytes:
    """Text for stdout as bytes: a file name that is not UTF-8 goes out as the bytes it is."""
    return text.encode("utf-8", "surrogateescape")


def json_bytes(doc, **kwargs) -> bytes:
    """A JSON document as UTF-8; a name that is not UTF-8 is written as its \\udcXX escape
    (valid JSON, what Python's json reads back), never as bytes that are not UTF-8."""
    import json

    return json.dumps(doc, ensure_ascii=False, **kwargs).encode("utf-8", "backslashreplace")


def write_file(command: str, path: str, data: bytes) -> None:
    """``data`` into the file ``path``, completely, or one error line and exit 1.

    A regular file (or a new one) is replaced only once complete: written beside it, then
    renamed over it (through a symlink, its target is replaced). Anything else that exists,
    a device, a FIFO, a terminal, is opened and written in place, never replaced. A missing
    parent directory is never created: ``cannot write PATH: No such file or directory``. A
    write that fails part way (a full disk) is ``write PATH: No space left on device``."""
    import stat

    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        error(command, f"cannot write {path}: {_reason(exc)}")
    if st is not None and stat.S_ISDIR(st.st_mode):
        error(command, f"cannot write {path}: Is a directory")
    if st is not None and not stat.S_ISREG(st.st_mode):
        try:
            fd = os.open(path, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            error(command, f"cannot write {path}: {_reason(exc)}")
        _write_all(command, path, fd, data, sync=False)
        return
    target = os.path.realpath(path) if os.path.islink(path) else path
    folder, base = os.path.split(target)
    tmp = os.path.join(folder, f".{base}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0),
                     (st.st_mode & 0o7777) if st is not None else 0o666)
    except OSError as exc:
        error(command, f"cannot write {path}: {_reason(exc)}")
    done = False
    try:
        _write_all(command, path, fd, data, sync=True)
        try:
            os.replace(tmp, target)
        except OSError as exc:
            error(command, f"cannot write {path}: {_reason(exc)}")
        done = True
    finally:
        if not done:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _write_all(command: str, path: str, fd: int, data: bytes, *, sync: bool) -> None:
    """Every byte of ``data`` to ``fd`` (closed after), or ``write PATH: reason``, exit 1."""
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        error(command, f"write {path}: {_reason(exc)}")


def open_store_or_fail(command: str | None = None, *, create: bool = True):
    """The default store, or ``caveman-engine CMD: cannot open recovery store: …``, exit 1.
    ``create`` False (a command that only reads: ``stats``, ``retrieve``): a SQLite store
    that is not there yet is read as an empty one, and neither it nor its directory is
    made, as the ``store`` commands do."""
    from .store import MEMORY, StoreError, exists, open_store, resolve_path

    try:
        if not create:
            path = resolve_path(create=False)
            home = os.path.dirname(path) or "."
            # a home that is there but no directory is still the error compress would give
            if not exists(path) and (os.path.isdir(home) or not os.path.lexists(home)):
                return open_store(MEMORY)
        return open_store()
    except StoreError as exc:
        error(command, f"cannot open recovery store: {exc}")


