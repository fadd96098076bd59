"""Fault behaviour of ``caveman-engine mcp`` against small purpose-written fake servers
(``tests/fixtures/mcp/``): every test is bounded by timeouts; none may hang, print a traceback
or exit with the wrong code."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from caveman_engine.mcp.rewrite import META_HANDLE
from tests.conftest import console_script
from tests.fixtures.mcp.rawpeer import RawPeer

FIX = Path(__file__).parent / "fixtures" / "mcp"
PY = sys.executable


@pytest.fixture
def env(tmp_path, rank_cache_dir):
    e = dict(os.environ)
    e["CAVEMAN_CCR_DB"] = str(tmp_path / "ccr.db")
    e["CAVEMAN_CACHE_DIR"] = str(rank_cache_dir)
    return e


def proxy(*server: str, options: tuple[str, ...] = ()) -> list[str]:
    return [console_script(), "mcp", *options, "--", *server]


def run(argv, env, input: bytes = b"", timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(argv, input=input, capture_output=True, env=env, timeout=timeout)


def assert_clean(stderr: bytes) -> None:
    assert b"Traceback" not in stderr, stderr.decode("utf-8", "replace")


REQ = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}\n'


# --------------------------------------------------------------------------- server endings


def test_server_exits_mid_stream(env):
    p = run(proxy(PY, str(FIX / "exit_midstream.py")), env, REQ)
    # the half line is delivered as it was (nothing appended), then the server's exit code
    assert p.stdout == b'{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a","descr'
    assert p.returncode == 3
    assert_clean(p.stderr)


@pytest.mark.parametrize("sig,code", [("SIGKILL", 137), ("SIGTERM", 143), ("SIGINT", 130)])
def test_server_killed_by_signal(env, sig, code):
    p = run(proxy(PY, str(FIX / "killed_by_signal.py"), sig), env, REQ)
    assert p.stdout == b'{"jsonrpc":"2.0","id":1,"result":{}}\n'
    assert p.returncode == code
    assert_clean(p.stderr)


def test_client_closes_stdin(env, tmp_path):
    record = tmp_path / "received"
    peer = RawPeer(proxy(PY, str(FIX / "recorder.py"), str(record)), env=env)
    assert peer.request("ping") == b'{"jsonrpc":"2.0","id":1,"result":{}}'
    t0 = time.monotonic()
    assert peer.close(timeout=30) == 5
    assert time.monotonic() - t0 < 10
    assert_clean(bytes(peer.stderr))


def test_spawn_failure(env):
    p = run(proxy("does-not-exist-caveman-cmd", "--flag"), env)
    assert p.returncode == 1
    assert p.stdout == b""
    lines = p.stderr.decode().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("caveman-engine mcp: cannot start does-not-exist-caveman-cmd: ")


def test_usage_errors(env):
    p = run([console_script(), "mcp"], env)
    assert (p.returncode, p.stderr) == (
        2, b"caveman-engine mcp: missing COMMAND (usage: caveman-engine mcp [OPTIONS] -- "
           b"COMMAND [ARGS]...)\n")
    p = run([console_script(), "mcp", "--type", "nope", "--", PY, "-c", "pass"], env)
    assert (p.returncode, p.stderr) == (
        2, b"caveman-engine mcp: --type nope: unknown or unavailable content type\n")


# --------------------------------------------------------------------------- signals


def _start_trapped(env):
    peer = RawPeer(proxy(PY, str(FIX / "sigtrap.py")), env=env)
    peer.wait_for(lambda m: m.get("method") == "notifications/ready", timeout=30)
    return peer


@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 7), (signal.SIGINT, 9)])
def test_signals_forwarded(env, sig, code):
    peer = _start_trapped(env)
    peer.proc.send_signal(sig)
    assert peer.proc.wait(30) == code
    peer.close()
    assert f"trapped {sig.name}".encode() in bytes(peer.stderr)
    assert_clean(bytes(peer.stderr))


def test_sigterm_kills_plain_server(env):
    peer = RawPeer(proxy(PY, "-c", "import sys,time; print('{}', flush=True); time.sleep(60)"),
                   env=env)
    assert peer.lines.get(timeout=30) == b"{}"
    peer.proc.send_signal(signal.SIGTERM)
    assert peer.proc.wait(30) == 143
    peer.close()
    assert_clean(bytes(peer.stderr))


# --------------------------------------------------------------------------- garbage, big lines


BIG = 20 * 1024 * 1024

READ_FILE = (
    b'{"name":"read_file_%d","title":"Read File","description":"Read the complete contents of a '
    b'file as text. Use this when you need to examine the contents of a single file.",'
    b'"inputSchema":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",'
    b'"title":"ReadFileArgs","properties":{"path":{"type":"string","title":"Path",'
    b'"description":"The path","examples":["/tmp/a"]}},"required":["path"]}}'
)
GARBAGE = (
    b"not json\r\n"
    b"\n"
    b"   \t\n"
    b"\xff\xfe\x00 binary \xc3\n"
    b"[1, 2]\n"
    b'{"jsonrpc":"2.0","method":"notifications/message","params":{"n":12345678901234567890123,'
    b'"f":1.0,"s":"\\u00e9\\u0001"}}\n'
    b'{"jsonrpc":"2.0","id":1,"result":{"tools":"not a list"}\n'  # malformed: unclosed
    # a list that would be rewritten, but answers an id nobody asked for
    b'{"jsonrpc":"2.0","id":99,"result":{"tools":[' + b",".join(READ_FILE % i for i in range(3))
    + b"]}}\n"
)
# Three tools: what toolschema saves on them pays for the _meta handle (one would not).
TOOLS_RESPONSE = (
    b'{"jsonrpc":"2.0","id":__ID__,"result":{"tools":[null,"odd",42,'
    + b",".join(READ_FILE % i for i in range(3))
    + b'],"big":98765432109876543210987}}\n'
)


def test_garbage_and_20mb_line(env, tmp_path):
    (tmp_path / "garbage").write_bytes(GARBAGE)
    (tmp_path / "tools").write_bytes(TOOLS_RESPONSE)
    server = [PY, str(FIX / "garbage.py"), str(tmp_path / "garbage"), str(BIG),
              str(tmp_path / "tools")]
    requests = REQ + b'{"jsonrpc":"2.0","id":2,"method":"ping"}\n'
    t0 = time.monotonic()
    p = run(proxy(*server), env, requests, timeout=120)
    assert p.returncode == 0
    assert_clean(p.stderr)
    assert time.monotonic() - t0 < 60
    out = p.stdout
    # garbage, malformed JSON, big numbers, a response to an id nobody asked for: byte for byte
    assert out.startswith(GARBAGE)
    rest = out[len(GARBAGE):]
    big_line, rest = rest[:BIG], rest[BIG:]
    head = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"result":"'
    assert big_line == head + b"x" * (BIG - len(head) - 4) + b'"}}\n'
    tools_line, ping_line, tail = rest.split(b"\n")
    assert ping_line == b'{"jsonrpc":"2.0","id":2,"result":{}}' and tail == b""
    # the list response was rewritten in place: the tools array is the toolschema output for
    # the original array (odd items kept), everything else (the big number too) is the server's
    from caveman_engine.compressors import toolschema

    original = TOOLS_RESPONSE.replace(b"__ID__", b"1")
    start, end = original.index(b"[null"), original.index(b',"big"')
    handle = json.loads(tools_line)["result"]["_meta"][META_HANDLE]
    assert tools_line == (
        b'{"jsonrpc":"2.0","id":1,"result":{"_meta":{"caveman/recovery_handle":"'
        + handle.encode() + b'"},"tools":' + toolschema.compress(original[start:end])
        + b',"big":98765432109876543210987}}'
    )
    tools = json.loads(tools_line)["result"]["tools"]
    assert tools[:3] == [None, "odd", 42]
    assert [t["name"] for t in tools[3:]] == ["read_file_0", "read_file_1", "read_file_2"]
    assert all(list(t["inputSchema"]["properties"]) == ["path"] for t in tools[3:])
    got = run([console_script(), "retrieve", handle], env)
    assert got.stdout == original[start:end]


def test_line_without_final_newline(env, tmp_path):
    payload = b'{"jsonrpc":"2.0","id":1,"result":{"payload":"' + b"y" * 1_500_000 + b'"}}'
    (tmp_path / "payload").write_bytes(payload)
    code = ("import sys; sys.stdin.buffer.readline(); "
            "sys.stdout.buffer.write(open(sys.argv[1], 'rb').read())")
    p = run(proxy(PY, "-c", code, str(tmp_path / "payload")), env, REQ)
    assert p.returncode == 0
    assert p.stdout == payload
    assert_clean(p.stderr)


class Reader:
    """Our stdout, read on a thread into one buffer; ``wait_for(n)`` waits for ``n`` bytes."""

    def __init__(self, stream) -> None:
        self.data = bytearray()
        self.cond = threading.Condition()
        self.eof = False
        self.thread = threading.Thread(target=self._run, args=(stream,), daemon=True)
        self.thread.start()

    def _run(self, stream) -> None:
        while chunk := stream.read1(1 << 20):
            with self.cond:
                self.data += chunk
                self.cond.notify_all()
        with self.cond:
            self.eof = True
            self.cond.notify_all()

    def wait_for(self, n: int, timeout: float = 60) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: len(self.data) >= n or self.eof, timeout) and \
                len(self.data) >= n


# A server that answers a tools/list with one line of __SIZE__ bytes, written in 1 MiB pieces
# and not ended until the client's next request: meanwhile the line is all the client can get.
# Then its newline, the response to that request (from the file argv[1]) and exit at EOF.
LONG_LINE_SERVER = """
import os, sys
head = b'{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"big","description":"'
tail = b'"}]}}'
size = __SIZE__
sys.stdin.buffer.readline()
os.write(1, head)
body = size - len(head) - len(tail)
while body > 0:
    body -= os.write(1, b"x" * min(body, 1 << 20))
