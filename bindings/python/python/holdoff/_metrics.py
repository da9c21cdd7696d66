"""What the exporters (:mod:`holdoff.otel`, :mod:`holdoff.prometheus`) share: a target's
readings, read from the core, with the ``upstream`` attribute its user named it by."""

from __future__ import annotations

from typing import Callable, Union

from ._errors import InputTypeError, InvalidInputError
from ._holdoff import Breaker, BreakerGroup, MetricReading, Policy, RetryQuota

__all__ = ["Source", "Target"]

#: What an exporter observes: a breaker, a policy (its retry series, its breaker's and its
#: quota's), a retry quota, or a breaker group (its own series and each kept breaker's).
Target = Union[Breaker, Policy, RetryQuota, BreakerGroup]

_TARGET_RULE = "must be a holdoff.Breaker, Policy, RetryQuota or BreakerGroup"


def _policy_readings(policy: Policy) -> list[MetricReading]:
    readings = policy.breaker.metrics()
    readings += policy.metrics()
    quota = policy.quota
    if quota is not None:
        readings += quota.metrics()
    return readings


class Source:
    """One observed target and its ``upstream``. Checks both (``InputTypeError`` naming
    ``target`` or ``upstream``; ``InvalidInputError`` naming ``upstream`` for an empty name, or
    a name given with a group, whose breakers carry their keys), then reads the target once:
    that first read starts the core's counting."""

    __slots__ = ("_read", "target", "upstream")

    def __init__(self, target: Target, upstream: str | None) -> None:
        read: Callable[[], list[MetricReading]]
        if isinstance(target, Policy):
            read = lambda: _policy_readings(target)  # noqa: E731
        elif isinstance(target, (Breaker, RetryQuota, BreakerGroup)):
            read = target.metrics
        else:
            raise InputTypeError("target", f"{_TARGET_RULE}, not {type(target).__name__}")
        if upstream is not None:
            if not isinstance(upstream, str):
                raise InputTypeError(
                    "upstream", f"must be a str or None, not {type(upstream).__name__}"
                )
            if not upstream:
                raise InvalidInputError("upstream", "must not be empty")
            if isinstance(target, BreakerGroup):
                raise InvalidInputError(
                    "upstream", "a group's breakers carry their keys as upstream: give none"
                )
        self.target = target
        self.upstream = upstream
        self._read = read
        read()

    def readings(self) -> list[MetricReading]:
        """The target's readings now; with an ``upstream``, each reading's attributes carry it
        (the dicts are the readings' own, made for this read)."""
        readings = self._read()
        if self.upstream is not None:
            for r in readings:
                r.attributes["upstream"] = self.upstream
        return readings
