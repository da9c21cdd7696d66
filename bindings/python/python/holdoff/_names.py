"""The core's stable names as ``Literal`` types: what a state, an effect, a reason, an outcome,
a give-up reason, a wait's source or a verdict can be called. They are strings at run time;
the stubs of the extension (``_holdoff.pyi``), the errors and the helpers all read them from
here, so a type checker knows every value.
"""

from __future__ import annotations

from typing import Literal

__all__ = [
    "Attempted",
    "DecisionAction",
    "Effect",
    "FleetState",
    "GiveUpReason",
    "HintSource",
    "OutcomeName",
    "Reason",
    "SimpleOutcomeName",
    "State",
    "StoreAction",
    "Unusable",
    "VerdictKind",
    "WaitSource",
]

#: A fleet's shared state (``FleetRecord.state``).
FleetState = Literal["closed", "open"]
#: What ``memory_store_control`` does to an in-memory fleet store.
StoreAction = Literal["down", "up", "flush"]
#: A breaker's state.
State = Literal["closed", "open", "half_open", "forced_open", "disabled"]
#: What recording an outcome did: counted, stale (an answer from another episode), ignored.
Effect = Literal["counted", "stale", "ignored"]
#: Why a breaker changed state.
Reason = Literal[
    "tripped",
    "retry_later",
    "probe_admitted",
    "probe_failed",
    "recovered",
    "forced_open",
    "disabled",
    "reset",
    "fleet_opened",
]
#: An outcome's name (``Outcome.name``); ``retry_later`` carries a delay, so only
#: ``Outcome.retry_later(delay)`` makes one.
OutcomeName = Literal["success", "answer", "failure", "timeout", "retry_later", "cancelled"]
#: The outcome names that need no delay: accepted wherever an ``Outcome`` is.
SimpleOutcomeName = Literal["success", "answer", "failure", "timeout", "cancelled"]
#: Why a budget, a policy or a helper gave up.
GiveUpReason = Literal[
    "budget_spent",
    "retry_after_exceeds_remaining",
    "retry_after_above_cap",
    "backoff_exceeds_remaining",
    "attempts_exhausted",
    "not_retryable",
    "quota_empty",
    "breaker_open",
    "cancelled",
    "total_timeout",
]
#: What a budget decided (``Decision.action``).
DecisionAction = Literal["done", "retry", "give_up"]
#: Where a wait's delay came from.
WaitSource = Literal["retry_after", "backoff", "breaker"]
#: Why a provider's delay header could not be used.
Unusable = Literal["missing", "malformed", "signed", "conflicting"]
#: Which header gave the provider's delay (``"none"``: no such header).
HintSource = Literal[
    "retry_after_ms",
    "x_ms_retry_after_ms",
    "retry_after",
    "ratelimit",
    "ratelimit_reset",
    "x_ratelimit_reset",
    "none",
]
#: How one call through the retry loop ended (``Verdict.kind``).
VerdictKind = Literal["return", "rethrow", "breaker_open", "give_up", "cancelled", "invalid_input"]
#: What an attempt came to, as told to ``Execution.complete``.
Attempted = Literal["returned", "raised", "cancelled", "bug"]
