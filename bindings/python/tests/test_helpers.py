"""The sync retry helpers (decorator, ``call``, ``for attempt in ...``): options, hooks and what
the caller gets. Time moves through a ManualClock; the injected ``sleep`` advances it."""

from __future__ import annotations

import asyncio
import functools
import inspect
from datetime import timedelta
from typing import Any

import pytest

import holdoff
from holdoff import Outcome


class World:
    """A manual clock, a policy on it, and a sleep function that records and advances time."""

    def __init__(
        self,
        *,
        max_retries: int = 3,
        quota: bool = False,
        budget: dict[str, Any] | None = None,
        **breaker: Any,
    ) -> None:
        self.clock = holdoff.ManualClock()
        self.breaker = holdoff.Breaker(clock=self.clock, **breaker)
        self.budget = holdoff.RetryBudget(
            max_retries=max_retries, clock=self.clock, **(budget or {})
        )
        self.quota = holdoff.RetryQuota() if quota else None
        self.policy = holdoff.Policy(self.breaker, self.budget, self.quota)
        self.slept: list[float] = []
        self.waits: list[holdoff.WaitPlan] = []
        self.attempts: list[tuple[int, bool, float | None, str]] = []

    def sleep(self, d: float) -> None:
        assert d >= 0.0
        self.slept.append(d)
        self.clock.advance(d)

    def before_sleep(self, w: holdoff.WaitPlan) -> None:
        self.waits.append(w)

    def after_attempt(self, plan: holdoff.AttemptPlan, outcome: Outcome) -> None:
        self.attempts.append((plan.number, plan.probe, plan.time_limit, outcome.name))

    def retrying(self, **kw: Any) -> holdoff.Retrying:
        kw.setdefault("sleep", self.sleep)
        return self.policy.retrying(
            before_sleep=self.before_sleep, after_attempt=self.after_attempt, **kw
        )


