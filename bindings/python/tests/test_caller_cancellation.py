"""The caller's own cancellation always ends a call through the helpers: never classified,
never retried, never suppressed, and its cancellation request never taken back (only the attempt
timer's own is), whether it comes before the attempt's limit, after it, or in the same event-loop
turn as the timer. At or after the limit the breaker records that attempt as a timeout; the
quota pays for nothing. The async cases run on an event loop whose time is the ManualClock."""

from __future__ import annotations

import asyncio
import sys
from typing import Any, Callable

import pytest

import holdoff
from holdoff import Outcome
from manual_loop import run

COUNTS_CANCELS = sys.version_info >= (3, 11)  # Task.cancelling() / uncancel()


class World:
    def __init__(self) -> None:
        self.clock = holdoff.ManualClock()
        self.breaker = holdoff.Breaker(clock=self.clock)
        self.quota = holdoff.RetryQuota()
        self.policy = holdoff.Policy(
            self.breaker, holdoff.RetryBudget(max_retries=3, clock=self.clock), self.quota
        )
        self.attempts: list[tuple[int, str, float]] = []
        self.calls: list[float] = []

    def after_attempt(self, plan: holdoff.AttemptPlan, outcome: Outcome) -> None:
        self.attempts.append((plan.number, outcome.name, self.clock.now()))

    def retrying(self, **kw: Any) -> holdoff.Retrying:
        kw.setdefault("sleep", self.clock.advance)
        return self.policy.retrying(after_attempt=self.after_attempt, **kw)

    async def hang_first(self) -> str:
        """The call: its first attempt hangs until cancelled, later ones answer "second"."""
        self.calls.append(self.clock.now())
        if len(self.calls) == 1:
            await asyncio.Event().wait()
        return "second"

    def assert_one_timeout_recorded(self, at: float) -> None:
        """One attempt, recorded by the breaker as the timeout it was (at or after its
        limit); no retry bought."""
        assert self.calls == [0.0]
        assert self.attempts == [(1, "timeout", at)]
        s = self.breaker.snapshot()
        assert (s.state, s.failures, s.probes_in_flight) == ("closed", 1, 0)
        assert self.quota.available == 500


def cancelling(task: asyncio.Task[Any]) -> int:
    return task.cancelling() if COUNTS_CANCELS else 0


async def cancelled_call(t: asyncio.Task[Any]) -> tuple[bool, int]:
    """Awaits a call's task, which must end in ``CancelledError``: (whether the task is
    cancelled, the cancellation requests it counts)."""
    with pytest.raises(asyncio.CancelledError):
        await t
    return t.cancelled(), cancelling(t)


async def injected_sleep(d: float) -> None:
    await asyncio.sleep(d)


# -- sync: KeyboardInterrupt and SystemExit -----------------------------------------------------


@pytest.mark.parametrize("stop", [KeyboardInterrupt(), SystemExit(3)], ids=type)
def test_a_sync_interrupt_after_the_limit_ends_the_call(stop: BaseException) -> None:
    w = World()

    def slow() -> str:
        w.calls.append(w.clock.now())
        if len(w.calls) == 1:
            w.clock.advance(2.5)  # past its 2 s limit: it cannot be interrupted
            raise stop
        return "second"

    with pytest.raises(type(stop)) as e:
        w.retrying(attempt_timeout=2).call(slow)
    assert e.value is stop
    w.assert_one_timeout_recorded(2.5)


def test_a_classifier_cannot_retry_the_callers_cancellation() -> None:
    # A classifier that calls everything a failure is not asked about a KeyboardInterrupt.
    w = World()
    seen: list[BaseException] = []

    def everything_fails(exc: BaseException) -> Outcome:
        seen.append(exc)
        return Outcome.FAILURE

    def interrupted() -> str:
        w.calls.append(w.clock.now())
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        w.retrying(classify_exception=everything_fails).call(interrupted)
    assert (w.calls, seen, w.attempts) == ([0.0], [], [(1, "cancelled", 0.0)])
    assert w.breaker.snapshot().failures == 0 and w.quota.available == 500


# -- async: the task's cancellation ---------------------------------------------------------------


@pytest.mark.parametrize("sleeper", ["default", "injected"])
def test_the_callers_cancel_after_the_limit_ends_the_call(sleeper: str) -> None:
    # The attempt runs past its limit without yielding, then the caller cancels before the
    # timer has run: the caller's cancellation, which stays requested.
    w = World()
    extra = {} if sleeper == "default" else {"async_sleep": injected_sleep}

    async def fetch() -> str:
        w.calls.append(w.clock.now())
        if len(w.calls) == 1:
            w.clock.advance(3)
            task = asyncio.current_task()
            assert task is not None
            task.cancel()
            await asyncio.sleep(0)
        return "second"

    async def main() -> int:
        with pytest.raises(asyncio.CancelledError):
            await w.retrying(attempt_timeout=2, **extra).call_async(fetch)
        return cancelling(asyncio.current_task())  # type: ignore[arg-type]

    assert run(w.clock, main()) == (1 if COUNTS_CANCELS else 0)
    w.assert_one_timeout_recorded(3.0)


