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

from .conftest import CORPUS, console_script, head_pipeline

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
    ours, head, err = head_pipeline(f"{console_script()} store export -", cli_env)
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


# --------------------------------------------------------------------------- choice values

LEVELS = "off, annotations, toolschema, toolschema-safe, toolschema-max"


@pytest.mark.parametrize("args, line", [
    # an empty choice said `--format : not one of text, json`
    (("stats", "--format", ""), "stats: --format is empty: name one of text, json"),
    (("store", "info", "--format="), "store info: --format is empty: name one of text, json"),
    (("evals", "tools", "--grader", "", "a.json"),
     "evals tools: --grader is empty: name one of lexical, semantic, both, llm"),
    # a level or type a whole part of one choice had no "did you mean"
    (("measure", "--type", "max", "tools.json"),
     "measure: --type max: unknown or unavailable content type (did you mean toolschema-max?)"),
    (("diff", "--type", "safe", "tools.json"),
     "diff: --type safe: unknown or unavailable content type (did you mean toolschema-safe?)"),
    (("evals", "tools", "--type", "max", "a.json"),
     "evals tools: --type max: unknown or unavailable content type (did you mean "
     "toolschema-max?)"),
    (("compress", "--strict", "--type", "max", "a.json"),
     "compress: --type max: unknown or unavailable content type (did you mean "
     "toolschema-max?)"),
    (("mcp", "--type", "max", "--", "cat"),
     "mcp: --type max: unknown or unavailable content type (did you mean toolschema-max?)"),
    (("proxy", "--level", "max"),
     f"proxy: --level max: not one of {LEVELS} (did you mean toolschema-max?)"),
    (("proxy", "--level", ""), f"proxy: --level is empty: name one of {LEVELS}"),
])
def test_every_choice_one_wording(cli, here, args, line):
    r = cli(*args)
    assert (r.returncode, r.stdout, r.stderr.decode()) == (2, b"", f"caveman-engine {line}\n")


@pytest.mark.parametrize("yaml, env, line", [
    ("toolschema_strip: max\n", {},
     f"config c.yaml: toolschema_strip max: not one of {LEVELS} (did you mean toolschema-max?)"),
    ("toolschema_strip: true\n", {}, f"config c.yaml: toolschema_strip true: not one of {LEVELS}"),
    ("toolschema_strip: ''\n", {},
     f"config c.yaml: toolschema_strip is empty: name one of {LEVELS}"),
    ("", {"CAVEMAN_TOOLSCHEMA_STRIP": "max"},
     f"CAVEMAN_TOOLSCHEMA_STRIP max: not one of {LEVELS} (did you mean toolschema-max?)"),
])
def test_the_proxy_level_names_its_source_in_the_same_wording(proxy_env, here, yaml, env, line):
    """The config file and the environment said `unknown level 'max' (did you mean
    'toolschema-max'?)`, unlike every other choice."""
    (here / "c.yaml").write_text(yaml)
    p = subprocess.run([console_script(), "proxy", "--config", "c.yaml", "--listen",
                        "127.0.0.1:0"], env={**proxy_env, **env}, capture_output=True,
                       timeout=30)
    assert (p.returncode, p.stderr.decode()) == (1, f"caveman-engine proxy: {line}\n")


# --------------------------------------------------------------------------- - as a path

def test_retrieve_output_dash_is_stdout(cli, here, handle):
    """`retrieve -o -` wrote a file named `-`."""
    r = cli("retrieve", handle, "-o", "-")
    assert (r.returncode, r.stdout, r.stderr) == (0, GITHUB.read_bytes(), b"")
    assert not os.path.lexists(here / "-")


def test_check_baseline_dash_reads_stdin(cli, here):
    """`check -b -` read a file named `-` (`cannot read -: No such file or directory`)."""
    made = cli("check", "tools.json", "-b", "-", "--update-baseline")
    assert made.returncode == 0
    assert made.stderr == (b"caveman-engine check: wrote the baseline to stdout: 3546 tokens "
                           b"across 26 tools (o200k_base)\n")
    assert json.loads(made.stdout)["total"] == 3546
    assert not os.path.lexists(here / "-")  # it wrote a file named -
    r = cli("check", "tools.json", "-b", "-", input=made.stdout)
    assert (r.returncode, r.stderr) == (0, b"")
    assert r.stdout.startswith(b"check OK: 3546 tokens")
    r = cli("check", "tools.json", "-b", "-", input=b"{}")
    assert (r.returncode, r.stderr) == (2, b"caveman-engine check: baseline stdin is not a "
                                           b"caveman-engine baseline (expected tokenizer and "
                                           b"per-tool token counts)\n")


def test_check_file_and_baseline_cannot_both_be_stdin(cli, here):
    r = cli("check", "-", "-b", "-", input=GITHUB.read_bytes())
    assert (r.returncode, r.stdout, r.stderr) == (
        2, b"", b"caveman-engine check: only one of FILE and --baseline can be stdin\n")


def test_evals_run_fixtures_dash_is_a_usage_error(cli, here):
    r = cli("evals", "run", "--fixtures", "-")
    assert (r.returncode, r.stdout, r.stderr) == (
        2, b"", b"caveman-engine evals run: --fixtures -: fixtures are a directory, not stdin "
                b"(./- for one named -)\n")


# --------------------------------------------------------------------------- empty values

