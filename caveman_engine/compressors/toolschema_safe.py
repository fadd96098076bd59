"""``toolschema-safe``: tool-catalog rewrites that keep the set of valid tool calls exactly
the same (``caveman_engine.catalog.rules``), compact output in the input's envelope and key
order. ``CAVEMAN_SAFE_RULES`` selects rules (``-defs_inline,-anyof_null`` disables two).
Forced only (never auto-detected); declines input that is not a catalog or a JSON Schema."""

from __future__ import annotations

CONTENT_TYPE = "toolschema-safe"
SAFETY_CLASS = "S4"


def compress(data: bytes) -> bytes | None:
    from ..catalog import safe

    return safe.compress_bytes(data)
