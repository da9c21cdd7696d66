"""The Python shapes of the core API, with real values; time moves only through ManualClock."""

from __future__ import annotations

import gc
import pickle
import threading
import weakref
from datetime import datetime, timedelta, timezone
from typing import Any, List

import pytest

import holdoff
from holdoff import Outcome


def incident_one(clock: holdoff.ManualClock) -> holdoff.Breaker:
    """Incident 1's breaker: 5 consecutive failures, a constant 60 s probe interval, 3 answers."""
    return holdoff.Breaker(open_interval=holdoff.Backoff.constant(60), clock=clock)


def fail(b: holdoff.Breaker, n: int) -> None:
    for _ in range(n):
        b.record(b.allow(), Outcome.FAILURE)


# -- clock ------------------------------------------------------------------------------------


def test_manual_clock_moves_only_when_told() -> None:
    clock = holdoff.ManualClock(wall_origin=1_559_559_600)
    assert clock.now() == 0.0
    assert clock.advance(1.5) == 1.5
    clock.set(timedelta(seconds=10))
    assert clock.now() == 10.0
    assert clock.wall_origin == 1_559_559_600.0
    assert clock.wall_time() == 1_559_559_610.0
    with pytest.raises(holdoff.ClockBackwards) as e:
        clock.set(9.999)
    assert isinstance(e.value, ValueError) and e.value.code == "clock_backwards"
    assert clock.now() == 10.0


def test_wall_origin_accepts_aware_datetime_only() -> None:
    when = datetime(2019, 6, 3, 11, 0, tzinfo=timezone.utc)
    assert holdoff.ManualClock(wall_origin=when).wall_origin == when.timestamp()
    with pytest.raises(TypeError, match="timezone-aware"):
        holdoff.ManualClock(wall_origin=datetime(2019, 6, 3, 11, 0))


def test_system_clock_is_monotonic() -> None:
    c = holdoff.SystemClock()
    a = c.now()
    b = c.now()
    assert 0.0 <= a <= b
    assert c.wall_time() > 1.6e9


def test_closed_fast_path_reads_no_clock() -> None:
    clock = holdoff.ManualClock()
    b = incident_one(clock)
    for _ in range(100):
        assert b.record(b.allow(), Outcome.SUCCESS) == "counted"
    assert clock.reads == 0


# -- breaker ----------------------------------------------------------------------------------


def test_trip_refuse_probe_and_ramp() -> None:
    clock = holdoff.ManualClock()
    b = incident_one(clock)
    fail(b, 5)
    with pytest.raises(holdoff.BreakerOpen) as e:
        b.allow()
    assert e.value.retry_after == 60.0 and e.value.state == "open" and e.value.episode == 1
    assert isinstance(e.value, holdoff.UpstreamUnavailable)
    for k in (1, 2, 3):
        clock.set(60 * k)
        p = b.allow()
        assert (p.episode, p.probe) == (1, True)
        with pytest.raises(holdoff.BreakerOpen):
            b.allow()  # exactly one probe per interval
        assert b.record(p, "success") == "counted"
        assert b.state == ("closed" if k == 3 else "half_open")


def test_snapshot_is_a_frozen_value() -> None:
    clock = holdoff.ManualClock()
    b = incident_one(clock)
    fail(b, 5)
    clock.advance(15)
    s = b.snapshot()
    assert s.state == "open"
    assert s.retry_after == 45.0 and s.interval == 60.0
    assert (s.opens, s.episode, s.failures, s.probe_ready) == (1, 1, 0, False)
    assert s == b.snapshot()
    assert s.as_dict()["retry_after"] == 45.0
    assert "state='open'" in repr(s)
    with pytest.raises(AttributeError):
        s.state = "closed"  # type: ignore[misc]


def test_stale_answers_move_nothing() -> None:
    clock = holdoff.ManualClock()
    b = incident_one(clock)
    early = b.allow()  # admitted while closed
    fail(b, 5)
    assert b.record(early, Outcome.SUCCESS) == "stale"
    assert b.snapshot().stale_answers == 1
    assert b.state == "open"


