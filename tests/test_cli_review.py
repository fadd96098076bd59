"""The defects a hostile review of the command line found, each reproduced through the real
console script and held to the one rule docs/cli.md now states for it: files written only
once complete and never a device replaced, the input read before anything is written, names
that are not UTF-8, Ctrl-C at start-up, `--`, single-dash words, catalog commands given no
catalog, DATASET as a FILE, one wording per choice value and per error line, missing parent
directories, and the smaller ones."""

from __future__ import annotations

import http.server
import json
import os
import re
import signal
import stat
import subprocess
import threading
import time
from pathlib import Path

import pytest

from .conftest import CORPUS, console_script

GITHUB = CORPUS / "github.tools.json"
NO_FILE = "No such file or directory"
RULES = ("desc_whitespace, echo_description, titles, null_default, noop_keywords, allof_single, "
         "anyof_null, defs_unused, defs_inline, schema_uri")


@pytest.fixture
def handle(cli):
    r = cli("compress", "--type", "toolschema", input=GITHUB.read_bytes())
    return json.loads(r.stderr)["recovery_handle"]


def full_device(path: Path) -> Path:
    """A copy of /dev/full (char 1:7) at ``path``: never the real one, which a bug that
    replaces the device node would destroy."""
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    except (PermissionError, AttributeError, OSError) as exc:
        pytest.skip(f"cannot make a device node here: {exc}")
    return path


def is_char_device(path: Path) -> bool:
    return stat.S_ISCHR(os.lstat(path).st_mode)


class FifoReader:
    """Reads everything written into a new FIFO at ``path``, in a thread."""

    def __init__(self, path: Path) -> None:
        os.mkfifo(path)
        self.path = path
        self.data = b""
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        with open(self.path, "rb") as f:
            self.data = f.read()

    def join(self) -> bytes:
        self.thread.join(timeout=30)
        return self.data


# --------------------------------------------------------------------------- 1: data loss

def test_report_naming_the_input_reads_the_input_first(cli, here):
    """`compress --report tc.json tc.json` used to truncate tc.json before reading it."""
    expected = cli("compress", "--type", "toolschema", "tools.json")
    r = cli("compress", "--type", "toolschema", "--report", "tools.json", "tools.json")
    assert (r.returncode, r.stderr) == (0, b"")
    assert r.stdout == expected.stdout and len(r.stdout) > 100
    assert (here / "tools.json").read_bytes() == expected.stderr  # now the report


@pytest.mark.parametrize("case", ["missing input", "strict type", "full stdout"])
def test_a_failed_compress_leaves_the_report_file_untouched(cli_env, here, case):
    keep = here / "keep.json"
    keep.write_bytes(b'{"mine": true}\n')
    args = ["compress", "--report", "keep.json"]
    stdout = subprocess.PIPE
    if case == "missing input":
        args += ["missing.json"]
    elif case == "strict type":
        args += ["--strict", "--type", "jsn", "a.json"]
    else:
        args += ["tools.json"]
        stdout = open(full_device(here / "full"), "wb")
    with open(os.devnull, "rb") as devnull:
        p = subprocess.run([console_script(), *args], stdin=devnull, stdout=stdout,
                           stderr=subprocess.PIPE, env=cli_env, timeout=60)
    assert p.returncode in (1, 2) and p.stderr.count(b"\n") == 1, p.stderr
    assert keep.read_bytes() == b'{"mine": true}\n'


# --------------------------------------------------------------------------- 2: devices, FIFOs

def test_retrieve_into_a_full_device_is_an_error_and_keeps_the_device(cli, here, handle):
    dev = full_device(here / "myfull")
    r = cli("retrieve", handle, "-o", "myfull")
    assert (r.returncode, r.stdout) == (1, b"")
    assert r.stderr == b"caveman-engine retrieve: write myfull: No space left on device\n"
    assert is_char_device(dev)


