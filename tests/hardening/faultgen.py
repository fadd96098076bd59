"""Deterministic inputs of the fault tests: routine logs the ``log`` compressor elides; every
fourth one is large (~300 KB) so its INSERT spills pages into the WAL before COMMIT."""

from __future__ import annotations


def fault_input(i: int) -> bytes:
    lines = 2500 if i % 4 == 3 else 30 + i % 50
    return b"".join(
        b"2026-06-01T08:%02d:%02dZ INFO job=%d step ok bytes=%d\n" % (k // 60 % 60, k % 60, i, k * 7)
        for k in range(lines)
    )
