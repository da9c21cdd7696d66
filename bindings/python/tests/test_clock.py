"""ManualClock and SystemClock: a manual clock moves only when told, never backwards; the
system clock is monotonic."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

import holdoff


def test_manual_clock_moves_only_when_told() -> None:
    clock = holdoff.ManualClock(wall_origin=1_559_559_600)
    assert clock.now() == 0.0
    assert clock.advance(1.5) == 1.5
    clock.set(timedelta(seconds=10))
    assert clock.now() == 10.0
    assert clock.wall_origin == 1_559_559_600.0
    assert clock.wall_time() == 1_559_559_610.0
    with pytest.raises(holdoff.ClockBackwardsError) as e:
        clock.set(9.999)
    assert isinstance(e.value, ValueError) and e.value.code == "clock_backwards"
    assert clock.now() == 10.0


def test_wall_origin_accepts_aware_datetime_only() -> None:
    when = datetime(2019, 6, 3, 11, 0, tzinfo=timezone.utc)
    assert holdoff.ManualClock(wall_origin=when).wall_origin == when.timestamp()
    with pytest.raises(TypeError, match="timezone-aware"):
        holdoff.ManualClock(wall_origin=datetime(2019, 6, 3, 11, 0))


def test_system_clock_is_monotonic() -> None:
    c = holdoff.SystemClock()
    a = c.now()
    b = c.now()
    assert 0.0 <= a <= b
    assert c.wall_time() > 1.6e9
