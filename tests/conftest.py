"""Shared fixtures: the real console script, run as a subprocess against a fresh store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pytest

# Strict mode for the whole suite and every process it starts: a compressor that raises is a
# failure to see, not the fail-closed pass-through users get.
os.environ["CAVEMAN_STRICT"] = "1"

TESTS = Path(__file__).resolve().parent
CONFORMANCE = TESTS / "conformance"
CORPUS = TESTS / "corpus"


def console_script() -> str:
    """The installed ``caveman-engine`` console script beside the running interpreter (the
    virtualenv under test). Never looked up on PATH: that could be another installation."""
    beside = Path(sys.executable).with_name("caveman-engine")
    if not beside.exists():
        raise RuntimeError(f"caveman-engine is not installed beside {sys.executable}; "
                           "install the project into this interpreter's environment")
    return str(beside)


@dataclass
class Run:
    returncode: int
    stdout: bytes
    stderr: bytes


@pytest.fixture(scope="session")
def rank_cache_dir(tmp_path_factory) -> Path:
    """One tokenizer rank cache for the whole session (fresh stores per test otherwise)."""
    d = tmp_path_factory.mktemp("rankcache")
    d.chmod(0o700)
    return d


@pytest.fixture
def store_dir(tmp_path) -> Path:
    d = tmp_path / "store"
    d.mkdir(mode=0o700)
    return d


@pytest.fixture
def cli_env(store_dir, rank_cache_dir) -> dict:
    """The environment the ``cli`` fixture runs with: a fresh store, the session's rank cache."""
    env = {k: v for k, v in os.environ.items() if k != "CAVE_ENGINE_TOON"}
    env["CAVEMAN_CCR_DB"] = str(store_dir / "ccr.db")
    env["CAVEMAN_CACHE_DIR"] = str(rank_cache_dir)
    return env


@pytest.fixture
def here(tmp_path, monkeypatch):
    """Run in a temp dir holding a.json and tools.json (the github catalog), so relative
    names are what a user types."""
    (tmp_path / "a.json").write_bytes(b'{"a": 1}')
    (tmp_path / "tools.json").write_bytes((CORPUS / "github.tools.json").read_bytes())
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def upstream():
    """The fake model API (tests/fixtures/proxy/fake_upstream.py) alone on loopback: it
    records every request that reaches it."""
    from tests.fixtures.proxy.harness import Harness

    h = Harness(proxy=False).start()
    yield h
    h.stop()


@pytest.fixture
def proxy_env(store_dir, rank_cache_dir, tmp_path) -> dict:
    """The environment for a ``caveman-engine proxy`` subprocess: none of the caller's
    ``CAVEMAN_*`` / ``CAVE_*`` settings (``CAVEMAN_STRICT`` aside) nor provider keys; a fresh
    store and Caveman home, the session's rank cache."""
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith(("CAVEMAN_", "CAVE_")) or k.endswith("_API_KEY"))
           or k == "CAVEMAN_STRICT"}
    env["CAVEMAN_CCR_DB"] = str(store_dir / "ccr.db")
    env["CAVEMAN_CACHE_DIR"] = str(rank_cache_dir)
    env["CAVEMAN_HOME"] = str(tmp_path / "home")
    return env


@pytest.fixture
def cli(cli_env):
    """Run the real CLI: ``cli(*args, input=b"...", env={...})`` against a fresh store."""

    def run(*args: str, input: bytes = b"", env: dict | None = None, timeout: float = 120) -> Run:
        full_env = dict(cli_env)
        full_env.update(env or {})
        for k, v in list(full_env.items()):
            if v is None:
                del full_env[k]
        p = subprocess.run(
            [console_script(), *args], input=input, capture_output=True, env=full_env,
            timeout=timeout,
        )
        return Run(p.returncode, p.stdout, p.stderr)

    return run


@pytest.fixture
def big_handle(cli):
    """The handle and bytes of a stored original large enough that ``| head -c1`` closes the
    pipe while the command is still writing."""
    data = json.dumps({"rows": [{"id": i, "name": f"n{i}"} for i in range(100_000)]}).encode()
    r = cli("compress", input=data)
    return json.loads(r.stderr)["recovery_handle"], data


def head_pipeline(command: str, env: dict) -> tuple[str, str, bytes]:
    """``command | head -c1`` in a real shell: the exit statuses of both sides, and stderr."""
    script = f'{command} | head -c1 >/dev/null; echo "${{PIPESTATUS[0]}} ${{PIPESTATUS[1]}}"'
    p = subprocess.run(["bash", "-c", script], capture_output=True, env=env, timeout=120)
    ours, head = p.stdout.decode().split()
    return ours, head, p.stderr


@lru_cache(maxsize=1)
def token_counter():
    """The engine's own o200k_base counter (no rank cache on disk)."""
    from caveman_engine import tokens

    return tokens.make_counter(None)


@pytest.fixture(scope="module")
def counter(tmp_path_factory):
    """A fresh o200k_base counter per test module, with its own rank cache written."""
    from caveman_engine import tokens

    d = tmp_path_factory.mktemp("rc")
    d.chmod(0o700)
    c = tokens.O200kCounter(d)
    c.load()
    return c


@pytest.fixture(scope="module")
def encoder(counter):
    """tiktoken's encoder, built from ``counter``'s rank cache: the reference for counts."""
    return counter.encoding()


def count_tokens(data: bytes) -> int:
    return token_counter().count(data)


def gate(output: bytes | None, data: bytes) -> bytes:
    """What the engine emits for a compressor's ``output`` on an unwrapped ``data``: the output
    when it differs and has fewer tokens, else the input (spec §2.3 step 9)."""
    if output is None or output == data or count_tokens(output) >= count_tokens(data):
        return data
    return output


def general_cases(*types: str) -> list[dict]:
    """The general suite's ``compress`` cases whose expected report names one of ``types``;
    each case gains an ``id``: the input name, plus the forced type if any."""
    out = []
    folder = CONFORMANCE / "general"
    for line in (folder / "cases.jsonl").read_text().splitlines():
        case = json.loads(line)
        if case["args"][0] != "compress":
            continue
        if json.loads(case["stderr"])["content_type"] not in types:
            continue
        forced = " ".join(case["args"][1:])
        case["id"] = case["case"] + (f" {forced}" if forced else "")
        out.append(case)
    return out
