"""Nothing is ever lost: for every corpus catalog and every conformance input, compressing
(auto-detected and forced) then retrieving the handle gives the input back byte for byte;
without a handle the output is the input itself."""

from __future__ import annotations

import pytest

from caveman_engine.engine import Engine
from caveman_engine.store import Store

from .conftest import CONFORMANCE, CORPUS

FILES = sorted(CORPUS.rglob("*.json")) + sorted(CONFORMANCE.glob("*/*.in"))


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    d = tmp_path_factory.mktemp("roundtrip")
    d.chmod(0o700)
    with Store(str(d / "ccr.db")) as s:
        yield Engine(s)


def _types(path) -> list[str | None]:
    if path.parent.name in ("corpus", "formats") or path.parent.name == "toolschema":
        return [None, "toolschema", "toolschema-annotations"]
    return [None]


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_compress_then_retrieve_is_byte_exact(engine, path):
    data = path.read_bytes()
    for ctype in _types(path):
        result = engine.compress(data, ctype)
        if result.recovery_handle is None:
            assert result.output == data
            assert result.tokens_after == result.tokens_before
        else:
            assert result.tokens_after < result.tokens_before
            assert engine.retrieve(result.recovery_handle) == data
