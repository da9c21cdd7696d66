"""Header names and values that are not valid Unicode text (a lone surrogate, as aiohttp's
latin-1 or a `surrogateescape` decoding can leave in a `str`) read as garbage: an unusable hint,
an unknown name, never a `UnicodeEncodeError` that would lose the attempt (and a probe)."""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

import pytest

import holdoff
from holdoff import Outcome

# What b"\xff120" becomes when a client decodes header bytes with surrogateescape.
ESCAPED = b"\xff120".decode("utf-8", "surrogateescape")
LONE = "\udc80"


@pytest.mark.parametrize("value", [LONE, ESCAPED, "12" + LONE, LONE + " GMT"])
def test_a_retry_after_that_is_not_text_is_malformed(value: str) -> None:
    assert ESCAPED == "\udcff120"
    r = holdoff.hint([("Retry-After", value)])
    assert (r.delay, r.unusable, r.source) == (None, "malformed", "retry_after")
    assert holdoff.parse_retry_after(value).unusable == "malformed"
    # The first field present is the hint, even unusable: garbage is not skipped for a later one.
    r = holdoff.hint([("retry-after-ms", value), ("Retry-After", "5")])
    assert (r.delay, r.unusable, r.source) == (None, "malformed", "retry_after_ms")


def test_a_name_that_is_not_text_is_an_unknown_header() -> None:
    r = holdoff.hint([("Retry-After" + LONE, "5")])
    assert (r.delay, r.unusable, r.source) == (None, "missing", "none")
    r = holdoff.hint({"X-" + LONE: LONE, "Retry-After": "5"})
    assert (r.delay, r.source) == (5.0, "retry_after")


def test_classify_reads_garbage_as_no_usable_hint() -> None:
    c = holdoff.Classifier()
    got = c.classify(429, {"Retry-After": ESCAPED})
    assert got.outcome == Outcome.FAILURE  # a 429 without a usable hint: the counted path
    assert (got.hint.unusable, got.hint.source) == ("malformed", "retry_after")
    got = c.classify(503, [("Retry-After", LONE), ("x-should-retry", LONE)])
    assert (got.outcome, got.should_retry) == (Outcome.FAILURE, None)
    waits = holdoff.Classifier(rate_limit_default_wait=7)
    assert waits.classify(429, {"Retry-After": LONE}).outcome == Outcome.retry_later(7)
    assert c.classify(200, {LONE: LONE}).outcome == Outcome.SUCCESS


def half_open(recoveries: int = 1) -> Tuple[holdoff.ManualClock, holdoff.Policy]:
    """A policy whose breaker's next call is its one probe (the probe timeout is an hour)."""
    clock = holdoff.ManualClock()
    b = holdoff.Breaker(trip=holdoff.ConsecutiveFailures(1),
                        open_interval=holdoff.Backoff.constant(10), recoveries=recoveries,
                        probe_timeout=3600, clock=clock)
    b.record(b.allow(), "failure")
    clock.advance(10)
    return clock, holdoff.Policy(b, holdoff.RetryBudget(clock=clock))


def test_after_response_records_the_probe_whatever_the_headers_hold() -> None:
    # A failure: the probe's answer re-opens the breaker (it was counted, not lost).
    clock, policy = half_open()
    call = holdoff.Call()
    p = policy.before_attempt(call)
    assert isinstance(p, holdoff.Permit) and p.probe
    d, c = policy.after_response(call, p, 503, [("Retry-After", ESCAPED)])
    assert p.recorded
    assert (c.outcome, c.hint.unusable) == (Outcome.FAILURE, "malformed")
    s = policy.breaker.snapshot()
    assert (s.state, s.probes_in_flight, s.retry_after) == ("open", 0, 10.0)
    reasons = [e.reason for e in policy.breaker.drain_events()]
    assert reasons == ["tripped", "probe_admitted", "probe_failed"]
    assert (d.action, d.delay, d.source) == ("retry", 10.0, "breaker")

    # A success: the probe closes the breaker.
    clock, policy = half_open()
    call = holdoff.Call()
    p = policy.before_attempt(call)
    assert isinstance(p, holdoff.Permit) and p.probe
    d, c = policy.after_response(call, p, 200, {"Retry-After": LONE, LONE: ESCAPED})
    assert p.recorded and d.action == "done" and c.outcome == Outcome.SUCCESS
    assert policy.breaker.state == "closed"


class Response:
    def __init__(self, status_code: int, headers: Any) -> None:
        self.status_code = status_code
        self.headers = headers


def test_the_http_helper_keeps_its_probe() -> None:
    clock, policy = half_open()
    slept: List[float] = []

    def sleep(d: float) -> None:
        slept.append(d)
        clock.advance(d)

    replies = [Response(503, {"Retry-After": ESCAPED}), Response(200, {"Retry-After": LONE})]
    got = policy.retrying(http=True, sleep=sleep).call(lambda: replies.pop(0))
    assert got.status_code == 200
    # The garbage hint is no hint: the failed probe re-opened the breaker for its interval, and
    # the retry waited for the next probe; that probe's success closed the breaker.
    assert slept == [10.0]
    s = policy.breaker.snapshot()
    assert (s.state, s.probes, s.probes_in_flight, s.closes) == ("closed", 2, 0, 1)


def test_bytes_headers_are_latin_1() -> None:
    headers: Dict[bytes, bytes] = {b"Retry-After": b"\xff120"}
    r = holdoff.hint(headers)
    assert (r.unusable, r.source) == ("malformed", "retry_after")
    assert holdoff.hint([(b"retry-after", b" 120 ")]).delay == 120.0
