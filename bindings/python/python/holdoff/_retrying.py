"""The retry helpers: one loop for sync code (``Retrying.__iter__``) and one for ``async def``
(``Retrying.__aiter__``), each stepping the core's :class:`Execution`. ``call_async`` and the
async decorator are the async loop around one function call; ``call``, the sync decorator and
``policy.call`` run the same steps as the sync loop around one function call without an
:class:`Attempt` per try (``Retrying._run``: two calls into the extension for a call whose first
attempt succeeds).

The core decides everything (admit, wait how long, give up, what the caller gets); a loop runs
the attempt, tells the core what it came to (classifying an exception or a value), sleeps the
core's delay, and turns the verdict into a return value or an exception.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Coroutine, Iterator, Mapping
from datetime import timedelta
from types import TracebackType
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Optional,
    TypeVar,
    Union,
    cast,
    overload,
)

from ._classify import classify_exception
from ._errors import (
    AttemptTimeoutError,
    BreakerOpenError,
    GiveUpError,
    InputTypeError,
    InvalidInputError,
)
from ._holdoff import DEFAULT_TOTAL_TIMEOUT, AttemptPlan, Execution, Outcome, Verdict, WaitPlan
from ._holdoff import Policy as _Policy
from ._names import GiveUpReason, SimpleOutcomeName
from ._timer import AttemptTimer, sleeping
from ._tracing import give_up_event, retry_event

if TYPE_CHECKING:
    # Only the type checker reads these: they are in `typing` from Python 3.10 and 3.11 on.
    from typing_extensions import ParamSpec, Self

    P = ParamSpec("P")

__all__ = ["Attempt", "Retrying", "call", "call_async"]

T = TypeVar("T")

Seconds = Union[float, int, timedelta]
OutcomeLike = Union[Outcome, SimpleOutcomeName]
#: ``sleep``: blocks for a wait (seconds); what it returns is ignored.
Sleep = Callable[[float], object]
#: ``async_sleep``: an awaitable that waits (seconds), or times an async attempt.
AsyncSleep = Callable[[float], Awaitable[object]]
#: ``classify_exception``: an exception's outcome, ``None`` for a programming error.
ExceptionClassifier = Callable[[BaseException], Optional[OutcomeLike]]
#: ``classify_result``: a returned value's outcome.
ResultClassifier = Callable[[Any], OutcomeLike]
#: ``before_sleep``: sees each wait before it is slept.
BeforeSleep = Callable[[WaitPlan], object]
#: ``after_attempt``: sees each attempt's plan and the outcome it was recorded as.
AfterAttempt = Callable[[AttemptPlan, Outcome], object]
Headers = Union[Mapping[str, str], Any]

_SUCCESS = Outcome.SUCCESS
_TIMEOUT = Outcome.TIMEOUT
_OUTCOME_NAMES = frozenset(("success", "answer", "failure", "timeout", "cancelled"))
_UNSET: Any = object()
_NOT_ENTERED = "use each attempt as a context manager: `with attempt: ...`"


def _checked(outcome: Any, field: str) -> OutcomeLike:
    """A classifier's answer, which must be an :class:`Outcome` or its name: anything else is
    the classifier's bug, an :class:`InputTypeError` (a ``TypeError``) naming the classifier."""
    if isinstance(outcome, Outcome) or (type(outcome) is str and outcome in _OUTCOME_NAMES):
        return cast(OutcomeLike, outcome)
    raise InputTypeError(
        field,
        f"must return a holdoff.Outcome or its name (success, answer, failure, timeout, "
        f"cancelled), not {outcome!r}",
    )


@contextlib.contextmanager
def _cancelled_on_failure(ex: Execution) -> Iterator[None]:
    """Cancels ``ex`` when the block fails or is left: the caller's cancellation
    (``KeyboardInterrupt``, ``CancelledError``), the loop abandoned mid-attempt, or a hook or
    sleeper that failed. The call ends, and the retry it paid for is given back."""
    try:
        yield
    except BaseException:
        ex.cancel()
        raise


def _discard(awaitable: Any) -> None:
    """Closes an awaitable that will not be awaited (no "never awaited" warning)."""
    close = getattr(awaitable, "close", None)
    if close is not None:
        close()