line = sys.stdin.buffer.readline()
os.write(1, tail + b"\\n" + open(sys.argv[1], "rb").read().replace(b"__ID__", b"2"))
sys.stdin.buffer.read()
"""


def test_line_longer_than_the_bound_streams_through(env, tmp_path):
    """A server line past the 64 MiB bound (the engine's input limit) is not held whole: it
    reaches the client before the server ends it, byte for byte, and the next list is still
    rewritten."""
    from caveman_engine.limits import MAX_INPUT

    size = MAX_INPUT + (1 << 20)
    (tmp_path / "tools").write_bytes(TOOLS_RESPONSE)
    server = [PY, "-c", LONG_LINE_SERVER.replace("__SIZE__", str(size)), str(tmp_path / "tools")]
    p = subprocess.Popen(proxy(*server), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env)
    try:
        out = Reader(p.stdout)
        p.stdin.write(REQ)
        p.stdin.flush()
        # all but the last 5 bytes, which the server holds back until the next request
        assert out.wait_for(size - 5, timeout=60), f"{len(out.data)} of {size} bytes before the end"
        hwm = _hwm_kib(p.pid) if os.path.exists("/proc/self/status") else 0
        p.stdin.write(REQ.replace(b'"id":1', b'"id":2'))
        p.stdin.close()
        err = p.stderr.read()
        assert p.wait(60) == 0
    finally:
        p.kill()
    out.thread.join(30)
    data = bytes(out.data)
    big, tools_line, tail = data.split(b"\n")
    assert len(big) == size and big.endswith(b"x" * 1000 + b'"}]}}') and tail == b""
    assert big.startswith(b'{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"big",')
    assert json.loads(tools_line)["result"]["_meta"][META_HANDLE].startswith("ccr_")
    # measured 97 MiB: at most one bound's worth is held (held whole, it was 354 MiB)
    assert hwm < 160 * 1024, f"peak {hwm} KiB"
    assert err.decode().splitlines() == [
        f"caveman-engine mcp: a server line is longer than {MAX_INPUT} bytes: forwarded as it "
        "comes, unchanged"]


def _hwm_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads VmHWM from /proc")
def test_memory_stays_bounded_past_max_line(env, tmp_path):
    """With --max-line 1 MiB, a 256 MiB server line passes through a middleware whose peak
    memory stays far below the line's size."""
    size = 256 << 20
    (tmp_path / "tools").write_bytes(TOOLS_RESPONSE)
    server = [PY, "-c", LONG_LINE_SERVER.replace("__SIZE__", str(size)), str(tmp_path / "tools")]
    p = subprocess.Popen(proxy(*server, options=("--max-line", str(1 << 20))),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=env)
    try:
        out = Reader(p.stdout)
        p.stdin.write(REQ)
        p.stdin.flush()
        assert out.wait_for(size - 5, timeout=120)
        hwm = _hwm_kib(p.pid)
        p.stdin.write(REQ.replace(b'"id":1', b'"id":2'))
        p.stdin.close()
        err = p.stderr.read()
        assert p.wait(60) == 0
    finally:
        p.kill()
    out.thread.join(30)
    assert hwm < 128 * 1024, f"peak {hwm} KiB"
    assert len(out.data.split(b"\n")[0]) == size
    assert err.decode().splitlines() == [
        "caveman-engine mcp: a server line is longer than 1048576 bytes: forwarded as it comes,"
        " unchanged"]


def test_client_line_longer_than_the_bound_is_not_held(env, tmp_path):
    """With --retrieve-tool, client lines are held until complete (a caveman_retrieve call is
    answered, not forwarded); one longer than --max-line goes on to the server as it comes."""
    record = tmp_path / "received"
    server = ("import os, sys\n"
              "got = bytearray()\n"
              "told = False\n"
              "while chunk := os.read(0, 1 << 20):\n"
              "    got += chunk\n"
              "    if not told and len(got) >= 2 << 20:\n"
              "        os.write(1, b'{\"jsonrpc\":\"2.0\",\"method\":\"notifications/got\"}\\n')\n"
              "        told = True\n"
              "open(sys.argv[1], 'wb').write(got)\n")
    peer = RawPeer(proxy(PY, "-c", server, str(record),
                         options=("--retrieve-tool", "--max-line", str(1 << 20))), env=env)
    long_line = b"a" * (3 << 20)
    peer.send(long_line)
    peer.wait_for(lambda m: m.get("method") == "notifications/got", timeout=30)
    call = (b'{"jsonrpc":"2.0","id":"r","method":"tools/call","params":{"name":'
            b'"caveman_retrieve","arguments":{"handle":"ccr_00000000000000000000000000000000"}}}\n')
    ping = b'{"jsonrpc":"2.0","id":2,"method":"ping"}\n'
    peer.send(b"\n" + call + ping)
    answer = json.loads(peer.wait_for(lambda m: m.get("id") == "r"))
    assert peer.close() == 0
    assert answer["result"]["isError"] is True
    assert record.read_bytes() == long_line + b"\n" + ping
    assert bytes(peer.stderr).decode().splitlines() == [
        "caveman-engine mcp: a client line is longer than 1048576 bytes: forwarded as it comes,"
        " not looked at"]


# --------------------------------------------------------------------------- framing & ids


def test_client_bytes_forwarded_untouched(env, tmp_path):
    record = tmp_path / "received"
    sent = (
        b"garbage \xff line\n"
        b"\n"
        b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}\r\n'
        b'{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"caveman_retrieve",'
        b'"arguments":{"handle":"ccr_00000000000000000000000000000000"}}}\n'
        b'Content-Length: 12\r\n\r\n'
        b'{"jsonrpc":"2.0","id":3,"method":"ping","params":{"n":123456789012345678901234567890}}\n'
        b"trailing without newline"
    )
    p = run(proxy(PY, str(FIX / "recorder.py"), str(record)), env, sent)
    assert p.returncode == 5
    assert record.read_bytes() == sent
    assert_clean(p.stderr)


