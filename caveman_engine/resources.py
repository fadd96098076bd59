"""Data files shipped beside the code: ``registry.toml`` and the store's migrations.

In the repository they live at the top level (``registry.toml``, ``store/``); the wheel carries
them inside the package (``caveman_engine/registry.toml``, ``caveman_engine/_store/``).
"""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def registry_path() -> Path:
    shipped = _PKG / "registry.toml"
    return shipped if shipped.is_file() else _PKG.parent / "registry.toml"


def migrations_dir() -> Path:
    shipped = _PKG / "_store"
    return shipped if shipped.is_dir() else _PKG.parent / "store"
