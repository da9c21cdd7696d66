"""The scripted scenario the exporter tests (OpenTelemetry, Prometheus) collect after, on one
manual clock, and the series it must leave, derived by hand from the breaker's and the
budget's rules (docs/metrics.md):

* ``payments``, a breaker (5 consecutive failures trip it, open 10 s, 1 recovery): 5 failures
  trip it, 2 calls are refused, 10 s later a probe succeeds and closes it;
* ``search``, a policy (its own breaker, budget and a quota of 100 tokens, retry cost 5): one
  call whose first attempt raises ``RetryLaterError(2.0)``; the breaker opens for the 2 s, the
  budget waits them, the second attempt is the breaker's probe and succeeds;
* a group: ``a`` gets one failure, ``b`` one success.

Every object is handed to the exporter before the first call: counting starts at that read.
"""

from __future__ import annotations

from dataclasses import dataclass

import holdoff

#: Non-zero series of the scenario: (name, attributes) -> value.
Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


def key(name: str, **attributes: str) -> tuple[str, frozenset[tuple[str, str]]]:
    return (name, frozenset(attributes.items()))


@dataclass
class Scenario:
    clock: holdoff.ManualClock
    payments: holdoff.Breaker
    search: holdoff.Policy
    group: holdoff.BreakerGroup


def build() -> Scenario:
    clock = holdoff.ManualClock()
    payments = holdoff.Breaker(
        trip=holdoff.ConsecutiveFailures(5),
        open_interval=holdoff.Backoff.constant(10),
        recoveries=1,
        clock=clock,
    )
    search = holdoff.Policy(
        holdoff.Breaker(recoveries=1, clock=clock),
        holdoff.RetryBudget(clock=clock),
        holdoff.RetryQuota(capacity=100, retry_cost=5),
    )
    group = holdoff.BreakerGroup(clock=clock)
    return Scenario(clock, payments, search, group)


def run(s: Scenario) -> None:
    """The calls, after the objects were handed to the exporter."""
    for _ in range(5):
        s.payments.record(s.payments.allow(), "failure")
    for _ in range(2):
        try:
            s.payments.allow()
        except holdoff.BreakerOpenError:
            pass
        else:
            raise AssertionError("the tripped breaker admitted a call")
    s.clock.advance(10)
    probe = s.payments.allow()
    assert probe.probe
    s.payments.record(probe, "success")

    answers = iter([holdoff.RetryLaterError(2.0), None])

    def fetch() -> str:
        e = next(answers)
        if e is not None:
            raise e
        return "ok"

    assert s.search.retrying(sleep=s.clock.advance).call(fetch) == "ok"

    a = s.group.get("a")
    a.record(a.allow(), "failure")
    b = s.group.get("b")
    b.record(b.allow(), "success")


def expected() -> Series:
    """What the scenario leaves, zeros left out; the breakers' and the policy's series carry
    ``upstream`` (the group's from its keys)."""
    return {
        # payments: 5 admitted failures, the trip, 2 refusals, the probe (admitted, counted as
        # a probe, half open) and its success (recovered: closed again).
        key("holdoff.breaker.state", state="closed", upstream="payments"): 1.0,
        key("holdoff.breaker.admitted", upstream="payments"): 6.0,
        key("holdoff.breaker.refused", upstream="payments"): 2.0,
        key("holdoff.breaker.outcomes", outcome="failure", upstream="payments"): 5.0,
        key("holdoff.breaker.outcomes", outcome="success", upstream="payments"): 1.0,
        key("holdoff.breaker.probes", upstream="payments"): 1.0,
        key("holdoff.breaker.transitions", reason="tripped", upstream="payments"): 1.0,
        key("holdoff.breaker.transitions", reason="probe_admitted", upstream="payments"): 1.0,
        key("holdoff.breaker.transitions", reason="recovered", upstream="payments"): 1.0,
        # search's breaker: the retry-later opens it for 2 s, the retry is its probe.
        key("holdoff.breaker.state", state="closed", upstream="search"): 1.0,
        key("holdoff.breaker.admitted", upstream="search"): 2.0,
        key("holdoff.breaker.outcomes", outcome="retry_later", upstream="search"): 1.0,
        key("holdoff.breaker.outcomes", outcome="success", upstream="search"): 1.0,
        key("holdoff.breaker.probes", upstream="search"): 1.0,
        key("holdoff.breaker.transitions", reason="retry_later", upstream="search"): 1.0,
        key("holdoff.breaker.transitions", reason="probe_admitted", upstream="search"): 1.0,
        key("holdoff.breaker.transitions", reason="recovered", upstream="search"): 1.0,
        # search's retries: two attempts, one retry after a 2 s Retry-After wait.
        key("holdoff.retry.attempts", upstream="search"): 2.0,
        key("holdoff.retry.retries", upstream="search"): 1.0,
        key("holdoff.retry.waits", source="retry_after", upstream="search"): 1.0,
        key("holdoff.retry.wait.duration", source="retry_after", upstream="search"): 2.0,
        # search's quota: the retry's 5 tokens, refunded by its success.
        key("holdoff.quota.tokens", upstream="search"): 100.0,
        # the group: two keys, a failure on a, a success on b.
        key("holdoff.group.keys"): 2.0,
        key("holdoff.breaker.state", state="closed", upstream="a"): 1.0,
        key("holdoff.breaker.admitted", upstream="a"): 1.0,
        key("holdoff.breaker.outcomes", outcome="failure", upstream="a"): 1.0,
        key("holdoff.breaker.state", state="closed", upstream="b"): 1.0,
        key("holdoff.breaker.admitted", upstream="b"): 1.0,
        key("holdoff.breaker.outcomes", outcome="success", upstream="b"): 1.0,
    }
