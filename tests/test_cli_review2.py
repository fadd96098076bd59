"""What a second review of the whole command line found, each case through the real console
script as a subprocess, held to the rule docs/cli.md states for it: `-` where a command takes
a path, one wording (and one "did you mean") for every choice value, the proxy's level from
every source, and empty values."""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import tarfile

import pytest

from .conftest import CORPUS, console_script
from .test_cli_rules import _pipeline, big_handle  # noqa: F401 - a fixture

GITHUB = CORPUS / "github.tools.json"


@pytest.fixture
def handle(cli):
    r = cli("compress", "--type", "toolschema", input=GITHUB.read_bytes())
    return json.loads(r.stderr)["recovery_handle"]


# --------------------------------------------------------------------------- store export -

def test_store_export_dash_writes_a_tar_stream_to_stdout(cli, here, handle):
    """`store export -` used to create a directory named `-` and exit 0."""
    r = cli("store", "export", "-")
    assert r.returncode == 0
    assert r.stderr == (b"caveman-engine store export: exported 1 originals (26025 bytes) "
                        b"to stdout\n")
    with tarfile.open(fileobj=io.BytesIO(r.stdout), mode="r:") as tar:
        assert sorted(tar.getnames()) == sorted([handle, "manifest.jsonl"])
        assert tar.extractfile(handle).read() == GITHUB.read_bytes()
    assert not os.path.lexists(here / "-")  # nothing created


def test_store_export_dash_quiet_and_json(cli, here, handle):
    r = cli("store", "export", "-", "-q")
    assert (r.returncode, r.stderr) == (0, b"")
    assert tarfile.open(fileobj=io.BytesIO(r.stdout), mode="r:").getnames()
    r = cli("store", "export", "-", "--format", "json")
    assert r.returncode == 0
    assert r.stderr == (b'caveman-engine store export: {"dest": "-", "format": "tar", '
                        b'"count": 1, "bytes": 26025}\n')


def test_store_export_dash_without_a_store_is_an_empty_archive(cli, here, store_dir):
    r = cli("store", "export", "-")
    assert r.returncode == 0
    assert r.stderr == (f"caveman-engine store export: no recovery store at "
                        f"{store_dir / 'ccr.db'}; the archive holds an empty manifest\n").encode()
    with tarfile.open(fileobj=io.BytesIO(r.stdout), mode="r:") as tar:
        assert tar.getnames() == ["manifest.jsonl"]
    assert not (store_dir / "ccr.db").exists() and not os.path.lexists(here / "-")


def test_store_export_dash_refuses_a_terminal(cli_env, here, handle):
    master, slave = pty.openpty()
    try:
        p = subprocess.run([console_script(), "store", "export", "-"], stdout=slave,
                           stderr=subprocess.PIPE, env=cli_env, timeout=60)
    finally:
        os.close(master)
        os.close(slave)
    assert (p.returncode, p.stderr) == (
        2, b"caveman-engine store export: DEST - writes a tar archive to stdout, which is a "
           b"terminal: redirect it, or name a directory or a .tar file (./- for one named -)\n")
    assert not os.path.lexists(here / "-")


def test_store_export_dash_to_a_reader_that_stops_early_is_141(cli_env, here, big_handle):
    ours, head, err = _pipeline(f"{console_script()} store export -", cli_env)
    assert (ours, head, err) == ("141", "0", b"")


def test_store_export_dash_to_a_full_disk_is_an_error(cli_env, here, handle):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    with open("/dev/full", "wb") as sink:
        p = subprocess.run([console_script(), "store", "export", "-"], stdout=sink,
                           stderr=subprocess.PIPE, env=cli_env, timeout=60)
    assert (p.returncode, p.stderr) == (
        1, b"caveman-engine store export: write stdout: No space left on device\n")


def test_store_export_dot_slash_dash_is_a_directory(cli, here, handle):
    r = cli("store", "export", "./-")
    assert r.returncode == 0 and (here / "-" / handle).is_file()
