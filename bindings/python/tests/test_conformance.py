"""Every case of ``conformance/cases`` through holdoff's public Python API, one pytest id per
case, following the runner contract in ``conformance/README.md`` and mirroring the Rust
reference runner (``core/tests/conformance.rs``). A case with an ``execute`` step runs once per
helper flavour (``sync plain``, ``async plain``, ``sync http``, ``async http``; see
``conformance_execute.py``), each on a fresh build, with the id ``<case> [<flavour>]``.

The case's neutral configuration (integer milliseconds) is turned into the Python constructors
(float seconds), as a Python user would write them. The one translation of an error: a
``Backoff`` is a value of its own, so its errors name ``backoff.<field>``; the runner reports
them under the field that holds the backoff (``breaker.open_interval``, ``budget.backoff``), as
``core/src/interop/config.rs`` does.

A fleet case (``"workers": N``) builds N workers from its config on the one manual clock, each
attached to the case's ``memory://<case id>`` store (reset before the case); a step's ``worker``
picks whose objects it uses, ``fleet_sync`` ticks them (``Breaker.sync_fleet``) and
``fleet_store`` drives the store (``holdoff.memory_store_control``).

Every object a case builds (each worker's breaker or group, quota and policy) has its metrics
read once right after it is built, which starts the core's counting; a ``metrics`` step reads
one object's series (``holdoff.MetricReading``), drops the zeros and compares the rest exactly.

``HOLDOFF_CASES=substring`` runs only the cases whose id contains it.
"""

from __future__ import annotations

import json
import math
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import holdoff
from conformance_execute import CaseFailedError, check_execute, flavours, ms, run_execute
from conformance_execute import outcome_of as outcome

SUITE_VERSION = 4

HERE = Path(__file__).resolve().parent
ROOT = Path(os.environ.get("HOLDOFF_CONFORMANCE_DIR", HERE.parents[2] / "conformance"))


def _load_cases() -> list[dict[str, Any]]:
    version = int((ROOT / "VERSION").read_text().strip())
    assert version == SUITE_VERSION, (
        f"runner written for suite version {SUITE_VERSION}, got {version}"
    )
    cases: list[dict[str, Any]] = []
    seen = set()
    for path in sorted((ROOT / "cases").rglob("*.json")):
        doc = json.loads(path.read_text())
        for case in doc["cases"]:
            assert case["id"] not in seen, f"duplicate case id {case['id']}"
            seen.add(case["id"])
            cases.append(case)
    needle = os.environ.get("HOLDOFF_CASES", "")
    return [c for c in cases if needle in c["id"]]


CASES = _load_cases()


def _runs() -> list[Any]:
    """One run per case, or per (case, flavour) for a case with an execute step."""
    runs = []
    for case in CASES:
        if any(step.get("op") == "execute" for step in case.get("steps", [])):
            runs += [pytest.param(case, f, id=f"{case['id']} [{f}]") for f in flavours(case)]
        else:
            runs.append(pytest.param(case, None, id=case["id"]))
    return runs


# -- conversions ------------------------------------------------------------------------------


def num(v: Any) -> Any:
    """A JSON number, or one of the strings "NaN", "Infinity", "-Infinity"."""
    if isinstance(v, str):
        return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}.get(v, v)
    return v


def secs(ms: Any) -> Any:
    """Integer (or odd) milliseconds of a case to float seconds of the Python API."""
    v = num(ms)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return v / 1000
    return v


def clock_at(ms_: int) -> timedelta:
    """A clock position: a timedelta is exact to the microsecond at any magnitude, a float of
    seconds is not past about 10^8 s (the suite moves clocks to a century)."""
    return timedelta(milliseconds=ms_)


def headers(step: dict[str, Any]) -> list[tuple[str, str]]:
    return [(n, v) for n, v in step.get("headers", [])]


