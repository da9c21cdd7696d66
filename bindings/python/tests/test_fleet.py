"""The fleet option: its configuration and errors, ticks on the in-memory store on a manual clock,
and a breaker shared through a real redis-server (started here on a unix socket in a temporary
directory, by ``conformance/fleet/redis_server.py``) on the real clock, where only bounds with
margins are asserted. The rules themselves are the conformance cases'."""

from __future__ import annotations

import faulthandler
import gc
import os
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

import pytest

import holdoff
from holdoff import Outcome

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "conformance" / "fleet"))
from redis_server import RedisServer

MEMORY = "memory://python-test-fleet"


@pytest.fixture
def clock() -> holdoff.ManualClock:
    holdoff.memory_store_reset("python-test-fleet")
    return holdoff.ManualClock()


def tripping(clock: Any, **fleet: Any) -> holdoff.Breaker:
    """A breaker that opens on one failure for a constant 10 s, in the test fleet."""
    return holdoff.Breaker(
        trip=holdoff.ConsecutiveFailures(1),
        open_interval=holdoff.Backoff(10),
        recoveries=1,
        clock=clock,
        fleet={"url": MEMORY, "key": "upstream", **fleet},
    )


def fail(b: holdoff.Breaker) -> None:
    b.record(b.allow(), Outcome.FAILURE)


# -- configuration ----------------------------------------------------------------------------


def test_config_defaults_and_units() -> None:
    c = holdoff.FleetConfig("redis://127.0.0.1:6379/0", "payments")
    assert (c.url, c.key) == ("redis://127.0.0.1:6379/0", "payments")
    assert (c.refresh, c.fallback_after, c.timeout, c.ttl) == (0.05, 1.0, 0.05, 3600.0)
    d = holdoff.FleetConfig(
        "unix:///run/redis.sock",
        "k",
        refresh=0.02,
        fallback_after=timedelta(milliseconds=1500),
        timeout=1,
        ttl=60,
    )
    assert (d.refresh, d.fallback_after, d.timeout, d.ttl) == (0.02, 1.5, 1.0, 60.0)
    assert d == holdoff.FleetConfig(
        "unix:///run/redis.sock", "k", refresh=0.02, fallback_after=1.5, timeout=1.0, ttl=60.0
    )
    assert d != c


def test_config_repr_hides_the_password() -> None:
    assert repr(holdoff.FleetConfig(MEMORY, "k", refresh=0.02)) == (
        "FleetConfig(url='memory://python-test-fleet', key='k', refresh=0.02, "
        "fallback_after=1.0, timeout=0.05, ttl=3600.0)"
    )
    r = repr(holdoff.FleetConfig("redis://app:s3cret@127.0.0.1:6379/0", "k"))
    assert "s3cret" not in r and "redis://app:***@127.0.0.1:6379/0" in r
    r = repr(holdoff.FleetConfig("unix:///run/r.sock?db=2&pass=s3cret", "k"))
    assert "s3cret" not in r and "unix:///run/r.sock?db=2&pass=***" in r


