"""Exceptions raised by holdoff.

They live in Python (not in the extension) so that they pickle, subclass and print like any
Python exception; the extension imports this module to raise them. Every class has ``code``, the
stable cross-language error name of ``conformance/README.md``. Every name ends in ``Error``;
the shorter names (``InvalidConfig``, ``GiveUp``, ...) are aliases: the same classes.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ._names import GiveUpReason, State

__all__ = [
    "AttemptTimeoutError",
    "BreakerOpen",
    "BreakerOpenError",
    "ClockBackwards",
    "ClockBackwardsError",
    "ConfigTypeError",
    "FieldError",
    "FleetError",
    "GiveUp",
    "GiveUpError",
    "HoldoffError",
    "InputTypeError",
    "InvalidConfig",
    "InvalidConfigError",
    "InvalidInput",
    "InvalidInputError",
    "PermitError",
    "QuotaEmpty",
    "QuotaEmptyError",
    "RetryLater",
    "RetryLaterError",
    "UpstreamUnavailable",
    "UpstreamUnavailableError",
]


class HoldoffError(Exception):
    """Base class of every error holdoff raises."""

    code: str = "holdoff_error"


class FieldError(HoldoffError):
    """Base class of the errors that name a field: a configuration value or an operation's
    argument that breaks a rule. ``field`` is the dotted name of the offending value
    (``breaker.recoveries``, ``budget.max_rate_limit_duration``, ``status``), ``rule`` says
    what it must satisfy. Catch this one type for any of :class:`InvalidConfigError`,
    :class:`ConfigTypeError`, :class:`InvalidInputError` and :class:`InputTypeError`.
    """

    #: The message's first words: what kind of value broke the rule.
    _what: ClassVar[str] = "invalid value"

    def __init__(self, field: str, rule: str) -> None:
        super().__init__(f"{self._what}: {field}: {rule}")
        self.field = field
        self.rule = rule

    def __reduce__(self) -> Any:
        return (type(self), (self.field, self.rule))


class InvalidConfigError(FieldError, ValueError):
    """A configuration value breaks a rule (NaN, infinite, negative, out of range, too large).
    ``code`` is ``"invalid_config"``. Alias: ``InvalidConfig``."""

    code = "invalid_config"
    _what = "invalid configuration"


class ConfigTypeError(FieldError, TypeError):
    """A configuration value has the wrong type (``None``, a string, a float for a count).
    ``code`` is ``"invalid_config"``."""

    code = "invalid_config"
    _what = "invalid configuration"


class InvalidInputError(FieldError, ValueError):
    """An argument of an operation (not configuration) is out of range: an HTTP status outside
    0..999, a negative ``ManualClock.advance``, a NaN ``Outcome.retry_later`` delay. ``code`` is
    ``"invalid_input"``. Alias: ``InvalidInput``."""

    code = "invalid_input"
    _what = "invalid input"


class InputTypeError(FieldError, TypeError):
    """An argument of an operation (not configuration) has the wrong type (a float status, an
    unknown outcome name, a permit that is not a ``Permit``). ``code`` is ``"invalid_input"``."""

    code = "invalid_input"
    _what = "invalid input"


class ClockBackwardsError(HoldoffError, ValueError):
    """A :class:`ManualClock` was set to an earlier time than it shows (``now`` and
    ``requested``, seconds). Alias: ``ClockBackwards``."""

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

    def __init__(self, code: str, message: str | None = None) -> None:
        if message is None:
            message = {
                "permit_already_recorded": "this permit was already recorded",
                "foreign_permit": "this permit was issued by another breaker",
            }.get(code, code)
        super().__init__(message)
        self.code = code

    def __reduce__(self) -> Any:
        return (type(self), (self.code, self.args[0] if self.args else None))


class FleetError(HoldoffError, RuntimeError):
    """A breaker's fleet cannot do what was asked: ``Breaker.sync_fleet()`` on a breaker
    without a fleet or whose fleet was closed. A store that fails is never this error: the
    breaker falls back to its local state, and a tick reports it (``FleetSync.ok``,
    ``FleetSync.error``). ``code`` is ``"fleet_error"``."""

    code = "fleet_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)

    def __reduce__(self) -> Any:
        return (type(self), (self.args[0] if self.args else "",))


class QuotaEmptyError(HoldoffError):
    """The retry quota cannot pay for a retry: ``available`` tokens left, ``cost`` needed.
    Alias: ``QuotaEmpty``."""

    code = "quota_empty"

    def __init__(self, available: int, cost: int) -> None:
        super().__init__(f"retry quota empty: {available} tokens left, a retry costs {cost}")
        self.available = available
        self.cost = cost

    def __reduce__(self) -> Any:
        return (type(self), (self.available, self.cost))


class UpstreamUnavailableError(HoldoffError):
    """The upstream cannot be used now, whether the helpers gave up on it or its breaker refused
    the call. Catch this one type to handle both (:class:`BreakerOpenError`,
    :class:`GiveUpError`). Alias: ``UpstreamUnavailable``.

    * ``reason``: why (``"breaker_open"``, or a give-up reason such as ``"attempts_exhausted"``,
      ``"total_timeout"``, ``"retry_after_exceeds_remaining"``).
    * ``attempts``: attempts made (0 when the breaker refused the first).
    * ``retry_after``: seconds until trying again could help (the breaker's next probe, or the
      server's delay), ``None`` when unknown.
    * ``server_delay``: the server's own delay (seconds) if the last answer carried one, and
      ``capped``: whether it was above the budget's cap.
    * ``result``: the last attempt's return value (a response) when it returned rather than
      raised; its exception is ``__cause__``.
    """

    code = "upstream_unavailable"

    def __init__(
        self,
        message: str,
        retry_after: float | None = None,
        *,
        reason: GiveUpReason,
        attempts: int = 0,
        server_delay: float | None = None,
        capped: bool = False,
        result: Any = None,
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.reason = reason
        self.attempts = attempts
        self.server_delay = server_delay
        self.capped = capped
        self.result = result

    def _fields(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "attempts": self.attempts,
            "server_delay": self.server_delay,
            "capped": self.capped,
            "result": self.result,
        }

    def __reduce__(self) -> Any:
        return (
            _rebuild,
            (type(self), (self.args[0] if self.args else "", self.retry_after), self._fields()),
        )


def _rebuild(cls: Any, args: Any, fields: dict[str, Any]) -> Any:
    return cls(*args, **fields)


class BreakerOpenError(UpstreamUnavailableError):
    """The breaker refused the call: its first attempt (nothing reached the upstream), or a
    retry it would keep waiting for past the budget or the total timeout (the last attempt's
    exception is ``__cause__``, or its value ``result``). ``reason`` is ``"breaker_open"``.

    ``retry_after``: seconds until the next probe may be admitted, ``None`` while forced open.
    ``state``: the breaker's state (``"open"``, ``"half_open"``, ``"forced_open"``).
    ``episode``: the open episode's number. Alias: ``BreakerOpen``.
    """

    code = "breaker_open"

    def __init__(
        self,
        retry_after: float | None = None,
        state: State = "open",
        episode: int = 0,
        *,
        attempts: int = 0,
        result: Any = None,
    ) -> None:
        if retry_after is None:
            message = f"breaker {state}: refused until reset"
        else:
            message = f"breaker {state}: refused, next probe in {retry_after:.3f} s"
        if attempts:
            message += f" (after {attempts} attempt(s))"
        super().__init__(
            message, retry_after, reason="breaker_open", attempts=attempts, result=result
        )
        self.state = state
        self.episode = episode

    def __reduce__(self) -> Any:
        return (
            _rebuild,
            (
                type(self),
                (self.retry_after, self.state, self.episode),
                {"attempts": self.attempts, "result": self.result},
            ),
        )


class GiveUpError(UpstreamUnavailableError):
    """The retry helpers stopped retrying. Alias: ``GiveUp``.

    ``reason`` is one of the give-up reasons (``attempts_exhausted``, ``budget_spent``,
    ``backoff_exceeds_remaining``, ``retry_after_exceeds_remaining``, ``retry_after_above_cap``,
    ``quota_empty``, ``total_timeout``). ``retry_after``: seconds until trying again could help
    (the server's delay after a rate limit; after a total timeout, the open breaker's next probe
    or the server's capped delay), else ``None``. ``server_delay`` and ``capped``: the last
    answer's own delay and whether it was above the budget's cap. ``attempts`` counts the
    attempts made. ``result`` is the last return value when the last attempt returned (a 500
    response) rather than raised; the last exception is ``__cause__``.
    """

    code = "give_up"

    def __init__(
        self,
        reason: GiveUpReason,
        retry_after: float | None = None,
        attempts: int = 0,
        result: Any = None,
        *,
        server_delay: float | None = None,
        capped: bool = False,
    ) -> None:
        super().__init__(
            f"gave up after {attempts} attempt(s): {reason}",
            retry_after,
            reason=reason,
            attempts=attempts,
            server_delay=server_delay,
            capped=capped,
            result=result,
        )

    def __reduce__(self) -> Any:
        return (
            _rebuild,
            (
                type(self),
                (self.reason, self.retry_after, self.attempts, self.result),
                {"server_delay": self.server_delay, "capped": self.capped},
            ),
        )


class AttemptTimeoutError(HoldoffError, TimeoutError):
    """An attempt of the retry helpers reached its time limit (``time_limit`` seconds, the
    smaller of ``attempt_timeout`` and what was left of ``total_timeout``): attempt number
    ``attempt`` is recorded as a timeout. The helpers make it the attempt's error (the
    ``__cause__`` of a :class:`GiveUpError`); what the cancelled attempt raised is its
    ``__cause__``."""

    code = "attempt_timeout"

    def __init__(self, attempt: int, time_limit: float) -> None:
        super().__init__(f"attempt {attempt} reached its time limit of {time_limit:.3f} s")
        self.attempt = attempt
        self.time_limit = time_limit

    def __reduce__(self) -> Any:
        return (type(self), (self.attempt, self.time_limit))


class RetryLaterError(Exception):
    """Raise this from a protected function when the upstream asked to be left alone for
    ``delay`` seconds (an explicit "retry later" answer without an HTTP response). The helpers
    record it as ``Outcome.retry_later(delay)``: the breaker opens for that delay at once and the
    budget waits it, never shorter (a negative or NaN delay is a programming error:
    :class:`InvalidInputError` propagates). Alias: ``RetryLater``."""

    def __init__(self, delay: float, message: str = "") -> None:
        super().__init__(message or f"upstream asked to retry in {delay} s")
        self.delay = delay

    def __reduce__(self) -> Any:
        return (type(self), (self.delay, self.args[0] if self.args else ""))


# The names without the ``Error`` suffix: the same classes under a second name, so that code
# written against either catches the same exceptions (``except holdoff.GiveUp`` catches every
# ``GiveUpError``).
InvalidConfig = InvalidConfigError
InvalidInput = InvalidInputError
ClockBackwards = ClockBackwardsError
QuotaEmpty = QuotaEmptyError
UpstreamUnavailable = UpstreamUnavailableError
BreakerOpen = BreakerOpenError
GiveUp = GiveUpError
RetryLater = RetryLaterError
