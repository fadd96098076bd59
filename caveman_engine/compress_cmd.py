"""``caveman-engine compress``: read, compress (or replay a kept result), write output and
report. Used by the click command and by the console script's fast path, which answers a plain
``compress [--type T] [FILE]`` without importing click."""

from __future__ import annotations

import os
import sys

from .cmdutil import (STRICT_TYPES_ENV, bad_type, bad_value, error, open_store_or_fail, read_input,
                      usage_error, warn, write_file, write_stdout)


def run(paths: tuple[str, ...] | list[str], content_type: str | None, *, strict: bool = False,
        quiet: bool = False, report_path: str | None = None) -> None:
    """Read the input, compress, write the output, then the report. The report file is
    written only once there is a report (replaced only once complete), so a failure anywhere
    (an unreadable input, a usage error, a full stdout) leaves an existing one untouched."""
    path = _path(paths)
    if report_path == "-":  # `-` is where the report goes anyway: stderr, not a file named -
        report_path = None
    data = read_input("compress", path)
    store = open_store_or_fail("compress")
    output, report = _compress(store, data, content_type, strict, quiet)
    store.close()
    write_stdout(output)
    line = report + b"\n"
    if report_path is not None:
        write_file("compress", report_path, line)
    elif not quiet:
        sys.stderr.buffer.write(line)
        sys.stderr.buffer.flush()


def _compress(store, data: bytes, content_type: str | None, strict: bool,
              quiet: bool) -> tuple[bytes, bytes]:
    """A kept result when the same request comes back (only known types are kept, so a hit
    needs no type check), else the engine's."""
    from .results import ResultCache

    cache = ResultCache.beside(store)
    key = cache.key(data, content_type) if cache is not None else None
    if key is not None:
        hit = cache.replay(key, data, store)
        if hit is not None:
            return hit.output, hit.report
    known = _check_type(content_type, strict, quiet)
    from .engine import Engine

    result = Engine(store).compress(data, content_type)
    if result.error is not None and not result.is_clean_passthrough(data):
        error("compress", f"unsafe recovery failure result: {result.error_detail}")
    if key is not None and known:
        cache.save(key, data, result)
    return result.output, result.report()


def _path(paths) -> str | None:
    """At most one FILE (a FILE that cannot be read is reported when it is read)."""
    if not paths:
        return None
    if len(paths) > 1:
        usage_error("compress", f"unexpected argument: {' '.join(paths[1:])} "
                                "(compress reads one FILE)")
    return paths[0]


def _check_type(content_type: str | None, strict: bool, quiet: bool) -> bool:
    """True for a known (or detected) type. An unknown one warns on a terminal, or with
    --strict / CAVEMAN_STRICT_TYPES=1 is a usage error."""
    if content_type in (None, "", "auto"):
        return True
    from . import registry

    if registry.entry(content_type) is None:
        message = bad_type("--type", content_type, [e.type for e in registry.entries()])
        if strict or _strict_env():
            usage_error("compress", message)
        if not quiet and sys.stderr.isatty():
            warn(f"caveman-engine compress: {message}; the input passes through")
        return False
    if content_type in ("toolschema-safe", "toolschema-max"):
        from .catalog import rules

        try:
            rules.select(os.environ.get(rules.ENV), strict_names=True)
        except rules.UnknownRule as exc:
            usage_error("compress", bad_value(rules.ENV, exc.name, rules.ORDER))
    return True


_ON, _OFF = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _strict_env() -> bool:
    """CAVEMAN_STRICT_TYPES: 1 (true, yes, on) or 0 (false, no, off; unset or blank alike);
    any other value is a usage error rather than a setting silently not applied."""
    value = os.environ.get(STRICT_TYPES_ENV, "")
    word = value.strip().lower()
    if not word or word in _OFF:
        return False
    if word in _ON:
        return True
    usage_error("compress", bad_value(STRICT_TYPES_ENV, value, ("1", "0"), also=_ON + _OFF))


def fast_args(args: list[str]) -> tuple[str | None, list[str]] | None:
    """``--type T`` (repeatable, last wins) and plain words: the (type, words) of a compress
    the fast path can answer; None for anything else (help, our switches, unknown options, a
    second FILE), which click then parses with its full error reporting."""
    content_type = None
    words: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--type":
            if i + 1 >= len(args):
                return None
            content_type = args[i + 1]
            i += 2
            continue
        if a.startswith("-") and a != "-":
            return None
        words.append(a)
        i += 1
    if len(words) > 1:
        return None
    return content_type, words
