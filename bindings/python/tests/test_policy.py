"""The policy's two steps around one attempt (`before_attempt`, `after_attempt`,
`after_response`) with real values, its one clock, and a state-change callback that reads or
uses the `PolicyCall` being decided. Time moves only through the ManualClock."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest

import holdoff
from half_open import assert_probe_freed, half_open
from holdoff import Outcome


def test_policy_before_and_after() -> None:
    clock = holdoff.ManualClock()
    breaker = holdoff.Breaker(trip=holdoff.ConsecutiveFailures(2), clock=clock)
    policy = holdoff.Policy(breaker, holdoff.RetryBudget(clock=clock), holdoff.RetryQuota())
    call = holdoff.PolicyCall()
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
    fresh = policy.before_attempt(holdoff.PolicyCall())  # a first attempt does not wait
    assert isinstance(fresh, holdoff.Stop) and fresh.reason == "breaker_open"
    assert fresh.retry_after == 30.0
    assert policy.breaker is breaker
    assert (call.attempts, call.retries) == (2, 2)


def test_policy_after_response_classifies() -> None:
    clock = holdoff.ManualClock()
    policy = holdoff.Policy(holdoff.Breaker(clock=clock), holdoff.RetryBudget(clock=clock))
    call = holdoff.PolicyCall()
    p = policy.before_attempt(call)
    assert isinstance(p, holdoff.Permit)
    for not_a_status in (1000, -1, 70000):
        with pytest.raises(holdoff.InvalidInputError) as e:
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


def test_policy_after_response_records_an_impossible_status_as_cancelled() -> None:
    pol = half_open()
    call = holdoff.PolicyCall()
    p = pol.before_attempt(call)
    assert isinstance(p, holdoff.Permit) and p.probe
    with pytest.raises(holdoff.InvalidInputError):
        pol.after_response(call, p, 1000)
    assert p.recorded
    assert_probe_freed(pol)


def test_policy_needs_one_clock() -> None:
    with pytest.raises(holdoff.InvalidConfigError) as e:
        holdoff.Policy(
            holdoff.Breaker(clock=holdoff.ManualClock()),
            holdoff.RetryBudget(clock=holdoff.ManualClock()),
        )
    assert e.value.field == "policy.clock"
    # Without clock=, both share the process-wide SystemClock.
    holdoff.Policy(holdoff.Breaker(), holdoff.RetryBudget())


# -- a state-change callback and the PolicyCall being decided ---------------------------------

DEADLOCK = textwrap.dedent(
    """
    import holdoff
    clock = holdoff.ManualClock()
    b = holdoff.Breaker(trip=holdoff.ConsecutiveFailures(1), clock=clock)
    pol = holdoff.Policy(b, holdoff.RetryBudget(clock=clock))
    call = holdoff.PolicyCall()
    seen = []
    b.on_state_change(lambda e: seen.append((e.to_state, call.attempts, call.retries, repr(call))))
    p = pol.before_attempt(call)
    d = pol.after_attempt(call, p, "failure")
    print(seen, call.attempts, d.action)
    """
)


def test_state_change_callback_may_read_the_call() -> None:
    # In a child process: the bug hangs the interpreter with the GIL held.
    out = subprocess.run(
        [sys.executable, "-c", DEADLOCK], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    # The callback sees the call as it was when the operation started (one attempt admitted).
    assert out.stdout.strip() == "[('open', 1, 0, 'PolicyCall(attempts=1, retries=0)')] 1 retry"


def test_a_call_used_from_its_own_callback_is_refused_not_corrupted() -> None:
    clock = holdoff.ManualClock()
    b = holdoff.Breaker(trip=holdoff.ConsecutiveFailures(1), clock=clock)
    pol = holdoff.Policy(b, holdoff.RetryBudget(clock=clock))
    call = holdoff.PolicyCall()
    errors: list[BaseException] = []

    def nested(_: Any) -> None:
        try:
            pol.before_attempt(call)
        except RuntimeError as e:
            errors.append(e)

    b.on_state_change(nested)
    d = pol.after_attempt(call, pol.before_attempt(call), "failure")
    assert d.action == "retry"
    assert len(errors) == 1 and "in use" in str(errors[0])
    assert call.attempts == 1  # the outer operation's update was kept


def test_policy_call_is_the_class_and_call_its_alias() -> None:
    assert holdoff.PolicyCall.__name__ == "PolicyCall"
    assert holdoff.Call is holdoff.PolicyCall
    assert {"Call", "PolicyCall"} <= set(holdoff.__all__)
    assert repr(holdoff.Call()) == "PolicyCall(attempts=0, retries=0)"
