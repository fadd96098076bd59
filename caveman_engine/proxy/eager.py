"""Start two of aiohttp's tasks eagerly on Python 3.11, as aiohttp does itself on 3.12+.

aiohttp's client writes a request body in a task of its own (``ClientRequest.write_bytes``).
From Python 3.12 on it starts that task eagerly: the body is written before ``send()``
returns, in the same step as the request's headers. On 3.11 (no eager tasks) the task only
runs on the event loop's next pass, after every callback already queued, so under load each
forwarded body waits for the other requests' work of that pass (in a burst of 32 requests,
the upstream saw the first body only after all 32 had been read and rewritten). The server
side has the same pass: aiohttp runs each request's handler in a new task
(``RequestHandler._handle_request``), eagerly from 3.12 on, else on the next pass too.

:func:`install` sets a task factory on the running loop that starts exactly those coroutines
eagerly, with the steps 3.12 takes: the coroutine runs until it first waits or ends; a
finished one gives a finished future (its result or exception), one that waits goes on in an
ordinary task that resumes it where it stopped (cancelling that task cancels the write, as
before). ``write_bytes`` uses neither the current task nor context variables, so its first
step runs in the caller's task. A request handler's first step runs as 3.12 runs it: in its
own task's context, with that task as the current task (the handler's timeouts and
cancellation belong to it), and the task then carries on from where the step stopped. Every
other coroutine gets an ordinary task. Nothing is installed on 3.12+ (aiohttp starts both
eagerly itself), when the loop already has a task factory, or when aiohttp has neither
method.
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextvars
import sys
from asyncio import tasks as _tasks

try:
    from aiohttp import ClientRequest

    _WRITE_CODE = ClientRequest.write_bytes.__code__
except (ImportError, AttributeError):  # another aiohttp: nothing to do
    _WRITE_CODE = None
try:
    from aiohttp.web_protocol import RequestHandler

    _HANDLER_CODE = RequestHandler._handle_request.__code__
except (ImportError, AttributeError):
    _HANDLER_CODE = None


class _Rest(collections.abc.Coroutine):
    """The rest of ``coro``, which has already run its first step, for a task to drive: the
    task's first step gets what that step ended with (what ``coro`` waits on, its result or
    its exception); every later send, and any throw (a cancel, even one before the first
    step, or a failed wait), goes into ``coro``."""

    __slots__ = ("_coro", "_waiting", "_first", "_outcome")

    def __init__(self, coro, waiting=None) -> None:
        self._coro = coro
        self._waiting = waiting
        self._first = True
        self._outcome = None  # (True, result) or (False, exception) when the step ended it

    def step(self) -> None:
        """Run the first step of ``coro`` now."""
        try:
            self._waiting = self._coro.send(None)
        except StopIteration as stop:
            self._outcome = (True, stop.value)
        except BaseException as exc:  # noqa: BLE001 - the task raises it, as it would have
            self._outcome = (False, exc)

    def send(self, value):
        if self._first:
            self._first = False
            waiting, self._waiting = self._waiting, None
            if self._outcome is not None:
                ok, result = self._outcome
                self._outcome = None
                if ok:
                    raise StopIteration(result)
                raise result
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


def _eager_task(loop, coro, kwargs):
    """A task for ``coro`` whose first step has already run, as its own: in the task's
    context and with the task as the loop's current task (3.12's eager start)."""
    context = kwargs.pop("context", None)
    if context is None:
        context = contextvars.copy_context()
    rest = _Rest(coro)
    task = asyncio.Task(rest, loop=loop, context=context, **kwargs)
    caller = asyncio.current_task(loop)
    if caller is not None:
        _tasks._leave_task(loop, caller)
    _tasks._enter_task(loop, task)
    try:
        context.run(rest.step)
    finally:
        _tasks._leave_task(loop, task)
        if caller is not None:
            _tasks._enter_task(loop, caller)
    return task


def _factory(loop, coro, **kwargs):
    code = getattr(coro, "cr_code", None)
    if code is _HANDLER_CODE and code is not None:
        return _eager_task(loop, coro, kwargs)
    if code is not _WRITE_CODE or code is None:
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
    if (sys.version_info >= (3, 12) or (_WRITE_CODE is None and _HANDLER_CODE is None)
            or loop.get_task_factory() is not None):
        return False
    loop.set_task_factory(_factory)
    return True


def uninstall(loop: asyncio.AbstractEventLoop) -> None:
    if loop.get_task_factory() is _factory:
        loop.set_task_factory(None)
