"""``holdoff.otel`` and the retry span events against the real OpenTelemetry SDK: an
``InMemoryMetricReader`` collects after the scripted scenario of ``metrics_scenario.py``, an
``InMemorySpanExporter`` keeps the spans the helpers added events to."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import Gauge, InMemoryMetricReader, Sum
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import holdoff
import holdoff.otel
import metrics_scenario
from metrics_scenario import key


def collect(reader: InMemoryMetricReader) -> dict[str, Any]:
    """Every metric of the collection by name (each name once: one instrument per row)."""
    data = reader.get_metrics_data()
    metrics: dict[str, Any] = {}
    if data is None:  # no instrument reported a point
        return metrics
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                assert m.name not in metrics, f"two instruments named {m.name}"
                metrics[m.name] = m
    return metrics


def points(metrics: dict[str, Any]) -> metrics_scenario.Series:
    return {
        key(m.name, **{k: str(v) for k, v in p.attributes.items()}): p.value
        for m in metrics.values()
        for p in m.data.data_points
    }


@pytest.fixture
def reader() -> InMemoryMetricReader:
    return InMemoryMetricReader()


@pytest.fixture
def meter(reader: InMemoryMetricReader) -> Any:
    return MeterProvider(metric_readers=[reader]).get_meter("holdoff-test")


def test_the_scenario_through_the_sdk(
    reader: InMemoryMetricReader, meter: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    s = metrics_scenario.build()
    holdoff.otel.observe(meter, s.payments, upstream="payments")
    holdoff.otel.observe(meter, s.search, upstream="search")
    holdoff.otel.observe(meter, s.group)
    metrics_scenario.run(s)

    metrics = collect(reader)
    got = points(metrics)
    assert {k: v for k, v in got.items() if v} == metrics_scenario.expected()
    # Zeros are series too: every breaker state, outcome, reason of the three breakers of
    # `payments`, `search`, `a` and `b`.
    assert got[key("holdoff.breaker.state", state="open", upstream="payments")] == 0
    assert got[key("holdoff.retry.give_ups", reason="quota_empty", upstream="search")] == 0
    assert len([k for k in got if k[0] == "holdoff.breaker.transitions"]) == 4 * 9

    # One instrument per row, with the row's kind, unit and description.
    assert set(metrics) == {d.name for d in holdoff.METRICS}
    for d in holdoff.METRICS:
        m = metrics[d.name]
        assert (m.unit, m.description) == (d.unit, d.description)
        if d.kind == "counter":
            assert isinstance(m.data, Sum) and m.data.is_monotonic
        else:
            assert isinstance(m.data, Gauge)
    assert [r.getMessage() for r in caplog.records] == []

    # Counters stay cumulative; gauges are read live.
    s.payments.force_open()
    got = points(collect(reader))
    assert got[key("holdoff.breaker.state", state="forced_open", upstream="payments")] == 1
    assert got[key("holdoff.breaker.state", state="closed", upstream="payments")] == 0
    assert got[key("holdoff.breaker.admitted", upstream="payments")] == 6
    assert got[key("holdoff.breaker.transitions", reason="forced_open", upstream="payments")] == 1


def test_counting_starts_when_observed(reader: InMemoryMetricReader, meter: Any) -> None:
    clock = holdoff.ManualClock()
    b = holdoff.Breaker(clock=clock)
    b.record(b.allow(), "failure")
    holdoff.otel.observe(meter, b, upstream="x")
    b.record(b.allow(), "success")
    got = points(collect(reader))
    assert got[key("holdoff.breaker.admitted", upstream="x")] == 1
    assert got[key("holdoff.breaker.outcomes", outcome="failure", upstream="x")] == 0


class CountingPolicy(holdoff.Policy):
    reads = 0

    def metrics(self) -> list[holdoff.MetricReading]:
        self.reads += 1
        return super().metrics()


def test_each_target_is_read_once_per_collection_and_close_stops_it(
    reader: InMemoryMetricReader, meter: Any
) -> None:
    clock = holdoff.ManualClock()
    p = CountingPolicy(holdoff.Breaker(clock=clock), holdoff.RetryBudget(clock=clock))
    q = holdoff.RetryQuota(capacity=20)
    with holdoff.otel.observe(meter, p, upstream="p") as observed:
        assert (observed.target, observed.upstream) == (p, "p")
        assert p.reads == 1  # the read that starts counting
        observed_q = holdoff.otel.observe(meter, q, upstream="q")
        collect(reader)
        assert p.reads == 2
        collect(reader)
        assert p.reads == 3
        second = InMemoryMetricReader()
        other = MeterProvider(metric_readers=[second]).get_meter("other")
        holdoff.otel.observe(other, q, upstream="q2")
        assert points(collect(second)) == {
            key("holdoff.quota.tokens", upstream="q2"): 20.0,
            key("holdoff.quota.refused", upstream="q2"): 0.0,
        }
    got = points(collect(reader))
    assert p.reads == 3
    assert {k for k in got if ("upstream", "p") in k[1]} == set()
    assert got[key("holdoff.quota.tokens", upstream="q")] == 20
    observed.close()  # idempotent
    observed_q.close()
    assert points(collect(reader)) == {}


@pytest.mark.parametrize(
    "target,upstream,error,field",
    [
        ("breaker", None, holdoff.InputTypeError, "target"),
        (None, 3, holdoff.InputTypeError, "upstream"),
        (None, "", holdoff.InvalidInputError, "upstream"),
        ("group", "x", holdoff.InvalidInputError, "upstream"),
    ],
)
def test_bad_arguments_name_the_field(
    meter: Any, target: str | None, upstream: Any, error: type[Exception], field: str
) -> None:
    t: Any = {
        "breaker": "breaker",
        None: holdoff.Breaker(),
        "group": holdoff.BreakerGroup(),
    }[target]
    with pytest.raises(error) as e:
        holdoff.otel.observe(meter, t, upstream=upstream)
    assert getattr(e.value, "field", None) == field


# -- retries in traces --------------------------------------------------------------------------


@pytest.fixture
def spans() -> Any:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("holdoff-test"), exporter


def events(exporter: InMemorySpanExporter) -> list[tuple[str, dict[str, Any]]]:
    (span,) = exporter.get_finished_spans()
    return [(e.name, dict(e.attributes or {})) for e in span.events]


def retry_after_policy(clock: holdoff.ManualClock) -> holdoff.Policy:
    return holdoff.Policy(
        holdoff.Breaker(recoveries=1, clock=clock),
        holdoff.RetryBudget(retry_after_cap=5, max_retries=3, clock=clock),
    )


def test_retry_events_on_the_current_span(spans: Any) -> None:
    tracer, exporter = spans
    clock = holdoff.ManualClock()
    policy = retry_after_policy(clock)
    answers = iter([holdoff.RetryLaterError(9.0), ConnectionError("reset"), None])

    def fetch() -> str:
        e = next(answers)
        if e is not None:
            raise e
        return "ok"

    with tracer.start_as_current_span("checkout"):
        assert policy.retrying(sleep=clock.advance).call(fetch) == "ok"
    # The server asked for 9 s: the budget's cap (5 s) shortens its own wait, but the breaker
    # stays open the 9 s, so the wait is the breaker's. The retry is the breaker's probe; its
    # failure reopens the breaker for its interval (30 s), longer than the budget's backoff.
    assert events(exporter) == [
        (
            "holdoff.retry",
            {
                "holdoff.attempt": 1,
                "holdoff.outcome": "retry_later",
                "holdoff.delay": 9.0,
                "holdoff.source": "breaker",
                "holdoff.capped": True,
            },
        ),
        (
            "holdoff.retry",
            {
                "holdoff.attempt": 2,
                "holdoff.outcome": "failure",
                "holdoff.delay": 30.0,
                "holdoff.source": "breaker",
                "holdoff.capped": False,
            },
        ),
    ]


def test_a_first_try_success_adds_nothing(spans: Any) -> None:
    tracer, exporter = spans
    clock = holdoff.ManualClock()
    policy = retry_after_policy(clock)
    with tracer.start_as_current_span("checkout"):
        assert policy.call(lambda: "ok") == "ok"
    assert events(exporter) == []


def test_give_up_events(spans: Any) -> None:
    tracer, exporter = spans
    clock = holdoff.ManualClock()
    policy = holdoff.Policy(
        holdoff.Breaker(clock=clock), holdoff.RetryBudget(max_retries=1, clock=clock)
    )

    def fail() -> None:
        raise ConnectionError("down")

    with tracer.start_as_current_span("checkout"), pytest.raises(holdoff.GiveUpError):
        policy.retrying(sleep=clock.advance).call(fail)
    assert events(exporter) == [
        (
            "holdoff.retry",
            {
                "holdoff.attempt": 1,
                "holdoff.outcome": "failure",
                "holdoff.delay": 0.5,
                "holdoff.source": "backoff",
                "holdoff.capped": False,
            },
        ),
        ("holdoff.give_up", {"holdoff.attempts": 2, "holdoff.reason": "attempts_exhausted"}),
    ]

    exporter.clear()
    policy.breaker.force_open()
    with tracer.start_as_current_span("checkout"), pytest.raises(holdoff.BreakerOpenError):
        policy.retrying(sleep=clock.advance).call(fail)
    assert events(exporter) == [
        ("holdoff.give_up", {"holdoff.attempts": 0, "holdoff.reason": "breaker_open"})
    ]


def test_async_helpers_add_events_and_no_span_is_no_event(spans: Any) -> None:
    tracer, exporter = spans
    clock = holdoff.ManualClock()
    policy = retry_after_policy(clock)
    calls = 0

    async def fetch() -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise holdoff.RetryLaterError(2.0)
        return "ok"

    async def sleep(d: float) -> None:
        clock.advance(d)

    async def main() -> str:
        with tracer.start_as_current_span("checkout"):
            return await policy.retrying(async_sleep=sleep).call_async(fetch)

    assert asyncio.run(main()) == "ok"
    assert [(n, a["holdoff.delay"]) for n, a in events(exporter)] == [("holdoff.retry", 2.0)]
    # Outside any span (the current span does not record): the call runs, nothing is added.
    calls = 0
    assert asyncio.run(policy.retrying(async_sleep=sleep).call_async(fetch)) == "ok"
    assert len(exporter.get_finished_spans()) == 1
