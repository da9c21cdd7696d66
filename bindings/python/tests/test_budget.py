"""The retry budget: a Retry-After honoured and never shortened, the counted backoff path,
the cap and what happens above it, and the configuration it refuses. Time moves only through the
ManualClock."""

from __future__ import annotations

import pytest

import holdoff
from holdoff import Outcome


def test_budget_honours_retry_after_and_never_shortens() -> None:
    clock = holdoff.ManualClock()
    budget = holdoff.RetryBudget(clock=clock)
    call = holdoff.RetryState()
    d = budget.decide(call, Outcome.retry_later(250))
    assert (d.action, d.delay, d.source, d.server_delay, d.capped) == (
        "retry",
        250.0,
        "retry_after",
        250.0,
        False,
    )
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
    with pytest.raises(holdoff.InvalidConfigError) as e:
        holdoff.RetryBudget(max_rate_limit_duration=300, retry_after_cap=300)
    assert e.value.field == "budget.max_rate_limit_duration"
    assert "no room to retry" in e.value.rule


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
