"""The Python API: caveman_engine.compress / detect / retrieve."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import caveman_engine
from caveman_engine.store import NotFound, Store

from .conftest import CONFORMANCE


def test_compress_retrieve_detect_with_a_store_path(store_dir):
    data = (CONFORMANCE / "toolschema" / "seed_catalog_min.json.in").read_bytes()
    path = str(store_dir / "ccr.db")
    result = caveman_engine.compress(data, "toolschema", store=path)
    assert (result.tokens_before, result.tokens_after) == (436, 366)
    assert result.recovery_handle == "ccr_94e45c3f85f7dbc65d3283ce8e196975"
    assert result.method == "toolschema" and result.lossless_to_model is False
    assert caveman_engine.retrieve(result.recovery_handle, store=path) == data
    with Store(path) as s:
        assert caveman_engine.retrieve(result.recovery_handle, store=s) == data
        with pytest.raises(NotFound):
            caveman_engine.retrieve("ccr_00000000000000000000000000000000", store=s)
    assert caveman_engine.detect(data) == "json"
    assert caveman_engine.detect(b"") == "text"


def test_default_store_comes_from_the_environment(store_dir):
    code = (
        "import caveman_engine, sys\n"
        "r = caveman_engine.compress(b'[' + b'{\"id\":1},' * 20 + b'{\"id\":2}]')\n"
        "assert caveman_engine.retrieve(r.recovery_handle).startswith(b'[')\n"
        "print(r.recovery_handle)\n"
    )
    env = dict(os.environ, CAVEMAN_CCR_DB=str(store_dir / "ccr.db"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr
    handle = out.stdout.decode().strip()
    with Store(str(store_dir / "ccr.db")) as s:
        assert s.get(handle).startswith(b"[")


def test_unknown_type_only_counts():
    r = caveman_engine.compress(b"hello world", "no-such-type", store=":memory:")
    assert r.output == b"hello world" and r.recovery_handle is None
    assert r.tokens_before == r.tokens_after == 2 and r.content_type == "no-such-type"
