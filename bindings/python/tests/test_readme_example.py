"""The README's example, against an unreachable host (a port on 127.0.0.1 that nothing listens
on: each connection is refused at once), with every default: it must end within the total
timeout (60 s), not after the budget's patient defaults (about 17.5 minutes).

The connection attempts are real; the waits move a ManualClock (``sleep=clock.advance``, and for
the async helper an event loop whose time is that clock). The schedule is the core's: backoff
0.5, 1, 2 and 4 s; the fifth failure trips the breaker (5 consecutive failures); the retry waits
30 s for its probe; the probe fails, and the next wait (60 s) does not fit in what is left of
the 60 s: the call gives up (``total_timeout``) at exactly 37.5 s, with the breaker's time to
its next probe (60 s) as ``retry_after``."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest

import holdoff
from manual_loop import run


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def readme_policy(clock: holdoff.ManualClock) -> holdoff.Policy:
    breaker = holdoff.Breaker(trip=holdoff.ConsecutiveFailures(5), clock=clock)
    budget = holdoff.RetryBudget(max_rate_limit_duration=1800, retry_after_cap=300, clock=clock)
    return holdoff.Policy(breaker, budget)


def check(
    e: holdoff.UpstreamUnavailableError, clock: holdoff.ManualClock, starts: list[float]
) -> None:
    assert isinstance(e, holdoff.GiveUpError)
    assert (e.reason, e.attempts, e.retry_after, e.server_delay, e.capped) == (
        "total_timeout",
        6,
        60.0,
        None,
        False,
    )
    assert isinstance(e.__cause__, OSError)  # the last refusal
    assert starts == [0.0, 0.5, 1.5, 3.5, 7.5, 37.5]
    assert clock.now() == 37.5


def test_the_readme_example_gives_up_within_the_total_timeout() -> None:
    requests = pytest.importorskip("requests")
    clock = holdoff.ManualClock()
    policy = readme_policy(clock)
    url = f"http://127.0.0.1:{closed_port()}/items"
    starts: list[float] = []

    @policy.retrying(http=True, sleep=clock.advance)
    def fetch(url: str) -> requests.Response:
        starts.append(clock.now())
        return requests.get(url, timeout=10)

    try:
        fetch(url)
    except holdoff.UpstreamUnavailableError as e:
        assert isinstance(e.__cause__, requests.exceptions.ConnectionError)
        check(e, clock, starts)
    else:
        pytest.fail("an unreachable host answered")


def test_the_async_helper_gives_up_within_the_total_timeout() -> None:
    clock = holdoff.ManualClock()
    policy = readme_policy(clock)
    port = closed_port()
    starts: list[float] = []

    @policy  # every default, asyncio.sleep included
    async def fetch() -> None:
        starts.append(clock.now())
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.close()

    async def main() -> holdoff.UpstreamUnavailableError:
        with pytest.raises(holdoff.UpstreamUnavailableError) as e:
            await fetch()
        return e.value

    check(run(clock, main()), clock, starts)


def test_the_readme_metrics_example(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Metrics section's example, with the SDK's in-memory reader behind `get_meter` and a
    fresh registry as `REGISTRY` (the process's own stay untouched)."""
    import prometheus_client
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme[readme.index("### Metrics") :]
    code = section[section.index("```python\n") + 10 : section.index("```\n\n`observe(")]
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    registry = prometheus_client.CollectorRegistry()
    monkeypatch.setattr(metrics, "get_meter", provider.get_meter)
    monkeypatch.setattr(prometheus_client, "REGISTRY", registry)
    scope: dict[str, Any] = {}
    exec(compile(code, "README.md", "exec"), scope)

    data = reader.get_metrics_data()
    assert data is not None
    (tokens,) = [
        p
        for m in data.resource_metrics[0].scope_metrics[0].metrics
        if m.name == "holdoff.quota.tokens"
        for p in m.data.data_points
    ]
    assert (dict(tokens.attributes or {}), tokens.value) == ({"upstream": "payments"}, 500.0)
    assert registry.get_sample_value("holdoff_quota_tokens", {"upstream": "payments"}) == 500.0
    assert registry.get_sample_value("holdoff_group_keys") == 0.0
    scope["observed"].close()
