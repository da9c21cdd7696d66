"""The Python worker of the multi-process fleet test (contract: README.md beside this file).

Calls the upstream through one breaker shared with the other workers through the fleet, for
RUN_MS, and writes its report to OUT.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import time
import urllib.parse

import holdoff

env = os.environ
breaker = holdoff.Breaker(
    trip=holdoff.ConsecutiveFailures(1),
    open_interval=holdoff.Backoff.constant(0.5),
    recoveries=2,
    max_probes_in_flight=1,
    fleet={"url": env["HOLDOFF_FLEET_URL"], "key": env["HOLDOFF_FLEET_KEY"], "refresh": 0.02},
)
upstream = urllib.parse.urlsplit(env["UPSTREAM_URL"])
conn = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=2)
report = {
    "worker": env["WORKER_ID"],
    "calls_started": 0,
    "calls_ended": 0,
    "allowed": 0,
    "refused": 0,
    "errors": 0,
    "statuses": {},
    "slowest_breaker_call_ms": 0.0,
    "refusal_starts": [],
}


def timed(fn, *args):
    t0 = time.perf_counter()
    try:
        return fn(*args)
    finally:
        ms = (time.perf_counter() - t0) * 1000.0
        report["slowest_breaker_call_ms"] = max(report["slowest_breaker_call_ms"], ms)


def call(was_refused: bool) -> bool:
    """One call; True if the breaker refused it."""
    try:
        permit = timed(breaker.allow)
    except holdoff.BreakerOpenError:
        report["refused"] += 1
        if not was_refused:
            report["refusal_starts"].append(time.time() * 1000.0)
        return True
    report["allowed"] += 1
    try:
        conn.request("GET", "/call", headers={"X-Worker-Id": env["WORKER_ID"]})
        res = conn.getresponse()
        res.read()
        status = res.status
    except OSError as e:  # a transport error or timeout: a failure
        print(f"worker {env['WORKER_ID']}: {e!r}", file=sys.stderr)
        conn.close()
        report["errors"] += 1
        timed(breaker.record, permit, holdoff.Outcome.FAILURE)
        return False
    report["statuses"][str(status)] = report["statuses"].get(str(status), 0) + 1
    if status == 200:
        outcome = holdoff.Outcome.SUCCESS
    elif status == 429:
        outcome = holdoff.Outcome.retry_later(int(res.getheader("Retry-After") or 1))
    else:
        outcome = holdoff.Outcome.FAILURE
    timed(breaker.record, permit, outcome)
    if status == 200:
        time.sleep(0.01)
    return False


end = time.monotonic() + int(env["RUN_MS"]) / 1000.0
refused = False
while time.monotonic() < end:
    report["calls_started"] += 1
    try:
        refused = call(refused)
    except Exception as e:  # noqa: BLE001 (counted; the loop goes on: every call must end)
        print(f"worker {env['WORKER_ID']}: {e!r}", file=sys.stderr)
        report["errors"] += 1
        refused = False
    report["calls_ended"] += 1
    if refused:
        time.sleep(0.005)
breaker.close()
with open(env["OUT"], "w") as f:
    json.dump(report, f)