def test_retrieve_tool_call_is_answered_not_forwarded(env, tmp_path):
    record = tmp_path / "received"
    call = (b'{"jsonrpc":"2.0","id":"r1","method":"tools/call","params":{"name":"caveman_retrieve",'
            b'"arguments":{"handle":"ccr_00000000000000000000000000000000"}}}\n')
    other = b'{"jsonrpc":"2.0","id":2,"method":"ping"}\n'
    p = run(proxy(PY, str(FIX / "recorder.py"), str(record), options=("--retrieve-tool",)),
            env, call + other + b"tail")
    assert p.returncode == 5
    assert record.read_bytes() == other + b"tail"
    lines = p.stdout.split(b"\n")
    answer = json.loads(next(line for line in lines if b'"r1"' in line))
    assert answer["id"] == "r1" and answer["result"]["isError"] is True
    assert "not found" in answer["result"]["content"][0]["text"]
    assert b'{"jsonrpc":"2.0","id":2,"result":{}}' in lines


def _scripted(tmp_path, script: dict) -> list[str]:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script), encoding="utf-8")
    return [PY, str(FIX / "scripted.py"), str(path)]


# Twelve prompts whose descriptions the prose rules shorten by more than the _meta handle costs.
PROMPTS_RESPONSE = (
    '{"jsonrpc":"2.0","id":__ID__,"result":{"prompts":['
    + ",".join('{"name":"p%d","description":"The prompt just really does a thing for the user"}'
               % i for i in range(12))
    + "]}}\n"
)
PROMPT_SHRUNK = "Prompt does thing for user"