@pytest.mark.parametrize(
    "kwargs,error,field",
    [
        ({"url": "http://127.0.0.1:6379", "key": "k"}, holdoff.InvalidConfigError, "fleet.url"),
        ({"url": "redis://", "key": "k"}, holdoff.InvalidConfigError, "fleet.url"),
        ({"url": 6379, "key": "k"}, holdoff.ConfigTypeError, "fleet.url"),
        ({"url": MEMORY, "key": ""}, holdoff.InvalidConfigError, "fleet.key"),
        ({"url": MEMORY, "key": "pay ments"}, holdoff.InvalidConfigError, "fleet.key"),
        ({"url": MEMORY, "key": "k" * 201}, holdoff.InvalidConfigError, "fleet.key"),
        ({"url": MEMORY, "key": b"k"}, holdoff.ConfigTypeError, "fleet.key"),
        ({"url": MEMORY, "key": "k", "refresh": 0}, holdoff.InvalidConfigError, "fleet.refresh"),
        ({"url": MEMORY, "key": "k", "refresh": -1}, holdoff.InvalidConfigError, "fleet.refresh"),
        (
            {"url": MEMORY, "key": "k", "fallback_after": float("inf")},
            holdoff.InvalidConfigError,
            "fleet.fallback_after",
        ),
        (
            {"url": MEMORY, "key": "k", "timeout": float("nan")},
            holdoff.InvalidConfigError,
            "fleet.timeout",
        ),
        ({"url": MEMORY, "key": "k", "ttl": "1h"}, holdoff.ConfigTypeError, "fleet.ttl"),
        (
            {"url": "rediss://127.0.0.1:6380/#insecure", "key": "k"},
            holdoff.InvalidConfigError,
            "fleet.url",
        ),
    ],
)
def test_config_errors_name_the_field(
    kwargs: dict[str, Any], error: type[holdoff.FieldError], field: str
) -> None:
    # As a FleetConfig, and as the dict a breaker takes (a rediss:// url that turns the
    # certificate check off is refused when attaching).
    if kwargs["url"] != "rediss://127.0.0.1:6380/#insecure":
        with pytest.raises(error) as e:
            holdoff.FleetConfig(**kwargs)
        assert (e.value.field, e.value.code) == (field, "invalid_config")
    with pytest.raises(error) as e:
        holdoff.Breaker(fleet=kwargs)
    assert (e.value.field, e.value.code) == (field, "invalid_config")


def test_fleet_option_shapes() -> None:
    with pytest.raises(holdoff.InvalidConfigError) as e:
        holdoff.Breaker(fleet={"key": "k"})
    assert (e.value.field, e.value.rule) == ("fleet.url", "is required")
    with pytest.raises(holdoff.InvalidConfigError) as e:
        holdoff.Breaker(fleet={"url": MEMORY})
    assert e.value.field == "fleet.key"
    with pytest.raises(holdoff.ConfigTypeError) as t:
        holdoff.Breaker(fleet={"url": MEMORY, "key": "k", "refresh_ms": 50})
    assert t.value.field == "fleet.refresh_ms"
    with pytest.raises(holdoff.ConfigTypeError) as t:
        holdoff.Breaker(fleet=MEMORY)
    assert t.value.field == "fleet"
    with pytest.raises(holdoff.InvalidConfigError) as e:
        holdoff.BreakerGroup(fleet={"url": MEMORY, "key": "k"})
    assert (e.value.field, e.value.rule) == ("fleet", "not supported with a group")
    # A group checks the fleet's own fields first.
    with pytest.raises(holdoff.InvalidConfigError) as e:
        holdoff.BreakerGroup(fleet={"url": MEMORY, "key": "k", "ttl": 0})
    assert e.value.field == "fleet.ttl"
    b = holdoff.Breaker(fleet=None)
    assert (b.fleet, b.fleet_attached) == (None, False)
    with pytest.raises(holdoff.FleetError) as f:
        b.sync_fleet()
    assert f.value.code == "fleet_error" and isinstance(f.value, RuntimeError)
    b.close()  # nothing to close


# -- the in-memory store, on a manual clock ---------------------------------------------------


def test_a_trip_opens_every_worker(clock: holdoff.ManualClock) -> None:
    a, b = tripping(clock), tripping(clock)
    assert a.fleet == holdoff.FleetConfig(MEMORY, "upstream")
    assert a.fleet_attached and b.fleet_attached
    fail(a)
    r = a.sync_fleet()
    assert (r.ok, r.attached, r.detached, r.reattached, r.granted, r.sent, r.error) == (
        True,
        True,
        False,
        False,
        False,
        1,
        None,
    )
    assert r.record is not None
    assert (r.record.state, r.record.episode, r.record.recoveries, r.record.leases) == (
        "open",
        1,
        0,
        0,
    )
    assert r.record.next_probe_at == 10.0 and r.record.updated_at == 0.0
    assert b.state == "closed"
    clock.advance(0.02)
    r = b.sync_fleet()
    assert r.record is not None and (r.record.state, r.sent) == ("open", 0)
    with pytest.raises(holdoff.BreakerOpenError) as e:
        b.allow()
    # The fleet's probe time converted to b's clock: 10 s after a's trip.
    assert e.value.retry_after == pytest.approx(9.98)
    [ev] = b.drain_events()
    assert (ev.to_state, ev.reason, ev.episode) == ("open", "fleet_opened", 1)