class Flaky:
    """Raises the given exceptions in turn, then returns 'ok'."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


class Response:
    def __init__(self, status_code: int, headers: dict[str, str] | None = None) -> None:
        self.status_code = status_code
        self.headers = headers or {}


# -- options ------------------------------------------------------------------------------------


def test_defaults_and_limits() -> None:
    w = World()
    r = holdoff.Retrying(w.policy)
    assert (r.attempt_timeout, r.total_timeout) == (None, 60.0)
    assert holdoff.DEFAULT_TOTAL_TIMEOUT == 60.0
    r = w.policy.retrying(attempt_timeout=timedelta(milliseconds=250), total_timeout=None)
    assert (r.attempt_timeout, r.total_timeout) == (0.25, None)
    for field, bad, error in [
        ("execute.attempt_timeout", 0, holdoff.InvalidConfigError),
        ("execute.attempt_timeout", -1.0, holdoff.InvalidConfigError),
        ("execute.total_timeout", float("nan"), holdoff.InvalidConfigError),
        ("execute.total_timeout", timedelta(0), holdoff.InvalidConfigError),
        ("execute.total_timeout", "60", holdoff.ConfigTypeError),
    ]:
        name = field.split(".")[1]
        with pytest.raises(error) as e:
            w.policy.retrying(**{name: bad})
        assert e.value.field == field, (name, bad)


def test_options_are_checked() -> None:
    w = World()
    for name in ("sleep", "async_sleep", "classify_exception"):
        with pytest.raises(TypeError, match=name):
            w.policy.retrying(**{name: 3})
    for name in ("before_sleep", "after_attempt", "classify_result"):
        with pytest.raises(TypeError, match=name):
            w.policy.retrying(**{name: "x"})
    with pytest.raises(TypeError, match="http"):
        w.policy.retrying(http=1)
    with pytest.raises(TypeError, match="not both"):
        w.policy.retrying(http=True, classify_result=lambda v: "success")
    with pytest.raises(TypeError, match=r"holdoff\.Policy"):
        holdoff.Retrying("policy")  # type: ignore[arg-type]


def test_a_misspelled_option_is_a_type_error() -> None:
    w = World()
    makers = (
        w.policy.retrying,
        functools.partial(holdoff.Retrying, w.policy),
        functools.partial(holdoff.retrying, w.policy),
    )
    for make in makers:
        with pytest.raises(TypeError, match="htp"):
            make(htp=True)
    assert holdoff.retrying is holdoff.Policy.retrying


def test_a_decorated_function_keeps_its_name_and_signature() -> None:
    w = World()

    def fetch(url: str, *, timeout: float = 1.0) -> str:
        """Fetches url."""
        return f"{url} {timeout}"

    async def afetch(url: str, *, timeout: float = 1.0) -> str:
        """Fetches url."""
        return f"{url} {timeout}"

    for fn in (fetch, afetch):
        for decorated in (w.policy(fn), w.retrying()(fn)):
            assert inspect.signature(decorated) == inspect.signature(fn)
            assert (decorated.__name__, decorated.__doc__) == (fn.__name__, "Fetches url.")
            assert decorated.__wrapped__ is fn  # type: ignore[attr-defined]
            assert inspect.iscoroutinefunction(decorated) == (fn is afetch)
    assert w.policy(fetch)("a", timeout=2.0) == "a 2.0"
    assert asyncio.run(w.retrying()(afetch)("b")) == "b 1.0"


def test_the_total_timeout_bounds_the_waits() -> None:
    w = World(max_retries=10)
    with pytest.raises(holdoff.GiveUpError) as e:
        w.retrying(total_timeout=2).call(Flaky(*[ConnectionError()] * 10))
    # 0.5 + 1 fit in 2 s; the next 2 s wait does not fit the 0.5 s left: give up now.
    assert (e.value.reason, e.value.attempts, w.slept, w.clock.now()) == (
        "total_timeout",
        3,
        [0.5, 1.0],
        1.5,
    )
    assert isinstance(e.value.__cause__, ConnectionError)
    w = World(max_retries=10)
    with pytest.raises(holdoff.GiveUpError) as e:
        w.retrying(total_timeout=None).call(Flaky(*[ConnectionError()] * 11))
    assert (e.value.reason, e.value.attempts) == ("attempts_exhausted", 11)


def test_a_sync_attempt_that_overran_its_limit_counts_as_what_it_did() -> None:
    # A sync attempt cannot be interrupted: its value is returned, whenever it comes (sending
    # the request again would not undo it), as in every language's non-interruptible flavour.
    w = World(max_retries=1)

    def slow() -> str:
        w.clock.advance(2.0)  # ends after its 1.5 s limit
        return "late"

    assert w.retrying(attempt_timeout=1.5).call(slow) == "late"
    assert w.attempts == [(1, False, 1.5, "success")]
    # An error after the limit is that error (a failure here), not a timeout.
    w = World(max_retries=0)

    def slow_error() -> None:
        w.clock.advance(3)
        raise ConnectionResetError("reset")

    with pytest.raises(holdoff.GiveUpError) as e:
        w.retrying(attempt_timeout=1).call(slow_error)
    assert isinstance(e.value.__cause__, ConnectionResetError)
    assert w.attempts == [(1, False, 1.0, "failure")]
    # The caller's cancellation after the limit ends the call all the same (never retried);
    # the breaker records the attempt as the timeout it was.
    w = World(max_retries=1)
    calls = []
    stop = KeyboardInterrupt()

    def interrupted() -> str:
        calls.append(1)
        if len(calls) == 1:
            w.clock.advance(2.5)
            raise stop
        return "second"

    with pytest.raises(KeyboardInterrupt) as e:
        w.retrying(attempt_timeout=2).call(interrupted)
    assert e.value is stop and calls == [1] and w.slept == []
    assert [a[3] for a in w.attempts] == ["timeout"]


# -- hooks --------------------------------------------------------------------------------------


def test_hooks_see_every_attempt_and_wait() -> None:
    w = World(recoveries=1)
    replies = [Response(503, {"Retry-After": "400"}), Response(500), Response(200)]
    r = w.retrying(http=True, total_timeout=None).call(lambda: replies.pop(0))
    assert r.status_code == 200
    assert w.attempts == [
        (1, False, None, "retry_later"),
        (2, True, None, "failure"),  # the probe fails: open again for 30 s
        (3, True, None, "success"),
    ]
    got = [(x.attempts, x.delay, x.source, x.capped, x.server_delay) for x in w.waits]
    assert got == [(1, 300.0, "retry_after", True, 400.0), (2, 30.0, "breaker", False, None)]
    assert w.slept == [300.0, 30.0]


def test_a_raising_hook_ends_the_call_and_holds_nothing() -> None:
    w = World(trip=holdoff.ConsecutiveFailures(1), recoveries=1)
    w.breaker.record(w.breaker.allow(), Outcome.FAILURE)
    w.clock.set(30)  # a probe is due

    def boom(plan: holdoff.AttemptPlan, outcome: Outcome) -> None:
        raise KeyError("hook bug")

    with pytest.raises(KeyError, match="hook bug"):
        w.policy.retrying(after_attempt=boom).call(lambda: "ok")
    s = w.breaker.snapshot()
    assert (s.state, s.probes_in_flight) == ("closed", 0)  # the probe was recorded first

    def boom_wait(wait: holdoff.WaitPlan) -> None:
        raise LookupError("wait hook bug")

    w = World()
    with pytest.raises(LookupError):
        w.policy.retrying(before_sleep=boom_wait, sleep=w.sleep).call(Flaky(ConnectionError()))
    assert w.slept == [] and w.breaker.snapshot().failures == 1


# -- what the caller gets -----------------------------------------------------------------------


def test_decorator_retries_with_the_budgets_backoff() -> None:
    w = World()
    flaky = Flaky(ConnectionError("a"), ConnectionError("b"))

    @w.retrying()
    def fetch(x: int, *, y: int) -> str:
        return flaky(x, y=y) + str(x + y)

    assert fetch(1, y=2) == "ok3"
    assert flaky.calls == 3
    assert w.slept == [0.5, 1.0]
    assert fetch.__name__ == "fetch"


def test_give_up_carries_reason_attempts_and_the_last_error() -> None:
    w = World()
    errors = [TimeoutError(str(i)) for i in range(10)]
    with pytest.raises(holdoff.GiveUpError) as e:
        w.retrying().call(Flaky(*errors))
    g = e.value
    assert isinstance(g, holdoff.UpstreamUnavailableError)
    assert (g.reason, g.attempts, g.retry_after, g.server_delay, g.capped, g.result) == (
        "attempts_exhausted",
        4,
        None,
        None,
        False,
        None,
    )
    assert g.__cause__ is errors[3]
    assert w.slept == [0.5, 1.0, 2.0]
    assert [a[3] for a in w.attempts] == ["timeout"] * 4


def test_final_answers_and_errors_called_successes_are_reraised_unchanged() -> None:
    w = World()
    missing = KeyError("missing")

    def classify(exc: BaseException) -> Any:
        return Outcome.ANSWER if isinstance(exc, KeyError) else holdoff.classify_exception(exc)

    flaky = Flaky(ConnectionError(), missing)
    with pytest.raises(KeyError) as e:
        w.retrying(classify_exception=classify).call(flaky)
    assert e.value is missing and flaky.calls == 2 and w.slept == [0.5]
    assert w.breaker.snapshot().failures == 0  # the answer closed the streak
    flaky = Flaky(LookupError("fine"))
    with pytest.raises(LookupError):
        w.retrying(classify_exception=lambda e: "success").call(flaky)
    assert flaky.calls == 1


@pytest.mark.parametrize(
    "bug",
    [AttributeError("x"), TypeError("y"), KeyError("z"), holdoff.GiveUpError("attempts_exhausted")],
)
def test_programming_errors_propagate_at_once_and_move_nothing(bug: BaseException) -> None:
    w = World(trip=holdoff.ConsecutiveFailures(1), quota=True)
    for _ in range(3):
        flaky = Flaky(bug)
        with pytest.raises(type(bug)) as e:
            w.retrying().call(flaky)
        assert e.value is bug and flaky.calls == 1
    s = w.breaker.snapshot()
    assert (s.state, s.failures, s.stale_answers) == ("closed", 0, 0)
    assert w.budget.episode_start is None and w.quota is not None and w.quota.available == 500
    assert w.slept == [] and [a[3] for a in w.attempts] == ["cancelled"] * 3


def test_a_programming_error_in_a_probe_frees_it() -> None:
    w = World(trip=holdoff.ConsecutiveFailures(1))
    w.breaker.record(w.breaker.allow(), Outcome.FAILURE)
    w.clock.set(30)
    with pytest.raises(AttributeError):
        w.retrying().call(Flaky(AttributeError("bug")))
    s = w.breaker.snapshot()
    assert (s.state, s.probes_in_flight, s.probe_ready) == ("half_open", 0, False)


def test_keyboard_interrupt_is_the_callers_cancellation() -> None:
    w = World()
    stop = KeyboardInterrupt()
    flaky = Flaky(stop)
    with pytest.raises(KeyboardInterrupt) as e:
        w.retrying().call(flaky)
    assert e.value is stop and flaky.calls == 1 and w.slept == []

    def interrupted(d: float) -> None:
        raise KeyboardInterrupt  # during the wait

    with pytest.raises(KeyboardInterrupt):
        w.retrying(sleep=interrupted).call(Flaky(ConnectionError()))
    assert [a[3] for a in w.attempts] == ["cancelled", "failure"]


def test_retry_later_waits_the_providers_delay_then_probes() -> None:
    w = World(recoveries=1)
    assert w.retrying().call(Flaky(holdoff.RetryLaterError(7.0))) == "ok"
    assert w.slept == [7.0]
    kinds = [(e.reason, e.to_state, e.open_for) for e in w.breaker.drain_events()]
    assert kinds == [
        ("retry_later", "open", 7.0),
        ("probe_admitted", "half_open", None),
        ("recovered", "closed", None),
    ]


def test_open_breaker_refuses_a_fresh_call_without_calling() -> None:
    w = World(trip=holdoff.ConsecutiveFailures(1))
    w.breaker.record(w.breaker.allow(), Outcome.FAILURE)
    flaky = Flaky()
    with pytest.raises(holdoff.BreakerOpenError) as e:
        w.retrying().call(flaky)
    b = e.value
    assert flaky.calls == 0 and isinstance(b, holdoff.UpstreamUnavailableError)
    assert (b.reason, b.attempts, b.retry_after, b.state, b.server_delay, b.capped) == (
        "breaker_open",
        0,
        30.0,
        "open",
        None,
        False,
    )
    assert b.__cause__ is None and b.result is None


def test_a_retry_the_breaker_keeps_waiting_past_the_budget_is_breaker_open() -> None:
    w = World(trip=holdoff.ConsecutiveFailures(1), budget={"max_backoff_duration": 20})
    down = ConnectionError("down")
    with pytest.raises(holdoff.BreakerOpenError) as e:
        w.retrying().call(Flaky(down))
    assert (e.value.attempts, e.value.retry_after, e.value.__cause__) == (1, 30.0, down)
    # Past the total timeout instead: a give-up, with the breaker's next probe as retry_after.
    w = World(trip=holdoff.ConsecutiveFailures(1))
    with pytest.raises(holdoff.GiveUpError) as g:
        w.retrying(total_timeout=20).call(Flaky(down))
    assert (g.value.reason, g.value.attempts, g.value.retry_after) == ("total_timeout", 1, 30.0)


def test_a_retry_waits_for_the_breaker_inside_the_budget() -> None:
    w = World(trip=holdoff.ConsecutiveFailures(1), recoveries=1)
    assert w.retrying().call(Flaky(ConnectionError("down"))) == "ok"
    assert w.slept == [30.0] and w.waits[0].source == "breaker"
    assert w.breaker.state == "closed"


def test_http_responses_use_the_policys_classifier() -> None:
    w = World(recoveries=1)
    replies = [Response(503, {"Retry-After": "20"}), Response(200)]
    r = w.retrying(http=True).call(lambda: replies.pop(0))
    assert r.status_code == 200 and w.slept == [20.0]
    # a 404 is a final answer: returned (the same object), not retried
    not_found = Response(404)
    assert w.retrying(http=True).call(lambda: not_found) is not_found
    # 500s until the budget gives up: GiveUpError carries the last response
    last = Response(500)
    with pytest.raises(holdoff.GiveUpError) as e:
        w.retrying(http=True).call(lambda: last)
    assert e.value.reason == "attempts_exhausted" and e.value.result is last
    assert e.value.__cause__ is None
    # a status that is not a status
    with pytest.raises(holdoff.InvalidInputError) as ie:
        w.retrying(http=True).call(lambda: Response(1000))
    assert ie.value.field == "status"


def test_classify_result() -> None:
    w = World()
    values = iter([None, None, 5])
    got = w.retrying(classify_result=lambda v: "failure" if v is None else "success").call(
        lambda: next(values)
    )
    assert got == 5 and w.slept == [0.5, 1.0]
    answer = {"error": "no such item"}
    assert w.retrying(classify_result=lambda v: Outcome.ANSWER).call(lambda: answer) is answer


def test_policy_conveniences() -> None:
    w = World()

    @w.policy
    def ok() -> str:
        return "ok"

    assert ok() == "ok"
    assert w.policy.call(lambda a, b: a + b, 1, b=2) == 3
    assert holdoff.call(w.policy, lambda: 4) == 4
    assert holdoff.retrying(w.policy, sleep=w.sleep).call(lambda: 5) == 5


def test_policy_call_is_the_default_helper() -> None:
    # policy.call runs the sync loop with the default options on the policy's own first step:
    # the same answers as Retrying(policy).call. (Its sleeper is time.sleep: no retry here.)
    w = World(budget={"retry_after_cap": 60, "give_up_above_cap": True})
    assert w.policy.call(lambda a, b: (a, b), 1, b=2) == (1, 2)
    # a programming error propagates unchanged, unretried; it moves nothing
    bug = KeyError("bug")
    with pytest.raises(KeyError) as ke:
        w.policy.call(Flaky(bug))
    assert ke.value is bug and w.breaker.snapshot().failures == 0
    # a retry-later above the budget's cap gives up at once, the exception as its cause
    later = holdoff.RetryLaterError(90)
    with pytest.raises(holdoff.GiveUpError) as ge:
        w.policy.call(Flaky(later))
    assert (ge.value.reason, ge.value.attempts, ge.value.retry_after) == (
        "retry_after_above_cap",
        1,
        90.0,
    )
    assert ge.value.__cause__ is later and ge.value.result is None
    # the breaker open: refused without calling
    w.breaker.force_open()
    flaky = Flaky()
    with pytest.raises(holdoff.BreakerOpenError) as be:
        w.policy.call(flaky)
    assert flaky.calls == 0 and (be.value.attempts, be.value.state) == (0, "forced_open")
    assert be.value.__cause__ is None and be.value.result is None
    w.breaker.reset()
    # each call is its own: two at once (one inside the other) do not share an execution
    assert w.policy.call(lambda: w.policy.call(lambda: "inner") + " outer") == "inner outer"
    ex = holdoff.Execution(w.policy)
    assert (ex.attempt_timeout, ex.total_timeout) == (None, holdoff.DEFAULT_TOTAL_TIMEOUT)
    # holdoff.call is the same helper; it needs a policy
    assert holdoff.call(w.policy, lambda: "ok") == "ok"
    with pytest.raises(TypeError, match=r"policy must be a holdoff\.Policy, not str"):
        holdoff.call("policy", lambda: "ok")  # type: ignore[arg-type]


# -- the attempt iterator -----------------------------------------------------------------------


def test_attempt_iterator() -> None:
    w = World(recoveries=1)
    flaky = Flaky(ConnectionError("a"))
    seen = []
    for attempt in w.retrying():
        with attempt:
            seen.append((attempt.number, attempt.probe, attempt.time_limit))
            flaky()
    assert seen == [(1, False, 60.0), (2, False, 59.5)] and w.slept == [0.5]
    # responses recorded through the attempt
    statuses = [503, 200]
    for attempt in w.retrying():
        with attempt:
            attempt.response(statuses.pop(0), {"Retry-After": "3"})
    assert w.slept[-1] == 3.0
    # a value, classified as the options say, attached to the give-up
    with pytest.raises(holdoff.GiveUpError) as e:
        for attempt in w.retrying(http=True):
            with attempt:
                attempt.set_result(Response(502))
    assert e.value.result.status_code == 502 and attempt.result is e.value.result
    with pytest.raises(holdoff.GiveUpError):
        for attempt in w.retrying():
            with attempt:
                attempt.record(Outcome.FAILURE)


def test_attempts_must_be_used_as_context_managers() -> None:
    w = World(trip=holdoff.ConsecutiveFailures(1))
    w.breaker.record(w.breaker.allow(), Outcome.FAILURE)
    w.clock.set(30)
    with pytest.raises(RuntimeError, match="context manager"):
        for _attempt in w.retrying():
            pass
    assert w.breaker.snapshot().probes_in_flight == 0


def test_leaving_the_loop_mid_attempt_frees_the_probe() -> None:
    w = World(trip=holdoff.ConsecutiveFailures(1))
    w.breaker.record(w.breaker.allow(), Outcome.FAILURE)
    w.clock.set(30)
    loop = iter(w.retrying())
    attempt = next(loop)
    assert attempt.probe and w.breaker.snapshot().probes_in_flight == 1
    loop.close()  # `break` before the block ran
    s = w.breaker.snapshot()
    assert (s.probes_in_flight, s.failures) == (0, 0)


def test_helpers_give_up_above_the_cap_with_the_servers_delay() -> None:
    clock = holdoff.ManualClock()
    policy = holdoff.Policy(
        holdoff.Breaker(clock=clock),
        holdoff.RetryBudget(retry_after_cap=60, give_up_above_cap=True, clock=clock),
    )
    calls = []

    def fetch() -> None:
        calls.append(clock.now())
        raise holdoff.RetryLaterError(90)

    with pytest.raises(holdoff.GiveUpError) as e:
        policy.retrying(sleep=clock.advance).call(fetch)
    assert (e.value.reason, e.value.retry_after, e.value.attempts) == (
        "retry_after_above_cap",
        90.0,
        1,
    )
    assert calls == [0.0]
