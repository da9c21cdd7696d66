//! Building a case and running its steps other than `execute` through the core's API, as the
//! reference runner (`core/tests/conformance.rs`) does, on tokio's paused clock: `at`,
//! `clock_set` and `clock_advance` move it with `tokio::time::advance`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use holdoff::config::HoldoffConfig;
use holdoff::{
    Breaker, BreakerGroup, Classifier, Clock, ExecutionConfig, HoldoffError, LeaseSlot, Outcome, PermitSlot,
    Policy, RetryBudget, RetryQuota, StateChange,
};
use holdoff_tokio::TokioClock;
use serde_json::{json, Map, Value};

pub type R<T> = Result<T, String>;

pub fn ms(d: Duration) -> Value {
    let n = d.as_nanos();
    if n % 1_000_000 == 0 {
        json!((n / 1_000_000) as u64)
    } else {
        json!(n as f64 / 1e6)
    }
}

pub fn opt_ms(d: Option<Duration>) -> Value {
    d.map_or(Value::Null, ms)
}

pub fn outcome(v: &Value) -> R<Outcome> {
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

/// Compares `expect` with `actual`; `known` lists every key the op may assert. A key the op
/// did not produce compares as `null`.
pub fn check(expect: Option<&Value>, actual: &Map<String, Value>, known: &[&str]) -> R<()> {
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

/// One build of a case: its objects on a [`TokioClock`] whose origin is the case's monotonic 0.
pub struct Ctx {
    pub clock: Arc<dyn Clock>,
    pub config: HoldoffConfig,
    breaker: Option<Arc<Breaker>>,
    group: Option<BreakerGroup>,
    budget: Option<Arc<RetryBudget>>,
    quota: Option<Arc<RetryQuota>>,
    pub policy: Option<Arc<Policy>>,
    permits: HashMap<String, (PermitSlot, Arc<Breaker>)>,
    leases: HashMap<String, LeaseSlot>,
}

/// Builds a case; call it inside the paused runtime, so that the clock's origin is its now.
pub fn build(case: &Value) -> Result<Ctx, HoldoffError> {
    let config: HoldoffConfig = serde_json::from_value(case.get("config").cloned().unwrap_or(json!({})))
        .map_err(|e| holdoff::ConfigError {
            field: "config".into(),
            rule: e.to_string(),
        })?;
    let origin_ms = case
        .pointer("/clock/wall_origin_unix_ms")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::with_wall_origin(
        UNIX_EPOCH + Duration::from_millis(origin_ms),
    ));
    let is_group = case.get("group").and_then(Value::as_bool).unwrap_or(false);
    let mut breaker = None;
    let mut group = None;
    if let Some(spec) = &config.breaker {
        let cfg = spec.to_config()?;
        if is_group {
            let max_keys = config.group.clone().unwrap_or_default().max_keys()?;
            group = Some(BreakerGroup::with_max_keys(cfg, max_keys, Arc::clone(&clock))?);
        } else {
            breaker = Some(Arc::new(Breaker::new(cfg, Arc::clone(&clock))?));
        }
    }
    let budget = match &config.budget {
        Some(spec) => Some(Arc::new(RetryBudget::new(spec.to_config()?, Arc::clone(&clock))?)),
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
        Some(Arc::new(Policy::new(b, g, quota.clone(), classifier)?))
    } else {
        None
    };
    Ok(Ctx {
        clock,
        config,
        breaker,
        group,
        budget,
        quota,
        policy,
        permits: HashMap::new(),
        leases: HashMap::new(),
    })
}

impl Ctx {
    /// Manual-clock milliseconds since the case's origin.
    pub fn now_ms(&self) -> u64 {
        self.clock.now().as_nanos() / 1_000_000
    }

    /// Moves tokio's paused clock to `ms` since the origin; never backwards.
    pub async fn set_clock(&self, ms: u64) -> R<()> {
        let now = self.clock.now().as_nanos();
        let to = ms.checked_mul(1_000_000).ok_or("clock target out of range")?;
        if to < now {
            return Err("clock_backwards".into());
        }
        tokio::time::advance(Duration::from_nanos(to - now)).await;
        Ok(())
    }

    /// The execute step's limits (`config.execute`).
    pub fn execution_config(&self) -> R<ExecutionConfig> {
        self.config
            .execute
            .clone()
            .unwrap_or_default()
            .to_config()
            .map_err(|e| e.to_string())
    }

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
            Ok(effect) => actual.insert("effect".into(), json!(effect.name())),
            Err(e) => actual.insert("error".into(), json!(HoldoffError::from(e).name())),
        };
        Ok(())
    }

    /// Runs one step that is not `execute`. The ops are the reference runner's breaker, clock,
    /// budget-state and quota ops; any other op fails the case.
    pub async fn step(&mut self, step: &Value) -> R<()> {
        let op = step.get("op").and_then(Value::as_str).ok_or("step without op")?;
        let expect = step.get("expect");
        let mut a = Map::new();
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
                let known: Vec<&str> = a.keys().map(String::as_str).collect();
                check(expect, &a, &known)
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
                    let g = g.as_object().expect("an event is an object");
                    let known: Vec<&str> = g.keys().map(String::as_str).collect();
                    check(Some(w), g, &known).map_err(|e| format!("event {i}: {e}"))?;
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
                if let Err(e) = self.set_clock(to).await {
                    a.insert("error".into(), json!(e));
                }
                check(expect, &a, &["error"])
            }
            "clock_advance" => {
                let by = step
                    .get("by_ms")
                    .and_then(Value::as_u64)
                    .ok_or("clock_advance needs by_ms")?;
                tokio::time::advance(Duration::from_millis(by)).await;
                check(expect, &a, &[])
            }
            "budget_state" => {
                let budget = self.budget.clone().ok_or("the case has no budget")?;
                let start = budget.episode_start();
                a.insert("episode_active".into(), json!(start.is_some()));
                a.insert(
                    "episode_start_ms".into(),
                    start.map_or(Value::Null, |t| json!(t.as_nanos() / 1_000_000)),
                );
                // No `decide` step in this runner: no named call has retried.
                a.insert("retries".into(), json!(0));
                check(expect, &a, &["episode_active", "episode_start_ms", "retries"])
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
                let result = match step.get("lease").and_then(Value::as_str) {
                    Some(n) => {
                        let slot = self
                            .leases
                            .get(n)
                            .ok_or_else(|| format!("no lease named {n:?}"))?;
                        slot.take(&q).and_then(|l| q.on_success(Some(l)))
                    }
                    None => q.on_success(None),
                };
                if let Err(e) = result {
                    a.insert("error".into(), json!(HoldoffError::from(e).name()));
                }
                a.insert("available".into(), json!(q.available()));
                check(expect, &a, &["available", "error"])
            }
            other => Err(format!(
                "op {other:?} is not run by this runner (it runs the cases with an execute step; \
                 the core's runner runs every op)"
            )),
        }
    }
}
