"""The breaker's Python shapes with real values: trip, refuse, probe and ramp; snapshots,
stale answers, permits, operator controls, trip policies, backoff values, and the state-change
listener. Time moves only through the ManualClock."""

from __future__ import annotations

import gc
import sys
import weakref
from datetime import timedelta
from typing import Any

import pytest

import holdoff
from holdoff import Outcome


def incident_one(clock: holdoff.ManualClock) -> holdoff.Breaker:
    """Incident 1's breaker: 5 consecutive failures, a constant 60 s probe interval, 3 answers."""
    return holdoff.Breaker(open_interval=holdoff.Backoff.constant(60), clock=clock)


def fail(b: holdoff.Breaker, n: int) -> None:
    for _ in range(n):
        b.record(b.allow(), Outcome.FAILURE)


def test_closed_fast_path_reads_no_clock() -> None:
    clock = holdoff.ManualClock()
    b = incident_one(clock)
    for _ in range(100):
        assert b.record(b.allow(), Outcome.SUCCESS) == "counted"
    assert clock.reads == 0


def test_trip_refuse_probe_and_ramp() -> None:
    clock = holdoff.ManualClock()
    b = incident_one(clock)
    fail(b, 5)
    with pytest.raises(holdoff.BreakerOpenError) as e:
        b.allow()
    assert e.value.retry_after == 60.0 and e.value.state == "open" and e.value.episode == 1
    assert isinstance(e.value, holdoff.UpstreamUnavailableError)
    for k in (1, 2, 3):
        clock.set(60 * k)
        p = b.allow()
        assert (p.episode, p.probe) == (1, True)
        with pytest.raises(holdoff.BreakerOpenError):
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
    with pytest.raises(holdoff.BreakerOpenError) as e:
        b.allow()
    assert e.value.retry_after == 59.0
    clock.set(120)
    assert b.allow().probe


def test_retry_later_opens_for_the_providers_delay() -> None:
    clock = holdoff.ManualClock()
    b = incident_one(clock)
    b.record(b.allow(), Outcome.retry_later(timedelta(seconds=5)))
    with pytest.raises(holdoff.BreakerOpenError) as e:
        b.allow()
    assert e.value.retry_after == 5.0
    (ev,) = b.drain_events()
    assert (ev.reason, ev.requested_delay, ev.open_for, ev.to_state) == (
        "retry_later",
        5.0,
        5.0,
        "open",
    )


def test_operator_controls() -> None:
    b = holdoff.Breaker(clock=holdoff.ManualClock())
    b.force_open()
    with pytest.raises(holdoff.BreakerOpenError) as e:
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


# -- the state-change listener ----------------------------------------------------------------


def test_listener_may_call_back_into_the_breaker() -> None:
    clock = holdoff.ManualClock()
    b = incident_one(clock)
    seen: list[Any] = []

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

    got: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: got.append(u.exc_value))
    b = holdoff.Breaker(trip=holdoff.ConsecutiveFailures(1), clock=holdoff.ManualClock())

    def boom(ev: holdoff.StateChange) -> None:
        raise RuntimeError("listener bug")

    b.on_state_change(boom)
    b.record(b.allow(), Outcome.FAILURE)
    assert b.state == "open"
    assert len(got) == 1 and str(got[0]) == "listener bug"


def test_listener_cycle_is_collected() -> None:
    def dropped() -> weakref.ref[holdoff.Breaker]:
        b = holdoff.Breaker(clock=holdoff.ManualClock())
        b.on_state_change(lambda ev: b.snapshot())  # b -> callback -> b
        return weakref.ref(b)

    ref = dropped()
    gc.collect()
    assert ref() is None


def test_a_breaker_object_is_small() -> None:
    # The object holds a pointer to the core breaker and little else: a fleet and its
    # configuration are boxed (most breakers have none), a callback's cell is made on demand.
    b = holdoff.Breaker()
    assert sys.getsizeof(b) <= 96
    b.on_state_change(lambda ev: None)
    b.on_state_change(None)
    assert sys.getsizeof(b) <= 96


def test_on_state_change_needs_a_callable() -> None:
    with pytest.raises(TypeError):
        holdoff.Breaker().on_state_change(42)
