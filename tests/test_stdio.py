"""No byte is lost quietly and no traceback is printed when the standard streams misbehave:
closed descriptors, a full device, a short write into a small filesystem, a reader that goes
away, Ctrl-C on a terminal. Every case runs the real console script."""

from __future__ import annotations

import hashlib
import json
import os
import pty
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import CORPUS, console_script
from .test_faults import tmpfs

BIG = b"".join(b"%08d some plain words that no compressor wants to touch\n" % i
               for i in range(150_000))  # 9.0 MB


@pytest.fixture
def env(cli_env):
    return cli_env


def close_fd(fd: int):
    return lambda: os.close(fd)


def run(args, env, *, stdin=None, stdout=subprocess.PIPE, input=None, close=None,
        extra_env=None):
    full = {**env, **(extra_env or {})}
    return subprocess.run([console_script(), *args], stdin=stdin, stdout=stdout,
                          stderr=subprocess.PIPE, input=input, env=full, timeout=120,
                          preexec_fn=close_fd(close) if close is not None else None)


def one_line(stderr: bytes) -> str:
    text = stderr.decode()
    assert "Traceback" not in text, text
    assert text.count("\n") == 1 and text.endswith("\n"), text
    return text[:-1]


# --------------------------------------------------------------------------- closed stdin

@pytest.mark.parametrize("args, message", [
    (["compress"], "caveman-engine compress: cannot read stdin: stdin is closed"),
    (["compress", "--type", "toolschema"],
     "caveman-engine compress: cannot read stdin: stdin is closed"),
    (["detect"], "caveman-engine detect: cannot read stdin: stdin is closed"),
    (["toon", "encode"], "caveman-engine toon encode: cannot read stdin: stdin is closed"),
    (["toon", "decode"], "caveman-engine toon decode: cannot read stdin: stdin is closed"),
    (["measure", "-"], "caveman-engine measure: cannot read stdin: stdin is closed"),
])
def test_closed_stdin_is_one_line_error(env, args, message):
    r = run(args, env, close=0)
    assert one_line(r.stderr) == message
    assert r.returncode == 1
    assert r.stdout == b""


def test_closed_stdin_does_not_matter_to_commands_without_input(env):
    r = run(["registry"], env, close=0)
    assert r.returncode == 0 and r.stdout.startswith(b'{"schema_version"')


# --------------------------------------------------------------------------- closed stdout

def _stored_handle(env) -> str:
    r = run(["compress", "--type", "toolschema"], env,
            input=(CORPUS / "github.tools.json").read_bytes())
    return json.loads(r.stderr)["recovery_handle"]


@pytest.mark.parametrize("args, prefix", [
    (["compress"], "caveman-engine compress: "),
    (["detect"], "caveman-engine detect: "),
    (["stats"], "caveman-engine stats: "),
    (["registry"], "caveman-engine registry: "),
    (["registry", "--all"], "caveman-engine registry: "),
    (["toon", "encode"], "caveman-engine toon encode: "),
    (["store", "path"], "caveman-engine store path: "),
    (["--help"], "caveman-engine: "),
    (["--version"], "caveman-engine: "),
])
def test_closed_stdout_is_one_line_error(env, args, prefix):
    r = run(args, env, input=b'{"rows":[{"a":1},{"a":2}]}', close=1)
    assert one_line(r.stderr) == prefix + "write stdout: stdout is closed"
    assert r.returncode == 1


def test_closed_stdout_retrieve(env):
    handle = _stored_handle(env)
    r = run(["retrieve", handle], env, close=1)
    assert one_line(r.stderr) == "caveman-engine retrieve: write stdout: stdout is closed"
    assert r.returncode == 1


def test_closed_stdout_never_lands_in_the_store(env, tmp_path):
    """With fd 1 closed, the store must not take descriptor 1 and receive our output."""
    data = (CORPUS / "github.tools.json").read_bytes()
    r = run(["compress", "--type", "toolschema"], env, input=data, close=1)
    assert r.returncode == 1
    handle = "ccr_" + hashlib.sha256(data).hexdigest()[:32]
    back = run(["retrieve", handle], env)
    assert back.returncode == 0, back.stderr
    assert back.stdout == data
    assert run(["stats"], env).returncode == 0


# --------------------------------------------------------------------------- full device

@pytest.mark.parametrize("args, prefix", [
    (["compress"], "caveman-engine compress: "),
    (["compress", "--type", "nosuch"], "caveman-engine compress: "),
    (["detect"], "caveman-engine detect: "),
    (["stats"], "caveman-engine stats: "),
    (["registry", "--all"], "caveman-engine registry: "),
    (["toon", "encode"], "caveman-engine toon encode: "),
    (["measure", "-"], "caveman-engine measure: "),
])
@pytest.mark.parametrize("unbuffered", [False, True])
def test_full_stdout_is_one_line_error(env, args, prefix, unbuffered):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    data = (CORPUS / "github.tools.json").read_bytes() if args[0] == "measure" else \
        b'{"rows":[{"a":1},{"a":2}]}'
    extra = {"PYTHONUNBUFFERED": "1"} if unbuffered else {"PYTHONUNBUFFERED": None}
    full = {k: v for k, v in {**env, **extra}.items() if v is not None}
    with open("/dev/full", "wb") as sink:
        r = subprocess.run([console_script(), *args], input=data, stdout=sink,
                           stderr=subprocess.PIPE, env=full, timeout=120)
    assert one_line(r.stderr) == prefix + "write stdout: No space left on device"
    assert r.returncode == 1


