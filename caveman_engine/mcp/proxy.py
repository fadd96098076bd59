"""The stdio middleware process: spawn the server, pump both directions, rewrite list results.

Threads:

* client→server (``_client_pump``): raw bytes from our stdin to the server's stdin, unchanged.
  Each complete line is looked at (never modified) to remember the ids of list requests, and,
  with ``--retrieve-tool``, to answer ``tools/call caveman_retrieve`` itself (that line is the
  only one not forwarded). A request is registered before its final newline reaches the
  server, so its response can never overtake the registration.
* server→client (``_server_pump``): the server's stdout, split on ``\\n``. A line is parsed only
  while a list request is outstanding and the line could be a response; only the response to
  such a request is rewritten (:mod:`.rewrite`); every other line, malformed or not, goes out
  byte for byte, whatever its size.
* main: waits for the server, exits with its code (128 + signal when it was killed) once its
  output is drained and nothing of its process group is left.

The server leads a session (and process group) of its own, so that a terminal's ^C reaches it
once, through us, and so that the whole tree a launcher such as ``npx`` starts (npm, a shell,
node) can be stopped together: every way out (the server exits; stdin EOF, then a server that
stays silent for ``EOF_GRACE_SECONDS``; SIGINT, SIGTERM, SIGHUP or another fatal signal; our
stdout failing) ends with the group signalled, then SIGTERM, then SIGKILL, each
``STOP_GRACE_SECONDS`` apart while anything of it is left. On Linux the direct child also gets
SIGTERM when we die by SIGKILL (``PR_SET_PDEATHSIG``).

Lines are held whole only up to ``max_line`` bytes (default: the engine's 64 MiB input limit);
a longer line is forwarded as it comes, unchanged and not looked at, so memory stays bounded.

No byte is dropped quietly: when our stdout fails (the client stopped reading, a full disk) the
middleware says so in one line, stops the server and exits 1; when the server stops taking
what the client sends, it says so in one line and exits non-zero even if the server exits 0.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from ..limits import MAX_INPUT
from .rewrite import LIST_KEYS, RETRIEVE_TOOL_NAME, Rewriter

PROG = "caveman-engine mcp"
CHUNK = 1 << 16
PIPE_SIZE = 1 << 20
MAX_PENDING = 4096
FORWARDED_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")
# Signals whose default action would kill us at once: the server's group is stopped first, then
# we die by the signal. (SIGKILL and SIGSTOP cannot be caught; Python ignores SIGPIPE/SIGXFSZ.)
FATAL_SIGNALS = ("SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGVTALRM", "SIGPROF", "SIGXCPU")
# After the server exits, how long its stdout may stay silent before we stop waiting for EOF
# (a process that left its group and holds the pipe open must not keep us alive forever).
DRAIN_IDLE_SECONDS = 2.0
# Stopping the server's process group: each signal (the forwarded one, SIGTERM, SIGKILL) gets
# this long to empty it before the next. The official SDK client allows 2 s after its SIGTERM
# before it SIGKILLs us; SIGTERM then SIGKILL fit in that.
STOP_GRACE_SECONDS = 1.0
# After the client closed our stdin, a server that has been silent this long and still runs is
# stopped (the client's own shutdown sequence, for a client that went away without one).
EOF_GRACE_SECONDS = 5.0
PR_SET_PDEATHSIG = 1
KILL = getattr(signal, "SIGKILL", signal.SIGTERM)  # Windows has no SIGKILL (TerminateProcess)


def _grow_pipe(fd: int) -> None:
    """Linux: a 1 MiB pipe buffer (default 64 KiB) means fewer, larger reads and writes."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_SIZE)
    except (OSError, ImportError, ValueError):
        pass  # not a pipe, not Linux, or above /proc/sys/fs/pipe-max-size: keep the default


