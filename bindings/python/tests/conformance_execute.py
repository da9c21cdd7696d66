"""The conformance runner's ``execute`` op (``conformance/README.md``, "Execute: the retry
helpers"): one logical call through holdoff's real public helpers, in one of Python's four
flavours:

* ``sync plain``: ``@policy.retrying(...)`` on a function (``sleep=`` moves the manual clock);
* ``async plain``: ``@policy.retrying(...)`` on an ``async def`` (``async_sleep=`` moves it);
* ``sync http``: ``policy.retrying(http=True, ...).call(fn)`` returning ``requests.Response``s;
* ``async http``: ``await policy.retrying(http=True, ...).call_async(fn)`` returning
  ``httpx.Response``s.

A case with a ``response`` item runs in the HTTP flavours, else one with a ``returns`` item in
the plain flavours, any other in all four; a ``returns`` script in a case that also has a
``response`` script runs through the plain helper of the same sync/async flavour.

What each script item does: ``transport`` raises ``ConnectionRefusedError`` (plain),
``requests.ConnectionError`` (sync http) or ``httpx.ConnectError`` (async http); ``timeout``
raises ``TimeoutError``, ``requests.ReadTimeout`` or ``httpx.ReadTimeout``; ``bug`` raises
``AttributeError``; ``answer`` raises the runner's own exception, which the runner's classifier
calls an answer; ``cancelled`` is the caller's cancellation (``KeyboardInterrupt``, or the
caller's task cancelled); ``hits_deadline`` hangs until its limit: an async attempt awaits
forever and the helper's timer (the injected ``async_sleep``, which then moves the clock by the
limit) cuts it; a sync attempt cannot be cut, so it moves the clock by its limit and raises the
timeout its client's own limit would raise. The injected sleepers move the clock by each wait,
or cancel the call at the wait numbered ``cancel_in_wait``.
"""

from __future__ import annotations

import asyncio
import errno
from typing import Any, Callable

import holdoff

FLAVOURS = ("sync plain", "async plain", "sync http", "async http")
ATTEMPT_KEYS = ["at", "probe", "outcome"]
WAIT_KEYS = ["delay_ms", "source", "capped", "server_delay_ms"]
RESULT_KEYS = [
    "returns",
    "raises",
    "reason",
    "attempts",
    "attempt",
    "retry_after_ms",
    "server_delay_ms",
    "capped",
    "cause",
]
SCRIPT_KEYS = {"takes_ms", "returns", "response", "raises", "hits_deadline", "cancelled"}
WATCHDOG_S = 60.0  # wall clock: only turns a hang into a failure


class CaseFailedError(AssertionError):
    pass


class RunnerAnswerError(Exception):
    """The runner's own error type, which its classifier calls an answer."""


class Value:
    """What a plain attempt returns; the runner's result classifier reads its outcome."""

    def __init__(self, attempt: int, outcome: Any) -> None:
        self.attempt = attempt
        self.outcome = outcome

    def __repr__(self) -> str:
        return f"Value({self.attempt}, {self.outcome!r})"


def flavours(case: dict[str, Any]) -> list[str]:
    returns = responds = False
    for step in case.get("steps", []):
        if step.get("op") == "execute":
            returns |= has(step, "returns")
            responds |= has(step, "response")
    if responds:
        return ["sync http", "async http"]
    if returns:
        return ["sync plain", "async plain"]
    return list(FLAVOURS)


def has(step: dict[str, Any], key: str) -> bool:
    return any(key in item for item in step.get("script", []))


def ms(s: float | None) -> float | None:
    """Float seconds back to milliseconds (the core's figures are whole milliseconds)."""
    return None if s is None else round(s * 1000, 6)


def outcome_of(v: Any) -> holdoff.Outcome:
    """A case's outcome (its name, or ``{"retry_later_ms": n}``) as a ``holdoff.Outcome``."""
    if isinstance(v, str):
        return {
            "success": holdoff.Outcome.SUCCESS,
            "answer": holdoff.Outcome.ANSWER,
            "failure": holdoff.Outcome.FAILURE,
            "timeout": holdoff.Outcome.TIMEOUT,
            "cancelled": holdoff.Outcome.CANCELLED,
        }[v]
    return holdoff.Outcome.retry_later(v["retry_later_ms"] / 1000)


