"""The ``caveman-engine`` command line: parses arguments, calls the library, prints what it
returns. Every error is one line on stderr; every usage error (an unknown option, a value an
option does not take, a missing or extra argument) is worded by :func:`usage_line` and exits 2.
The reference's behaviour is kept where a conformance vector pins it (docs/cli.md lists
where)."""

from __future__ import annotations

import re
import sys

import click

from . import __version__

from .cmdutil import (  # noqa: F401  (re-exported for the command modules)
    COMPRESS_USAGE,
    RETRIEVE_USAGE,
    STRICT_TYPES_ENV,
    TOON_USAGE,
    bad_value,
    did_you_mean,
    error,
    fail,
    json_bytes,
    line,
    open_store_or_fail,
    option_problem,
    read_input,
    text_bytes,
    usage_error,
    warn,
    write_file,
    write_stdout,
)


class Choice(click.Choice):
    """A choice whose refusal is worded by :func:`cmdutil.bad_value` (with "did you mean").
    ``aliases`` are accepted spellings not shown in --help, mapped to a choice."""

    def __init__(self, choices, aliases: dict[str, str] | None = None) -> None:
        super().__init__(choices)
        self.aliases = aliases or {}

    def convert(self, value, param, ctx):
        value = self.aliases.get(value, value)
        if value in self.choices:
            return value
        flag = max(param.opts, key=len) if param is not None and param.opts else "value"
        raise click.UsageError(bad_value(flag, str(value), self.choices, also=self.aliases),
                               ctx)


FORMAT = Choice(["text", "json"])
CONTEXT = {"help_option_names": ["-h", "--help"], "terminal_width": 100,
           "max_content_width": 100}


class CavemanGroup(click.Group):
    """Click group whose usage errors are one line, worded like the reference engine."""

    def main(self, args=None, prog_name=None, **extra):  # noqa: D401
        args = list(sys.argv[1:] if args is None else args)
        if args[:1] == ["--version"] and args[1:]:
            fail(line(None, f"unexpected argument: {' '.join(args[1:])}"), 2)
        check_words(self, args, "caveman-engine")
        try:
            rv = super().main(args=args, prog_name=prog_name or "caveman-engine",
                              standalone_mode=False, **extra)
        except click.UsageError as exc:
            self._usage_error(exc, args)
        except click.exceptions.Abort:
            from .launcher import command_path

            fail(line(command_path(args), "aborted"))
        sys.exit(rv or 0)

    def _usage_error(self, exc: click.UsageError, args: list[str]) -> None:
        if isinstance(exc, NoSubcommand):
            # the reference's wording (spec §1.1), with the closest command
            fail(f"unknown caveman-engine subcommand: {exc.name}"
                 f"{did_you_mean(exc.name, self.list_commands(None))}", 2)
        name = args[0] if args else ""
        command = self.get_command(None, name) if name and not name.startswith("-") else None
        fail(usage_line(exc, args, command=command), 2)

    # Commands that live beside their feature, imported only when used.
    lazy = {
        "mcp": "caveman_engine.mcp.cli:mcp_command",
        "measure": "caveman_engine.catalog.cli:measure",
        "check": "caveman_engine.catalog.cli:check",
        "diff": "caveman_engine.catalog.cli:diff",
        "verify": "caveman_engine.catalog.cli:verify",
        "evals": "caveman_engine.evals.cli:evals",
        "proxy": "caveman_engine.proxy.cli:proxy_command",
        "store": "caveman_engine.store_cli:store",
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

    def format_commands(self, ctx, formatter):
        """The command list, without commands whose optional parts are not installed."""
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit=formatter.width - 16)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _option_words(command: click.Command) -> tuple[list[str], set[str], set[str]]:
    """The option words of ``command`` (with -h/--help), those that take no value, those that
    take one."""
    names, flags, valued = ["-h", "--help"], {"-h", "--help"}, set()
    for param in command.params:
        if isinstance(param, click.Option):
            words = param.opts + param.secondary_opts
            names += words
            (flags if param.is_flag or param.count else valued).update(words)
    return names, flags, valued