def _death_signal():
    """Linux: a ``preexec_fn`` that makes the server's process get SIGTERM when we die, however
    we die (SIGKILL included). None elsewhere, or without ctypes."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (ImportError, OSError, AttributeError):
        return None
    parent = os.getpid()
    option, value = ctypes.c_int(PR_SET_PDEATHSIG), ctypes.c_ulong(signal.SIGTERM)

    def set_in_child() -> None:
        prctl(option, value)
        if os.getppid() != parent:  # we were gone before the call took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return set_in_child


class ServerGroup:
    """The server's process group (its id is the server's pid), signalled as a whole. Once a
    signal finds it empty it is never signalled again, since its id may then be reused. Where
    there are no process groups (Windows), only the server's own process is signalled."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.pgid = proc.pid
        self.gone = False

    def signal(self, signum: int) -> bool:
        """Send ``signum`` (0: only look); False when nothing of the group is left."""
        if self.gone:
            return False
        if not hasattr(os, "killpg"):
            if self.proc.returncode is not None:
                self.gone = True
                return False
            if signum:
                try:
                    self.proc.send_signal(signum)
                except OSError:
                    pass
            return True
        try:
            os.killpg(self.pgid, signum)
        except ProcessLookupError:
            self.gone = True
            return False
        except PermissionError:
            pass  # a member we may not signal (a setuid program): the others got it
        return True

    def running(self) -> bool:
        """Anything of the group left that has not exited? Members that exited but wait for
        their (new) parent to reap them, as orphans under a slow init do, count as gone."""
        if not self.signal(0):
            return False
        try:
            names = os.listdir("/proc")
        except OSError:
            return True  # no /proc: trust kill(2)
        for name in names:
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            fields = stat[stat.rfind(b")") + 2 :].split()
            if len(fields) > 2 and fields[0] != b"Z" and int(fields[2]) == self.pgid:
                return True
        return False

    def wait_empty(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while self.running():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True


def _warn(message: str) -> None:
    try:
        os.write(2, (f"{PROG}: {message}\n").encode("utf-8", "replace"))
    except OSError:
        pass


def _id_key(value: Any) -> tuple | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, (int, float)):
        return ("n", value)
    return None


