"""The time limit of an async attempt: cancels the attempt's task when the limit passes, as
``asyncio.timeout`` does, and tells the helper it did (an expired limit is a timeout, never a
cancellation)."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Union

__all__ = ["AttemptTimer", "uncancel"]


def uncancel(task: "asyncio.Task[Any]") -> None:
    """Takes back one cancellation request of ``task`` that the helper consumed (Python 3.11+
    counts them; ``asyncio.timeout`` and task groups read the count)."""
    if getattr(task, "cancelling", None) is not None and task.cancelling():
        task.uncancel()


class AttemptTimer:
    """Armed for one attempt of ``limit`` seconds on ``task``. With the default sleeper
    (``asyncio.sleep``) it is a handle on the event loop's clock; with an injected
    ``async_sleep`` it is a task awaiting ``async_sleep(limit)`` (called now, when the attempt
    starts), so that a test's sleeper on a :class:`ManualClock` drives the limit too."""

    __slots__ = ("_task", "_handle", "_armed", "fired")

    def __init__(
        self,
        task: "asyncio.Task[Any]",
        limit: float,
        async_sleep: Callable[[float], Awaitable[Any]],
    ) -> None:
        self._task = task
        self._armed = True
        self.fired = False
        self._handle: Union[asyncio.TimerHandle, "asyncio.Future[Any]"]
        if async_sleep is asyncio.sleep:
            self._handle = task.get_loop().call_later(limit, self._fire)
        else:
            sleeping = asyncio.ensure_future(async_sleep(limit))
            sleeping.add_done_callback(self._slept)
            self._handle = sleeping

    def _slept(self, sleeping: "asyncio.Future[Any]") -> None:
        if not sleeping.cancelled():
            sleeping.result()  # a failing sleeper's error goes to the loop's exception handler
            self._fire()

    def _fire(self) -> None:
        # A sleeper that finished just before the attempt ended may call back after it.
        if self._armed:
            self.fired = True
            self._task.cancel()

    def disarm(self) -> bool:
        """Stops the timer; whether it fired (its cancellation then taken back)."""
        self._armed = False
        self._handle.cancel()
        if self.fired:
            uncancel(self._task)
        return self.fired