def decision_dict(d: holdoff.Decision) -> dict[str, Any]:
    if d.action == "done":
        return {"decision": "done"}
    if d.action == "retry":
        return {
            "decision": "retry",
            "delay_ms": ms(d.delay),
            "source": d.source,
            "server_delay_ms": ms(d.server_delay),
            "capped": d.capped,
        }
    return {"decision": "give_up", "reason": d.reason, "server_delay_ms": ms(d.server_delay)}


def event_dict(e: holdoff.StateChange) -> dict[str, Any]:
    return {
        "at": round(e.at * 1000),
        "from": e.from_state,
        "to": e.to_state,
        "episode": e.episode,
        "reason": e.reason,
        "requested_delay_ms": ms(e.requested_delay),
        "open_for_ms": ms(e.open_for),
    }


def same(want: Any, got: Any) -> bool:
    if isinstance(want, bool) or isinstance(got, bool):
        return want is got
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        # Durations come back as float seconds: equal to the microsecond, or within the few ulps
        # a float of seconds cannot resolve at huge magnitudes.
        return math.isclose(float(want), float(got), rel_tol=4 * 2.0**-52, abs_tol=1e-3)
    return bool(want == got)


def check(expect: dict[str, Any] | None, actual: dict[str, Any], known: list[str]) -> None:
    if expect is None:
        return
    if not isinstance(expect, dict):
        raise CaseFailedError("expect must be an object")
    for k, v in expect.items():
        if k not in known:
            raise CaseFailedError(f"unknown expect key {k!r}")
        got = actual.get(k)
        if not same(v, got):
            raise CaseFailedError(f"{k}: expected {v!r}, got {got!r}  (all: {actual!r})")


def error_name(e: BaseException) -> str:
    code = getattr(e, "code", None)
    if isinstance(e, holdoff.HoldoffError) and isinstance(code, str):
        return code
    raise e


# -- building ---------------------------------------------------------------------------------


def backoff(spec: dict[str, Any], default: holdoff.Backoff, field: str) -> holdoff.Backoff:
    """A backoff spec over a default, as core/src/interop/config.rs reads it: an absent
    `max_ms` keeps the default cap unless `initial_ms` is larger."""
    initial = secs(spec["initial_ms"]) if "initial_ms" in spec else default.initial
    multiplier = num(spec["multiplier"]) if "multiplier" in spec else default.multiplier
    jitter = num(spec["jitter"]) if "jitter" in spec else default.jitter
    if "max_ms" in spec:
        cap = secs(spec["max_ms"])
    else:
        cap = default.max
        if isinstance(initial, (int, float)) and initial > cap:
            cap = initial
    try:
        return holdoff.Backoff(initial, multiplier, cap, jitter)
    except (holdoff.InvalidConfigError, holdoff.ConfigTypeError) as e:
        if e.field.startswith("backoff."):
            raise type(e)(field + e.field[len("backoff") :], e.rule) from None
        raise


def trip(spec: dict[str, Any]) -> holdoff.TripPolicy:
    policy = spec["policy"]
    if policy == "consecutive":
        return holdoff.ConsecutiveFailures(spec["threshold"])
    if policy == "window":
        return holdoff.FailuresInWindow(spec["threshold"], secs(spec["window_ms"]))
    if policy == "rate":
        kwargs = {}
        if "buckets" in spec:
            kwargs["buckets"] = spec["buckets"]
        return holdoff.FailureRate(
            num(spec["threshold"]), spec["min_calls"], secs(spec["window_ms"]), **kwargs
        )
    raise CaseFailedError(f"unknown trip policy {policy!r}")


def breaker_kwargs(spec: dict[str, Any], clock: holdoff.ManualClock) -> dict[str, Any]:
    kw: dict[str, Any] = {"clock": clock}
    if "trip" in spec:
        kw["trip"] = trip(spec["trip"])
    if "open_interval" in spec:
        kw["open_interval"] = backoff(
            spec["open_interval"], holdoff.DEFAULT_OPEN_INTERVAL, "breaker.open_interval"
        )
    for key in ("recoveries", "max_probes_in_flight", "seed"):
        if key in spec:
            kw[key] = spec[key]
    if "probe_timeout_ms" in spec:
        kw["probe_timeout"] = secs(spec["probe_timeout_ms"])
    if "max_retry_later_ms" in spec:
        kw["max_retry_later"] = secs(spec["max_retry_later_ms"])
    return kw