def test_retrieve_into_a_fifo_writes_through_it(cli, here, handle):
    reader = FifoReader(here / "pipe")
    r = cli("retrieve", handle, "-o", "pipe")
    assert (r.returncode, r.stderr) == (0, b"")
    assert reader.join() == GITHUB.read_bytes()
    assert stat.S_ISFIFO(os.lstat(here / "pipe").st_mode)


@pytest.mark.parametrize("args", [
    ["compress", "--report", "dev", "a.json"],
    ["check", "tools.json", "-b", "dev", "--update-baseline"],
    ["store", "export", "dev.tar.gz"],
])
def test_every_named_output_writes_a_device_in_place(cli, here, handle, args):
    dev = full_device(here / args[args.index("dev") if "dev" in args else -1])
    r = cli(*args)
    command = " ".join(args[:2]) if args[0] == "store" else args[0]
    assert r.returncode == 1
    assert r.stderr.decode() == f"caveman-engine {command}: write {dev.name}: No space left on device\n"
    assert is_char_device(dev)


@pytest.mark.parametrize("name", ["out.tar", "out.tar.gz"])
def test_store_export_into_a_fifo(cli, here, handle, name):
    import io
    import tarfile

    reader = FifoReader(here / name)
    r = cli("store", "export", name)
    assert r.returncode == 0, r.stderr
    data = reader.join()
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        assert sorted(tar.getnames()) == [handle, "manifest.jsonl"]
    assert stat.S_ISFIFO(os.lstat(here / name).st_mode)


def test_regular_files_are_still_replaced_whole(cli, here, handle):
    target = here / "back.json"
    target.write_bytes(b"old and longer than nothing" * 1000)
    target.chmod(0o640)
    r = cli("retrieve", handle, "-o", "back.json")
    assert (r.returncode, r.stderr) == (0, b"")
    assert target.read_bytes() == GITHUB.read_bytes()
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in here.iterdir() if p.name != "store") == [
        "a.json", "back.json", "tools.json"]  # no temporary file left beside it


# --------------------------------------------------------------------------- 3: names, Ctrl-C

def test_detect_names_that_are_not_utf8(cli, here):
    odd = os.fsdecode(b"b\xff.json")
    (here / odd).write_bytes(b'{"x": 1}')
    r = cli("detect", odd, "a.json")
    assert (r.returncode, r.stdout, r.stderr) == (0, b"b\xff.json\tjson\na.json\tjson\n", b"")
    r = cli("detect", os.fsdecode(b"c\xff.json"), "a.json")
    assert (r.returncode, r.stdout) == (1, b"a.json\tjson\n")
    assert r.stderr == b"caveman-engine detect: cannot read c\\xff.json: " + NO_FILE.encode() + b"\n"


def test_store_export_and_check_take_names_that_are_not_utf8(cli, here, handle):
    dest = os.fsdecode(b"exp\xffdir")
    r = cli("store", "export", dest)
    assert (r.returncode, r.stderr) == (0, b"")
    size = len(GITHUB.read_bytes())
    assert r.stdout == f"exported 1 originals ({size} bytes) to ".encode() + b"exp\xffdir\n"
    assert (here / dest / handle).read_bytes() == GITHUB.read_bytes()
    r = cli("store", "export", "--format", "json", os.fsdecode(b"x\xff.tar"))
    assert r.returncode == 0 and json.loads(r.stdout)["dest"] == os.fsdecode(b"x\xff.tar")
    base = os.fsdecode(b"nb\xff.json")
    r = cli("check", "tools.json", "-b", base, "--update-baseline")
    assert (r.returncode, r.stderr) == (0, b"") and r.stdout.startswith(b"wrote nb\xff.json: ")
    assert cli("check", "tools.json", "-b", base).returncode == 0


def test_a_name_cannot_break_the_error_line(cli):
    r = cli("retrieve", "ccr_00\n00\x1b[31m")
    assert r.stderr == b"caveman-engine retrieve: ccr_00\\x0a00\\x1b[31m: malformed recovery handle\n"


