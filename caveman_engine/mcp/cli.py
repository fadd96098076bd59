"""``caveman-engine mcp [--type T] [--fields F,...] [--retrieve-tool] [--max-line BYTES] --
COMMAND [ARGS...]``."""

from __future__ import annotations

import sys

import click

from ..cli import nonempty
from ..limits import MAX_INPUT

# The usage --help shows, named by the one-line error for a missing server command.
USAGE = "usage: caveman-engine mcp [OPTIONS] -- COMMAND [ARGS]..."


def _tool_types() -> list[str]:
    from .. import registry

    return [e.type for e in registry.entries() if "tool_schema" in e.segment_kinds and e.implemented]


def parse_fields(value: str | None) -> tuple[str, ...]:
    """Comma-separated, each trimmed, empties dropped (caveman-shrink's CAVEMAN_SHRINK_FIELDS)."""
    if value is None:
        return ("description",)
    return tuple(f.strip() for f in value.split(",") if f.strip())


@click.command(
    "mcp",
    context_settings={"allow_interspersed_args": False, "help_option_names": ["-h", "--help"]},
    help=(
        "Run an MCP stdio server behind a middleware that shrinks its tools/list, prompts/list, "
        "resources/list and resources/templates/list results. Originals are kept in the "
        "recovery store; each rewritten result carries its handle in "
        '_meta["caveman/recovery_handle"].'
    ),
)
@click.option(
    "--type",
    "tool_type",
    default="toolschema",
    callback=nonempty("a content type"),
    show_default=True,
    metavar="TYPE",
    help="Content type for tool lists (toolschema, toolschema-max, ..., or prose).",
)
@click.option(
    "--fields",
    default=None,
    metavar="F,...",
    help="Fields shrunk with the prose rules in prompt/resource lists (default: description).",
)
@click.option(
    "--retrieve-tool",
    is_flag=True,
    help="Add a caveman_retrieve tool (handle, optional query) answered from the store.",
)
@click.option(
    "--max-line",
    type=click.IntRange(min=1),
    default=MAX_INPUT,
    show_default=True,
    metavar="BYTES",
    help="Longest line held whole to be looked at (the engine's input limit by default); a "
    "longer one is forwarded as it comes, unchanged.",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="-- COMMAND [ARGS]...")
def mcp_command(tool_type: str, fields: str | None, retrieve_tool: bool, max_line: int,
                command: tuple[str, ...]):
    from ..cmdutil import bad_type, error, usage_error

    if not command:
        usage_error("mcp", f"missing COMMAND ({USAGE})")
    types = _tool_types()
    if tool_type not in types:
        usage_error("mcp", bad_type("--type", tool_type, types))
    from ..stdio import closed_at_start

    if 1 in closed_at_start:
        error("mcp", "stdout is closed: the client could not read any answer")
    from .proxy import run

    code = run(
        list(command),
        tool_type=tool_type,
        fields=parse_fields(fields),
        retrieve_tool=retrieve_tool,
        max_line=max_line,
    )
    sys.stdout.flush()
    sys.exit(code)
