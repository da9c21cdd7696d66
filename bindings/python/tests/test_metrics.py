"""The metric model through the Python API: ``holdoff.METRICS`` is the core's table (the one
docs/metrics.md prints), and each object's ``metrics()`` its series, zeros included, in the
core's order, counting from the first read."""

from __future__ import annotations

import gc
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import get_args

import pytest

import holdoff
from holdoff import MetricReading

DOCS = Path(__file__).resolve().parents[3] / "docs" / "metrics.md"

# The attribute values in the core's order (as the Literal types of holdoff._names list them).
STATES = get_args(holdoff.State)
OUTCOMES = get_args(holdoff.OutcomeName)
REASONS = get_args(holdoff.Reason)
SOURCES = get_args(holdoff.WaitSource)


def test_the_table_is_the_one_docs_print() -> None:
    rows = re.findall(
        r"^\| `([a-z._]+)` \| (counter|gauge) \| `([^`]+)` \| (.*?) \| (.*) \|$",
        DOCS.read_text(),
        re.M,
    )
    assert len(rows) == 17
    got = []
    for d in holdoff.METRICS:
        attr = "-" if d.attribute is None else f"`{d.attribute}` ({', '.join(d.values)})"
        got.append((d.name, d.kind, d.unit, attr, d.description))
    assert got == [tuple(r) for r in rows]


def test_a_row() -> None:
    d = holdoff.METRICS[10]
    assert isinstance(d, holdoff.MetricDef)
    assert (d.name, d.kind, d.unit, d.attribute, d.values) == (
        "holdoff.retry.wait.duration",
        "counter",
        "s",
        "source",
        SOURCES,
    )
    assert holdoff.METRICS[0] == holdoff.METRICS[0]
    assert holdoff.METRICS[0] != holdoff.METRICS[1]
    assert len({*holdoff.METRICS}) == 17
    assert repr(holdoff.METRICS[13]) == (
        "MetricDef(name='holdoff.quota.tokens', kind='gauge', unit='{token}', attribute=None, "
        "values=())"
    )


def breaker_series(
    state: str = "closed",
    admitted: float = 0,
    refused: float = 0,
    outcomes: dict[str, float] | None = None,
    stale: float = 0,
    probes: float = 0,
    transitions: dict[str, float] | None = None,
    **extra: str,
) -> list[MetricReading]:
    """A breaker's 24 readings in the core's order."""
    outcomes = outcomes or {}
    transitions = transitions or {}

    def r(name: str, value: float, **attributes: str) -> MetricReading:
        return MetricReading(name, {**attributes, **extra}, value)

    return [
        *(r("holdoff.breaker.state", float(s == state), state=s) for s in STATES),
        r("holdoff.breaker.admitted", admitted),
        r("holdoff.breaker.refused", refused),
        *(r("holdoff.breaker.outcomes", outcomes.get(o, 0), outcome=o) for o in OUTCOMES),
        r("holdoff.breaker.stale_answers", stale),
        r("holdoff.breaker.probes", probes),
        *(r("holdoff.breaker.transitions", transitions.get(t, 0), reason=t) for t in REASONS),
    ]


def test_a_breaker_counts_from_its_first_read() -> None:
    clock = holdoff.ManualClock()
    b = holdoff.Breaker(trip=holdoff.ConsecutiveFailures(2), recoveries=1, clock=clock)
    b.record(b.allow(), "failure")  # before the first read: not counted
    assert b.metrics() == breaker_series()
    b.record(b.allow(), "failure")  # the second consecutive failure trips it
    with pytest.raises(holdoff.BreakerOpenError):
        b.allow()
    clock.advance(30)
    probe = b.allow()
    b.reset()
    assert b.record(probe, "success") == "stale"
    assert b.metrics() == breaker_series(
        admitted=2,
        refused=1,
        outcomes={"failure": 1, "success": 1},
        stale=1,
        probes=1,
        transitions={"tripped": 1, "probe_admitted": 1, "reset": 1},
    )
    # Each read is new objects: changing one changes nothing the core holds.
    first = b.metrics()[0]
    first.attributes["state"] = "x"
    assert b.metrics()[0] == MetricReading("holdoff.breaker.state", {"state": "closed"}, 1.0)