def test_ctrl_c_at_start_up_never_gives_a_traceback_of_ours(cli_env, tmp_path):
    """SIGINT right after the start, at 0-24 ms, many times: from the first line of ours the
    process ends by SIGINT (quietly) or with one line and 130, never with a traceback through
    caveman_engine. What Python prints when the signal lands before the first line of ours
    (its own start-up, the `import re` pip writes into the console script) is not ours."""
    (tmp_path / "a.json").write_bytes(b"{}")
    seen = {"quiet": 0, "line": 0}
    for i in range(50):
        p = subprocess.Popen([console_script(), "detect", "a.json"], cwd=tmp_path,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, env=cli_env)
        time.sleep((i % 25) / 1000)
        p.send_signal(signal.SIGINT)
        err = p.stderr.read()
        code = p.wait(timeout=30)
        ours = re.search(rb'File "[^"]*/caveman_engine/(?!__init__\.py)', err)
        assert not ours, err.decode()
        if b"Traceback" in err or b"Fatal Python error" in err or (code, err) == (
                1, b"KeyboardInterrupt\n"):
            # Python's start-up, before caveman-engine's first line (the bare line, exit 1:
            # the signal cut Python's own read of the console script; there is no frame)
            continue
        if code == -signal.SIGINT:
            assert err == b""
            seen["quiet"] += 1
        elif code == 130:
            assert err == b"caveman-engine detect: interrupted\n"
            seen["line"] += 1
        else:
            assert (code, err) == (0, b""), err
    assert seen["quiet"] + seen["line"] > 0


# --------------------------------------------------------------------------- 4, 5: words

@pytest.mark.parametrize("args, code, err", [
    (["detect", "--", "--help"], 1, f"caveman-engine detect: cannot read --help: {NO_FILE}"),
    (["detect", "a.json", "--", "-h"], 1, f"caveman-engine detect: cannot read -h: {NO_FILE}"),
    (["compress", "--", "-x"], 1, f"caveman-engine compress: cannot read -x: {NO_FILE}"),
    (["measure", "--", "-x"], 1, f"caveman-engine measure: cannot read -x: {NO_FILE}"),
    (["toon", "encode", "--", "-x"], 1,
     f"caveman-engine toon encode: cannot read -x: {NO_FILE}"),
    (["diff", "--type", "toolschema", "--", "-x"], 2,
     f"caveman-engine diff: cannot read -x: {NO_FILE}"),
    (["evals", "tools", "--", "-x"], 1, f"caveman-engine evals tools: cannot read -x: {NO_FILE}"),
    (["retrieve", "--", "-x"], 1, "caveman-engine retrieve: -x: malformed recovery handle"),
])
def test_after_double_dash_every_word_is_a_file(cli, here, args, code, err):
    r = cli(*args)
    assert (r.returncode, r.stderr.decode()) == (code, err + "\n")


@pytest.mark.parametrize("args, message", [
    (["retrieve", "ccr_00000000000000000000000000000000", "-output", "json"],
     "caveman-engine retrieve: no such option: -output (did you mean --output?)"),
    (["retrieve", "ccr_00000000000000000000000000000000", "-ofile"],
     "caveman-engine retrieve: no such option: -ofile"),
    (["compress", "-type", "json", "a.json"],
     "caveman-engine compress: no such option: -type (did you mean --type?)"),
    (["detect", "-type", "a.json"], "caveman-engine detect: no such option: -type"),
    (["stats", "-format", "json"], "caveman-engine stats: no such option: -format "
                                   "(did you mean --format?)"),
    (["stats", "-q=1"], "caveman-engine stats: no such option: -q=1 (did you mean -q?)"),
    (["store", "purge", "-yn"],
     "caveman-engine store purge: no such option: -yn (did you mean --yes?)"),
    (["detect", "--help=x"], "caveman-engine detect: option --help does not take a value"),
    (["stats", "--help=1"], "caveman-engine stats: option --help does not take a value"),
    (["detect", "--hepl=x"], "caveman-engine detect: no such option: --hepl (did you mean --help?)"),
])
def test_a_single_dash_word_is_one_word(cli, here, args, message):
    r = cli(*args)
    assert (r.returncode, r.stdout, r.stderr.decode()) == (2, b"", message + "\n")
    assert not (here / "utput").exists()


