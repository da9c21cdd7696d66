//! The reference conformance runner: every case of `conformance/cases` through holdoff's public
//! Rust API, following the runner contract in `conformance/README.md`. Prints one line per case
//! and ends with `N passed, N failed, N skipped`; exits non-zero on any failure.
//!
//! `HOLDOFF_CASES=substring` runs only the cases whose id contains it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use holdoff::config::HoldoffConfig;
use holdoff::{
    hint_from_headers, parse_retry_after, Attempted, Before, Breaker, BreakerGroup, Call, Classifier,
    Decision, Execution, ExecutionConfig, HoldoffError, Instant, LeaseSlot, ManualClock, Outcome, PermitSlot,
    Policy, RetryAfter, RetryBudget, RetryQuota, RetryState, StateChange, Step, Verdict,
};
use serde_json::{json, Map, Value};

const SUITE_VERSION: u64 = 2;

type R<T> = Result<T, String>;

fn ms(d: Duration) -> Value {
    let n = d.as_nanos();
    if n % 1_000_000 == 0 {
        json!((n / 1_000_000) as u64)
    } else {
        json!(n as f64 / 1e6)
    }
}

fn opt_ms(d: Option<Duration>) -> Value {
    d.map_or(Value::Null, ms)
}

fn outcome(v: &Value) -> R<Outcome> {
    Ok(match v {
        Value::String(s) => match s.as_str() {
            "success" => Outcome::Success,
            "answer" => Outcome::Answer,
            "failure" => Outcome::Failure,
            "timeout" => Outcome::Timeout,
            "cancelled" => Outcome::Cancelled,
            other => return Err(format!("unknown outcome {other:?}")),
        },
        Value::Object(o) => {
            let d = o
                .get("retry_later_ms")
                .and_then(Value::as_u64)
                .ok_or("retry_later_ms must be an integer")?;
            Outcome::RetryLater(Duration::from_millis(d))
        }
        _ => return Err(format!("bad outcome {v}")),
    })
}

fn outcome_json(o: &Outcome) -> (Value, Value) {
    let later = match o {
        Outcome::RetryLater(d) => ms(*d),
        _ => Value::Null,
    };
    (json!(o.name()), later)
}

fn decision_json(d: &Decision) -> Map<String, Value> {
    let mut m = Map::new();
    match *d {
        Decision::Done => {
            m.insert("decision".into(), json!("done"));
        }
        Decision::Retry {
            delay,
            source,
            server_delay,
            capped,
        } => {
            m.insert("decision".into(), json!("retry"));
            m.insert("delay_ms".into(), ms(delay));
            m.insert("source".into(), json!(source.name()));
            m.insert("server_delay_ms".into(), opt_ms(server_delay));
            m.insert("capped".into(), json!(capped));
        }
        Decision::GiveUp { reason, server_delay } => {
            m.insert("decision".into(), json!("give_up"));
            m.insert("reason".into(), json!(reason.name()));
            m.insert("server_delay_ms".into(), opt_ms(server_delay));
        }
    }
    m
}

fn event_json(e: &StateChange) -> Value {
    json!({
        "at": e.at.as_nanos() / 1_000_000,
        "from": e.from.name(),
        "to": e.to.name(),
        "episode": e.episode,
        "reason": e.reason.name(),
        "requested_delay_ms": opt_ms(e.requested_delay),
        "open_for_ms": opt_ms(e.open_for),
    })
}