def fleet_options(spec: dict[str, Any]) -> dict[str, Any]:
    """A neutral `fleet` (integer ms) as the Python option: a dict of FleetConfig's names in
    float seconds (an absent url or key stays absent, for the binding to refuse)."""
    opts: dict[str, Any] = {k: spec[k] for k in ("url", "key") if k in spec}
    for name in ("refresh", "fallback_after", "timeout", "ttl"):
        if f"{name}_ms" in spec:
            opts[name] = secs(spec[f"{name}_ms"])
    return opts


class Worker:
    """One worker's objects, built from the case's config (a fleet case builds several, all on
    the one clock and attached to the one fleet)."""

    def __init__(self, case: dict[str, Any], clock: holdoff.ManualClock) -> None:
        config = case.get("config", {})
        self.breaker: holdoff.Breaker | None = None
        self.group: holdoff.BreakerGroup | None = None
        # The breaker's options without the fleet: a `record_foreign` breaker shares no fleet.
        self.breaker_kwargs: dict[str, Any] | None = None
        fleet: dict[str, Any] = {}
        if "fleet" in config:
            fleet["fleet"] = fleet_options(config["fleet"])
        if "breaker" in config:
            self.breaker_kwargs = breaker_kwargs(config["breaker"], clock)
            if case.get("group"):
                gkw: dict[str, Any] = {}
                if "max_keys" in config.get("group", {}):
                    gkw["max_keys"] = config["group"]["max_keys"]
                self.group = holdoff.BreakerGroup(**self.breaker_kwargs, **gkw, **fleet)
            else:
                self.breaker = holdoff.Breaker(**self.breaker_kwargs, **fleet)
        self.budget: holdoff.RetryBudget | None = None
        if "budget" in config:
            spec = config["budget"]
            kw: dict[str, Any] = {"clock": clock}
            for key, name in (
                ("max_rate_limit_duration_ms", "max_rate_limit_duration"),
                ("retry_after_cap_ms", "retry_after_cap"),
                ("max_backoff_duration_ms", "max_backoff_duration"),
            ):
                if key in spec:
                    kw[name] = secs(spec[key])
            for key in ("max_retries", "seed", "give_up_above_cap"):
                if key in spec:
                    kw[key] = spec[key]
            if "backoff" in spec:
                kw["backoff"] = backoff(
                    spec["backoff"], holdoff.DEFAULT_BUDGET_BACKOFF, "budget.backoff"
                )
            self.budget = holdoff.RetryBudget(**kw)
        self.quota: holdoff.RetryQuota | None = None
        if "quota" in config:
            self.quota = holdoff.RetryQuota(**config["quota"])
        ckw: dict[str, Any] = {}
        cspec = config.get("classifier", {})
        for key in ("failure_statuses", "answer_statuses", "retry_after_statuses"):
            if key in cspec:
                ckw[key] = cspec[key]
        if "rate_limit_default_wait_ms" in cspec:
            ckw["rate_limit_default_wait"] = secs(cspec["rate_limit_default_wait_ms"])
        self.classifier = holdoff.Classifier(**ckw)
        self.policy: holdoff.Policy | None = None
        if case.get("policy"):
            assert self.breaker is not None and self.budget is not None, "a policy case needs both"
            self.policy = holdoff.Policy(self.breaker, self.budget, self.quota, self.classifier)
        # Counting starts at an object's first read of its metrics: each is read once now, so
        # the `metrics` steps count the whole case.
        for obj in (self.breaker, self.group, self.quota, self.policy):
            if obj is not None:
                obj.metrics()


