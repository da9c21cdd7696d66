"""Typed use of the public API: `run.sh test` checks this file with `mypy --strict` against the
hand-written stubs (and pytest runs it)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TYPE_CHECKING

import pytest

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
    events: list[holdoff.StateChange] = []
    breaker.on_state_change(events.append)

    @policy.retrying(sleep=clock.advance)
    def fetch(n: int) -> str:
        return str(n)

    result: str = fetch(3)
    assert result == "3"
    state: holdoff.State = breaker.snapshot().state
    effect: holdoff.Effect = breaker.record(breaker.allow(), holdoff.Outcome.SUCCESS)
    delay: float | None = holdoff.parse_retry_after("5", now=clock).delay
    before = policy.before_attempt(holdoff.PolicyCall())
    if isinstance(before, holdoff.Permit):
        d = policy.after_attempt(holdoff.PolicyCall(), before, "success")
        assert d.action == "done"
    assert (state, effect, delay, events) == ("closed", "counted", 5.0, [])

    group = holdoff.BreakerGroup(max_keys=100, clock=clock)
    kept: holdoff.Breaker = group["api.example"]
    counts: holdoff.GroupSnapshot = group.snapshot()
    assert (kept.state, counts.keys, counts.max_keys, group.max_keys) == ("closed", 1, 100, 100)
    strict = holdoff.RetryBudget(retry_after_cap=60, give_up_above_cap=True, clock=clock)
    reason: holdoff.GiveUpReason | None = strict.decide(
        holdoff.RetryState(), holdoff.Outcome.retry_later(61)
    ).reason
    said: bool | None = holdoff.Classifier().classify(409, {"x-should-retry": "true"}).should_retry
    assert (reason, said) == ("retry_after_above_cap", True)


def test_typed_helpers() -> None:
    clock = holdoff.ManualClock()
    policy = holdoff.Policy(holdoff.Breaker(clock=clock), holdoff.RetryBudget(clock=clock))
    waits: list[holdoff.WaitPlan] = []
    outcomes: list[str] = []

    def after(plan: holdoff.AttemptPlan, outcome: holdoff.Outcome) -> None:
        outcomes.append(f"{plan.number}:{outcome.name}")

    def classify(exc: BaseException) -> holdoff.Outcome | None:
        return (
            holdoff.Outcome.ANSWER if isinstance(exc, KeyError) else holdoff.classify_exception(exc)
        )

    retrying = policy.retrying(
        attempt_timeout=timedelta(seconds=2),
        total_timeout=None,
        sleep=clock.advance,
        before_sleep=waits.append,
        after_attempt=after,
        classify_exception=classify,
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
        2,
        1,
        ["1:failure", "2:success", "1:success"],
        [0.5],
    )
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
        raise holdoff.GiveUpError("total_timeout", 60.0, 6, server_delay=None, capped=False)
    except holdoff.UpstreamUnavailableError as e:
        reason: str = e.reason
        later: float | None = e.retry_after
        assert (reason, later, e.attempts, e.capped) == ("total_timeout", 60.0, 6, False)


def test_typed_decorators_keep_the_signature() -> None:
    clock = holdoff.ManualClock()
    policy = holdoff.Policy(holdoff.Breaker(clock=clock), holdoff.RetryBudget(clock=clock))

    @policy
    def size(url: str, *, scale: int = 1) -> int:
        return len(url) * scale

    @policy.retrying(sleep=clock.advance)
    async def name(n: int) -> str:
        return str(n)

    got: int = size("abc", scale=2)
    said: str = asyncio.run(name(7))
    called: int = policy.call(size, "ab", scale=3)
    awaited: str = asyncio.run(holdoff.call_async(policy, name, 4))
    assert (got, said, called, awaited) == (6, "7", 6, "4")
    # Each line below is a type error (mypy --strict fails on an unused ignore).
    with pytest.raises(TypeError):
        size(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        size("abc", scael=2)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        policy.retrying(htp=True)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        holdoff.retrying(policy, htp=True)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        policy.call(size, "a", 2)  # type: ignore[call-arg]
    if TYPE_CHECKING:  # checked, never run (an unawaited coroutine)
        name("7")  # type: ignore[arg-type,unused-coroutine]


def test_typed_names_and_callbacks() -> None:
    clock = holdoff.ManualClock()
    breaker = holdoff.Breaker(trip=holdoff.ConsecutiveFailures(1), clock=clock)
    changes: list[tuple[holdoff.State, holdoff.State, holdoff.Reason]] = []

    def on_change(change: holdoff.StateChange) -> None:
        changes.append((change.from_state, change.to_state, change.reason))

    breaker.on_state_change(on_change)
    breaker.record(breaker.allow(), holdoff.Outcome.FAILURE)
    name: holdoff.OutcomeName = holdoff.Outcome.retry_later(1).name
    assert (changes, name) == ([("closed", "open", "tripped")], "retry_later")
    try:
        breaker.allow()
    except holdoff.BreakerOpenError as e:
        state: holdoff.State = e.state
        reason: holdoff.GiveUpReason = e.reason
        assert (state, reason) == ("open", "breaker_open")
    try:
        holdoff.Breaker(recoveries=0)
    except holdoff.FieldError as e:
        field: str = e.field
        rule: str = e.rule
        assert (field, "between" in rule) == ("breaker.recoveries", True)

    def by_count(n: int) -> None:
        pass

    if TYPE_CHECKING:  # checked, never run
        breaker.on_state_change(by_count)  # type: ignore[arg-type]
        holdoff.GiveUpError("gave_up")  # type: ignore[arg-type]


def test_typed_fleet() -> None:
    clock = holdoff.ManualClock()
    holdoff.memory_store_reset("typed-fleet")
    options: holdoff.FleetOptions = {"url": "memory://typed-fleet", "key": "k", "refresh": 0.02}
    config = holdoff.FleetConfig("memory://typed-fleet", "k", ttl=timedelta(minutes=5))
    with (
        holdoff.Breaker(clock=clock, fleet=options) as a,
        holdoff.Breaker(clock=clock, fleet=config) as b,
    ):
        report: holdoff.FleetSync = a.sync_fleet()
        record: holdoff.FleetRecord | None = report.record
        state: holdoff.FleetState | None = None if record is None else record.state
        kept: holdoff.FleetConfig | None = b.fleet
        assert (report.ok, state, kept == config, b.fleet_attached) == (True, "closed", True, True)
        action: holdoff.StoreAction = "flush"
        holdoff.memory_store_control("typed-fleet", action)
    assert not a.fleet_attached

    if TYPE_CHECKING:  # checked, never run
        holdoff.Breaker(fleet={"url": "memory://x"})  # type: ignore[arg-type]
        holdoff.Breaker(fleet={"url": "memory://x", "key": "k", "refresh_ms": 20})  # type: ignore[arg-type]
        holdoff.memory_store_control("x", "reboot")  # type: ignore[arg-type]
        holdoff.BreakerGroup(fleet=config)  # type: ignore[arg-type]


def test_typed_metrics() -> None:
    from opentelemetry.sdk.metrics import MeterProvider

    import holdoff.otel
    import holdoff.prometheus

    clock = holdoff.ManualClock()
    policy = holdoff.Policy(
        holdoff.Breaker(clock=clock), holdoff.RetryBudget(clock=clock), holdoff.RetryQuota()
    )
    row: holdoff.MetricDef = holdoff.METRICS[0]
    values: tuple[str, ...] = row.values
    attribute: str | None = row.attribute
    readings: list[holdoff.MetricReading] = policy.metrics() + policy.breaker.metrics()
    first: dict[str, str] = readings[0].attributes
    assert (row.kind, values[0], attribute, readings[0].value, first) == (
        "gauge",
        "closed",
        "state",
        0.0,
        {},
    )
    group = holdoff.BreakerGroup(clock=clock)
    quota = policy.quota
    assert quota is not None
    assert len(group.metrics() + quota.metrics()) == 4
    observed: holdoff.otel.Observed = holdoff.otel.observe(
        MeterProvider().get_meter("typed"), policy, upstream="api"
    )
    with observed:
        collector = holdoff.prometheus.HoldoffCollector(group)
        collector.add(quota, upstream="api")
        assert len(list(collector.collect())) == len(holdoff.METRICS)