def test_permit_recorded_twice_or_foreign() -> None:
    clock = holdoff.ManualClock()
    a, other = incident_one(clock), incident_one(clock)
    p = a.allow()
    with pytest.raises(holdoff.PermitError) as e:
        other.record(p, Outcome.SUCCESS)
    assert e.value.code == "foreign_permit"
    assert not p.recorded
    a.record(p, Outcome.SUCCESS)
    assert p.recorded
    with pytest.raises(holdoff.PermitError) as e:
        a.record(p, Outcome.SUCCESS)
    assert e.value.code == "permit_already_recorded"


def test_cancelled_probe_frees_its_slot_but_spends_its_window() -> None:
    clock = holdoff.ManualClock()
    b = incident_one(clock)
    fail(b, 5)
    clock.set(60)
    p = b.allow()
    clock.set(61)
    assert b.record(p, Outcome.CANCELLED) == "ignored"
    s = b.snapshot()
    assert (s.state, s.probes_in_flight, s.retry_after, s.probes) == ("half_open", 0, 59.0, 1)
    # It may have reached the upstream: the next probe waits for the next interval.
    with pytest.raises(holdoff.BreakerOpen) as e:
        b.allow()
    assert e.value.retry_after == 59.0
    clock.set(120)
    assert b.allow().probe


def test_retry_later_opens_for_the_providers_delay() -> None:
    clock = holdoff.ManualClock()
    b = incident_one(clock)
    b.record(b.allow(), Outcome.retry_later(timedelta(seconds=5)))
    with pytest.raises(holdoff.BreakerOpen) as e:
        b.allow()
    assert e.value.retry_after == 5.0
    (ev,) = b.drain_events()
    assert (ev.reason, ev.requested_delay, ev.open_for, ev.to_state) == ("retry_later", 5.0, 5.0, "open")


def test_operator_controls() -> None:
    b = holdoff.Breaker(clock=holdoff.ManualClock())
    b.force_open()
    with pytest.raises(holdoff.BreakerOpen) as e:
        b.allow()
    assert e.value.retry_after is None and e.value.state == "forced_open"
    b.disable()
    fail(b, 10)
    assert b.state == "disabled"
    b.reset()
    assert b.state == "closed"
    reasons = [e.reason for e in b.drain_events()]
    assert reasons == ["forced_open", "disabled", "reset"]
    assert b.drain_events() == []


def test_trip_policies() -> None:
    clock = holdoff.ManualClock()
    w = holdoff.Breaker(trip=holdoff.FailuresInWindow(2, window=10), clock=clock)
    w.record(w.allow(), Outcome.FAILURE)
    clock.set(10)
    w.record(w.allow(), Outcome.FAILURE)  # the first left the window at exactly 10 s
    assert w.state == "closed"
    clock.set(19)
    w.record(w.allow(), Outcome.FAILURE)
    assert w.state == "open"
    r = holdoff.Breaker(trip=holdoff.FailureRate(0.5, 4, 10.0), clock=clock)
    for o in (Outcome.FAILURE, Outcome.FAILURE, Outcome.SUCCESS, Outcome.SUCCESS):
        r.record(r.allow(), o)
    assert r.state == "closed"
    r.record(r.allow(), Outcome.FAILURE)
    assert r.state == "open"
    assert repr(holdoff.FailureRate(0.5, 4, 10.0)) == (
        "FailureRate(threshold=0.5, min_calls=4, window=10.0, buckets=10)"
    )


def test_backoff_values() -> None:
    b = holdoff.Backoff(30, 2, 300)
    assert [b.base(n) for n in range(6)] == [30.0, 60.0, 120.0, 240.0, 300.0, 300.0]
    assert b.base(10**30) == 300.0
    assert holdoff.DEFAULT_OPEN_INTERVAL == b
    assert holdoff.DEFAULT_BUDGET_BACKOFF == holdoff.Backoff(0.5, 2, 60)
    assert holdoff.Backoff.constant(timedelta(minutes=1)).max == 60.0


# -- events and listeners ---------------------------------------------------------------------


