"""Retry helpers built only on ``Policy.before_attempt`` and ``Policy.after_attempt``.

Every decision (admit, wait, retry after how long, give up) is the core's; this module only
calls the protected function, turns what happened into an :class:`Outcome`, sleeps the delay the
core returned (never a negative interval) and raises the matching exception.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
from typing import (
    Any,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterator,
    Literal,
    Mapping,
    Optional,
    Tuple,
    TypeVar,
    Union,
    cast,
)

from ._errors import BreakerOpen, GiveUp, PermitError, RetryLater
from ._holdoff import Call, Decision, Outcome, Permit, Wait
from ._holdoff import Policy as _Policy

__all__ = [
    "Attempt",
    "Retrying",
    "classify_exception",
    "retrying",
    "call",
    "call_async",
]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

OutcomeLike = Union[Outcome, Literal["success", "answer", "failure", "timeout", "cancelled"]]
ExceptionClassifier = Callable[[BaseException], OutcomeLike]
ResultClassifier = Callable[[Any], OutcomeLike]
Headers = Union[Mapping[str, str], Any]

_SUCCESS = Outcome.SUCCESS
_FAILURE = Outcome.FAILURE
_TIMEOUT = Outcome.TIMEOUT
_CANCELLED = Outcome.CANCELLED
# Give-up reasons after which the original exception (or result) is what the caller wants: the
# upstream answered for good, or the caller itself cancelled.
_PASS_THROUGH = frozenset({"not_retryable", "cancelled"})
_TIMEOUTS: Tuple[type, ...] = tuple({TimeoutError, asyncio.TimeoutError})
# The timeout exceptions of the usual HTTP clients, by module and qualified name, so that no
# client is imported to classify (an exception of a client that is not installed cannot occur).
# Subclasses count too: requests' ConnectTimeout and ReadTimeout, httpx's ConnectTimeout,
# ReadTimeout, WriteTimeout and PoolTimeout, urllib3's ReadTimeoutError and ConnectTimeoutError.
# aiohttp's ServerTimeoutError is an asyncio.TimeoutError, caught above; it is named too so that
# its subclasses count on Pythons where asyncio.TimeoutError is not the builtin TimeoutError.
_CLIENT_TIMEOUTS = frozenset({
    "requests.exceptions.Timeout",
    "httpx.TimeoutException",
    "httpx._exceptions.TimeoutException",
    "urllib3.exceptions.TimeoutError",
    "aiohttp.client_exceptions.ServerTimeoutError",
    "aiohttp.ServerTimeoutError",
})


def _is_client_timeout(cls: type) -> bool:
    for c in cls.__mro__:
        if f"{c.__module__}.{c.__qualname__}" in _CLIENT_TIMEOUTS:
            return True
    return False


def classify_exception(exc: BaseException) -> Outcome:
    """The default mapping of an exception to an outcome.

    * :class:`holdoff.RetryLater` -> ``Outcome.retry_later(exc.delay)``
    * ``TimeoutError`` / ``asyncio.TimeoutError``, and the read and connect timeouts of the usual
      HTTP clients -> ``Outcome.TIMEOUT`` (the retry quota charges its ``timeout_cost``):
      ``requests.exceptions.Timeout`` (``ReadTimeout``, ``ConnectTimeout``),
      ``httpx.TimeoutException`` and its subclasses, ``urllib3.exceptions.TimeoutError``,
      ``aiohttp.ServerTimeoutError``. They are recognised by their classes' names: nothing is
      imported.
    * ``asyncio.CancelledError``, ``KeyboardInterrupt``, ``SystemExit`` and other
      ``BaseException``s that are not ``Exception``s -> ``Outcome.CANCELLED`` (counts for nothing,
      frees a probe slot, never retried)
    * any other ``Exception`` -> ``Outcome.FAILURE``
    """
    if isinstance(exc, RetryLater):
        return Outcome.retry_later(exc.delay)
    if isinstance(exc, _TIMEOUTS):
        return _TIMEOUT
    if not isinstance(exc, Exception):
        return _CANCELLED
    if _is_client_timeout(type(exc)):
        return _TIMEOUT
    return _FAILURE


def _never_negative(delay: Optional[float]) -> float:
    # The core never returns a negative delay; the guard keeps time.sleep/asyncio.sleep safe even
    # for a user-supplied sleep function's arithmetic.
    return delay if delay is not None and delay > 0.0 else 0.0


def _abandon(policy: _Policy, permit: Permit) -> None:
    """Something raised between admission and recording (a classifier, an outcome or status the
    core refuses, a response without ``status_code``): record the permit as ``cancelled`` so
    that a probe frees its slot now instead of at the probe timeout. Cancelled counts for
    nothing, so the breaker and the budget are as if the attempt had not been made. The
    breaker's own ``record`` is used, not ``after_attempt``: it needs no ``Call`` (which may be
    the thing that failed)."""
    if not permit.recorded:
        try:
            policy.breaker.record(permit, _CANCELLED)
        except PermitError:
            pass  # recorded meanwhile (the core records a refused status itself)


class Attempt:
    """One attempt of a retried block, used as a context manager inside
    ``for attempt in retrying:`` (or ``async for``).

    On a normal exit the attempt records ``Outcome.SUCCESS`` unless :meth:`record` or
    :meth:`response` said otherwise. On an exception it records the classified exception; a
    retryable one is suppressed and the loop goes on after the core's delay. ``decision`` holds
    the core's :class:`Decision` after the block.
    """

    __slots__ = ("_owner", "_call", "permit", "number", "_outcome", "_response", "decision")

    def __init__(self, owner: "Retrying", call: Call, permit: Permit, number: int) -> None:
        self._owner = owner
        self._call = call
        self.permit = permit
        self.number = number
        self._outcome: Optional[OutcomeLike] = None
        self._response: Optional[Tuple[int, Any]] = None
        self.decision: Optional[Decision] = None

    def record(self, outcome: OutcomeLike) -> None:
        """Sets the outcome recorded when the block exits normally (default: success)."""
        self._outcome = outcome

    def response(self, status: int, headers: Headers = None) -> None:
        """Records an HTTP response instead: the policy's classifier turns (status, headers)
        into the outcome at the decision's clock reading (Retry-After honoured)."""
        self._response = (status, headers)

    def __enter__(self) -> "Attempt":
        return self

    def __exit__(self, exc_type: Any, exc: Optional[BaseException], tb: Any) -> bool:
        policy = self._owner.policy
        if exc is None:
            try:
                if self._response is not None:
                    d, _ = policy.after_response(self._call, self.permit, *self._response)
                else:
                    d = policy.after_attempt(self._call, self.permit, self._outcome or _SUCCESS)
            except BaseException:
                _abandon(policy, self.permit)
                raise
            self.decision = d
            if d.action == "give_up" and d.reason not in _PASS_THROUGH:
                raise GiveUp(cast(str, d.reason), d.server_delay, self._call.attempts)
            return False
        d = self._owner._after_exception(self._call, self.permit, exc)
        self.decision = d
        if d.action == "retry":
            return True
        if d.action == "give_up" and d.reason not in _PASS_THROUGH:
            raise GiveUp(cast(str, d.reason), d.server_delay, self._call.attempts) from exc
        return False


