"""Leak loops: objects made and dropped in a loop, memory flat.

Each test warms up on a tenth of its loop (allocator pools, pyo3's free lists, the interpreter's
caches), measures, runs the rest (the measured iterations, n), collects, and measures again.
`run.sh test` runs the loops at a tenth of their full size (n = 90 000 for the calls loop, 9 000
for the policies loop, 45 000 for the helpers loop, 4 500 for the fleet loop); `run.sh leak`
(HOLDOFF_LEAK=full) at full size (900 000, 90 000, 450 000 and 45 000).

Three measures, each allowed to grow by a small fixed floor (allocator noise) plus a per-iteration
allowance, so that the bound scales with n and a leak of one object an iteration fails at both
sizes (the noise measured here without a leak, at either size: a few dozen blocks, under 1 KiB of
native heap, under 64 KiB of RSS):

* Python objects: `sys.getallocatedblocks()`, the blocks in use in Python's object allocator,
  where every object up to 512 bytes lives (a breaker, a permit, a lease, a call, a decision,
  a lambda; bigger ones go to malloc, below). Bound: 1 000 blocks + one block per 100
  iterations. One leaked object an iteration is n blocks; a leak on only the retry path (every
  eighth call) is n / 8, still well over.
* Native heap (glibc only, through `mallinfo2`): the bytes in malloc chunks in use, where the
  Rust core's boxes and pyo3's larger objects live. Bound: 64 KiB + 16 bytes an iteration;
  the smallest malloc chunk is 32 bytes, so one leaked Rust allocation an iteration fails at
  both sizes.
* Resident set size, the coarse net for memory neither counter sees. Bound: 1 MiB + 16 bytes an
  iteration: it catches 32 bytes an iteration in the calls loop at both sizes (2.7 MiB against a
  bound of 2.4 MiB at n = 90 000), but in the policies loop at test size only about 130 bytes
  an iteration (the floor over n = 9 000), at full size 28 bytes; the two counters above carry
  the small-object cases there.

The second loop builds whole policies, each breaker with a listener that closes a reference
cycle (breaker -> callback -> breaker), freed only if the extension's `__traverse__`/`__clear__`
let the garbage collector see it.
"""

from __future__ import annotations

import ctypes
import gc
import os
import resource
import sys
from typing import Callable, NamedTuple

import holdoff
from holdoff import Outcome

KB = 1 << 10
MB = 1 << 20
SCALE = 1.0 if os.environ.get("HOLDOFF_LEAK") == "full" else 0.1


class Bound(NamedTuple):
    """Allowed growth over a loop: a fixed floor for noise plus a per-iteration allowance."""

    floor: float
    per_iteration: float

    def at(self, iterations: int) -> float:
        return self.floor + self.per_iteration * iterations


# Each per-iteration allowance is below the smallest object a loop iteration makes (a Python
# object is at least 16 bytes and one block; a malloc chunk at least 32 bytes).
BLOCKS = Bound(floor=1000, per_iteration=0.01)
NATIVE = Bound(floor=64 * KB, per_iteration=16)
RSS = Bound(floor=1 * MB, per_iteration=16)


def sizes(full: int) -> tuple[int, int]:
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


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _mallinfo2() -> Callable[[], _MallInfo2] | None:
    try:
        f = ctypes.CDLL(None).mallinfo2  # glibc >= 2.33
    except (AttributeError, OSError):
        return None
    f.restype = _MallInfo2
    f.argtypes = []
    return f


MALLINFO2 = _mallinfo2()


def native_heap() -> int | None:
    """Bytes in use in malloc's heap (all arenas, mmapped chunks included); None off glibc."""
    if MALLINFO2 is None:
        return None
    m = MALLINFO2()
    return int(m.uordblks + m.hblkhd)


class Usage(NamedTuple):
    rss: int
    blocks: int
    native: int | None


def settled() -> Usage:
    gc.collect()
    gc.collect()
    return Usage(rss(), sys.getallocatedblocks(), native_heap())


