"""Bad input: every argument refuses None (where a value is required), strings, NaN, infinities,
negatives, huge ints and wrong types with a TypeError or ValueError naming the field; never a
crash, never a silent clamp."""

from __future__ import annotations

import math
import pickle
from datetime import timedelta
from typing import Any, Callable

import pytest

import holdoff
from holdoff import Outcome

HUGE = 10**400  # beyond any float and any 64-bit int

DURATION_BAD: list[tuple[Any, type]] = [
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
COUNT_BAD: list[tuple[Any, type]] = [
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
FLOAT_BAD: list[tuple[Any, type]] = [
    ("1", TypeError),
    (True, TypeError),
    (math.nan, ValueError),
    (math.inf, ValueError),
    (HUGE, ValueError),
]

clock = holdoff.ManualClock()

# (constructor, keyword arguments besides the bad one, argument, field named by the error)
DURATIONS: list[tuple[Callable[..., Any], dict[str, Any], str, str]] = [
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
COUNTS: list[tuple[Callable[..., Any], dict[str, Any], str, str]] = [
    (holdoff.ConsecutiveFailures, {}, "threshold", "breaker.trip.threshold"),
    (holdoff.FailuresInWindow, {"window": 1}, "threshold", "breaker.trip.threshold"),
    (holdoff.FailureRate, {"threshold": 0.5, "window": 1}, "min_calls", "breaker.trip.min_calls"),
    (
        holdoff.FailureRate,
        {"threshold": 0.5, "min_calls": 1, "window": 1},
        "buckets",
        "breaker.trip.buckets",
    ),
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
FLOATS: list[tuple[Callable[..., Any], dict[str, Any], str, str]] = [
    (holdoff.Backoff, {"initial": 1}, "multiplier", "backoff.multiplier"),
    (holdoff.Backoff, {"initial": 1}, "jitter", "backoff.jitter"),
    (holdoff.FailureRate, {"min_calls": 1, "window": 1}, "threshold", "breaker.trip.threshold"),
]


def _cases(
    table: list[tuple[Callable[..., Any], dict[str, Any], str, str]], bad: list[tuple[Any, type]]
) -> list[Any]:
    out = []
    for fn, kwargs, arg, field in table:
        for value, exc in bad:
            name = getattr(fn, "__qualname__", getattr(fn, "__name__", "fn"))
            out.append(
                pytest.param(fn, kwargs, arg, field, value, exc, id=f"{name}.{arg}={value!r:.20}")
            )
    return out


def _expect(
    fn: Callable[..., Any], kwargs: dict[str, Any], arg: str, field: str, value: Any, exc: type
) -> None:
    with pytest.raises(exc) as e:
        fn(**{**kwargs, arg: value})
    err = e.value
    assert isinstance(err, holdoff.HoldoffError), repr(err)
    # An operation's argument is invalid input (as in Node); the rest is configuration.
    if fn in (holdoff.Outcome.retry_later, clock.advance):
        assert err.code == "invalid_input"
        assert isinstance(err, (holdoff.InvalidInputError, holdoff.InputTypeError)), repr(err)
        assert str(err).startswith("invalid input: ")
    else:
        assert err.code == "invalid_config"
    assert err.field == field, str(err)
    assert field in str(err)


@pytest.mark.parametrize("fn,kwargs,arg,field,value,exc", _cases(DURATIONS, DURATION_BAD))
def test_bad_durations(
    fn: Any, kwargs: dict[str, Any], arg: str, field: str, value: Any, exc: type
) -> None:
    if fn is holdoff.ManualClock and isinstance(value, timedelta):
        exc = TypeError  # a wall time is a point, not a duration
    _expect(fn, kwargs, arg, field, value, exc)


@pytest.mark.parametrize("fn,kwargs,arg,field,value,exc", _cases(COUNTS, COUNT_BAD))
def test_bad_counts(
    fn: Any, kwargs: dict[str, Any], arg: str, field: str, value: Any, exc: type
) -> None:
    if arg == "seed" and value == -1:
        exc = ValueError
    _expect(fn, kwargs, arg, field, value, exc)


@pytest.mark.parametrize("fn,kwargs,arg,field,value,exc", _cases(FLOATS, FLOAT_BAD))
def test_bad_floats(
    fn: Any, kwargs: dict[str, Any], arg: str, field: str, value: Any, exc: type
) -> None:
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
        (
            lambda: holdoff.RetryBudget(retry_after_cap=0),
            "budget.retry_after_cap",
            "greater than 0",
        ),
        (
            lambda: holdoff.RetryBudget(max_rate_limit_duration=599),
            "budget.max_rate_limit_duration",
            "no room",
        ),
        (lambda: holdoff.RetryQuota(capacity=0), "quota.capacity", "between 1"),
        (lambda: holdoff.RetryQuota(capacity=4), "quota.retry_cost", "capacity"),
        (lambda: holdoff.Classifier(failure_statuses=[99]), "classifier.failure_statuses", "100"),
        (lambda: holdoff.Classifier(answer_statuses=[600]), "classifier.answer_statuses", "599"),
        (
            lambda: holdoff.Classifier(retry_after_statuses=[10**30]),
            "classifier.retry_after_statuses",
            "599",
        ),
        (
            lambda: holdoff.Classifier(rate_limit_default_wait=0),
            "classifier.rate_limit_default_wait",
            "greater than 0",
        ),
    ],
)
def test_rules_name_the_field(fn: Callable[[], Any], field: str, rule_part: str) -> None:
    with pytest.raises(holdoff.InvalidConfigError) as e:
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
    for status, exc in (
        (None, TypeError),
        ("200", TypeError),
        (200.0, TypeError),
        (True, TypeError),
        (1000, ValueError),
        (-1, ValueError),
        (70000, ValueError),
        (HUGE, ValueError),
        (-HUGE, ValueError),
    ):
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


# -- operation arguments are invalid input, not configuration ---------------------------------

CLOCK = holdoff.ManualClock()

OPERATIONS = [
    pytest.param(
        lambda: holdoff.Classifier().classify(1.5), holdoff.InputTypeError, id="classify(1.5)"
    ),
    pytest.param(
        lambda: holdoff.Classifier().classify(1000), holdoff.InvalidInputError, id="classify(1000)"
    ),
    pytest.param(
        lambda: holdoff.Classifier().classify(-1), holdoff.InvalidInputError, id="classify(-1)"
    ),
    pytest.param(lambda: CLOCK.advance(-1), holdoff.InvalidInputError, id="advance(-1)"),
    pytest.param(lambda: CLOCK.set(math.nan), holdoff.InvalidInputError, id="set(nan)"),
    pytest.param(lambda: CLOCK.advance("1"), holdoff.InputTypeError, id="advance('1')"),
    pytest.param(
        lambda: holdoff.Backoff.constant(1).base(-1), holdoff.InvalidInputError, id="base(-1)"
    ),
    pytest.param(
        lambda: holdoff.Backoff.constant(1).base(1.0), holdoff.InputTypeError, id="base(1.0)"
    ),
    pytest.param(lambda: Outcome.retry_later(-1), holdoff.InvalidInputError, id="retry_later(-1)"),
    pytest.param(
        lambda: holdoff.parse_retry_after("5", now=math.inf),
        holdoff.InvalidInputError,
        id="parse_retry_after(now=inf)",
    ),
    pytest.param(
        lambda: holdoff.hint_from_headers(5), holdoff.InputTypeError, id="hint_from_headers(5)"
    ),
    pytest.param(
        lambda: holdoff.Breaker().record(object(), "success"),
        holdoff.InputTypeError,
        id="record(object())",
    ),
    pytest.param(
        lambda: holdoff.Breaker().record(holdoff.Breaker().allow(), "bogus"),
        holdoff.InputTypeError,
        id="record(outcome='bogus')",
    ),
]


@pytest.mark.parametrize("op,exc", OPERATIONS)
def test_operation_arguments_are_invalid_input(op: Any, exc: type) -> None:
    with pytest.raises(exc) as e:
        op()
    err = e.value
    assert err.code == "invalid_input"
    assert str(err).startswith("invalid input: "), str(err)
    assert isinstance(err, ValueError if exc is holdoff.InvalidInputError else TypeError)
    assert not isinstance(err, (holdoff.InvalidConfigError, holdoff.ConfigTypeError))


# -- pickling ---------------------------------------------------------------------------------


def test_exceptions_pickle() -> None:
    for e in (
        holdoff.BreakerOpenError(1.5, "open", 2),
        holdoff.BreakerOpenError(None, "forced_open", 3, attempts=2, result="last"),
        holdoff.GiveUpError("budget_spent", 3.0, 4),
        holdoff.GiveUpError(
            "total_timeout", 60.0, 6, {"status": 503}, server_delay=400.0, capped=True
        ),
        holdoff.AttemptTimeoutError(2, 0.5),
        holdoff.InvalidConfigError("breaker.recoveries", "must be between 1 and 1000"),
        holdoff.PermitError("foreign_permit"),
        holdoff.QuotaEmptyError(3, 5),
        holdoff.FleetError("this breaker has no fleet"),
    ):
        back = pickle.loads(pickle.dumps(e))
        assert type(back) is type(e) and str(back) == str(e) and back.code == e.code
        for name in (
            "reason",
            "attempts",
            "retry_after",
            "server_delay",
            "capped",
            "result",
            "state",
            "episode",
            "attempt",
            "time_limit",
        ):
            assert getattr(back, name, None) == getattr(e, name, None), (e, name)


def test_permit_error_with_a_message_pickles() -> None:
    e = holdoff.PermitError("permit_already_recorded", "this quota lease was already given back")
    e2 = pickle.loads(pickle.dumps(e))
    assert (e2.code, str(e2)) == (e.code, str(e))


# -- names: `...Error`, the aliases, one base for the errors that name a field ------------------

ALIASES = [
    ("InvalidConfig", "InvalidConfigError"),
    ("InvalidInput", "InvalidInputError"),
    ("ClockBackwards", "ClockBackwardsError"),
    ("QuotaEmpty", "QuotaEmptyError"),
    ("UpstreamUnavailable", "UpstreamUnavailableError"),
    ("BreakerOpen", "BreakerOpenError"),
    ("GiveUp", "GiveUpError"),
    ("RetryLater", "RetryLaterError"),
]


@pytest.mark.parametrize("alias,name", ALIASES)
def test_a_name_without_the_suffix_is_the_same_class(alias: str, name: str) -> None:
    cls = getattr(holdoff, name)
    assert getattr(holdoff, alias) is cls and cls.__name__ == name
    assert {alias, name} <= set(holdoff.__all__)


def test_every_exception_name_ends_in_error() -> None:
    classes = {getattr(holdoff, n) for n in holdoff.__all__}
    errors = sorted(
        c.__name__ for c in classes if isinstance(c, type) and issubclass(c, BaseException)
    )
    assert len(errors) == 15 and all(n.endswith("Error") for n in errors), errors


def test_the_errors_that_name_a_field_share_one_base() -> None:
    clock = holdoff.ManualClock()
    cases: list[tuple[Callable[[], Any], type, type, str, str]] = [
        (
            lambda: holdoff.Breaker(recoveries=0),
            holdoff.InvalidConfigError,
            ValueError,
            "breaker.recoveries",
            "invalid_config",
        ),
        (
            lambda: holdoff.Breaker(recoveries="3"),
            holdoff.ConfigTypeError,
            TypeError,
            "breaker.recoveries",
            "invalid_config",
        ),
        (lambda: clock.advance(-1), holdoff.InvalidInputError, ValueError, "d", "invalid_input"),
        (
            lambda: holdoff.Classifier().classify(1.5),
            holdoff.InputTypeError,
            TypeError,
            "status",
            "invalid_input",
        ),
    ]
    for op, cls, builtin, field, code in cases:
        with pytest.raises(holdoff.FieldError) as e:
            op()
        err = e.value
        assert type(err) is cls and isinstance(err, (builtin, holdoff.HoldoffError))
        assert (err.field, err.code) == (field, code)
        assert str(err) == f"{err._what}: {field}: {err.rule}" and err.rule
    for other in (
        holdoff.ClockBackwardsError,
        holdoff.PermitError,
        holdoff.QuotaEmptyError,
        holdoff.UpstreamUnavailableError,
        holdoff.AttemptTimeoutError,
    ):
        assert not issubclass(other, holdoff.FieldError)