class Retrying:
    """Retries with a :class:`Policy`: the breaker admits, the budget decides, the quota pays.

    ``sleep`` (default ``time.sleep``) and ``async_sleep`` (default ``asyncio.sleep``) are called
    with the core's delays in seconds, never negative; inject fakes in tests.
    ``classify_exception`` maps an exception to an :class:`Outcome` (default
    :func:`holdoff.classify_exception`). ``classify_result`` maps a return value to an outcome
    (default: success). ``http=True`` treats return values as HTTP responses (anything with
    ``status_code`` and ``headers``, such as ``requests`` and ``httpx`` responses) and lets the
    policy's classifier read them, Retry-After included.

    Use it as a decorator (sync or ``async def``), call :meth:`call` / :meth:`call_async`, or
    iterate: ``for attempt in retrying: with attempt: ...``.

    Raises :class:`BreakerOpen` when the breaker refuses beyond the budget, :class:`GiveUp`
    (``reason``, ``retry_after``, ``attempts``, ``result``; the last exception as ``__cause__``)
    when the budget gives up. A final answer (``not_retryable``) or a cancellation re-raises the
    original exception or returns the result.
    """

    def __init__(
        self,
        policy: _Policy,
        *,
        sleep: Callable[[float], Any] = time.sleep,
        async_sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        classify_exception: ExceptionClassifier = classify_exception,
        classify_result: Optional[ResultClassifier] = None,
        http: bool = False,
    ) -> None:
        if not isinstance(policy, _Policy):
            raise TypeError(f"policy must be a holdoff.Policy, not {type(policy).__name__}")
        for name, fn in (("sleep", sleep), ("async_sleep", async_sleep),
                         ("classify_exception", classify_exception)):
            if not callable(fn):
                raise TypeError(f"{name} must be callable, not {type(fn).__name__}")
        if classify_result is not None and not callable(classify_result):
            raise TypeError(
                f"classify_result must be callable, not {type(classify_result).__name__}"
            )
        if classify_result is not None and http:
            raise TypeError("give either classify_result or http=True, not both")
        self.policy = policy
        self.sleep = sleep
        self.async_sleep = async_sleep
        self.classify_exception = classify_exception
        self.classify_result = classify_result
        self.http = http

    # -- shared pieces ---------------------------------------------------------------------

    def _refused(self, stop: Any) -> BreakerOpen:
        snap = self.policy.breaker.snapshot()
        return BreakerOpen(stop.retry_after, snap.state, snap.episode)

    # The two ways an attempt is recorded. Whatever raises in between (the classifiers, an
    # outcome, delay or status the core refuses, a response without `status_code`) records the
    # permit as cancelled before the exception propagates: a probe is never lost.

    def _after_result(self, call: Call, permit: Permit, result: Any) -> Decision:
        try:
            if self.http:
                d, _ = self.policy.after_response(
                    call, permit, result.status_code, result.headers
                )
                return d
            outcome = _SUCCESS if self.classify_result is None else self.classify_result(result)
            return self.policy.after_attempt(call, permit, outcome)
        except BaseException:
            _abandon(self.policy, permit)
            raise

    def _after_exception(self, call: Call, permit: Permit, exc: BaseException) -> Decision:
        try:
            return self.policy.after_attempt(call, permit, self.classify_exception(exc))
        except BaseException:
            _abandon(self.policy, permit)
            raise

    def _give_up(self, d: Decision, call: Call, result: Any = None) -> GiveUp:
        return GiveUp(cast(str, d.reason), d.server_delay, call.attempts, result)

    # -- sync --------------------------------------------------------------------------------

    def call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Calls ``fn(*args, **kwargs)``, retrying as the policy decides."""
        return cast(T, self._loop(Call(), fn, args, kwargs))

    def _loop(self, call: Call, fn: Callable[..., Any], args: Any, kwargs: Any) -> Any:
        before = self.policy.before_attempt
        after_exception = self._after_exception
        while True:
            b = before(call)
            if b.__class__ is not Permit:
                if b.__class__ is Wait:
                    self.sleep(_never_negative(b.delay))
                    continue
                raise self._refused(b)
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:
                d = after_exception(call, b, exc)
                if d.action == "retry":
                    self.sleep(_never_negative(d.delay))
                    continue
                if d.action == "done" or d.reason in _PASS_THROUGH:
                    raise
                raise self._give_up(d, call) from exc
            d = self._after_result(call, b, result)
            if d.action == "done":
                return result
            if d.action == "retry":
                self.sleep(_never_negative(d.delay))
                continue
            if d.reason in _PASS_THROUGH:
                return result
            raise self._give_up(d, call, result)

    def _resume(
        self,
        call: Call,
        fn: Callable[..., Any],
        args: Any,
        kwargs: Any,
        d: Optional[Decision],
        exc: Optional[BaseException],
        result: Any,
        before: Any = None,
    ) -> Any:
        """The decorator's slow path: finishes what its inlined first attempt started (a
        decision to act on, or a `before_attempt` that was not a permit), then loops."""
        if d is not None:
            if d.action == "retry":
                self.sleep(_never_negative(d.delay))
            elif exc is not None:
                if d.action == "done" or d.reason in _PASS_THROUGH:
                    raise exc
                raise self._give_up(d, call) from exc
            else:
                if d.action == "done" or d.reason in _PASS_THROUGH:
                    return result
                raise self._give_up(d, call, result)
        elif before is not None:
            if before.__class__ is not Wait:
                raise self._refused(before)
            self.sleep(_never_negative(before.delay))
        return self._loop(call, fn, args, kwargs)

    def __iter__(self) -> Iterator[Attempt]:
        call = Call()
        number = 0
        while True:
            b = self.policy.before_attempt(call)
            if b.__class__ is not Permit:
                if b.__class__ is Wait:
                    self.sleep(_never_negative(b.delay))
                    continue
                raise self._refused(b)
            number += 1
            attempt = Attempt(self, call, b, number)
            try:
                yield attempt
            except BaseException:  # the loop was left (GeneratorExit) or thrown into
                _abandon(self.policy, b)
                raise
            d = attempt.decision
            if d is None:
                _abandon(self.policy, b)
                raise RuntimeError("use each attempt as a context manager: `with attempt: ...`")
            if d.action != "retry":
                return
            self.sleep(_never_negative(d.delay))

    # -- async -------------------------------------------------------------------------------

    async def call_async(self, fn: Callable[..., Awaitable[T]], /, *args: Any, **kwargs: Any) -> T:
        """Awaits ``fn(*args, **kwargs)``, retrying as the policy decides; sleeps with
        ``async_sleep``. A cancellation while the call is in flight is recorded as
        ``cancelled`` (a probe slot is freed) and re-raised."""
        before = self.policy.before_attempt
        after_exception = self._after_exception
        call = Call()
        while True:
            b = before(call)
            if b.__class__ is not Permit:
                if b.__class__ is Wait:
                    await self.async_sleep(_never_negative(b.delay))
                    continue
                raise self._refused(b)
            try:
                result = await fn(*args, **kwargs)
            except BaseException as exc:
                d = after_exception(call, b, exc)
                if d.action == "retry":
                    await self.async_sleep(_never_negative(d.delay))
                    continue
                if d.action == "done" or d.reason in _PASS_THROUGH:
                    raise
                raise self._give_up(d, call) from exc
            d = self._after_result(call, b, result)
            if d.action == "done":
                return result
            if d.action == "retry":
                await self.async_sleep(_never_negative(d.delay))
                continue
            if d.reason in _PASS_THROUGH:
                return result
            raise self._give_up(d, call, result)

    async def __aiter__(self) -> AsyncIterator[Attempt]:
        call = Call()
        number = 0
        while True:
            b = self.policy.before_attempt(call)
            if b.__class__ is not Permit:
                if b.__class__ is Wait:
                    await self.async_sleep(_never_negative(b.delay))
                    continue
                raise self._refused(b)
            number += 1
            attempt = Attempt(self, call, b, number)
            try:
                yield attempt
            except BaseException:  # the loop was left (GeneratorExit) or thrown into
                _abandon(self.policy, b)
                raise
            d = attempt.decision
            if d is None:
                _abandon(self.policy, b)
                raise RuntimeError("use each attempt as a context manager: `with attempt: ...`")
            if d.action != "retry":
                return
            await self.async_sleep(_never_negative(d.delay))

    # -- decorator ---------------------------------------------------------------------------

    def __call__(self, fn: F) -> F:
        """Decorates a function or an ``async def`` so every call retries as the policy
        decides."""
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                return await self.call_async(fn, *args, **kwargs)

            return cast(F, async_wrapper)

        # The first attempt is inlined (the common case: admitted, succeeded, done), so a
        # decorated call costs three native calls and no extra Python frame; anything else goes
        # to the general loop.
        before = self.policy.before_attempt
        after = self.policy.after_attempt
        after_exception = self._after_exception
        plain = self.classify_result is None and not self.http
        after_result = self._after_result
        resume = self._resume
        done = Decision.DONE

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            call = Call()
            b = before(call)
            if b.__class__ is not Permit:
                return resume(call, fn, args, kwargs, None, None, None, b)
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:
                return resume(call, fn, args, kwargs, after_exception(call, b, exc), exc, None)
            d = after(call, b, _SUCCESS) if plain else after_result(call, b, result)
            if d is done:
                return result
            return resume(call, fn, args, kwargs, d, None, result)

        return cast(F, wrapper)


def retrying(policy: _Policy, **options: Any) -> Retrying:
    """``Retrying(policy, **options)``: a decorator, a ``call`` helper and an attempt
    iterator in one object."""
    return Retrying(policy, **options)


def call(policy: _Policy, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Calls ``fn(*args, **kwargs)`` with the policy's retries, sleeping with ``time.sleep``."""
    return Retrying(policy).call(fn, *args, **kwargs)


async def call_async(
    policy: _Policy, fn: Callable[..., Awaitable[T]], /, *args: Any, **kwargs: Any
) -> T:
    """Awaits ``fn(*args, **kwargs)`` with the policy's retries, sleeping with
    ``asyncio.sleep``."""
    return await Retrying(policy).call_async(fn, *args, **kwargs)