def check_words(command: click.Command, args: list[str], where: str) -> None:
    """Refuse, before click parses them, the option words click would misread: a single-dash
    word longer than two characters is one word (``-output`` is no ``-o utput``, ``-type`` no
    ``-t ype``), ``--flag=value`` gives a value to an option that takes none. Walks into the
    subcommand named; stops at ``--`` (every word after it is a FILE or an argument) and, for
    a command that takes the rest as its own arguments (mcp), at its first argument."""
    names, flags, valued = _option_words(command)
    group = isinstance(command, click.Group)
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--":
            return
        if word.startswith("-") and word != "-":
            problem = option_problem(word, names, flags)
            if problem is not None:
                fail(f"{where}: {problem}", 2)
            i += 2 if word in valued else 1
            continue
        if group:
            sub = command.get_command(None, word)
            if sub is not None:
                check_words(sub, args[i + 1:], f"{where} {word}")
            return
        if not command.allow_interspersed_args:
            return
        i += 1


def nonempty(what: str):
    """A click callback: an empty value (``--output ''``, ``--type=``) is a usage error that
    says so, ``--output is empty: name a file``, rather than a name nothing has."""

    def check(ctx, param, value):
        values = value if isinstance(value, tuple) else (value,)
        if any(v == "" for v in values):
            raise click.UsageError(f"{max(param.opts, key=len)} is empty: name {what}", ctx)
        return value

    return check


class RequiredSubcommand(click.Group):
    """A group that needs one of its subcommands (``store``, ``evals``, ``toon``): none is
    ``caveman-engine G: missing COMMAND (one of …)``, an unknown one ``caveman-engine G:
    unknown subcommand: X (one of …) (did you mean Y?)``, both exit 2. ``names`` lists the
    subcommands in the order these lines give them."""

    names: tuple[str, ...] = ()

    def __init__(self, *args, **kwargs) -> None:
        kwargs["invoke_without_command"] = True
        kwargs.setdefault("context_settings", CONTEXT)
        kwargs.setdefault("subcommand_metavar", "COMMAND [ARGS]...")
        super().__init__(*args, **kwargs)

    def resolve_command(self, ctx, args):
        name = args[0] if args else ""
        if self.get_command(ctx, name) is None:
            fail(f"{ctx.command_path}: unknown subcommand: {name} (one of "
                 f"{', '.join(self.names)}){did_you_mean(name, self.names)}", 2)
        return super().resolve_command(ctx, args)

    def invoke(self, ctx):
        if not ctx._protected_args:
            fail(f"{ctx.command_path}: missing COMMAND (one of {', '.join(self.names)})", 2)
        return super().invoke(ctx)


def _option_names(command: click.Command | None, ctx) -> list[str]:
    if command is None:
        return []
    names = ["-h", "--help"]
    for param in command.params:
        if isinstance(param, click.Option):
            names += param.opts + param.secondary_opts
    return names


def _given_value(opts: list[str], args: list[str]) -> str | None:
    """The last value given to one of ``opts`` on the command line (``--opt V``, ``--opt=V``)."""
    found = None
    for i, a in enumerate(args):
        if a in opts and i + 1 < len(args):
            found = args[i + 1]
        elif "=" in a and a.split("=", 1)[0] in opts:
            found = a.split("=", 1)[1]
    return found


def _blank(value: str | None) -> bool:
    """A value given on the command line that is empty or only blanks (None: not given)."""
    return value is not None and not value.strip()


def _kind(param_type: click.ParamType) -> str:
    """What a value of ``param_type`` is, for ``--opt is empty: name …``: a number, or the
    type's own upper-case name (``AGE``: an age)."""
    if isinstance(param_type, (click.types.IntParamType, click.types.FloatParamType)):
        return "a number"
    name = param_type.name
    if not name.isupper():
        return "a value"
    return f"{'an' if name[0] in 'AEIOU' else 'a'} {name.lower()}"