class Ctx:
    def __init__(self, case: dict[str, Any], flavour: str | None = None) -> None:
        config = case.get("config", {})
        self.flavour = flavour
        self.execute_config: dict[str, Any] = config.get("execute", {})
        origin = case.get("clock", {}).get("wall_origin_unix_ms", 0)
        self.clock = holdoff.ManualClock(wall_origin=origin / 1000)
        self.quota_config: dict[str, Any] = config.get("quota", {})
        # A fleet case's store starts empty and up (a case may run once per flavour).
        self.store: str | None = None
        url = config.get("fleet", {}).get("url")
        if isinstance(url, str) and url.startswith("memory://"):
            self.store = url[len("memory://") :]
            holdoff.memory_store_reset(self.store)
        self.workers: list[Worker] = []
        try:
            for _ in range(case.get("workers", 1)):
                self.workers.append(Worker(case, self.clock))
        except BaseException:
            self.close()
            raise
        self.use(0)
        # Each permit with the breaker object that admitted it: it is recorded there, as user
        # code does (a group's key may have been evicted or overflowed since). Names are shared
        # by the workers.
        self.permits: dict[str, tuple[holdoff.Permit, holdoff.Breaker]] = {}
        self.calls: dict[str, holdoff.RetryState] = {}
        self.policy_calls: dict[str, holdoff.PolicyCall] = {}
        self.leases: dict[str, holdoff.QuotaLease] = {}

    def use(self, i: int) -> None:
        """Makes worker `i`'s objects the ones the steps use."""
        if not 0 <= i < len(self.workers):
            raise CaseFailedError(f"no worker {i}")
        w = self.workers[i]
        self.breaker, self.group, self.breaker_kwargs = w.breaker, w.group, w.breaker_kwargs
        self.budget, self.quota, self.policy = w.budget, w.quota, w.policy
        self.classifier = w.classifier

    def close(self) -> None:
        """Closes every worker's fleet."""
        for w in self.workers:
            if w.breaker is not None:
                w.breaker.close()

    def fleet_sync(self, step: dict[str, Any], expect: dict[str, Any] | None) -> None:
        which = [step["worker"]] if "worker" in step else range(len(self.workers))
        for i in which:
            self.use(i)
            if self.breaker is None:
                raise CaseFailedError("the case has no breaker")
            r = self.breaker.sync_fleet()
            rec = r.record
            a = {
                "ok": r.ok,
                "attached": r.attached,
                "granted": r.granted,
                "fleet_state": None if rec is None else rec.state,
                "fleet_episode": None if rec is None else rec.episode,
                "fleet_recoveries": None if rec is None else rec.recoveries,
            }
            try:
                check(expect, a, list(a))
            except CaseFailedError as e:
                raise CaseFailedError(f"worker {i}: {e}") from None

    def metrics(self, step: dict[str, Any], expect: Any) -> None:
        """The object's readings as series (`name{k=v,...}`, attributes sorted by key), zeros
        dropped, equal to `expect.series`: the same series, each value within 1e-9."""
        of = step.get("of")
        objects: dict[Any, Any] = {
            "breaker": self.policy.breaker if self.policy is not None else self.breaker,
            "policy": self.policy,
            "quota": self.quota,
            "group": self.group,
        }
        target = objects.get(of)
        if target is None:
            raise CaseFailedError(f"metrics of {of!r}: the case has none (breaker, policy, ...)")
        got: dict[str, float] = {}
        for r in target.metrics():
            if r.value != 0:
                attrs = ",".join(f"{k}={v}" for k, v in sorted(r.attributes.items()))
                got[f"{r.name}{{{attrs}}}" if attrs else r.name] = r.value
        if expect is None:
            return
        if not isinstance(expect, dict):
            raise CaseFailedError("expect must be an object")
        for k in expect:
            if k != "series":
                raise CaseFailedError(f"unknown expect key {k!r}")
        want = expect.get("series")
        if want is None:
            return
        errors = [
            f"{k}: expected {v}, got {got.get(k, 0)}"
            for k, v in sorted(want.items())
            if abs(got.get(k, 0) - v) > 1e-9
        ]
        errors += [f"{k}: expected 0, got {g}" for k, g in sorted(got.items()) if k not in want]
        if errors:
            raise CaseFailedError(f"metrics of {of}: {'; '.join(errors)}")

    def breaker_for(self, step: dict[str, Any]) -> holdoff.Breaker:
        """The step's breaker; a step naming a `key` asks the group once."""
        key = step.get("key")
        if key is not None:
            if self.group is None:
                raise CaseFailedError("step names a key but the case has no group")
            return self.group.get(key)
        if self.breaker is None:
            raise CaseFailedError("the case has no breaker")
        return self.breaker

    def allow(self, step: dict[str, Any], a: dict[str, Any]) -> bool:
        b = self.breaker_for(step)
        try:
            p = b.allow()
        except holdoff.BreakerOpenError as r:
            a.update(admitted=False, retry_after_ms=ms(r.retry_after), state=r.state)
            return False
        a.update(admitted=True, episode=p.episode, probe=p.probe)
        self.permits[step.get("as", "_last")] = (p, b)
        return True

    def record(self, name: str, o: holdoff.Outcome, a: dict[str, Any]) -> None:
        if name not in self.permits:
            raise CaseFailedError(f"no permit named {name!r}")
        permit, b = self.permits[name]
        try:
            a["effect"] = b.record(permit, o)
        except holdoff.PermitError as e:
            a["error"] = error_name(e)

    def step(self, step: dict[str, Any]) -> None:
        op = step["op"]
        expect = step.get("expect")
        a: dict[str, Any] = {}
        self.use(step.get("worker", 0))
        call_name = step.get("call", "default")
        if op == "allow":
            self.allow(step, a)
            check(expect, a, ["admitted", "episode", "probe", "retry_after_ms", "state"])
        elif op == "record":
            self.record(step["permit"], outcome(step["outcome"]), a)
            check(expect, a, ["effect", "error"])
        elif op == "call":
            o = outcome(step["outcome"])
            if self.allow(step, a):
                self.record(step.get("as", "_last"), o, a)
            check(expect, a, ["admitted", "episode", "probe", "retry_after_ms", "state", "effect"])
        elif op == "record_foreign":
            name = step["permit"]
            if name not in self.permits:
                raise CaseFailedError(f"no permit named {name!r}")
            assert self.breaker_kwargs is not None, "no breaker config"
            other = holdoff.Breaker(**self.breaker_kwargs)
            try:
                a["effect"] = other.record(self.permits[name][0], holdoff.Outcome.SUCCESS)
            except holdoff.PermitError as e:
                a["error"] = error_name(e)
            check(expect, a, ["error", "effect"])
        elif op == "snapshot":
            s = self.breaker_for(step).snapshot()
            a = {
                "state": s.state,
                "episode": s.episode,
                "failures": s.failures,
                "recoveries": s.recoveries,
                "probes_in_flight": s.probes_in_flight,
                "retry_after_ms": ms(s.retry_after),
                "probe_ready": s.probe_ready,
                "interval_ms": ms(s.interval),
                "opens": s.opens,
                "closes": s.closes,
                "probes": s.probes,
                "refusals": s.refusals,
                "stale_answers": s.stale_answers,
            }
            check(expect, a, list(a))
        elif op == "events":
            got = [event_dict(e) for e in self.breaker_for(step).drain_events()]
            if not isinstance(expect, list):
                raise CaseFailedError("events expects an array")
            if len(expect) != len(got):
                raise CaseFailedError(f"expected {len(expect)} events, got {len(got)}: {got!r}")
            for i, (w, g) in enumerate(zip(expect, got)):
                try:
                    check(w, g, list(g))
                except CaseFailedError as e:
                    raise CaseFailedError(f"event {i}: {e}") from None
        elif op in ("force_open", "disable", "reset"):
            getattr(self.breaker_for(step), op)()
            check(expect, a, [])
        elif op == "clock_set":
            try:
                self.clock.set(clock_at(step["to_ms"]))
            except holdoff.ClockBackwardsError as e:
                a["error"] = error_name(e)
            check(expect, a, ["error"])
        elif op == "clock_advance":
            self.clock.advance(clock_at(step["by_ms"]))
            check(expect, a, [])
        elif op == "decide":
            if self.budget is None:
                raise CaseFailedError("the case has no budget")
            state = self.calls.setdefault(call_name, holdoff.RetryState())
            a = decision_dict(self.budget.decide(state, outcome(step["outcome"])))
            check(
                expect,
                a,
                ["decision", "delay_ms", "source", "server_delay_ms", "capped", "reason"],
            )
        elif op == "budget_state":
            if self.budget is None:
                raise CaseFailedError("the case has no budget")
            start = self.budget.episode_start
            state = self.calls.get(call_name)
            a = {
                "episode_active": start is not None,
                "episode_start_ms": None if start is None else round(start * 1000),
                "retries": 0 if state is None else state.retries,
            }
            check(expect, a, ["episode_active", "episode_start_ms", "retries"])
        elif op == "parse_retry_after":
            r = holdoff.parse_retry_after(step["value"], now=self.clock)
            a = {"delay_ms": ms(r.delay)} if r.delay is not None else {"unusable": r.unusable}
            check(expect, a, ["delay_ms", "unusable"])
        elif op == "hint":
            r = holdoff.hint_from_headers(headers(step), now=self.clock)
            a = {"delay_ms": ms(r.delay)} if r.delay is not None else {"unusable": r.unusable}
            a["source"] = r.source
            check(expect, a, ["delay_ms", "unusable", "source"])
        elif op == "classify":
            # Any integer goes through the public API as given: a negative or 70000 status is
            # the binding's to refuse, with the core's error.
            try:
                c = self.classifier.classify(step["status"], headers(step), now=self.clock)
                a = {"outcome": c.outcome.name, "retry_later_ms": ms(c.outcome.delay)}
            except holdoff.InvalidInputError as e:
                a = {"error": error_name(e)}
            check(expect, a, ["outcome", "retry_later_ms", "error"])
        elif op == "quota_acquire":
            if self.quota is None:
                raise CaseFailedError("the case has no quota")
            try:
                lease = self.quota.acquire(timeout=step.get("timeout", False))
                a = {"acquired": True, "cost": lease.cost}
                if "as" in step:
                    self.leases[step["as"]] = lease
            except holdoff.QuotaEmptyError as e:
                a = {"acquired": False, "cost": e.cost}
            a["available"] = self.quota.available
            check(expect, a, ["acquired", "cost", "available"])
        elif op == "quota_success":
            if self.quota is None:
                raise CaseFailedError("the case has no quota")
            lease = None
            if "lease" in step:
                if step["lease"] not in self.leases:
                    raise CaseFailedError(f"no lease named {step['lease']!r}")
                # Kept: a lease may be given back again, to see it refused.
                lease = self.leases[step["lease"]]
            target = self.quota
            if step.get("foreign", False):
                target = holdoff.RetryQuota(**self.quota_config)
            try:
                target.on_success(lease)
            except holdoff.PermitError as e:
                a["error"] = error_name(e)
            a["available"] = self.quota.available
            check(expect, a, ["available", "error"])
        elif op == "group_snapshot":
            if self.group is None:
                raise CaseFailedError("the case has no group")
            gs = self.group.snapshot()
            a = {
                "keys": self.group.keys(),
                "max_keys": gs.max_keys,
                "evictions": gs.evictions,
                "overflows": gs.overflows,
            }
            if gs.keys != len(a["keys"]):
                raise CaseFailedError(f"snapshot keys {gs.keys} but {len(a['keys'])} keys listed")
            check(expect, a, ["keys", "max_keys", "evictions", "overflows"])
        elif op == "before":
            if self.policy is None:
                raise CaseFailedError("the case has no policy")
            c = self.policy_calls.setdefault(call_name, holdoff.PolicyCall())
            b = self.policy.before_attempt(c)
            if isinstance(b, holdoff.Permit):
                a = {"action": "go", "episode": b.episode, "probe": b.probe}
                self.permits[step.get("as", "_last")] = (b, self.policy.breaker)
            elif isinstance(b, holdoff.Wait):
                a = {"action": "wait", "delay_ms": ms(b.delay)}
            else:
                a = {"action": "give_up", "reason": b.reason, "retry_after_ms": ms(b.retry_after)}
            check(expect, a, ["action", "episode", "probe", "delay_ms", "reason", "retry_after_ms"])
        elif op == "after":
            if self.policy is None:
                raise CaseFailedError("the case has no policy")
            name = step.get("permit", "_last")
            if name not in self.permits:
                raise CaseFailedError(f"no permit named {name!r}")
            permit = self.permits[name][0]
            c = self.policy_calls.setdefault(call_name, holdoff.PolicyCall())
            try:
                if "status" in step:
                    # Any integer, as given (see classify).
                    d, cl = self.policy.after_response(c, permit, step["status"], headers(step))
                    a = decision_dict(d)
                    a["outcome"] = cl.outcome.name
                else:
                    a = decision_dict(
                        self.policy.after_attempt(c, permit, outcome(step["outcome"]))
                    )
            except (holdoff.PermitError, holdoff.InvalidInputError) as e:
                a = {"error": error_name(e)}
            check(
                expect,
                a,
                [
                    "decision",
                    "delay_ms",
                    "source",
                    "server_delay_ms",
                    "capped",
                    "reason",
                    "error",
                    "outcome",
                ],
            )
        elif op == "fleet_sync":
            self.fleet_sync(step, expect)
        elif op == "fleet_store":
            if self.store is None:
                raise CaseFailedError("the case has no memory:// fleet")
            holdoff.memory_store_control(self.store, step["action"])
            check(expect, a, [])
        elif op == "metrics":
            self.metrics(step, expect)
        elif op == "execute":
            if self.policy is None or self.flavour is None:
                raise CaseFailedError("execute needs a policy and a flavour")
            got = run_execute(self.policy, self.clock, self.execute_config, step, self.flavour)
            check_execute(expect, got, check)
        else:
            raise CaseFailedError(f"unknown op {op!r}")


