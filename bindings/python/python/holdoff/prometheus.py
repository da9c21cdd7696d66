"""holdoff's metrics as a ``prometheus_client`` collector (``pip install
'holdoff[prometheus]'``).

>>> import prometheus_client
>>> import holdoff, holdoff.prometheus
>>> policy = holdoff.Policy(holdoff.Breaker(), holdoff.RetryBudget())
>>> collector = holdoff.prometheus.HoldoffCollector(policy, upstream="payments")
>>> registry = prometheus_client.CollectorRegistry()
>>> registry.register(collector)

Names are the table's (:data:`holdoff.METRICS`) with ``.`` as ``_``; a duration (unit ``s``)
ends ``_seconds`` and a counter ``_total``: ``holdoff.retry.wait.duration`` is
``holdoff_retry_wait_duration_seconds_total``. Attributes are labels (``state``, ``outcome``,
``reason``, ``source``, ``upstream``). Targets are read when the registry is scraped, once per
scrape.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

try:
    from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
except ImportError as e:  # pragma: no cover - the message is the point
    raise ImportError(
        "holdoff.prometheus needs prometheus_client: pip install 'holdoff[prometheus]'"
    ) from e

from ._holdoff import METRICS, MetricDef
from ._metrics import Source, Target

__all__ = ["HoldoffCollector", "prometheus_name"]


def prometheus_name(d: MetricDef) -> str:
    """The family name of a table row as exposed: ``.`` as ``_``, ``_seconds`` for a duration
    (``_total`` follows on a counter's samples)."""
    name = d.name.replace(".", "_")
    return name + "_seconds" if d.unit == "s" else name


def _family(d: MetricDef) -> Metric:
    unit = "seconds" if d.unit == "s" else ""
    name = prometheus_name(d)
    if d.kind == "counter":
        return CounterMetricFamily(name, d.description, unit=unit)
    return GaugeMetricFamily(name, d.description, unit=unit)


class HoldoffCollector:
    """A collector of holdoff targets for a ``prometheus_client`` registry: register it once
    (``registry.register(collector)``) and :meth:`add` every breaker, policy, quota or group to
    it (or give the first to the constructor). Each scrape reads every target once.

    ``HoldoffCollector(target=None, *, upstream=None)``: ``add(target, upstream=upstream)``
    when a target is given.
    """

    def __init__(self, target: Target | None = None, *, upstream: str | None = None) -> None:
        self._lock = threading.Lock()
        self._sources: list[Source] = []
        if target is not None:
            self.add(target, upstream=upstream)
        elif upstream is not None:
            raise TypeError("upstream names a target: give the target too")

    def add(self, target: Target, *, upstream: str | None = None) -> None:
        """Reports ``target``'s series from the next scrape on; with ``upstream`` (a single
        breaker, policy or quota) they carry the label ``upstream``. Reads the target once now:
        counting starts at an object's first read. Raises what :func:`holdoff.otel.observe`
        raises for a bad target or upstream."""
        source = Source(target, upstream)
        with self._lock:
            self._sources.append(source)

    def remove(self, target: Target) -> None:
        """Stops reporting ``target`` (every time it was added). Unknown targets are ignored."""
        with self._lock:
            self._sources = [s for s in self._sources if s.target is not target]

    def describe(self) -> list[Metric]:
        """The families, without samples (what a registry checks names against; no target is
        read)."""
        return [_family(d) for d in METRICS]

    def collect(self) -> Iterator[Metric]:
        """Every family, with a sample per series of every target (zeros included)."""
        with self._lock:
            sources = list(self._sources)
        families = {d.name: (_family(d), d.kind == "counter") for d in METRICS}
        for source in sources:
            for r in source.readings():
                family, counter = families[r.name]
                sample = family.name + "_total" if counter else family.name
                family.add_sample(sample, r.attributes, r.value)
        for family, _ in families.values():
            yield family