@pytest.mark.skipif(not COUNTS_CANCELS, reason="Python 3.11+ counts cancellation requests")
def test_the_callers_cancel_from_another_task_after_the_limit_ends_the_call() -> None:
    # The caller's task cancels the call's task half a second after the limit; the attempt
    # ignores the timer's cancellation (a shielded cleanup) until then.
    w = World()

    async def fetch() -> str:
        w.calls.append(w.clock.now())
        if len(w.calls) == 1:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                await asyncio.sleep(1)  # a slow cleanup, cancelled by the caller at 2.5 s
                raise
        return "second"

    async def main() -> tuple[bool, int]:
        loop = asyncio.get_running_loop()
        t = asyncio.ensure_future(
            w.retrying(attempt_timeout=2, async_sleep=injected_sleep).call_async(fetch)
        )
        loop.call_at(2.5, t.cancel)
        return await cancelled_call(t)

    assert run(w.clock, main()) == (True, 1)
    w.assert_one_timeout_recorded(2.5)


@pytest.mark.skipif(not COUNTS_CANCELS, reason="Python 3.11+ counts cancellation requests")
@pytest.mark.parametrize("first", ["caller", "timer"])
def test_the_callers_cancel_in_the_default_timers_turn_ends_the_call(first: str) -> None:
    # Both due at 2 s on the loop's clock: the two cancellations land in one turn, before the
    # attempt's task runs again. The timer's is taken back, the caller's stands.
    w = World()

    async def main() -> tuple[bool, int]:
        loop = asyncio.get_running_loop()
        t = asyncio.ensure_future(w.retrying(attempt_timeout=2).call_async(w.hang_first))
        if first == "caller":
            loop.call_at(2.0, t.cancel)  # scheduled before the attempt's timer
        await asyncio.sleep(0)  # the call starts and arms its timer for 2 s
        assert w.calls == [0.0]
        if first == "timer":
            loop.call_at(2.0, t.cancel)  # scheduled after it
        return await cancelled_call(t)

    assert run(w.clock, main()) == (True, 1)
    w.assert_one_timeout_recorded(2.0)


@pytest.mark.skipif(not COUNTS_CANCELS, reason="Python 3.11+ counts cancellation requests")
@pytest.mark.parametrize("first", ["caller", "timer"])
def test_the_callers_cancel_in_the_injected_timers_turn_ends_the_call(first: str) -> None:
    # The injected timer's sleeper schedules the caller's cancellation as it returns, so that it
    # runs just before the timer's callback ("caller") or just after it ("timer"), both before
    # the attempt's task runs again.
    w = World()
    tasks: list[asyncio.Task[Any]] = []

    async def timer_sleep(d: float) -> None:
        await asyncio.sleep(d)
        if not tasks[0].done() and d == 2:
            loop = asyncio.get_running_loop()
            if first == "caller":
                loop.call_soon(tasks[0].cancel)
            else:
                loop.call_soon(loop.call_soon, tasks[0].cancel)

    async def main() -> tuple[bool, int]:
        t = asyncio.ensure_future(
            w.retrying(attempt_timeout=2, async_sleep=timer_sleep).call_async(w.hang_first)
        )
        tasks.append(t)
        return await cancelled_call(t)

    assert run(w.clock, main()) == (True, 1)
    w.assert_one_timeout_recorded(2.0)


def test_the_timer_alone_is_a_timeout_and_takes_its_cancellation_back() -> None:
    # The counterpart: with no caller cancelling, the timer's cancellation is a timeout, the
    # call retries, and no cancellation request is left on the task.
    w = World()

    async def main() -> tuple[str, int]:
        got = await w.retrying(attempt_timeout=2).call_async(w.hang_first)
        return got, cancelling(asyncio.current_task())  # type: ignore[arg-type]

    assert run(w.clock, main()) == ("second", 0)
    assert w.attempts == [(1, "timeout", 2.0), (2, "success", 2.5)]


@pytest.mark.parametrize(
    "classify",
    [
        pytest.param(lambda e: Outcome.FAILURE, id="everything fails"),
        pytest.param(lambda e: "success", id="everything succeeds"),
    ],
)
def test_a_classifier_cannot_swallow_the_tasks_cancellation(
    classify: Callable[[BaseException], Any],
) -> None:
    w = World()
    seen: list[BaseException | None] = []

    async def fetch() -> str:
        w.calls.append(w.clock.now())
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        await asyncio.sleep(0)
        return "never"

    def classifier(exc: BaseException) -> Any:
        seen.append(exc)
        return classify(exc)

    async def main() -> int:
        with pytest.raises(asyncio.CancelledError):
            await w.retrying(classify_exception=classifier).call_async(fetch)
        return cancelling(asyncio.current_task())  # type: ignore[arg-type]

    assert run(w.clock, main()) == (1 if COUNTS_CANCELS else 0)
    assert (w.calls, seen, w.attempts) == ([0.0], [], [(1, "cancelled", 0.0)])


def test_a_cancel_during_the_wait_ends_the_call_and_gives_the_retry_back() -> None:
    w = World()

    async def down() -> None:
        w.calls.append(w.clock.now())
        raise ConnectionRefusedError(111, "refused")

    async def main() -> tuple[bool, int]:
        t = asyncio.ensure_future(w.retrying().call_async(down))
        await asyncio.sleep(0.25)  # in the 0.5 s wait; the retry is paid for
        assert w.quota.available == 495
        t.cancel()
        return await cancelled_call(t)

    assert run(w.clock, main()) == (True, 1 if COUNTS_CANCELS else 0)
    assert w.calls == [0.0] and w.attempts == [(1, "failure", 0.0)]
    assert w.quota.available == 500