def test_only_responses_to_list_requests_are_rewritten(env, tmp_path):
    list_shaped = PROMPTS_RESPONSE
    notify = ('{"jsonrpc":"2.0","method":"notifications/x","params":{"prompts":'
              '[{"description":"The thing"}]}}\n')
    server = _scripted(tmp_path, {
        "@notify": [notify],
        "prompts/list": list_shaped,
        "tools/call": list_shaped,  # same shape, but answers a tools/call: left alone
    })
    peer = RawPeer(proxy(*server), env=env)
    call = peer.request("tools/call", {"name": "x"})
    listed = peer.request("prompts/list")
    peer.send(b'{"jsonrpc":"2.0","id":"abc","method":"prompts/list"}\n')
    by_string = peer.wait_for(lambda m: m.get("id") == "abc")
    assert peer.close() == 0
    assert call == list_shaped.replace("__ID__", "1").rstrip("\n").encode()
    for line in (listed, by_string):
        result = json.loads(line)["result"]
        assert [p["description"] for p in result["prompts"]] == [PROMPT_SHRUNK] * 12
        assert result["_meta"][META_HANDLE].startswith("ccr_")
    # notifications carrying a list key are forwarded byte for byte
    assert bytes(peer.stdout).count(notify.encode()) == 3
    assert_clean(bytes(peer.stderr))