# --------------------------------------------------------------------------- 6: no catalog

@pytest.mark.parametrize("command", [["diff", "--type", "toolschema-max"], ["measure"],
                                     ["check", "-b", "b.json"]])
@pytest.mark.parametrize("content, why", [
    (b"", "invalid JSON: empty input"),
    (b"\x00\x01\xff", "invalid JSON: "),
    (b"hello world\n", "invalid JSON: "),
    (b"[1, 2]", "no tools found (expected an OpenAI, Anthropic or MCP catalog)"),
])
def test_a_catalog_command_refuses_what_is_no_catalog(cli, here, command, content, why):
    (here / "in.txt").write_bytes(content)
    r = cli(*command[:1], "in.txt", *command[1:])
    assert (r.returncode, r.stdout) == (2, b"")
    line = r.stderr.decode()
    assert line.startswith(f"caveman-engine {command[0]}: in.txt: {why}") and line.count("\n") == 1


# --------------------------------------------------------------------------- 7, 14: evals tools

def test_evals_tools_dataset_is_a_file(cli, here):
    r = cli("evals", "tools", "missing.jsonl")
    assert (r.returncode, r.stderr.decode()) == (
        1, f"caveman-engine evals tools: cannot read missing.jsonl: {NO_FILE}\n")
    (here / "d.jsonl").mkdir()
    (here / "d.jsonl" / "x").write_text("")
    r = cli("evals", "tools", "d.jsonl")  # a directory that is no BFCL data: an error, 1
    assert r.returncode == 1 and r.stderr.startswith(b"caveman-engine evals tools: d.jsonl: ")
    case = {"catalog": json.loads(GITHUB.read_bytes()), "query": "open an issue",
            "expected_tool": "create_issue"}
    r = cli("evals", "tools", "-", "--type", "toolschema", "--format", "json",
            input=(json.dumps(case) + "\n").encode())
    assert r.returncode == 0, r.stderr
    assert [d["name"] for d in json.loads(r.stdout)["datasets"]] == ["stdin"]


def test_evals_tools_llm_error_is_exit_1(cli, here):
    class Refuse(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.send_response(401)
            self.end_headers()
            self.wfile.write(b"no key")

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Refuse)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        case = {"catalog": json.loads(GITHUB.read_bytes()), "query": "q",
                "expected_tool": "create_issue"}
        (here / "c.jsonl").write_text(json.dumps(case) + "\n")
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        r = cli("evals", "tools", "c.jsonl", "--type", "toolschema", "--grader", "llm",
                "--model", "m", env={"CAVEMAN_EVALS_BASE_URL": url})
    finally:
        server.shutdown()
    assert (r.returncode, r.stdout) == (1, b"")
    assert r.stderr.decode() == (f"caveman-engine evals tools: HTTP 401 from {url}/chat/"
                                 "completions: no key\n")


# --------------------------------------------------------------------------- 8: choice values

