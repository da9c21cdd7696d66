"""``holdoff.prometheus`` end to end: the collector in a ``prometheus_client`` registry served
by its HTTP server on 127.0.0.1 (a port the system picks), scraped with urllib after the
scripted scenario of ``metrics_scenario.py``, parsed with ``prometheus_client.parser``."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from typing import Any

import prometheus_client
import pytest
from prometheus_client.parser import text_string_to_metric_families

import holdoff
import metrics_scenario
from holdoff.prometheus import HoldoffCollector, prometheus_name
from metrics_scenario import key


@pytest.fixture
def served() -> Iterator[tuple[prometheus_client.CollectorRegistry, str]]:
    registry = prometheus_client.CollectorRegistry()
    server, thread = prometheus_client.start_http_server(0, addr="127.0.0.1", registry=registry)
    try:
        yield registry, f"http://127.0.0.1:{server.server_port}/metrics"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def scrape(url: str) -> str:
    # No proxy: the scrape goes to 127.0.0.1 whatever the environment says.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=10) as r:
        body: bytes = r.read()
    return body.decode()


def test_a_scrape_after_the_scenario(
    served: tuple[prometheus_client.CollectorRegistry, str],
) -> None:
    registry, url = served
    s = metrics_scenario.build()
    collector = HoldoffCollector(s.payments, upstream="payments")
    collector.add(s.search, upstream="search")
    collector.add(s.group)
    registry.register(collector)
    metrics_scenario.run(s)

    text = scrape(url)
    families = {f.name: f for f in text_string_to_metric_families(text)}
    got: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for f in families.values():
        for sample in f.samples:
            got[(sample.name, frozenset(sample.labels.items()))] = sample.value

    # The scenario's series under their Prometheus names.
    kinds = {d.name: d for d in holdoff.METRICS}
    want = {}
    for (name, attrs), value in metrics_scenario.expected().items():
        d = kinds[name]
        sample = prometheus_name(d) + ("_total" if d.kind == "counter" else "")
        want[(sample, attrs)] = value
    assert {k: v for k, v in got.items() if v} == want
    line = 'holdoff_retry_wait_duration_seconds_total{source="retry_after",upstream="search"} 2.0'
    assert line in text.splitlines()
    assert got[key("holdoff_breaker_refused_total", upstream="a")] == 0

    # One family per row, typed and documented as the table says.
    assert {prometheus_name(d): d.kind for d in holdoff.METRICS} == {
        n: f.type for n, f in families.items()
    }
    for d in holdoff.METRICS:
        assert families[prometheus_name(d)].documentation == d.description

    # A later scrape reads the targets again; a removed target is gone from it.
    collector.remove(s.group)
    s.payments.force_open()
    after = {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for f in text_string_to_metric_families(scrape(url))
        for sample in f.samples
    }
    assert after[key("holdoff_breaker_state", state="forced_open", upstream="payments")] == 1
    assert key("holdoff_group_keys") not in after
    assert not [k for k in after if ("upstream", "a") in k[1]]


def test_names() -> None:
    assert [prometheus_name(d) for d in holdoff.METRICS][9:11] == [
        "holdoff_retry_waits",
        "holdoff_retry_wait_duration_seconds",
    ]


def test_names_are_checked_at_registration_and_targets_at_add() -> None:
    registry = prometheus_client.CollectorRegistry()
    registry.register(HoldoffCollector())
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        registry.register(HoldoffCollector())
    c = HoldoffCollector()
    bad: Any = object()
    with pytest.raises(holdoff.InputTypeError) as e:
        c.add(bad)
    assert e.value.field == "target"
    with pytest.raises(TypeError):
        HoldoffCollector(upstream="x")