def test_a_policys_readings_are_its_retry_series_only() -> None:
    clock = holdoff.ManualClock()
    quota = holdoff.RetryQuota(capacity=10, retry_cost=5)
    policy = holdoff.Policy(
        holdoff.Breaker(clock=clock), holdoff.RetryBudget(max_retries=1, clock=clock), quota
    )
    assert [r.name for r in policy.metrics()] == [
        "holdoff.retry.attempts",
        "holdoff.retry.retries",
        *["holdoff.retry.waits"] * 3,
        *["holdoff.retry.wait.duration"] * 3,
        "holdoff.retry.capped_waits",
        *["holdoff.retry.give_ups"] * 10,
    ]
    quota.metrics()

    def fail() -> None:
        raise ConnectionError("down")

    with pytest.raises(holdoff.GiveUpError) as e:
        policy.retrying(sleep=clock.advance).call(fail)
    assert (e.value.reason, e.value.attempts) == ("attempts_exhausted", 2)
    got = {(r.name, tuple(r.attributes.items())): r.value for r in policy.metrics() if r.value}
    # Two attempts, one retry after the first backoff (0.5 s), then max_retries is reached.
    assert got == {
        ("holdoff.retry.attempts", ()): 2.0,
        ("holdoff.retry.retries", ()): 1.0,
        ("holdoff.retry.waits", (("source", "backoff"),)): 1.0,
        ("holdoff.retry.wait.duration", (("source", "backoff"),)): 0.5,
        ("holdoff.retry.give_ups", (("reason", "attempts_exhausted"),)): 1.0,
    }
    assert {r.attributes.get("reason") for r in policy.metrics() if "reason" in r.attributes} == {
        *get_args(holdoff.GiveUpReason)
    }
    # The quota paid the one retry (5 tokens); nothing was refused.
    assert quota.metrics() == [
        MetricReading("holdoff.quota.tokens", {}, 5.0),
        MetricReading("holdoff.quota.refused", {}, 0.0),
    ]


def test_calls_that_never_started_count_nothing() -> None:
    """A helper keeps a template execution it never steps, and an execution may be made and
    dropped: neither is a call, so neither counts a give-up when freed."""
    clock = holdoff.ManualClock()
    policy = holdoff.Policy(holdoff.Breaker(clock=clock), holdoff.RetryBudget(clock=clock))
    policy.metrics()
    for _ in range(3):
        assert policy.call(lambda: "ok") == "ok"
    holdoff.Execution(policy).fresh()
    gc.collect()
    assert {r.name: r.value for r in policy.metrics() if r.value} == {"holdoff.retry.attempts": 3.0}


def test_a_group_reads_its_breakers_under_their_keys() -> None:
    clock = holdoff.ManualClock()
    group = holdoff.BreakerGroup(max_keys=1, clock=clock)
    group.metrics()
    a = group.get("a")
    a.record(a.allow(), "success")
    b = group.get("b")  # a is idle: evicted for b
    b.record(b.allow(), "failure")
    readings = group.metrics()
    assert readings[:2] == [
        MetricReading("holdoff.group.keys", {}, 1.0),
        MetricReading("holdoff.group.evictions", {}, 1.0),
    ]
    assert readings[2:] == breaker_series(admitted=1, outcomes={"failure": 1}, upstream="b")


def test_reading_equality_and_repr() -> None:
    r = MetricReading("holdoff.breaker.probes", {}, 3)
    assert r.value == 3.0 and isinstance(r.value, float)
    assert r == MetricReading("holdoff.breaker.probes", {}, 3.0)
    assert r != MetricReading("holdoff.breaker.probes", {"upstream": "a"}, 3.0)
    assert r != ("holdoff.breaker.probes", {}, 3.0)
    assert repr(MetricReading("holdoff.breaker.state", {"state": "open"}, 1)) == (
        "MetricReading(name='holdoff.breaker.state', attributes={'state': 'open'}, value=1.0)"
    )


def test_holdoff_runs_without_opentelemetry() -> None:
    """`import holdoff`, a retried call and a give-up (which look for a span) work where
    opentelemetry cannot be imported; the exporters say what to install."""
    code = textwrap.dedent(
        """
        import sys
        sys.modules["opentelemetry"] = None  # import opentelemetry raises ImportError
        sys.modules["prometheus_client"] = None
        import holdoff
        clock = holdoff.ManualClock()
        policy = holdoff.Policy(
            holdoff.Breaker(clock=clock), holdoff.RetryBudget(max_retries=1, clock=clock)
        )
        def fail():
            raise ConnectionError("down")
        try:
            policy.retrying(sleep=clock.advance).call(fail)
        except holdoff.GiveUpError as e:
            print(e.reason)
        for module in ("holdoff.otel", "holdoff.prometheus"):
            try:
                __import__(module)
            except ImportError as e:
                print(e)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.splitlines() == [
        "attempts_exhausted",
        "holdoff.otel needs opentelemetry-api: pip install 'holdoff[otel]'",
        "holdoff.prometheus needs prometheus_client: pip install 'holdoff[prometheus]'",
    ]
