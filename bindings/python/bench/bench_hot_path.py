"""Hot-path benchmarks: holdoff next to pybreaker and tenacity, in one run (pytest-benchmark).

Each benchmarked function runs N operations in a plain loop, so that pytest-benchmark's own
per-call overhead is spread over N; `report.py` divides by `extra_info["ops"]`.
Run with `bindings/python/run.sh bench` (release build, its own venv).
"""

from __future__ import annotations

from typing import Any, Callable

import pybreaker
import pytest
import tenacity

import holdoff

N = 1000


def bench(benchmark: Any, fn: Callable[[], None], group: str) -> None:
    benchmark.group = group
    benchmark.extra_info["ops"] = N
    benchmark.pedantic(fn, rounds=300, iterations=1, warmup_rounds=20)


# -- allow + record while closed ----------------------------------------------------------------


def test_holdoff_allow_record(benchmark: Any) -> None:
    b = holdoff.Breaker()
    allow, record, ok = b.allow, b.record, holdoff.Outcome.SUCCESS

    def run() -> None:
        for _ in range(N):
            record(allow(), ok)

    bench(benchmark, run, "allow+record (closed)")
    assert b.state == "closed"


def test_pybreaker_call(benchmark: Any) -> None:
    # pybreaker has no separate allow/record: its protected call is the closest operation.
    cb = pybreaker.CircuitBreaker(fail_max=5, reset_timeout=30)

    def noop() -> None:
        return None

    call = cb.call

    def run() -> None:
        for _ in range(N):
            call(noop)

    bench(benchmark, run, "allow+record (closed)")


def test_two_native_calls(benchmark: Any) -> None:
    # The floor any binding pays for two calls into an extension: two trivial getters.
    q = holdoff.RetryQuota()

    def run() -> None:
        for _ in range(N):
            q.available
            q.available

    bench(benchmark, run, "allow+record (closed)")


def test_empty_loop(benchmark: Any) -> None:
    def run() -> None:
        for _ in range(N):
            pass

    bench(benchmark, run, "allow+record (closed)")


# -- a decorated trivial function -----------------------------------------------------------------


def test_holdoff_decorated(benchmark: Any) -> None:
    policy = holdoff.Policy(holdoff.Breaker(), holdoff.RetryBudget())

    @policy
    def trivial() -> int:
        return 1

    def run() -> None:
        for _ in range(N):
            trivial()

    bench(benchmark, run, "decorated trivial function")


def test_pybreaker_decorated(benchmark: Any) -> None:
    cb = pybreaker.CircuitBreaker(fail_max=5, reset_timeout=30)

    @cb
    def trivial() -> int:
        return 1

    def run() -> None:
        for _ in range(N):
            trivial()

    bench(benchmark, run, "decorated trivial function")


def test_tenacity_decorated(benchmark: Any) -> None:
    @tenacity.retry(stop=tenacity.stop_after_attempt(3), wait=tenacity.wait_exponential())
    def trivial() -> int:
        return 1

    def run() -> None:
        for _ in range(N):
            trivial()

    bench(benchmark, run, "decorated trivial function")


def test_plain_call(benchmark: Any) -> None:
    def trivial() -> int:
        return 1

    def run() -> None:
        for _ in range(N):
            trivial()

    bench(benchmark, run, "decorated trivial function")


@pytest.fixture(autouse=True)
def _versions(benchmark: Any) -> None:
    benchmark.extra_info["versions"] = {
        "holdoff": holdoff.__version__,
        "pybreaker": getattr(pybreaker, "__version__", "?"),
        "tenacity": getattr(tenacity, "__version__", "?"),
    }
