"""Compressors: one module per content type.

A compressor module is a pure function of bytes. It never counts tokens, never touches the
recovery store, never prints. It defines three things:

    CONTENT_TYPE: str    the type key it is registered under (``registry.toml``)
    SAFETY_CLASS: str    "S0".."S4"; every shipped compressor is "S4" (lossy, needs CCR)
    def compress(data: bytes) -> bytes | Compressed | None

``compress`` returns the rewritten bytes, a :class:`Compressed` when it needs to report more
than bytes (a method name other than its content type, ``lossless_to_model``, recovery
metadata), or ``None`` to decline. Raising is also a decline: the engine catches everything and
passes the input through — except in strict mode (``CAVEMAN_STRICT=1``, on in the test suite and
the fuzzers), where an exception is a bug to be seen: it propagates as :class:`CompressorCrash`. Deciding whether the output is worth emitting (fewer tokens, not
byte-identical) belongs to the engine, not to the compressor.

The module for type ``t`` is ``caveman_engine.compressors.<t with '-' replaced by '_'>``; the
registry imports it only when that type is used.
"""

from __future__ import annotations

import os

from ..records import Frozen

STRICT_ENV = "CAVEMAN_STRICT"


def strict() -> bool:
    """``CAVEMAN_STRICT=1``: a compressor (or token counter) that raises is not a decline."""
    return os.environ.get(STRICT_ENV, "") == "1"


class CompressorCrash(RuntimeError):
    """Strict mode: the compressor for ``content_type`` raised instead of declining."""

    def __init__(self, content_type: str, exc: BaseException) -> None:
        self.content_type = content_type
        super().__init__(f"the {content_type} compressor raised {type(exc).__name__}: {exc}")


class Compressed(Frozen):
    """What a compressor returns when it has more to say than bytes. Immutable, with the
    ``==``, hash and ``repr`` of the frozen dataclass it was (a plain class: defining a
    dataclass costs start-up time)."""

    __slots__ = _fields = ("data", "method", "lossless_to_model", "metadata")
    data: bytes
    method: str | None
    lossless_to_model: bool | None
    metadata: bytes | None

    def __init__(self, data: bytes, method: str | None = None,
                 lossless_to_model: bool | None = None, metadata: bytes | None = None) -> None:
        self._init(data, method, lossless_to_model, metadata)

