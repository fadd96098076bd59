"""Data files shipped beside the code: ``registry.toml`` and the store's migrations.

In the repository they live at the top level (``registry.toml``, ``store/``); the wheel carries
them inside the package (``caveman_engine/registry.toml``, ``caveman_engine/_store/``).

The ``*_location`` functions give plain strings and are what every command's start-up uses;
``migrations_dir`` is the ``pathlib`` version for the PostgreSQL store.
"""

from __future__ import annotations

import os

_PKG = os.path.dirname(os.path.realpath(__file__))


def registry_location() -> str:
    shipped = os.path.join(_PKG, "registry.toml")
    return shipped if os.path.isfile(shipped) else os.path.join(os.path.dirname(_PKG),
                                                                "registry.toml")


def migrations_location() -> str:
    shipped = os.path.join(_PKG, "_store")
    return shipped if os.path.isdir(shipped) else os.path.join(os.path.dirname(_PKG), "store")


def migrations_dir():
    """:func:`migrations_location` as a ``pathlib.Path``."""
    from pathlib import Path

    return Path(migrations_location())
