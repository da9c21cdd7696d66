"""Retries in traces: the helpers add span events to the caller's current span when
``opentelemetry-api`` is installed and that span is recording (docs/metrics.md).

* ``holdoff.retry``, one per wait decided before a retry: ``holdoff.attempt`` (int, the attempt
  that just ended, 1-based), ``holdoff.outcome`` (its outcome's name), ``holdoff.delay`` (float
  seconds), ``holdoff.source`` (``retry_after``, ``backoff``, ``breaker``), ``holdoff.capped``
  (bool: the budget's cap shortened the server's delay);
* ``holdoff.give_up``, when the call ends in :class:`GiveUpError` or :class:`BreakerOpenError`:
  ``holdoff.attempts`` (int) and ``holdoff.reason`` (the give-up reason).

A call whose first attempt succeeds adds nothing and looks nothing up. OpenTelemetry is looked
for once, at the first event a process could add.
"""

from __future__ import annotations

from typing import Any

from ._holdoff import Outcome, Verdict, WaitPlan

__all__ = ["give_up_event", "retry_event"]

# The opentelemetry.trace module; None until looked for, False when it is not installed.
_trace: Any = None


def _recording_span() -> Any:
    global _trace
    if _trace is None:
        try:
            from opentelemetry import trace
        except ImportError:
            _trace = False
        else:
            _trace = trace
    if _trace is False:
        return None
    span = _trace.get_current_span()
    return span if span.is_recording() else None


def retry_event(wait: WaitPlan, last: Outcome | None) -> None:
    """``holdoff.retry`` for a decided wait, after the attempt whose outcome was ``last``."""
    span = _recording_span()
    if span is not None:
        attributes: dict[str, Any] = {
            "holdoff.attempt": wait.attempts,
            "holdoff.delay": wait.delay,
            "holdoff.source": wait.source,
            "holdoff.capped": wait.capped,
        }
        if last is not None:
            attributes["holdoff.outcome"] = last.name
        span.add_event("holdoff.retry", attributes)


def give_up_event(verdict: Verdict) -> None:
    """``holdoff.give_up`` for a call that gave up (a ``give_up`` or ``breaker_open`` verdict)."""
    span = _recording_span()
    if span is not None:
        span.add_event(
            "holdoff.give_up",
            {"holdoff.attempts": verdict.attempts, "holdoff.reason": verdict.reason or ""},
        )
