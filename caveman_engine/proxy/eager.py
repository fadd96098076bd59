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
import sys
import types

try:
    from aiohttp import ClientRequest

    _EAGER_CODE = ClientRequest.write_bytes.__code__
except (ImportError, AttributeError):  # another aiohttp: nothing to do
    _EAGER_CODE = None


@types.coroutine
def _resume(coro, waiting):
    """The rest of ``coro``, which has already run up to ``waiting`` (what it yielded): hand
    that to the task and pass whatever the task sends or throws back into ``coro``."""
    while True:
        try:
            sent = yield waiting
        except BaseException as exc:  # noqa: BLE001 - the task's cancel or a failed wait
            try:
                waiting = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                waiting = coro.send(sent)
            except StopIteration as stop:
                return stop.value


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
    return asyncio.Task(_resume(coro, waiting), loop=loop, **kwargs)


def install(loop: asyncio.AbstractEventLoop) -> bool:
    """Set the factory on ``loop`` when it is needed and free; True when it was set."""
    if sys.version_info >= (3, 12) or _EAGER_CODE is None or loop.get_task_factory() is not None:
        return False
    loop.set_task_factory(_factory)
    return True


def uninstall(loop: asyncio.AbstractEventLoop) -> None:
    if loop.get_task_factory() is _factory:
        loop.set_task_factory(None)
