"""What happens when the helpers' own parts fail or are misused: an ``Execution`` stepped while
another step runs (from a breaker's state-change callback, or a second thread), classifiers that
return garbage, hooks that raise, sleepers of the wrong kind. A failure while reporting an
attempt records it as a programming error (cancelled on the breaker, nothing counted), the
after-attempt hook still sees it, and the error propagates; a failure outside an attempt ends
the call and gives a retry already paid for back to the quota."""

from __future__ import annotations

import asyncio
import math
import threading
import time
import warnings
from typing import Any

import pytest

import holdoff
from half_open import assert_probe_freed, half_open
from holdoff import Outcome


class World:
    def __init__(self, **breaker: Any) -> None:
        self.clock = holdoff.ManualClock()
        self.breaker = holdoff.Breaker(clock=self.clock, **breaker)
        self.quota = holdoff.RetryQuota()
        self.policy = holdoff.Policy(
            self.breaker, holdoff.RetryBudget(max_retries=3, clock=self.clock), self.quota
        )
        self.attempts: list[tuple[int, str]] = []
        self.calls = 0

    def after_attempt(self, plan: holdoff.AttemptPlan, outcome: Outcome) -> None:
        self.attempts.append((plan.number, outcome.name))

    def retrying(self, **kw: Any) -> holdoff.Retrying:
        kw.setdefault("sleep", self.clock.advance)
        kw.setdefault("after_attempt", self.after_attempt)
        return self.policy.retrying(**kw)

    def down(self) -> None:
        self.calls += 1
        raise ConnectionRefusedError(111, "refused")

    def assert_nothing_held(self, failures: int = 0) -> None:
        """No probe held, no retry kept paid for, only the given failures counted."""
        s = self.breaker.snapshot()
        assert (s.failures, s.probes_in_flight) == (failures, 0)
        assert self.quota.available == 500


def cancelling() -> int:
    task = asyncio.current_task()
    assert task is not None
    return task.cancelling() if hasattr(task, "cancelling") else 0


def in_use(e: BaseException) -> bool:
    return (
        isinstance(e, holdoff.InvalidInputError)
        and e.field == "execution"
        and "in use by another step" in str(e)
    )


# -- an Execution stepped while a step runs -----------------------------------------------------


def test_an_execution_stepped_from_its_breakers_callback_is_refused_and_readable() -> None:
    clock = holdoff.ManualClock()
    b = holdoff.Breaker(trip=holdoff.ConsecutiveFailures(1), clock=clock)
    ex = holdoff.Execution(holdoff.Policy(b, holdoff.RetryBudget(clock=clock)))
    read: list[Any] = []
    refused: list[tuple[str, BaseException]] = []

    def nested(event: Any) -> None:
        # The getters show the execution as it was when the running step began.
        read.append(
            (
                ex.attempts,
                ex.verdict,
                ex.last_outcome,
                repr(ex),
                ex.attempt_timeout,
                ex.total_timeout,
                ex.policy is not None,
            )
        )
        steps = [
            ("next_step", ex.next_step),
            ("complete", lambda: ex.complete("returned", "success")),
            ("complete_response", lambda: ex.complete_response(200)),
            ("cancel", ex.cancel),
        ]
        for name, step in steps:
            try:
                step()
            except BaseException as e:
                refused.append((name, e))
        ex.fresh()  # a new call from the same template is fine

    b.on_state_change(nested)
    assert isinstance(ex.next_step(), holdoff.AttemptPlan)
    w = ex.complete("raised", Outcome.FAILURE)  # trips the breaker: the callback runs
    assert read == [(1, None, None, "Execution(attempts=1, verdict=None)", None, 60.0, True)]
    assert [name for name, _ in refused] == ["next_step", "complete", "complete_response", "cancel"]
    assert all(in_use(e) for _, e in refused), refused
    assert str(refused[0][1]) == (
        "invalid input: execution: in use by another step (a breaker's state-change callback, "
        "or another thread): one caller drives an execution, one step at a time"
    )
    # The outer step was kept whole.
    assert isinstance(w, holdoff.WaitPlan) and (w.attempts, w.source) == (1, "breaker")
    assert (ex.attempts, ex.last_outcome, ex.verdict) == (1, Outcome.FAILURE, None)
    assert ex.cancel().kind == "cancelled"


