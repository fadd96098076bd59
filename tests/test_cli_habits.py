"""The command line as people use it: files as arguments, terminals, typos, quiet and JSON
switches, helpful --help. Everything through the real console script."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import time

import pytest

from caveman_engine import registry

from .conftest import CORPUS, console_script

GITHUB = CORPUS / "github.tools.json"
DIFF = b"diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"


@pytest.fixture
def files(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    (d / "a.json").write_bytes(b'{"a": 1}')
    (d / "b.diff").write_bytes(DIFF)
    return d


# --------------------------------------------------------------------------- files

def test_detect_one_file(cli, files):
    r = cli("detect", str(files / "a.json"))
    assert (r.returncode, r.stdout, r.stderr) == (0, b"json\n", b"")


def test_detect_several_files_and_stdin(cli, files):
    a, b = str(files / "a.json"), str(files / "b.diff")
    r = cli("detect", a, b, "-", input=b"plain words\n")
    assert r.returncode == 0
    assert r.stdout == f"{a}\tjson\n{b}\tdiff\n-\ttext\n".encode()


def test_detect_a_word_is_a_file_even_when_missing(cli):
    r = cli("detect", "nope.json", input=b'{"a": 1}')
    assert (r.returncode, r.stdout) == (1, b"")
    assert r.stderr == b"caveman-engine detect: cannot read nope.json: No such file or directory\n"


def test_detect_missing_file_among_files_the_rest_still_print(cli, files):
    a, b, missing = str(files / "a.json"), str(files / "b.diff"), str(files / "nope")
    r = cli("detect", a, missing, b)
    assert r.returncode == 1
    assert r.stdout == f"{a}\tjson\n{b}\tdiff\n".encode()
    assert r.stderr == (f"caveman-engine detect: cannot read {missing}: "
                        f"No such file or directory\n").encode()


def test_detect_unreadable_file_is_an_error_the_rest_still_print(cli, files):
    a, d = str(files / "a.json"), str(files)
    r = cli("detect", a, d)
    assert r.returncode == 1
    assert r.stdout == f"{a}\tjson\n".encode()
    assert r.stderr == f"caveman-engine detect: cannot read {d}: Is a directory\n".encode()


def test_detect_double_dash_ends_options(cli, tmp_path):
    (tmp_path / "-x.json").write_bytes(b'{"a": 1}')
    r = cli("detect", "--", str(tmp_path / "-x.json"))
    assert (r.returncode, r.stdout, r.stderr) == (0, b"json\n", b"")


def test_detect_file_loop(cli, files):
    """The shell loop from the issue: each file's own type, not `text` from empty stdin."""
    got = [cli("detect", str(p)).stdout for p in sorted(files.iterdir())]
    assert got == [b"json\n", b"diff\n"]


def test_compress_file_equals_compress_stdin(cli):
    data = GITHUB.read_bytes()
    by_file = cli("compress", "--type", "toolschema", str(GITHUB))
    by_stdin = cli("compress", "--type", "toolschema", input=data)
    assert by_file.returncode == 0
    assert (by_file.stdout, by_file.stderr) == (by_stdin.stdout, by_stdin.stderr)
    handle = json.loads(by_file.stderr)["recovery_handle"]
    assert cli("retrieve", handle).stdout == data


def test_compress_dash_is_stdin(cli):
    assert cli("compress", "-", input=b"abc").stdout == b"abc"


def test_compress_second_word_is_a_usage_error(cli, files):
    r = cli("compress", str(files / "a.json"), "extra")
    assert (r.returncode, r.stdout) == (2, b"")
    assert r.stderr == b"caveman-engine compress: unexpected argument: extra (compress reads one FILE)\n"


def test_retrieve_to_file(cli, tmp_path):
    data = GITHUB.read_bytes()
    handle = json.loads(cli("compress", "--type", "toolschema", input=data).stderr)[
        "recovery_handle"]
    out = tmp_path / "back.json"
    r = cli("retrieve", handle, "-o", str(out))
    assert (r.returncode, r.stdout, r.stderr) == (0, b"", b"")
    assert out.read_bytes() == data


def test_retrieve_to_unwritable_place(cli, tmp_path):
    handle = json.loads(cli("compress", "--type", "toolschema",
                            input=GITHUB.read_bytes()).stderr)["recovery_handle"]
    target = tmp_path / "missing-dir" / "x.json"
    r = cli("retrieve", handle, "--output", str(target))
    assert r.returncode == 1
    assert r.stderr.decode() == (f"caveman-engine retrieve: cannot write {target}: No such file "
                                 "or directory\n")
    assert not target.exists()


