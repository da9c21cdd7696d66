"""A deadline storm must not keep a hanging dependency half-open: an attempt cut by its deadline
is a timeout (a failure), never a cancellation.

The upstream refuses the first connection at once (it fell over), then accepts every request
and never answers (it hangs). Twenty callers share one policy (the breaker trips after 1
failure and stays open a constant 1 s; no retries, so that each call is one attempt); each
attempt has a 100 ms attempt timeout. Caller i starts a call at i * 5 ms and then every 100 ms,
until 6 s of manual-clock time (1201 calls; an event loop whose time is the ManualClock: nothing
sleeps), so a call starts every 5 ms. A refused call ends at once with BreakerOpenError; an
admitted probe hangs until its deadline, is recorded as a timeout (the call gives up, the
AttemptTimeoutError as its cause) and re-opens the breaker for another interval from that
deadline.

So the upstream sees the tripping request at 0 and one probe per interval at 1000, 2100, 3200,
4300 and 5400 ms: 6 requests (at most the 7 a 1 s interval allows in 6 s), and the breaker ends
open. Were a deadline recorded as a cancellation, the breaker would stay half-open and be probed
every second (1000, 2000, ..., 6000).

Run with the default sleeper (the attempt timer is a handle on the loop's clock) and with an
injected ``async_sleep`` (the timer is a task awaiting it).
"""

from __future__ import annotations

import asyncio
import errno
from typing import Any

import pytest

import holdoff
from manual_loop import run

CALLERS = 20
TURN = 0.1  # s between a caller's calls
END_MS = 6000


async def injected_sleep(d: float) -> None:
    await asyncio.sleep(d)


@pytest.mark.parametrize("sleeper", ["default", "injected"])
def test_deadline_storm_gets_one_probe_per_interval_and_ends_open(sleeper: str) -> None:
    clock = holdoff.ManualClock()
    breaker = holdoff.Breaker(
        trip=holdoff.ConsecutiveFailures(1), open_interval=holdoff.Backoff.constant(1), clock=clock
    )
    policy = holdoff.Policy(breaker, holdoff.RetryBudget(max_retries=0, clock=clock))
    requests: list[float] = []
    outcomes: dict[str, int] = {}
    ended: dict[str, int] = {}

    def after_attempt(plan: holdoff.AttemptPlan, outcome: holdoff.Outcome) -> None:
        assert plan.time_limit is not None and plan.time_limit <= 0.1
        outcomes[outcome.name] = outcomes.get(outcome.name, 0) + 1

    options: dict[str, Any] = {"attempt_timeout": 0.1, "after_attempt": after_attempt}
    if sleeper == "injected":
        options["async_sleep"] = injected_sleep
    retrying = policy.retrying(**options)

    async def upstream() -> None:
        requests.append(round(clock.now() * 1000))
        if len(requests) == 1:
            raise ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
        await asyncio.Event().wait()  # accepted, never answered

    async def caller(i: int) -> None:
        await asyncio.sleep(i * 0.005)
        while round(clock.now() * 1000) <= END_MS:
            turn = clock.now() + TURN
            try:
                await retrying.call_async(upstream)
                kind = "returned"
            except holdoff.BreakerOpenError as e:
                kind = "refused" if e.attempts == 0 else "breaker_open"
            except holdoff.GiveUpError as e:
                kind = f"{type(e.__cause__).__name__}: {e.reason}"
            ended[kind] = ended.get(kind, 0) + 1
            await asyncio.sleep(max(0.0, turn - clock.now()))

    async def storm() -> None:
        callers = [asyncio.ensure_future(caller(i)) for i in range(CALLERS)]
        results = await asyncio.gather(*callers)
        assert results == [None] * CALLERS

    run(clock, storm())

    assert requests == [0, 1000, 2100, 3200, 4300, 5400]
    assert len(requests) <= 7
    assert outcomes == {"failure": 1, "timeout": 5}  # every probe cut at its deadline
    assert ended == {
        "ConnectionRefusedError: attempts_exhausted": 1,
        "AttemptTimeoutError: attempts_exhausted": 5,
        "refused": 1201 - 6,  # a call every 5 ms from 0 to 6 s
    }
    s = breaker.snapshot()
    assert (s.state, s.opens, s.closes, s.probes, s.probes_in_flight) == ("open", 1, 0, 5, 0)
    # The last probe timed out at 5.5 s: open again until 6.5 s.
    assert s.retry_after is not None and round((clock.now() + s.retry_after) * 1000) == 6500