@pytest.mark.parametrize("args, line", [
    # click's `invalid value for '--limit': '' is not a valid integer range`
    (("evals", "tools", "--limit", "", "a.json"), "evals tools: --limit is empty: name a number"),
    (("verify", "--examples=", "a.json", "a.json"), "verify: --examples is empty: name a number"),
    (("check", "tools.json", "-b", "bl.json", "--max-total", ""),
     "check: --max-total is empty: name a number"),
    (("mcp", "--max-line", "", "--", "cat"), "mcp: --max-line is empty: name a number"),
    (("store", "purge", "--older-than", "", "-n"),
     "store purge: --older-than is empty: name an age"),
    # an empty type selected nothing; empty rules fell back to CAVEMAN_SAFE_RULES
    (("store", "purge", "--type", "", "-n"), "store purge: --type is empty: name a content type"),
    (("store", "export", "x.tar", "--type="), "store export: --type is empty: name a content type"),
    (("measure", "--rules", "", "tools.json"),
     "measure: --rules is empty: name safe rules (e.g. -defs_inline,-anyof_null)"),
])
def test_an_empty_value_says_so(cli, here, args, line):
    r = cli(*args)
    assert (r.returncode, r.stdout, r.stderr.decode()) == (2, b"", f"caveman-engine {line}\n")
    assert not (here / "x.tar").exists()


def test_proxy_config_dash_reads_stdin(proxy_env, here):
    """`proxy --config -` said `config -: no such file`."""
    p = subprocess.run([console_script(), "proxy", "--config", "-"], env=proxy_env,
                       input=b"toolschema_strip: max\n", capture_output=True, timeout=30)
    assert (p.returncode, p.stderr.decode()) == (
        1, f"caveman-engine proxy: config stdin: toolschema_strip max: not one of {LEVELS} "
           "(did you mean toolschema-max?)\n")
    p = subprocess.run([console_script(), "proxy", "--config", "./-"], env=proxy_env,
                       capture_output=True, timeout=30)
    assert (p.returncode, p.stderr) == (1, b"caveman-engine proxy: config ./-: no such file\n")


@pytest.mark.parametrize("yaml, env, line", [
    ("upstream_timeout: abc\n", {}, "config c.yaml: upstream_timeout 'abc': expected seconds"),
    ("", {"CAVEMAN_PROXY_UPSTREAM_TIMEOUT": "abc"},
     "CAVEMAN_PROXY_UPSTREAM_TIMEOUT 'abc': expected seconds"),
    ("max_connections: 1.5\n", {},
     "config c.yaml: max_connections 1.5: expected a positive integer"),
    ("", {"CAVEMAN_PROXY_HEADER_TIMEOUT": "-1"},
     "CAVEMAN_PROXY_HEADER_TIMEOUT '-1': must be positive and finite"),
    ("allowed_hosts: 3\n", {}, "config c.yaml: allowed_hosts: expected a list of strings"),
    ("providers:\n  anthropic: {base_url: 'ftp://x'}\n", {},
     "config c.yaml: providers.anthropic.base_url 'ftp://x': expected http(s)://host[:port]"),
    ("listen: 0.0.0.0:1\n", {}, "config c.yaml: listen address '0.0.0.0:1': only loopback "
                                "hosts are allowed (no inbound auth)"),
    ("", {"CAVEMAN_PROXY_LISTEN": "0.0.0.0:1"}, "CAVEMAN_PROXY_LISTEN: listen address "
     "'0.0.0.0:1': only loopback hosts are allowed (no inbound auth)"),
])
def test_every_bad_proxy_setting_names_its_source(proxy_env, here, yaml, env, line):
    """These lines named the key alone: a reader could not tell the file from the variable."""
    (here / "c.yaml").write_text(yaml)
    p = subprocess.run([console_script(), "proxy", "--config", "c.yaml"],
                       env={**proxy_env, **env}, capture_output=True, timeout=30)
    assert (p.returncode, p.stderr.decode()) == (1, f"caveman-engine proxy: {line}\n")


# --------------------------------------------------------------------------- environment

@pytest.mark.parametrize("value, code, err", [
    ("true", 2, "caveman-engine compress: --type jsn: unknown or unavailable content type "
                "(did you mean json?)\n"),
    ("off", 0, None),
    ("tru", 2, "caveman-engine compress: CAVEMAN_STRICT_TYPES tru: not one of 1, 0 "
               "(did you mean true?)\n"),
])
def test_strict_types_env_takes_a_boolean_or_says_what_is_wrong(cli, here, value, code, err):
    """CAVEMAN_STRICT_TYPES=true (or any value but 1) was silently not strict."""
    r = cli("compress", "--type", "jsn", "a.json", env={"CAVEMAN_STRICT_TYPES": value})
    assert r.returncode == code
    if err is not None:
        assert (r.stdout, r.stderr.decode()) == (b"", err)
    else:
        assert r.stdout == b'{"a": 1}' and json.loads(r.stderr)["content_type"] == "jsn"


# --------------------------------------------------------------------------- reading commands

def test_stats_and_retrieve_create_no_store(cli, tmp_path):
    """stats and retrieve only read: where no store is yet, they answer as an empty store
    does and create neither the store nor its directory (they used to make both), like the
    store commands."""
    home = tmp_path / "home"
    env = {"CAVEMAN_CCR_DB": None, "CAVEMAN_HOME": str(home)}
    missing = "ccr_00000000000000000000000000000000"

    def answers() -> list[tuple[int, bytes, bytes]]:
        runs = [cli("stats", env=env), cli("stats", "--format", "text", env=env),
                cli("retrieve", missing, env=env)]
        return [(r.returncode, r.stdout, r.stderr) for r in runs]

    none = answers()
    assert not home.exists()
    assert none[2] == (1, b"", f"caveman-engine retrieve: {missing}: recovery handle not "
                               "found\n".encode())
    # the same answers from a store that exists and is empty
    cli("compress", input=b"plain text that nothing rewrites", env=env)
    assert (home / "ccr.db").exists()
    empty = answers()
    assert json.loads(empty[0][1])["totals"]["count"] == 0
    assert none == empty