def test_listener_may_call_back_into_the_breaker() -> None:
    clock = holdoff.ManualClock()
    b = incident_one(clock)
    seen: List[Any] = []

    def on_change(ev: holdoff.StateChange) -> None:
        seen.append((ev.from_state, ev.to_state, ev.reason, b.snapshot().state))
        if ev.to_state == "open":
            b.reset()  # re-entrant: the breaker's lock is not held during the callback

    b.on_state_change(on_change)
    fail(b, 5)
    assert seen == [
        ("closed", "open", "tripped", "open"),
        ("open", "closed", "reset", "closed"),
    ]
    b.on_state_change(None)
    fail(b, 5)
    assert len(seen) == 2


def test_listener_exceptions_go_to_unraisablehook(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    got: List[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: got.append(u.exc_value))
    b = holdoff.Breaker(trip=holdoff.ConsecutiveFailures(1), clock=holdoff.ManualClock())

    def boom(ev: holdoff.StateChange) -> None:
        raise RuntimeError("listener bug")

    b.on_state_change(boom)
    b.record(b.allow(), Outcome.FAILURE)
    assert b.state == "open"
    assert len(got) == 1 and str(got[0]) == "listener bug"


def test_listener_cycle_is_collected() -> None:
    b = holdoff.Breaker(clock=holdoff.ManualClock())
    b.on_state_change(lambda ev: b.snapshot())  # b -> callback -> b
    ref = weakref.ref(b)
    del b
    gc.collect()
    assert ref() is None


def test_on_state_change_needs_a_callable() -> None:
    with pytest.raises(TypeError):
        holdoff.Breaker().on_state_change(42)


# -- groups -----------------------------------------------------------------------------------


def test_group_makes_breakers_lazily_from_the_template() -> None:
    clock = holdoff.ManualClock()
    g = holdoff.BreakerGroup(trip=holdoff.ConsecutiveFailures(2), clock=clock)
    assert len(g) == 0 and "a" not in g and g.peek("a") is None
    a = g.get("a")
    assert g["a"] is a and g.peek("a") is a and "a" in g
    fail(a, 2)
    assert g["a"].state == "open" and g["b"].state == "closed"
    assert g.keys() == ["a", "b"]


# -- budget and quota -------------------------------------------------------------------------


def test_budget_honours_retry_after_and_never_shortens() -> None:
    clock = holdoff.ManualClock()
    budget = holdoff.RetryBudget(clock=clock)
    call = holdoff.RetryState()
    d = budget.decide(call, Outcome.retry_later(250))
    assert (d.action, d.delay, d.source, d.server_delay, d.capped) == ("retry", 250.0, "retry_after", 250.0, False)
    assert budget.episode_start == 0.0
    clock.set(1750)
    d = budget.decide(call, Outcome.retry_later(250))
    assert (d.action, d.reason) == ("give_up", "retry_after_exceeds_remaining")
    d = budget.decide(call, Outcome.retry_later(1000))
    assert d.capped is False and d.action == "give_up"


def test_budget_counted_path() -> None:
    clock = holdoff.ManualClock()
    budget = holdoff.RetryBudget(max_retries=3, clock=clock)
    call = holdoff.RetryState()
    delays = [budget.decide(call, Outcome.FAILURE).delay for _ in range(3)]
    assert delays == [0.5, 1.0, 2.0]
    assert call.retries == 3 and call.first_failure == 0.0
    d = budget.decide(call, "failure")
    assert (d.action, d.reason) == ("give_up", "attempts_exhausted")
    assert budget.decide(call, Outcome.SUCCESS).action == "done"
    assert budget.decide(call, Outcome.ANSWER).reason == "not_retryable"


def test_budget_refuses_a_cap_that_leaves_no_room() -> None:
    with pytest.raises(holdoff.InvalidConfig) as e:
        holdoff.RetryBudget(max_rate_limit_duration=300, retry_after_cap=300)
    assert e.value.field == "budget.max_rate_limit_duration"
    assert "no room to retry" in e.value.rule


def test_quota_spends_and_refunds_exactly() -> None:
    q = holdoff.RetryQuota(capacity=12)
    lease = q.acquire()
    assert (lease.cost, q.available) == (5, 7)
    with pytest.raises(holdoff.QuotaEmpty) as e:
        q.acquire(timeout=True)
    assert (e.value.available, e.value.cost) == (7, 10)
    q.on_success(lease)
    assert q.available == 12
    q.on_success()
    assert q.available == 12


# -- Retry-After and classification -----------------------------------------------------------

NOW = 1_559_559_600  # 2019-06-03 11:00:00 UTC, urllib3's test "now"


@pytest.mark.parametrize(
    "value,delay",
    [
        ("3600", 3600.0),
        (" \t42 ", 42.0),
        ("Mon, 03 Jun 2019 11:30:12 GMT", 1812.0),
        ("Monday, 03-Jun-19 11:30:12 GMT", 1812.0),
        ("Mon Jun  3 11:30:12 2019", 1812.0),
        ("Mon, 03 Jun 2019 10:00:00 GMT", 0.0),
        ("1.5", 1.5),
        (b"120", 120.0),
    ],
)
def test_parse_retry_after(value: Any, delay: float) -> None:
    r = holdoff.parse_retry_after(value, now=NOW)
    assert r.delay == delay and r.unusable is None and bool(r)


@pytest.mark.parametrize(
    "value,why", [("-5", "signed"), ("soon", "malformed"), ("", "missing"), ("120, 60", "conflicting")]
)
def test_parse_retry_after_unusable(value: str, why: str) -> None:
    r = holdoff.parse_retry_after(value, now=NOW)
    assert r.delay is None and r.unusable == why and not r


def test_parse_retry_after_now_forms() -> None:
    date = "Mon, 03 Jun 2019 11:30:12 GMT"
    aware = datetime(2019, 6, 3, 11, 0, tzinfo=timezone.utc)
    clock = holdoff.ManualClock(wall_origin=NOW - 12)
    clock.set(12)
    for now in (NOW, float(NOW), aware, clock):
        assert holdoff.parse_retry_after(date, now=now).delay == 1812.0
    assert holdoff.parse_retry_after(date).delay == 0.0  # the real clock is past 2019


def test_hint_from_headers_shapes() -> None:
    pairs = [("Retry-After", "120"), ("retry-after", "120")]
    assert holdoff.hint(pairs).delay == 120.0
    assert holdoff.hint({"RateLimit-Reset": "50"}).source == "ratelimit_reset"
    r = holdoff.hint([("X-RateLimit-Reset", str(NOW + 30))], now=NOW)
    assert (r.delay, r.source) == (30.0, "x_ratelimit_reset")
    assert holdoff.hint([("Retry-After", "1"), ("Retry-After", "2")]).unusable == "conflicting"
    assert holdoff.hint([]).source == "none"


def test_classifier() -> None:
    c = holdoff.Classifier(failure_statuses=[403])
    assert c.classify(200).outcome == Outcome.SUCCESS
    assert c.classify(403).outcome == Outcome.FAILURE
    assert c.classify(404).outcome == Outcome.ANSWER
    r = c.classify(429, {"Retry-After": "7"})
    assert r.outcome == Outcome.retry_later(7) and r.hint.delay == 7.0
    assert c.classify(429).outcome == Outcome.FAILURE
    w = holdoff.Classifier(rate_limit_default_wait=timedelta(seconds=3))
    assert w.classify(429).outcome.delay == 3.0
    # A status outside 100..599 is a broken upstream, whatever its headers say.
    assert c.classify(600, {"x-should-retry": "false"}).outcome == Outcome.FAILURE
    assert c.classify(0).outcome == Outcome.FAILURE
    with pytest.raises(holdoff.InvalidInput) as e:
        c.classify(1000)
    assert e.value.field == "status" and isinstance(e.value, ValueError)
    assert "between 0 and 999" in e.value.rule


def test_provider_delay_headers_in_order_of_precedence() -> None:
    r = holdoff.hint({"retry-after-ms": "1500.2", "Retry-After": "9"})
    assert (r.delay, r.source) == (1.501, "retry_after_ms")  # milliseconds, rounded up
    r = holdoff.hint([("x-ms-retry-after-ms", "250"), ("RateLimit-Reset", "9")])
    assert (r.delay, r.source) == (0.25, "x_ms_retry_after_ms")
    r = holdoff.hint([("RateLimit", '"day";r=5;t=3600, "minute";r=0;t=30')])
    assert (r.delay, r.source) == (30.0, "ratelimit")  # the exhausted policy's reset
    r = holdoff.hint([("RateLimit", "t=oops")])
    assert (r.unusable, r.source) == ("malformed", "ratelimit")


def test_x_should_retry() -> None:
    c = holdoff.Classifier()
    got = c.classify(409, {"x-should-retry": "true"})
    assert (got.outcome, got.should_retry) == (Outcome.FAILURE, True)
    got = c.classify(500, {"X-Should-Retry": "false"})
    assert (got.outcome, got.should_retry) == (Outcome.ANSWER, False)
    assert c.classify(200, {"x-should-retry": "false"}).outcome == Outcome.SUCCESS
    assert c.classify(500, {"x-should-retry": "maybe"}).should_retry is None
    listed = holdoff.Classifier(failure_statuses=[500])
    assert listed.classify(500, {"x-should-retry": "false"}).outcome == Outcome.FAILURE
    assert "should_retry=True" in repr(c.classify(409, {"x-should-retry": "true"}))


def test_budget_may_give_up_above_the_cap() -> None:
    clock = holdoff.ManualClock()
    waits = holdoff.RetryBudget(retry_after_cap=300, clock=clock)
    assert waits.give_up_above_cap is False
    d = waits.decide(holdoff.RetryState(), Outcome.retry_later(400))
    assert (d.action, d.delay, d.server_delay, d.capped) == ("retry", 300.0, 400.0, True)
    gives_up = holdoff.RetryBudget(retry_after_cap=300, give_up_above_cap=True, clock=clock)
    assert gives_up.give_up_above_cap is True and "give_up_above_cap=True" in repr(gives_up)
    d = gives_up.decide(holdoff.RetryState(), Outcome.retry_later(400))
    assert (d.action, d.reason, d.server_delay) == ("give_up", "retry_after_above_cap", 400.0)
    d = gives_up.decide(holdoff.RetryState(), Outcome.retry_later(300))  # at the cap: waits
    assert (d.action, d.delay, d.capped) == ("retry", 300.0, False)
    for wrong in (1, "yes", 0.0):
        with pytest.raises(holdoff.ConfigTypeError) as e:
            holdoff.RetryBudget(give_up_above_cap=wrong)  # type: ignore[arg-type]
        assert e.value.field == "budget.give_up_above_cap"


def test_helpers_give_up_above_the_cap_with_the_servers_delay() -> None:
    clock = holdoff.ManualClock()
    policy = holdoff.Policy(
        holdoff.Breaker(clock=clock),
        holdoff.RetryBudget(retry_after_cap=60, give_up_above_cap=True, clock=clock),
    )
    calls = []

    def fetch() -> None:
        calls.append(clock.now())
        raise holdoff.RetryLater(90)

    with pytest.raises(holdoff.GiveUp) as e:
        policy.retrying(sleep=clock.advance).call(fetch)
    assert (e.value.reason, e.value.retry_after, e.value.attempts) == (
        "retry_after_above_cap", 90.0, 1)
    assert calls == [0.0]


# -- policy -----------------------------------------------------------------------------------


def test_policy_before_and_after() -> None:
    clock = holdoff.ManualClock()
    breaker = holdoff.Breaker(trip=holdoff.ConsecutiveFailures(2), clock=clock)
    policy = holdoff.Policy(breaker, holdoff.RetryBudget(clock=clock), holdoff.RetryQuota())
    call = holdoff.Call()
    p = policy.before_attempt(call)
    assert isinstance(p, holdoff.Permit)
    d = policy.after_attempt(call, p, Outcome.FAILURE)
    assert (d.action, d.delay, d.source) == ("retry", 0.5, "backoff")
    assert policy.quota is not None and policy.quota.available == 495
    clock.advance(0.5)
    p = policy.before_attempt(call)
    assert isinstance(p, holdoff.Permit)
    d = policy.after_attempt(call, p, Outcome.FAILURE)  # trips the breaker: its wait is longer
    assert (d.action, d.delay, d.source) == ("retry", 30.0, "breaker")
    w = policy.before_attempt(call)
    assert isinstance(w, holdoff.Wait) and w.delay == 30.0
    fresh = policy.before_attempt(holdoff.Call())  # a first attempt does not wait
    assert isinstance(fresh, holdoff.Stop) and fresh.reason == "breaker_open"
    assert fresh.retry_after == 30.0
    assert policy.breaker is breaker
    assert (call.attempts, call.retries) == (2, 2)


def test_policy_after_response_classifies() -> None:
    clock = holdoff.ManualClock()
    policy = holdoff.Policy(holdoff.Breaker(clock=clock), holdoff.RetryBudget(clock=clock))
    call = holdoff.Call()
    p = policy.before_attempt(call)
    assert isinstance(p, holdoff.Permit)
    for not_a_status in (1000, -1, 70000):
        with pytest.raises(holdoff.InvalidInput) as e:
            policy.after_response(call, p, not_a_status)
        assert e.value.field == "status"
        # Recorded as cancelled (a probe frees its slot), whichever side of u16 it falls.
        assert p.recorded
        p = policy.before_attempt(call)
        assert isinstance(p, holdoff.Permit)
    d, c = policy.after_response(call, p, 999)  # a broken upstream: a failure, retried
    assert (d.action, d.source, c.outcome) == ("retry", "backoff", Outcome.FAILURE)
    clock.advance(d.delay)
    p = policy.before_attempt(call)
    assert isinstance(p, holdoff.Permit)
    d, c = policy.after_response(call, p, 503, [("Retry-After", "20")])
    assert (d.action, d.delay, d.source) == ("retry", 20.0, "retry_after")
    assert c.outcome == Outcome.retry_later(20)


def test_policy_needs_one_clock() -> None:
    with pytest.raises(holdoff.InvalidConfig) as e:
        holdoff.Policy(
            holdoff.Breaker(clock=holdoff.ManualClock()),
            holdoff.RetryBudget(clock=holdoff.ManualClock()),
        )
    assert e.value.field == "policy.clock"
    # Without clock=, both share the process-wide SystemClock.
    holdoff.Policy(holdoff.Breaker(), holdoff.RetryBudget())


# -- threads and pickling ---------------------------------------------------------------------


def test_shared_between_threads() -> None:
    clock = holdoff.ManualClock()
    b = holdoff.Breaker(trip=holdoff.ConsecutiveFailures(10**6), clock=clock)
    q = holdoff.RetryQuota(capacity=10**6, retry_cost=1)
    errors: List[BaseException] = []

    def work() -> None:
        try:
            for i in range(2000):
                b.record(b.allow(), Outcome.FAILURE if i % 2 else Outcome.SUCCESS)
                q.acquire()
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert q.available == 10**6 - 8000
    assert b.state == "closed"


def test_exceptions_pickle() -> None:
    for e in (
        holdoff.BreakerOpen(1.5, "open", 2),
        holdoff.BreakerOpen(None, "forced_open", 3, attempts=2, result="last"),
        holdoff.GiveUp("budget_spent", 3.0, 4),
        holdoff.GiveUp("total_timeout", 60.0, 6, {"status": 503}, server_delay=400.0,
                       capped=True),
        holdoff.AttemptTimeoutError(2, 0.5),
        holdoff.InvalidConfig("breaker.recoveries", "must be between 1 and 1000"),
        holdoff.PermitError("foreign_permit"),
        holdoff.QuotaEmpty(3, 5),
    ):
        back = pickle.loads(pickle.dumps(e))
        assert type(back) is type(e) and str(back) == str(e) and back.code == e.code
        for name in ("reason", "attempts", "retry_after", "server_delay", "capped", "result",
                     "state", "episode", "attempt", "time_limit"):
            assert getattr(back, name, None) == getattr(e, name, None), (e, name)