class EngineHolder:
    """Opens the store and engine once, on first use (or in the background at start)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._engine = None
        self._done = False

    def get(self):
        with self._lock:
            if not self._done:
                self._done = True
                try:
                    from ..engine import Engine
                    from ..store import open_store

                    self._engine = Engine(open_store())
                except Exception as exc:
                    _warn(f"recovery store unavailable, forwarding lists unchanged: {exc}")
                    self._engine = None
            return self._engine

    def warm(self) -> None:
        engine = self.get()
        if engine is not None:
            try:
                engine.count(b"warm up")
            except Exception:
                pass


class Output:
    """Writes to our stdout from two threads: the server's bytes (``write``) and our own answer
    lines (``answer``). An answer never lands inside a server line that is still coming (one
    longer than ``max_line``, streamed): it waits for that line's end. The first failure is
    reported through ``on_error`` (once); later writes are dropped, since the reader is gone."""

    def __init__(self, fd: int, on_error=None) -> None:
        self.fd = fd
        self.lock = threading.Lock()
        self.broken = False
        self.on_error = on_error
        self.line_open = False  # the last server bytes written did not end their line
        self.deferred: list[bytes] = []

    def _write(self, data) -> None:
        if not data or self.broken:
            return
        view = memoryview(data)
        try:
            while view:
                n = os.write(self.fd, view)
                view = view[n:]
        except OSError as exc:
            self.broken = True
            if self.on_error is not None:
                self.on_error(exc)

    def write(self, data, line_open: bool = False) -> None:
        """Server bytes; ``line_open``: they end inside a line, more of it follows."""
        with self.lock:
            self._write(data)
            self.line_open = line_open
            if not line_open and self.deferred:
                waiting, self.deferred = self.deferred, []
                for line in waiting:
                    self._write(line)

    def answer(self, line: bytes) -> None:
        """A whole line of our own (``\n`` included)."""
        with self.lock:
            if self.line_open:
                self.deferred.append(line)
            else:
                self._write(line)

    def finish(self) -> None:
        """The server is done: answers held behind its unterminated last line go out after a
        newline of their own."""
        with self.lock:
            if self.deferred:
                waiting, self.deferred = self.deferred, []
                self._write(b"\n" + b"".join(waiting))


class Proxy:
    def __init__(
        self,
        argv: list[str],
        tool_type: str = "toolschema",
        fields: tuple[str, ...] = ("description",),
        retrieve_tool: bool = False,
        stdin_fd: int = 0,
        stdout_fd: int = 1,
        max_line: int = MAX_INPUT,
    ) -> None:
        self.argv = argv
        self.max_line = max_line
        self.retrieve_tool = retrieve_tool
        self.stdin_fd = stdin_fd
        self.out = Output(stdout_fd, self._client_gone)
        self.server_write_failed = False
        self.engines = EngineHolder()
        self.rewriter = Rewriter(self.engines.get, tool_type, fields, retrieve_tool)
        self.pending: dict[tuple, tuple[str, bool]] = {}
        self.pending_lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        self.group: ServerGroup | None = None
        self.early_signals: list[int] = []
        self.fatal: int | None = None  # a fatal signal we die by once the server is stopped
        self.exited = threading.Event()  # the server's process has exited
        self.stopper: threading.Thread | None = None
        self.stop_lock = threading.RLock()  # also taken by signal handlers, on the main thread
        self._fatal_numbers: set[int] = set()
        self.last_server_read = time.monotonic()
        self.reading = False
        self.server_out_closed = False  # the server's stdout reached EOF

    # ------------------------------------------------------------------ main

    def run(self) -> int:
        self._install_signals()
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=None,
                bufsize=0,
                close_fds=True,
                # its own session and process group: ^C reaches it once, through us, and the
                # whole tree it starts can be signalled at once
                start_new_session=True,
                preexec_fn=_death_signal(),
            )
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            _warn(f"cannot start {self.argv[0]}: {detail}")
            return 1
        self.group = ServerGroup(self.proc)
        try:
            rc = self._serve()
        except BaseException:
            self.group.signal(KILL)  # never leave the server behind
            raise
        if self.fatal is not None:
            # the server is stopped: now die by the signal, as its sender expects
            signal.signal(self.fatal, signal.SIG_DFL)
            os.kill(os.getpid(), self.fatal)
            return 128 + self.fatal
        return rc

    def _serve(self) -> int:
        assert self.proc is not None and self.group is not None
        for signum in self.early_signals:  # arrived while spawning
            self._on_signal(signum, None)
        for fd in (self.proc.stdout.fileno(), self.proc.stdin.fileno()):
            _grow_pipe(fd)
        threading.Thread(target=self.engines.warm, name="warm", daemon=True).start()
        server_out = threading.Thread(target=self._guard, args=(self._server_pump,), daemon=True)
        client_in = threading.Thread(target=self._guard, args=(self._client_pump,), daemon=True)
        server_out.start()
        client_in.start()

        rc = self.proc.wait()
        self.exited.set()
        # What the server started and left behind goes with it (and lets go of its stdout).
        self._stop(signal.SIGTERM)
        # Deliver what the server wrote before it exited. Stop waiting only if its stdout stays
        # open but silent (a process outside its group holding the pipe); a slow client is
        # waited for.
        while server_out.is_alive():
            server_out.join(0.1)
            if self.reading and time.monotonic() - self.last_server_read > DRAIN_IDLE_SECONDS:
                break
        self.out.finish()
        with self.stop_lock:
            stopper = self.stopper
        if stopper is not None:
            stopper.join()
        if self.out.broken:
            return 1
        if rc < 0:
            return 128 + (-rc)
        if rc == 0 and self.server_write_failed:
            return 1
        return rc

    def _stop(self, first: int) -> None:
        """Signal the server's whole group with ``first``; then, in the background, while
        anything of it is left STOP_GRACE_SECONDS later, SIGTERM, and SIGKILL after as long."""
        group = self.group
        if group is None or not group.signal(first):
            return
        with self.stop_lock:
            if self.stopper is not None:
                return
            self.stopper = threading.Thread(target=self._escalate, args=(group, first),
                                            name="stop", daemon=True)
            self.stopper.start()

    @staticmethod
    def _escalate(group: ServerGroup, first: int) -> None:
        for signum in (signal.SIGTERM, KILL):
            if signum == first:
                continue
            if group.wait_empty(STOP_GRACE_SECONDS):
                return
            group.signal(signum)
        group.wait_empty(STOP_GRACE_SECONDS)

    def _client_gone(self, exc: OSError) -> None:
        """Our stdout failed: nobody receives the server's answers any more."""
        _warn(f"write stdout: {exc.strerror or exc}")
        self._stop(signal.SIGTERM)

    def _client_closed(self, closed_at: float) -> None:
        """Our stdin reached EOF (the server's stdin is closed): a server that then stays
        silent for EOF_GRACE_SECONDS and keeps running is stopped."""
        while not self.exited.is_set():
            now = time.monotonic()
            # quiet: waiting for server output (not for a slow client to take ours), or no
            # more output can come
            quiet = self.reading or self.server_out_closed
            since = max(closed_at, self.last_server_read) if quiet else now
            left = EOF_GRACE_SECONDS - (now - since)
            if left <= 0:
                _warn(f"the server is still running {EOF_GRACE_SECONDS:g} s after the client "
                      "closed stdin: stopping it")
                self._stop(signal.SIGTERM)
                return
            self.exited.wait(min(left, 0.5))

    def _on_signal(self, signum: int, _frame) -> None:
        if self.proc is None:
            self.early_signals.append(signum)
        elif signum in self._fatal_numbers:
            if self.fatal is None:
                self.fatal = signum
            self._stop(signal.SIGTERM)
        else:
            self._stop(signum)  # the server's whole group gets the signal we got

    def _install_signals(self) -> None:
        for name in FORWARDED_SIGNALS + FATAL_SIGNALS:
            sig = getattr(signal, name, None)
            if sig is None:
                continue
            try:
                if name in FATAL_SIGNALS:
                    if signal.getsignal(sig) is not signal.SIG_DFL:
                        continue  # ignored or handled by whoever started us: leave it so
                    self._fatal_numbers.add(sig)
                signal.signal(sig, self._on_signal)
            except (OSError, ValueError):
                pass  # not the main thread (embedded use): no forwarding

    def _guard(self, fn) -> None:
        try:
            fn()
        except Exception as exc:  # never a traceback: one line, and keep the proxy alive
            _warn(f"internal error: {type(exc).__name__}: {exc}")

    # ----------------------------------------------------------- client → server

    def _client_pump(self) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        sink = self.proc.stdin.fileno()
        alive = True
        partial = bytearray()  # the current line's bytes seen so far
        held = self.retrieve_tool  # hold partial lines until complete (to intercept calls)
        skipping = False  # the current line is longer than max_line: not looked at, not held

        def send(data) -> None:
            nonlocal alive
            if not alive or not data:
                return
            view = memoryview(data)
            try:
                while view:
                    n = os.write(sink, view)
                    view = view[n:]
            except OSError as exc:  # the server stopped reading: keep draining the client
                alive = False
                self.server_write_failed = True
                _warn(f"write to server: {exc.strerror or exc}")

        while True:
            try:
                chunk = os.read(self.stdin_fd, CHUNK)
            except InterruptedError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                break
            start = 0
            out = bytearray() if held else None
            while True:
                nl = chunk.find(b"\n", start)
                if nl < 0:
                    break
                if skipping:  # the end of a line too long to look at
                    skipping = False
                    if held:
                        out += chunk[start : nl + 1]
                else:
                    if partial:
                        partial += chunk[start:nl]
                        line = bytes(partial)
                        partial = bytearray()
                    else:
                        line = chunk[start:nl]
                    consumed = self._client_line(line)
                    if held and not consumed:
                        out += line
                        out += b"\n"
                start = nl + 1
            if skipping:
                if held:
                    out += chunk[start:]
            else:
                partial += chunk[start:]
                if len(partial) > self.max_line:
                    _warn(f"a client line is longer than {self.max_line} bytes: forwarded as it "
                          "comes, not looked at")
                    if held:
                        out += partial
                    partial = bytearray()
                    skipping = True
            if held:
                send(out)
            else:
                send(chunk)
        if partial:
            if held and not self._client_line(bytes(partial)):
                send(partial)
            elif not held:
                self._client_line(bytes(partial))
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        threading.Thread(target=self._client_closed, args=(time.monotonic(),), name="eof",
                         daemon=True).start()

    def _client_line(self, line: bytes) -> bool:
        """Register list requests; answer caveman_retrieve calls. True: the line is consumed."""
        if b'"' not in line:
            return False
        try:
            msg = json.loads(line)
        except (ValueError, RecursionError):
            return False
        if not isinstance(msg, dict) or "id" not in msg:
            return False
        method = msg.get("method")
        if not isinstance(method, str):
            return False
        key = _id_key(msg["id"])
        if key is None:
            return False
        params = msg.get("params")
        if method in LIST_KEYS:
            first = not (isinstance(params, dict) and params.get("cursor") is not None)
            with self.pending_lock:
                if len(self.pending) >= MAX_PENDING:
                    self.pending.pop(next(iter(self.pending)))
                self.pending[key] = (method, first)
            return False
        if (
            self.retrieve_tool
            and method == "tools/call"
            and isinstance(params, dict)
            and params.get("name") == RETRIEVE_TOOL_NAME
        ):
            self._answer_retrieve(msg["id"], params.get("arguments"))
            return True
        return False

    def _answer_retrieve(self, request_id: Any, arguments: Any) -> None:
        is_error = False
        handle = arguments.get("handle") if isinstance(arguments, dict) else None
        query = arguments.get("query") if isinstance(arguments, dict) else None
        if not isinstance(handle, str) or not handle.strip():
            text, is_error = f"{RETRIEVE_TOOL_NAME}: argument handle is required", True
        elif query is not None and not isinstance(query, str):
            text, is_error = f"{RETRIEVE_TOOL_NAME}: argument query must be a string", True
        else:
            engine = self.engines.get()
            if engine is None:
                text, is_error = f"{RETRIEVE_TOOL_NAME}: recovery store unavailable", True
            else:
                try:
                    with self.rewriter.lock:
                        data = engine.retrieve(handle.strip(), query)
                    text = data.decode("utf-8", "replace")
                except Exception as exc:
                    text, is_error = f"{RETRIEVE_TOOL_NAME}: {handle.strip()}: {exc}", True
        result: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
        if is_error:
            result["isError"] = True
        response = {"jsonrpc": "2.0", "id": request_id, "result": result}
        line = json.dumps(response, ensure_ascii=False, separators=(",", ":"))
        self.out.answer(line.encode("utf-8", "surrogatepass") + b"\n")

    # ----------------------------------------------------------- server → client

    def _server_pump(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        source = self.proc.stdout.fileno()
        partial = bytearray()  # the current line's bytes seen so far (at most max_line)
        streaming = False  # the current line outgrew max_line: its bytes go out as they come
        while True:
            self.last_server_read = time.monotonic()
            self.reading = True
            try:
                chunk = os.read(source, PIPE_SIZE)
            except InterruptedError:
                continue
            except OSError:
                chunk = b""
            finally:
                self.reading = False
            if not chunk:
                break
            if streaming:
                nl = chunk.find(b"\n")
                if nl < 0:
                    self.out.write(chunk, line_open=True)
                    continue
                self.out.write(chunk[: nl + 1])
                streaming = False
                chunk = chunk[nl + 1 :]
            last_nl = chunk.rfind(b"\n")
            if last_nl < 0:
                partial += chunk
            elif not self.pending:
                # Nothing to rewrite: whole lines go out as they came, in one write.
                if partial:
                    partial += chunk[: last_nl + 1]
                    self.out.write(partial)
                    partial = bytearray()
                else:
                    self.out.write(chunk[: last_nl + 1] if last_nl + 1 < len(chunk) else chunk)
                partial += chunk[last_nl + 1 :]
            else:
                start = 0
                while start <= last_nl:
                    nl = chunk.find(b"\n", start)
                    if partial:
                        partial += chunk[start:nl]
                        line = bytes(partial)
                        partial = bytearray()
                    else:
                        line = chunk[start:nl]
                    self._server_line(line, b"\n")
                    start = nl + 1
                partial += chunk[last_nl + 1 :]
            if len(partial) > self.max_line:
                _warn(f"a server line is longer than {self.max_line} bytes: forwarded as it "
                      "comes, unchanged")
                self.out.write(partial, line_open=True)
                partial = bytearray()
                streaming = True
        if partial:
            self._server_line(bytes(partial), b"")
        self.server_out_closed = True

    def _server_line(self, line: bytes, end: bytes) -> None:
        rewritten = None
        if self.pending and (b"result" in line or b"error" in line or b"\\u" in line):
            rewritten = self._maybe_rewrite(line)
        if rewritten is not None:
            self.out.write(rewritten + end, line_open=not end)
        elif end:
            self.out.write(line + end)
        else:
            self.out.write(line, line_open=True)

    def _maybe_rewrite(self, line: bytes) -> bytes | None:
        try:
            msg = json.loads(line)
        except (ValueError, RecursionError):
            return None
        if not isinstance(msg, dict) or "method" in msg or "id" not in msg:
            return None
        key = _id_key(msg["id"])
        if key is None:
            return None
        with self.pending_lock:
            entry = self.pending.pop(key, None)
        if entry is None:
            return None
        method, first_page = entry
        try:
            return self.rewriter.rewrite(line, method, msg, first_page)
        except Exception as exc:
            _warn(f"{method} forwarded unchanged: {type(exc).__name__}: {exc}")
            return None


def run(argv: list[str], **options) -> int:
    return Proxy(argv, **options).run()
