"""An asyncio event loop whose time is a holdoff ManualClock, for tests: ``loop.time()`` reads
the clock, and when every task waits, the loop moves the clock to its next timer instead of
blocking. ``asyncio.sleep``, ``loop.call_later`` (the helpers' default attempt timer) and
``asyncio.wait_for`` then run on the manual clock, in order, with no wall-clock time passing.
A loop with nothing left to run and no timer is a deadlock: it raises instead of hanging."""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

import holdoff

T = TypeVar("T")


class _ManualSelector(selectors.BaseSelector):
    """Reports the loop's real file events (its self-pipe); in place of blocking until the next
    timer, advances the clock to it."""

    def __init__(self, clock: holdoff.ManualClock) -> None:
        self._real = selectors.DefaultSelector()
        self._clock = clock

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._real.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.modify(fileobj, events, data)

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._real.get_map()

    def close(self) -> None:
        self._real.close()

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        events = self._real.select(0)
        if events or timeout == 0:
            return events
        if timeout is None:
            raise RuntimeError("deadlock: every task waits and no timer is due")
        self._clock.advance(timeout)
        return []


class ManualLoop(asyncio.SelectorEventLoop):
    def __init__(self, clock: holdoff.ManualClock) -> None:
        self._manual = clock
        super().__init__(_ManualSelector(clock))

    def time(self) -> float:
        return self._manual.now()


def run(clock: holdoff.ManualClock, main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on a loop driven by ``clock``."""
    loop = ManualLoop(clock)
    try:
        return loop.run_until_complete(main)
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()
