"""Fault-injection writer (run as a script): compresses a deterministic sequence of inputs
into one store and reports its progress on stdout, so the parent can SIGKILL it at a chosen
point.

    python writer.py DB START COUNT PAUSE

``PAUSE`` is ``none``, ``insert:K`` or ``commit:K``: right before the K-th ``INSERT`` /
``COMMIT`` statement of the run reaches SQLite, the writer prints ``paused <verb> <i>`` and
blocks reading stdin (the parent kills it there). The hook is SQLite's statement trace
callback on the store's connection — an observer; the store's code runs unchanged. The page
cache is shrunk so a large original spills uncommitted pages into the WAL before COMMIT.

Lines: ``begin <i>`` before each compress, ``handle <i> <handle>`` after a transformed one
(the moment a real CLI would print it), ``done`` at the end.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from caveman_engine.engine import Engine  # noqa: E402
from caveman_engine.store import Store  # noqa: E402
from tests.hardening.faultgen import fault_input  # noqa: E402


def main() -> None:
    db, start, count, pause = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    out = sys.stdout
    store = Store(db)
    engine = Engine(store)
    engine.count(b"warm up")
    verb, _, nth = pause.partition(":")
    seen = {"INSERT": 0, "COMMIT": 0}
    current = [start]

    def trace(sql: str) -> None:
        word = sql.lstrip().split(" ", 1)[0].upper()
        if word in seen and sql.lstrip().upper().startswith(("INSERT INTO RECOVERIES", "COMMIT")):
            seen[word] += 1
            if word == verb.upper() and seen[word] == int(nth):
                out.write(f"paused {word.lower()} {current[0]}\n")
                out.flush()
                sys.stdin.buffer.read(1)  # blocks until killed

    store._conn.execute("PRAGMA cache_size=-32")  # 32 KiB: big originals spill before COMMIT
    store._conn.set_trace_callback(trace)
    for i in range(start, start + count):
        current[0] = i
        out.write(f"begin {i}\n")
        out.flush()
        result = engine.compress(fault_input(i))
        if result.error is not None:
            out.write(f"error {i} {result.error}\n")
        elif result.recovery_handle is not None:
            out.write(f"handle {i} {result.recovery_handle}\n")
        out.flush()
    out.write("done\n")
    out.flush()


if __name__ == "__main__":
    main()
