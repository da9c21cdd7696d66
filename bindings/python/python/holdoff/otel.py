"""holdoff's metrics as OpenTelemetry observable instruments (``pip install 'holdoff[otel]'``,
which brings ``opentelemetry-api``).

>>> from opentelemetry import metrics
>>> import holdoff, holdoff.otel
>>> policy = holdoff.Policy(holdoff.Breaker(), holdoff.RetryBudget())
>>> observed = holdoff.otel.observe(metrics.get_meter("shop"), policy, upstream="payments")
>>> observed.close()

Each row of :data:`holdoff.METRICS` becomes one instrument per meter (an observable counter or
gauge, with the row's name, unit and description), made the first time a target is observed on
that meter; every later target observed on the same meter reports through the same instruments.
Their callbacks read the targets when the SDK collects, so a call through a breaker or a policy
pays nothing for being exported. Within one collection each target is read once, and every
instrument reports from that one reading.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING, Callable

try:
    from opentelemetry.metrics import CallbackOptions, Meter, Observation
except ImportError as e:  # pragma: no cover - the message is the point
    raise ImportError("holdoff.otel needs opentelemetry-api: pip install 'holdoff[otel]'") from e

from ._holdoff import METRICS
from ._metrics import Source, Target

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["Observed", "observe"]


class _MeterReadings:
    """A meter's instruments (one per table row) and the targets they report."""

    def __init__(self, meter: Meter) -> None:
        self._lock = threading.Lock()
        self._sources: list[Source] = []
        # The last reading of every target, by metric name, and the instruments that reported
        # from it: an instrument asked again starts a new collection, which reads again.
        self._snapshot: dict[str, list[Observation]] | None = None
        self._served: set[str] = set()
        for d in METRICS:
            callbacks = [self._callback(d.name)]
            if d.kind == "counter":
                meter.create_observable_counter(
                    d.name, callbacks=callbacks, unit=d.unit, description=d.description
                )
            else:
                meter.create_observable_gauge(
                    d.name, callbacks=callbacks, unit=d.unit, description=d.description
                )

    def _callback(self, name: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(_options: CallbackOptions) -> Iterable[Observation]:
            return self._observations(name)

        return observe

    def _observations(self, name: str) -> list[Observation]:
        with self._lock:
            if self._snapshot is None or name in self._served:
                snapshot: dict[str, list[Observation]] = {}
                for source in self._sources:
                    for r in source.readings():
                        snapshot.setdefault(r.name, []).append(Observation(r.value, r.attributes))
                self._snapshot = snapshot
                self._served.clear()
            self._served.add(name)
            return self._snapshot.get(name, [])

    def add(self, source: Source) -> None:
        with self._lock:
            self._sources.append(source)

    def remove(self, source: Source) -> None:
        with self._lock:
            if source in self._sources:
                self._sources.remove(source)
            # What the next collection reports must not include it.
            self._snapshot = None


# Each meter's instruments, made once. A meter that cannot be weakly referenced is kept.
_by_meter: weakref.WeakKeyDictionary[Meter, _MeterReadings] = weakref.WeakKeyDictionary()
_kept: dict[int, tuple[Meter, _MeterReadings]] = {}
_registry_lock = threading.Lock()


def _readings_of(meter: Meter) -> _MeterReadings:
    with _registry_lock:
        try:
            found = _by_meter.get(meter)
        except TypeError:
            kept = _kept.get(id(meter))
            found = kept[1] if kept is not None else None
        if found is None:
            found = _MeterReadings(meter)
            try:
                _by_meter[meter] = found
            except TypeError:
                _kept[id(meter)] = (meter, found)
        return found


class Observed:
    """A target observed on a meter (what :func:`observe` returns). ``close()`` (or leaving
    ``with``) stops reporting it: the meter's instruments stay (OpenTelemetry cannot remove
    one) and report the other targets. Idempotent."""

    def __init__(self, readings: _MeterReadings, source: Source) -> None:
        self._readings = readings
        self._source = source
        self._closed = False

    @property
    def target(self) -> Target:
        """The observed breaker, policy, quota or group."""
        return self._source.target

    @property
    def upstream(self) -> str | None:
        """The ``upstream`` attribute given to its series, if any."""
        return self._source.upstream

    def close(self) -> None:
        """Stops reporting the target."""
        if not self._closed:
            self._closed = True
            self._readings.remove(self._source)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_args: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"Observed({type(self.target).__name__}, upstream={self.upstream!r}, {state})"


def observe(meter: Meter, target: Target, *, upstream: str | None = None) -> Observed:
    """Reports ``target``'s metrics (docs/metrics.md) through ``meter``'s observable instruments,
    read at each collection, until the returned :class:`Observed` is closed.

    ``target``: a :class:`holdoff.Breaker`, a :class:`holdoff.Policy` (its retry series, its
    breaker's and its quota's), a :class:`holdoff.RetryQuota` or a :class:`holdoff.BreakerGroup`
    (its own series and each kept breaker's with the attribute ``upstream`` = the key).
    ``upstream``: the name of the upstream a single breaker, policy or quota guards, added to its
    series as the attribute ``upstream``.

    The target is read once now: counting starts at an object's first read, so calls made
    before it are not counted. Values are the core's: counts, durations in seconds, 1 or 0 for
    each breaker state. Raises ``InputTypeError`` naming ``target`` (not one of those) or
    ``upstream`` (not a str), ``InvalidInputError`` naming ``upstream`` (empty, or given with a
    group). Observe a target once per meter: two observations of one object report its series
    twice.
    """
    source = Source(target, upstream)
    readings = _readings_of(meter)
    readings.add(source)
    return Observed(readings, source)