def test_an_execution_stepped_from_a_second_thread_is_refused() -> None:
    clock = holdoff.ManualClock()
    b = holdoff.Breaker(trip=holdoff.ConsecutiveFailures(1), clock=clock)
    ex = holdoff.Execution(holdoff.Policy(b, holdoff.RetryBudget(clock=clock)))
    inside, release = threading.Event(), threading.Event()
    got: list[Any] = []

    def slow_callback(event: Any) -> None:
        inside.set()
        assert release.wait(30)  # releases the GIL: the other thread runs meanwhile

    def other() -> None:
        assert inside.wait(30)
        try:
            got.append(ex.complete("returned", "success"))
        except BaseException as e:
            got.append(e)
        got.append((ex.attempts, ex.verdict))
        release.set()

    b.on_state_change(slow_callback)
    ex.next_step()
    t = threading.Thread(target=other)
    t.start()
    step = ex.complete("raised", Outcome.FAILURE)
    t.join(30)
    assert len(got) == 2 and in_use(got[0]), got
    assert got[1] == (1, None)
    assert isinstance(step, holdoff.WaitPlan) and ex.last_outcome == Outcome.FAILURE


# -- classifiers that return garbage ------------------------------------------------------------


@pytest.mark.parametrize(
    "field,options,fn",
    [
        ("classify_exception", {"classify_exception": lambda e: 42}, "down"),
        ("classify_exception", {"classify_exception": lambda e: "retry"}, "down"),
        ("classify_result", {"classify_result": lambda v: None}, "value"),
        ("classify_result", {"classify_result": lambda v: [Outcome.FAILURE]}, "value"),
    ],
)
def test_a_classifier_returning_garbage_is_a_type_error_naming_it(
    field: str, options: Any, fn: str
) -> None:
    w = World(trip=holdoff.ConsecutiveFailures(1))
    with pytest.raises(holdoff.InputTypeError) as e:
        w.retrying(**options).call(w.down if fn == "down" else lambda: "value")
    assert isinstance(e.value, TypeError) and e.value.field == field
    assert "must return a holdoff.Outcome or its name" in e.value.rule
    assert w.attempts == [(1, "cancelled")]  # recorded as a programming error
    w.assert_nothing_held()


def test_a_raising_classifier_propagates_and_the_hook_sees_the_attempt() -> None:
    w = World()

    def boom(exc: BaseException) -> Any:
        raise LookupError("classifier bug")

    with pytest.raises(LookupError) as e:
        w.retrying(classify_exception=boom).call(w.down)
    assert isinstance(e.value.__context__, ConnectionRefusedError)
    assert w.attempts == [(1, "cancelled")]
    w.assert_nothing_held()


# -- hooks that raise ---------------------------------------------------------------------------


def test_a_raising_before_sleep_gives_the_paid_retry_back() -> None:
    w = World()

    def boom(wait: holdoff.WaitPlan) -> None:
        assert w.quota.available == 495  # the retry was paid for
        raise LookupError("hook bug")

    with pytest.raises(LookupError) as e:
        w.retrying(before_sleep=boom).call(w.down)
    assert e.value is not None and w.calls == 1 and w.attempts == [(1, "failure")]
    w.assert_nothing_held(failures=1)


def test_a_raising_after_attempt_gives_the_paid_retry_back() -> None:
    w = World()
    seen: list[str] = []

    def boom(plan: holdoff.AttemptPlan, outcome: Outcome) -> None:
        seen.append(outcome.name)
        raise LookupError("hook bug")

    with pytest.raises(LookupError) as e:
        w.retrying(after_attempt=boom).call(w.down)
    assert isinstance(e.value.__context__, ConnectionRefusedError)
    assert w.calls == 1 and seen == ["failure"]
    w.assert_nothing_held(failures=1)
    # Also while the caller still holds the attempt loop (nothing closes it yet).
    loop = iter(w.retrying(after_attempt=boom))
    with pytest.raises(LookupError):
        with next(loop):
            w.down()
    w.assert_nothing_held(failures=2)
    loop.close()


