"""Hot-path benchmarks: holdoff next to pybreaker, tenacity, purgatory and aiobreaker, in one run
(pytest-benchmark).

Each benchmarked function runs a batch of operations in a plain loop, sized to about 40 ms, so
that pytest-benchmark's own per-call overhead is spread over the batch; `report.py` divides by
`extra_info["ops"]`. Tests that carry `extra_info["op"]` are also records of the cross-language
benchmark (`records.py` turns them into JSON lines: subject, op id, one ns/op per round).
Run with `bench/python/run.sh` (release build, its own venv).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Callable, Optional

import aiobreaker
import pybreaker
import purgatory
import pytest
import tenacity
from purgatory.domain.model import OpenedState

import holdoff

ROUNDS = 7
TARGET_S = 0.04

Batch = Callable[[int], None]


def batch_size(batch: Batch) -> int:
    """Calibrates (and warms up): the batch size that takes about TARGET_S."""
    n = 100
    while True:
        t0 = time.perf_counter()
        batch(n)
        dt = time.perf_counter() - t0
        if dt > TARGET_S / 8:
            return max(1, int(n * TARGET_S / dt))
        n *= 4


def bench(
    benchmark: Any,
    batch: Batch,
    group: str,
    subject: Optional[str] = None,
    op: Optional[str] = None,
    note: str = "",
) -> None:
    n = batch_size(batch)
    benchmark.group = group
    benchmark.extra_info.update(ops=n, subject=subject, op=op, note=note)
    benchmark.pedantic(batch, args=(n,), rounds=ROUNDS, iterations=1, warmup_rounds=1)


def two_threads(batch: Batch) -> Batch:
    """Both threads run the whole batch on one shared object: a round's wall time divided by
    the batch size is the wall ns per operation per thread."""

    def run(n: int) -> None:
        start = threading.Barrier(2)

        def worker() -> None:
            start.wait()
            batch(n)

        t = threading.Thread(target=worker)
        t.start()
        start.wait()
        batch(n)
        t.join()

    return run


TWO = "; 2 threads sharing one breaker (GIL), wall ns / ops per thread"


def noop() -> None:
    return None


class Boom(Exception):
    pass


# -- allow + record while closed ----------------------------------------------------------------


def holdoff_allow_record() -> Batch:
    b = holdoff.Breaker()
    allow, record, ok = b.allow, b.record, holdoff.Outcome.SUCCESS

    def run(n: int) -> None:
        for _ in range(n):
            record(allow(), ok)

    return run


def pybreaker_calling() -> Batch:
    cb = pybreaker.CircuitBreaker(fail_max=5, reset_timeout=30)

    def run(n: int) -> None:
        for _ in range(n):
            with cb.calling():
                pass

    return run


def purgatory_context() -> Batch:
    factory = purgatory.SyncCircuitBreakerFactory(default_threshold=5, default_ttl=30)

    def run(n: int) -> None:
        for _ in range(n):
            with factory.get_breaker("bench"):
                pass

    return run


def test_holdoff_allow_record(benchmark: Any) -> None:
    bench(benchmark, holdoff_allow_record(), "allow+record (closed)", "holdoff", "allow_record",
          "b.record(b.allow(), Outcome.SUCCESS), closed, defaults")


def test_pybreaker_calling(benchmark: Any) -> None:
    bench(benchmark, pybreaker_calling(), "allow+record (closed)", "pybreaker", "allow_record",
          "with cb.calling(): pass (fail_max=5)")


def test_purgatory_context(benchmark: Any) -> None:
    bench(benchmark, purgatory_context(), "allow+record (closed)", "purgatory", "allow_record",
          "with factory.get_breaker('bench'): pass (SyncCircuitBreakerFactory, in-memory)")


def test_holdoff_allow_record_2t(benchmark: Any) -> None:
    bench(benchmark, two_threads(holdoff_allow_record()), "allow+record, 2 threads", "holdoff",
          "allow_record_2t", "b.record(b.allow(), Outcome.SUCCESS)" + TWO)


def test_pybreaker_calling_2t(benchmark: Any) -> None:
    bench(benchmark, two_threads(pybreaker_calling()), "allow+record, 2 threads", "pybreaker",
          "allow_record_2t", "with cb.calling(): pass" + TWO)


def test_purgatory_context_2t(benchmark: Any) -> None:
    bench(benchmark, two_threads(purgatory_context()), "allow+record, 2 threads", "purgatory",
          "allow_record_2t", "with factory.get_breaker('bench'): pass" + TWO)


def test_pybreaker_call(benchmark: Any) -> None:
    # pybreaker's protected call, for the README's allow+record rows.
    cb = pybreaker.CircuitBreaker(fail_max=5, reset_timeout=30)
    call = cb.call

    def run(n: int) -> None:
        for _ in range(n):
            call(noop)

    bench(benchmark, run, "allow+record (closed)")


def test_two_native_calls(benchmark: Any) -> None:
    # The floor any binding pays for two calls into an extension: two trivial getters.
    q = holdoff.RetryQuota()

    def run(n: int) -> None:
        for _ in range(n):
            q.available
            q.available

    bench(benchmark, run, "allow+record (closed)")


def test_floor_noop_crossing(benchmark: Any) -> None:
    # The floor of every holdoff operation: one method call into the extension that does
    # nothing (close() of a breaker without a fleet), the crossing allow() and record() pay.
    close = holdoff.Breaker().close

    def run(n: int) -> None:
        for _ in range(n):
            close()

    bench(benchmark, run, "allow+record (closed)", "floor", "noop_crossing",
          "b.close() on a breaker without a fleet: one no-op method call into the extension")


def test_empty_loop(benchmark: Any) -> None:
    def run(n: int) -> None:
        for _ in range(n):
            pass

    bench(benchmark, run, "allow+record (closed)")


# -- refusal while open ---------------------------------------------------------------------------


def test_holdoff_refuse_open(benchmark: Any) -> None:
    b = holdoff.Breaker()
    b.force_open()
    allow, refused = b.allow, holdoff.BreakerOpen

    def run(n: int) -> None:
        for _ in range(n):
            try:
                allow()
            except refused:
                pass

    bench(benchmark, run, "refusal (open)", "holdoff", "refuse_open",
          "b.allow() raising BreakerOpen, caught (forced open)")


def test_pybreaker_refuse_open(benchmark: Any) -> None:
    cb = pybreaker.CircuitBreaker(fail_max=5, reset_timeout=3600)
    cb.open()
    call, refused = cb.call, pybreaker.CircuitBreakerError

    def run(n: int) -> None:
        for _ in range(n):
            try:
                call(noop)
            except refused:
                pass

    bench(benchmark, run, "refusal (open)", "pybreaker", "refuse_open",
          "cb.call(noop) raising CircuitBreakerError, caught (cb.open())")


def test_purgatory_refuse_open(benchmark: Any) -> None:
    factory = purgatory.SyncCircuitBreakerFactory(default_threshold=5, default_ttl=3600)
    for _ in range(5):
        try:
            with factory.get_breaker("bench"):
                raise Boom()
        except Boom:
            pass

    def run(n: int) -> None:
        for _ in range(n):
            try:
                with factory.get_breaker("bench"):
                    raise AssertionError("admitted")
            except OpenedState:
                pass

    bench(benchmark, run, "refusal (open)", "purgatory", "refuse_open",
          "with factory.get_breaker('bench') raising OpenedState, caught (5 failures)")


def test_aiobreaker_refuse_open(benchmark: Any) -> None:
    cb = aiobreaker.CircuitBreaker(fail_max=5)
    cb.open()
    refused = aiobreaker.CircuitBreakerError

    async def coro() -> None:
        return None

    async def many(n: int) -> None:
        for _ in range(n):
            try:
                await cb.call_async(coro)
            except refused:
                pass

    loop = asyncio.new_event_loop()
    try:
        bench(benchmark, lambda n: loop.run_until_complete(many(n)), "refusal (open)", "aiobreaker",
              "refuse_open", "await cb.call_async(coro) raising CircuitBreakerError, caught, in one asyncio loop")
    finally:
        loop.close()


# -- a retry-budget decision for a 429 with Retry-After: 1 ------------------------------------------


def test_holdoff_budget_429(benchmark: Any) -> None:
    budget = holdoff.RetryBudget()
    decide, state, later = budget.decide, holdoff.RetryState, holdoff.Outcome.retry_later(1.0)
    assert decide(state(), later).action == "retry"

    def run(n: int) -> None:
        for _ in range(n):
            decide(state(), later)

    bench(benchmark, run, "budget decision (429, Retry-After: 1)", "holdoff", "budget_429",
          "budget.decide(RetryState(), Outcome.retry_later(1.0)) (tenacity, pybreaker: no equivalent)")


# -- a decorated trivial function -----------------------------------------------------------------


def test_holdoff_decorated(benchmark: Any) -> None:
    policy = holdoff.Policy(holdoff.Breaker(), holdoff.RetryBudget())

    @policy
    def trivial() -> int:
        return 1

    def run(n: int) -> None:
        for _ in range(n):
            trivial()

    bench(benchmark, run, "decorated trivial function", "holdoff", "protected_call",
          "@Policy(Breaker(), RetryBudget()) decorated function returning 1")


def test_pybreaker_decorated(benchmark: Any) -> None:
    cb = pybreaker.CircuitBreaker(fail_max=5, reset_timeout=30)

    @cb
    def trivial() -> int:
        return 1

    def run(n: int) -> None:
        for _ in range(n):
            trivial()

    bench(benchmark, run, "decorated trivial function", "pybreaker", "protected_call",
          "@CircuitBreaker(fail_max=5) decorated function returning 1")


def test_tenacity_decorated(benchmark: Any) -> None:
    @tenacity.retry(stop=tenacity.stop_after_attempt(3), wait=tenacity.wait_exponential())
    def trivial() -> int:
        return 1

    def run(n: int) -> None:
        for _ in range(n):
            trivial()

    bench(benchmark, run, "decorated trivial function", "tenacity", "protected_call",
          "@retry(stop=stop_after_attempt(3), wait=wait_exponential()) function returning 1")


def test_purgatory_decorated(benchmark: Any) -> None:
    factory = purgatory.SyncCircuitBreakerFactory(default_threshold=5, default_ttl=30)

    @factory("bench")
    def trivial() -> int:
        return 1

    def run(n: int) -> None:
        for _ in range(n):
            trivial()

    bench(benchmark, run, "decorated trivial function", "purgatory", "protected_call",
          "@SyncCircuitBreakerFactory()('bench') decorated function returning 1")


def test_aiobreaker_call_async(benchmark: Any) -> None:
    cb = aiobreaker.CircuitBreaker(fail_max=5)

    async def coro() -> int:
        return 1

    async def many(n: int) -> None:
        for _ in range(n):
            await cb.call_async(coro)

    loop = asyncio.new_event_loop()
    try:
        bench(benchmark, lambda n: loop.run_until_complete(many(n)), "decorated trivial function",
              "aiobreaker", "protected_call", "await cb.call_async(coro) returning 1, in one asyncio loop")
    finally:
        loop.close()


def test_plain_call(benchmark: Any) -> None:
    def trivial() -> int:
        return 1

    def run(n: int) -> None:
        for _ in range(n):
            trivial()

    bench(benchmark, run, "decorated trivial function")


# -- group lookups ----------------------------------------------------------------------------------


@pytest.mark.parametrize("keys,op", [(10, "group_lookup_10"), (10_000, "group_lookup_10k"),
                                     (1_000_000, "group_lookup_1m")])
def test_holdoff_group_lookup(benchmark: Any, keys: int, op: str) -> None:
    group = holdoff.BreakerGroup()
    names = [f"host-{i}" for i in range(keys)]
    for k in names:
        group.get(k)
    # A multiplicative stride visits keys in a scattered order, as real traffic would.
    order = [names[(i * 7919) % keys] for i in range(min(keys, 100_000))]
    get, m = group.get, len(order)

    def run(n: int) -> None:
        for i in range(n):
            get(order[i % m])

    bench(benchmark, run, "group lookup", "holdoff", op,
          f"group.get(existing key), {keys} keys, scattered order")


@pytest.fixture(autouse=True)
def _versions(benchmark: Any) -> None:
    from importlib import metadata

    benchmark.extra_info["versions"] = {
        d: metadata.version(d) for d in ("holdoff", "pybreaker", "tenacity", "purgatory", "aiobreaker")
    }
