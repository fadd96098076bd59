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

from __future__ import annotations

import os
import sys

try:  # the C module behind `signal`, whose enum wrappers cost start-up time
    from _signal import SIGINT, signal as _set_handler
except ImportError:  # pragma: no cover
    from signal import SIGINT, signal as _set_handler

from . import stdio

# The reference's prefixes for a failed stdout write (spec §1.3 and the store spec's retrieve).
_WRITE_PREFIX = {"retrieve": ""}


class Interrupted(BaseException):
    """SIGINT. Not a KeyboardInterrupt, which click would catch and answer on its own."""


def _interrupt(signum, frame) -> None:
    raise Interrupted


def main() -> None:
    stdio.install()
    _set_handler(SIGINT, _interrupt)
    args = sys.argv[1:]
    command = args[0] if args and not args[0].startswith("-") else None
    fast = False
    try:
        try:
            code, fast = _dispatch(args)
        except SystemExit as exc:
            code = _exit_code(exc.code)
        stdio.flush()
    except stdio.OutputError as exc:
        if exc.broken_pipe:
            stdio.die_of_sigpipe()
        prefix = _WRITE_PREFIX.get(command, f"{command}: " if command else "caveman-engine: ")
        stdio.say(f"{prefix}{exc}")
        code, fast = 1, False
    except (Interrupted, KeyboardInterrupt):
        stdio.say("caveman-engine: interrupted")
        code, fast = 130, False
    except Exception as exc:  # a bug: still one line (a traceback too in strict mode)
        if os.environ.get("CAVEMAN_STRICT") == "1":
            import traceback

            traceback.print_exc()
        name = command or "caveman-engine"
        crash = type(exc).__name__ == "CompressorCrash"
        stdio.say(f"{name}: {exc}" if crash else f"{name}: internal error: {type(exc).__name__}: {exc}")
        code, fast = 1, False
    if fast:
        # A fast-path command that got here has flushed its output and closed what it
        # opened, and started no thread: the interpreter's teardown (freeing every module
        # and object) would only add some 5-8 ms to a command that takes 40-70 ms.
        os._exit(code)
    sys.exit(code)


def _dispatch(args: list[str]) -> tuple[int, bool]:
    """The exit code, and whether the command was answered without the click CLI."""
    if args[:1] == ["detect"] and not {"-h", "--help"} & set(args[1:]):
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


def _exit_code(code) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    stdio.say(str(code))
    return 1


def run_detect(args: list[str]) -> int:
    """``detect [FILE]...``: one file (or stdin) prints its type; several print
    ``FILE<TAB>type`` lines. A FILE that cannot be read is one error line (exit 1); the others
    still print. A word starting with ``-`` (other than ``-``, and before ``--``) is a usage
    error, exit 2."""
    from .cmdutil import TERMINAL_USAGE, cannot_read, did_you_mean
    from .detect import detect
    from .limits import MAX_INPUT, InputTooLarge, read_bounded, read_path

    paths = []
    for i, a in enumerate(args):
        if a == "--":
            paths += args[i + 1:]
            break
        if a.startswith("-") and a != "-":
            stdio.say(f"caveman-engine detect: no such option: {a}"
                      + did_you_mean(a, ["--help"]))
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
        try:
            data = read_bounded(sys.stdin.buffer) if p == "-" else read_path(p)
        except InputTooLarge as exc:
            stdio.say(f"read stdin: {exc}" if p == "-" else
                      f"detect: {p}: larger than {MAX_INPUT} bytes")
            code = 1
            continue
        except OSError as exc:
            stdio.say(f"detect: read stdin: {exc.strerror or exc}" if p == "-"
                      else cannot_read("detect", p, exc))
            code = 1
            continue
        sys.stdout.write(f"{p}\t{detect(data)}\n" if several else detect(data) + "\n")
    return code
