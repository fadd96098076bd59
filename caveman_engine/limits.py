"""Input limits shared by the CLI and the engine (kept import-light for `detect`)."""

from __future__ import annotations

MAX_INPUT = 64 << 20  # 67,108,864 bytes: accepted; one more byte is refused


class InputTooLarge(ValueError):
    def __init__(self) -> None:
        super().__init__(f"cave_input_too_large: stdin exceeds {MAX_INPUT} bytes")


def check_size(data: bytes) -> None:
    if len(data) > MAX_INPUT:
        raise InputTooLarge()


def read_bounded(stream) -> bytes:
    """Read a binary stream to its end, refusing more than MAX_INPUT bytes (the rest is not
    drained). Raises InputTooLarge, or OSError from the stream."""
    data = stream.read(MAX_INPUT + 1)
    if len(data) > MAX_INPUT:
        raise InputTooLarge()
    return data


def read_path(path: str) -> bytes:
    """A file's bytes, refusing more than MAX_INPUT. Raises InputTooLarge or OSError."""
    with open(path, "rb") as f:
        return read_bounded(f)
