"""Typed use of the public API: `run.sh test` checks this file with `mypy --strict` against the
hand-written stubs (and pytest runs it)."""

from __future__ import annotations

from datetime import timedelta
from typing import List, Optional

import holdoff


def test_typed_usage() -> None:
    clock = holdoff.ManualClock()
    breaker = holdoff.Breaker(
        trip=holdoff.FailuresInWindow(5, timedelta(seconds=10)),
        open_interval=holdoff.Backoff(30, 2, 300, 0.1),
        clock=clock,
    )
    budget = holdoff.RetryBudget(retry_after_cap=300, clock=clock)
    policy = holdoff.Policy(breaker, budget, holdoff.RetryQuota(), holdoff.Classifier())
    events: List[holdoff.StateChange] = []
    breaker.on_state_change(events.append)

    @policy.retrying(sleep=clock.advance)
    def fetch(n: int) -> str:
        return str(n)

    result: str = fetch(3)
    assert result == "3"
    state: holdoff.State = breaker.snapshot().state
    effect: holdoff.Effect = breaker.record(breaker.allow(), holdoff.Outcome.SUCCESS)
    delay: Optional[float] = holdoff.parse_retry_after("5", now=clock).delay
    before = policy.before_attempt(holdoff.Call())
    if isinstance(before, holdoff.Permit):
        d = policy.after_attempt(holdoff.Call(), before, "success")
        assert d.action == "done"
    assert (state, effect, delay, events) == ("closed", "counted", 5.0, [])

    group = holdoff.BreakerGroup(max_keys=100, clock=clock)
    kept: holdoff.Breaker = group["api.example"]
    counts: holdoff.GroupSnapshot = group.snapshot()
    assert (kept.state, counts.keys, counts.max_keys, group.max_keys) == ("closed", 1, 100, 100)
    strict = holdoff.RetryBudget(retry_after_cap=60, give_up_above_cap=True, clock=clock)
    reason: Optional[holdoff.GiveUpReason] = strict.decide(
        holdoff.RetryState(), holdoff.Outcome.retry_later(61)
    ).reason
    said: Optional[bool] = holdoff.Classifier().classify(409, {"x-should-retry": "true"}).should_retry
    assert (reason, said) == ("retry_after_above_cap", True)


def test_typed_helpers() -> None:
    clock = holdoff.ManualClock()
    policy = holdoff.Policy(holdoff.Breaker(clock=clock), holdoff.RetryBudget(clock=clock))
    waits: List[holdoff.WaitPlan] = []
    outcomes: List[str] = []

    def after(plan: holdoff.AttemptPlan, outcome: holdoff.Outcome) -> None:
        outcomes.append(f"{plan.number}:{outcome.name}")

    def classify(exc: BaseException) -> Optional[holdoff.Outcome]:
        return holdoff.Outcome.ANSWER if isinstance(exc, KeyError) else holdoff.classify_exception(exc)

    retrying = policy.retrying(
        attempt_timeout=timedelta(seconds=2), total_timeout=None, sleep=clock.advance,
        before_sleep=waits.append, after_attempt=after, classify_exception=classify,
    )
    failures = [ConnectionError("down")]

    @retrying
    def fetch(n: int) -> int:
        if failures:
            raise failures.pop()
        return n

    got: int = fetch(2)
    for attempt in retrying:
        with attempt:
            attempt.set_result(attempt.number)
    assert (got, attempt.result, outcomes, [w.delay for w in waits]) == (
        2, 1, ["1:failure", "2:success", "1:success"], [0.5])
    try:
        holdoff.call(policy, lambda: 1 / 0)
    except ZeroDivisionError:
        pass
    ex = holdoff.Execution(policy, total_timeout=holdoff.DEFAULT_TOTAL_TIMEOUT)
    step = ex.next_step()
    if isinstance(step, holdoff.AttemptPlan):
        done = ex.complete("returned", holdoff.Outcome.SUCCESS)
        assert isinstance(done, holdoff.Verdict) and done.kind == "return"
    try:
        raise holdoff.GiveUp("total_timeout", 60.0, 6, server_delay=None, capped=False)
    except holdoff.UpstreamUnavailable as e:
        reason: str = e.reason
        later: Optional[float] = e.retry_after
        assert (reason, later, e.attempts, e.capped) == ("total_timeout", 60.0, 6, False)