@pytest.mark.parametrize("args, env, message", [
    (["mcp", "--type", "toolschema-saf", "--", "cat"], {},
     "caveman-engine mcp: --type toolschema-saf: unknown or unavailable content type "
     "(did you mean toolschema-safe?)"),
    (["compress", "--strict", "--type", "jsn", "a.json"], {},
     "caveman-engine compress: --type jsn: unknown or unavailable content type "
     "(did you mean json?)"),
    (["evals", "tools", "--type", "toolschema-saf"], {},
     "caveman-engine evals tools: --type toolschema-saf: unknown or unavailable content type "
     "(did you mean toolschema-safe?)"),
    (["measure", "--disable-rule", "defs_inlin", "tools.json"], {},
     f"caveman-engine measure: --disable-rule defs_inlin: not one of {RULES} "
     "(did you mean defs_inline?)"),
    (["measure", "--rules", "-nosuch", "tools.json"], {},
     f"caveman-engine measure: --rules nosuch: not one of {RULES}"),
    (["diff", "--type", "toolschema-safe", "--rules", "-defs_inlin", "tools.json"], {},
     f"caveman-engine diff: --rules defs_inlin: not one of {RULES} (did you mean defs_inline?)"),
    (["measure", "tools.json"], {"CAVEMAN_SAFE_RULES": "-defs_inlin"},
     f"caveman-engine measure: CAVEMAN_SAFE_RULES defs_inlin: not one of {RULES} "
     "(did you mean defs_inline?)"),
    (["stats", "--format", "TEXT"],  {},
     "caveman-engine stats: --format TEXT: not one of text, json (did you mean text?)"),
    (["toon", "ENCODE", "a.json"], {}, "caveman-engine toon: unknown subcommand: ENCODE "
                                        "(one of encode, decode) (did you mean encode?)"),
    (["measure", "--type=", "tools.json"], {},
     "caveman-engine measure: --type is empty: name a content type"),
    (["diff", "--type=", "tools.json"], {},
     "caveman-engine diff: --type is empty: name a content type"),
])
def test_one_wording_for_every_choice_value(cli, here, args, env, message):
    r = cli(*args, env=env)
    assert (r.returncode, r.stdout, r.stderr.decode()) == (2, b"", message + "\n")


# --------------------------------------------------------------------------- 9, 10: FILE rule

@pytest.mark.parametrize("baseline, reason", [("missing.json", NO_FILE), (".", "Is a directory")])
def test_check_baseline_that_cannot_be_read(cli, here, baseline, reason):
    r = cli("check", "tools.json", "-b", baseline)
    assert (r.returncode, r.stderr.decode()) == (
        2, f"caveman-engine check: cannot read {baseline}: {reason}\n")


def test_evals_run_fixtures(cli, here):
    r = cli("evals", "run", "--fixtures", str(here / "none"))
    assert (r.returncode, r.stderr.decode()) == (
        1, f"caveman-engine evals run: cannot read {here / 'none'}/manifest.yaml: {NO_FILE}\n")
    r = cli("evals", "run", "--fixtures", str(here / "none"), "--fixtures", str(here / "other"))
    assert r.stderr.decode() == (  # the last one given wins
        f"caveman-engine evals run: cannot read {here / 'other'}/manifest.yaml: {NO_FILE}\n")
    r = cli("evals", "run", "--fixtures", "")
    assert (r.returncode, r.stderr) == (
        2, b"caveman-engine evals run: --fixtures is empty: name a directory\n")


# --------------------------------------------------------------------------- 11: groups

@pytest.mark.parametrize("args, message", [
    (["store"], "caveman-engine store: missing COMMAND (one of path, info, export, purge, vacuum)"),
    (["evals"], "caveman-engine evals: missing COMMAND (one of run, tools)"),
    (["toon"], "caveman-engine toon: missing COMMAND (one of encode, decode)"),
    (["mcp"], "caveman-engine mcp: missing COMMAND (usage: caveman-engine mcp [OPTIONS] -- "
              "COMMAND [ARGS]...)"),
    (["mcp", "--retrieve-tool"], "caveman-engine mcp: missing COMMAND (usage: caveman-engine "
                                 "mcp [OPTIONS] -- COMMAND [ARGS]...)"),
])
def test_a_group_without_its_command(cli, args, message):
    r = cli(*args)
    assert (r.returncode, r.stdout, r.stderr.decode()) == (2, b"", message + "\n")
    if args[0] == "mcp":  # the usage named is the one --help shows
        usage = message.split("(usage: ")[-1][:-1]
        assert cli("mcp", "--help").stdout.decode().startswith(f"Usage: {usage}\n")


