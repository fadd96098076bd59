"""The ``evals`` command group (loaded lazily by ``caveman_engine.cli``).

``evals run [--fixtures DIR] [--format json|text]`` is spec §1.10 without the pixel gate;
``evals tools`` lives in :mod:`caveman_engine.evals.tools` and is looked up only when asked
for, so the group works whether or not that module is installed.
"""

from __future__ import annotations

import importlib
import sys

import click

RUN_USAGE = "usage: caveman-engine evals run [--fixtures DIR]"
SUBCOMMANDS = "run, tools"


def _fail(message: str, code: int = 1) -> None:
    from ..cli import fail

    fail(message, code)


class _UsageOnError:
    """A click usage error while parsing is the command line's one-line usage error, exit 2."""

    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as exc:
            from ..cli import usage_line

            where = f"{parent.command_path if parent is not None else 'caveman-engine'} {info_name}"
            _fail(usage_line(exc, args, where=where, command=self), 2)


class EvalsGroup(_UsageOnError, click.Group):
    """``run`` plus subcommands defined in sibling modules, imported on first use."""

    lazy = {"tools": ("caveman_engine.evals.tools", "tools_command")}

    def get_command(self, ctx, name):
        cmd = super().get_command(ctx, name)
        if cmd is not None or name not in self.lazy:
            return cmd
        module, attr = self.lazy[name]
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name == module:  # not written (or not shipped) yet
                return None
            raise
        cmd = getattr(mod, attr, None)
        return cmd if isinstance(cmd, click.Command) else None

    def list_commands(self, ctx):
        names = set(super().list_commands(ctx))
        for name in self.lazy:
            try:
                if self.get_command(ctx, name) is not None:
                    names.add(name)
            except Exception:  # noqa: BLE001 - a broken sibling must not break `evals --help`
                pass
        return sorted(names)

    def resolve_command(self, ctx, args):
        if not args or self.get_command(ctx, args[0]) is None:
            from ..cmdutil import did_you_mean

            name = args[0] if args else ""
            _fail(f"caveman-engine evals: unknown subcommand: {name} (one of {SUBCOMMANDS})"
                  f"{did_you_mean(name, SUBCOMMANDS.split(', '))}", 2)
        return super().resolve_command(ctx, args)


class RunCommand(_UsageOnError, click.Command):
    pass


def _format_choice():
    from ..cli import FORMAT

    return FORMAT


@click.group("evals", cls=EvalsGroup, invoke_without_command=True, no_args_is_help=False,
             context_settings={"help_option_names": ["-h", "--help"]})
@click.pass_context
def evals(ctx: click.Context) -> None:
    """Replay fixtures through the engine and grade the results."""
    if ctx.invoked_subcommand is None:
        _fail(f"caveman-engine evals: missing COMMAND (one of {SUBCOMMANDS})", 2)


@evals.command("run", cls=RunCommand, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--fixtures", "fixtures", metavar="DIR", multiple=True,
              help="Directory with a manifest.yaml (default: the embedded fixtures).")
@click.option("--format", "fmt", type=_format_choice(), default="json",
              help="json: the report (default); text: a table.")
def run_command(fixtures: tuple[str, ...], fmt: str) -> None:
    """Compress every fixture against a fresh in-memory store and grade it.

    Each fixture is compressed (mode compress, or record), its original must come back byte
    for byte, its retention probes are checked (retained / recoverable / lost) and its graders
    run. Prints the report (2-space indented JSON); exits 1 if any fixture failed.

    Unlike the reference, the pixel density gate (the reference's second JSON document) is not
    run or printed: this engine has no pixel renderer. The user's recovery store is never
    opened. See docs/evals.md.
    """
    from .. import evals as _pkg
    from . import run as _run

    if len(fixtures) > 1 or any(not d for d in fixtures):
        _fail(f"caveman-engine evals run: one --fixtures DIR at most ({RUN_USAGE})", 2)
    root = fixtures[0] if fixtures else str(_pkg.FIXTURES_DIR)
    try:
        loaded = _run.load_manifest(root)
        outcomes = _run.run(loaded)
    except _run.EvalError as exc:
        _fail(f"evals: {exc}")
    doc = _run.report(outcomes)
    out = sys.stdout.buffer
    if fmt == "text":
        out.write(_run.render_text(outcomes, doc).encode())
    else:
        out.write(_run.render_json(doc))
    out.flush()
    sys.exit(0 if doc["passed"] else 1)