def test_measure_file_to_full_stdout(env):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    with open("/dev/full", "wb") as sink:
        r = subprocess.run([console_script(), "measure", str(CORPUS / "github.tools.json")],
                           stdout=sink, stderr=subprocess.PIPE, env=env, timeout=120)
    assert one_line(r.stderr) == "caveman-engine measure: write stdout: No space left on device"
    assert r.returncode == 1


def test_full_stderr_fails_compress(env):
    """The report is part of compress's answer: a report that cannot be written is exit 1."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    with open("/dev/full", "wb") as sink:
        r = subprocess.run([console_script(), "compress"], input=b"hello\n",
                           stdout=subprocess.PIPE, stderr=sink, env=env, timeout=120)
    assert r.returncode == 1
    assert r.stdout == b"hello\n"


# --------------------------------------------------------------------------- short writes

@pytest.mark.parametrize("unbuffered", [False, True])
def test_short_write_into_small_filesystem(env, tmp_path, unbuffered):
    """8.9 MB of pass-through into a 1 MiB tmpfs: never exit 0 with a success report."""
    with tmpfs(tmp_path / "small", "1m") as small:
        extra = {"PYTHONUNBUFFERED": "1"} if unbuffered else {}
        with open(small / "out", "wb") as sink:
            r = subprocess.run([console_script(), "compress", "--type", "nosuch"], input=BIG,
                               stdout=sink, stderr=subprocess.PIPE, env={**env, **extra},
                               timeout=120)
        written = (small / "out").stat().st_size
    assert written < len(BIG)
    assert one_line(r.stderr) == "caveman-engine compress: write stdout: No space left on device"
    assert r.returncode == 1


@pytest.mark.parametrize("args", [["compress", "--type", "nosuch"], ["toon", "decode"]])
@pytest.mark.parametrize("unbuffered", [False, True])
def test_reader_that_closes_early(env, args, unbuffered):
    """A reader that takes one byte and goes away: it got what it wanted, so the process ends
    quietly by SIGPIPE as `cat` would (the shell says 141; a real `| head -c1` pipeline is in
    test_cli_rules), never with a success that hides the cut or a Broken pipe message."""
    extra = {"PYTHONUNBUFFERED": "1"} if unbuffered else {}
    data = BIG
    if args[0] == "toon":
        rows = b"".join(b"  %d,name%d\n" % (i, i) for i in range(300_000))
        data = b"users[300000]{id,name}:\n" + rows.rstrip(b"\n")
    p = subprocess.Popen([console_script(), *args], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**env, **extra})
    p.stdin.write(data)
    p.stdin.close()
    assert p.stdout.read(1)
    p.stdout.close()
    err = p.stderr.read()
    assert p.wait(timeout=120) == -signal.SIGPIPE
    assert err == b""


def test_retrieve_into_reader_that_closes_early(env):
    r = run(["compress", "--type", "nosuch"], env, input=b"x")
    data = json.dumps({"rows": [{"id": i, "name": f"n{i}"} for i in range(200_000)]}).encode()
    r = run(["compress"], env, input=data)
    handle = json.loads(r.stderr)["recovery_handle"]
    p = subprocess.Popen([console_script(), "retrieve", handle], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env)
    assert p.stdout.read(1)
    p.stdout.close()
    err = p.stderr.read()
    assert p.wait(timeout=120) == -signal.SIGPIPE
    assert err == b""


# --------------------------------------------------------------------------- Ctrl-C

def _wait_blocked_reading(pid: int, timeout: float = 20) -> None:
    """Wait until the process sleeps in a read (it has started and installed its handlers)."""
    deadline = time.monotonic() + timeout
    stat = Path(f"/proc/{pid}/stat")
    syscall = Path(f"/proc/{pid}/syscall")
    while time.monotonic() < deadline:
        try:
            state = stat.read_text().rsplit(")", 1)[1].split()[0]
            nr = syscall.read_text().split()[0] if syscall.exists() else ""
        except (OSError, IndexError):
            state, nr = "", ""
        # syscall 0 is read(2) on x86-64; elsewhere settle for the sleeping state
        if state == "S" and (nr in ("0", "63") or not nr.isdigit()):
            return
        time.sleep(0.05)
    pytest.fail("the process never blocked on its terminal")


@pytest.mark.parametrize("args", [["detect", "-"], ["compress", "-"], ["toon", "encode", "-"]])
def test_ctrl_c_while_waiting_on_a_terminal(env, args):
    """`-` names stdin explicitly, so the command waits on the terminal (without a file
    argument it would print its usage instead, see test_cli_habits)."""
    if not sys.platform.startswith("linux"):
        pytest.skip("reads /proc")
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen([console_script(), *args], stdin=slave, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env)
        _wait_blocked_reading(p.pid)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    finally:
        os.close(master)
        os.close(slave)
    assert p.returncode == 130
    command = " ".join(args[:2]) if args[0] == "toon" else args[0]
    assert one_line(err) == f"caveman-engine {command}: interrupted"
    assert out == b""