def classify_answer(exc: BaseException) -> Any:
    if isinstance(exc, RunnerAnswerError):
        return holdoff.Outcome.ANSWER
    return holdoff.classify_exception(exc)


class Run:
    """One execute step in one flavour: the operation, the sleepers and the hooks."""

    def __init__(
        self,
        policy: holdoff.Policy,
        clock: holdoff.ManualClock,
        limits: dict[str, Any],
        step: dict[str, Any],
        flavour: str,
    ) -> None:
        self.policy = policy
        self.clock = clock
        self.limits = limits
        self.script: list[dict[str, Any]] = step.get("script", [])
        if not isinstance(self.script, list):
            raise CaseFailedError("execute needs a script")
        for item in self.script:
            unknown = set(item) - SCRIPT_KEYS
            if unknown:
                raise CaseFailedError(f"unknown script keys {sorted(unknown)}")
        self.cancel_in_wait = step.get("cancel_in_wait")
        self.is_async = flavour.startswith("async")
        self.http = flavour.endswith("http") and not has(step, "returns")
        self.attempts: list[dict[str, Any]] = []
        self.waits: list[dict[str, Any]] = []
        self.errors: list[BaseException | None] = []  # what attempt i raised
        self.values: list[Any] = []  # what attempt i returned
        self.problems: list[str] = []  # found where raising would be lost (a timer task)
        self.wait_pending = False
        self.hung: asyncio.Event | None = None
        self.hang_ms = 0

    # -- hooks ---------------------------------------------------------------------------------

    def before_sleep(self, w: holdoff.WaitPlan) -> None:
        self.waits.append(
            {
                "delay_ms": ms(w.delay),
                "source": w.source,
                "capped": w.capped,
                "server_delay_ms": ms(w.server_delay),
            }
        )
        if w.attempts != len(self.attempts):
            self.problems.append(f"wait after {w.attempts} attempts, {len(self.attempts)} made")
        self.wait_pending = True

    def after_attempt(self, plan: holdoff.AttemptPlan, outcome: holdoff.Outcome) -> None:
        if plan.number != len(self.attempts):
            self.problems.append(f"hook for attempt {plan.number}, {len(self.attempts)} made")
            return
        item = self.script[plan.number - 1]
        if item.get("hits_deadline") and ms(plan.time_limit) != item.get("takes_ms"):
            self.problems.append(
                f"attempt {plan.number}: time limit {ms(plan.time_limit)} ms, "
                f"the script says {item.get('takes_ms')}"
            )
        self.attempts[-1].update(probe=plan.probe, outcome=outcome.name)

    # -- sleepers ------------------------------------------------------------------------------

    def _cancels(self) -> bool:
        return self.cancel_in_wait is not None and len(self.waits) == self.cancel_in_wait

    def sleep(self, d: float) -> None:
        if not self.wait_pending:
            raise CaseFailedError("a sync helper slept outside a wait")
        self.wait_pending = False
        if self._cancels():
            raise KeyboardInterrupt("the caller cancels during the wait")
        self.clock.advance(d)

    async def async_sleep(self, d: float) -> None:
        if self.wait_pending:
            self.wait_pending = False
            if self._cancels():
                task = asyncio.current_task()
                assert task is not None
                task.cancel()
                await asyncio.sleep(0)
            self.clock.advance(d)
            return
        # The helper's attempt timer: the limit passes only while an attempt hangs.
        assert self.hung is not None
        await self.hung.wait()
        if round(d * 1000, 6) != self.hang_ms:
            self.problems.append(f"attempt limit {d * 1000} ms, the script says {self.hang_ms}")
        self.clock.advance(d)

    # -- the operation -------------------------------------------------------------------------

    def _start(self) -> dict[str, Any]:
        n = len(self.attempts) + 1
        if n > len(self.script):
            raise CaseFailedError(f"attempt {n} is not in the script")
        self.attempts.append({"at": round(self.clock.now() * 1000)})
        self.errors.append(None)
        self.values.append(None)
        item = self.script[n - 1]
        if not item.get("hits_deadline"):
            self.clock.advance(item.get("takes_ms", 0) / 1000)
        return item

    def _returned(self, value: Any) -> Any:
        self.values[-1] = value
        return value

    def _raised(self, exc: BaseException) -> BaseException:
        self.errors[-1] = exc
        return exc

    def _outcome(self, item: dict[str, Any]) -> Any:
        """What a non-hanging, non-cancelled item returns or raises (as an exception)."""
        n = len(self.attempts)
        if "returns" in item:
            return self._returned(Value(n, item["returns"]))
        if "response" in item:
            r = item["response"]
            return self._returned(self._response(r["status"], r.get("headers", [])))
        raises = item.get("raises")
        if raises == "transport":
            return self._raised(self._transport())
        if raises == "timeout":
            return self._raised(self._timeout())
        if raises == "answer":
            return self._raised(RunnerAnswerError(f"attempt {n}: a final answer"))
        if raises == "bug":
            return self._raised(AttributeError("'NoneType' object has no attribute 'status'"))
        if isinstance(raises, dict) and "retry_later_ms" in raises:
            return self._raised(holdoff.RetryLaterError(raises["retry_later_ms"] / 1000))
        raise CaseFailedError(f"unknown script item {item!r}")

    def _response(self, status: int, headers: list[list[str]]) -> Any:
        pairs = [(n, v) for n, v in headers]
        if self.is_async:
            import httpx

            return httpx.Response(status, headers=pairs)
        import requests
        from requests.structures import CaseInsensitiveDict

        r = requests.Response()
        r.status_code = status
        r.headers = CaseInsensitiveDict(pairs)
        return r

    def _transport(self) -> BaseException:
        if self.http and self.is_async:
            import httpx

            return httpx.ConnectError("[Errno 111] Connection refused")
        if self.http:
            import requests

            return requests.exceptions.ConnectionError("[Errno 111] Connection refused")
        return ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")

    def _timeout(self) -> BaseException:
        if self.http and self.is_async:
            import httpx

            return httpx.ReadTimeout("timed out")
        if self.http:
            import requests

            return requests.exceptions.ReadTimeout("timed out")
        return TimeoutError("timed out")

    def op(self) -> Any:
        item = self._start()
        if item.get("cancelled"):
            raise self._raised(KeyboardInterrupt("the caller cancels during the attempt"))
        if item.get("hits_deadline"):
            # A sync attempt cannot be cut by the helper: what ends it at its limit is the
            # client's own timeout (`requests.get(url, timeout=...)`), a timeout error.
            self.clock.advance(item.get("takes_ms", 0) / 1000)
            raise self._raised(TimeoutError("the attempt ran to its time limit"))
        got = self._outcome(item)
        if isinstance(got, BaseException):
            raise got
        return got

    async def aop(self) -> Any:
        item = self._start()
        if item.get("cancelled"):
            task = asyncio.current_task()
            assert task is not None
            task.cancel()
            try:
                await asyncio.sleep(0)
            except asyncio.CancelledError as e:
                self._raised(e)
                raise
            raise CaseFailedError("the cancellation did not arrive")
        if item.get("hits_deadline"):
            assert self.hung is not None
            self.hang_ms = item.get("takes_ms", 0)
            self.hung.set()
            try:
                await asyncio.get_running_loop().create_future()  # hangs until cut
            finally:
                self.hung.clear()
        got = self._outcome(item)
        if isinstance(got, BaseException):
            raise got
        return got

    # -- the call --------------------------------------------------------------------------------

    def retrying(self) -> holdoff.Retrying:
        opts: dict[str, Any] = dict(self.limits)
        if any("returns" in i and i["returns"] != "success" for i in self.script):
            opts["classify_result"] = lambda v: outcome_of(v.outcome)
        if any(i.get("raises") == "answer" for i in self.script):
            opts["classify_exception"] = classify_answer
        return self.policy.retrying(
            http=self.http,
            sleep=self.sleep,
            async_sleep=self.async_sleep,
            before_sleep=self.before_sleep,
            after_attempt=self.after_attempt,
            **opts,
        )

    def run(self) -> dict[str, Any]:
        retrying = self.retrying()
        try:
            if self.is_async:
                value = asyncio.run(self._run_async(retrying))
            elif self.http:
                value = retrying.call(self.op)
            else:
                value = retrying(self.op)()
            result = {"returns": self._index(self.values, value, "value")}
        except CaseFailedError:
            raise
        except holdoff.UpstreamUnavailableError as e:
            result = self._unavailable(e)
        except (KeyboardInterrupt, asyncio.CancelledError):
            result = {"raises": "cancelled", "attempts": len(self.attempts)}
        except holdoff.InvalidInputError as e:
            if e.field != "status":
                raise CaseFailedError(f"invalid input naming {e.field!r}, not status") from e
            result = {"raises": "invalid_input", "attempts": len(self.attempts)}
        except BaseException as e:
            if not any(e is err for err in self.errors):
                raise
            result = {"raises": "original", "attempt": self._index(self.errors, e, "error")}
        if self.problems:
            raise CaseFailedError("; ".join(self.problems))
        return {"attempts": self.attempts, "waits": self.waits, "result": result}

    async def _run_async(self, retrying: holdoff.Retrying) -> Any:
        self.hung = asyncio.Event()
        if self.http:
            task = asyncio.ensure_future(retrying.call_async(self.aop))
        else:
            task = asyncio.ensure_future(retrying(self.aop)())
        done, _ = await asyncio.wait({task}, timeout=WATCHDOG_S)
        if not done:
            task.cancel()
            raise CaseFailedError("the call hung")
        return task.result()  # raises what the call raised, a cancellation included

    def _unavailable(self, e: holdoff.UpstreamUnavailableError) -> dict[str, Any]:
        if isinstance(e, holdoff.BreakerOpenError):
            kind = "breaker_open"
        elif isinstance(e, holdoff.GiveUpError):
            kind = "give_up"
        else:
            raise CaseFailedError(f"an UpstreamUnavailableError that is neither kind: {e!r}")
        cause: int | None = None
        if e.__cause__ is not None:
            c = e.__cause__
            if isinstance(c, holdoff.AttemptTimeoutError):
                cause = c.attempt
            else:
                cause = self._index(self.errors, c, "cause")
        elif e.result is not None:
            cause = self._index(self.values, e.result, "result")
        if e.result is not None and cause is not None and self.values[cause - 1] is not e.result:
            raise CaseFailedError(f"result {e.result!r} is not attempt {cause}'s value")
        return {
            "raises": kind,
            "reason": e.reason,
            "attempts": e.attempts,
            "retry_after_ms": ms(e.retry_after),
            "server_delay_ms": ms(e.server_delay),
            "capped": e.capped,
            "cause": cause,
        }

    @staticmethod
    def _index(objs: list[Any], obj: Any, what: str) -> int:
        for i, o in enumerate(objs):
            if o is obj:
                return i + 1
        raise CaseFailedError(f"the {what} {obj!r} is no attempt's")