def test_a_raising_after_attempt_in_the_async_loop_gives_the_paid_retry_back() -> None:
    w = World()

    def boom(plan: holdoff.AttemptPlan, outcome: Outcome) -> None:
        raise LookupError("hook bug")

    async def down() -> None:
        w.down()

    async def main() -> None:
        with pytest.raises(LookupError):
            await w.retrying(after_attempt=boom).call_async(down)

    asyncio.run(main())
    assert w.calls == 1
    w.assert_nothing_held(failures=1)


def test_the_hook_sees_an_attempt_never_entered() -> None:
    w = World()
    with pytest.raises(RuntimeError, match="context manager"):
        for _attempt in w.retrying():
            pass
    assert w.attempts == [(1, "cancelled")]
    w.assert_nothing_held()


# -- sleepers of the wrong kind -----------------------------------------------------------------


async def never_called(d: float) -> None:
    raise AssertionError("not a sleeper")


def test_sleepers_of_the_wrong_kind_are_refused_when_the_helper_is_made() -> None:
    w = World()
    with pytest.raises(TypeError, match=r"^async_sleep must return an awaitable; time.sleep"):
        w.policy.retrying(async_sleep=time.sleep)
    with pytest.raises(TypeError, match=r"^sleep must block, not be a coroutine function"):
        w.policy.retrying(sleep=never_called)


def test_a_sync_sleep_returning_an_awaitable_is_a_type_error_naming_it() -> None:
    w = World()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "coroutine was never awaited"
        with pytest.raises(TypeError, match=r"^sleep must block, not return an awaitable"):
            w.retrying(sleep=lambda d: asyncio.sleep(d)).call(w.down)
    assert w.calls == 1
    w.assert_nothing_held(failures=1)


@pytest.mark.parametrize("returns", [None, 0.5, "soon"])
def test_an_async_sleep_returning_no_awaitable_is_found_before_a_timed_attempt(
    returns: Any,
) -> None:
    # An attempt with a time limit (here the attempt timeout; by default the 60 s total) is
    # timed by async_sleep, called before the operation, which then never runs.
    w = World(trip=holdoff.ConsecutiveFailures(1))
    w.breaker.record(w.breaker.allow(), Outcome.FAILURE)
    w.clock.set(30)  # the call is a probe

    async def fetch() -> str:
        w.calls += 1
        return "ok"

    async def main() -> int:
        with pytest.raises(TypeError) as e:
            await w.retrying(attempt_timeout=1, async_sleep=lambda d: returns).call_async(fetch)
        assert str(e.value) == (
            "async_sleep must return an awaitable (an async def, "
            f"asyncio.sleep), not {type(returns).__name__}"
        )
        return cancelling()

    assert asyncio.run(main()) == 0
    assert w.calls == 0 and w.attempts == [(1, "cancelled")]
    s = w.breaker.snapshot()
    assert (s.probes_in_flight, s.failures) == (0, 0)  # the probe was freed, not counted


def test_an_async_sleep_returning_no_awaitable_is_found_at_the_first_wait() -> None:
    # With no limit on the attempt, nothing calls async_sleep before the first wait.
    w = World()

    async def down() -> None:
        w.down()

    async def main() -> None:
        with pytest.raises(TypeError, match=r"^async_sleep must return an awaitable"):
            await w.retrying(async_sleep=lambda d: None, total_timeout=None).call_async(down)

    asyncio.run(main())
    assert w.calls == 1 and w.attempts == [(1, "failure")]
    w.assert_nothing_held(failures=1)


