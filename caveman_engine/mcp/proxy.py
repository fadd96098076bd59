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
* main: waits for the server, forwards SIGINT/SIGTERM/SIGHUP to it, exits with its code
  (128 + signal when it was killed) once its output is drained.

No byte is dropped quietly: when our stdout fails (the client stopped reading, a full disk) the
middleware says so in one line, stops the server and exits 1; when the server stops taking
what the client sends, it says so in one line and exits non-zero even if the server exits 0.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from typing import Any

from .rewrite import LIST_KEYS, RETRIEVE_TOOL_NAME, Rewriter

PROG = "caveman-engine mcp"
CHUNK = 1 << 16
PIPE_SIZE = 1 << 20
MAX_PENDING = 4096
FORWARDED_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")
# After the server exits, how long its stdout may stay silent before we stop waiting for EOF
# (a grandchild holding the pipe open must not keep us alive forever).
DRAIN_IDLE_SECONDS = 2.0
# A server asked to stop (our stdout is gone) is killed if it is still running after this.
KILL_GRACE_SECONDS = 5.0


def _grow_pipe(fd: int) -> None:
    """Linux: a 1 MiB pipe buffer (default 64 KiB) means fewer, larger reads and writes."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_SIZE)
    except (OSError, ImportError, ValueError):
        pass  # not a pipe, not Linux, or above /proc/sys/fs/pipe-max-size: keep the default


def _kill_if_running(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            proc.kill()
        except OSError:
            pass


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
    """Whole-line writes to our stdout from two threads. The first failure is reported through
    ``on_error`` (once); later writes are dropped, since the reader is gone."""

    def __init__(self, fd: int, on_error=None) -> None:
        self.fd = fd
        self.lock = threading.Lock()
        self.broken = False
        self.on_error = on_error

    def write(self, data) -> None:
        if not data:
            return
        with self.lock:
            if self.broken:
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


class Proxy:
    def __init__(
        self,
        argv: list[str],
        tool_type: str = "toolschema",
        fields: tuple[str, ...] = ("description",),
        retrieve_tool: bool = False,
        stdin_fd: int = 0,
        stdout_fd: int = 1,
    ) -> None:
        self.argv = argv
        self.retrieve_tool = retrieve_tool
        self.stdin_fd = stdin_fd
        self.out = Output(stdout_fd, self._client_gone)
        self.server_write_failed = False
        self.engines = EngineHolder()
        self.rewriter = Rewriter(self.engines.get, tool_type, fields, retrieve_tool)
        self.pending: dict[tuple, tuple[str, bool]] = {}
        self.pending_lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        self.early_signals: list[int] = []
        self.last_server_read = time.monotonic()
        self.reading = False

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
                process_group=0,  # terminal ^C reaches the server once: through us
            )
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            _warn(f"cannot start {self.argv[0]}: {detail}")
            return 1
        for signum in self.early_signals:  # arrived while spawning
            self._forward(signum)
        for fd in (self.proc.stdout.fileno(), self.proc.stdin.fileno()):
            _grow_pipe(fd)
        threading.Thread(target=self.engines.warm, name="warm", daemon=True).start()
        server_out = threading.Thread(target=self._guard, args=(self._server_pump,), daemon=True)
        client_in = threading.Thread(target=self._guard, args=(self._client_pump,), daemon=True)
        server_out.start()
        client_in.start()

        rc = self.proc.wait()
        # Deliver what the server wrote before it exited. Stop waiting only if its stdout stays
        # open but silent (a grandchild holding the pipe); a slow client is waited for.
        while server_out.is_alive():
            server_out.join(0.1)
            if self.reading and time.monotonic() - self.last_server_read > DRAIN_IDLE_SECONDS:
                break
        if self.out.broken:
            return 1
        if rc < 0:
            return 128 + (-rc)
        if rc == 0 and self.server_write_failed:
            return 1
        return rc

    def _client_gone(self, exc: OSError) -> None:
        """Our stdout failed: nobody receives the server's answers any more."""
        _warn(f"write stdout: {exc.strerror or exc}")
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        try:
            proc.terminate()
        except OSError:
            return
        killer = threading.Timer(KILL_GRACE_SECONDS, _kill_if_running, (proc,))
        killer.daemon = True
        killer.start()

    def _forward(self, signum: int) -> None:
        proc = self.proc
        if proc is None:
            self.early_signals.append(signum)
        elif proc.returncode is None:
            try:
                proc.send_signal(signum)
            except OSError:
                pass

    def _install_signals(self) -> None:
        for name in FORWARDED_SIGNALS:
            sig = getattr(signal, name, None)
            if sig is None:
                continue
            try:
                signal.signal(sig, lambda signum, _frame: self._forward(signum))
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
                if partial:
                    partial += chunk[start:nl]
                    line = bytes(partial)
                    partial.clear()
                else:
                    line = chunk[start:nl]
                consumed = self._client_line(line)
                if held and not consumed:
                    out += line
                    out += b"\n"
                start = nl + 1
            partial += chunk[start:]
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
        self.out.write(line.encode("utf-8", "surrogatepass") + b"\n")

    # ----------------------------------------------------------- server → client

    def _server_pump(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        source = self.proc.stdout.fileno()
        partial: list[bytes] = []
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
            last_nl = chunk.rfind(b"\n")
            if last_nl < 0:
                partial.append(chunk)
                continue
            if not self.pending:
                # Nothing to rewrite: whole lines go out as they came, in one write.
                if partial:
                    partial.append(chunk[: last_nl + 1])
                    self.out.write(b"".join(partial))
                    partial.clear()
                else:
                    self.out.write(chunk[: last_nl + 1] if last_nl + 1 < len(chunk) else chunk)
            else:
                start = 0
                while start <= last_nl:
                    nl = chunk.find(b"\n", start)
                    if partial:
                        partial.append(chunk[start:nl])
                        line = b"".join(partial)
                        partial.clear()
                    else:
                        line = chunk[start:nl]
                    self._server_line(line, b"\n")
                    start = nl + 1
            if last_nl + 1 < len(chunk):
                partial.append(chunk[last_nl + 1 :])
        if partial:
            self._server_line(b"".join(partial), b"")

    def _server_line(self, line: bytes, end: bytes) -> None:
        rewritten = None
        if self.pending and (b"result" in line or b"error" in line or b"\\u" in line):
            rewritten = self._maybe_rewrite(line)
        if rewritten is not None:
            self.out.write(rewritten + end)
        elif end:
            self.out.write(line + end)
        else:
            self.out.write(line)

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
