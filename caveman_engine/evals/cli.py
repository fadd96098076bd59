"""The ``evals`` command group (loaded lazily by ``caveman_engine.cli``).

``evals run [--fixtures DIR] [--format json|text]`` is spec §1.10 without the pixel gate;
``evals tools`` lives in :mod:`caveman_engine.evals.tools` and is looked up only when asked
for, so the group works whether or not that module is installed.
"""

from __future__ import annotations

import importlib
import sys

import click

from ..cli import RequiredSubcommand, nonempty

SUBCOMMANDS = ("run", "tools")


def _fail(message: str, code: int = 1) -> None:
    from ..cli import fail

    fail(message, code)


class _UsageOnError:
    """A click usage error while parsing is the command line's one-line usage error, exit 2."""

    def make_context(self, info_name, args, parent=None, **extra):
        given = list(args)  # click's parser consumes args
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as exc:
            from ..cli import usage_line

            where = f"{parent.command_path if parent is not None else 'caveman-engine'} {info_name}"
            _fail(usage_line(exc, given, where=where, command=self), 2)


class EvalsGroup(_UsageOnError, RequiredSubcommand):
    """``run`` plus subcommands defined in sibling modules, imported on first use."""

    names = SUBCOMMANDS
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


class RunCommand(_UsageOnError, click.Command):
    pass


def _format_choice():
    from ..cli import FORMAT

    return FORMAT


@click.group("evals", cls=EvalsGroup)
def evals() -> None:
    """Replay fixtures through the engine and grade the results."""


@evals.command("run", cls=RunCommand, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--fixtures", "fixtures", metavar="DIR", default=None,
              callback=nonempty("a directory"),
              help="Directory with a manifest.yaml (default: the embedded fixtures).")
@click.option("--format", "fmt", type=_format_choice(), default="json",
              help="json: the report (default); text: a table.")
def run_command(fixtures: str | None, fmt: str) -> None:
    """Compress every fixture against a fresh in-memory store and grade it.

    Each fixture is compressed (mode compress, or record), its original must come back byte
    for byte, its retention probes are checked (retained / recoverable / lost) and its graders
    run. Prints the report (2-space indented JSON); exits 1 if any fixture failed.

    Unlike the reference, the pixel density gate (the reference's second JSON document) is not
    run or printed: this engine has no pixel renderer. The user's recovery store is never
    opened. See docs/evals.md.
    """
    import os

    from .. import evals as _pkg
    from ..cmdutil import cannot_read, error
    from . import run as _run

    if fixtures == "-":  # a directory cannot come on stdin; ./- names one called -
        _fail("caveman-engine evals run: --fixtures -: fixtures are a directory, not stdin "
              "(./- for one named -)", 2)
    root = fixtures if fixtures is not None else str(_pkg.FIXTURES_DIR)
    manifest = os.path.join(root, _run.MANIFEST)
    try:
        with open(manifest, "rb"):
            pass
    except OSError as exc:
        _fail(cannot_read("evals run", manifest, exc))
    try:
        loaded = _run.load_manifest(root)
        outcomes = _run.run(loaded)
    except _run.EvalError as exc:
        error("evals run", str(exc))
    doc = _run.report(outcomes)
    out = sys.stdout.buffer
    if fmt == "text":
        out.write(_run.render_text(outcomes, doc).encode())
    else:
        out.write(_run.render_json(doc))
    out.flush()
    sys.exit(0 if doc["passed"] else 1)
