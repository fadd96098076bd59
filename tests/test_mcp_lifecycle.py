"""No process of the server's tree outlives ``caveman-engine mcp``.

Real process trees: ``npx`` running tests/npm's server-everything (npm → sh → node), and a
``sh -c`` wrapper that does not forward signals around a Python MCP server that has a helper
child of its own (``tests/fixtures/mcp/tree_server.py``). Each test snapshots the middleware's
descendants from /proc once the server has answered ``initialize``, stops the middleware one
way (stdin EOF, SIGTERM, SIGHUP, SIGINT, Ctrl-C to its process group, an unhandled signal, a
client SDK closing the session), and checks, the moment the middleware has exited, that none of
them is still alive (same pid, same start time, not a zombie).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import console_script
from tests.fixtures.mcp.npm import npx
from tests.fixtures.mcp.rawpeer import RawPeer

if not os.path.isdir("/proc/self"):
    pytest.skip("process trees are read from /proc (Linux)", allow_module_level=True)

FIX = Path(__file__).parent / "fixtures" / "mcp"
PY = sys.executable
# sh runs the server as a child (a command follows it, so sh cannot exec it) and, waiting for
# it, neither forwards a signal nor waits for the server when one kills sh itself.
WRAPPER = ["sh", "-c", '"$@"; echo "wrapper: server exited with $?" >&2', "sh"]


@pytest.fixture
def env(tmp_path, rank_cache_dir):
    e = dict(os.environ)
    e["CAVEMAN_CCR_DB"] = str(tmp_path / "ccr.db")
    e["CAVEMAN_CACHE_DIR"] = str(rank_cache_dir)
    return e


def _stat(pid: int) -> tuple[int, str, int] | None:
    """(parent pid, state, start time in clock ticks) of a live or zombie process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), fields[0], int(fields[19])


