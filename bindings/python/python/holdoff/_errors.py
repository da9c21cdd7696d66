"""Exceptions raised by holdoff.

They live in Python (not in the extension) so that they pickle, subclass and print like any
Python exception; the extension imports this module to raise them. Every class has ``code``, the
stable cross-language error name of ``conformance/README.md``.
"""

from __future__ import annotations

from typing import Any, Optional

__all__ = [
    "HoldoffError",
    "InvalidConfig",
    "ConfigTypeError",
    "InvalidInput",
    "InputTypeError",
    "ClockBackwards",
    "PermitError",
    "QuotaEmpty",
    "UpstreamUnavailable",
    "BreakerOpen",
    "GiveUp",
    "RetryLater",
]


class HoldoffError(Exception):
    """Base class of every error holdoff raises."""

    code: str = "holdoff_error"


class InvalidConfig(HoldoffError, ValueError):
    """A configuration value breaks a rule (NaN, infinite, negative, out of range, too large).

    ``field`` is the dotted name of the offending field (``breaker.recoveries``,
    ``budget.max_rate_limit_duration``), ``rule`` says what it must satisfy.
    """

    code = "invalid_config"

    def __init__(self, field: str, rule: str) -> None:
        super().__init__(f"invalid configuration: {field}: {rule}")
        self.field = field
        self.rule = rule

    def __reduce__(self) -> Any:
        return (type(self), (self.field, self.rule))


class ConfigTypeError(HoldoffError, TypeError):
    """A configuration value has the wrong type (``None``, a string, a float for a count)."""

    code = "invalid_config"

    def __init__(self, field: str, rule: str) -> None:
        super().__init__(f"invalid configuration: {field}: {rule}")
        self.field = field
        self.rule = rule

    def __reduce__(self) -> Any:
        return (type(self), (self.field, self.rule))


class InvalidInput(HoldoffError, ValueError):
    """An argument of an operation (not configuration) is out of range: an HTTP status outside
    100..599, a negative ``ManualClock.advance``, a NaN ``Outcome.retry_later`` delay."""

    code = "invalid_input"

    def __init__(self, field: str, rule: str) -> None:
        super().__init__(f"invalid input: {field}: {rule}")
        self.field = field
        self.rule = rule

    def __reduce__(self) -> Any:
        return (type(self), (self.field, self.rule))


class InputTypeError(HoldoffError, TypeError):
    """An argument of an operation (not configuration) has the wrong type (a float status, an
    unknown outcome name, a permit that is not a ``Permit``). ``code`` is ``"invalid_input"``."""

    code = "invalid_input"

    def __init__(self, field: str, rule: str) -> None:
        super().__init__(f"invalid input: {field}: {rule}")
        self.field = field
        self.rule = rule

    def __reduce__(self) -> Any:
        return (type(self), (self.field, self.rule))


class ClockBackwards(HoldoffError, ValueError):
    """A :class:`ManualClock` was set to an earlier time than it shows (seconds)."""

    code = "clock_backwards"

    def __init__(self, now: float, requested: float) -> None:
        super().__init__(
            f"a monotonic clock cannot go backwards (now {now!r} s, requested {requested!r} s)"
        )
        self.now = now
        self.requested = requested

    def __reduce__(self) -> Any:
        return (type(self), (self.now, self.requested))


class PermitError(HoldoffError, RuntimeError):
    """A permit recorded twice (``code == "permit_already_recorded"``) or recorded on a breaker
    that did not issue it (``code == "foreign_permit"``); likewise a quota lease given back twice
    or to another quota (same codes, as in C, Go and C#)."""

    code = "permit_error"

    def __init__(self, code: str, message: Optional[str] = None) -> None:
        if message is None:
            message = {
                "permit_already_recorded": "this permit was already recorded",
                "foreign_permit": "this permit was issued by another breaker",
            }.get(code, code)
        super().__init__(message)
        self.code = code

    def __reduce__(self) -> Any:
        return (type(self), (self.code, self.args[0] if self.args else None))


class QuotaEmpty(HoldoffError):
    """The retry quota cannot pay for a retry: ``available`` tokens left, ``cost`` needed."""

    code = "quota_empty"

    def __init__(self, available: int, cost: int) -> None:
        super().__init__(f"retry quota empty: {available} tokens left, a retry costs {cost}")
        self.available = available
        self.cost = cost

    def __reduce__(self) -> Any:
        return (type(self), (self.available, self.cost))


class UpstreamUnavailable(HoldoffError):
    """The upstream cannot be used now, whether it failed or its breaker refused the call.

    ``retry_after`` is the time in seconds until a call could be admitted (or the server's own
    Retry-After), ``None`` when unknown. Catch this one type to handle both.
    """

    code = "upstream_unavailable"

    def __init__(self, message: str, retry_after: Optional[float] = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    def __reduce__(self) -> Any:
        return (type(self), (self.args[0] if self.args else "", self.retry_after))


class BreakerOpen(UpstreamUnavailable):
    """The breaker refused the call without touching the upstream.

    ``retry_after``: seconds until the next probe may be admitted, ``None`` while forced open.
    ``state``: the breaker's state (``"open"``, ``"half_open"``, ``"forced_open"``).
    ``episode``: the open episode's number.
    """

    code = "breaker_open"

    def __init__(
        self, retry_after: Optional[float] = None, state: str = "open", episode: int = 0
    ) -> None:
        if retry_after is None:
            message = f"breaker {state}: refused until reset"
        else:
            message = f"breaker {state}: refused, next probe in {retry_after:.3f} s"
        super().__init__(message, retry_after)
        self.state = state
        self.episode = episode

    def __reduce__(self) -> Any:
        return (type(self), (self.retry_after, self.state, self.episode))


class GiveUp(UpstreamUnavailable):
    """The retry helpers stopped retrying.

    ``reason`` is one of the budget's give-up reasons (``budget_spent``,
    ``retry_after_exceeds_remaining``, ``retry_after_above_cap``, ``backoff_exceeds_remaining``,
    ``attempts_exhausted``, ``quota_empty``, ``breaker_open``, ...). ``retry_after`` is the
    server's Retry-After in seconds if the last answer carried one (with
    ``retry_after_above_cap``: the delay it asked for, above the budget's cap). ``attempts`` counts the attempts made. ``result`` is the last
    return value when the last attempt returned (a response classified as a failure) rather than
    raised; the last exception is ``__cause__``.
    """

    code = "give_up"

    def __init__(
        self,
        reason: str,
        retry_after: Optional[float] = None,
        attempts: int = 0,
        result: Any = None,
    ) -> None:
        super().__init__(f"gave up after {attempts} attempt(s): {reason}", retry_after)
        self.reason = reason
        self.attempts = attempts
        self.result = result

    def __reduce__(self) -> Any:
        return (type(self), (self.reason, self.retry_after, self.attempts, self.result))


class RetryLater(Exception):
    """Raise this from a protected function when the upstream asked to be left alone for
    ``delay`` seconds (an explicit "retry later" answer without an HTTP response). The helpers
    record it as ``Outcome.retry_later(delay)``: the breaker opens for that delay at once and the
    budget waits it, never shorter."""

    def __init__(self, delay: float, message: str = "") -> None:
        super().__init__(message or f"upstream asked to retry in {delay} s")
        self.delay = delay

    def __reduce__(self) -> Any:
        return (type(self), (self.delay, self.args[0] if self.args else ""))
