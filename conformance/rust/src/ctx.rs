//! One build of a case: its objects, built from the neutral configuration, and the names its
//! steps give to permits, leases and calls.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use holdoff::fleet::{FleetMember, FleetStore};
use holdoff::interop::config::HoldoffConfig;
use holdoff::interop::{LeaseSlot, PermitSlot};
use holdoff::{
    Breaker, BreakerGroup, Call, Classifier, Clock, ExecutionConfig, HoldoffError, Policy, RetryBudget,
    RetryQuota, RetryState,
};
use serde_json::{json, Value};

use crate::{FleetBackend, MemoryBackend, Time, R};

/// A case's objects on the time `T`; absent parts of the configuration are not built.
pub struct Ctx<T> {
    pub(crate) time: T,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) config: HoldoffConfig,
    pub(crate) breaker: Option<Arc<Breaker>>,
    pub(crate) group: Option<BreakerGroup>,
    pub(crate) budget: Option<Arc<RetryBudget>>,
    pub(crate) quota: Option<Arc<RetryQuota>>,
    pub(crate) classifier: Classifier,
    pub(crate) policy: Option<Arc<Policy>>,
    /// Each permit with the breaker that issued it: it is recorded there, as user code does.
    pub(crate) permits: HashMap<String, (PermitSlot, Arc<Breaker>)>,
    pub(crate) calls: HashMap<String, RetryState>,
    pub(crate) policy_calls: HashMap<String, Call>,
    pub(crate) leases: HashMap<String, LeaseSlot>,
    /// Fleet cases: each worker's link (worker 0's breaker is `breaker`), their shared store,
    /// and the backend's control of it.
    pub(crate) members: Vec<FleetMember>,
    pub(crate) fleet_store: Option<Arc<dyn FleetStore>>,
    pub(crate) fleet_backend: Arc<dyn FleetBackend>,
}

impl<T: Time> Ctx<T> {
    /// Builds `case` (its `config`, `clock`, `group` and `policy`) on a fresh `T`; the error is
    /// what the core refused, for an `expect_error` case to compare.
    pub fn build(case: &Value) -> Result<Self, HoldoffError> {
        Self::build_on(case, Arc::new(MemoryBackend))
    }

    /// [`Ctx::build`] with the fleet cases' store on `backend`: the url rewritten, the store
    /// reset, then each of the case's `workers` built and attached.
    pub fn build_on(case: &Value, backend: Arc<dyn FleetBackend>) -> Result<Self, HoldoffError> {
        let config: HoldoffConfig = serde_json::from_value(case.get("config").cloned().unwrap_or(json!({})))
            .map_err(|e| holdoff::ConfigError {
                field: "config".into(),
                rule: e.to_string(),
            })?;
        let origin_ms = case
            .pointer("/clock/wall_origin_unix_ms")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let time = T::starting(UNIX_EPOCH + Duration::from_millis(origin_ms));
        let clock = time.clock();
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
            Some(Arc::new(Policy::new(b, g, quota.clone(), classifier.clone())?))
        } else {
            None
        };
        let mut members = Vec::new();
        let mut fleet_store = None;
        if let Some(mut fc) = config.fleet_config(is_group)? {
            let id = case.get("id").and_then(Value::as_str).unwrap_or("");
            fc.url = backend.url(id, &fc.url);
            let setup = |e: String| holdoff::ConfigError {
                field: "fleet".into(),
                rule: e,
            };
            backend.reset(&fc.url).map_err(setup)?;
            let store = backend.store(&fc).map_err(setup)?;
            let workers = case.get("workers").and_then(Value::as_u64).unwrap_or(1);
            let cfg = config.breaker.clone().unwrap_or_default().to_config()?;
            for i in 0..workers {
                let b = match (i, &breaker) {
                    (0, Some(b)) => Arc::clone(b),
                    _ => Arc::new(Breaker::new(cfg.clone(), Arc::clone(&clock))?),
                };
                let m = FleetMember::attach_as(&b, fc.clone(), format!("w{i}")).map_err(|e| match e {
                    holdoff::FleetError::Config(c) => c,
                    other => setup(other.to_string()),
                })?;
                members.push(m);
            }
            fleet_store = Some(store);
        }
        // Counting starts at an object's first read of its metrics: read each once now, so the
        // `metrics` steps count the whole case.
        let mut first = Vec::new();
        for b in breaker.iter().chain(members.iter().map(FleetMember::breaker)) {
            b.metrics(&mut first);
        }
        if let Some(g) = &group {
            g.metrics();
        }
        if let Some(q) = &quota {
            q.metrics(&mut first);
        }
        if let Some(p) = &policy {
            p.metrics(&mut first);
        }
        Ok(Ctx {
            time,
            clock,
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
            members,
            fleet_store,
            fleet_backend: backend,
        })
    }

    /// The case's time.
    pub fn time(&self) -> &T {
        &self.time
    }

    /// The clock the case's objects read.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Milliseconds since the case's origin.
    pub fn now_ms(&self) -> u64 {
        self.time.current().as_nanos() / 1_000_000
    }

    /// The wall time now (`clock.wall_origin_unix_ms` + now).
    pub(crate) fn wall_now(&self) -> SystemTime {
        self.clock.wall_at(self.time.current())
    }

    /// The case's policy (`"policy": true`).
    pub fn policy(&self) -> R<&Arc<Policy>> {
        self.policy
            .as_ref()
            .ok_or_else(|| "the case has no policy".into())
    }

    /// The `execute` steps' limits (`config.execute`).
    pub fn execution_config(&self) -> R<ExecutionConfig> {
        self.config
            .execute
            .clone()
            .unwrap_or_default()
            .to_config()
            .map_err(|e| e.to_string())
    }
}