def usage_line(exc: click.UsageError, args: list[str] = (), where: str | None = None,
               command: click.Command | None = None) -> str:
    """One line for any click usage error, the same everywhere: ``caveman-engine CMD: ...``,
    with "did you mean" for a mistyped option or choice. ``where`` and ``command`` name the
    command when the error carries no context (click's parser raises some without one)."""
    ctx = exc.ctx
    if ctx is not None and ctx.command_path:
        where, command = ctx.command_path, ctx.command
    elif where is None:
        words = [a for a in list(args)[:1] if not a.startswith("-")]
        where = " ".join(["caveman-engine"] + words)
    if isinstance(exc, click.NoSuchOption):
        message = f"no such option: {exc.option_name}" + did_you_mean(
            exc.option_name, _option_names(command, ctx))
    elif isinstance(exc, click.BadOptionUsage) and "requires an argument" in exc.message:
        message = f"option {exc.option_name} needs a value"
    elif isinstance(exc, click.BadOptionUsage) and "does not take a value" in exc.message:
        message = f"option {exc.option_name} does not take a value"
    elif isinstance(exc, click.MissingParameter) and exc.param is not None:
        param = exc.param
        if isinstance(param, click.Option):
            message = f"missing option {max(param.opts, key=len)}"
        else:
            message = f"missing {param.make_metavar(ctx) if ctx is not None else param.name}"
    elif (isinstance(exc, click.BadParameter) and exc.param is not None and exc.param.opts
          and _blank(_given_value(exc.param.opts, list(args)))):
        # an empty number or age (`--limit ''`), said as every empty value is
        message = f"{max(exc.param.opts, key=len)} is empty: name {_kind(exc.param.type)}"
    elif (isinstance(exc, click.BadParameter) and exc.param is not None
          and isinstance(exc.param.type, click.Choice) and exc.param.opts):
        # a plain click.Choice (ours are worded by Choice.convert)
        flag = max(exc.param.opts, key=len)
        value = _given_value(exc.param.opts, list(args))
        message = (bad_value(flag, value, exc.param.type.choices) if value is not None
                   else exc.format_message())
    else:
        message = exc.format_message()
        extra = re.fullmatch(r"Got unexpected extra arguments? \((.*)\)", message)
        if extra:
            message = f"unexpected argument: {extra.group(1)}"
        elif message[:1].isupper() and not message[1:2].isupper():
            message = message[0].lower() + message[1:]
        message = message.rstrip(".")
    return f"{where}: {message}"


class NoSubcommand(click.UsageError):
    def __init__(self, name: str, ctx) -> None:
        super().__init__(f"unknown caveman-engine subcommand: {name}", ctx)
        self.name = name


