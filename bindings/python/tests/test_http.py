"""HTTP: Retry-After values and the other provider-delay headers in their order of precedence,
the classifier (statuses, `x-should-retry`), and header names and values that are not valid
Unicode text (a lone surrogate, as aiohttp's latin-1 or a `surrogateescape` decoding can leave
in a `str`), which read as garbage: an unusable hint, an unknown name, never a
`UnicodeEncodeError` that would lose the attempt (and a probe)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import holdoff
from half_open import half_open
from holdoff import Outcome

NOW = 1_559_559_600  # 2019-06-03 11:00:00 UTC, urllib3's test "now"


@pytest.mark.parametrize(
    "value,delay",
    [
        ("3600", 3600.0),
        (" \t42 ", 42.0),
        ("Mon, 03 Jun 2019 11:30:12 GMT", 1812.0),
        ("Monday, 03-Jun-19 11:30:12 GMT", 1812.0),
        ("Mon Jun  3 11:30:12 2019", 1812.0),
        ("Mon, 03 Jun 2019 10:00:00 GMT", 0.0),
        ("1.5", 1.5),
        (b"120", 120.0),
    ],
)
def test_parse_retry_after(value: Any, delay: float) -> None:
    r = holdoff.parse_retry_after(value, now=NOW)
    assert r.delay == delay and r.unusable is None and bool(r)


@pytest.mark.parametrize(
    "value,why",
    [("-5", "signed"), ("soon", "malformed"), ("", "missing"), ("120, 60", "conflicting")],
)
def test_parse_retry_after_unusable(value: str, why: str) -> None:
    r = holdoff.parse_retry_after(value, now=NOW)
    assert r.delay is None and r.unusable == why and not r


def test_parse_retry_after_now_forms() -> None:
    date = "Mon, 03 Jun 2019 11:30:12 GMT"
    aware = datetime(2019, 6, 3, 11, 0, tzinfo=timezone.utc)
    clock = holdoff.ManualClock(wall_origin=NOW - 12)
    clock.set(12)
    for now in (NOW, float(NOW), aware, clock):
        assert holdoff.parse_retry_after(date, now=now).delay == 1812.0
    assert holdoff.parse_retry_after(date).delay == 0.0  # the real clock is past 2019


def test_hint_from_headers_shapes() -> None:
    pairs = [("Retry-After", "120"), ("retry-after", "120")]
    assert holdoff.hint(pairs).delay == 120.0
    assert holdoff.hint({"RateLimit-Reset": "50"}).source == "ratelimit_reset"
    r = holdoff.hint([("X-RateLimit-Reset", str(NOW + 30))], now=NOW)
    assert (r.delay, r.source) == (30.0, "x_ratelimit_reset")
    assert holdoff.hint([("Retry-After", "1"), ("Retry-After", "2")]).unusable == "conflicting"
    assert holdoff.hint([]).source == "none"


def test_provider_delay_headers_in_order_of_precedence() -> None:
    r = holdoff.hint({"retry-after-ms": "1500.2", "Retry-After": "9"})
    assert (r.delay, r.source) == (1.501, "retry_after_ms")  # milliseconds, rounded up
    r = holdoff.hint([("x-ms-retry-after-ms", "250"), ("RateLimit-Reset", "9")])
    assert (r.delay, r.source) == (0.25, "x_ms_retry_after_ms")
    r = holdoff.hint([("RateLimit", '"day";r=5;t=3600, "minute";r=0;t=30')])
    assert (r.delay, r.source) == (30.0, "ratelimit")  # the exhausted policy's reset
    r = holdoff.hint([("RateLimit", "t=oops")])
    assert (r.unusable, r.source) == ("malformed", "ratelimit")


def test_classifier() -> None:
    c = holdoff.Classifier(failure_statuses=[403])
    assert c.classify(200).outcome == Outcome.SUCCESS
    assert c.classify(403).outcome == Outcome.FAILURE
    assert c.classify(404).outcome == Outcome.ANSWER
    r = c.classify(429, {"Retry-After": "7"})
    assert r.outcome == Outcome.retry_later(7) and r.hint.delay == 7.0
    assert c.classify(429).outcome == Outcome.FAILURE
    w = holdoff.Classifier(rate_limit_default_wait=timedelta(seconds=3))
    assert w.classify(429).outcome.delay == 3.0
    # A status outside 100..599 is a broken upstream, whatever its headers say.
    assert c.classify(600, {"x-should-retry": "false"}).outcome == Outcome.FAILURE
    assert c.classify(0).outcome == Outcome.FAILURE
    with pytest.raises(holdoff.InvalidInputError) as e:
        c.classify(1000)
    assert e.value.field == "status" and isinstance(e.value, ValueError)
    assert "between 0 and 999" in e.value.rule


def test_x_should_retry() -> None:
    c = holdoff.Classifier()
    got = c.classify(409, {"x-should-retry": "true"})
    assert (got.outcome, got.should_retry) == (Outcome.FAILURE, True)
    got = c.classify(500, {"X-Should-Retry": "false"})
    assert (got.outcome, got.should_retry) == (Outcome.ANSWER, False)
    assert c.classify(200, {"x-should-retry": "false"}).outcome == Outcome.SUCCESS
    assert c.classify(500, {"x-should-retry": "maybe"}).should_retry is None
    listed = holdoff.Classifier(failure_statuses=[500])
    assert listed.classify(500, {"x-should-retry": "false"}).outcome == Outcome.FAILURE
    assert "should_retry=True" in repr(c.classify(409, {"x-should-retry": "true"}))


# -- header text that is not text -------------------------------------------------------------

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


def test_after_response_records_the_probe_whatever_the_headers_hold() -> None:
    # A failure: the probe's answer re-opens the breaker (it was counted, not lost).
    policy = half_open()
    call = holdoff.PolicyCall()
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
    policy = half_open()
    call = holdoff.PolicyCall()
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
    policy = half_open()
    slept: list[float] = []

    def sleep(d: float) -> None:
        slept.append(d)
        policy.clock.advance(d)

    replies = [Response(503, {"Retry-After": ESCAPED}), Response(200, {"Retry-After": LONE})]
    got = policy.retrying(http=True, sleep=sleep).call(lambda: replies.pop(0))
    assert got.status_code == 200
    # The garbage hint is no hint: the failed probe re-opened the breaker for its interval, and
    # the retry waited for the next probe; that probe's success closed the breaker.
    assert slept == [10.0]
    s = policy.breaker.snapshot()
    assert (s.state, s.probes, s.probes_in_flight, s.closes) == ("closed", 2, 0, 1)


def test_bytes_headers_are_latin_1() -> None:
    headers: dict[bytes, bytes] = {b"Retry-After": b"\xff120"}
    r = holdoff.hint(headers)
    assert (r.unusable, r.source) == ("malformed", "retry_after")
    assert holdoff.hint([(b"retry-after", b" 120 ")]).delay == 120.0
