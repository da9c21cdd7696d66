"""Leak loops: objects made and dropped in a loop, memory flat (issue 8, point 4).

Each test warms up on a tenth of its loop (allocator pools, pyo3's free lists, the interpreter's
caches), takes the process's resident set size, runs the rest, collects, and measures again.

`run.sh leak` (HOLDOFF_LEAK=full) runs the full loops: a million breakers, permits, quota leases
and policy calls, and 100 000 whole policies, with RSS growth held under 8 MB, which a real
per-object leak exceeds (16 bytes kept an iteration is 14 MB over the 900 000 measured
iterations; a leaked Rust box or Python object is far more). `run.sh test` runs them at a tenth
of the size with the same bound, which still catches any leaked object (a breaker is hundreds of
bytes).
The second loop builds whole policies, each breaker with a listener that closes a reference
cycle (breaker -> callback -> breaker), freed only if the extension's `__traverse__`/`__clear__`
let the garbage collector see it.
"""

from __future__ import annotations

import gc
import os
import resource
import sys

import holdoff
from holdoff import Outcome

MB = 1 << 20
BOUND = 8 * MB
SCALE = 1.0 if os.environ.get("HOLDOFF_LEAK") == "full" else 0.1


def sizes(full: int) -> "tuple[int, int]":
    """(total, warm-up) iterations of a loop of `full` iterations at this run's scale."""
    total = int(full * SCALE)
    return total, total // 10


def rss() -> int:
    """The resident set size in bytes (Linux: /proc/self/statm; elsewhere the peak, which grows
    with a leak just the same)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024


def settled_rss() -> int:
    gc.collect()
    gc.collect()
    return rss()


def test_breakers_permits_leases_and_calls_leave_memory_flat() -> None:
    total, warmup = sizes(1_000_000)
    clock = holdoff.ManualClock()
    quota = holdoff.RetryQuota(capacity=1000)
    policy = holdoff.Policy(
        holdoff.Breaker(clock=clock),
        holdoff.RetryBudget(clock=clock, max_retries=1),
        holdoff.RetryQuota(),
    )
    outcomes = (Outcome.SUCCESS, Outcome.FAILURE, Outcome.TIMEOUT, Outcome.CANCELLED)

    def churn(start: int, stop: int) -> None:
        for i in range(start, stop):
            b = holdoff.Breaker(clock=clock)  # a breaker
            b.record(b.allow(), outcomes[i & 3])  # a permit, recorded
            quota.on_success(quota.acquire(timeout=bool(i & 1)))  # a quota lease, refunded
            # A logical call through a policy: Call, Permit, Decision; every eighth fails once
            # and retries (a lease taken inside and refunded).
            call = holdoff.Call()
            permit = policy.before_attempt(call)
            assert isinstance(permit, holdoff.Permit)
            if i & 7:
                policy.after_attempt(call, permit, Outcome.SUCCESS)
            else:
                d = policy.after_attempt(call, permit, Outcome.FAILURE)
                assert d.action == "retry"
                again = policy.before_attempt(call)
                assert isinstance(again, holdoff.Permit)
                policy.after_attempt(call, again, Outcome.SUCCESS)

    churn(0, warmup)
    before = settled_rss()
    churn(warmup, total)
    growth = settled_rss() - before
    assert growth < BOUND, f"RSS grew {growth / MB:.1f} MB over {total - warmup} iterations"
    assert quota.available == 1000
    assert policy.breaker.snapshot().state == "closed"


def test_whole_policies_leave_memory_flat() -> None:
    """Whole policies (breaker with a listener cycle, budget, quota, classifier, an HTTP
    decision, events): bigger objects, fewer of them; leaking any one of them keeps hundreds of
    bytes an iteration."""
    total, warmup = sizes(100_000)
    clock = holdoff.ManualClock(wall_origin=1_700_000_000)

    def churn(n: int) -> None:
        for _ in range(n):
            breaker = holdoff.Breaker(trip=holdoff.ConsecutiveFailures(1), clock=clock)
            # A listener that closes a reference cycle (breaker -> callback -> breaker): freed
            # only if the extension lets the garbage collector traverse and clear it.
            breaker.on_state_change(lambda e, b=breaker: b.snapshot())
            policy = holdoff.Policy(
                breaker, holdoff.RetryBudget(clock=clock), holdoff.RetryQuota(),
                holdoff.Classifier(),
            )
            call = holdoff.Call()
            permit = policy.before_attempt(call)
            assert isinstance(permit, holdoff.Permit)
            decision, _ = policy.after_response(call, permit, 503, {"Retry-After": "2"})
            assert decision.action == "retry"
            assert breaker.drain_events()[0].reason == "retry_later"
            assert policy.quota is not None and policy.quota.available == 495

    churn(warmup)
    before = settled_rss()
    churn(total - warmup)
    growth = settled_rss() - before
    assert growth < BOUND, f"RSS grew {growth / MB:.1f} MB over {total - warmup} policies"
