"""The per-session tripwire (proxy_spec §4): freeze a lever for a session whose prompt-cache
writes blow up right after calls that used it.

A call is *anomalous* when the session already has a baseline, its cache-creation tokens C are
above 50 000 and above 3× the baseline mean. Each anomalous call gives one strike to every
lever (in :data:`rewrite.LEVER_ORDER`) that was active on the session's previous observed call;
three strikes freeze that lever for the session until the process exits. Anomalous calls are
not added to the baseline. At most 1 024 sessions are kept, least recently used first out.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from .rewrite import LEVER_ORDER

log = logging.getLogger("caveman_engine.proxy")

MAX_SESSIONS = 1024
SPIKE_FLOOR = 50_000
SPIKE_FACTOR = 3
STRIKES_TO_FREEZE = 3

_SESSION_ID = re.compile(r"[A-Za-z0-9._:-]{1,256}")


def session_id(header: str | None) -> str | None:
    """``x-cave-session`` trimmed; None unless 1–256 chars of ``[A-Za-z0-9._:-]``."""
    if header is None:
        return None
    v = header.strip()
    return v if _SESSION_ID.fullmatch(v) else None


@dataclass
class Usage:
    input_tokens: int = 0
    cache_read: int = 0
    cache_creation: int = 0


@dataclass
class Session:
    baseline_sum: int = 0
    baseline_calls: int = 0
    previous_levers: frozenset = frozenset()
    strikes: dict = field(default_factory=dict)
    frozen: list = field(default_factory=list)  # in LEVER_ORDER
    calls: int = 0
    input_total: int = 0
    cache_read_total: int = 0
    cache_creation_total: int = 0
    last: Usage = field(default_factory=Usage)


class Ledger:
    def __init__(self, max_sessions: int = MAX_SESSIONS) -> None:
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._sessions)

    def _touch(self, sid: str, create: bool) -> Session | None:
        s = self._sessions.get(sid)
        if s is None:
            if not create:
                return None
            s = self._sessions[sid] = Session()
            while len(self._sessions) > self.max_sessions:
                self._sessions.popitem(last=False)
        else:
            self._sessions.move_to_end(sid)
        return s

    def frozen(self, sid: str | None) -> list[str]:
        """The session's frozen levers, in order (touches the session)."""
        if not sid:
            return []
        with self._lock:
            s = self._touch(sid, create=False)
            return list(s.frozen) if s else []

    def allowed(self, sid: str | None, lever: str) -> bool:
        return lever not in self.frozen(sid)

    def session(self, sid: str) -> Session | None:
        with self._lock:
            return self._sessions.get(sid)

    def observe(self, sid: str | None, levers, usage: Usage) -> None:
        if not sid:
            return
        active = frozenset(levers)
        c = usage.cache_creation
        with self._lock:
            s = self._touch(sid, create=True)
            anomalous = (
                s.baseline_calls > 0
                and c > SPIKE_FLOOR
                and c * s.baseline_calls > SPIKE_FACTOR * s.baseline_sum  # C > 3 × mean
            )
            if anomalous:
                for lever in LEVER_ORDER:
                    if lever in s.previous_levers and lever not in s.frozen:
                        s.strikes[lever] = s.strikes.get(lever, 0) + 1
                        if s.strikes[lever] >= STRIKES_TO_FREEZE:
                            s.frozen.append(lever)
                            s.frozen.sort(key=LEVER_ORDER.index)
                            log.warning("proxy: tripwire froze %s for session %s "
                                        "(cache writes %d against a mean of %.0f)",
                                        lever, sid, c, s.baseline_sum / s.baseline_calls)
            else:
                s.baseline_calls += 1
                s.baseline_sum += c
            s.previous_levers = active
            s.calls += 1
            s.input_total += usage.input_tokens
            s.cache_read_total += usage.cache_read
            s.cache_creation_total += c
            s.last = usage
