"""Compressors: one module per content type.

A compressor module is a pure function of bytes. It never counts tokens, never touches the
recovery store, never prints. It defines three things:

    CONTENT_TYPE: str    the type key it is registered under (``registry.toml``)
    SAFETY_CLASS: str    "S0".."S4"; every shipped compressor is "S4" (lossy, needs CCR)
    def compress(data: bytes) -> bytes | Compressed | None

``compress`` returns the rewritten bytes, a :class:`Compressed` when it needs to report more
than bytes (a method name other than its content type, ``lossless_to_model``, recovery
metadata), or ``None`` to decline. Raising is also a decline: the engine catches everything and
passes the input through. Deciding whether the output is worth emitting (fewer tokens, not
byte-identical) belongs to the engine, not to the compressor.

The module for type ``t`` is ``caveman_engine.compressors.<t with '-' replaced by '_'>``; the
registry imports it only when that type is used.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Compressed:
    data: bytes
    method: str | None = None
    lossless_to_model: bool | None = None
    metadata: bytes | None = None
