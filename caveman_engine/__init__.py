"""caveman-engine: compress what AI agents send to models, keep every original recoverable.

    >>> import caveman_engine
    >>> result = caveman_engine.compress(catalog_bytes, type="toolschema")
    >>> result.output, result.recovery_handle
    >>> caveman_engine.retrieve(result.recovery_handle) == catalog_bytes
    True

The functions here use the default recovery store (``CAVEMAN_CCR_DB`` / ``CAVEMAN_HOME`` /
``~/.caveman/ccr.db``); build an :class:`~caveman_engine.engine.Engine` with your own
:class:`~caveman_engine.store.Store` to choose another.
"""

# No `from __future__ import annotations`: its import would be the first thing the console
# script runs of ours, before launcher.py can catch Ctrl-C (see there).
__version__ = "0.1.0"

__all__ = ["compress", "detect", "retrieve", "__version__"]



def compress(data: bytes, type: str | None = None, *, store=None):
    """Compress ``data`` (auto-detected, or forced ``type``; ``None`` detects). The original is
    kept in ``store`` (a :class:`~caveman_engine.store.Store` or a path; default: the default
    store). Returns an :class:`~caveman_engine.engine.Result`."""
    return _engine(store).compress(data, type)


def __getattr__(name: str):
    # `caveman_engine.detect(data)`: the detect module is callable (see detect.py); loaded on
    # first use so that importing the package stays cheap for the console script.
    if name == "detect":
        import importlib

        return importlib.import_module(f"{__name__}.detect")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def retrieve(handle: str, *, store=None) -> bytes:
    """The exact original bytes stored under ``handle`` (raises ``store.NotFound``)."""
    return _engine(store).retrieve(handle)


def _engine(store):
    from .engine import Engine, default_engine
    from .store import StoreBase, open_store

    if store is None:
        return default_engine()
    return Engine(store if isinstance(store, StoreBase) else open_store(str(store)))
