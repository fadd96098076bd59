"""The safe rules: one module per rule, each a rewrite that keeps the set of valid tool calls
exactly the same. Each module defines

    NAME: str          the id used by ``CAVEMAN_SAFE_RULES`` / ``--disable-rule``
    SUMMARY: str       one line for ``docs/catalog.md`` and ``--help``
    def apply(schema, ctx) -> schema          rewrite one schema document (root), or
    def apply_tool(tool, ctx) -> None         (optional) rewrite tool-level members

``schema`` is a private deep copy: rules change it in place and return the root.

Selection: ``CAVEMAN_SAFE_RULES`` is a comma list. ``-name`` disables a rule, ``+name`` (or a
bare ``name`` together with signed entries) enables it; a list of bare names only selects
exactly those rules; ``all`` / ``none`` start from everything / nothing.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from ..schema import Analysis

# Application order matters: cheap annotation rules first, so that structural rules see fewer
# keys; unused definitions go before inlining; $schema last, on the final structure.
ORDER = (
    "desc_whitespace",
    "echo_description",
    "titles",
    "null_default",
    "noop_keywords",
    "allof_single",
    "anyof_null",
    "defs_unused",
    "defs_inline",
    "schema_uri",
)
ENV = "CAVEMAN_SAFE_RULES"


class UnknownRule(ValueError):
    """A rule name that is not one of :data:`ORDER`; ``name`` is that name."""

    def __init__(self, name: str) -> None:
        super().__init__(f"unknown safe rule: {name} (known: {', '.join(ORDER)})")
        self.name = name


@dataclass
class Context:
    """What a rule knows about the schema it rewrites."""

    tool_name: str | None
    strict: bool  # OpenAI strict: true (keep what structured outputs require)
    output: bool  # this is an MCP outputSchema
    analysis: Analysis
    extra: dict[str, Any] = field(default_factory=dict)


def module(name: str) -> ModuleType:
    return importlib.import_module(f"{__name__}.{name}")


def all_rules() -> list[ModuleType]:
    return [module(n) for n in ORDER]


def select(spec: str | None, *, strict_names: bool = False) -> tuple[str, ...]:
    """Rule names enabled by ``spec`` (see module doc). Unknown names raise
    :class:`UnknownRule` when ``strict_names`` (the CLI) and are ignored otherwise."""
    if spec is None or not spec.strip():
        return ORDER
    items = [s.strip() for s in spec.split(",") if s.strip()]
    bare = [s for s in items if s[0] not in "+-" and s not in ("all", "none")]
    signed = [s for s in items if s[0] in "+-"]
    if "none" in items or (bare and not signed and "all" not in items):
        enabled: set[str] = set()
    else:
        enabled = set(ORDER)
    for s in items:
        if s in ("all", "none"):
            continue
        sign, name = (s[0], s[1:]) if s[0] in "+-" else ("+", s)
        name = name.strip().replace("-", "_")
        if name not in ORDER:
            if strict_names:
                raise UnknownRule(name)
            continue
        if sign == "-":
            enabled.discard(name)
        else:
            enabled.add(name)
    return tuple(n for n in ORDER if n in enabled)


def from_env() -> tuple[str, ...]:
    return select(os.environ.get(ENV))
