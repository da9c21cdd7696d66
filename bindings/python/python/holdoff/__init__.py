"""holdoff: a circuit breaker and retry budget whose logic is one Rust core shared by every
language (Python, Node, C, Go, C#, Kotlin), proven equal by one conformance suite.

Durations are float seconds (``datetime.timedelta`` is accepted too). Time only moves through
the clock an object was built with: :class:`SystemClock` by default, :class:`ManualClock` in
tests.

Errors end in ``Error`` (``GiveUpError``, ``BreakerOpenError``, ``InvalidConfigError``, ...);
the names without the suffix (``GiveUp``, ``BreakerOpen``, ``InvalidConfig``, ...) are aliases
of the same classes, as ``Call`` is of :class:`PolicyCall`. The errors that name a field share
the base :class:`FieldError` (``field``, ``rule``).

Metrics (docs/metrics.md): :data:`METRICS` is the table (:class:`MetricDef` rows);
``breaker.metrics()``, ``policy.metrics()``, ``quota.metrics()`` and ``group.metrics()`` read an
object's series, a list of :class:`MetricReading`. :mod:`holdoff.otel` (extra ``otel``) and
:mod:`holdoff.prometheus` (extra ``prometheus``) export them.

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

from typing import Union

from . import _holdoff
from ._classify import classify_exception
from ._errors import (
    AttemptTimeoutError,
    BreakerOpen,
    BreakerOpenError,
    ClockBackwards,
    ClockBackwardsError,
    ConfigTypeError,
    FieldError,
    FleetError,
    GiveUp,
    GiveUpError,
    HoldoffError,
    InputTypeError,
    InvalidConfig,
    InvalidConfigError,
    InvalidInput,
    InvalidInputError,
    PermitError,
    QuotaEmpty,
    QuotaEmptyError,
    RetryLater,
    RetryLaterError,
    UpstreamUnavailable,
    UpstreamUnavailableError,
)
from ._fleet import FleetOptions
from ._holdoff import (
    DEFAULT_TOTAL_TIMEOUT,
    METRICS,
    AttemptPlan,
    Backoff,
    Breaker,
    BreakerGroup,
    Classification,
    Classifier,
    ConsecutiveFailures,
    Decision,
    Execution,
    FailureRate,
    FailuresInWindow,
    FleetConfig,
    FleetRecord,
    FleetSync,
    GroupSnapshot,
    ManualClock,
    MetricDef,
    MetricReading,
    Outcome,
    Permit,
    PolicyCall,
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
    memory_store_control,
    memory_store_reset,
    parse_retry_after,
)
from ._names import (
    Attempted,
    DecisionAction,
    Effect,
    FleetState,
    GiveUpReason,
    HintSource,
    OutcomeName,
    Reason,
    SimpleOutcomeName,
    State,
    StoreAction,
    Unusable,
    VerdictKind,
    WaitSource,
)
from ._policy import Policy, retrying
from ._retrying import Attempt, Retrying, call, call_async

__version__: str = _holdoff.__version__

#: A trip policy.
TripPolicy = Union[ConsecutiveFailures, FailuresInWindow, FailureRate]
#: A clock.
Clock = Union[ManualClock, SystemClock]

#: :class:`PolicyCall` under the core's own short name (``policy::Call``).
Call = PolicyCall

#: ``hint_from_headers`` under a shorter name.
hint = hint_from_headers

#: The core's default open interval of a breaker: 30 s doubling to 300 s, no jitter.
DEFAULT_OPEN_INTERVAL = Backoff.breaker_default()
#: The core's default backoff of a retry budget's counted path: 0.5 s doubling to 60 s.
DEFAULT_BUDGET_BACKOFF = Backoff.budget_default()

__all__ = [
    "DEFAULT_BUDGET_BACKOFF",
    "DEFAULT_OPEN_INTERVAL",
    "DEFAULT_TOTAL_TIMEOUT",
    "METRICS",
    "Attempt",
    "AttemptPlan",
    "AttemptTimeoutError",
    "Attempted",
    "Backoff",
    "Breaker",
    "BreakerGroup",
    "BreakerOpen",
    "BreakerOpenError",
    "Call",
    "Classification",
    "Classifier",
    "Clock",
    "ClockBackwards",
    "ClockBackwardsError",
    "ConfigTypeError",
    "ConsecutiveFailures",
    "Decision",
    "DecisionAction",
    "Effect",
    "Execution",
    "FailureRate",
    "FailuresInWindow",
    "FieldError",
    "FleetConfig",
    "FleetError",
    "FleetOptions",
    "FleetRecord",
    "FleetState",
    "FleetSync",
    "GiveUp",
    "GiveUpError",
    "GiveUpReason",
    "GroupSnapshot",
    "HintSource",
    "HoldoffError",
    "InputTypeError",
    "InvalidConfig",
    "InvalidConfigError",
    "InvalidInput",
    "InvalidInputError",
    "ManualClock",
    "MetricDef",
    "MetricReading",
    "Outcome",
    "OutcomeName",
    "Permit",
    "PermitError",
    "Policy",
    "PolicyCall",
    "QuotaEmpty",
    "QuotaEmptyError",
    "QuotaLease",
    "Reason",
    "RetryAfter",
    "RetryBudget",
    "RetryLater",
    "RetryLaterError",
    "RetryQuota",
    "RetryState",
    "Retrying",
    "SimpleOutcomeName",
    "Snapshot",
    "State",
    "StateChange",
    "Stop",
    "StoreAction",
    "SystemClock",
    "TripPolicy",
    "Unusable",
    "UpstreamUnavailable",
    "UpstreamUnavailableError",
    "Verdict",
    "VerdictKind",
    "Wait",
    "WaitPlan",
    "WaitSource",
    "__version__",
    "call",
    "call_async",
    "classify_exception",
    "hint",
    "hint_from_headers",
    "memory_store_control",
    "memory_store_reset",
    "parse_retry_after",
    "retrying",
]
