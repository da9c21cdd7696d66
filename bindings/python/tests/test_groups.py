"""Bounded breaker groups: `max_keys`, eviction of the least recently used idle breaker, overflow
breakers when nothing is idle, `snapshot()`, and the binding's wrapper objects, which follow the
breaker the core holds now and do not outlive eviction."""

from __future__ import annotations

import gc
import weakref

import pytest

import holdoff
from holdoff import Outcome


def group(max_keys: int, **kw: object) -> holdoff.BreakerGroup:
    return holdoff.BreakerGroup(
        trip=holdoff.ConsecutiveFailures(1), max_keys=max_keys, clock=holdoff.ManualClock(), **kw
    )  # type: ignore[arg-type]


def fail(b: holdoff.Breaker) -> None:
    b.record(b.allow(), Outcome.FAILURE)


def test_defaults_and_bounds() -> None:
    g = holdoff.BreakerGroup(clock=holdoff.ManualClock())
    assert g.max_keys == 10_000
    s = g.snapshot()
    assert (s.keys, s.max_keys, s.evictions, s.overflows) == (0, 10_000, 0, 0)
    assert holdoff.BreakerGroup(max_keys=100_000_000).max_keys == 100_000_000
    for bad in (0, -1, 100_000_001, 10**30, -(10**30)):
        with pytest.raises(holdoff.InvalidConfigError) as e:
            holdoff.BreakerGroup(max_keys=bad)
        assert e.value.field == "group.max_keys"
        assert e.value.rule == "must be between 1 and 100000000"
    for wrong in (1.5, "10", True):
        with pytest.raises(holdoff.ConfigTypeError) as t:
            holdoff.BreakerGroup(max_keys=wrong)  # type: ignore[arg-type]
        assert t.value.field == "group.max_keys"


def test_evicts_the_least_recently_used_idle_breaker() -> None:
    g = group(2)
    a = g["a"]
    g.get("b")
    assert g.get("a") is a  # marks a as most recently used
    c = g["c"]
    assert g.keys() == ["a", "c"] and len(g) == 2
    assert "b" not in g and g.peek("b") is None
    assert g["a"] is a and g["c"] is c
    s = g.snapshot()
    assert (s.keys, s.max_keys, s.evictions, s.overflows) == (2, 2, 1, 0)
    assert repr(s) == "GroupSnapshot(keys=2, max_keys=2, evictions=1, overflows=0)"


def test_peek_does_not_mark_a_key_used() -> None:
    g = group(2)
    a = g["a"]
    g["b"]
    assert g.peek("a") is a
    g["c"]
    assert g.keys() == ["b", "c"]


def test_a_breaker_kept_after_eviction_is_not_handed_out_again() -> None:
    g = group(1)
    old = g["a"]
    g["b"]  # evicts the idle "a"
    fresh = g["a"]  # evicts the idle "b"; "a" is a new breaker
    assert fresh is not old
    fail(old)  # the evicted breaker is the caller's own now: it moves nothing in the group
    assert (old.state, fresh.state, g["a"] is fresh) == ("open", "closed", True)
    assert g.snapshot().evictions == 2


def test_a_full_group_of_busy_breakers_overflows() -> None:
    g = group(1)
    a = g["a"]
    fail(a)  # open: never evicted
    x1, x2 = g["x"], g.get("x")
    assert x1 is not x2  # an overflow breaker is not kept: a fresh one each time
    assert g.keys() == ["a"] and "x" not in g and g.peek("x") is None
    s = g.snapshot()
    assert (s.keys, s.evictions, s.overflows) == (1, 0, 2)
    # A permit of an overflow breaker is recorded on the breaker object that admitted it.
    p = x1.allow()
    assert x1.record(p, Outcome.SUCCESS) == "counted"
    with pytest.raises(holdoff.PermitError) as e:
        x2.record(x1.allow(), Outcome.SUCCESS)
    assert e.value.code == "foreign_permit"
    assert g["a"] is a and a.state == "open"


def test_wrappers_of_evicted_breakers_are_released() -> None:
    g = group(4)
    ref = weakref.ref(g["k0"])
    kept = g["keep"]
    for i in range(1, 200):
        g[f"k{i}"]
        g["keep"]  # keeps "keep" most recently used
    gc.collect()
    assert ref() is None  # the group's cache let go of the evicted breaker's wrapper
    assert g["keep"] is kept and len(g) == 4
    assert g.snapshot().evictions == 201 - 4  # 201 keys through a group of 4


def test_a_listener_stays_on_the_kept_breaker() -> None:
    g = group(10)
    seen = []
    g["a"].on_state_change(lambda ev: seen.append((ev.to_state, ev.reason)))
    fail(g["a"])
    assert seen == [("open", "tripped")]


def test_group_makes_breakers_lazily_from_the_template() -> None:
    clock = holdoff.ManualClock()
    g = holdoff.BreakerGroup(trip=holdoff.ConsecutiveFailures(2), clock=clock)
    assert len(g) == 0 and "a" not in g and g.peek("a") is None
    a = g.get("a")
    assert g["a"] is a and g.peek("a") is a and "a" in g
    fail(a)
    fail(a)
    assert g["a"].state == "open" and g["b"].state == "closed"
    assert g.keys() == ["a", "b"]