def test_store_down_detaches_after_fallback(clock: holdoff.ManualClock) -> None:
    a = tripping(clock, fallback_after=1.0)
    holdoff.memory_store_control("python-test-fleet", "down")
    r = a.sync_fleet()
    assert (r.ok, r.attached, r.record) == (False, True, None)
    assert r.error is not None and r.error != ""
    assert repr(r).endswith(f"record=None, error={r.error!r})")
    clock.advance(1.0)
    r = a.sync_fleet()
    assert (r.ok, r.attached, r.detached) == (False, False, True)
    assert not a.fleet_attached
    holdoff.memory_store_control("python-test-fleet", "up")
    r = a.sync_fleet()
    assert (r.ok, r.attached, r.reattached) == (True, True, True)
    with pytest.raises(holdoff.InvalidInputError) as e:
        holdoff.memory_store_control("python-test-fleet", "reboot")
    assert e.value.field == "action"


def test_close_unlinks_the_breaker(clock: holdoff.ManualClock) -> None:
    with tripping(clock) as a:
        b = tripping(clock)
        assert a.sync_fleet().ok
    assert not a.fleet_attached
    with pytest.raises(holdoff.FleetError):
        a.sync_fleet()
    a.close()  # again: nothing
    # a is local now: its trip reaches no one.
    fail(a)
    r = b.sync_fleet()
    assert r.record is not None and r.record.state == "closed" and b.state == "closed"
    assert a.state == "open"
    budget = holdoff.RetryBudget(clock=clock)
    with holdoff.Policy(b, budget) as policy:
        assert policy.breaker.fleet_attached
    assert not b.fleet_attached


# -- a real redis-server, on the real clock ---------------------------------------------------


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.cleanup()


def threads() -> int:
    """Native threads of this process (the fleet's are not Python threads)."""
    return len(os.listdir("/proc/self/task"))


def until(cond: Callable[[], bool], within: float) -> float:
    """Polls `cond` every 2 ms; the seconds it took, or fails after `within`."""
    start = time.monotonic()
    while not cond():
        if time.monotonic() - start > within:
            pytest.fail(f"not within {within} s")
        time.sleep(0.002)
    return time.monotonic() - start


def shared(redis: RedisServer, key: str, **kw: Any) -> holdoff.Breaker:
    return holdoff.Breaker(
        trip=holdoff.ConsecutiveFailures(1),
        open_interval=holdoff.Backoff(5),
        fleet=holdoff.FleetConfig(redis.url, key, refresh=0.02, **kw),
    )


def test_redis_fleet_opens_every_worker_and_closes_its_threads(redis: RedisServer) -> None:
    before = threads()
    a, b = shared(redis, "py-open"), shared(redis, "py-open")
    heard: list[holdoff.StateChange] = []
    # Called from the fleet's background thread, which takes the GIL for it.
    b.on_state_change(heard.append)
    assert threads() > before
    until(lambda: a.fleet_attached and b.fleet_attached, 2.0)
    start = time.monotonic()
    fail(a)
    took = until(lambda: b.state == "open", 2.0)
    # pub/sub and a 20 ms refresh: well under a second even on a loaded machine.
    assert took < 1.0, took
    assert time.monotonic() - start < 1.0
    until(lambda: len(heard) == 1, 1.0)
    assert (heard[0].reason, heard[0].to_state) == ("fleet_opened", "open")
    with pytest.raises(holdoff.BreakerOpenError) as e:
        b.allow()
    # 5 s from a's trip on Redis's clock, converted to b's clock (whole store milliseconds and
    # the measured offset: within a few ms of 5 s).
    assert e.value.retry_after is not None and 3.0 < e.value.retry_after < 5.01
    assert redis.command("PTTL", record_key(redis, "py-open")) > 0
    r = b.sync_fleet()  # a tick by hand, beside the background thread
    assert r.ok and r.record is not None and r.record.state == "open"
    # Closing while the background thread may be running b's callback does not deadlock.
    t0 = time.monotonic()
    a.close()
    b.close()
    assert time.monotonic() - t0 < 2.0
    assert threads() == before
    assert not a.fleet_attached and not b.fleet_attached