# --------------------------------------------------------------------------- 12: prefixes

def test_every_error_line_names_the_command(cli_env, cli, here, handle):
    full = full_device(here / "full")
    for args, command in [(["retrieve", handle], "retrieve"), (["store", "path"], "store path"),
                          (["evals", "run", "--format", "json"], "evals run"),
                          (["--help"], None)]:
        with open(full, "wb") as sink:
            p = subprocess.run([console_script(), *args], stdout=sink, stderr=subprocess.PIPE,
                               env=cli_env, timeout=120)
        prefix = f"caveman-engine {command}: " if command else "caveman-engine: "
        assert (p.returncode, p.stderr.decode()) == (
            1, prefix + "write stdout: No space left on device\n")


def test_input_over_the_limit_is_one_wording_and_exit_1(cli, here):
    huge = here / "huge.bin"
    with open(huge, "wb") as f:
        f.truncate((64 << 20) + 1)
    for args, code in [(["compress"], 1), (["detect"], 1), (["measure"], 1),
                       (["toon", "encode"], 1), (["diff", "--type", "toolschema"], 2)]:
        r = cli(*args, "huge.bin")
        command = " ".join(args[:2]) if args[0] == "toon" else args[0]
        assert (r.returncode, r.stderr.decode()) == (
            code, f"caveman-engine {command}: cannot read huge.bin: larger than 67108864 bytes\n")


def test_store_open_failure_names_the_command(cli, tmp_path):
    home = tmp_path / "home-is-a-file"
    home.write_bytes(b"")
    r = cli("stats", env={"CAVEMAN_CCR_DB": None, "CAVEMAN_HOME": str(home)})
    assert (r.returncode, r.stderr.decode()) == (
        1, f"caveman-engine stats: cannot open recovery store: cannot create {home}: exists and "
           "is not a directory\n")


# --------------------------------------------------------------------------- 13: parents

@pytest.mark.parametrize("args", [
    ["check", "tools.json", "-b", "{gone}/bl.json", "--update-baseline"],
    ["store", "export", "{gone}/x/y"],
    ["store", "export", "{gone}/x.tar.gz"],
    ["retrieve", "{handle}", "-o", "{gone}/x"],
    ["compress", "--report", "{gone}/r.json", "a.json"],
])
def test_a_missing_parent_directory_is_never_created(cli, here, handle, args):
    gone = here / "gone"
    args = [a.format(gone=gone, handle=handle) for a in args]
    r = cli(*args)
    command = " ".join(args[:2]) if args[0] == "store" else args[0]
    target = next(a for a in args if a.startswith(str(gone)))
    assert r.returncode == 1
    assert r.stderr.decode() == f"caveman-engine {command}: cannot write {target}: {NO_FILE}\n"
    assert not gone.exists()


# --------------------------------------------------------------------------- 14: smaller

def test_version_takes_no_argument(cli):
    r = cli("--version", "extra")
    assert (r.returncode, r.stdout, r.stderr) == (
        2, b"", b"caveman-engine: unexpected argument: extra\n")
    assert cli("--version").returncode == 0


def test_store_commands_with_no_store_all_exit_0(cli, tmp_path):
    env = {"CAVEMAN_CCR_DB": None, "CAVEMAN_HOME": str(tmp_path / "none")}
    for args in (["export", str(tmp_path / "x")], ["purge", "--all", "--yes"], ["vacuum"]):
        r = cli("store", *args, env=env)
        assert (r.returncode, r.stderr) == (0, b""), args
        assert b"no recovery store" in r.stdout or b"does not exist" in r.stdout
    assert not (tmp_path / "none").exists() and not (tmp_path / "x").exists()