def test_toon_files(cli, tmp_path):
    src = tmp_path / "u.json"
    src.write_bytes(b'{"users":[{"id":1,"name":"ana"},{"id":2,"name":"sam"}],"team":"hikers"}')
    enc = cli("toon", "encode", str(src))
    assert enc.returncode == 0 and enc.stdout.startswith(b"team: hikers\n")
    (tmp_path / "u.toon").write_bytes(enc.stdout)
    dec = cli("toon", "decode", str(tmp_path / "u.toon"))
    assert json.loads(dec.stdout) == json.loads(src.read_bytes())
    r = cli("toon", "encode", str(tmp_path / "none.json"))
    assert r.returncode == 1
    assert r.stderr.decode() == (f"caveman-engine toon encode: cannot read "
                                 f"{tmp_path / 'none.json'}: No such file or directory\n")


# --------------------------------------------------------------------------- terminals

def _on_terminal(args, env, *, stdin_tty=False, stderr_tty=False, input=b"", timeout=30):
    """Run with stdin and/or stderr on a pseudo-terminal; returns (code, stdout, stderr)."""
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen(
            [console_script(), *args], env=env,
            stdin=slave if stdin_tty else subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=slave if stderr_tty else subprocess.PIPE)
        if not stdin_tty:
            p.stdin.write(input)
            p.stdin.close()
        out = p.stdout.read()
        code = p.wait(timeout=timeout)
        err = b""
        if stderr_tty:
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline:
                ready, _, _ = select.select([master], [], [], 0.2)
                if not ready:
                    break
                err += os.read(master, 65536)
        else:
            err = p.stderr.read()
    finally:
        os.close(master)
        os.close(slave)
    return code, out, err.replace(b"\r\n", b"\n")


@pytest.fixture
def env(cli_env):
    return cli_env


@pytest.mark.parametrize("args, usage", [
    (["detect"], b"usage: caveman-engine detect [FILE]..."),
    (["compress"], b"usage: caveman-engine compress [--type TYPE] [FILE]"),
    (["compress", "--type", "log"], b"usage: caveman-engine compress [--type TYPE] [FILE]"),
    (["toon", "encode"], b"usage: caveman-engine toon encode|decode [FILE]"),
    (["measure"], b"usage: caveman-engine measure [--type TYPE] [FILE|-]"),
    (["measure", "--type", "toolschema-max"], b"usage: caveman-engine measure [--type TYPE]"),
    (["diff", "--type", "toolschema-safe"], b"usage: caveman-engine diff --type TYPE [FILE|-]"),
])
def test_terminal_stdin_without_file_prints_usage(env, args, usage):
    code, out, err = _on_terminal(args, env, stdin_tty=True)
    assert code == 2 and out == b""
    assert err.startswith(usage) and err.count(b"\n") == 1


# --------------------------------------------------------------------------- typos

def test_unknown_type_warns_on_a_terminal_before_the_report(env):
    code, out, err = _on_terminal(["compress", "--type", "toolschema-mx"], env,
                                  stderr_tty=True, input=b"abc")
    assert code == 0 and out == b"abc"
    lines = err.decode().splitlines()
    assert lines[0] == ("caveman-engine compress: --type toolschema-mx: unknown or unavailable "
                        "content type (did you mean toolschema-max?); the input passes through")
    assert json.loads(lines[1])["content_type"] == "toolschema-mx"


def test_unknown_type_is_silent_when_stderr_is_not_a_terminal(cli):
    r = cli("compress", "--type", "toolschema-mx", input=b"abc")
    assert r.returncode == 0 and r.stdout == b"abc"
    assert r.stderr.count(b"\n") == 1 and json.loads(r.stderr)["ratio"] == 0


@pytest.mark.parametrize("how", ["flag", "env"])
def test_strict_types(cli, how):
    args = ["compress", "--type", "toolschema-mx"] + (["--strict"] if how == "flag" else [])
    env = {"CAVEMAN_STRICT_TYPES": "1"} if how == "env" else {}
    r = cli(*args, input=b"abc", env=env)
    assert (r.returncode, r.stdout) == (2, b"")
    assert r.stderr == (b"caveman-engine compress: --type toolschema-mx: unknown or unavailable "
                        b"content type (did you mean toolschema-max?)\n")
    ok = cli("compress", "--strict", "--type", "toolschema-max", input=GITHUB.read_bytes())
    assert ok.returncode == 0
    auto = cli("compress", "--strict", "--type", "auto", input=b"abc")
    assert auto.returncode == 0


