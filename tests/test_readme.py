"""README's shell examples, run as written.

Each example is taken from README.md itself and run with bash in a temporary directory that
holds a copy of examples/, the files the "Everyday use" lines name (tools.json: the example
catalog; big.log: a real dpkg log from the conformance vectors), a `kubectl` stand-in that
prints that log, `.venv` pointing at the environment under test, and a store of its own
(CAVEMAN_CCR_DB, CAVEMAN_CACHE_DIR). `caveman-engine` is the console script under test, first on
PATH.

Not run here: the installs of the Set-up commands (`python3 -m venv`, `pip install`, `npm ci`:
network and minutes) and the long hardening and benchmark commands. The test-suite command is
checked against `.ci/run`, which must run exactly it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import CONFORMANCE, console_script

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
LOG = CONFORMANCE / "general" / "log__dpkg-tail.log.in"


def _section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end if end != -1 else len(README)]


def _blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def _console(block: str) -> list[tuple[str, str]]:
    """The ``$ command`` lines of a console block, each with the output shown under it."""
    steps: list[tuple[str, str]] = []
    for line in block.splitlines(keepends=True):
        if line.startswith("$ "):
            steps.append((line[2:].rstrip("\n"), ""))
        else:
            steps[-1] = (steps[-1][0], steps[-1][1] + line)
    return steps


@pytest.fixture
def sandbox(tmp_path, rank_cache_dir):
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    shutil.copy(ROOT / "examples" / "tools.json", tmp_path / "tools.json")
    shutil.copy(LOG, tmp_path / "big.log")
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    kubectl = bin_dir / "kubectl"
    kubectl.write_text(f"#!/bin/sh\nexec cat {LOG}\n")
    kubectl.chmod(0o755)
    (tmp_path / ".venv").symlink_to(Path(console_script()).parent.parent)
    store = tmp_path / "store"
    store.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CAVEMAN_", "CAVE_"))}
    env.update({
        "PATH": os.pathsep.join([str(Path(console_script()).parent), str(bin_dir),
                                 env.get("PATH", "")]),
        "CAVEMAN_CCR_DB": str(store / "ccr.db"),
        "CAVEMAN_CACHE_DIR": str(rank_cache_dir),
        "CAVEMAN_STRICT": "1",
    })

    def run(command: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env,
                              capture_output=True, timeout=120)

    run.dir = tmp_path
    return run


def test_the_headline_example(sandbox):
    (block,) = _blocks(README[:README.index("\n## ")], "console")
    steps = _console(block)
    assert len(steps) == 2
    for command, shown in steps:
        r = sandbox(command)
        assert r.returncode == 0, (command, r.stderr)
        # a terminal shows the report (stderr) and stdout together
        assert (r.stderr + r.stdout).decode() == shown, command
    report = json.loads(_console(block)[0][1])
    assert report["recovery_handle"] in _console(block)[1][0]
    minified = (sandbox.dir / "tools.min.json").read_bytes()
    assert 0 < len(minified) < len((sandbox.dir / "examples" / "tools.json").read_bytes())


def test_set_up_is_two_commands_and_the_main_job_runs(sandbox):
    blocks = _blocks(_section("Set-up"), "sh")
    assert len(blocks) == 2 and all(b.count("\n") == 1 for b in blocks)
    main_job = blocks[0].strip()
    install, _, job = main_job.rpartition(" && ")
    assert install == "python3 -m venv .venv && .venv/bin/pip install ."
    r = sandbox(job)  # `.venv` is the environment under test
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stderr)
    assert (report["content_type"], report["method"]) == ("toolschema", "toolschema")
    assert report["tokens_after"] < report["tokens_before"]


def test_ci_runs_exactly_the_readme_test_command():
    command = _blocks(_section("Set-up"), "sh")[1].strip()
    assert "(cd tests/npm && npm ci " in command
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    steps = [line for line in ci if line.strip() and not line.lstrip().startswith("#")]
    assert steps[-1] == command
    assert "npm ci" not in "\n".join(steps[:-1])


def test_everyday_use(sandbox):
    (block,) = _blocks(_section("Everyday use"), "sh")
    lines = [line for line in block.splitlines() if line.strip()]
    results = {}
    for line in lines:
        r = sandbox(line)
        assert r.returncode == 0, (line, r.stderr)
        results[line.split("#")[0].strip()] = r
    d = sandbox.dir
    detect = results["caveman-engine detect tools.json big.log"]
    assert detect.stdout == b"tools.json\tjson\nbig.log\tlog\n"
    catalog = results["caveman-engine compress --type toolschema tools.json > small.json"]
    assert json.loads(catalog.stderr)["method"] == "toolschema"
    assert 0 < (d / "small.json").stat().st_size < (d / "examples" / "tools.json").stat().st_size
    top = results["caveman-engine compress --type toolschema-max tools.json > max.json"]
    assert json.loads(top.stderr)["content_type"] == "toolschema-max"
    assert (d / "max.json").stat().st_size <= (d / "small.json").stat().st_size
    piped = results["kubectl logs pod | caveman-engine compress -q"]
    assert piped.stderr == b"" and 0 < len(piped.stdout) < LOG.stat().st_size
    report = json.loads((d / "report.json").read_bytes())
    assert report["content_type"] == "log" and "recovery_handle" in report
    assert (d / "small.log").read_bytes() == piped.stdout
    assert (d / "tools.json").read_bytes() == (d / "examples" / "tools.json").read_bytes()
    stats = results["caveman-engine stats --format text"].stdout.decode().splitlines()
    assert stats[0].split() == ["content", "type", "count", "before", "after", "saved"]
    # two originals, each kept once under its content-addressed handle: the catalog, the log
    assert stats[1].split()[:2] == ["total", "2"]


def test_the_everyday_handle_is_the_example_catalogs(sandbox):
    """The handle README retrieves is the one the example catalog really gets."""
    r = sandbox("caveman-engine compress --type toolschema examples/tools.json > /dev/null")
    handle = json.loads(r.stderr)["recovery_handle"]
    assert f"caveman-engine retrieve {handle} -o tools.json" in _section("Everyday use")
    assert f"caveman-engine retrieve {handle} |" in README
