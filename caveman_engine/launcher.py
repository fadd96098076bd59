"""The console script's entry point.

`caveman-engine detect` is called once per file by shell pipelines, so its cold start matters:
it ignores its arguments and needs neither click nor the store, so it is answered here without
importing them. Every other command (and `detect --help`) goes to the click CLI.
"""

from __future__ import annotations

import sys


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["detect"] and not {"-h", "--help"} & set(args[1:]):
        sys.exit(_detect())
    from .cli import main as cli_main

    cli_main()


def _detect() -> int:
    from .detect import detect
    from .limits import InputTooLarge, read_bounded

    try:
        data = read_bounded(sys.stdin.buffer)
    except InputTooLarge as exc:
        sys.stderr.write(f"read stdin: {exc}\n")
        return 1
    except OSError as exc:
        sys.stderr.write(f"detect: read stdin: {exc}\n")
        return 1
    try:
        sys.stdout.write(detect(data) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        return 1
    return 0
