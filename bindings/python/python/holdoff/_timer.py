"""The time limit of an async attempt: cancels the attempt's task when the limit passes, as
``asyncio.timeout`` does, and tells the helper it did (an expired limit is a timeout, never a
cancellation). Only the timer's own cancellation is taken back: the caller's is never touched."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable
from typing import Any, Callable

__all__ = ["AttemptTimer", "cancelling", "sleeping"]


def cancelling(task: asyncio.Task[Any]) -> int:
    """The cancellation requests pending on ``task`` (Python 3.11+ counts them; before 3.11:
    always 0)."""
    count = getattr(task, "cancelling", None)
    return count() if count is not None else 0


def sleeping(async_sleep: Callable[[float], Awaitable[Any]], delay: float) -> Awaitable[Any]:
    """``async_sleep(delay)``, checked: a sleeper that returns no awaitable is the helper's
    misconfiguration, a ``TypeError`` naming ``async_sleep``."""
    got = async_sleep(delay)
    if not inspect.isawaitable(got):
        raise TypeError(
            f"async_sleep must return an awaitable (an async def, asyncio.sleep), not "
            f"{type(got).__name__}"
        )
    return got


class AttemptTimer:
    """Armed for one attempt of ``limit`` seconds on ``task``. With the default sleeper
    (``asyncio.sleep``) it is a handle on the event loop's clock; with an injected
    ``async_sleep`` it is a task awaiting ``async_sleep(limit)`` (called now, when the attempt
    starts), so that a test's sleeper on a :class:`ManualClock` drives the limit too. A sleeper
    that fails abandons the attempt as the limit would (``error`` then holds its exception)."""

    __slots__ = ("_armed", "_baseline", "_handle", "_task", "error", "fired")

    def __init__(
        self,
        task: asyncio.Task[Any],
        limit: float,
        async_sleep: Callable[[float], Awaitable[Any]],
    ) -> None:
        self._task = task
        self._armed = True
        # Cancellation requests pending before the attempt: not the caller's new ones.
        self._baseline = cancelling(task)
        self.fired = False
        self.error: BaseException | None = None
        self._handle: asyncio.TimerHandle | asyncio.Future[Any]
        if async_sleep is asyncio.sleep:
            self._handle = task.get_loop().call_later(limit, self._fire)
        else:
            waiting = asyncio.ensure_future(sleeping(async_sleep, limit))
            waiting.add_done_callback(self._slept)
            self._handle = waiting

    def _slept(self, waiting: asyncio.Future[Any]) -> None:
        if waiting.cancelled():
            return
        error = waiting.exception()
        if error is not None:
            if not self._armed:  # the attempt is over: nobody else will see it
                waiting.get_loop().call_exception_handler(
                    {
                        "message": "holdoff: the attempt timer's async_sleep failed",
                        "exception": error,
                    }
                )
                return
            self.error = error
        self._fire()

    def _fire(self) -> None:
        # A sleeper that finished just before the attempt ended may call back after it.
        if self._armed:
            self.fired = True
            self._task.cancel()

    def disarm(self) -> bool:
        """Stops the timer; whether it fired (its own cancellation then taken back, and only
        that one)."""
        self._armed = False
        self._handle.cancel()
        if self.fired and cancelling(self._task) > self._baseline:
            self._task.uncancel()
        return self.fired

    def caller_cancelled(self) -> bool:
        """After :meth:`disarm`: whether a cancellation other than the timer's was requested
        during the attempt (the caller's, in the same turn as the timer or after it). Before
        Python 3.11 this cannot be told apart: ``False``."""
        return cancelling(self._task) > self._baseline
