"""Stress: several threads share ONE breaker, ONE retry quota and ONE policy against a scripted
flaky upstream, and the books must balance exactly at the end.

Time moves only through the ManualClock: the workers run in rounds separated by a barrier whose
action (run by one thread while the others wait) advances the clock. What each thread does is a
pure function of (thread, round, call); only the interleaving is left to the scheduler, and the
switch interval is cut to a few microseconds so that threads really interleave between the
native calls. Every counter is kept on the test side and compared with what the breaker exposes
(snapshot metrics, the drained event queue and the state-change listener), so a lost update on
either side shows up as a mismatch, not as a flaky timing.

No deadlock can pass silently: every barrier wait and every join has a timeout that fails the
test, and a faulthandler watchdog kills the process (failing the run) if a thread hangs inside
native code while holding the GIL, where a join timeout could never fire.
"""

from __future__ import annotations

import collections
import faulthandler
import sys
import threading
import time
from collections.abc import Iterator
from typing import Callable

import pytest

import holdoff
from holdoff import Outcome

THREADS = 6
ROUNDS = 60
CALLS = 40  # per thread per round: 6 * 60 * 40 = 14 400 admissions asked for
STEP = 0.1  # seconds the clock moves between rounds
JOIN_TIMEOUT = 30.0  # seconds for the whole run; far above the ~2 s it takes
WATCHDOG = 90.0  # seconds before faulthandler kills a hung process

EventKey = tuple[float, str, str, int, str]


def upstream(tid: int, rnd: int, i: int) -> Outcome:
    """The scripted flaky upstream: mostly up, down for three rounds out of ten (the breaker
    trips), with failures, timeouts, cancellations and rate limits sprinkled deterministically."""
    n = tid * 1009 + rnd * 131 + i
    if rnd % 12 in (3, 4) and n % 5 != 0:
        return Outcome.TIMEOUT if n % 3 == 0 else Outcome.FAILURE
    if n % 997 == 0:
        return Outcome.retry_later(0.15)
    if n % 11 == 0:
        return Outcome.CANCELLED
    if n % 13 == 0:
        return Outcome.TIMEOUT
    if n % 7 == 0:
        return Outcome.FAILURE
    return Outcome.SUCCESS


@pytest.fixture
def contended() -> Iterator[None]:
    """Threads switch every few microseconds, and a hang kills the process instead of the CI job
    timing out."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(5e-6)
    faulthandler.dump_traceback_later(WATCHDOG, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
        sys.setswitchinterval(old)


class Tally:
    """Counters merged from every thread under one lock (each thread keeps its own and adds them
    once at the end, so the hot loop takes no test-side lock)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.c: collections.Counter[str] = collections.Counter()
        self.errors: list[BaseException] = []

    def add(self, c: collections.Counter[str]) -> None:
        with self.lock:
            self.c.update(c)

    def fail(self, e: BaseException) -> None:
        with self.lock:
            self.errors.append(e)


def run_threads(
    target: Callable[[int], None], tally: Tally, barrier: threading.Barrier | None = None
) -> None:
    def guarded(tid: int) -> None:
        try:
            target(tid)
        except BaseException as e:
            tally.fail(e)
            if barrier is not None:
                barrier.abort()  # the others fail at once instead of waiting out the timeout

    threads = [
        threading.Thread(target=guarded, args=(t,), name=f"stress-{t}", daemon=True)
        for t in range(THREADS)
    ]
    for t in threads:
        t.start()
    deadline = time.monotonic() + JOIN_TIMEOUT
    for t in threads:
        t.join(timeout=max(0.0, deadline - time.monotonic()))
        # A timeout is a failure, never a wait: a thread still alive here is deadlocked.
        assert not t.is_alive(), f"{t.name} did not finish within {JOIN_TIMEOUT} s: deadlock?"
    assert tally.errors == [], f"unexpected exceptions: {tally.errors!r}"


def key(e: holdoff.StateChange) -> EventKey:
    return (e.at, e.from_state, e.to_state, e.episode, e.reason)


def check_chain(events: list[holdoff.StateChange]) -> None:
    """The drained queue is filled under the breaker's lock: consecutive changes must connect."""
    state = "closed"
    for e in events:
        assert e.from_state == state, f"lost state change before {e!r}"
        state = e.to_state


