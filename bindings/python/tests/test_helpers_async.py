"""The async retry helpers (``async def`` decorator, ``call_async``, ``async for``): attempt time
limits, cancellation, hooks. They run on an event loop whose time is the ManualClock
(``manual_loop.py``), so the default ``asyncio.sleep`` and the default attempt timer (a handle on
the loop's clock) move only manual-clock time; the injected-sleeper timer is checked too."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import holdoff
from holdoff import Outcome
from manual_loop import run


class World:
    def __init__(self, *, max_retries: int = 3, **breaker: Any) -> None:
        self.clock = holdoff.ManualClock()
        self.breaker = holdoff.Breaker(clock=self.clock, **breaker)
        self.policy = holdoff.Policy(
            self.breaker, holdoff.RetryBudget(max_retries=max_retries, clock=self.clock)
        )
        self.attempts: list[tuple[int, bool, float | None, str, float]] = []
        self.waits: list[tuple[float, str]] = []

    def after_attempt(self, plan: holdoff.AttemptPlan, outcome: Outcome) -> None:
        self.attempts.append(
            (plan.number, plan.probe, plan.time_limit, outcome.name, self.clock.now())
        )

    def before_sleep(self, w: holdoff.WaitPlan) -> None:
        self.waits.append((w.delay, w.source))

    def retrying(self, **kw: Any) -> holdoff.Retrying:
        return self.policy.retrying(
            after_attempt=self.after_attempt, before_sleep=self.before_sleep, **kw
        )


async def injected_sleep(d: float) -> None:
    await asyncio.sleep(d)


def cancelling(task: asyncio.Task[Any]) -> int:
    return task.cancelling() if hasattr(task, "cancelling") else 0


def test_async_decorator_and_call_async_sleep_on_the_loop() -> None:
    w = World()
    errors = [ConnectionError("a"), TimeoutError("b")]

    @w.retrying()
    async def fetch(x: int) -> str:
        await asyncio.sleep(0.25)  # an attempt that takes time
        if errors:
            raise errors.pop(0)
        return f"ok{x}"

    async def main() -> None:
        assert await fetch(1) == "ok1"
        assert await w.retrying().call_async(asyncio.sleep, 0, "v") == "v"

    run(w.clock, main())
    assert [(a[0], a[3], a[4]) for a in w.attempts] == [
        (1, "failure", 0.25),
        (2, "timeout", 1.0),
        (3, "success", 2.25),
        (1, "success", 2.25),
    ]
    assert w.waits == [(0.5, "backoff"), (1.0, "backoff")]
    assert fetch.__name__ == "fetch"


@pytest.mark.parametrize("sleeper", ["default", "injected"])
def test_an_attempt_is_cut_at_its_time_limit_as_a_timeout(sleeper: str) -> None:
    w = World(max_retries=1)
    extra = {} if sleeper == "default" else {"async_sleep": injected_sleep}
    hangs = [True, False]
    counts: list[int] = []

    async def fetch() -> str:
        counts.append(cancelling(asyncio.current_task()))  # type: ignore[arg-type]
        if hangs.pop(0):
            await asyncio.Event().wait()
        await asyncio.sleep(0.5)
        return "ok"

    assert run(w.clock, w.retrying(attempt_timeout=2, **extra).call_async(fetch)) == "ok"
    # Cut at exactly 2 s, then 0.5 s of backoff; the second attempt takes 0.5 s.
    assert [(a[3], a[4]) for a in w.attempts] == [("timeout", 2.0), ("success", 3.0)]
    assert counts == [0, 0]  # the timer's cancellation was taken back

    w = World(max_retries=0)

    async def hang() -> None:
        await asyncio.Event().wait()

    async def call() -> BaseException:
        with pytest.raises(holdoff.GiveUpError) as e:
            await w.retrying(attempt_timeout=0.1, **extra).call_async(hang)
        assert cancelling(asyncio.current_task()) == 0  # type: ignore[arg-type]
        return e.value

    g = run(w.clock, call())
    cause = g.__cause__
    assert isinstance(cause, holdoff.AttemptTimeoutError) and isinstance(cause, TimeoutError)
    assert (g.reason, cause.attempt, cause.time_limit, w.clock.now()) == (
        "attempts_exhausted",
        1,
        0.1,
        0.1,
    )


def test_the_total_timeout_cuts_a_hanging_attempt() -> None:
    w = World()

    async def hang() -> None:
        await asyncio.Event().wait()

    async def call() -> BaseException:
        with pytest.raises(holdoff.GiveUpError) as e:
            await w.retrying().call_async(hang)  # the defaults: no attempt timeout, 60 s in all
        return e.value

    g = run(w.clock, call())
    assert (g.reason, g.attempts, w.clock.now()) == ("total_timeout", 1, 60.0)
    assert w.attempts == [(1, False, 60.0, "timeout", 60.0)]


def test_async_for_runs_each_block_under_its_limit() -> None:
    w = World()
    seen: list[tuple[int, float | None]] = []

    async def main() -> Any:
        async for attempt in w.retrying(attempt_timeout=1):
            with attempt:
                seen.append((attempt.number, attempt.time_limit))
                if attempt.number == 1:
                    await asyncio.sleep(5)  # cut at 1 s
                attempt.set_result("done")
        return attempt.result

    assert run(w.clock, main()) == "done"
    assert seen == [(1, 1.0), (2, 1.0)]
    assert [(a[3], a[4]) for a in w.attempts] == [("timeout", 1.0), ("success", 1.5)]


def test_a_cancelled_probe_frees_its_slot_and_spends_its_window() -> None:
    w = World(trip=holdoff.ConsecutiveFailures(1))
    w.breaker.record(w.breaker.allow(), Outcome.FAILURE)
    w.clock.set(30)  # a probe is due
    started = asyncio.Event()

    async def hang() -> None:
        started.set()
        await asyncio.Event().wait()

    async def main() -> None:
        task = asyncio.ensure_future(w.retrying().call_async(hang))
        await started.wait()
        assert w.breaker.snapshot().probes_in_flight == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(w.clock, main())
    assert w.attempts == [(1, True, 60.0, "cancelled", 30.0)]
    s = w.breaker.snapshot()
    assert (s.probes_in_flight, s.probe_ready, s.retry_after) == (0, False, 30.0)
    with pytest.raises(holdoff.BreakerOpenError):
        w.breaker.allow()


def test_a_cancellation_during_a_wait_ends_the_call() -> None:
    w = World()
    calls: list[float] = []

    async def down() -> None:
        calls.append(w.clock.now())
        raise ConnectionRefusedError(111, "refused")

    async def main() -> None:
        task = asyncio.ensure_future(w.retrying().call_async(down))
        await asyncio.sleep(0.25)  # in the 0.5 s wait
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(10)

    run(w.clock, main())
    assert calls == [0.0] and w.waits == [(0.5, "backoff")]
    assert w.breaker.snapshot().failures == 1


def test_the_callers_cancellation_at_the_limit_ends_the_call() -> None:
    # The caller cancels just as the limit passes (the timer has not run yet): the call ends
    # with the caller's cancellation, still requested; the breaker records a timeout.
    w = World(max_retries=1)
    calls: list[float] = []

    async def fetch() -> str:
        calls.append(w.clock.now())
        await asyncio.sleep(1)
        task = asyncio.current_task()
        assert task is not None
        task.cancel()  # the caller's cancellation, just as the limit passes
        await asyncio.sleep(0)
        return "ok"

    async def main() -> int:
        with pytest.raises(asyncio.CancelledError):
            await w.retrying(attempt_timeout=1, async_sleep=injected_sleep).call_async(fetch)
        return cancelling(asyncio.current_task())  # type: ignore[arg-type]

    assert run(w.clock, main()) == 1
    assert calls == [0.0]
    assert [(a[3], a[4]) for a in w.attempts] == [("timeout", 1.0)]
