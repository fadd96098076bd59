"""The ``caveman-engine`` command line: parses arguments, calls the library, prints what it
returns. Every error is one line on stderr; exit codes follow the reference (spec §1)."""

from __future__ import annotations

import sys

import click

from . import __version__

COMPRESS_USAGE = "usage: caveman-engine compress [--type <content-type>]"
RETRIEVE_USAGE = "usage: caveman-engine retrieve <handle> [query]"
TOON_USAGE = "usage: caveman-engine toon encode|decode"


def fail(message: str, code: int = 1) -> None:
    from .stdio import say

    say(message)
    sys.exit(code)


def read_stdin(command: str) -> bytes:
    from .limits import InputTooLarge, read_bounded

    try:
        return read_bounded(sys.stdin.buffer)
    except InputTooLarge as exc:
        fail(f"read stdin: {exc}")
    except OSError as exc:
        fail(f"{command}: read stdin: {exc.strerror or exc}")


def write_stdout(data: bytes) -> None:
    """All of ``data`` or :class:`stdio.OutputError` (reported by the console script)."""
    out = sys.stdout.buffer
    out.write(data)
    out.flush()


def open_store_or_fail():
    from .store import StoreError, open_store

    try:
        return open_store()
    except StoreError as exc:
        fail(f"cannot open recovery store: {exc}")


class CavemanGroup(click.Group):
    """Click group whose usage errors are one line, worded like the reference engine."""

    def main(self, args=None, prog_name=None, **extra):  # noqa: D401
        args = list(sys.argv[1:] if args is None else args)
        try:
            rv = super().main(args=args, prog_name=prog_name or "caveman-engine",
                              standalone_mode=False, **extra)
        except click.UsageError as exc:
            self._usage_error(exc, args)
        except click.exceptions.Abort:
            fail("aborted")
        sys.exit(rv or 0)

    def _usage_error(self, exc: click.UsageError, args: list[str]) -> None:
        cmd = args[0] if args else None
        if isinstance(exc, NoSubcommand):
            fail(f"unknown caveman-engine subcommand: {exc.name}", 2)
        if cmd == "compress":
            if isinstance(exc, click.exceptions.NoSuchOption):
                fail(f"unknown compress flag: {exc.option_name}")
            if isinstance(exc, click.BadOptionUsage) and exc.option_name == "--type":
                fail(COMPRESS_USAGE)
            fail(f"unknown compress flag: {_stray_argument(args[1:])}")
        if cmd == "retrieve":
            fail(RETRIEVE_USAGE)
        if cmd == "toon":
            fail(TOON_USAGE)
        fail(f"caveman-engine{' ' + cmd if cmd else ''}: {exc.format_message()}", 2)

    # Commands that live beside their feature, imported only when used.
    lazy = {
        "mcp": "caveman_engine.mcp.cli:mcp_command",
        "measure": "caveman_engine.catalog.cli:measure",
        "check": "caveman_engine.catalog.cli:check",
        "diff": "caveman_engine.catalog.cli:diff",
        "verify": "caveman_engine.catalog.cli:verify",
        "evals": "caveman_engine.evals.cli:evals",
        "proxy": "caveman_engine.proxy.cli:proxy_command",
    }

    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | set(self.lazy))

    def get_command(self, ctx, name):
        cmd = super().get_command(ctx, name)
        if cmd is None and name in self.lazy:
            module, _, attr = self.lazy[name].partition(":")
            try:
                import importlib

                cmd = getattr(importlib.import_module(module), attr)
            except (ImportError, AttributeError):
                return None
        return cmd

    def resolve_command(self, ctx, args):
        name = args[0] if args else ""
        if self.get_command(ctx, name) is None:
            raise NoSubcommand(name, ctx)
        return super().resolve_command(ctx, args)


def _stray_argument(args: list[str]) -> str:
    """The first compress argument that is neither ``--type`` nor its value."""
    it = iter(args)
    for a in it:
        if a == "--type":
            next(it, None)
        elif not a.startswith("--type="):
            return a
    return ""