def test_unknown_safe_rule_is_an_error(cli):
    r = cli("compress", "--type", "toolschema-safe", input=GITHUB.read_bytes(),
            env={"CAVEMAN_SAFE_RULES": "-titels"})
    assert r.returncode == 2 and r.stdout == b""
    assert r.stderr == (b"caveman-engine compress: CAVEMAN_SAFE_RULES titels: not one of "
                        b"desc_whitespace, echo_description, titles, null_default, noop_keywords, "
                        b"allof_single, anyof_null, defs_unused, defs_inline, schema_uri "
                        b"(did you mean titles?)\n")
    good = cli("compress", "--type", "toolschema-safe", input=GITHUB.read_bytes(),
               env={"CAVEMAN_SAFE_RULES": "-titles"})
    assert good.returncode == 0


@pytest.mark.parametrize("args", [["stats", "x"], ["registry", "x", "y"],
                                  ["registry", "--all", "x"], ["registry", "-q", "x"]])
def test_extra_arguments_are_usage_errors(cli, args):
    """stats and registry read no FILE: a word there is a usage error, not ignored."""
    r = cli(*args)
    assert (r.returncode, r.stdout) == (2, b"")
    extra = " ".join(a for a in args[1:] if not a.startswith("-"))
    assert r.stderr.decode() == f"caveman-engine {args[0]}: unexpected argument: {extra}\n"


def test_retrieve_third_word_is_a_usage_error(cli):
    data = GITHUB.read_bytes()
    handle = json.loads(cli("compress", "--type", "toolschema", input=data).stderr)[
        "recovery_handle"]
    r = cli("retrieve", handle, "", "third")
    assert (r.returncode, r.stdout) == (2, b"")
    assert r.stderr == b"caveman-engine retrieve: unexpected argument: third\n"
    assert cli("retrieve", handle, "").stdout == data


# --------------------------------------------------------------------------- switches

def test_quiet_compress(cli):
    r = cli("compress", "-q", "--type", "toolschema", input=GITHUB.read_bytes())
    assert r.returncode == 0 and r.stderr == b"" and r.stdout


def test_report_to_file(cli, tmp_path):
    data = GITHUB.read_bytes()
    loud = cli("compress", "--type", "toolschema", input=data)
    report = tmp_path / "report.json"
    r = cli("compress", "--type", "toolschema", "--report", str(report), input=data)
    assert (r.returncode, r.stderr, r.stdout) == (0, b"", loud.stdout)
    assert report.read_bytes() == loud.stderr


def test_stats_formats(cli):
    cli("compress", "--type", "toolschema", input=GITHUB.read_bytes())
    doc = json.loads(cli("stats", "--format", "json").stdout)
    assert doc == json.loads(cli("stats").stdout)
    assert doc["totals"]["count"] == 1
    text = cli("stats", "--format", "text").stdout.decode().splitlines()
    assert text[0].split() == ["content", "type", "count", "before", "after", "saved"]
    assert text[1].split()[:2] == ["total", "1"]
    assert text[2].split()[:2] == ["toolschema", "1"]


def test_registry_formats(cli):
    listing = json.loads(cli("registry", "--all", "--format", "json").stdout)
    assert [e["type"] for e in listing] == [e.type for e in registry.entries()]
    assert {"type", "capability", "safety_class", "detected", "manifest"} <= set(listing[0])
    manifest = cli("registry", "--format", "json").stdout
    assert manifest == cli("registry").stdout and json.loads(manifest)["schema_version"] == 1
    table = cli("registry", "--format", "text").stdout.decode().splitlines()
    assert len(table) == 1 + sum(1 for e in registry.entries() if e.manifest)


# --------------------------------------------------------------------------- help

@pytest.mark.parametrize("command", ["compress", "detect", "retrieve", "stats", "registry",
                                     "toon", "measure", "check", "diff", "verify", "mcp"])
def test_every_subcommand_has_help(cli, command):
    r = cli(command, "--help")
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode()
    assert text.startswith(f"Usage: caveman-engine {command}")
    assert len(text.split("\n\n")[1].split()) >= 6  # a real description, not a stub


def test_compress_help_teaches(cli):
    text = cli("compress", "--help").stdout.decode()
    for e in registry.entries():
        assert f"\n  {e.type} " in text
    for section in ("The report", "recovery_handle", "The recovery store", "Exit codes",
                    "Examples", "~/.caveman/ccr.db"):
        assert section in text


def test_shell_completion(cli):
    r = cli(env={"_CAVEMAN_ENGINE_COMPLETE": "bash_source"})
    assert r.returncode == 0 and b"_caveman_engine_completion()" in r.stdout
    r = cli(env={"_CAVEMAN_ENGINE_COMPLETE": "bash_complete", "COMP_WORDS": "caveman-engine reg",
                 "COMP_CWORD": "1"})
    assert r.stdout.decode().splitlines() == ["plain,registry"]