def test_store_unavailable_passes_through(env, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")
    env["CAVEMAN_CCR_DB"] = str(blocker / "sub" / "ccr.db")  # parent is a file: cannot open
    response = PROMPTS_RESPONSE  # rewritten when the store is there
    server = _scripted(tmp_path, {"prompts/list": response})
    p = run(proxy(*server), env, b'{"jsonrpc":"2.0","id":1,"method":"prompts/list"}\n')
    assert p.returncode == 0
    assert p.stdout == response.replace("__ID__", "1").encode()
    assert b"recovery store unavailable" in p.stderr
    assert len(p.stderr.splitlines()) == 1
    assert_clean(p.stderr)


# --------------------------------------------------------------------------- shutdown edges


def test_grandchild_holding_stdout_does_not_keep_proxy_alive(env):
    code = ("import subprocess,sys; subprocess.Popen(['sleep','20'], stderr=subprocess.DEVNULL); "
            "print('{}', flush=True); sys.exit(4)")
    t0 = time.monotonic()
    p = run(proxy(PY, "-c", code), env, timeout=25)
    assert p.returncode == 4
    assert p.stdout == b"{}\n"
    assert time.monotonic() - t0 < 15
    assert_clean(p.stderr)


def test_slow_client_gets_everything_after_server_exit(env):
    size = 8 * 1024 * 1024  # far more than the pipes hold
    code = f"import sys; sys.stdout.buffer.write(b'z' * {size} + b'\\n'); sys.exit(0)"
    proc = subprocess.Popen(proxy(PY, "-c", code), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    time.sleep(3.5)  # the server is long gone; the client has not read anything yet
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert out == b"z" * size + b"\n"
    assert_clean(err)


def test_server_exit_while_client_stdin_stays_open(env):
    peer = RawPeer(proxy(PY, str(FIX / "exit_midstream.py")), env=env)
    peer.send(REQ)  # stdin is not closed: the proxy must still exit with the server
    assert peer.proc.wait(30) == 3
    peer.close()
    assert bytes(peer.stdout) == b'{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a","descr'
    assert_clean(bytes(peer.stderr))


# --------------------------------------------------------------------------- broken pipes

# A server that writes 64 MiB of notifications (far more than any pipe holds), then waits.
FLOOD = ("import os, sys, time\n"
         "line = b'{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"x\":\"'"
         " + b'a' * 1000 + b'\"}}\\n'\n"
         "for _ in range(65536):\n"
         "    os.write(1, line)\n"
         "time.sleep(60)\n")


def test_client_stops_reading_our_stdout(env):
    """The client closes our stdout early: one line, the server is stopped, exit 1."""
    p = subprocess.Popen(proxy(PY, "-c", FLOOD), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env)
    assert p.stdout.read(10)
    p.stdout.close()
    t0 = time.monotonic()
    err = p.stderr.read()
    assert p.wait(timeout=60) == 1
    assert time.monotonic() - t0 < 30
    assert err.decode().splitlines() == ["caveman-engine mcp: write stdout: Broken pipe"]


def test_our_stdout_is_full(env):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    with open("/dev/full", "wb") as sink:
        p = subprocess.run(proxy(PY, "-c", FLOOD), stdin=subprocess.PIPE, stdout=sink,
                           stderr=subprocess.PIPE, env=env, timeout=60)
    assert p.returncode == 1
    assert p.stderr.decode().splitlines() == [
        "caveman-engine mcp: write stdout: No space left on device"]


def test_server_stops_reading_its_stdin(env):
    """The server closes its stdin and exits 0 while the client still sends: what the client
    sent did not arrive, so the middleware says so and does not exit 0."""
    server = "import os, time\nos.close(0)\ntime.sleep(1)\n"
    p = subprocess.Popen(proxy(PY, "-c", server), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env)
    time.sleep(0.3)
    try:
        for _ in range(200):
            p.stdin.write(REQ * 100)
            p.stdin.flush()
    except BrokenPipeError:
        pass
    out, err = p.communicate(timeout=60)
    assert p.returncode == 1
    assert err.decode().splitlines() == ["caveman-engine mcp: write to server: Broken pipe"]


def test_closed_stdout_at_start(env):
    p = subprocess.run(proxy(PY, "-c", "pass"), stdin=subprocess.DEVNULL, capture_output=True,
                       env=env, timeout=60, preexec_fn=lambda: os.close(1))
    assert p.returncode == 1
    assert p.stderr.decode().splitlines() == [
        "caveman-engine mcp: stdout is closed: the client could not read any answer"]
