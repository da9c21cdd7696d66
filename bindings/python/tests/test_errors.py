"""Bad input: every argument refuses None (where a value is required), strings, NaN, infinities,
negatives, huge ints and wrong types with a TypeError or ValueError naming the field; never a
crash, never a silent clamp."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any, Callable, Dict, List, Tuple

import pytest

import holdoff

HUGE = 10**400  # beyond any float and any 64-bit int

DURATION_BAD: List[Tuple[Any, type]] = [
    ("5", TypeError),
    (b"5", TypeError),
    ([5], TypeError),
    (True, TypeError),
    (math.nan, ValueError),
    (math.inf, ValueError),
    (-math.inf, ValueError),
    (-1, ValueError),
    (-0.001, ValueError),
    (timedelta(seconds=-1), ValueError),
    (HUGE, ValueError),
    (-HUGE, ValueError),
    (1e300, ValueError),
    (2**63, ValueError),
]
COUNT_BAD: List[Tuple[Any, type]] = [
    ("5", TypeError),
    (2.5, TypeError),
    (5.0, TypeError),
    (True, TypeError),
    (math.nan, TypeError),
    ([1], TypeError),
    (-1, ValueError),
    (HUGE, ValueError),
    (-HUGE, ValueError),
    (2**64, ValueError),
]
FLOAT_BAD: List[Tuple[Any, type]] = [
    ("1", TypeError),
    (True, TypeError),
    (math.nan, ValueError),
    (math.inf, ValueError),
    (HUGE, ValueError),
]

clock = holdoff.ManualClock()

# (constructor, keyword arguments besides the bad one, argument, field named by the error)
DURATIONS: List[Tuple[Callable[..., Any], Dict[str, Any], str, str]] = [
    (holdoff.Backoff, {}, "initial", "backoff.initial"),
    (holdoff.Backoff, {"initial": 1}, "max", "backoff.max"),
    (holdoff.FailuresInWindow, {"threshold": 3}, "window", "breaker.trip.window"),
    (holdoff.FailureRate, {"threshold": 0.5, "min_calls": 3}, "window", "breaker.trip.window"),
    (holdoff.Breaker, {}, "probe_timeout", "breaker.probe_timeout"),
    (holdoff.Breaker, {}, "max_retry_later", "breaker.max_retry_later"),
    (holdoff.BreakerGroup, {}, "max_retry_later", "breaker.max_retry_later"),
    (holdoff.RetryBudget, {}, "max_rate_limit_duration", "budget.max_rate_limit_duration"),
    (holdoff.RetryBudget, {}, "retry_after_cap", "budget.retry_after_cap"),
    (holdoff.RetryBudget, {}, "max_backoff_duration", "budget.max_backoff_duration"),
    (holdoff.Classifier, {}, "rate_limit_default_wait", "classifier.rate_limit_default_wait"),
    (holdoff.Outcome.retry_later, {}, "delay", "delay"),
    (clock.advance, {}, "d", "d"),
    (holdoff.ManualClock, {}, "wall_origin", "wall_origin"),
]
COUNTS: List[Tuple[Callable[..., Any], Dict[str, Any], str, str]] = [
    (holdoff.ConsecutiveFailures, {}, "threshold", "breaker.trip.threshold"),
    (holdoff.FailuresInWindow, {"window": 1}, "threshold", "breaker.trip.threshold"),
    (holdoff.FailureRate, {"threshold": 0.5, "window": 1}, "min_calls", "breaker.trip.min_calls"),
    (holdoff.FailureRate, {"threshold": 0.5, "min_calls": 1, "window": 1}, "buckets",
     "breaker.trip.buckets"),
    (holdoff.Breaker, {}, "recoveries", "breaker.recoveries"),
    (holdoff.Breaker, {}, "max_probes_in_flight", "breaker.max_probes_in_flight"),
    (holdoff.Breaker, {}, "seed", "breaker.seed"),
    (holdoff.RetryBudget, {}, "max_retries", "budget.max_retries"),
    (holdoff.RetryBudget, {}, "seed", "budget.seed"),
    (holdoff.RetryQuota, {}, "capacity", "quota.capacity"),
    (holdoff.RetryQuota, {}, "retry_cost", "quota.retry_cost"),
    (holdoff.RetryQuota, {}, "timeout_cost", "quota.timeout_cost"),
    (holdoff.RetryQuota, {}, "success_refill", "quota.success_refill"),
]
FLOATS: List[Tuple[Callable[..., Any], Dict[str, Any], str, str]] = [
    (holdoff.Backoff, {"initial": 1}, "multiplier", "backoff.multiplier"),
    (holdoff.Backoff, {"initial": 1}, "jitter", "backoff.jitter"),
    (holdoff.FailureRate, {"min_calls": 1, "window": 1}, "threshold", "breaker.trip.threshold"),
]


def _cases(table: List[Tuple[Callable[..., Any], Dict[str, Any], str, str]],
           bad: List[Tuple[Any, type]]) -> List[Any]:
    out = []
    for fn, kwargs, arg, field in table:
        for value, exc in bad:
            name = getattr(fn, "__qualname__", getattr(fn, "__name__", "fn"))
            out.append(pytest.param(fn, kwargs, arg, field, value, exc,
                                    id=f"{name}.{arg}={value!r:.20}"))
    return out


def _expect(fn: Callable[..., Any], kwargs: Dict[str, Any], arg: str, field: str,
            value: Any, exc: type) -> None:
    with pytest.raises(exc) as e:
        fn(**{**kwargs, arg: value})
    err = e.value
    assert isinstance(err, holdoff.HoldoffError), repr(err)
    # An operation's argument is invalid input (as in Node); the rest is configuration.
    if fn in (holdoff.Outcome.retry_later, clock.advance):
        assert err.code == "invalid_input"
        assert isinstance(err, (holdoff.InvalidInput, holdoff.InputTypeError)), repr(err)
        assert str(err).startswith("invalid input: ")
    else:
        assert err.code == "invalid_config"
    assert getattr(err, "field") == field, str(err)
    assert field in str(err)


@pytest.mark.parametrize("fn,kwargs,arg,field,value,exc", _cases(DURATIONS, DURATION_BAD))
def test_bad_durations(fn: Any, kwargs: Dict[str, Any], arg: str, field: str, value: Any,
                       exc: type) -> None:
    if fn is holdoff.ManualClock and isinstance(value, timedelta):
        exc = TypeError  # a wall time is a point, not a duration
    _expect(fn, kwargs, arg, field, value, exc)


@pytest.mark.parametrize("fn,kwargs,arg,field,value,exc", _cases(COUNTS, COUNT_BAD))
def test_bad_counts(fn: Any, kwargs: Dict[str, Any], arg: str, field: str, value: Any,
                    exc: type) -> None:
    if arg == "seed" and value == -1:
        exc = ValueError
    _expect(fn, kwargs, arg, field, value, exc)


@pytest.mark.parametrize("fn,kwargs,arg,field,value,exc", _cases(FLOATS, FLOAT_BAD))
def test_bad_floats(fn: Any, kwargs: Dict[str, Any], arg: str, field: str, value: Any,
                    exc: type) -> None:
    _expect(fn, kwargs, arg, field, value, exc)


@pytest.mark.parametrize(
    "fn,field,rule_part",
    [
        (lambda: holdoff.Backoff(0), "backoff.initial", "greater than 0"),
        (lambda: holdoff.Backoff(1, 0.5), "backoff.multiplier", ">= 1"),
        (lambda: holdoff.Backoff(2, 2, 1), "backoff.max", ">= initial"),
        (lambda: holdoff.Backoff(1, 1, 1, 1.0), "backoff.jitter", "[0, 1)"),
        (lambda: holdoff.ConsecutiveFailures(0), "breaker.trip.threshold", "between 1"),
        (lambda: holdoff.ConsecutiveFailures(10**6 + 1), "breaker.trip.threshold", "between 1"),
        (lambda: holdoff.FailureRate(1.5, 1, 1), "breaker.trip.threshold", "(0, 1]"),
        (lambda: holdoff.FailureRate(0.0, 1, 1), "breaker.trip.threshold", "(0, 1]"),
        (lambda: holdoff.FailureRate(0.5, 1, 1, 1001), "breaker.trip.buckets", "between 1"),
        (lambda: holdoff.FailuresInWindow(1, 0), "breaker.trip.window", "greater than 0"),
        (lambda: holdoff.Breaker(recoveries=0), "breaker.recoveries", "between 1 and 1000"),
        (lambda: holdoff.Breaker(recoveries=1001), "breaker.recoveries", "between 1 and 1000"),
        (lambda: holdoff.Breaker(probe_timeout=0), "breaker.probe_timeout", "greater than 0"),
        (lambda: holdoff.Breaker(max_retry_later=0), "breaker.max_retry_later", "greater than 0"),
        (lambda: holdoff.RetryBudget(retry_after_cap=0), "budget.retry_after_cap", "greater than 0"),
        (lambda: holdoff.RetryBudget(max_rate_limit_duration=599), "budget.max_rate_limit_duration",
         "no room"),
        (lambda: holdoff.RetryQuota(capacity=0), "quota.capacity", "between 1"),
        (lambda: holdoff.RetryQuota(capacity=4), "quota.retry_cost", "capacity"),
        (lambda: holdoff.Classifier(failure_statuses=[99]), "classifier.failure_statuses", "100"),
        (lambda: holdoff.Classifier(answer_statuses=[600]), "classifier.answer_statuses", "599"),
        (lambda: holdoff.Classifier(retry_after_statuses=[10**30]), "classifier.retry_after_statuses",
         "599"),
        (lambda: holdoff.Classifier(rate_limit_default_wait=0), "classifier.rate_limit_default_wait",
         "greater than 0"),
    ],
)
def test_rules_name_the_field(fn: Callable[[], Any], field: str, rule_part: str) -> None:
    with pytest.raises(holdoff.InvalidConfig) as e:
        fn()
    assert e.value.field == field
    assert rule_part in e.value.rule


@pytest.mark.parametrize(
    "fn",
    [
        lambda: holdoff.Breaker(trip=5),
        lambda: holdoff.Breaker(trip="consecutive"),
        lambda: holdoff.Breaker(open_interval=30),
        lambda: holdoff.Breaker(clock="system"),
        lambda: holdoff.RetryBudget(backoff=0.5),
        lambda: holdoff.RetryBudget(clock=object()),
        lambda: holdoff.Classifier(failure_statuses="403"),
        lambda: holdoff.Classifier(failure_statuses=403),
        lambda: holdoff.Classifier(failure_statuses=[403.0]),
        lambda: holdoff.Breaker(nope=1),
        lambda: holdoff.Backoff(),
        lambda: holdoff.Backoff(None),
        lambda: holdoff.FailuresInWindow(3, None),
        lambda: holdoff.FailuresInWindow(None, 1),
        lambda: holdoff.FailureRate(None, 1, 1),
        lambda: holdoff.FailureRate(0.5, None, 1),
        lambda: holdoff.Outcome.retry_later(None),
        lambda: clock.set(None),
        lambda: clock.set("1"),
        lambda: holdoff.Policy(holdoff.Breaker(), "budget"),
        lambda: holdoff.Policy(None, holdoff.RetryBudget()),
    ],
)
def test_wrong_types_are_type_errors(fn: Callable[[], Any]) -> None:
    with pytest.raises(TypeError):
        fn()


def test_operation_arguments() -> None:
    b = holdoff.Breaker(clock=holdoff.ManualClock())
    p = b.allow()
    for bad in (None, "boom", 3, holdoff.Outcome):
        with pytest.raises(TypeError):
            b.record(p, bad)
    assert not p.recorded  # a refused outcome does not spend the permit
    for bad_permit in (None, "p", object()):
        with pytest.raises(TypeError):
            b.record(bad_permit, "success")
    with pytest.raises(TypeError):
        holdoff.RetryBudget().decide(None, "failure")  # type: ignore[arg-type]
    c = holdoff.Classifier()
    for status, exc in ((None, TypeError), ("200", TypeError), (200.0, TypeError),
                        (True, TypeError), (1000, ValueError), (-1, ValueError),
                        (70000, ValueError), (HUGE, ValueError), (-HUGE, ValueError)):
        with pytest.raises(exc) as e:
            c.classify(status)
        assert e.value.field == "status" and e.value.code == "invalid_input"
    # Every value a three-digit status line can carry classifies; outside 100..599 a failure.
    for status in (0, 99, 600, 999):
        assert c.classify(status).outcome == holdoff.Outcome.FAILURE
    with pytest.raises(TypeError):
        c.classify(200, headers="Retry-After: 5")
    with pytest.raises(TypeError):
        c.classify(200, headers=[("Retry-After",)])
    with pytest.raises(TypeError):
        c.classify(200, headers=[("Retry-After", 5)])
    with pytest.raises(TypeError):
        holdoff.parse_retry_after(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        holdoff.parse_retry_after(5)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        holdoff.parse_retry_after("5", now=math.nan)
    with pytest.raises(TypeError):
        holdoff.parse_retry_after("5", now="now")
    with pytest.raises(TypeError):
        holdoff.Backoff(1).base(1.5)
    with pytest.raises(ValueError):
        holdoff.Backoff(1).base(-1)
    with pytest.raises(TypeError):
        holdoff.RetryQuota().acquire(timeout="yes")  # type: ignore[arg-type]


def test_huge_but_valid_values_are_not_clamped() -> None:
    # 2^53 - 1 ms is the largest duration any binding may pass; one more is refused, not clamped.
    top = (2**53 - 1) / 1000
    b = holdoff.Breaker(max_retry_later=top)
    assert b.state == "closed"
    with pytest.raises(ValueError, match="too large"):
        holdoff.Breaker(max_retry_later=(2**53 + 2048) / 1000)
    assert holdoff.Breaker(seed=2**64 - 1).state == "closed"
    with pytest.raises(ValueError):
        holdoff.Breaker(seed=2**64)
