"""The compress contract every input must satisfy (checked in-process, real SQLite store)."""

from __future__ import annotations

import os
from pathlib import Path

from caveman_engine import jsonio, registry
from caveman_engine.detect import detect
from caveman_engine.engine import Engine
from caveman_engine.store import Store, handle_for

AUTO = "auto"
DETECTED = frozenset(e.type for e in registry.entries() if e.detected)
# Forced types whose output must be valid JSON whenever they transform (toon: its decoding).
JSON_OUTPUT = frozenset(
    {"json", "toolschema", "toolschema-annotations", "toolschema-safe", "toolschema-max"}
)


def fuzz_types() -> list[str]:
    """Auto-detect plus every registered type whose compressor module exists."""
    return [AUTO] + [e.type for e in registry.entries() if e.implemented]


class RotatingEngine:
    """An engine on a real SQLite store file that is replaced every ``rotate`` stored
    originals, so a 100,000-example run stays far from the storage budget and the disk."""

    def __init__(self, directory: Path, rotate: int = 1500) -> None:
        self.dir = Path(directory)
        self.rotate = rotate
        self.generation = 0
        self.stored = 0
        self._counter = None
        self.engine = self._open()

    def _open(self) -> Engine:
        store = Store(str(self.dir / f"fuzz{self.generation}.db"))
        engine = Engine(store, counter=self._counter)
        self._counter = engine.counter
        return engine

    def stored_one(self) -> None:
        self.stored += 1
        if self.stored >= self.rotate:
            self.engine.store.close()
            for suffix in ("", "-wal", "-shm"):
                try:
                    os.unlink(self.dir / f"fuzz{self.generation}.db{suffix}")
                except FileNotFoundError:
                    pass
            self.generation += 1
            self.stored = 0
            self.engine = self._open()

    def close(self) -> None:
        self.engine.store.close()


def check_compress(rot: RotatingEngine, data: bytes, content_type: str) -> bool:
    """Compress ``data`` and assert the whole contract (AssertionError with context); returns
    whether the input was transformed."""
    engine = rot.engine
    forced = None if content_type == AUTO else content_type
    result = engine.compress(data, forced)  # any exception escaping here fails the test
    ctx = f"type={content_type} len={len(data)} head={data[:80]!r}"
    assert result.error is None, f"store error {result.error_detail} ({ctx})"
    expected_type = content_type if forced else detect(data)
    assert result.content_type == expected_type, ctx
    before = engine.count(data)
    assert result.tokens_before == before, ctx
    if result.recovery_handle is None:
        # pass-through: exactly the input, nothing claimed
        assert result.is_clean_passthrough(data), ctx
        return False
    assert isinstance(result.output, bytes) and result.output != data, ctx
    assert result.tokens_after == engine.count(result.output), ctx
    assert result.tokens_after < result.tokens_before, ctx
    assert result.ratio == (before - result.tokens_after) / before, ctx
    assert result.method, ctx
    assert result.recovery_handle == handle_for(data), ctx
    assert engine.retrieve(result.recovery_handle) == data, f"retrieve not byte-exact ({ctx})"
    assert engine.retrieve(result.recovery_handle, "  ") == data, ctx
    ct = result.content_type
    if ct in JSON_OUTPUT and result.method != "toon":
        from caveman_engine import wrappers

        if not wrappers.unwrap(data)[1]:
            assert jsonio.valid(result.output), f"invalid JSON from {ct} ({ctx})"
    if ct == "toon" or result.method == "toon":
        check_toon(data, result.output, ctx)
    rot.stored_one()
    return True


def check_toon(data: bytes, output: bytes, ctx: str) -> None:
    """TOON claims to be lossless to the data model: decoding gives valid JSON equal to the
    input's value (compact, sorted keys)."""
    from caveman_engine import wrappers
    from caveman_engine.compressors import toon

    if wrappers.unwrap(data)[1]:
        return
    decoded = toon.decode(output)
    assert jsonio.valid(decoded), f"toon decode is not JSON ({ctx})"
    assert decoded == jsonio.dumps(jsonio.loads(data)), f"toon not lossless ({ctx})"