class NoSubcommand(click.UsageError):
    def __init__(self, name: str, ctx) -> None:
        super().__init__(f"unknown caveman-engine subcommand: {name}", ctx)
        self.name = name


@click.group(cls=CavemanGroup, invoke_without_command=True,
             context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="caveman-engine")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Compress what AI agents send to models; every original stays recoverable.

    Input comes on stdin, the result goes to stdout, a one-line JSON report to stderr.
    """
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


@cli.command()
@click.option("--type", "content_type", metavar="TYPE", default=None,
              help="Force a content type (e.g. toolschema); default: detect.")
def compress(content_type: str | None) -> None:
    """Compress stdin; original stored under the report's recovery_handle."""
    from .engine import Engine

    data = read_stdin("compress")
    store = open_store_or_fail()
    result = Engine(store).compress(data, content_type)
    if result.error is not None and not result.is_clean_passthrough(data):
        fail(f"compress: unsafe recovery failure result: {result.error_detail}")
    write_stdout(result.output)
    sys.stderr.buffer.write(result.report() + b"\n")
    sys.stderr.buffer.flush()


@cli.command(context_settings={"ignore_unknown_options": True})
@click.argument("ignored", nargs=-1, type=click.UNPROCESSED)
def detect(ignored: tuple[str, ...]) -> None:
    """Print the detected content type of stdin."""
    from .detect import detect as _detect

    write_stdout(_detect(read_stdin("detect")).encode() + b"\n")


@cli.command(context_settings={"ignore_unknown_options": True})
@click.argument("handle", required=False)
@click.argument("query", required=False)
@click.argument("ignored", nargs=-1, type=click.UNPROCESSED)
def retrieve(handle: str | None, query: str | None, ignored: tuple[str, ...]) -> None:
    """Print the exact original bytes behind HANDLE (or the part matching QUERY)."""
    from .engine import Engine
    from .store import StoreError

    if not handle:
        fail(RETRIEVE_USAGE)
    store = open_store_or_fail()
    try:
        data = Engine(store, counter=None).retrieve(handle, query)
    except StoreError as exc:
        fail(f"retrieve: {exc}")
    write_stdout(data)


@cli.command(context_settings={"ignore_unknown_options": True})
@click.argument("ignored", nargs=-1, type=click.UNPROCESSED)
def stats(ignored: tuple[str, ...]) -> None:
    """Print token accounting over the recovery store as JSON."""
    from .store import StoreError

    store = open_store_or_fail()
    try:
        summary = store.summary()
    except StoreError as exc:
        fail(f"stats: {exc}")
    write_stdout(summary.to_json() + b"\n")


@cli.command(context_settings={"ignore_unknown_options": True})
@click.option("--all", "show_all", is_flag=True,
              help="List every registered type, including those outside the manifest.")
@click.argument("ignored", nargs=-1, type=click.UNPROCESSED)
def registry(show_all: bool, ignored: tuple[str, ...]) -> None:
    """Print the capability manifest (JSON), or with --all a table of every type."""
    from . import registry as _registry

    if show_all:
        write_stdout(_registry.table().encode())
        return
    try:
        write_stdout(_registry.manifest() + b"\n")
    except _registry.RegistryError as exc:
        fail(f"registry: {exc}")


@cli.command()
@click.argument("verb", required=False)
def toon(verb: str | None) -> None:
    """Convert JSON to TOON (encode) or back (decode): stdin to stdout."""
    if verb is None:
        fail(TOON_USAGE)
    data = read_stdin("toon")
    try:
        from .compressors import toon as _toon
    except ImportError:
        fail("toon: not available in this build")
    if verb == "encode":
        try:
            out = _toon.encode(data)
        except ValueError:
            fail("toon encode: not losslessly TOON-encodable (invalid JSON, or nested/non-uniform"
                 " shape); keep JSON")
    elif verb == "decode":
        try:
            out = _toon.decode(data)
        except ValueError:
            fail("toon decode: not valid TOON")
    else:
        fail(TOON_USAGE)
    write_stdout(out)


def main() -> None:
    cli.main()


if __name__ == "__main__":
    main()
