"""holdoff: a circuit breaker and retry budget whose logic is one Rust core shared by every
language (Python, Node, C, Go, C#, Kotlin), proven equal by one conformance suite.

Durations are float seconds (``datetime.timedelta`` is accepted too). Time only moves through
the clock an object was built with: :class:`SystemClock` by default, :class:`ManualClock` in
tests.

>>> import holdoff
>>> clock = holdoff.ManualClock()
>>> policy = holdoff.Policy(holdoff.Breaker(clock=clock), holdoff.RetryBudget(clock=clock))
>>> @policy.retrying(sleep=clock.advance)
... def fetch() -> str:
...     return "ok"
>>> fetch()
'ok'
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Literal, TypeVar, Union

from . import _holdoff
from ._classify import classify_exception
from ._errors import (
    AttemptTimeoutError,
    BreakerOpen,
    ClockBackwards,
    ConfigTypeError,
    GiveUp,
    HoldoffError,
    InvalidConfig,
    InputTypeError,
    InvalidInput,
    PermitError,
    QuotaEmpty,
    RetryLater,
    UpstreamUnavailable,
)
from ._retrying import Attempt, Retrying, call, call_async, retrying
from ._holdoff import (
    DEFAULT_TOTAL_TIMEOUT,
    AttemptPlan,
    Backoff,
    Breaker,
    BreakerGroup,
    Call,
    Classification,
    Classifier,
    ConsecutiveFailures,
    Decision,
    Execution,
    FailureRate,
    FailuresInWindow,
    GroupSnapshot,
    ManualClock,
    Outcome,
    Permit,
    QuotaLease,
    RetryAfter,
    RetryBudget,
    RetryQuota,
    RetryState,
    Snapshot,
    StateChange,
    Stop,
    SystemClock,
    Verdict,
    Wait,
    WaitPlan,
    hint_from_headers,
    parse_retry_after,
)

__version__: str = _holdoff.__version__

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

#: A breaker's state.
State = Literal["closed", "open", "half_open", "forced_open", "disabled"]
#: What recording an outcome did.
Effect = Literal["counted", "stale", "ignored"]
#: Why a breaker changed state.
Reason = Literal[
    "tripped", "retry_later", "probe_admitted", "probe_failed", "recovered",
    "forced_open", "disabled", "reset",
]
#: Why the budget gave up.
GiveUpReason = Literal[
    "budget_spent", "retry_after_exceeds_remaining", "retry_after_above_cap",
    "backoff_exceeds_remaining", "attempts_exhausted", "not_retryable", "quota_empty",
    "breaker_open", "cancelled", "total_timeout",
]
#: A trip policy.
TripPolicy = Union[ConsecutiveFailures, FailuresInWindow, FailureRate]
#: A clock.
Clock = Union[ManualClock, SystemClock]

#: ``hint_from_headers`` under a shorter name.
hint = hint_from_headers


class Policy(_holdoff.Policy):
    """One upstream's breaker, retry budget, optional quota and HTTP classifier.

    ``before_attempt(call)`` / ``after_attempt(call, permit, outcome)`` are the two core
    operations for callers that drive each attempt; the helpers run the core's retry loop
    (:class:`Execution`):

    * ``policy.call(fn, *args, **kwargs)`` and ``await policy.call_async(fn, ...)``
    * ``@policy`` (sync or ``async def``) or ``@policy.retrying(attempt_timeout=..., ...)``
    * ``for attempt in policy.retrying(): with attempt: ...`` (and ``async for``)
    """

    def retrying(self, **options: Any) -> Retrying:
        """A :class:`Retrying` for this policy (options: ``attempt_timeout``,
        ``total_timeout``, ``sleep``, ``async_sleep``, ``before_sleep``, ``after_attempt``,
        ``classify_exception``, ``classify_result``, ``http``)."""
        return Retrying(self, **options)

    def call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Calls ``fn(*args, **kwargs)`` with the default options (``time.sleep``)."""
        return Retrying(self).call(fn, *args, **kwargs)

    async def call_async(self, fn: Callable[..., Awaitable[T]], /, *args: Any, **kwargs: Any) -> T:
        """Awaits ``fn(*args, **kwargs)`` with the default options (``asyncio.sleep``)."""
        return await Retrying(self).call_async(fn, *args, **kwargs)

    def __call__(self, fn: F) -> F:
        """Decorator: ``@policy`` retries every call of ``fn`` with the default options."""
        return Retrying(self)(fn)


#: The core's default open interval of a breaker: 30 s doubling to 300 s, no jitter.
DEFAULT_OPEN_INTERVAL = Backoff.breaker_default()
#: The core's default backoff of a retry budget's counted path: 0.5 s doubling to 60 s.
DEFAULT_BUDGET_BACKOFF = Backoff.budget_default()

__all__ = [
    "Attempt",
    "AttemptPlan",
    "AttemptTimeoutError",
    "Backoff",
    "Breaker",
    "BreakerGroup",
    "BreakerOpen",
    "Call",
    "Classification",
    "Classifier",
    "Clock",
    "ClockBackwards",
    "ConfigTypeError",
    "ConsecutiveFailures",
    "DEFAULT_BUDGET_BACKOFF",
    "DEFAULT_OPEN_INTERVAL",
    "DEFAULT_TOTAL_TIMEOUT",
    "Decision",
    "Effect",
    "Execution",
    "FailureRate",
    "FailuresInWindow",
    "GiveUp",
    "GiveUpReason",
    "GroupSnapshot",
    "HoldoffError",
    "InvalidConfig",
    "InputTypeError",
    "InvalidInput",
    "ManualClock",
    "Outcome",
    "Permit",
    "PermitError",
    "Policy",
    "QuotaEmpty",
    "QuotaLease",
    "Reason",
    "RetryAfter",
    "RetryBudget",
    "RetryLater",
    "RetryQuota",
    "RetryState",
    "Retrying",
    "Snapshot",
    "State",
    "StateChange",
    "Stop",
    "SystemClock",
    "TripPolicy",
    "UpstreamUnavailable",
    "Verdict",
    "Wait",
    "WaitPlan",
    "call",
    "call_async",
    "classify_exception",
    "hint",
    "hint_from_headers",
    "parse_retry_after",
    "retrying",
    "__version__",
]