/// Compares `expect` with `actual`; `known` lists every key the op may assert.
fn check(expect: Option<&Value>, actual: &Map<String, Value>, known: &[&str]) -> R<()> {
    let Some(expect) = expect else { return Ok(()) };
    let obj = expect.as_object().ok_or("expect must be an object")?;
    for (k, v) in obj {
        if !known.contains(&k.as_str()) {
            return Err(format!("unknown expect key {k:?}"));
        }
        let got = actual.get(k).unwrap_or(&Value::Null);
        let same = match (v, got) {
            (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
            _ => v == got,
        };
        if !same {
            return Err(format!(
                "{k}: expected {v}, got {got}  (all: {})",
                Value::Object(actual.clone())
            ));
        }
    }
    Ok(())
}

struct Ctx {
    clock: ManualClock,
    wall_origin: SystemTime,
    config: HoldoffConfig,
    breaker: Option<Arc<Breaker>>,
    group: Option<BreakerGroup>,
    budget: Option<Arc<RetryBudget>>,
    quota: Option<Arc<RetryQuota>>,
    classifier: Classifier,
    policy: Option<Policy>,
    // Each permit with the breaker that issued it: it is recorded there, as user code does.
    permits: HashMap<String, (PermitSlot, Arc<Breaker>)>,
    calls: HashMap<String, RetryState>,
    policy_calls: HashMap<String, Call>,
    leases: HashMap<String, LeaseSlot>,
}

fn build(case: &Value) -> Result<Ctx, HoldoffError> {
    let config: HoldoffConfig = serde_json::from_value(case.get("config").cloned().unwrap_or(json!({})))
        .map_err(|e| holdoff::ConfigError {
            field: "config".into(),
            rule: e.to_string(),
        })?;
    let origin_ms = case
        .pointer("/clock/wall_origin_unix_ms")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let wall_origin = UNIX_EPOCH + Duration::from_millis(origin_ms);
    let clock = ManualClock::with_wall_origin(wall_origin);
    let shared: Arc<dyn holdoff::Clock> = Arc::new(clock.clone());
    let is_group = case.get("group").and_then(Value::as_bool).unwrap_or(false);
    let mut breaker = None;
    let mut group = None;
    if let Some(spec) = &config.breaker {
        let cfg = spec.to_config()?;
        if is_group {
            let max_keys = config.group.clone().unwrap_or_default().max_keys()?;
            group = Some(BreakerGroup::with_max_keys(cfg, max_keys, Arc::clone(&shared))?);
        } else {
            breaker = Some(Arc::new(Breaker::new(cfg, Arc::clone(&shared))?));
        }
    }
    let budget = match &config.budget {
        Some(spec) => Some(Arc::new(RetryBudget::new(
            spec.to_config()?,
            Arc::clone(&shared),
        )?)),
        None => None,
    };
    let quota = match &config.quota {
        Some(spec) => Some(Arc::new(RetryQuota::new(spec.to_config()?)?)),
        None => None,
    };
    let classifier = Classifier::new(config.classifier.clone().unwrap_or_default().to_config()?)?;
    let policy = if case.get("policy").and_then(Value::as_bool).unwrap_or(false) {
        let b = breaker.clone().expect("a policy case needs a breaker");
        let g = budget.clone().expect("a policy case needs a budget");
        Some(Policy::new(b, g, quota.clone(), classifier.clone())?)
    } else {
        None
    };
    Ok(Ctx {
        clock,
        wall_origin,
        config,
        breaker,
        group,
        budget,
        quota,
        classifier,
        policy,
        permits: HashMap::new(),
        calls: HashMap::new(),
        policy_calls: HashMap::new(),
        leases: HashMap::new(),
    })
}

impl Ctx {
    fn breaker(&self, step: &Value) -> R<Arc<Breaker>> {
        match step.get("key").and_then(Value::as_str) {
            Some(k) => Ok(self
                .group
                .as_ref()
                .ok_or("step names a key but the case has no group")?
                .get(k)),
            None => self
                .breaker
                .clone()
                .ok_or_else(|| "the case has no breaker".into()),
        }
    }

    fn wall_now(&self) -> SystemTime {
        self.wall_origin + Duration::from_nanos(self.clock.peek().as_nanos())
    }

    fn allow(&mut self, step: &Value, actual: &mut Map<String, Value>) -> R<bool> {
        let b = self.breaker(step)?;
        match b.allow() {
            Ok(p) => {
                actual.insert("admitted".into(), json!(true));
                actual.insert("episode".into(), json!(p.episode()));
                actual.insert("probe".into(), json!(p.is_probe()));
                let name = step
                    .get("as")
                    .and_then(Value::as_str)
                    .unwrap_or("_last")
                    .to_owned();
                self.permits.insert(name, (PermitSlot::new(p), b));
                Ok(true)
            }
            Err(r) => {
                actual.insert("admitted".into(), json!(false));
                actual.insert("retry_after_ms".into(), opt_ms(r.retry_after));
                actual.insert("state".into(), json!(r.state.name()));
                Ok(false)
            }
        }
    }

    fn record(&mut self, name: &str, o: Outcome, actual: &mut Map<String, Value>) -> R<()> {
        let (slot, b) = self
            .permits
            .get(name)
            .ok_or_else(|| format!("no permit named {name:?}"))?;
        match slot.take(b).and_then(|p| b.record(p, o)) {
            Ok(effect) => {
                actual.insert("effect".into(), json!(effect.name()));
            }
            Err(e) => {
                actual.insert("error".into(), json!(HoldoffError::from(e).name()));
            }
        }
        Ok(())
    }

    fn step(&mut self, step: &Value) -> R<()> {
        let op = step.get("op").and_then(Value::as_str).ok_or("step without op")?;
        let expect = step.get("expect");
        let mut a = Map::new();
        let call_name = step
            .get("call")
            .and_then(Value::as_str)
            .unwrap_or("default")
            .to_owned();
        match op {
            "allow" => {
                self.allow(step, &mut a)?;
                check(
                    expect,
                    &a,
                    &["admitted", "episode", "probe", "retry_after_ms", "state"],
                )
            }
            "record" => {
                let name = step
                    .get("permit")
                    .and_then(Value::as_str)
                    .ok_or("record needs permit")?
                    .to_owned();
                let o = outcome(step.get("outcome").ok_or("record needs outcome")?)?;
                self.record(&name, o, &mut a)?;
                check(expect, &a, &["effect", "error"])
            }
            "call" => {
                let o = outcome(step.get("outcome").ok_or("call needs outcome")?)?;
                if self.allow(step, &mut a)? {
                    let name = step
                        .get("as")
                        .and_then(Value::as_str)
                        .unwrap_or("_last")
                        .to_owned();
                    self.record(&name, o, &mut a)?;
                }
                check(
                    expect,
                    &a,
                    &[
                        "admitted",
                        "episode",
                        "probe",
                        "retry_after_ms",
                        "state",
                        "effect",
                    ],
                )
            }
            "record_foreign" => {
                let name = step
                    .get("permit")
                    .and_then(Value::as_str)
                    .ok_or("record_foreign needs permit")?;
                let (slot, _) = self
                    .permits
                    .get(name)
                    .ok_or_else(|| format!("no permit named {name:?}"))?;
                let cfg = self
                    .config
                    .breaker
                    .as_ref()
                    .ok_or("no breaker config")?
                    .to_config()
                    .map_err(|e| e.to_string())?;
                let other = Breaker::new(cfg, Arc::new(self.clock.clone())).map_err(|e| e.to_string())?;
                match slot.take(&other) {
                    Ok(p) => {
                        let _ = other.record(p, Outcome::Success);
                        a.insert("effect".into(), json!("counted"));
                    }
                    Err(e) => {
                        a.insert("error".into(), json!(HoldoffError::from(e).name()));
                    }
                }
                check(expect, &a, &["error", "effect"])
            }
            "snapshot" => {
                let s = self.breaker(step)?.snapshot();
                for (k, v) in [
                    ("state", json!(s.state.name())),
                    ("episode", json!(s.episode)),
                    ("failures", json!(s.failures)),
                    ("recoveries", json!(s.recoveries)),
                    ("probes_in_flight", json!(s.probes_in_flight)),
                    ("retry_after_ms", opt_ms(s.retry_after)),
                    ("probe_ready", json!(s.probe_ready)),
                    ("interval_ms", opt_ms(s.interval)),
                    ("opens", json!(s.opens)),
                    ("closes", json!(s.closes)),
                    ("probes", json!(s.probes)),
                    ("refusals", json!(s.refusals)),
                    ("stale_answers", json!(s.stale_answers)),
                ] {
                    a.insert(k.into(), v);
                }
                check(
                    expect,
                    &a,
                    &[
                        "state",
                        "episode",
                        "failures",
                        "recoveries",
                        "probes_in_flight",
                        "retry_after_ms",
                        "probe_ready",
                        "interval_ms",
                        "opens",
                        "closes",
                        "probes",
                        "refusals",
                        "stale_answers",
                    ],
                )
            }
            "events" => {
                let got: Vec<Value> = self
                    .breaker(step)?
                    .drain_events()
                    .iter()
                    .map(event_json)
                    .collect();
                let want = expect
                    .and_then(Value::as_array)
                    .ok_or("events expects an array")?;
                if want.len() != got.len() {
                    return Err(format!(
                        "expected {} events, got {}: {}",
                        want.len(),
                        got.len(),
                        Value::Array(got)
                    ));
                }
                for (i, (w, g)) in want.iter().zip(&got).enumerate() {
                    check(
                        Some(w),
                        g.as_object().unwrap(),
                        &[
                            "at",
                            "from",
                            "to",
                            "episode",
                            "reason",
                            "requested_delay_ms",
                            "open_for_ms",
                        ],
                    )
                    .map_err(|e| format!("event {i}: {e}"))?;
                }
                Ok(())
            }
            "force_open" => {
                self.breaker(step)?.force_open();
                check(expect, &a, &[])
            }
            "disable" => {
                self.breaker(step)?.disable();
                check(expect, &a, &[])
            }
            "reset" => {
                self.breaker(step)?.reset();
                check(expect, &a, &[])
            }
            "clock_set" => {
                let to = step
                    .get("to_ms")
                    .and_then(Value::as_u64)
                    .ok_or("clock_set needs to_ms")?;
                if let Err(e) = self.clock.set(Instant::from_millis(to)) {
                    a.insert("error".into(), json!(HoldoffError::from(e).name()));
                }
                check(expect, &a, &["error"])
            }
            "clock_advance" => {
                let by = step
                    .get("by_ms")
                    .and_then(Value::as_u64)
                    .ok_or("clock_advance needs by_ms")?;
                self.clock.advance(Duration::from_millis(by));
                check(expect, &a, &[])
            }
            "decide" => {
                let o = outcome(step.get("outcome").ok_or("decide needs outcome")?)?;
                let budget = self.budget.clone().ok_or("the case has no budget")?;
                let call = self.calls.entry(call_name).or_default();
                a = decision_json(&budget.decide(call, o));
                check(
                    expect,
                    &a,
                    &[
                        "decision",
                        "delay_ms",
                        "source",
                        "server_delay_ms",
                        "capped",
                        "reason",
                    ],
                )
            }
            "budget_state" => {
                let budget = self.budget.clone().ok_or("the case has no budget")?;
                let start = budget.episode_start();
                a.insert("episode_active".into(), json!(start.is_some()));
                a.insert(
                    "episode_start_ms".into(),
                    start.map_or(Value::Null, |t| json!(t.as_nanos() / 1_000_000)),
                );
                a.insert(
                    "retries".into(),
                    json!(self.calls.get(&call_name).map_or(0, |c| c.retries())),
                );
                check(expect, &a, &["episode_active", "episode_start_ms", "retries"])
            }
            "parse_retry_after" => {
                let v = step
                    .get("value")
                    .and_then(Value::as_str)
                    .ok_or("parse_retry_after needs value")?;
                match parse_retry_after(v, self.wall_now()) {
                    RetryAfter::Delay(d) => a.insert("delay_ms".into(), ms(d)),
                    RetryAfter::Unusable(u) => a.insert("unusable".into(), json!(u.name())),
                };
                check(expect, &a, &["delay_ms", "unusable"])
            }
            "hint" | "classify" => {
                let headers = headers(step)?;
                let pairs = headers.iter().map(|(n, v)| (n.as_str(), v.as_str()));
                if op == "hint" {
                    let (r, src) = hint_from_headers(pairs, self.wall_now());
                    match r {
                        RetryAfter::Delay(d) => a.insert("delay_ms".into(), ms(d)),
                        RetryAfter::Unusable(u) => a.insert("unusable".into(), json!(u.name())),
                    };
                    a.insert("source".into(), json!(src.name()));
                    return check(expect, &a, &["delay_ms", "unusable", "source"]);
                }
                let status = step
                    .get("status")
                    .and_then(Value::as_i64)
                    .ok_or("classify needs an integer status")?;
                let wall = self.wall_now();
                match holdoff::check_status(status).and_then(|s| self.classifier.classify(s, pairs, wall)) {
                    Ok(c) => {
                        let (name, later) = outcome_json(&c.outcome);
                        a.insert("outcome".into(), name);
                        a.insert("retry_later_ms".into(), later);
                    }
                    Err(e) => {
                        a.insert("error".into(), json!(HoldoffError::from(e).name()));
                    }
                }
                check(expect, &a, &["outcome", "retry_later_ms", "error"])
            }
            "quota_acquire" => {
                let q = self.quota.clone().ok_or("the case has no quota")?;
                let timeout = step.get("timeout").and_then(Value::as_bool).unwrap_or(false);
                match q.acquire(timeout) {
                    Ok(lease) => {
                        a.insert("acquired".into(), json!(true));
                        a.insert("cost".into(), json!(lease.cost()));
                        let slot = LeaseSlot::new(lease);
                        if let Some(n) = step.get("as").and_then(Value::as_str) {
                            self.leases.insert(n.to_owned(), slot);
                        } else {
                            // An unnamed lease is never given back.
                            let _ = slot;
                        }
                    }
                    Err(e) => {
                        a.insert("acquired".into(), json!(false));
                        a.insert("cost".into(), json!(e.cost));
                    }
                }
                a.insert("available".into(), json!(q.available()));
                check(expect, &a, &["acquired", "cost", "available"])
            }
            "quota_success" => {
                let q = self.quota.clone().ok_or("the case has no quota")?;
                let foreign = step.get("foreign").and_then(Value::as_bool).unwrap_or(false);
                let result = match step.get("lease").and_then(Value::as_str) {
                    Some(n) => {
                        let slot = self
                            .leases
                            .get(n)
                            .ok_or_else(|| format!("no lease named {n:?}"))?;
                        if foreign {
                            let cfg = self
                                .config
                                .quota
                                .as_ref()
                                .ok_or("no quota config")?
                                .to_config()
                                .map_err(|e| e.to_string())?;
                            let other = RetryQuota::new(cfg).map_err(|e| e.to_string())?;
                            slot.take(&other).and_then(|l| other.on_success(Some(l)))
                        } else {
                            slot.take(&q).and_then(|l| q.on_success(Some(l)))
                        }
                    }
                    None => q.on_success(None),
                };
                if let Err(e) = result {
                    a.insert("error".into(), json!(HoldoffError::from(e).name()));
                }
                a.insert("available".into(), json!(q.available()));
                check(expect, &a, &["available", "error"])
            }
            "group_snapshot" => {
                let g = self.group.as_ref().ok_or("the case has no group")?;
                let s = g.snapshot();
                a.insert("keys".into(), json!(g.keys()));
                a.insert("max_keys".into(), json!(s.max_keys));
                a.insert("evictions".into(), json!(s.evictions));
                a.insert("overflows".into(), json!(s.overflows));
                check(expect, &a, &["keys", "max_keys", "evictions", "overflows"])
            }
            "before" => {
                let policy = self.policy.as_ref().ok_or("the case has no policy")?;
                let call = self.policy_calls.entry(call_name).or_default();
                match policy.before_attempt(call) {
                    Before::Go(p) => {
                        a.insert("action".into(), json!("go"));
                        a.insert("episode".into(), json!(p.episode()));
                        a.insert("probe".into(), json!(p.is_probe()));
                        let name = step
                            .get("as")
                            .and_then(Value::as_str)
                            .unwrap_or("_last")
                            .to_owned();
                        self.permits
                            .insert(name, (PermitSlot::new(p), Arc::clone(policy.breaker())));
                    }
                    Before::Wait(d) => {
                        a.insert("action".into(), json!("wait"));
                        a.insert("delay_ms".into(), ms(d));
                    }
                    Before::GiveUp { reason, retry_after } => {
                        a.insert("action".into(), json!("give_up"));
                        a.insert("reason".into(), json!(reason.name()));
                        a.insert("retry_after_ms".into(), opt_ms(retry_after));
                    }
                }
                check(
                    expect,
                    &a,
                    &[
                        "action",
                        "episode",
                        "probe",
                        "delay_ms",
                        "reason",
                        "retry_after_ms",
                    ],
                )
            }
            "after" => {
                let policy = self.policy.as_ref().ok_or("the case has no policy")?;
                let name = step.get("permit").and_then(Value::as_str).unwrap_or("_last");
                let (slot, _) = self
                    .permits
                    .get(name)
                    .ok_or_else(|| format!("no permit named {name:?}"))?;
                let call = self.policy_calls.entry(call_name).or_default();
                let permit = match slot.take(policy.breaker()) {
                    Ok(p) => p,
                    Err(e) => {
                        a.insert("error".into(), json!(HoldoffError::from(e).name()));
                        return check(
                            expect,
                            &a,
                            &[
                                "decision",
                                "delay_ms",
                                "source",
                                "server_delay_ms",
                                "capped",
                                "reason",
                                "error",
                                "outcome",
                            ],
                        );
                    }
                };
                let result = if let Some(status) = step.get("status").and_then(Value::as_i64) {
                    let headers = headers(step)?;
                    policy
                        .after_response(
                            call,
                            permit,
                            status,
                            headers.iter().map(|(n, v)| (n.as_str(), v.as_str())),
                        )
                        .map(|(d, c)| (d, Some(c.outcome)))
                } else {
                    let o = outcome(step.get("outcome").ok_or("after needs outcome or status")?)?;
                    policy
                        .after_attempt(call, permit, o)
                        .map(|d| (d, None))
                        .map_err(HoldoffError::from)
                };
                match result {
                    Ok((d, o)) => {
                        a = decision_json(&d);
                        if let Some(o) = o {
                            a.insert("outcome".into(), json!(o.name()));
                        }
                    }
                    Err(e) => {
                        a.insert("error".into(), json!(e.name()));
                    }
                }
                check(
                    expect,
                    &a,
                    &[
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
            }
            "execute" => {
                let policy = self.policy.as_ref().ok_or("the case has no policy")?;
                let cfg = self
                    .config
                    .execute
                    .clone()
                    .unwrap_or_default()
                    .to_config()
                    .map_err(|e| e.to_string())?;
                let got = execute(policy, cfg, &self.clock, step)?;
                check_execute(expect, &got)
            }
            other => Err(format!("unknown op {other:?}")),
        }
    }
}

/// Runs one `execute` step through the core's [`Execution`], as a helper does: each attempt does
/// what the script says (moving the manual clock by its `takes_ms`), each wait advances the
/// clock by its delay, and `cancel_in_wait` cancels during that wait. Returns what a helper's
/// hooks and its caller would see: `attempts`, `waits` and `result`.
fn execute(policy: &Policy, cfg: ExecutionConfig, clock: &ManualClock, step: &Value) -> R<Value> {
    let script = step
        .get("script")
        .and_then(Value::as_array)
        .ok_or("execute needs a script")?;
    let cancel_in_wait = step.get("cancel_in_wait").and_then(Value::as_u64);
    let mut exec = Execution::new(policy, cfg).map_err(|e| e.to_string())?;
    let (mut attempts, mut waits) = (Vec::new(), Vec::new());
    let mut step_now = exec.next_step().map_err(|e| e.to_string())?;
    let verdict = loop {
        match step_now {
            Step::Attempt(plan) => {
                let item = script
                    .get(plan.number as usize - 1)
                    .ok_or_else(|| format!("attempt {} is not in the script", plan.number))?;
                let at = clock.peek().as_nanos() / 1_000_000;
                let takes = item.get("takes_ms").and_then(Value::as_u64).unwrap_or(0);
                clock.advance(Duration::from_millis(takes));
                let next = if let Some(r) = item.get("response") {
                    let status = r
                        .get("status")
                        .and_then(Value::as_i64)
                        .ok_or("response needs a status")?;
                    let hs = headers(r)?;
                    exec.complete_response(status, hs.iter().map(|(n, v)| (n.as_str(), v.as_str())))
                } else {
                    exec.complete(attempted(item)?)
                }
                .map_err(|e| e.to_string())?;
                attempts.push(json!({
                    "at": at,
                    "probe": plan.probe,
                    "outcome": exec.last_outcome().map(|o| o.name()),
                }));
                step_now = next;
            }
            Step::Wait(w) => {
                waits.push(json!({
                    "delay_ms": ms(w.delay),
                    "source": w.source.name(),
                    "capped": w.capped,
                    "server_delay_ms": opt_ms(w.server_delay),
                }));
                if cancel_in_wait == Some(waits.len() as u64) {
                    break exec.cancel();
                }
                clock.advance(w.delay);
                step_now = exec.next_step().map_err(|e| e.to_string())?;
            }
            Step::Finish(v) => break v,
        }
    };
    let n = verdict.attempts();
    let cause = if n > 0 { json!(n) } else { Value::Null };
    let result = match verdict {
        Verdict::Return { .. } => json!({"returns": n}),
        Verdict::Rethrow { .. } => json!({"raises": "original", "attempt": n}),
        Verdict::BreakerOpen { retry_after, .. } => json!({
            "raises": "breaker_open", "attempts": n, "retry_after_ms": opt_ms(retry_after), "cause": cause,
        }),
        Verdict::GiveUp(g) => json!({
            "raises": "give_up", "reason": g.reason.name(), "attempts": n,
            "retry_after_ms": opt_ms(g.retry_after), "server_delay_ms": opt_ms(g.server_delay),
            "capped": g.capped, "cause": cause,
        }),
        Verdict::Cancelled { .. } => json!({"raises": "cancelled", "attempts": n}),
        Verdict::InvalidInput { .. } => json!({"raises": "invalid_input", "attempts": n}),
    };
    Ok(json!({"attempts": attempts, "waits": waits, "result": result}))
}

/// What a scripted attempt that does not return a response reports.
fn attempted(item: &Value) -> R<Attempted> {
    if let Some(o) = item.get("returns") {
        return Ok(Attempted::Returned(outcome(o)?));
    }
    if item.get("hits_deadline").and_then(Value::as_bool) == Some(true) {
        return Ok(Attempted::Raised(Outcome::Timeout));
    }
    if item.get("cancelled").and_then(Value::as_bool) == Some(true) {
        return Ok(Attempted::Cancelled);
    }
    Ok(
        match item
            .get("raises")
            .ok_or("an attempt returns, responds or raises")?
        {
            Value::String(s) => match s.as_str() {
                "transport" => Attempted::Raised(Outcome::Failure),
                "timeout" => Attempted::Raised(Outcome::Timeout),
                "answer" => Attempted::Raised(Outcome::Answer),
                "bug" => Attempted::Bug,
                other => return Err(format!("unknown raise {other:?}")),
            },
            v => Attempted::Raised(outcome(v)?),
        },
    )
}

/// Compares an `execute` step's expectation: `attempts` and `waits` are exact lists (each item
/// asserting the keys it lists), `result` asserts the keys it lists.
fn check_execute(expect: Option<&Value>, got: &Value) -> R<()> {
    let Some(expect) = expect.and_then(Value::as_object) else {
        return Ok(());
    };
    for (k, v) in expect {
        match k.as_str() {
            "attempts" | "waits" => {
                let want = v.as_array().ok_or("attempts and waits are arrays")?;
                let have = got[k].as_array().expect("array");
                if want.len() != have.len() {
                    return Err(format!(
                        "{k}: expected {}, got {}: {}",
                        want.len(),
                        have.len(),
                        got[k]
                    ));
                }
                let keys: &[&str] = if k == "attempts" {
                    &["at", "probe", "outcome"]
                } else {
                    &["delay_ms", "source", "capped", "server_delay_ms"]
                };
                for (i, (w, h)) in want.iter().zip(have).enumerate() {
                    check(Some(w), h.as_object().expect("object"), keys)
                        .map_err(|e| format!("{k}[{i}]: {e}"))?;
                }
            }
            "result" => check(
                Some(v),
                got["result"].as_object().expect("object"),
                &[
                    "returns",
                    "raises",
                    "reason",
                    "attempts",
                    "attempt",
                    "retry_after_ms",
                    "server_delay_ms",
                    "capped",
                    "cause",
                ],
            )
            .map_err(|e| format!("result: {e}"))?,
            other => return Err(format!("unknown expect key {other:?}")),
        }
    }
    Ok(())
}

fn headers(step: &Value) -> R<Vec<(String, String)>> {
    let Some(list) = step.get("headers") else {
        return Ok(Vec::new());
    };
    list.as_array()
        .ok_or("headers must be an array")?
        .iter()
        .map(|pair| match pair.as_array().map(Vec::as_slice) {
            Some([Value::String(n), Value::String(v)]) => Ok((n.clone(), v.clone())),
            _ => Err(format!("bad header {pair}")),
        })
        .collect()
}

fn run_case(case: &Value) -> R<()> {
    let expect_error = case.get("expect_error");
    let mut ctx = match (build(case), expect_error) {
        (Ok(_), Some(e)) => return Err(format!("expected configuration error {e}, but it built")),
        (Err(err), Some(e)) => {
            let mut a = Map::new();
            a.insert("error".into(), json!(err.name()));
            if let HoldoffError::Config(c) = &err {
                a.insert("field".into(), json!(c.field));
            }
            return check(Some(e), &a, &["error", "field"]);
        }
        (Err(err), None) => return Err(format!("configuration refused: {err}")),
        (Ok(ctx), None) => ctx,
    };
    let steps = case
        .get("steps")
        .and_then(Value::as_array)
        .ok_or("case without steps")?;
    for (i, step) in steps.iter().enumerate() {
        let repeat = step.get("repeat").and_then(Value::as_u64).unwrap_or(1);
        let every = step.get("every_ms").and_then(Value::as_u64).unwrap_or(0);
        for r in 0..repeat {
            if let Some(at) = step.get("at").and_then(Value::as_u64) {
                let t = at + r * every;
                ctx.clock
                    .set(Instant::from_millis(t))
                    .map_err(|e| format!("step {i}: clock cannot move to {t}: {e}"))?;
            }
            ctx.step(step).map_err(|e| {
                let at = ctx.clock.peek().as_nanos() / 1_000_000;
                let op = step.get("op").and_then(Value::as_str).unwrap_or("?");
                let rep = if repeat > 1 {
                    format!(" (repetition {r})")
                } else {
                    String::new()
                };
                format!("step {i} {op} at {at}{rep}: {e}")
            })?;
        }
    }
    Ok(())
}

fn case_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("cases dir")
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            case_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "json") {
            out.push(p);
        }
    }
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../conformance");
    let version: u64 = std::fs::read_to_string(root.join("VERSION"))
        .expect("VERSION")
        .trim()
        .parse()
        .expect("VERSION");
    assert_eq!(
        version, SUITE_VERSION,
        "runner written for suite version {SUITE_VERSION}"
    );
    let filter = std::env::var("HOLDOFF_CASES").unwrap_or_default();
    let mut files = Vec::new();
    case_files(&root.join("cases"), &mut files);
    let (mut passed, mut failed) = (0, 0);
    let mut ids = std::collections::HashSet::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read case file");
        let doc: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for case in doc["cases"].as_array().expect("cases array") {
            let id = case["id"].as_str().expect("case id").to_owned();
            assert!(ids.insert(id.clone()), "duplicate case id {id}");
            if !id.contains(&filter) {
                continue;
            }
            match run_case(case) {
                Ok(()) => {
                    passed += 1;
                    println!("ok   {id}");
                }
                Err(e) => {
                    failed += 1;
                    println!("FAIL {id}: {e}");
                }
            }
        }
    }
    println!("{passed} passed, {failed} failed, 0 skipped");
    if failed > 0 || passed == 0 {
        std::process::exit(1);
    }
}
