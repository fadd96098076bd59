"""Send an upstream request body at once on Python 3.11, as aiohttp does on 3.12+.

aiohttp's client writes a request body in a task of its own (``ClientRequest.write_bytes``).
From Python 3.12 on it starts that task eagerly: the body is written before ``send()``
returns, in the same step as the request's headers. On 3.11 (no eager tasks) the task only
runs on the event loop's next pass, after every callback already queued, so under load each
forwarded body waits for the other requests' work of that pass (in a burst of 32 requests,
the upstream saw the first body only after all 32 had been read and rewritten).

:func:`install` sets a task factory on the running loop that starts exactly those coroutines
eagerly, with the steps 3.12 takes: the coroutine runs until it first waits or ends; a
finished one gives a finished future (its result or exception), one that waits goes on in an
ordinary task that resumes it where it stopped (cancelling that task cancels the write, as
before). Every other coroutine gets an ordinary task. ``write_bytes`` uses neither the
current task nor context variables, so running its first step in the caller's task changes
nothing else. Nothing is installed on 3.12+ (aiohttp starts it eagerly itself), when the loop
already has a task factory, or when aiohttp has no such method.
"""

from __future__ import annotations

import asyncio
import collections.abc
import sys

try:
    from aiohttp import ClientRequest

    _EAGER_CODE = ClientRequest.write_bytes.__code__
except (ImportError, AttributeError):  # another aiohttp: nothing to do
    _EAGER_CODE = None


class _Rest(collections.abc.Coroutine):
    """The rest of ``coro``, which has already run up to ``waiting`` (what it yielded), for a
    task to drive: the task's first step gets ``waiting``; every later send, and any throw
    (a cancel, even one before the first step, or a failed wait), goes into ``coro``."""

    __slots__ = ("_coro", "_waiting", "_first")

    def __init__(self, coro, waiting) -> None:
        self._coro = coro
        self._waiting = waiting
        self._first = True

    def send(self, value):
        if self._first:
            self._first = False
            waiting, self._waiting = self._waiting, None
            return waiting
        return self._coro.send(value)

    def throw(self, *exc):
        self._first = False
        self._waiting = None
        return self._coro.throw(*exc)

    def close(self) -> None:
        self._coro.close()

    def __await__(self):
        return self

    def __iter__(self):
        return self

    def __next__(self):
        return self.send(None)


def _factory(loop, coro, **kwargs):
    if getattr(coro, "cr_code", None) is not _EAGER_CODE:
        return asyncio.Task(coro, loop=loop, **kwargs)
    try:
        waiting = coro.send(None)
    except StopIteration as stop:
        done = loop.create_future()
        done.set_result(stop.value)
        return done
    except BaseException as exc:  # noqa: BLE001 - kept in the future, as a task would
        failed = loop.create_future()
        failed.set_exception(exc)
        return failed
    return asyncio.Task(_Rest(coro, waiting), loop=loop, **kwargs)


def install(loop: asyncio.AbstractEventLoop) -> bool:
    """Set the factory on ``loop`` when it is needed and free; True when it was set."""
    if sys.version_info >= (3, 12) or _EAGER_CODE is None or loop.get_task_factory() is not None:
        return False
    loop.set_task_factory(_factory)
    return True


def uninstall(loop: asyncio.AbstractEventLoop) -> None:
    if loop.get_task_factory() is _factory:
        loop.set_task_factory(None)