def assert_flat(before: Usage, after: Usage, n: int, what: str) -> None:
    """Each measure's growth over `n` measured iterations stays under its bound."""
    grew = f"over {n} {what}"
    blocks = after.blocks - before.blocks
    assert blocks < BLOCKS.at(n), (
        f"{blocks} more Python object blocks in use {grew} (bound {BLOCKS.at(n):.0f})"
    )
    if before.native is not None and after.native is not None:
        native = after.native - before.native
        assert native < NATIVE.at(n), (
            f"native heap grew {native / KB:.0f} KiB {grew} (bound {NATIVE.at(n) / KB:.0f} KiB)"
        )
    growth = after.rss - before.rss
    assert growth < RSS.at(n), (
        f"RSS grew {growth / KB:.0f} KiB {grew} (bound {RSS.at(n) / KB:.0f} KiB)"
    )


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
            # A logical call through a policy: PolicyCall, Permit, Decision; every eighth fails once
            # and retries (a lease taken inside and refunded).
            call = holdoff.PolicyCall()
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
    before = settled()
    churn(warmup, total)
    assert_flat(before, settled(), total - warmup, "iterations")
    assert quota.available == 1000
    assert policy.breaker.snapshot().state == "closed"


def test_whole_policies_leave_memory_flat() -> None:
    """Whole policies (breaker with a listener cycle, budget, quota, classifier, an HTTP
    decision, events): bigger objects, fewer of them. The smallest made an iteration (a permit,
    48 bytes) is a block an iteration if leaked: the block count catches it at both sizes."""
    total, warmup = sizes(100_000)
    clock = holdoff.ManualClock(wall_origin=1_700_000_000)

    def churn(n: int) -> None:
        for _ in range(n):
            breaker = holdoff.Breaker(trip=holdoff.ConsecutiveFailures(1), clock=clock)
            # A listener that closes a reference cycle (breaker -> callback -> breaker): freed
            # only if the extension lets the garbage collector traverse and clear it.
            breaker.on_state_change(lambda e, b=breaker: b.snapshot())
            policy = holdoff.Policy(
                breaker,
                holdoff.RetryBudget(clock=clock),
                holdoff.RetryQuota(),
                holdoff.Classifier(),
            )
            call = holdoff.PolicyCall()
            permit = policy.before_attempt(call)
            assert isinstance(permit, holdoff.Permit)
            decision, _ = policy.after_response(call, permit, 503, {"Retry-After": "2"})
            assert decision.action == "retry"
            assert breaker.drain_events()[0].reason == "retry_later"
            assert policy.quota is not None and policy.quota.available == 495

    churn(warmup)
    before = settled()
    churn(total - warmup)
    assert_flat(before, settled(), total - warmup, "policies")


def test_helper_calls_leave_memory_flat() -> None:
    """Calls through the retry helpers (an Execution, its plans and verdict, an Attempt, the
    generator of the loop): every eighth fails once and retries; every sixteenth leaves its
    loop mid-attempt (the execution is dropped holding the permit, which it records as
    cancelled)."""
    total, warmup = sizes(500_000)
    clock = holdoff.ManualClock()
    policy = holdoff.Policy(
        holdoff.Breaker(clock=clock), holdoff.RetryBudget(clock=clock), holdoff.RetryQuota()
    )
    retrying = policy.retrying(sleep=clock.advance)
    failing = [False]

    def flaky(i: int) -> int:
        if failing[0]:
            failing[0] = False
            raise ConnectionError("down")
        return i

    def churn(start: int, stop: int) -> None:
        for i in range(start, stop):
            if i & 15 == 1:
                for _ in retrying:
                    break
            else:
                failing[0] = i & 7 == 0
                assert retrying.call(flaky, i) == i

    churn(0, warmup)
    before = settled()
    churn(warmup, total)
    assert_flat(before, settled(), total - warmup, "helper calls")
    assert policy.breaker.snapshot().probes_in_flight == 0


def test_fleet_breakers_leave_memory_flat() -> None:
    """Breakers attached to an in-memory fleet: each trips (an op for the store), syncs (the
    record, the report) and is closed, or only dropped (its fleet closed when it is freed)."""
    total, warmup = sizes(50_000)
    clock = holdoff.ManualClock()
    holdoff.memory_store_reset("python-leak")
    fleet: holdoff.FleetOptions = {"url": "memory://python-leak", "key": "upstream"}

    def churn(start: int, stop: int) -> None:
        for i in range(start, stop):
            b = holdoff.Breaker(trip=holdoff.ConsecutiveFailures(1), clock=clock, fleet=fleet)
            b.record(b.allow(), Outcome.FAILURE)
            r = b.sync_fleet()
            assert r.ok and r.record is not None and r.record.state == "open"
            if i & 1:
                b.close()

    churn(0, warmup)
    before = settled()
    churn(warmup, total)
    assert_flat(before, settled(), total - warmup, "fleet breakers")
