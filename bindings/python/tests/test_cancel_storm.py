"""A storm of callers that cancel on a short deadline must not turn one probe per interval into a
stream: a cancelled probe frees its slot, but the window it was admitted in stays spent.

Twenty callers keep starting a protected call through the async helper (`Policy.call_async`)
against an upstream that hangs, and each cancels its call 100 ms (manual-clock time) after
starting it; a refused caller starts again at the next step. Time moves only through the
ManualClock, 10 ms a step, for 6 s. With a breaker tripped at 0 and a constant 1 s interval,
exactly one probe per interval reaches the upstream: at 1, 2, 3, 4, 5 and 6 s. A breaker that
gave a cancelled probe's window back would admit a new probe right after each cancellation,
one every 100 ms (about fifty)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import holdoff
from holdoff import Outcome

CALLERS = 20
STEP_MS = 10
DEADLINE_STEPS = 10  # 100 ms
STEPS = 600  # 6 s


def test_cancelling_callers_get_one_probe_per_interval() -> None:
    clock = holdoff.ManualClock()
    breaker = holdoff.Breaker(
        trip=holdoff.ConsecutiveFailures(1), open_interval=holdoff.Backoff.constant(1), clock=clock
    )
    policy = holdoff.Policy(breaker, holdoff.RetryBudget(clock=clock))
    breaker.record(breaker.allow(), Outcome.FAILURE)  # tripped at 0: the first probe at 1 s

    reached: list[float] = []
    counts: dict[str, int] = {"started": 0, "refused": 0, "cancelled": 0}

    async def upstream() -> None:
        reached.append(clock.now())
        await asyncio.Event().wait()  # hangs: only a cancellation ends the call

    async def settle() -> None:
        # Enough turns of the event loop for every task to reach its await (the upstream's
        # hang) or its end (a refusal, or a cancellation recorded and re-raised).
        for _ in range(4):
            await asyncio.sleep(0)

    def reap(callers: list[tuple[asyncio.Task[None], int] | None]) -> None:
        for i, c in enumerate(callers):
            if c is None or not c[0].done():
                continue
            task = c[0]
            if task.cancelled():
                counts["cancelled"] += 1
            else:
                exc = task.exception()
                assert isinstance(exc, holdoff.BreakerOpenError), exc
                counts["refused"] += 1
            callers[i] = None

    async def storm() -> None:
        callers: list[tuple[asyncio.Task[None], int] | None] = [None] * CALLERS
        for step in range(STEPS + 1):
            for c in callers:
                if c is not None and step >= c[1]:
                    c[0].cancel()  # the caller's deadline passed
            await settle()
            reap(callers)
            for i in range(CALLERS):
                if callers[i] is None:
                    task = asyncio.ensure_future(policy.call_async(upstream))
                    callers[i] = (task, step + DEADLINE_STEPS)
                    counts["started"] += 1
            await settle()
            reap(callers)
            if step < STEPS:
                clock.advance(timedelta(milliseconds=STEP_MS))
        for c in callers:
            if c is not None:
                c[0].cancel()
        await settle()
        reap(callers)
        assert callers == [None] * CALLERS

    asyncio.run(storm())

    assert clock.now() == 6.0
    # One probe per interval, each at the first instant its interval allowed.
    assert reached == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert counts["cancelled"] == len(reached)  # every probe was cancelled on its deadline
    assert counts["started"] == counts["refused"] + counts["cancelled"]
    assert counts["refused"] > 10_000  # the storm really was one: 20 callers at every step
    s = breaker.snapshot()
    assert (s.probes, s.refusals, s.probes_in_flight) == (6, counts["refused"], 0)
    # The last probe was cancelled at the end of the run: its window (6 s to 7 s) stays spent.
    assert (s.state, s.probe_ready, s.retry_after) == ("half_open", False, 1.0)
