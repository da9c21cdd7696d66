"""``holdoff.Execution``: the core's retry loop of one call, stepped by hand (as the helpers
step it). Time moves only through the ManualClock."""

from __future__ import annotations

from datetime import timedelta

import pytest

import holdoff
from holdoff import Outcome


def policy(clock: holdoff.ManualClock, **budget: object) -> holdoff.Policy:
    return holdoff.Policy(
        holdoff.Breaker(
            trip=holdoff.ConsecutiveFailures(1),
            open_interval=holdoff.Backoff.constant(10),
            clock=clock,
        ),
        holdoff.RetryBudget(clock=clock, **budget),  # type: ignore[arg-type]
    )


def test_steps_of_a_call_that_fails_then_succeeds() -> None:
    clock = holdoff.ManualClock()
    ex = holdoff.Execution(policy(clock), attempt_timeout=timedelta(seconds=3))
    assert (ex.attempt_timeout, ex.total_timeout, ex.attempts, ex.verdict) == (3.0, 60.0, 0, None)
    a = ex.next_step()
    assert isinstance(a, holdoff.AttemptPlan)
    assert (a.number, a.probe, a.time_limit) == (1, False, 3.0)
    clock.advance(3)
    w = ex.complete("raised", Outcome.TIMEOUT)
    assert isinstance(w, holdoff.WaitPlan)
    assert (w.attempts, w.delay, w.source, w.capped, w.server_delay) == (
        1,
        10.0,
        "breaker",
        False,
        None,
    )
    assert ex.last_outcome == Outcome.TIMEOUT
    clock.advance(w.delay)
    a = ex.next_step()
    assert isinstance(a, holdoff.AttemptPlan)
    assert (a.number, a.probe, a.time_limit) == (2, True, 3.0)
    v = ex.complete("returned", "success")
    assert isinstance(v, holdoff.Verdict)
    assert (v.kind, v.attempts, v.reason, v.retry_after, v.server_delay, v.capped) == (
        "return",
        2,
        None,
        None,
        None,
        False,
    )
    assert ex.verdict == v and ex.next_step() == v and ex.cancel() == v
    assert repr(v) == "Verdict(kind='return', attempts=2)"


def test_verdicts() -> None:
    clock = holdoff.ManualClock()
    p = policy(clock)
    ex = holdoff.Execution(p)
    ex.next_step()
    v = ex.complete("bug")
    assert (v.kind, v.attempts) == ("rethrow", 1)
    assert ex.last_outcome == Outcome.CANCELLED and p.breaker.snapshot().failures == 0
    ex = holdoff.Execution(p)
    ex.next_step()
    v = ex.complete("raised", "answer")
    assert (v.kind, v.reason) == ("rethrow", "not_retryable")
    ex = holdoff.Execution(p, total_timeout=None)
    ex.next_step()
    v = ex.complete("cancelled")
    assert (v.kind, v.attempts) == ("cancelled", 1)
    ex = holdoff.Execution(p)
    assert isinstance(ex.next_step(), holdoff.AttemptPlan)
    w = ex.complete_response(429, {"Retry-After": "400"})
    assert isinstance(w, holdoff.Verdict)  # 300 s of wait does not fit in 60 s
    assert (w.kind, w.reason, w.retry_after, w.server_delay, w.capped) == (
        "give_up",
        "total_timeout",
        300.0,
        400.0,
        True,
    )
    ex = holdoff.Execution(p)
    v = ex.next_step()  # the 429 opened the breaker
    assert isinstance(v, holdoff.Verdict)
    assert (v.kind, v.attempts, v.reason, v.retry_after) == (
        "breaker_open",
        0,
        "breaker_open",
        300.0,
    )


def test_a_value_that_is_not_a_status_ends_the_call() -> None:
    clock = holdoff.ManualClock()
    p = policy(clock)
    ex = holdoff.Execution(p)
    ex.next_step()
    with pytest.raises(holdoff.InputTypeError):
        ex.complete_response("200")  # type: ignore[arg-type]
    assert ex.verdict is None  # the attempt is still in progress
    with pytest.raises(holdoff.InvalidInputError) as e:
        ex.complete_response(1000)
    assert e.value.field == "status"
    v = ex.verdict
    assert v is not None and (v.kind, v.attempts) == ("invalid_input", 1)
    assert ex.last_outcome == Outcome.CANCELLED and p.breaker.snapshot().failures == 0