def test_threads_share_one_breaker_and_one_quota(contended: None) -> None:
    clock = holdoff.ManualClock()
    breaker = holdoff.Breaker(
        trip=holdoff.ConsecutiveFailures(6),
        open_interval=holdoff.Backoff(0.1, 2.0, max=0.4),
        recoveries=2,
        max_probes_in_flight=2,
        probe_timeout=0.25,
        clock=clock,
    )
    capacity = 60
    quota = holdoff.RetryQuota(capacity=capacity, retry_cost=5, timeout_cost=10, success_refill=0)
    tally = Tally()

    # The listener runs in whichever thread caused the change, outside the breaker's lock, and
    # re-enters the breaker: a snapshot on every change, and on an opening one extra admission
    # that it records as cancelled (or a refusal, which must be counted like any other).
    heard: list[EventKey] = []

    def listener(e: holdoff.StateChange) -> None:
        try:
            heard_one(e)
        except BaseException as err:
            tally.fail(err)

    def heard_one(e: holdoff.StateChange) -> None:
        heard.append(key(e))
        snap = breaker.snapshot()
        assert snap.state in ("closed", "open", "half_open")
        assert snap.episode >= e.episode
        if e.from_state == "closed":  # an opening (tripped, or a rate limit)
            c: collections.Counter[str] = collections.Counter(attempts=1, listener=1)
            try:
                p = breaker.allow()
            except holdoff.BreakerOpenError:
                c["refused"] += 1
            else:
                c["admitted"] += 1
                c["probes"] += p.probe
                c["cancelled"] += 1
                c[breaker.record(p, Outcome.CANCELLED)] += 1
            tally.add(c)

    breaker.on_state_change(listener)

    drained: list[holdoff.StateChange] = []

    def between_rounds() -> None:
        # Runs in one thread while every other thread waits at the barrier.
        drained.extend(breaker.drain_events())
        clock.advance(STEP)

    barrier = threading.Barrier(THREADS, action=between_rounds, timeout=JOIN_TIMEOUT)

    def worker(tid: int) -> None:
        c: collections.Counter[str] = collections.Counter()
        held: list[tuple[holdoff.Permit, Outcome]] = []
        leases: list[holdoff.QuotaLease] = []
        seq = 0  # this thread's records so far: picks the deliberate misuses

        def record(permit: holdoff.Permit, outcome: Outcome) -> None:
            nonlocal seq
            seq += 1
            i = seq
            effect = breaker.record(permit, outcome)
            c[effect] += 1
            if outcome == Outcome.CANCELLED:
                c["cancelled"] += 1
            if i % 97 == 0:
                # A second record is refused with the documented error and changes nothing.
                with pytest.raises(holdoff.PermitError) as err:
                    breaker.record(permit, Outcome.SUCCESS)
                assert err.value.code == "permit_already_recorded"
                c["double_record"] += 1
            quota_step(outcome, i)

        def quota_step(outcome: Outcome, i: int) -> None:
            if outcome in (Outcome.FAILURE, Outcome.TIMEOUT):
                timeout = outcome == Outcome.TIMEOUT
                try:
                    lease = quota.acquire(timeout=timeout)
                except holdoff.QuotaEmptyError as e:
                    c["quota_empty"] += 1
                    assert 0 <= e.available < e.cost == (10 if timeout else 5)
                else:
                    c["spent"] += lease.cost
                    leases.append(lease)
            elif outcome == Outcome.SUCCESS:
                # Two successes in three pay back a lease: leases pile up and the bucket empties.
                if leases and i % 3:
                    lease = leases.pop(0)
                    quota.on_success(lease)
                    c["refunded"] += lease.cost
                    if i % 5 == 0:
                        with pytest.raises(holdoff.PermitError) as err:
                            quota.on_success(lease)
                        assert err.value.code == "permit_already_recorded"
                        c["double_refund"] += 1
                else:
                    quota.on_success()
            available = quota.available
            assert 0 <= available <= capacity

        for rnd in range(ROUNDS):
            # Permits held over from the last round are answered after the clock moved: late
            # answers, lost probes, answers from an earlier episode.
            for permit, outcome in held:
                record(permit, outcome)
            held = []
            for i in range(CALLS):
                c["attempts"] += 1
                try:
                    permit = breaker.allow()
                except holdoff.BreakerOpenError as e:
                    c["refused"] += 1
                    assert e.state in ("open", "half_open")
                    assert e.retry_after is not None and e.retry_after >= 0
                    continue
                c["admitted"] += 1
                c["probes"] += permit.probe
                outcome = upstream(tid, rnd, i)
                if i % 17 == 0:
                    held.append((permit, outcome))
                else:
                    record(permit, outcome)
            barrier.wait()
        for permit, outcome in held:
            record(permit, outcome)
        # Whatever the thread still owes the quota stays spent: a lease is a promise, not a debt.
        tally.add(c)

    run_threads(worker, tally, barrier)
    breaker.on_state_change(None)
    drained.extend(breaker.drain_events())
    t = tally.c
    snap = breaker.snapshot()

    # Every admission was answered exactly once: admitted = recorded (counted + stale) + cancelled.
    assert t["admitted"] == t["counted"] + t["stale"] + t["ignored"]
    assert t["ignored"] == t["cancelled"]
    assert t["attempts"] == t["admitted"] + t["refused"]
    assert t["attempts"] == THREADS * ROUNDS * CALLS + t["listener"]
    # ... and the breaker saw the same thing.
    assert snap.refusals == t["refused"]
    assert snap.probes == t["probes"]
    assert snap.stale_answers == t["stale"]
    assert snap.probes_in_flight == 0
    assert snap.events_dropped == 0
    # Every state change reached both the queue and the listener, and they chain.
    check_chain(drained)
    assert collections.Counter(map(key, drained)) == collections.Counter(heard)
    openings = [e for e in drained if e.from_state == "closed" and e.to_state == "open"]
    assert snap.opens == len(openings)
    assert snap.closes == sum(1 for e in drained if e.reason == "recovered")
    assert snap.state == (drained[-1].to_state if drained else "closed")
    # The run really exercised the paths it claims to.
    assert snap.opens >= 2 and snap.closes >= 1, snap
    assert t["refused"] > 100 and t["probes"] > 5 and t["stale"] > 0 and t["listener"] >= 1, t
    assert t["double_record"] > 0 and t["quota_empty"] > 0 and t["double_refund"] > 0, t

    # The quota balances to the token: full, minus what was spent, plus what was refunded.
    assert quota.available == capacity - t["spent"] + t["refunded"]
    assert t["spent"] > capacity and t["refunded"] > 0, t