def run_execute(
    policy: holdoff.Policy,
    clock: holdoff.ManualClock,
    config: dict[str, Any],
    step: dict[str, Any],
    flavour: str,
) -> dict[str, Any]:
    limits: dict[str, Any] = {}
    if "attempt_timeout_ms" in config:
        v = config["attempt_timeout_ms"]
        limits["attempt_timeout"] = None if v is None else v / 1000
    if "total_timeout_ms" in config:
        v = config["total_timeout_ms"]
        limits["total_timeout"] = None if v is None else v / 1000
    return Run(policy, clock, limits, step, flavour).run()


def check_execute(
    expect: Any, got: dict[str, Any], check: Callable[[Any, dict[str, Any], list[str]], None]
) -> None:
    if expect is None:
        return
    if not isinstance(expect, dict):
        raise CaseFailedError("expect must be an object")
    for key, want in expect.items():
        if key == "result":
            try:
                check(want, got["result"], RESULT_KEYS)
            except AssertionError as e:
                raise CaseFailedError(f"result: {e}") from None
            continue
        if key not in ("attempts", "waits"):
            raise CaseFailedError(f"unknown expect key {key!r}")
        have = got[key]
        if not isinstance(want, list) or len(want) != len(have):
            raise CaseFailedError(f"{key}: expected {want!r}, got {have!r}")
        known = ATTEMPT_KEYS if key == "attempts" else WAIT_KEYS
        for i, (w, h) in enumerate(zip(want, have)):
            try:
                check(w, h, known)
            except AssertionError as e:
                raise CaseFailedError(f"{key}[{i}]: {e}  (all: {have!r})") from None