class Attempt:
    """One attempt of a retried block, used as a context manager inside
    ``for attempt in retrying:`` (or ``async for``).

    When the block exits normally the attempt is recorded from, in this order: the status and
    headers given to :meth:`response`; the outcome given to :meth:`record`; the value given to
    :meth:`set_result`, classified as the helper's options say (``http=True``: a response
    object; ``classify_result``); else a success. An exception is classified
    (``classify_exception``); a retryable one is suppressed and the loop goes on after the
    core's delay; a final one propagates (see :class:`Retrying`). Inside ``async for`` the block
    runs under the attempt's time limit.
    """

    # Defaults for what a block may set; an attempt sets only what it uses.
    _task: asyncio.Task[Any] | None = None
    _timer: AttemptTimer | None = None
    _next: Any = None
    _value: Any = _UNSET
    _outcome: OutcomeLike | None = None
    _status: tuple[int, Any] | None = None
    _error: BaseException | None = None

    def __init__(self, owner: Retrying, ex: Execution, plan: AttemptPlan) -> None:
        self._owner = owner
        self._ex = ex
        #: The core's plan of this attempt (``number``, ``probe``, ``time_limit``).
        self.plan = plan

    @property
    def number(self) -> int:
        """1 for the first attempt."""
        return self.plan.number

    @property
    def probe(self) -> bool:
        """Whether the attempt probes an open breaker."""
        return self.plan.probe

    @property
    def time_limit(self) -> float | None:
        """Seconds the attempt may take (``None``: no limit)."""
        return self.plan.time_limit

    @property
    def result(self) -> Any:
        """The value given to :meth:`set_result` (``None`` if none)."""
        return None if self._value is _UNSET else self._value

    def set_result(self, value: Any) -> None:
        """The block's value: classified when the block exits normally, returned by ``call``,
        attached to a :class:`GiveUpError` as ``result``."""
        self._value = value

    def record(self, outcome: OutcomeLike) -> None:
        """The outcome recorded when the block exits normally (default: success)."""
        self._outcome = outcome

    def response(self, status: int, headers: Headers = None) -> None:
        """Records an HTTP response by status and headers instead: the policy's classifier reads
        them (Retry-After honoured)."""
        self._status = (status, headers)

    def __enter__(self) -> Self:
        if self._task is not None:
            limit = self.plan.time_limit
            if limit is not None:
                try:
                    self._timer = AttemptTimer(self._task, limit, self._owner.async_sleep)
                except BaseException:
                    # The helper's own sleeper failed before the block ran: a programming
                    # error, reported as one (never as a cancellation), and it propagates.
                    self._next = self._ex.complete("bug")
                    self._after()
                    raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        fired = caller = False
        failed: BaseException | None = None
        timer = self._timer
        if timer is not None:
            self._timer = None
            fired = timer.disarm()  # the timer's own cancellation, and only it, taken back
            failed = timer.error
            # The caller cancelled too (in the timer's turn, or after it): the caller's.
            caller = fired and timer.caller_cancelled()
        step = self._next = self._report(exc, fired, failed, caller)
        if type(step) is not Verdict:
            return True  # a wait, then the next attempt: the attempt's exception is suppressed
        kind = step.kind
        if kind == "return" or (exc is not None and kind in ("rethrow", "cancelled")):
            return False
        raise self._owner._verdict_error(self._ex, step, self._error, self.result)

    def _report(
        self, exc: BaseException | None, fired: bool, failed: BaseException | None, caller: bool
    ) -> Any:
        """Tells the core what this attempt came to; returns its next step. The caller's own
        cancellation (``KeyboardInterrupt``, ``SystemExit``, a ``CancelledError`` not the
        timer's: any exception that is not an ``Exception``) ends the call; no classifier is
        asked. Anything raised on the way (a classifier, a response without ``status_code``, an
        outcome the core refuses, the timer's sleeper) is a programming error: the attempt is
        recorded as one (moving nothing), and it propagates."""
        owner = self._owner
        ex = self._ex
        try:
            if caller or (
                exc is not None
                and not isinstance(exc, Exception)
                and not (fired and isinstance(exc, asyncio.CancelledError))
            ):
                # The caller's cancellation: never retried (at or after the attempt's limit
                # the breaker records a timeout).
                self._error = exc
                step = ex.complete("cancelled")
            elif failed is not None:
                raise failed
            elif fired:
                step = self._timed_out(None)
            elif exc is None:
                # A sync attempt that ran past its limit (it cannot be interrupted) is what it
                # returned: the value is there, and sending the request again would not undo it.
                if self._status is not None:
                    step = ex.complete_response(*self._status)
                elif self._outcome is not None:
                    step = ex.complete("returned", self._outcome)
                else:
                    step = owner._returned(ex, self._value)
            else:
                self._error = exc
                step = owner._raised(ex, exc)
        except BaseException:
            owner._report_failed(ex, self.plan)
            raise
        self._after()
        return step

    def _after(self) -> None:
        """The after-attempt hook (see :meth:`Retrying._after`)."""
        self._owner._after(self._ex, self.plan)

    def _timed_out(self, cause: BaseException | None) -> Any:
        error = AttemptTimeoutError(self.plan.number, cast(float, self.plan.time_limit))
        error.__cause__ = cause
        self._error = error
        return self._ex.complete("raised", _TIMEOUT)


