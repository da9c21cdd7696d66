"""The retry helpers (decorators, attempt iterators, call): built on before/after only. Time
moves through a ManualClock; the injected sleep functions advance it instead of sleeping."""

from __future__ import annotations

import asyncio
from typing import Any, Dict, List, Optional

import pytest

import holdoff
from holdoff import Outcome


class World:
    """A manual clock, a policy on it, and sleep functions that record and advance time."""

    def __init__(self, **breaker: Any) -> None:
        self.clock = holdoff.ManualClock()
        self.breaker = holdoff.Breaker(clock=self.clock, **breaker)
        self.budget = holdoff.RetryBudget(max_retries=3, clock=self.clock)
        self.policy = holdoff.Policy(self.breaker, self.budget)
        self.slept: List[float] = []

    def sleep(self, d: float) -> None:
        assert d >= 0.0
        self.slept.append(d)
        self.clock.advance(d)

    async def async_sleep(self, d: float) -> None:
        self.sleep(d)

    def retrying(self, **kw: Any) -> holdoff.Retrying:
        return self.policy.retrying(sleep=self.sleep, async_sleep=self.async_sleep, **kw)


class Flaky:
    """Raises the given exceptions in turn, then returns 'ok'."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def test_decorator_retries_with_the_budgets_backoff() -> None:
    w = World()
    flaky = Flaky(ConnectionError("a"), ConnectionError("b"))

    @w.retrying()
    def fetch(x: int, *, y: int) -> str:
        return flaky(x, y=y) + str(x + y)

    assert fetch(1, y=2) == "ok3"
    assert flaky.calls == 3
    assert w.slept == [0.5, 1.0]
    assert fetch.__name__ == "fetch"


def test_gives_up_with_reason_and_cause() -> None:
    w = World()
    flaky = Flaky(*[TimeoutError(str(i)) for i in range(10)])
    with pytest.raises(holdoff.GiveUp) as e:
        w.retrying().call(flaky)
    assert e.value.reason == "attempts_exhausted"
    assert e.value.attempts == 4 and flaky.calls == 4
    assert isinstance(e.value.__cause__, TimeoutError)
    assert isinstance(e.value, holdoff.UpstreamUnavailable)
    assert w.slept == [0.5, 1.0, 2.0]


def test_final_answers_and_successes_pass_through() -> None:
    w = World()

    def classify(exc: BaseException) -> Outcome:
        return Outcome.ANSWER if isinstance(exc, KeyError) else holdoff.classify_exception(exc)

    flaky = Flaky(KeyError("missing"))
    with pytest.raises(KeyError):
        w.retrying(classify_exception=classify).call(flaky)
    assert flaky.calls == 1 and w.slept == []
    # an exception classified as a success is the caller's business: re-raised, not retried
    flaky = Flaky(LookupError("x"))
    with pytest.raises(LookupError):
        w.retrying(classify_exception=lambda e: "success").call(flaky)
    assert flaky.calls == 1


def test_retry_later_waits_the_providers_delay_then_probes() -> None:
    w = World(recoveries=1)
    flaky = Flaky(holdoff.RetryLater(7.0))
    assert w.retrying().call(flaky) == "ok"
    assert w.slept == [7.0]
    kinds = [(e.reason, e.to_state, e.open_for) for e in w.breaker.drain_events()]
    assert kinds == [
        ("retry_later", "open", 7.0),
        ("probe_admitted", "half_open", None),
        ("recovered", "closed", None),
    ]
    assert w.breaker.state == "closed"


def test_open_breaker_refuses_a_fresh_call_without_calling() -> None:
    w = World(trip=holdoff.ConsecutiveFailures(1))
    w.breaker.record(w.breaker.allow(), Outcome.FAILURE)
    flaky = Flaky()
    with pytest.raises(holdoff.BreakerOpen) as e:
        w.retrying().call(flaky)
    assert flaky.calls == 0
    assert e.value.retry_after == 30.0 and e.value.state == "open"


def test_wait_for_the_breaker_inside_the_budget() -> None:
    w = World(trip=holdoff.ConsecutiveFailures(1), recoveries=1)
    flaky = Flaky(ConnectionError("down"))
    # the failure trips the breaker: the retry waits for its probe (30 s), not the backoff
    assert w.retrying().call(flaky) == "ok"
    assert w.slept == [30.0]
    assert w.breaker.state == "closed"


class Response:
    def __init__(self, status_code: int, headers: Optional[Dict[str, str]] = None) -> None:
        self.status_code = status_code
        self.headers = headers or {}


def test_http_responses_use_the_classifier() -> None:
    w = World(recoveries=1)
    replies = [Response(503, {"Retry-After": "20"}), Response(200)]
    r = w.retrying(http=True).call(lambda: replies.pop(0))
    assert r.status_code == 200 and w.slept == [20.0]
    # a 404 is a final answer: returned, not retried
    assert w.retrying(http=True).call(lambda: Response(404)).status_code == 404
    # a 500 until the budget gives up: GiveUp carries the last response
    with pytest.raises(holdoff.GiveUp) as e:
        holdoff.Policy(holdoff.Breaker(clock=w.clock, trip=holdoff.ConsecutiveFailures(100)),
                       w.budget).retrying(http=True, sleep=w.sleep).call(lambda: Response(500))
    assert e.value.reason == "attempts_exhausted" and e.value.result.status_code == 500


def test_classify_result() -> None:
    w = World()
    values = iter([None, None, 5])
    got = w.retrying(classify_result=lambda v: "failure" if v is None else "success").call(
        lambda: next(values)
    )
    assert got == 5 and w.slept == [0.5, 1.0]


def test_attempt_iterator() -> None:
    w = World(recoveries=1)
    flaky = Flaky(ConnectionError("a"))
    seen = []
    for attempt in w.retrying():
        with attempt:
            seen.append(attempt.number)
            flaky()
    assert seen == [1, 2] and w.slept == [0.5]
    assert attempt.decision is not None and attempt.decision.action == "done"
    # responses recorded through the attempt
    statuses = [503, 200]
    for attempt in w.retrying():
        with attempt:
            attempt.response(statuses.pop(0), {"Retry-After": "3"})
    assert w.slept[-1] == 3.0
    with pytest.raises(holdoff.GiveUp):
        for attempt in w.retrying():
            with attempt:
                attempt.record(Outcome.FAILURE)


def test_policy_conveniences() -> None:
    w = World()

    @w.policy
    def ok() -> str:
        return "ok"

    assert ok() == "ok"
    assert w.policy.call(lambda a, b: a + b, 1, b=2) == 3
    assert holdoff.call(w.policy, lambda: 4) == 4
    with pytest.raises(TypeError):
        holdoff.Retrying("policy")  # type: ignore[arg-type]


def test_sleeps_are_never_negative() -> None:
    w = World()
    with pytest.raises(holdoff.GiveUp):
        w.retrying().call(Flaky(*[ConnectionError()] * 10))
    assert w.slept and all(d >= 0.0 for d in w.slept)


# -- async ------------------------------------------------------------------------------------


def test_async_decorator_and_call() -> None:
    w = World()
    flaky = Flaky(ConnectionError("a"))

    @w.retrying()
    async def fetch(x: int) -> str:
        return flaky() + str(x)

    async def main() -> None:
        assert await fetch(1) == "ok1"
        assert await w.retrying().call_async(asyncio.sleep, 0, "v") == "v"

    asyncio.run(main())
    assert w.slept == [0.5]


def test_async_attempts() -> None:
    w = World()
    flaky = Flaky(ConnectionError("a"), ConnectionError("b"))

    async def main() -> int:
        n = 0
        async for attempt in w.retrying():
            with attempt:
                n += 1
                flaky()
        return n

    assert asyncio.run(main()) == 3 and w.slept == [0.5, 1.0]


def test_async_cancellation_is_recorded_as_cancelled() -> None:
    w = World(trip=holdoff.ConsecutiveFailures(1))
    w.breaker.record(w.breaker.allow(), Outcome.FAILURE)
    w.clock.set(30)  # a probe is due
    started = asyncio.Event()

    async def hang() -> None:
        started.set()
        await asyncio.sleep(3600)  # the test cancels it first

    async def main() -> None:
        task = asyncio.ensure_future(w.retrying().call_async(hang))
        await started.wait()
        assert w.breaker.snapshot().probes_in_flight == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    # the cancelled probe freed its slot at once, but its window stays spent (it may have
    # reached the upstream): the next probe goes at the next interval, not now
    s = w.breaker.snapshot()
    assert (s.probes_in_flight, s.probe_ready, s.retry_after) == (0, False, 30.0)
    with pytest.raises(holdoff.BreakerOpen):
        w.breaker.allow()
    w.clock.set(60)
    assert w.breaker.allow().probe


def test_keyboard_interrupt_is_cancelled_not_retried() -> None:
    w = World()
    flaky = Flaky(KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        w.retrying().call(flaky)
    assert flaky.calls == 1 and w.slept == []
