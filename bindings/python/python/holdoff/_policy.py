"""``holdoff.Policy``: the extension's policy with the retry helpers on it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Coroutine
from typing import TYPE_CHECKING, Any, Callable, TypeVar, overload

from . import _holdoff
from ._classify import classify_exception
from ._holdoff import DEFAULT_TOTAL_TIMEOUT
from ._retrying import (
    _DEFAULTS,
    AfterAttempt,
    AsyncSleep,
    BeforeSleep,
    ExceptionClassifier,
    ResultClassifier,
    Retrying,
    Seconds,
    Sleep,
)

if TYPE_CHECKING:
    from typing_extensions import ParamSpec, Self

    P = ParamSpec("P")

__all__ = ["Policy", "retrying"]

T = TypeVar("T")


class Policy(_holdoff.Policy):
    """One upstream's breaker, retry budget, optional quota and HTTP classifier.

    ``before_attempt(call)`` / ``after_attempt(call, permit, outcome)`` /
    ``after_response(call, permit, status, headers)`` are the core operations for callers that
    drive each attempt (``call`` a :class:`PolicyCall`); the helpers run the core's retry loop
    (:class:`Execution`):

    * ``policy.call(fn, *args, **kwargs)`` and ``await policy.call_async(fn, ...)``
    * ``@policy`` (sync or ``async def``) or ``@policy.retrying(attempt_timeout=..., ...)``
    * ``for attempt in policy.retrying(): with attempt: ...`` (and ``async for``)

    A decorated function keeps its signature for type checkers.

    ``close()`` (or ``with policy:``) closes the breaker's fleet, if it has one.
    """

    def close(self) -> None:
        """Closes the breaker's fleet (:meth:`Breaker.close`): its background threads stopped
        and joined, its connections closed. Idempotent."""
        self.breaker.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_args: object) -> None:
        self.close()

    def retrying(
        self,
        *,
        attempt_timeout: Seconds | None = None,
        total_timeout: Seconds | None = DEFAULT_TOTAL_TIMEOUT,
        sleep: Sleep = time.sleep,
        async_sleep: AsyncSleep = asyncio.sleep,
        before_sleep: BeforeSleep | None = None,
        after_attempt: AfterAttempt | None = None,
        classify_exception: ExceptionClassifier = classify_exception,
        classify_result: ResultClassifier | None = None,
        http: bool = False,
    ) -> Retrying:
        """A :class:`Retrying` for this policy: the options are :class:`Retrying`'s, keyword
        only (an unknown one is a ``TypeError``)."""
        return Retrying(
            self,
            attempt_timeout=attempt_timeout,
            total_timeout=total_timeout,
            sleep=sleep,
            async_sleep=async_sleep,
            before_sleep=before_sleep,
            after_attempt=after_attempt,
            classify_exception=classify_exception,
            classify_result=classify_result,
            http=http,
        )

    def call(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """Calls ``fn(*args, **kwargs)`` with the default options (``time.sleep``)."""
        return _DEFAULTS._run(self._begin(), fn, args, kwargs)

    async def call_async(
        self, fn: Callable[P, Awaitable[T]], /, *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """Awaits ``fn(*args, **kwargs)`` with the default options (``asyncio.sleep``)."""
        return await Retrying(self).call_async(fn, *args, **kwargs)

    @overload
    def __call__(
        self, fn: Callable[P, Coroutine[Any, Any, T]]
    ) -> Callable[P, Coroutine[Any, Any, T]]: ...
    @overload
    def __call__(self, fn: Callable[P, T]) -> Callable[P, T]: ...
    def __call__(self, fn: Callable[P, Any]) -> Callable[P, Any]:
        """Decorator: ``@policy`` retries every call of ``fn`` with the default options."""
        return Retrying(self)(fn)


#: ``retrying(policy, ...)`` is ``policy.retrying(...)``: the same function, the same options.
retrying = Policy.retrying