def record_key(redis: RedisServer, key: str) -> str:
    """The one Redis key holding the shared record of fleet key `key`."""
    keys = redis.command("KEYS", "*")
    assert isinstance(keys, list)
    found = [str(k) for k in keys if str(k).endswith(key)]
    assert len(found) == 1, keys
    return found[0]


def test_close_while_the_fleet_thread_runs_a_callback(redis: RedisServer) -> None:
    """The fleet's thread takes the GIL to run a state-change callback; `close()` joins that
    thread, so it must release the GIL while it waits. A hang ends the process (faulthandler)."""
    faulthandler.dump_traceback_later(60, exit=True)
    try:
        for i in range(10):
            a, b = shared(redis, f"py-race-{i}"), shared(redis, f"py-race-{i}")
            until(lambda: a.fleet_attached and b.fleet_attached, 2.0)  # noqa: B023
            entered = threading.Event()

            def slow(_e: holdoff.StateChange) -> None:
                entered.set()  # noqa: B023
                end = time.monotonic() + 0.05
                while time.monotonic() < end:  # holds the GIL but for switches
                    pass

            b.on_state_change(slow)
            fail(a)
            assert entered.wait(2.0)
            t0 = time.monotonic()
            b.close()
            a.close()
            assert time.monotonic() - t0 < 2.0
    finally:
        faulthandler.cancel_dump_traceback_later()


def test_freeing_the_breaker_joins_its_threads(redis: RedisServer) -> None:
    gc.collect()
    before = threads()

    def one() -> None:
        b = shared(redis, "py-free")
        until(lambda: b.fleet_attached, 2.0)
        # A reference cycle through the callback: only the garbage collector frees it.
        b.on_state_change(lambda _e: print(b))

    for _ in range(5):
        one()
        assert threads() > before
        gc.collect()
        # Joined by then; a joined thread's entry in /proc/self/task goes a moment after the join
        # returns (the kernel wakes the joiner before it releases the task), so it may be seen.
        until(lambda: threads() == before, 0.5)


def test_redis_down_falls_back_local_and_never_blocks(redis: RedisServer) -> None:
    a = shared(redis, "py-down", fallback_after=0.3, timeout=0.05)
    try:
        until(lambda: a.fleet_attached, 2.0)
        redis.kill()
        took = until(lambda: not a.fleet_attached, 3.0)
        assert took < 2.0, took
        # Local again: calls go on, none waits on the dead store.
        slowest = 0.0
        for _ in range(200):
            t0 = time.monotonic()
            p = a.allow()
            a.record(p, Outcome.SUCCESS)
            slowest = max(slowest, time.monotonic() - t0)
        assert slowest < 0.05, slowest
        fail(a)
        assert a.state == "open"
        redis.start()
        until(lambda: a.fleet_attached, 3.0)
    finally:
        a.close()
        if redis.proc is None or redis.proc.poll() is not None:
            redis.start()


def test_threads_share_a_fleet_breaker(redis: RedisServer) -> None:
    """Calls from several Python threads while the background thread syncs: the books of the
    breaker balance and nothing hangs."""
    b = shared(redis, "py-threads")
    counts = {"admitted": 0, "refused": 0}
    lock = threading.Lock()

    def run() -> None:
        for i in range(300):
            try:
                p = b.allow()
            except holdoff.BreakerOpenError:
                with lock:
                    counts["refused"] += 1
                continue
            b.record(p, Outcome.FAILURE if i == 150 else Outcome.SUCCESS)
            with lock:
                counts["admitted"] += 1

    workers = [threading.Thread(target=run) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=30)
        assert not w.is_alive()
    assert counts["admitted"] + counts["refused"] == 1200
    assert counts["refused"] > 0
    assert b.snapshot().refusals == counts["refused"]
    b.close()
