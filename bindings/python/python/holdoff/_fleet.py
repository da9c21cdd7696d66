"""The ``fleet`` option of a :class:`~holdoff.Breaker` as a dict: the keyword names of
:class:`~holdoff.FleetConfig`, typed."""

from __future__ import annotations

from datetime import timedelta
from typing import TypedDict

__all__ = ["FleetOptions"]


class _FleetRequired(TypedDict):
    url: str
    key: str


class FleetOptions(_FleetRequired, total=False):
    """``Breaker(fleet={"url": "redis://127.0.0.1:6379/0", "key": "payments", "refresh": 0.02})``:
    the same options, names and units (float seconds or ``timedelta``) as
    :class:`~holdoff.FleetConfig`; an unknown key is a ``ConfigTypeError`` naming it."""

    refresh: float | timedelta
    fallback_after: float | timedelta
    timeout: float | timedelta
    ttl: float | timedelta