def test_threads_share_one_policy(contended: None) -> None:
    """Logical calls through one shared Policy (breaker + budget + quota): each thread drives its
    calls one step per turn, and a call that must wait (Wait, or a Retry's delay) resumes in a
    later round, once the coordinator has moved the clock."""
    clock = holdoff.ManualClock()
    breaker = holdoff.Breaker(
        trip=holdoff.ConsecutiveFailures(4),
        open_interval=holdoff.Backoff.constant(0.2),
        recoveries=1,
        max_probes_in_flight=2,
        clock=clock,
    )
    budget = holdoff.RetryBudget(
        max_retries=3,
        backoff=holdoff.Backoff(0.05, 2.0, max=0.2),
        max_backoff_duration=2.0,
        clock=clock,
    )
    capacity = 80
    retry_cost, timeout_cost = 5, 10
    quota = holdoff.RetryQuota(
        capacity=capacity,
        retry_cost=retry_cost,
        timeout_cost=timeout_cost,
        success_refill=0,
    )
    policy = holdoff.Policy(breaker, budget, quota)
    tally = Tally()
    heard: list[EventKey] = []

    def listener(e: holdoff.StateChange) -> None:
        heard.append(key(e))
        # Re-entry from the callback: reads only, so the books below stay exact. (A failed
        # assertion here would only reach sys.unraisablehook: it is collected instead.)
        try:
            assert policy.breaker.snapshot().episode >= e.episode
        except BaseException as err:
            tally.fail(err)

    breaker.on_state_change(listener)

    def between_rounds() -> None:
        clock.advance(STEP)

    barrier = threading.Barrier(THREADS, action=between_rounds, timeout=JOIN_TIMEOUT)

    def worker(tid: int) -> None:
        c: collections.Counter[str] = collections.Counter()
        # Calls due now and calls parked until the clock moves (a Wait, or a Retry's delay);
        # per call, the permits it was given and the cost of its last lease (the one a success
        # refunds; a call that gives up keeps its tokens spent).
        ready: list[tuple[holdoff.PolicyCall, list[int]]] = []
        parked: list[tuple[holdoff.PolicyCall, list[int]]] = []

        def finish(call: holdoff.PolicyCall, books: list[int]) -> None:
            assert call.attempts == books[0]  # a call's attempts are exactly its permits
            c["finished"] += 1

        for rnd in range(ROUNDS):
            for i in range(CALLS // 2):
                if not ready:
                    ready.append((holdoff.PolicyCall(), [0, 0]))
                    c["calls"] += 1
                call, books = ready.pop(0)
                c["before"] += 1
                step = policy.before_attempt(call)
                if isinstance(step, holdoff.Wait):
                    c["refused"] += 1
                    c["waits"] += 1
                    assert step.delay >= 0
                    parked.append((call, books))
                    continue
                if isinstance(step, holdoff.Stop):
                    c["refused"] += 1
                    c["stopped"] += 1
                    assert step.reason == "breaker_open"
                    finish(call, books)
                    continue
                c["admitted"] += 1
                books[0] += 1
                outcome = upstream(tid, rnd, i)
                d = policy.after_attempt(call, step, outcome)
                assert step.recorded
                if d.action == "retry":
                    books[1] = timeout_cost if outcome == Outcome.TIMEOUT else retry_cost
                    c["spent"] += books[1]
                    assert d.delay is not None and d.delay >= 0
                    parked.append((call, books))
                elif d.action == "done":
                    c["done"] += 1
                    c["refunded"] += books[1]
                    finish(call, books)
                else:
                    c["gave_up." + str(d.reason)] += 1
                    finish(call, books)
                available = quota.available
                assert 0 <= available <= capacity
            barrier.wait()
            ready.extend(parked)
            parked = []
        for call, books in ready + parked:
            finish(call, books)
        tally.add(c)

    run_threads(worker, tally, barrier)
    breaker.on_state_change(None)
    t = tally.c
    snap = breaker.snapshot()
    assert t["finished"] == t["calls"]
    assert t["before"] == t["admitted"] + t["refused"]
    assert snap.refusals == t["refused"]
    assert snap.probes_in_flight == 0
    events = breaker.drain_events()
    assert snap.events_dropped == 0
    check_chain(events)
    assert collections.Counter(map(key, events)) == collections.Counter(heard)
    assert snap.opens == sum(1 for e in events if e.from_state == "closed" and e.to_state == "open")
    assert quota.available == capacity - t["spent"] + t["refunded"]
    # The paths this claims to cover were taken.
    assert snap.opens >= 2 and t["waits"] > 0 and t["stopped"] > 0 and t["done"] > 100, t
    assert t["spent"] > capacity and t["refunded"] > 0 and t["gave_up.quota_empty"] > 0, t


def test_threads_share_one_group() -> None:
    """Concurrent first use of one key yields one breaker, the same object for every thread."""
    group = holdoff.BreakerGroup(clock=holdoff.ManualClock())
    seen: list[list[holdoff.Breaker | None]] = [[] for _ in range(THREADS)]
    tally = Tally()
    start = threading.Barrier(THREADS, timeout=JOIN_TIMEOUT)

    def worker(tid: int) -> None:
        start.wait()
        for k in range(200):
            b = group.get(f"host-{k}")
            b.record(b.allow(), Outcome.SUCCESS)
            seen[tid].append(b)

    run_threads(worker, tally)
    assert len(group) == 200
    for k in range(200):
        assert len({id(s[k]) for s in seen}) == 1
        assert group.peek(f"host-{k}") is seen[0][k]


def test_shared_between_threads() -> None:
    clock = holdoff.ManualClock()
    b = holdoff.Breaker(trip=holdoff.ConsecutiveFailures(10**6), clock=clock)
    q = holdoff.RetryQuota(capacity=10**6, retry_cost=1)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for i in range(2000):
                b.record(b.allow(), Outcome.FAILURE if i % 2 else Outcome.SUCCESS)
                q.acquire()
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert q.available == 10**6 - 8000
    assert b.state == "closed"