def test_an_attempt_timer_whose_sleeper_fails_abandons_the_attempt() -> None:
    # The sleeper timing the attempt fails half-way: the attempt is cut (not left running with
    # no limit), recorded as a programming error, and the sleeper's error propagates.
    w = World()
    cut: list[BaseException] = []

    async def broken_sleep(d: float) -> None:
        await asyncio.sleep(0)
        raise LookupError("sleeper bug")

    async def fetch() -> str:
        w.calls += 1
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError as e:
            cut.append(e)
            raise
        return "never"

    async def main() -> tuple[BaseException | None, int]:
        t = asyncio.ensure_future(
            w.retrying(attempt_timeout=5, async_sleep=broken_sleep).call_async(fetch)
        )
        done, _ = await asyncio.wait({t}, timeout=30)  # wall clock: only turns a hang into a
        assert done, "the attempt ran on with no limit"  # failure
        error = t.exception()
        assert isinstance(error, LookupError) and str(error) == "sleeper bug"
        return error.__context__, t.cancelling() if hasattr(t, "cancelling") else 0

    context, count = asyncio.run(main())
    assert isinstance(context, asyncio.CancelledError) and len(cut) == 1 and count == 0
    assert w.calls == 1 and w.attempts == [(1, "cancelled")]
    w.assert_nothing_held()


# -- a helper's own reporting fails: the probe is freed ---------------------------------------


def _boom(_: Any) -> Any:
    raise KeyError("classifier bug")


class Resp:
    def __init__(self, status: int) -> None:
        self.status_code = status
        self.headers: dict[str, str] = {}


def _retry_later(delay: float) -> Any:
    def fn() -> None:
        raise holdoff.RetryLaterError(delay)

    return fn


def _fail() -> None:
    raise OSError("down")


CASES = [
    pytest.param({"classify_result": _boom}, lambda: 1, KeyError, id="classify_result raises"),
    pytest.param({"classify_exception": _boom}, _fail, KeyError, id="classify_exception raises"),
    pytest.param(
        {"classify_result": lambda r: "bogus"},
        lambda: 1,
        holdoff.InputTypeError,
        id="unknown outcome name",
    ),
    pytest.param({}, _retry_later(-1), holdoff.InvalidInputError, id="RetryLaterError(-1)"),
    pytest.param({}, _retry_later(math.nan), holdoff.InvalidInputError, id="RetryLaterError(nan)"),
    pytest.param({"http": True}, lambda: Resp(1000), holdoff.InvalidInputError, id="status 1000"),
    pytest.param({"http": True}, lambda: Resp(70000), holdoff.InvalidInputError, id="status 70000"),
    pytest.param({"http": True}, lambda: Resp(-1), holdoff.InvalidInputError, id="status -1"),
    pytest.param({"http": True}, lambda: object(), AttributeError, id="no status_code"),
]


@pytest.mark.parametrize("options,fn,exc", CASES)
def test_call_records_the_probe_as_cancelled(options: Any, fn: Any, exc: type) -> None:
    pol = half_open()
    with pytest.raises(exc):
        pol.retrying(sleep=lambda d: None, **options).call(fn)
    assert_probe_freed(pol)


@pytest.mark.parametrize("options,fn,exc", CASES)
def test_decorator_records_the_probe_as_cancelled(options: Any, fn: Any, exc: type) -> None:
    pol = half_open()
    with pytest.raises(exc):
        pol.retrying(sleep=lambda d: None, **options)(fn)()
    assert_probe_freed(pol)


@pytest.mark.parametrize("options,fn,exc", CASES)
def test_call_async_records_the_probe_as_cancelled(options: Any, fn: Any, exc: type) -> None:
    pol = half_open()

    async def afn() -> Any:
        return fn()

    async def sleep(_: float) -> None:
        pass

    with pytest.raises(exc):
        asyncio.run(pol.retrying(async_sleep=sleep, **options).call_async(afn))
    assert_probe_freed(pol)


def test_attempt_records_the_probe_as_cancelled() -> None:
    pol = half_open()
    with pytest.raises(holdoff.InvalidInputError):
        for attempt in pol.retrying(sleep=lambda d: None):
            with attempt:
                attempt.response(1000)
    assert_probe_freed(pol)

    pol = half_open()
    with pytest.raises(holdoff.InputTypeError):
        for attempt in pol.retrying(sleep=lambda d: None):
            with attempt:
                attempt.record("bogus")  # type: ignore[arg-type]
    assert_probe_freed(pol)

    pol = half_open()
    with pytest.raises(KeyError):
        for attempt in pol.retrying(sleep=lambda d: None, classify_exception=_boom):
            with attempt:
                raise OSError("down")
    assert_probe_freed(pol)