class Retrying:
    """Retries with a :class:`Policy`: the breaker admits, the budget decides, the quota pays,
    all in the core's retry loop (:class:`Execution`).

    Options (keyword-only):

    * ``attempt_timeout``: seconds (float or ``timedelta``) one attempt may take; ``None``
      (default): only the total timeout bounds it.
    * ``total_timeout``: seconds the whole call may take, waits included (default
      :data:`DEFAULT_TOTAL_TIMEOUT`, 60 s); ``None``: only the budget bounds it. A retry whose
      wait would not end in time gives up now (``reason`` ``"total_timeout"``).
    * ``sleep`` (default ``time.sleep``) and ``async_sleep`` (default ``asyncio.sleep``): called
      with each wait in seconds (never negative); ``async_sleep(limit)`` also times async
      attempts (inject fakes that move a :class:`ManualClock` in tests).
    * ``before_sleep(wait)``: called with each :class:`WaitPlan` (``attempts``, ``delay``,
      ``source``, ``capped``, ``server_delay``) before sleeping.
    * ``after_attempt(plan, outcome)``: called after each attempt with its
      :class:`AttemptPlan` and the :class:`Outcome` it was recorded as.
    * ``classify_exception(exc)``: an exception's outcome, or ``None`` for a programming error
      (default :func:`holdoff.classify_exception`). It sees only instances of ``Exception``:
      the caller's own cancellation is never classified (see below).
    * ``classify_result(value)``: a returned value's outcome (default: success).
    * ``http=True``: returned values are HTTP responses (``status_code`` and ``headers``, as
      ``requests`` and ``httpx`` responses have), classified by the policy's classifier.

    What the caller gets: the value (a success, or a final answer returned, such as a 404
    response); the attempt's own exception, unchanged (a final answer raised, an exception
    classified as a success, a programming error: unretried, it moves nothing; the caller's
    cancellation); :class:`BreakerOpenError` when the breaker refuses (a first attempt, or a
    retry it keeps waiting past the budget); :class:`GiveUpError` for any other give-up (past
    the total timeout its ``retry_after`` is the breaker's next probe). Both are
    :class:`UpstreamUnavailableError`, with the last exception as ``__cause__`` or the last
    value as ``result``. A response whose status is not a status (above 999) raises
    :class:`InvalidInputError` naming ``status``.

    The caller's own cancellation (``KeyboardInterrupt``, ``SystemExit``, the task's
    ``CancelledError``: any exception that is not an ``Exception``), during an attempt or a
    wait, always ends the call and propagates unchanged: it is never retried, never classified,
    and its cancellation request is never taken back (if it comes at or after the attempt's
    limit, the breaker records that attempt as a timeout). A retry already paid for by the
    quota and then not made gives its tokens back.

    Async attempts are cut at their time limit (:class:`AttemptTimeoutError`, recorded as a
    timeout); only the timer's own cancellation is taken back (``Task.uncancel``). A caller who
    cancels in the same event-loop turn as the timer, or after it, gets the cancellation (from
    Python 3.11, which counts cancellation requests). Sync attempts cannot be interrupted: one
    that runs past its limit counts as what it returned or raised, and the total timeout still
    bounds the waits.

    With ``opentelemetry-api`` installed, each wait before a retry adds a ``holdoff.retry``
    event, and a call ending in ``GiveUpError`` or ``BreakerOpenError`` a ``holdoff.give_up``
    event, to the caller's current span when it is recording (``holdoff._tracing`` lists their
    attributes); a call whose first attempt succeeds adds nothing.

    Use it as a decorator (sync or ``async def``), call :meth:`call` / :meth:`call_async`, or
    iterate: ``for attempt in retrying: with attempt: ...``. Hooks, classifiers and sleepers
    that fail end the call with their exception (a probe is never held, a retry paid for is
    given back); a failure while reporting an attempt records it as a programming error
    (moving nothing), and ``after_attempt`` still sees it. A classifier that returns something
    other than an :class:`Outcome` or its name raises :class:`InputTypeError` naming it; a
    sleeper of the wrong kind (``sleep`` returning an awaitable, ``async_sleep`` returning none)
    a ``TypeError`` naming it, when the helper is made where it can be told then (a coroutine
    function as ``sleep``, ``time.sleep`` as ``async_sleep``), else before the attempt it would
    time or at the wait.
    """

    def __init__(
        self,
        policy: _Policy,
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
    ) -> None:
        if not isinstance(policy, _Policy):
            raise TypeError(f"policy must be a holdoff.Policy, not {type(policy).__name__}")
        required: tuple[tuple[str, object], ...] = (
            ("sleep", sleep),
            ("async_sleep", async_sleep),
            ("classify_exception", classify_exception),
        )
        for name, fn in required:
            if not callable(fn):
                raise TypeError(f"{name} must be callable, not {type(fn).__name__}")
        optional: tuple[tuple[str, object], ...] = (
            ("classify_result", classify_result),
            ("before_sleep", before_sleep),
            ("after_attempt", after_attempt),
        )
        for name, fn in optional:
            if fn is not None and not callable(fn):
                raise TypeError(f"{name} must be callable or None, not {type(fn).__name__}")
        # What can be told before the first attempt: a sleeper of the wrong kind.
        if inspect.iscoroutinefunction(sleep):
            raise TypeError(
                "sleep must block, not be a coroutine function (give it as async_sleep)"
            )
        if async_sleep is cast(Any, time.sleep):
            raise TypeError(
                "async_sleep must return an awaitable; time.sleep blocks (give it as sleep)"
            )
        if not isinstance(http, bool):
            raise TypeError(f"http must be a bool, not {type(http).__name__}")
        if classify_result is not None and http:
            raise TypeError("give either classify_result or http=True, not both")
        # Checked now (InvalidConfigError naming execute.attempt_timeout or
        # execute.total_timeout);
        # each call is a fresh copy of this one.
        self._template = Execution(
            policy, attempt_timeout=attempt_timeout, total_timeout=total_timeout
        )
        self.attempt_timeout = self._template.attempt_timeout
        self.total_timeout = self._template.total_timeout
        self.sleep = sleep
        self.async_sleep = async_sleep
        self.before_sleep = before_sleep
        self.after_attempt = after_attempt
        self.classify_exception = classify_exception
        self.classify_result = classify_result
        self.http = http

    @property
    def policy(self) -> _Policy:
        """The policy every call goes through."""
        return self._template.policy

    # -- the loops -------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Attempt]:
        """The sync retry loop: yields each admitted attempt; sleeps with ``sleep``."""
        ex = self._template.fresh()
        for item in self._steps(ex):
            with _cancelled_on_failure(ex):
                if not isinstance(item, WaitPlan):
                    yield item
                    continue
                if self.before_sleep is not None:
                    self.before_sleep(item)
                slept = self.sleep(item.delay)
                if slept is not None and inspect.isawaitable(slept):
                    _discard(slept)
                    raise TypeError(
                        "sleep must block, not return an awaitable (give an "
                        "async sleeper as async_sleep)"
                    )

    async def __aiter__(self) -> AsyncIterator[Attempt]:
        """The async retry loop: yields each admitted attempt, timed by its limit inside
        ``with attempt:``; sleeps with ``async_sleep``."""
        ex = self._template.fresh()
        for item in self._steps(ex):
            with _cancelled_on_failure(ex):
                if isinstance(item, WaitPlan):
                    if self.before_sleep is not None:
                        self.before_sleep(item)
                    await sleeping(self.async_sleep, item.delay)
                else:
                    item._task = asyncio.current_task()
                    yield item

    # -- what the loops share: the steps, a misused attempt, a verdict's exception --------------

    def _steps(self, ex: Execution) -> Iterator[Attempt | WaitPlan]:
        """The steps of one call, for either loop: each admitted attempt (the caller's block
        runs it, and its exit records it) and each wait (the loop sleeps it). Ends when an
        attempt's exit surfaced the verdict; raises the verdict's error when the call ends
        refused, past the budget or the total timeout, or when a block skipped ``with
        attempt:``."""
        step = ex.next_step()
        attempt: Attempt | None = None
        while True:
            if type(step) is AttemptPlan:
                attempt = Attempt(self, ex, step)
                yield attempt
                step = attempt._next
                if step is None:  # the block never went through `with attempt:`
                    raise self._not_entered(attempt)
                if type(step) is Verdict:  # the attempt's exit surfaced it
                    return
            elif type(step) is WaitPlan:
                retry_event(step, ex.last_outcome)
                yield step
                step = ex.next_step()
            elif attempt is None:
                raise self._verdict_error(ex, step, None, None)
            else:
                raise self._verdict_error(ex, step, attempt._error, attempt.result)

    @staticmethod
    def _not_entered(attempt: Attempt) -> RuntimeError:
        attempt._next = attempt._ex.complete("bug")
        attempt._after()
        return RuntimeError(_NOT_ENTERED)

    @staticmethod
    def _verdict_error(
        ex: Execution, v: Verdict, cause: BaseException | None, result: Any
    ) -> BaseException:
        """The exception of ``ex``'s verdict ``v`` when it is neither a return nor the attempt's
        own exception: ``BreakerOpenError`` or ``GiveUpError`` (``cause``, the last attempt's
        exception, as ``__cause__``; ``result``, its value, as ``result``), or a cancellation
        no exception carried (a value classified ``cancelled``)."""
        error: BaseException
        if v.kind in ("give_up", "breaker_open"):
            give_up_event(v)
        if v.kind == "give_up":
            error = GiveUpError(
                cast(GiveUpReason, v.reason),
                v.retry_after,
                v.attempts,
                result,
                server_delay=v.server_delay,
                capped=v.capped,
            )
        elif v.kind == "breaker_open":
            s = ex.policy.breaker.snapshot()
            error = BreakerOpenError(
                v.retry_after, s.state, s.episode, attempts=v.attempts, result=result
            )
        else:
            error = asyncio.CancelledError()
        error.__cause__ = cause
        return error

    def _returned(self, ex: Execution, value: Any) -> Any:
        """Reports an attempt that returned ``value`` (``_UNSET``: none given), classified as the
        options say; returns the next step."""
        if value is _UNSET:
            return ex.complete("returned", _SUCCESS)
        if self.http:
            return ex.complete_response(value.status_code, value.headers)
        classify = self.classify_result
        if classify is not None:
            return ex.complete("returned", _checked(classify(value), "classify_result"))
        return ex.complete("returned", _SUCCESS)

    def _raised(self, ex: Execution, exc: BaseException) -> Any:
        """Reports an attempt that raised ``exc`` (an ``Exception``), classified by
        ``classify_exception`` (``None``: a programming error); returns the next step."""
        said = self.classify_exception(exc)
        if said is None:
            return ex.complete("bug")
        return ex.complete("raised", _checked(said, "classify_exception"))

    def _report_failed(self, ex: Execution, plan: AttemptPlan) -> None:
        """Reporting an attempt failed (a classifier, a response without ``status_code``, an
        outcome the core refuses): the attempt is recorded as a programming error unless the
        core already recorded it, and the after-attempt hook still sees it. The caller
        re-raises."""
        if ex.verdict is None:
            with contextlib.suppress(InvalidInputError):  # already recorded, or in use
                ex.complete("bug")
        self._after(ex, plan)

    def _after(self, ex: Execution, plan: AttemptPlan) -> None:
        """The after-attempt hook, with the outcome the core recorded. A hook that raises ends
        the call with its exception: a retry already paid for is given back."""
        hook = self.after_attempt
        if hook is not None:
            try:
                hook(plan, cast(Outcome, ex.last_outcome))
            except BaseException:
                ex.cancel()
                raise

    def _wait(self, ex: Execution, wait: WaitPlan) -> None:
        """Sleeps one wait of a sync call (``before_sleep`` first). A hook or sleeper that fails
        (or the caller's cancellation during the sleep) ends the call: ``ex`` is cancelled and
        the exception propagates."""
        try:
            if self.before_sleep is not None:
                self.before_sleep(wait)
            slept = self.sleep(wait.delay)
            if slept is not None and inspect.isawaitable(slept):
                _discard(slept)
                raise TypeError(
                    "sleep must block, not return an awaitable (give an "
                    "async sleeper as async_sleep)"
                )
        except BaseException:
            ex.cancel()
            raise

    # -- the helpers on the loops ----------------------------------------------------------------

    def call(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """Calls ``fn(*args, **kwargs)``, retrying as the policy decides; returns its value."""
        return self._run(self._template._begin(), fn, args, kwargs)

    @classmethod
    def _defaults(cls) -> Retrying:
        """The options of a helper given none, without a policy: ``policy.call`` runs
        :meth:`_run` with them on the policy's own first step (``Policy._begin``), with no
        helper made per call. Only ``_run`` may be used on it."""
        self = cls.__new__(cls)
        self.attempt_timeout = None
        self.total_timeout = DEFAULT_TOTAL_TIMEOUT
        self.sleep = time.sleep
        self.async_sleep = asyncio.sleep
        self.before_sleep = None
        self.after_attempt = None
        self.classify_exception = classify_exception
        self.classify_result = None
        self.http = False
        return self

    def _run(
        self,
        begun: tuple[Execution, AttemptPlan | WaitPlan | Verdict],
        fn: Callable[..., T],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> T:
        """The sync call's loop: the same as ``for attempt in self: with attempt: ...``, without
        an :class:`Attempt` per try. ``begun`` is the new call and its first step
        (``Execution._begin``: the extension starts the call and admits its first attempt in
        one step); a plain success is recorded in one more (``Execution._succeeded``)."""
        step: Any
        ex, step = begun
        value: Any = None  # the last attempt's value: a give-up's ``result``
        error: BaseException | None = None  # the last attempt's exception: its ``__cause__``
        while True:
            if type(step) is AttemptPlan:
                plan = step
                try:
                    value = fn(*args, **kwargs)
                except BaseException as exc:
                    value = None
                    error = exc
                    try:
                        if isinstance(exc, Exception):
                            step = self._raised(ex, exc)
                        else:
                            # The caller's own cancellation ends the call, never classified.
                            step = ex.complete("cancelled")
                    except BaseException:
                        self._report_failed(ex, plan)
                        raise
                    self._after(ex, plan)
                    if type(step) is Verdict:
                        if step.kind in ("return", "rethrow", "cancelled"):
                            raise
                        raise self._verdict_error(ex, step, exc, None) from exc
                    continue
                error = None
                try:
                    if self.classify_result is None and not self.http:
                        step = ex._succeeded()  # None: returned
                    else:
                        step = self._returned(ex, value)
                except BaseException:
                    self._report_failed(ex, plan)
                    raise
                if self.after_attempt is not None:
                    self._after(ex, plan)
                if step is None:
                    return cast(T, value)
                if type(step) is Verdict:
                    if step.kind == "return":
                        return cast(T, value)
                    raise self._verdict_error(ex, step, None, value)
            elif type(step) is WaitPlan:
                retry_event(step, ex.last_outcome)
                self._wait(ex, step)
                step = ex.next_step()
            else:
                raise self._verdict_error(ex, step, error, value)

    async def call_async(
        self, fn: Callable[P, Awaitable[T]], /, *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """Awaits ``fn(*args, **kwargs)``, retrying as the policy decides; each attempt is cut
        at its time limit; returns its value."""
        async for attempt in self:
            with attempt:
                attempt._value = await fn(*args, **kwargs)
        value: T = attempt._value
        return value

    @overload
    def __call__(
        self, fn: Callable[P, Coroutine[Any, Any, T]]
    ) -> Callable[P, Coroutine[Any, Any, T]]: ...
    @overload
    def __call__(self, fn: Callable[P, T]) -> Callable[P, T]: ...
    def __call__(self, fn: Callable[P, Any]) -> Callable[P, Any]:
        """Decorates a function or an ``async def``: every call goes through :meth:`call` or
        :meth:`call_async`. The decorated function keeps its signature."""
        if inspect.iscoroutinefunction(fn):
            call_async = self.call_async

            @functools.wraps(fn)
            async def async_wrapper(*args: P.args, **kwargs: P.kwargs) -> Any:
                return await call_async(fn, *args, **kwargs)

            return async_wrapper

        # What `self.call` does, one frame shorter.
        run, begin = self._run, self._template._begin

        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> Any:
            return run(begin(), fn, args, kwargs)

        return wrapper


# The default options, shared by `call` and every policy's `call`.
_DEFAULTS = Retrying._defaults()


def call(policy: _Policy, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """Calls ``fn(*args, **kwargs)`` with the policy's retries and the default options."""
    if not isinstance(policy, _Policy):
        raise TypeError(f"policy must be a holdoff.Policy, not {type(policy).__name__}")
    return _DEFAULTS._run(policy._begin(), fn, args, kwargs)


async def call_async(
    policy: _Policy, fn: Callable[P, Awaitable[T]], /, *args: P.args, **kwargs: P.kwargs
) -> T:
    """Awaits ``fn(*args, **kwargs)`` with the policy's retries and the default options."""
    return await Retrying(policy).call_async(fn, *args, **kwargs)
