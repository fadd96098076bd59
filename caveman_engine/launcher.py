"""The console script's entry point.

Every command runs between :func:`stdio.install` and a final flush, so that a short or failed
write to stdout (a full disk, a closed descriptor) ends in one line on stderr and exit 1 instead
of a success, and Ctrl-C ends in one line and exit 130, never in a traceback. A reader that
went away after the bytes it wanted (``| head``) ends the process quietly by SIGPIPE, as it
ends ``cat`` or ``yes``: the shell reports 141.

`caveman-engine detect` is called once per file by shell pipelines and `compress` on every
agent request, so their cold start matters: `detect` and a plain `compress [--type T] [FILE]`
are answered here without importing click (a repeated `compress` does not even load the
tokenizer, see :mod:`results`). Everything else goes to the click CLI.
"""

# Ctrl-C before the command has started (while the modules below load) ends the process as
# SIGINT ends any program that does not catch it: quietly, the shell showing 130. This is the
# first thing the console script runs of ours (the package's __init__ only defines
# functions), before any other import, so that no traceback can come out of a module being
# loaded: `_signal` and `os` are already loaded by the interpreter's start-up, and there is no
# `from __future__ import annotations` (an import) above. What runs before this file, the
# interpreter's own start-up and the lines pip writes into the console script (`import re`),
# is not ours to guard: docs/cli.md says so.
from _signal import SIG_DFL, SIGINT, signal as _set_handler  # keep first
import os


def _die_by_sigint(signum, frame) -> None:
    _set_handler(SIGINT, SIG_DFL)
    os.kill(os.getpid(), SIGINT)
    os._exit(128 + SIGINT)  # pragma: no cover - only if the signal could not end us


_set_handler(SIGINT, _die_by_sigint)

import sys  # noqa: E402

from . import stdio  # noqa: E402

# The subcommands of the groups, to name a command as typed (`store export`) in its lines.
_GROUPS = {"store": ("path", "info", "export", "purge", "vacuum"), "evals": ("run", "tools"),
           "toon": ("encode", "decode")}


class Interrupted(BaseException):
    """SIGINT. Not a KeyboardInterrupt, which click would catch and answer on its own."""


def _interrupt(signum, frame) -> None:
    raise Interrupted


def command_path(args: list[str]) -> str | None:
    """The (sub)command as typed (``compress``, ``store export``), or None for none."""
    if not args or args[0].startswith("-"):
        return None
    first = args[0]
    for word in args[1:]:
        if word == "--" or not word.startswith("-"):
            if word in _GROUPS.get(first, ()):
                return f"{first} {word}"
            break
    return first


def main() -> None:
    args = sys.argv[1:]
    command = command_path(args)
    fast = False
    try:
        _set_handler(SIGINT, _interrupt)  # from here on: one line, exit 130
        stdio.install()
        try:
            code, fast = _dispatch(args)
        except SystemExit as exc:
            code = _exit_code(command, exc.code)
        stdio.flush()
    except stdio.OutputError as exc:
        _set_handler(SIGINT, _die_by_sigint)
        if exc.broken_pipe:
            stdio.die_of_sigpipe()
        stdio.say(_line(command, str(exc)))
        code, fast = 1, False
    except (Interrupted, KeyboardInterrupt):
        _set_handler(SIGINT, _die_by_sigint)
        stdio.say(_line(command, "interrupted"))
        code, fast = 130, False
    except Exception as exc:  # a bug: still one line (a traceback too in strict mode)
        _set_handler(SIGINT, _die_by_sigint)
        if os.environ.get("CAVEMAN_STRICT") == "1":
            import traceback

            traceback.print_exc()
        crash = type(exc).__name__ == "CompressorCrash"
        stdio.say(_line(command, str(exc) if crash
                        else f"internal error: {type(exc).__name__}: {exc}"))
        code, fast = 1, False
    # Done: a Ctrl-C from now on (the interpreter's teardown) ends the process quietly.
    _set_handler(SIGINT, _die_by_sigint)
    if fast:
        # A fast-path command that got here has flushed its output and closed what it
        # opened, and started no thread: the interpreter's teardown (freeing every module
        # and object) would only add some 5-8 ms to a command that takes 40-70 ms.
        os._exit(code)
    sys.exit(code)


def _line(command: str | None, message: str) -> str:
    return f"caveman-engine {command}: {message}" if command else f"caveman-engine: {message}"


def _dispatch(args: list[str]) -> tuple[int, bool]:
    """The exit code, and whether the command was answered without the click CLI."""
    if args[:1] == ["detect"]:
        options = args[1:args.index("--")] if "--" in args else args[1:]
        if not {"-h", "--help"} & set(options):
            return run_detect(args[1:]), True
    if args[:1] == ["compress"]:
        from . import compress_cmd

        plain = compress_cmd.fast_args(args[1:])
        if plain is not None:
            compress_cmd.run(plain[1], plain[0])
            return 0, True
    from .cli import main as cli_main

    cli_main()
    return 0, False


def _exit_code(command: str | None, code) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    stdio.say(_line(command, str(code)))
    return 1


def run_detect(args: list[str]) -> int:
    """``detect [FILE]...``: one file (or stdin) prints its type; several print
    ``FILE<TAB>type`` lines (the name as the bytes it was given). A FILE that cannot be read
    is one error line (exit 1); the others still print. A word starting with ``-`` (other
    than ``-``, and before ``--``) is a usage error, exit 2."""
    from .cmdutil import TERMINAL_USAGE, cannot_read, option_problem, too_large
    from .detect import detect
    from .limits import InputTooLarge, read_bounded, read_path

    paths = []
    for i, a in enumerate(args):
        if a == "--":
            paths += args[i + 1:]
            break
        if a.startswith("-") and a != "-":
            problem = option_problem(a, ["-h", "--help"], flags=("-h", "--help"))
            stdio.say(f"caveman-engine detect: {problem or f'no such option: {a}'}")
            return 2
        paths.append(a)
    if not paths:
        if sys.stdin.isatty():
            stdio.say(TERMINAL_USAGE["detect"])
            return 2
        paths = ["-"]
    several = len(paths) > 1
    code = 0
    for p in paths:
        name = "stdin" if p == "-" else p
        try:
            data = read_bounded(sys.stdin.buffer) if p == "-" else read_path(p)
        except InputTooLarge:
            stdio.say(cannot_read("detect", name, too_large()))
            code = 1
            continue
        except OSError as exc:
            stdio.say(cannot_read("detect", name, exc))
            code = 1
            continue
        sys.stdout.write(f"{p}\t{detect(data)}\n" if several else detect(data) + "\n")
    return code
