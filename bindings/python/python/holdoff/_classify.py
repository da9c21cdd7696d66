"""The default classification of an exception raised by an attempt (``conformance/README.md``,
"Execute": how an error classifies by default). A helper's ``classify_exception=`` replaces it.
"""

from __future__ import annotations

import asyncio

from ._errors import RetryLaterError
from ._holdoff import Outcome

__all__ = ["classify_exception"]

_TIMEOUT = Outcome.TIMEOUT
_FAILURE = Outcome.FAILURE
_CANCELLED = Outcome.CANCELLED

# asyncio.TimeoutError is the builtin TimeoutError from Python 3.11 on.
_TIMEOUTS: tuple[type, ...] = tuple({TimeoutError, asyncio.TimeoutError})
_CANCELLATIONS: tuple[type, ...] = (asyncio.CancelledError, KeyboardInterrupt, SystemExit)

# The usual HTTP clients' exceptions, by module and qualified name, so that nothing is imported
# to classify (an exception of a client that is not installed cannot occur); subclasses count
# too. Timeouts: requests' Timeout (ConnectTimeout, ReadTimeout), httpx's TimeoutException
# (ConnectTimeout, ReadTimeout, WriteTimeout, PoolTimeout), urllib3's TimeoutError, aiohttp's
# ServerTimeoutError (also an asyncio.TimeoutError).
_CLIENT_TIMEOUTS: frozenset[str] = frozenset(
    {
        "requests.exceptions.Timeout",
        "httpx.TimeoutException",
        "httpx._exceptions.TimeoutException",
        "urllib3.exceptions.TimeoutError",
        "aiohttp.client_exceptions.ServerTimeoutError",
        "aiohttp.ServerTimeoutError",
    }
)
# Transport errors that are not OSErrors: httpx's TransportError (ConnectError, ReadError,
# RemoteProtocolError, ...) and aiohttp's ClientConnectionError (ServerDisconnectedError; its
# ClientConnectorError is an OSError too).
_CLIENT_TRANSPORT: frozenset[str] = frozenset(
    {
        "httpx.TransportError",
        "httpx._exceptions.TransportError",
        "aiohttp.client_exceptions.ClientConnectionError",
        "aiohttp.ClientConnectionError",
    }
)


def _named(cls: type, names: frozenset[str]) -> bool:
    return any(f"{c.__module__}.{c.__qualname__}" in names for c in cls.__mro__)


def classify_exception(exc: BaseException) -> Outcome | None:
    """What an exception raised by an attempt means, by default:

    * :class:`holdoff.RetryLaterError` -> ``Outcome.retry_later(exc.delay)``
    * ``TimeoutError`` (``asyncio.TimeoutError``, ``socket.timeout``), ``requests``' ``Timeout``,
      ``httpx.TimeoutException``, ``urllib3.exceptions.TimeoutError``,
      ``aiohttp.ServerTimeoutError`` -> ``Outcome.TIMEOUT`` (the quota charges its
      ``timeout_cost``)
    * ``asyncio.CancelledError``, ``KeyboardInterrupt``, ``SystemExit`` -> ``Outcome.CANCELLED``
      (the caller's cancellation: it ends the call, never retried; the helpers do not ask a
      classifier about these, nor about any other exception that is not an ``Exception``)
    * ``ConnectionError`` and every other ``OSError`` (``requests``' and ``urllib``'s errors
      are), ``httpx.TransportError``, ``aiohttp.ClientConnectionError`` -> ``Outcome.FAILURE``
    * anything else (``AttributeError``, ``TypeError``, ``KeyError``, ...) -> ``None``: a
      programming error, re-raised at once, unretried; it moves nothing.

    The clients' classes are recognised by name: no client is imported.
    """
    if isinstance(exc, RetryLaterError):
        return Outcome.retry_later(exc.delay)
    if isinstance(exc, _TIMEOUTS):
        return _TIMEOUT
    if isinstance(exc, _CANCELLATIONS):
        return _CANCELLED
    cls = type(exc)
    if _named(cls, _CLIENT_TIMEOUTS):
        return _TIMEOUT
    if isinstance(exc, OSError) or _named(cls, _CLIENT_TRANSPORT):
        return _FAILURE
    return None
