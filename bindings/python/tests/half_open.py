"""A policy whose breaker is half open with its one probe due: what the tests of a probe freed
(recorded as cancelled, never held) start from."""

from __future__ import annotations

import holdoff


class Probing(holdoff.Policy):
    clock: holdoff.ManualClock


def half_open() -> Probing:
    """A breaker whose next call is its one probe (the probe timeout is an hour)."""
    clock = holdoff.ManualClock()
    b = holdoff.Breaker(
        trip=holdoff.ConsecutiveFailures(1),
        open_interval=holdoff.Backoff.constant(10),
        recoveries=1,
        probe_timeout=3600,
        clock=clock,
    )
    b.record(b.allow(), "failure")
    clock.advance(10)
    pol = Probing(b, holdoff.RetryBudget(clock=clock))
    pol.clock = clock
    return pol


def assert_probe_freed(pol: Probing) -> None:
    """The probe was recorded as cancelled: its slot is free at once, so the next probe goes at
    the next interval (10 s), not after the hour a lost probe would hold its slot. Its own
    window stays spent: it may have reached the upstream."""
    s = pol.breaker.snapshot()
    assert (s.state, s.probes_in_flight, s.probe_ready, s.retry_after) == (
        "half_open",
        0,
        False,
        10.0,
    )
    pol.clock.advance(10)
    assert pol.breaker.allow().probe
