"""The command line's one set of rules (docs/cli.md, "Conventions"), case by case through the
real console script: a word starting with `-` that is no option is a usage error (exit 2)
everywhere; any other word is a FILE, and a FILE that cannot be read is `cannot read FILE: …`;
every choice value is refused in one wording with "did you mean"; `--report -` is stderr; a
reader that goes away ends the process quietly by SIGPIPE while a full disk stays an error."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess

import pytest

from .conftest import CORPUS, console_script, head_pipeline

GITHUB = CORPUS / "github.tools.json"
MISSING = "missing.json"
NO_FILE = "No such file or directory"


# --------------------------------------------------------------------------- a word is a FILE

@pytest.mark.parametrize("args, code", [
    (["compress", MISSING], 1),
    (["compress", "--type", "toolschema", MISSING], 1),
    (["detect", MISSING], 1),
    (["toon encode", MISSING], 1),
    (["measure", MISSING], 1),
    # exit 1 is an answer of these three (changed / over budget / different): trouble is 2
    (["diff", "--type", "toolschema", MISSING], 2),
    (["check", MISSING, "-b", "base.json"], 2),
    (["verify", MISSING, "a.json"], 2),
])
def test_a_missing_file_is_cannot_read(cli, here, args, code):
    r = cli(*args[0].split(), *args[1:])
    assert (r.returncode, r.stdout) == (code, b"")
    assert r.stderr.decode() == f"caveman-engine {args[0]}: cannot read {MISSING}: {NO_FILE}\n"


def test_detect_several_files_one_missing(cli, here):
    r = cli("detect", "a.json", MISSING, "-", input=b"plain words\n")
    assert r.returncode == 1
    assert r.stdout == b"a.json\tjson\n-\ttext\n"
    assert r.stderr.decode() == f"caveman-engine detect: cannot read {MISSING}: {NO_FILE}\n"


def test_detect_without_file_still_reads_stdin(cli):
    """Pinned by the cli/ conformance vectors: `detect` and `compress` read stdin."""
    r = cli("detect", input=b'{"a": 1}')
    assert (r.returncode, r.stdout, r.stderr) == (0, b"json\n", b"")


# --------------------------------------------------------------------------- unknown options

@pytest.mark.parametrize("args, message", [
    (["retrieve", "ccr_00000000000000000000000000000000", "--ouput", "x.json"],
     "caveman-engine retrieve: no such option: --ouput (did you mean --output?)"),
    (["stats", "--fromat", "text"],
     "caveman-engine stats: no such option: --fromat (did you mean --format?)"),
    (["registry", "--al"], "caveman-engine registry: no such option: --al (did you mean --all?)"),
    (["compress", "--typ", "json"],
     "caveman-engine compress: no such option: --typ (did you mean --type?)"),
    (["compress", "--bogus"], "caveman-engine compress: no such option: --bogus"),
    (["detect", "--hepl"], "caveman-engine detect: no such option: --hepl (did you mean --help?)"),
    (["detect", "a.json", "--frob"], "caveman-engine detect: no such option: --frob"),
    (["toon", "encode", "--bogus"], "caveman-engine toon encode: no such option: --bogus"),
    (["measure", "--frmat", "json", "a.json"],
     "caveman-engine measure: no such option: --frmat (did you mean --format?)"),
    (["diff", "--type", "toolschema", "--exit-cod", "a.json"],
     "caveman-engine diff: no such option: --exit-cod (did you mean --exit-code?)"),
    (["check", "a.json", "-b", "b.json", "--max-totl", "3"],
     "caveman-engine check: no such option: --max-totl (did you mean --max-total?)"),
    (["verify", "--exampels", "3", "a.json", "a.json"],
     "caveman-engine verify: no such option: --exampels (did you mean --examples?)"),
    (["store", "info", "--formt", "json"],
     "caveman-engine store info: no such option: --formt (did you mean --format?)"),
    (["store", "purge", "--dryrun"],
     "caveman-engine store purge: no such option: --dryrun (did you mean --dry-run?)"),
    (["evals", "run", "--fixture", "x"],
     "caveman-engine evals run: no such option: --fixture (did you mean --fixtures?)"),
    (["evals", "tools", "--limt", "1"],
     "caveman-engine evals tools: no such option: --limt (did you mean --limit?)"),
])
def test_an_unknown_option_is_a_usage_error(cli, here, args, message):
    r = cli(*args)
    assert (r.returncode, r.stdout, r.stderr.decode()) == (2, b"", message + "\n")


@pytest.mark.parametrize("args, message", [
    (["compress", "--type"], "caveman-engine compress: option --type needs a value"),
    (["compress", "a.json", "b.json"],
     "caveman-engine compress: unexpected argument: b.json (compress reads one FILE)"),
    (["stats", "extra"], "caveman-engine stats: unexpected argument: extra"),
    (["retrieve"], "caveman-engine retrieve: missing HANDLE "
                   "(usage: caveman-engine retrieve HANDLE [QUERY])"),
    (["check", "a.json"], "caveman-engine check: missing option --baseline"),
    (["store", "export"], "caveman-engine store export: missing DEST"),
    (["stor"], "unknown caveman-engine subcommand: stor (did you mean store?)"),
])
def test_other_usage_errors_are_exit_2(cli, here, args, message):
    r = cli(*args)
    assert (r.returncode, r.stdout, r.stderr.decode()) == (2, b"", message + "\n")


def test_type_value_may_still_start_with_dashes(cli):
    """`--type` takes the next word whatever it is (the reference's rule): not an option."""
    r = cli("compress", "--type", "--bogus", input=b"abc")
    assert (r.returncode, r.stdout) == (0, b"abc")
    assert json.loads(r.stderr)["content_type"] == "--bogus"


# --------------------------------------------------------------------------- choice values

@pytest.mark.parametrize("args, message", [
    (["stats", "--format", "jsn"],
     "caveman-engine stats: --format jsn: not one of text, json (did you mean json?)"),
    (["registry", "--format", "txt"],
     "caveman-engine registry: --format txt: not one of text, json (did you mean text?)"),
    (["store", "info", "--format", "yaml"], "caveman-engine store info: --format yaml: "
                                            "not one of text, json"),
    (["measure", "--format", "tex", "a.json"],
     "caveman-engine measure: --format tex: not one of text, json (did you mean text?)"),
    (["measure", "--type", "toolschema-mx", "tools.json"],
     "caveman-engine measure: --type toolschema-mx: unknown or unavailable content type "
     "(did you mean toolschema-max?)"),
    (["diff", "--type", "toolschema-saf", "a.json"],
     "caveman-engine diff: --type toolschema-saf: unknown or unavailable content type "
     "(did you mean toolschema-safe?)"),
    (["compress", "--strict", "--type", "jsn"],
     "caveman-engine compress: --type jsn: unknown or unavailable content type (did you mean "
     "json?)"),
    (["evals", "run", "--format", "jason"],
     "caveman-engine evals run: --format jason: not one of text, json (did you mean json?)"),
    (["evals", "tools", "--format", "tabel"],
     "caveman-engine evals tools: --format tabel: not one of text, json (did you mean table?)"),
    (["toon", "decod"], "caveman-engine toon: unknown subcommand: decod "
                        "(one of encode, decode) (did you mean decode?)"),
    (["store", "vacum"], "caveman-engine store: unknown subcommand: vacum "
                         "(one of path, info, export, purge, vacuum) (did you mean vacuum?)"),
])
def test_a_bad_choice_is_refused_with_did_you_mean(cli, here, args, message):
    r = cli(*args, input=b"abc")
    assert (r.returncode, r.stdout, r.stderr.decode()) == (2, b"", message + "\n")


def test_grader_choice_of_evals_tools_uses_the_same_wording(cli):
    r = cli("evals", "tools", "--grader", "lexicl")
    assert (r.returncode, r.stdout) == (2, b"")
    line = r.stderr.decode()
    assert line.startswith("caveman-engine evals tools: --grader lexicl: not one of lexical, ")
    assert line.endswith(" (did you mean lexical?)\n") and line.count("\n") == 1


def test_unknown_compress_type_still_passes_through(cli):
    """Pinned by the cli/ vectors (`--type no-such-type`): pass-through, exit 0."""
    r = cli("compress", "--type", "jsn", input=b"abc")
    assert (r.returncode, r.stdout) == (0, b"abc")
    assert json.loads(r.stderr)["content_type"] == "jsn"


def test_evals_tools_format_text_and_its_table_alias(cli, tmp_path):
    cases = tmp_path / "cases.jsonl"
    catalog = json.loads(GITHUB.read_bytes())
    tool = catalog["tools"][0] if isinstance(catalog, dict) else catalog[0]
    name = tool.get("name") or tool["function"]["name"]
    cases.write_text(json.dumps({"catalog": catalog, "query": "anything",
                                 "expected_tool": name}) + "\n")
    text = cli("evals", "tools", str(cases), "--type", "toolschema", "--format", "text")
    table = cli("evals", "tools", str(cases), "--type", "toolschema", "--format", "table")
    default = cli("evals", "tools", str(cases), "--type", "toolschema")
    assert text.returncode == 0, text.stderr
    assert text.stdout == table.stdout == default.stdout
    assert not text.stdout.startswith(b"{")
    assert "--format [text|json]" in cli("evals", "tools", "--help").stdout.decode()


# --------------------------------------------------------------------------- --report -

def test_report_dash_is_stderr(cli, here):
    data = GITHUB.read_bytes()
    plain = cli("compress", "--type", "toolschema", input=data)
    r = cli("compress", "--type", "toolschema", "--report", "-", input=data)
    assert (r.returncode, r.stdout, r.stderr) == (0, plain.stdout, plain.stderr)
    assert not (here / "-").exists()


# --------------------------------------------------------------------------- terminals

@pytest.mark.parametrize("args", [["measure"], ["diff", "--type", "toolschema-safe"]])
def test_measure_and_diff_print_usage_on_a_terminal(cli_env, args):
    master, slave = pty.openpty()
    try:
        p = subprocess.run([console_script(), *args], stdin=slave, capture_output=True,
                           env=cli_env, timeout=30)
    finally:
        os.close(master)
        os.close(slave)
    assert (p.returncode, p.stdout) == (2, b"")
    line = p.stderr.decode()
    assert line.startswith(f"usage: caveman-engine {args[0]} ") and line.count("\n") == 1
    assert line.endswith("(no FILE given and stdin is a terminal; see --help)\n")


def test_measure_without_file_reads_a_piped_stdin(cli):
    r = cli("measure", input=GITHUB.read_bytes())
    assert r.returncode == 0 and r.stdout


# --------------------------------------------------------------------------- broken pipes

@pytest.mark.parametrize("unbuffered", [False, True])
def test_head_ends_retrieve_quietly_with_141(cli_env, big_handle, unbuffered):
    handle, _ = big_handle
    env = {**cli_env, **({"PYTHONUNBUFFERED": "1"} if unbuffered else {})}
    ours, head, err = head_pipeline(f"{console_script()} retrieve {handle}", env)
    assert (ours, head, err) == ("141", "0", b"")


def test_head_ends_compress_quietly_with_141(cli_env, tmp_path):
    src = tmp_path / "big.txt"
    src.write_bytes(b"line of text\n" * 400_000)
    ours, head, err = head_pipeline(f"{console_script()} compress --type nosuch {src}", cli_env)
    assert (ours, head, err) == ("141", "0", b"")


def test_a_full_disk_is_still_an_error(cli_env, big_handle):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    handle, _ = big_handle
    with open("/dev/full", "wb") as sink:
        p = subprocess.run([console_script(), "retrieve", handle], stdout=sink,
                           stderr=subprocess.PIPE, env=cli_env, timeout=120)
    assert (p.returncode, p.stderr) == (
        1, b"caveman-engine retrieve: write stdout: No space left on device\n")


def test_a_closed_reader_is_not_confused_with_a_signal_of_ours(cli_env, big_handle):
    """The process really ends by SIGPIPE (what `cat` does), not by exit(141)."""
    handle, _ = big_handle
    p = subprocess.Popen([console_script(), "retrieve", handle], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=cli_env)
    assert p.stdout.read(1)
    p.stdout.close()
    err = p.stderr.read()
    assert (p.wait(timeout=120), err) == (-signal.SIGPIPE, b"")
