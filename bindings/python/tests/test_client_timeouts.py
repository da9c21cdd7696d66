"""The default exception classification counts the read and connect timeouts of the usual HTTP
clients as timeouts (the retry quota charges its timeout cost, 10, not the retry cost, 5).

The real classes are used where the package is installed (``run.sh test`` installs requests and
httpx, which brings urllib3); otherwise, and for aiohttp, stand-in classes with the same module
and qualified names, since holdoff recognises the classes by name and imports none of them."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from typing import Any, Callable

import pytest

import holdoff
from holdoff import Outcome


def stand_in(module: str, qualname: str, *bases: type) -> type:
    """A class that looks like ``module.qualname`` to anyone reading its names."""
    return type(qualname, bases or (Exception,), {"__module__": module, "__qualname__": qualname})


def real_or_stand_ins() -> list[tuple[str, Callable[[], BaseException]]]:
    """(label, factory) of every timeout exception checked: real where importable."""
    out: list[tuple[str, Callable[[], BaseException]]] = []
    try:
        import requests.exceptions as rex

        out += [
            ("requests Timeout", lambda: rex.Timeout("timed out")),
            ("requests ReadTimeout", lambda: rex.ReadTimeout("read timed out")),
            ("requests ConnectTimeout", lambda: rex.ConnectTimeout("connect timed out")),
        ]
    except ImportError:
        timeout = stand_in("requests.exceptions", "Timeout", OSError)
        out += [
            ("requests Timeout (stand-in)", lambda: timeout("timed out")),
            (
                "requests ReadTimeout (stand-in)",
                lambda: stand_in("requests.exceptions", "ReadTimeout", timeout)("read"),
            ),
            (
                "requests ConnectTimeout (stand-in)",
                lambda: stand_in("requests.exceptions", "ConnectTimeout", timeout)("connect"),
            ),
        ]
    try:
        import httpx

        out += [
            ("httpx TimeoutException", lambda: httpx.TimeoutException("timed out")),
            ("httpx ReadTimeout", lambda: httpx.ReadTimeout("read timed out")),
            ("httpx ConnectTimeout", lambda: httpx.ConnectTimeout("connect timed out")),
            ("httpx WriteTimeout", lambda: httpx.WriteTimeout("write timed out")),
            ("httpx PoolTimeout", lambda: httpx.PoolTimeout("pool timed out")),
        ]
    except ImportError:
        base = stand_in("httpx", "TimeoutException")
        out += [
            ("httpx TimeoutException (stand-in)", lambda: base("timed out")),
            (
                "httpx ReadTimeout (stand-in)",
                lambda: stand_in("httpx", "ReadTimeout", base)("read"),
            ),
        ]
    try:
        import urllib3.exceptions as u3

        out += [
            ("urllib3 ReadTimeoutError", lambda: u3.ReadTimeoutError(None, "/", "read timed out")),  # type: ignore[arg-type]
            ("urllib3 ConnectTimeoutError", lambda: u3.ConnectTimeoutError("connect timed out")),
        ]
    except ImportError:
        out.append(
            (
                "urllib3 TimeoutError (stand-in)",
                lambda: stand_in("urllib3.exceptions", "TimeoutError")("timed out"),
            )
        )
    try:
        import aiohttp

        out += [
            ("aiohttp ServerTimeoutError", lambda: aiohttp.ServerTimeoutError("timed out")),
        ]
    except ImportError:
        # Based on OSError rather than asyncio.TimeoutError (as aiohttp's is), so that only the
        # name can make it a timeout.
        server_timeout = stand_in("aiohttp.client_exceptions", "ServerTimeoutError", OSError)
        out += [
            ("aiohttp ServerTimeoutError (stand-in)", lambda: server_timeout("timed out")),
            (
                "aiohttp ConnectionTimeoutError (stand-in)",
                lambda: stand_in(
                    "aiohttp.client_exceptions", "ConnectionTimeoutError", server_timeout
                )("connect"),
            ),
        ]
    out.append(("asyncio.TimeoutError", lambda: asyncio.TimeoutError()))
    return out


TIMEOUTS = real_or_stand_ins()


@pytest.mark.parametrize("make", [m for _, m in TIMEOUTS], ids=[n for n, _ in TIMEOUTS])
def test_client_timeouts_are_timeouts(make: Callable[[], BaseException]) -> None:
    assert holdoff.classify_exception(make()) == Outcome.TIMEOUT


def test_lookalikes_and_other_client_errors_are_not_timeouts() -> None:
    mine = stand_in("myapp.errors", "Timeout", OSError)  # right name, another module: an OSError
    nested = stand_in("requests.exceptions", "Outer.Timeout")  # another qualified name
    assert holdoff.classify_exception(mine("x")) == Outcome.FAILURE
    assert holdoff.classify_exception(nested("x")) is None  # not a client error: a bug
    # Transport errors that are not OSErrors, recognised by name.
    for module, name in (
        ("httpx", "TransportError"),
        ("aiohttp.client_exceptions", "ClientConnectionError"),
    ):
        base = stand_in(module, name)
        assert holdoff.classify_exception(base("x")) == Outcome.FAILURE, name
        assert holdoff.classify_exception(stand_in(module, "Sub", base)("x")) == Outcome.FAILURE
    try:
        import requests.exceptions as rex

        assert holdoff.classify_exception(rex.ConnectionError("refused")) == Outcome.FAILURE
    except ImportError:
        pass
    try:
        import httpx

        assert holdoff.classify_exception(httpx.ConnectError("refused")) == Outcome.FAILURE
    except ImportError:
        pass


@pytest.mark.parametrize("make", [m for _, m in TIMEOUTS], ids=[n for n, _ in TIMEOUTS])
def test_a_client_timeout_costs_the_quotas_timeout_cost(make: Callable[[], BaseException]) -> None:
    clock = holdoff.ManualClock()
    quota = holdoff.RetryQuota()
    policy = holdoff.Policy(holdoff.Breaker(clock=clock), holdoff.RetryBudget(clock=clock), quota)
    seen: list[int] = []
    errors: list[BaseException | None] = [make(), None]

    def sleep(d: float) -> None:
        seen.append(quota.available)  # what the retry cost, before the success refunds it
        clock.advance(d)

    def fetch() -> str:
        e = errors.pop(0)
        if e is not None:
            raise e
        return "ok"

    assert policy.retrying(sleep=sleep).call(fetch) == "ok"
    assert seen == [490]
    assert quota.available == 500  # the success gave the lease back


def test_nothing_is_imported_to_classify() -> None:
    script = textwrap.dedent(
        """
        import sys
        import holdoff
        clients = ("requests", "httpx", "urllib3", "aiohttp")
        before = [m for m in clients if m in sys.modules]
        B = type("Timeout", (OSError,),
                 {"__module__": "requests.exceptions", "__qualname__": "Timeout"})
        S = type("ReadTimeout", (B,),
                 {"__module__": "requests.exceptions", "__qualname__": "ReadTimeout"})
        print(holdoff.classify_exception(S()).name,
              holdoff.classify_exception(OSError()).name,
              before, [m for m in clients if m in sys.modules])
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["timeout", "failure", "[]", "[]"]


def test_async_helper_counts_a_client_timeout_as_a_timeout() -> None:
    name, make = TIMEOUTS[1]  # a ReadTimeout
    clock = holdoff.ManualClock()
    quota = holdoff.RetryQuota()
    policy = holdoff.Policy(holdoff.Breaker(clock=clock), holdoff.RetryBudget(clock=clock), quota)
    seen: list[Any] = []
    errors: list[BaseException | None] = [make(), None]

    async def sleep(d: float) -> None:
        seen.append((d, quota.available))
        clock.advance(d)

    async def fetch() -> str:
        e = errors.pop(0)
        if e is not None:
            raise e
        return "ok"

    assert asyncio.run(policy.retrying(async_sleep=sleep).call_async(fetch)) == "ok", name
    assert seen == [(0.5, 490)]