def run_case(case: dict[str, Any], flavour: str | None = None) -> None:
    expect_error = case.get("expect_error")
    try:
        ctx = Ctx(case, flavour)
    except holdoff.HoldoffError as e:
        if expect_error is None:
            raise CaseFailedError(f"configuration refused: {e}") from None
        a = {"error": error_name(e), "field": getattr(e, "field", None)}
        check(expect_error, a, ["error", "field"])
        return
    try:
        if expect_error is not None:
            raise CaseFailedError(f"expected configuration error {expect_error!r}, but it built")
        run_steps(ctx, case)
    finally:
        ctx.close()


def run_steps(ctx: Ctx, case: dict[str, Any]) -> None:
    for i, step in enumerate(case["steps"]):
        repeat = step.get("repeat", 1)
        every = step.get("every_ms", 0)
        for r in range(repeat):
            if "at" in step:
                t = step["at"] + r * every
                try:
                    ctx.clock.set(clock_at(t))
                except holdoff.ClockBackwardsError as e:
                    raise CaseFailedError(f"step {i}: clock cannot move to {t}: {e}") from None
            try:
                ctx.step(step)
            except CaseFailedError as e:
                at = round(ctx.clock.now() * 1000)
                rep = f" (repetition {r})" if repeat > 1 else ""
                raise CaseFailedError(f"step {i} {step.get('op', '?')} at {at}{rep}: {e}") from None


@pytest.mark.parametrize("case,flavour", _runs())
def test_case(case: dict[str, Any], flavour: str | None) -> None:
    run_case(case, flavour)
