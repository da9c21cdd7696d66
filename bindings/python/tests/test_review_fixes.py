"""Regressions found by the adversarial review: a state-change callback that reads the `Call`
(deadlock), probes lost when a helper's own classification raises, quota leases refunded more
than once, and operation arguments reported as configuration errors."""

from __future__ import annotations

import asyncio
import math
import subprocess
import sys
import textwrap
from typing import Any, List

import pytest

import holdoff
from holdoff import Outcome

# -- 1. a state-change callback that touches the Call -------------------------------------------

DEADLOCK = textwrap.dedent(
    """
    import holdoff
    clock = holdoff.ManualClock()
    b = holdoff.Breaker(trip=holdoff.ConsecutiveFailures(1), clock=clock)
    pol = holdoff.Policy(b, holdoff.RetryBudget(clock=clock))
    call = holdoff.Call()
    seen = []
    b.on_state_change(lambda e: seen.append((e.to_state, call.attempts, call.retries, repr(call))))
    p = pol.before_attempt(call)
    d = pol.after_attempt(call, p, "failure")
    print(seen, call.attempts, d.action)
    """
)


def test_state_change_callback_may_read_the_call() -> None:
    # In a child process: the bug hangs the interpreter with the GIL held.
    out = subprocess.run([sys.executable, "-c", DEADLOCK], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    # The callback sees the call as it was when the operation started (one attempt admitted).
    assert out.stdout.strip() == "[('open', 1, 0, 'Call(attempts=1, retries=0)')] 1 retry"


def test_a_call_used_from_its_own_callback_is_refused_not_corrupted() -> None:
    clock = holdoff.ManualClock()
    b = holdoff.Breaker(trip=holdoff.ConsecutiveFailures(1), clock=clock)
    pol = holdoff.Policy(b, holdoff.RetryBudget(clock=clock))
    call = holdoff.Call()
    errors: List[BaseException] = []

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


# -- 2. lost probes in the helpers --------------------------------------------------------------


class _Probing(holdoff.Policy):
    clock: holdoff.ManualClock


def _half_open() -> _Probing:
    """A breaker whose next call is its one probe (the probe timeout is an hour)."""
    clock = holdoff.ManualClock()
    b = holdoff.Breaker(trip=holdoff.ConsecutiveFailures(1),
                        open_interval=holdoff.Backoff.constant(10), recoveries=1,
                        probe_timeout=3600, clock=clock)
    b.record(b.allow(), "failure")
    clock.advance(10)
    pol = _Probing(b, holdoff.RetryBudget(clock=clock))
    pol.clock = clock
    return pol


def _assert_probe_freed(pol: _Probing) -> None:
    """The probe was recorded as cancelled: its slot is free at once, so the next probe goes at
    the next interval (10 s), not after the hour a lost probe would hold its slot. Its own
    window stays spent: it may have reached the upstream."""
    s = pol.breaker.snapshot()
    assert (s.state, s.probes_in_flight, s.probe_ready, s.retry_after) == (
        "half_open", 0, False, 10.0)
    pol.clock.advance(10)
    assert pol.breaker.allow().probe


def _boom(_: Any) -> Any:
    raise KeyError("classifier bug")


class Resp:
    def __init__(self, status: int) -> None:
        self.status_code = status
        self.headers: dict[str, str] = {}


def _retry_later(delay: float) -> Any:
    def fn() -> None:
        raise holdoff.RetryLater(delay)
    return fn


def _fail() -> None:
    raise OSError("down")


CASES = [
    pytest.param({"classify_result": _boom}, lambda: 1, KeyError, id="classify_result raises"),
    pytest.param({"classify_exception": _boom}, _fail, KeyError, id="classify_exception raises"),
    pytest.param({"classify_result": lambda r: "bogus"}, lambda: 1, holdoff.InputTypeError,
                 id="unknown outcome name"),
    pytest.param({}, _retry_later(-1), holdoff.InvalidInput, id="RetryLater(-1)"),
    pytest.param({}, _retry_later(math.nan), holdoff.InvalidInput, id="RetryLater(nan)"),
    pytest.param({"http": True}, lambda: Resp(1000), holdoff.InvalidInput, id="status 1000"),
    pytest.param({"http": True}, lambda: Resp(70000), holdoff.InvalidInput, id="status 70000"),
    pytest.param({"http": True}, lambda: Resp(-1), holdoff.InvalidInput, id="status -1"),
    pytest.param({"http": True}, lambda: object(), AttributeError, id="no status_code"),
]


@pytest.mark.parametrize("options,fn,exc", CASES)
def test_call_records_the_probe_as_cancelled(options: Any, fn: Any, exc: type) -> None:
    pol = _half_open()
    with pytest.raises(exc):
        pol.retrying(sleep=lambda d: None, **options).call(fn)
    _assert_probe_freed(pol)


@pytest.mark.parametrize("options,fn,exc", CASES)
def test_decorator_records_the_probe_as_cancelled(options: Any, fn: Any, exc: type) -> None:
    pol = _half_open()
    with pytest.raises(exc):
        pol.retrying(sleep=lambda d: None, **options)(fn)()
    _assert_probe_freed(pol)


@pytest.mark.parametrize("options,fn,exc", CASES)
def test_call_async_records_the_probe_as_cancelled(options: Any, fn: Any, exc: type) -> None:
    pol = _half_open()

    async def afn() -> Any:
        return fn()

    async def sleep(_: float) -> None:
        pass

    with pytest.raises(exc):
        asyncio.run(pol.retrying(async_sleep=sleep, **options).call_async(afn))
    _assert_probe_freed(pol)


def test_attempt_records_the_probe_as_cancelled() -> None:
    pol = _half_open()
    with pytest.raises(holdoff.InvalidInput):
        for attempt in pol.retrying(sleep=lambda d: None):
            with attempt:
                attempt.response(1000)
    _assert_probe_freed(pol)

    pol = _half_open()
    with pytest.raises(holdoff.InputTypeError):
        for attempt in pol.retrying(sleep=lambda d: None):
            with attempt:
                attempt.record("bogus")  # type: ignore[arg-type]
    _assert_probe_freed(pol)

    pol = _half_open()
    with pytest.raises(KeyError):
        for attempt in pol.retrying(sleep=lambda d: None, classify_exception=_boom):
            with attempt:
                raise OSError("down")
    _assert_probe_freed(pol)


def test_policy_after_response_records_an_impossible_status_as_cancelled() -> None:
    pol = _half_open()
    call = holdoff.Call()
    p = pol.before_attempt(call)
    assert isinstance(p, holdoff.Permit) and p.probe
    with pytest.raises(holdoff.InvalidInput):
        pol.after_response(call, p, 1000)
    assert p.recorded
    _assert_probe_freed(pol)


# -- 3. a quota lease is given back at most once, to its own quota -----------------------------


def test_a_lease_is_refunded_once() -> None:
    q = holdoff.RetryQuota(capacity=20)
    lease = q.acquire()
    q.acquire()
    assert q.available == 10 and not lease.returned
    q.on_success(lease)
    assert q.available == 15 and lease.returned
    for _ in range(3):
        with pytest.raises(holdoff.PermitError) as e:
            q.on_success(lease)
        assert e.value.code == "permit_already_recorded"
        assert str(e.value) == "this quota lease was already given back"
    assert q.available == 15


def test_a_lease_of_another_quota_is_refused() -> None:
    q, other = holdoff.RetryQuota(capacity=20), holdoff.RetryQuota(capacity=20)
    q.acquire()
    foreign = other.acquire()
    with pytest.raises(holdoff.PermitError) as e:
        q.on_success(foreign)
    assert e.value.code == "foreign_permit"
    assert q.available == 15 and not foreign.returned
    other.on_success(foreign)  # still good on its own quota
    assert other.available == 20


def test_permit_error_with_a_message_pickles() -> None:
    import pickle

    e = holdoff.PermitError("permit_already_recorded", "this quota lease was already given back")
    e2 = pickle.loads(pickle.dumps(e))
    assert (e2.code, str(e2)) == (e.code, str(e))


# -- 4. operation arguments are invalid input, not configuration -------------------------------

CLOCK = holdoff.ManualClock()
OPERATIONS = [
    pytest.param(lambda: holdoff.Classifier().classify(1.5), holdoff.InputTypeError,
                 id="classify(1.5)"),
    pytest.param(lambda: holdoff.Classifier().classify(1000), holdoff.InvalidInput,
                 id="classify(1000)"),
    pytest.param(lambda: holdoff.Classifier().classify(-1), holdoff.InvalidInput,
                 id="classify(-1)"),
    pytest.param(lambda: CLOCK.advance(-1), holdoff.InvalidInput, id="advance(-1)"),
    pytest.param(lambda: CLOCK.set(math.nan), holdoff.InvalidInput, id="set(nan)"),
    pytest.param(lambda: CLOCK.advance("1"), holdoff.InputTypeError, id="advance('1')"),
    pytest.param(lambda: holdoff.Backoff.constant(1).base(-1), holdoff.InvalidInput,
                 id="base(-1)"),
    pytest.param(lambda: holdoff.Backoff.constant(1).base(1.0), holdoff.InputTypeError,
                 id="base(1.0)"),
    pytest.param(lambda: Outcome.retry_later(-1), holdoff.InvalidInput, id="retry_later(-1)"),
    pytest.param(lambda: holdoff.parse_retry_after("5", now=math.inf), holdoff.InvalidInput,
                 id="parse_retry_after(now=inf)"),
    pytest.param(lambda: holdoff.hint_from_headers(5), holdoff.InputTypeError,
                 id="hint_from_headers(5)"),
    pytest.param(lambda: holdoff.Breaker().record(object(), "success"), holdoff.InputTypeError,
                 id="record(object())"),
    pytest.param(lambda: holdoff.Breaker().record(holdoff.Breaker().allow(), "bogus"),
                 holdoff.InputTypeError, id="record(outcome='bogus')"),
]


@pytest.mark.parametrize("op,exc", OPERATIONS)
def test_operation_arguments_are_invalid_input(op: Any, exc: type) -> None:
    with pytest.raises(exc) as e:
        op()
    err = e.value
    assert err.code == "invalid_input"
    assert str(err).startswith("invalid input: "), str(err)
    assert isinstance(err, ValueError if exc is holdoff.InvalidInput else TypeError)
    assert not isinstance(err, (holdoff.InvalidConfig, holdoff.ConfigTypeError))