def descendants(root: int) -> dict[tuple[int, int], str]:
    """Every descendant of ``root``: (pid, start time) → command line."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st is not None:
                children.setdefault(st[0], []).append(int(name))
    found, todo = {}, [root]
    while todo:
        for pid in children.get(todo.pop(), []):
            st = _stat(pid)
            if st is None:
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
            except OSError:
                cmd = "?"
            found[(pid, st[2])] = cmd
            todo.append(pid)
    return found


def alive(tree: dict[tuple[int, int], str]) -> list[str]:
    """The members of ``tree`` still running (a zombie has exited: it only waits for reaping)."""
    left = []
    for (pid, start), cmd in tree.items():
        st = _stat(pid)
        if st is not None and st[2] == start and st[1] != "Z":
            left.append(f"{pid} {cmd}")
    return left


def kill_tree(tree) -> None:
    for (pid, start), _ in tree.items():
        st = _stat(pid)
        if st is not None and st[2] == start:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def tree_server(*options: str) -> list[str]:
    return [*WRAPPER, PY, str(FIX / "tree_server.py"), *options]


SERVERS = {
    "npx": lambda: npx("mcp-server-everything"),
    "sh-wrapper": lambda: tree_server(),
}


def start(server: list[str], env: dict, *options: str) -> tuple[RawPeer, dict]:
    """The middleware in a session of its own (so that a signal to its process group, as the
    terminal sends on Ctrl-C, reaches nobody else), past initialize; and its descendants."""
    peer = RawPeer([console_script(), "mcp", *options, "--", *server], env=env,
                   start_new_session=True)
    try:
        assert b'"protocolVersion"' in peer.initialize()
    except BaseException:
        kill_tree(descendants(peer.proc.pid))
        peer.proc.kill()
        raise
    return peer, descendants(peer.proc.pid)


def stop(peer: RawPeer, tree, how: str) -> int:
    if how == "eof":
        peer.proc.stdin.close()
    elif how == "ctrl-c":
        os.killpg(peer.proc.pid, signal.SIGINT)
    else:
        peer.proc.send_signal(getattr(signal, how))
    try:
        return peer.proc.wait(20)
    except subprocess.TimeoutExpired:
        peer.proc.kill()
        raise
    finally:
        survivors = alive(tree)
        kill_tree(tree)
        assert survivors == [], f"still running after the middleware exited: {survivors}"


@pytest.mark.parametrize("how", ["eof", "SIGTERM", "SIGHUP", "SIGINT", "ctrl-c"])
@pytest.mark.parametrize("server", sorted(SERVERS))
def test_no_server_process_survives(env, server, how):
    peer, tree = start(SERVERS[server](), env)
    commands = list(tree.values())
    if server == "npx":
        assert any("npm" in c for c in commands) and any(
            "mcp-server-everything" in c and "node" in c for c in commands), commands
    else:  # sh, the Python server, its helper
        assert len(tree) == 3 and commands[0].startswith("sh -c"), commands
    rc = stop(peer, tree, how)
    peer.close()
    if how == "eof":
        assert rc == 0
    assert b"Traceback" not in bytes(peer.stderr), bytes(peer.stderr).decode("utf-8", "replace")


def test_helper_ignoring_sigterm_is_killed(env):
    """SIGTERM to the group, then SIGKILL to whatever is left a grace period later."""
    peer, tree = start(tree_server("--helper-ignores", "INT,HUP,TERM"), env)
    t0 = time.monotonic()
    stop(peer, tree, "SIGTERM")
    assert time.monotonic() - t0 < 5
    peer.close()


def test_server_ignoring_stdin_eof_is_stopped(env):
    """The client closed stdin and the server stays (a live timer, a socket): a few seconds of
    silence later it is stopped, with one line on stderr."""
    peer, tree = start(tree_server("--linger"), env)
    t0 = time.monotonic()
    assert stop(peer, tree, "eof") == 143
    assert 4 < time.monotonic() - t0 < 12
    peer.close()
    lines = bytes(peer.stderr).decode().splitlines()
    assert ("caveman-engine mcp: the server is still running 5 s after the client closed stdin:"
            " stopping it") in lines, lines


def test_server_closing_stdout_and_staying_is_stopped(env):
    """Nothing more can come from a server that closed its stdout: after stdin EOF it gets the
    same 5 s, not forever."""
    code = ("import os, sys, time\n"
            "sys.stdin.buffer.readline()\n"
            "os.write(1, b'{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\\n')\n"
            "os.close(1)\n"
            "sys.stdin.buffer.read()\n"
            "time.sleep(60)\n")
    peer = RawPeer([console_script(), "mcp", "--", PY, "-c", code], env=env)
    assert peer.request("ping") == b'{"jsonrpc":"2.0","id":1,"result":{}}'
    tree = descendants(peer.proc.pid)
    t0 = time.monotonic()
    assert stop(peer, tree, "eof") == 143
    assert 4 < time.monotonic() - t0 < 12
    peer.close()


def test_sdk_client_closing_the_session(env):
    """The official SDK closes stdin, waits 2 s, then SIGTERMs the middleware's process group
    and SIGKILLs it 2 s later: the middleware has stopped its server's tree in that time."""
    import anyio
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=console_script(),
                                   args=["mcp", "--", *tree_server("--linger")], env=env)
    seen: dict = {}

    async def drive():
        with anyio.fail_after(60):
            async with stdio_client(params, errlog=open(os.devnull, "w")) as (r, w):
                async with ClientSession(r, w) as s:
                    await s.initialize()
                    listed = await s.list_tools()
                    [middleware] = [pid for (pid, _), cmd in descendants(os.getpid()).items()
                                    if "caveman-engine mcp" in cmd]
                    seen.update(descendants(middleware))
                    return [t.name for t in listed.tools]

    assert anyio.run(drive) == ["noop"]
    assert len(seen) == 3
    survivors = alive(seen)
    kill_tree(seen)
    assert survivors == []


def test_unhandled_signal_stops_the_tree_then_kills_the_middleware(env):
    peer, tree = start(tree_server(), env)
    assert stop(peer, tree, "SIGUSR1") == -signal.SIGUSR1
    peer.close()


def test_sigkill_of_the_middleware_sends_sigterm_to_its_child(env, tmp_path):
    """SIGKILL cannot be caught: on Linux the direct child still gets SIGTERM (parent-death
    signal). This server never reads stdin, so only that signal can stop it."""
    mark = tmp_path / "mark"
    code = ("import os, signal, sys, time\n"
            "def bye(signum, frame):\n"
            "    open(sys.argv[1], 'w').write(signal.Signals(signum).name)\n"
            "    os._exit(0)\n"
            "signal.signal(signal.SIGTERM, bye)\n"
            "os.write(1, b'{\"jsonrpc\":\"2.0\",\"method\":\"notifications/ready\"}\\n')\n"
            "time.sleep(60)\n")
    peer = RawPeer([console_script(), "mcp", "--", PY, "-c", code, str(mark)], env=env)
    peer.wait_for(lambda m: m.get("method") == "notifications/ready", timeout=30)
    tree = descendants(peer.proc.pid)
    assert len(tree) == 1
    peer.proc.kill()
    peer.proc.wait(10)
    deadline = time.monotonic() + 10
    while alive(tree) and time.monotonic() < deadline:
        time.sleep(0.05)
    survivors = alive(tree)
    kill_tree(tree)
    assert survivors == []
    assert mark.read_text() == "SIGTERM"
