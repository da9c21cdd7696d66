"""A quick check that an installed wheel works (run against the sdist install too)."""

import holdoff


def test_import_and_one_breaker_cycle() -> None:
    clock = holdoff.ManualClock()
    breaker = holdoff.Breaker(trip=holdoff.ConsecutiveFailures(1), clock=clock)
    permit = breaker.allow()
    assert breaker.record(permit, holdoff.Outcome.FAILURE) == "counted"
    assert breaker.state == "open"
    assert holdoff._holdoff.__file__.endswith((".so", ".pyd"))
    assert holdoff.__version__