class SectionsCommand(click.Command):
    """A command whose help ends with titled sections, built when help is shown."""

    def __init__(self, *args, sections=None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.sections = sections or (lambda: [])

    def format_epilog(self, ctx, formatter) -> None:
        for title, body in self.sections():
            with formatter.section(title):
                if isinstance(body, list):
                    formatter.write_dl(body)
                else:
                    formatter.write_text(body)


GROUP_HELP = """Compress what AI agents send to models; every original stays recoverable.

Tool catalogs, logs, JSON, diffs and terminal output go in; fewer tokens come out, with a
one-line JSON report on stderr. Each lossy rewrite keeps its exact original in a local
SQLite store under a ccr_… handle that `retrieve` gives back byte for byte.

\b
Examples:
  caveman-engine compress --type toolschema examples/tools.json > tools.min.json
  caveman-engine retrieve ccr_1ee03a6d8fe3ec67fc5409c847cf129e > tools.json

Exit codes: 0 success (a pass-through is a success), 1 error, 2 usage error, 3 `verify`
found no difference but lacks evidence for some tool, 130 interrupted; a reader that stops
early (| head) ends a command quietly by SIGPIPE (141), as it ends cat. Every rule: docs/cli.md.
Shell completion: eval "$(_CAVEMAN_ENGINE_COMPLETE=bash_source caveman-engine)" (zsh_source,
fish_source).
"""


@click.group(cls=CavemanGroup, invoke_without_command=True, context_settings=CONTEXT,
             help=GROUP_HELP)
@click.version_option(__version__, "--version", prog_name="caveman-engine")
@click.pass_context
def cli(ctx: click.Context) -> None:
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


def _store_location() -> str:
    return ("CAVEMAN_CCR_DB (a path, or :memory:) if set, else $CAVEMAN_HOME/ccr.db, else "
            "~/.caveman/ccr.db (directory created 0700, file 0600). CAVEMAN_CCR_MAX_BYTES caps "
            "the bytes it keeps (default 512 MiB); at the cap, rewrites pass through and nothing "
            "is evicted. See `caveman-engine store --help`.")


def _compress_sections():
    from . import registry

    types = [(e.type, ("" if e.detected else "[--type only] ") + e.description)
             for e in registry.entries()]
    report = [
        ("content_type", "the detected type, or --type verbatim"),
        ("tokens_before", "o200k_base tokens of the input"),
        ("tokens_after", "tokens of what was written to stdout"),
        ("token_count_basis", "o200k_base (approx-chars/4 if the vocabulary could not load)"),
        ("ratio", "(before - after) / before; 0 on a pass-through"),
        ("basis", "always inferred: a local count, not the provider's"),
        ("recovery_handle", "ccr_… handle of the original (only when rewritten)"),
        ("method", "the transform used (only when rewritten)"),
        ("lossless_to_model", "true only for toon (only when rewritten)"),
        ("error", "cave_ccr_budget_exceeded / cave_ccr_unavailable: the store could not keep "
                  "the original, so the input passed through (still exit 0)"),
    ]
    return [
        ("Content types", types),
        ("The report (one JSON line on stderr, fields in this order)", report),
        ("The recovery store", _store_location()),
        ("Exit codes", "0 output written (rewritten or passed through), 1 error (unreadable "
                       "input, store cannot open, output cannot be written), 2 usage error or "
                       "an unknown --type with --strict."),
        ("Examples", "\b\ncaveman-engine compress --type toolschema tools.json > small.json\n"
                     "kubectl logs pod | caveman-engine compress -q | head"),
    ]


@cli.command(cls=SectionsCommand, sections=_compress_sections, context_settings=CONTEXT,
             short_help="Compress FILE or stdin to stdout; report on stderr.")
@click.option("--type", "content_type", metavar="TYPE", default=None,
              help="Force a content type (see below); default: detect it.")
@click.option("--strict", is_flag=True,
              help=f"Exit 2 on an unknown --type instead of passing the input through "
                   f"(also {STRICT_TYPES_ENV}=1).")
@click.option("-q", "--quiet", is_flag=True, help="No report on stderr.")
@click.option("--report", "report_path", metavar="FILE", callback=nonempty("a file"),
              help="Write the report to FILE instead of stderr (`-`: stderr).")
@click.argument("paths", nargs=-1, metavar="[FILE]")
def compress(content_type: str | None, strict: bool, quiet: bool, report_path: str | None,
             paths: tuple[str, ...]) -> None:
    """Compress FILE (or stdin) to stdout, with a one-line JSON report on stderr.

    The content type is detected unless --type names one. The output is written only when it
    has fewer tokens than the input and its original was stored; otherwise the input passes
    through unchanged. Either way the report says what happened.
    """
    from .compress_cmd import run

    run(paths, content_type, strict=strict, quiet=quiet, report_path=report_path)


@cli.command(context_settings=CONTEXT,
             short_help="Print the content type of each FILE (or of stdin).")
@click.argument("paths", nargs=-1, metavar="[FILE]...")
def detect(paths: tuple[str, ...]) -> None:
    """Print the detected content type of FILE, or of stdin: json, terminal, diff, html,
    tabular, code, log, search-result, config or text.

    With several files, one FILE<TAB>type line each; a FILE that cannot be read is one error
    line (exit 1) and the others still print. `-` is stdin. Nothing is stored and the tokenizer
    is not loaded, so it is fast enough to run once per file in a shell loop.

    \b
    Examples:
      caveman-engine detect build.log
      caveman-engine detect *.json *.log
    """
    from .launcher import run_detect

    sys.exit(run_detect(["--", *paths]))


@cli.command(context_settings=CONTEXT,
             short_help="Print the exact original bytes behind a handle.")
@click.option("-o", "--output", "output", metavar="FILE", callback=nonempty("a file"),
              help="Write to FILE (replaced only once complete) instead of stdout (-: stdout).")
@click.option("-q", "--quiet", is_flag=True, help="No warnings on stderr.")
@click.argument("handle", required=False)
@click.argument("query", required=False)
def retrieve(output: str | None, quiet: bool, handle: str | None, query: str | None) -> None:
    """Print the exact original bytes behind HANDLE.

    With a QUERY, print only the records, rows or paragraphs that match it (BM25), or the
    whole original when that is not shorter.

    \b
    Examples:
      caveman-engine retrieve ccr_1ee03a6d8fe3ec67fc5409c847cf129e -o tools.json
      caveman-engine retrieve ccr_1ee03a6d8fe3ec67fc5409c847cf129e "timeout errors"
    """
    from .engine import Engine
    from .store import InvalidHandle, NotFound, StoreError

    if not handle:
        usage_error("retrieve", f"missing HANDLE ({RETRIEVE_USAGE})")
    store = open_store_or_fail("retrieve", create=False)
    try:
        data = Engine(store, counter=None).retrieve(handle, query)
    except InvalidHandle:
        error("retrieve", f"{handle}: malformed recovery handle")
    except NotFound:
        error("retrieve", f"{handle}: recovery handle not found")
    except StoreError as exc:
        error("retrieve", str(exc))
    if output is not None and output != "-":  # -o -: stdout, as curl -o - (./- for a file)
        write_file("retrieve", output, data)
    else:
        write_stdout(data)


@cli.command(context_settings=CONTEXT, short_help="Token accounting over everything stored.")
@click.option("--format", "fmt", type=FORMAT, default="json", show_default=True,
              help="json: the reference's indented JSON; text: a table.")
@click.option("-q", "--quiet", is_flag=True, help="No warnings on stderr.")
def stats(fmt: str, quiet: bool) -> None:
    """Token accounting over every original in the recovery store: how many, tokens before
    and after, per content type, and the bytes kept against the budget."""
    from .store import StoreError

    store = open_store_or_fail("stats", create=False)
    try:
        summary = store.summary()
    except StoreError as exc:
        error("stats", str(exc))
    write_stdout(summary.to_json() + b"\n" if fmt == "json" else _stats_text(summary).encode())


def _stats_text(summary) -> str:
    rows = [("total", summary.totals)] + sorted(summary.by_content_type.items())
    lines = [f"{'content type':<24}{'count':>8}{'before':>12}{'after':>12}{'saved':>8}"]
    for name, b in rows:
        lines.append(f"{name:<24}{b.count:>8}{b.tokens_before:>12}{b.tokens_after:>12}"
                     f"{b.ratio:>8.1%}")
    used = f"storage: {summary.storage_bytes} bytes"
    if summary.max_storage_bytes:
        used += f" of {summary.max_storage_bytes} ({summary.storage_bytes / summary.max_storage_bytes:.1%})"
    if summary.storage_full:
        used += ", full"
    return "\n".join(lines + [used]) + "\n"


@cli.command(context_settings=CONTEXT,
             short_help="The capability manifest, or every registered type.")
@click.option("--all", "show_all", is_flag=True,
              help="Every registered type, including those outside the manifest.")
@click.option("--format", "fmt", type=FORMAT, default=None,
              help="json or text; default: json for the manifest, text with --all.")
@click.option("-q", "--quiet", is_flag=True, help="No warnings on stderr.")
def registry(show_all: bool, fmt: str | None, quiet: bool) -> None:
    """Print the capability manifest: one line of JSON, identical to the reference engine's.

    With --all, a table of every type we register (safety class, detected or --type only, in
    the manifest or not, one-line description); --all --format json gives the same as a JSON
    array.
    """
    from . import jsonio
    from . import registry as _registry

    fmt = fmt or ("text" if show_all else "json")
    try:
        if fmt == "text":
            write_stdout(_registry.table(manifest_only=not show_all).encode())
        elif show_all:
            write_stdout(jsonio.dumps(_registry.listing(), sort_keys=False, indent=True) + b"\n")
        else:
            write_stdout(_registry.manifest() + b"\n")
    except _registry.RegistryError as exc:
        error("registry", str(exc))


class ToonGroup(RequiredSubcommand):
    names = ("encode", "decode")


TOON_HELP = """Convert JSON to TOON (encode) or TOON back to JSON (decode), FILE or stdin to stdout.

TOON writes uniform arrays of objects as a header and rows, which costs fewer tokens;
encode refuses (exit 1) anything it cannot round-trip exactly.

\b
Examples:
  caveman-engine toon encode users.json > users.toon
  caveman-engine toon decode users.toon
"""


@cli.group(cls=ToonGroup, help=TOON_HELP, short_help="Convert JSON to TOON and back.")
def toon() -> None:
    pass


@toon.command("encode", context_settings=CONTEXT,
              short_help="JSON to TOON (refused when it would not round-trip).")
@click.argument("path", required=False, metavar="[FILE]")
def toon_encode(path: str | None) -> None:
    """Write JSON FILE (or stdin) as TOON on stdout; exit 1, writing nothing, when TOON
    cannot give back exactly the same JSON (invalid JSON, or a nested or non-uniform shape)."""
    from .compressors import toon as _toon

    data = read_input("toon encode", path)
    try:
        out = _toon.encode(data)
    except ValueError:
        error("toon encode", "not losslessly TOON-encodable (invalid JSON, or nested/non-uniform"
                             " shape); keep JSON")
    write_stdout(out)


@toon.command("decode", context_settings=CONTEXT, short_help="TOON back to JSON.")
@click.argument("path", required=False, metavar="[FILE]")
def toon_decode(path: str | None) -> None:
    """Write TOON FILE (or stdin) back as JSON on stdout; exit 1 when it is not valid TOON."""
    from .compressors import toon as _toon

    data = read_input("toon decode", path)
    try:
        out = _toon.decode(data)
    except ValueError:
        error("toon decode", "not valid TOON")
    write_stdout(out)


def main() -> None:
    cli.main()


if __name__ == "__main__":
    main()