def test_misuse_is_refused() -> None:
    clock = holdoff.ManualClock()
    p = policy(clock)
    ex = holdoff.Execution(p)
    with pytest.raises(holdoff.InvalidInputError) as e:
        ex.complete("returned", "success")
    assert e.value.field == "execution"
    ex.next_step()
    with pytest.raises(holdoff.InvalidInputError) as e:
        ex.next_step()
    assert e.value.field == "execution"
    for args, field in [
        (("returned",), "outcome"),
        (("raised", None), "outcome"),
        (("bug", "failure"), "outcome"),
        (("done",), "attempted"),
        ((1,), "attempted"),
        (("returned", "bogus"), "outcome"),
    ]:
        with pytest.raises(holdoff.InputTypeError) as te:
            ex.complete(*args)  # type: ignore[arg-type]
        assert te.value.field == field, args
    assert p.breaker.snapshot().probes_in_flight == 0 and ex.attempts == 1
    with pytest.raises(holdoff.InvalidConfigError) as ce:
        holdoff.Execution(p, total_timeout=-1)
    assert ce.value.field == "execute.total_timeout"
    with pytest.raises(TypeError):
        holdoff.Execution("policy")  # type: ignore[arg-type]


def test_a_dropped_or_cancelled_execution_frees_its_probe() -> None:
    clock = holdoff.ManualClock()
    p = policy(clock)
    p.breaker.record(p.breaker.allow(), Outcome.FAILURE)
    clock.advance(10)
    ex = holdoff.Execution(p)
    a = ex.next_step()
    assert isinstance(a, holdoff.AttemptPlan) and a.probe
    del ex
    s = p.breaker.snapshot()
    assert (s.probes_in_flight, s.probe_ready) == (0, False)
    clock.advance(10)
    ex = holdoff.Execution(p)
    ex.next_step()
    v = ex.cancel()
    assert (v.kind, v.attempts) == ("cancelled", 1)
    assert p.breaker.snapshot().probes_in_flight == 0


def test_a_healthy_call_without_a_total_timeout_reads_no_clock() -> None:
    clock = holdoff.ManualClock()
    ex = holdoff.Execution(policy(clock), total_timeout=None)
    a = ex.next_step()
    assert isinstance(a, holdoff.AttemptPlan) and a.time_limit is None
    assert ex.complete("returned", "success").kind == "return"
    assert clock.reads == 0


def test_the_sync_helpers_begin_and_succeeded_steps() -> None:
    # `_begin`: a fresh call from the template and its first step in one call; `_succeeded`:
    # a plain success recorded, None when the call is over with the value returned.
    clock = holdoff.ManualClock()
    p = policy(clock)
    template = holdoff.Execution(p, attempt_timeout=2)
    ex, a = template._begin()
    assert ex is not template and template.attempts == 0
    assert isinstance(a, holdoff.AttemptPlan)
    assert (a.number, a.probe, a.time_limit, ex.attempts, ex.attempt_timeout) == (
        1,
        False,
        2.0,
        1,
        2.0,
    )
    assert ex._succeeded() is None
    v = ex.verdict
    assert v is not None and (v.kind, v.attempts, ex.last_outcome) == ("return", 1, Outcome.SUCCESS)
    with pytest.raises(holdoff.InvalidInputError) as e:
        ex._succeeded()  # no attempt in progress
    assert e.value.field == "execution"
    assert (p.breaker.snapshot().failures, p.breaker.state) == (0, "closed")

    # A failure opens the breaker (threshold 1): the next call is refused at its first step.
    ex, a = template._begin()
    assert isinstance(a, holdoff.AttemptPlan)
    w = ex.complete("raised", Outcome.FAILURE)
    assert isinstance(w, holdoff.WaitPlan) and (w.source, w.delay) == ("breaker", 10.0)
    assert ex.cancel().kind == "cancelled"
    clock.advance(4)
    ex, v = template._begin()
    assert isinstance(v, holdoff.Verdict)
    assert (v.kind, v.attempts, v.retry_after) == ("breaker_open", 0, 6.0)
    assert ex.verdict == v and ex.attempts == 0
