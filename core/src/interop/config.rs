//! The language-neutral configuration format (feature `serde`): the `config` object of every
//! conformance case and of every `holdoff simulate` scenario, in JSON or TOML.
//!
//! Durations are milliseconds (`*_ms`, numbers); rates, multipliers and jitter are plain
//! numbers; the strings `"NaN"`, `"Infinity"` and `"-Infinity"` stand for the float values JSON
//! cannot spell, so that configuration errors can be tested. Every field is optional and
//! defaults to the core's default. Unknown keys are refused. Conversion errors name the field
//! the way the core does (`breaker.open_interval.initial`).
//!
//! ```json
//! { "breaker":   { "trip": { "policy": "consecutive", "threshold": 5 },
//!                  "open_interval": { "initial_ms": 60000, "multiplier": 1 },
//!                  "recoveries": 3 },
//!   "budget":    { "max_rate_limit_duration_ms": 1800000, "retry_after_cap_ms": 300000 },
//!   "quota":     { "capacity": 500 },
//!   "classifier": { "failure_statuses": [403] },
//!   "fleet":     { "url": "redis://127.0.0.1:6379/0", "key": "payments-api" } }
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::units;
use crate::backoff::Backoff;
use crate::breaker::BreakerConfig;
use crate::budget::BudgetConfig;
use crate::error::ConfigError;
use crate::http::ClassifierConfig;
use crate::quota::QuotaConfig;
use crate::trip::TripPolicy;

/// A number, or one of the strings `"NaN"`, `"Infinity"`, `"-Infinity"`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "NumRepr", into = "f64")]
pub struct Num(pub f64);

#[derive(Deserialize)]
#[serde(untagged)]
enum NumRepr {
    N(f64),
    S(String),
}

impl TryFrom<NumRepr> for Num {
    type Error = String;
    fn try_from(r: NumRepr) -> Result<Num, String> {
        match r {
            NumRepr::N(v) => Ok(Num(v)),
            NumRepr::S(s) => match s.as_str() {
                "NaN" => Ok(Num(f64::NAN)),
                "Infinity" => Ok(Num(f64::INFINITY)),
                "-Infinity" => Ok(Num(f64::NEG_INFINITY)),
                _ => Err(format!(
                    "expected a number, \"NaN\", \"Infinity\" or \"-Infinity\", got {s:?}"
                )),
            },
        }
    }
}

impl From<Num> for f64 {
    fn from(n: Num) -> f64 {
        n.0
    }
}

/// Everything one upstream needs; each part optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HoldoffConfig {
    /// The breaker (or the template of a breaker group).
    pub breaker: Option<BreakerSpec>,
    /// The retry budget.
    pub budget: Option<BudgetSpec>,
    /// The retry quota.
    pub quota: Option<QuotaSpec>,
    /// The HTTP classifier.
    pub classifier: Option<ClassifierSpec>,
    /// The bound of a breaker group (when `breaker` is a group's template).
    pub group: Option<GroupSpec>,
    /// The time limits of a call through the retry helpers.
    pub execute: Option<ExecuteSpec>,
    /// The fleet the breaker (or the policy's breaker) shares: attached by whatever builds it.
    pub fleet: Option<FleetSpec>,
}

impl HoldoffConfig {
    /// The fleet to attach, validated; `None` without a `fleet`. `group` says whether `breaker`
    /// is a group's template: a fleet with a group is refused (field `fleet`), as groups stay
    /// local.
    pub fn fleet_config(&self, group: bool) -> Result<Option<crate::fleet::FleetConfig>, ConfigError> {
        let Some(spec) = &self.fleet else { return Ok(None) };
        if group {
            return Err(ConfigError::new("fleet", "not supported with a group"));
        }
        spec.to_config().map(Some)
    }
}

/// A fleet (`{"url": "redis://127.0.0.1:6379/0", "key": "payments-api", "refresh_ms": 50,
/// "fallback_after_ms": 1000, "timeout_ms": 50, "ttl_ms": 3600000}`): `url` and `key` are
/// required, the durations default as in [`FleetConfig`](crate::fleet::FleetConfig).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetSpec {
    /// The store's url (`memory://`, `redis://`, `rediss://`, `unix://`).
    pub url: Option<String>,
    /// The shared record's key.
    pub key: Option<String>,
    /// Sync period, ms (default 50).
    pub refresh_ms: Option<Num>,
    /// Detach after this long without a successful sync, ms (default 1000).
    pub fallback_after_ms: Option<Num>,
    /// Bound on one store round trip, ms (default 50).
    pub timeout_ms: Option<Num>,
    /// Expiry of an unused record, ms (default 3 600 000).
    pub ttl_ms: Option<Num>,
}

impl FleetSpec {
    /// The fleet configuration, validated; errors name `fleet.url`, `fleet.key`,
    /// `fleet.refresh`, `fleet.fallback_after`, `fleet.timeout`, `fleet.ttl`.
    pub fn to_config(&self) -> Result<crate::fleet::FleetConfig, ConfigError> {
        let required =
            |field: &str, v: &Option<String>| v.clone().ok_or_else(|| ConfigError::new(field, "is required"));
        let mut c = crate::fleet::FleetConfig::new(
            required("fleet.url", &self.url)?,
            required("fleet.key", &self.key)?,
        );
        if let Some(v) = self.refresh_ms {
            c.refresh = ms("fleet.refresh", v)?;
        }
        if let Some(v) = self.fallback_after_ms {
            c.fallback_after = ms("fleet.fallback_after", v)?;
        }
        if let Some(v) = self.timeout_ms {
            c.timeout = ms("fleet.timeout", v)?;
        }
        if let Some(v) = self.ttl_ms {
            c.ttl = ms("fleet.ttl", v)?;
        }
        c.validate()?;
        Ok(c)
    }
}

impl From<&crate::fleet::FleetConfig> for FleetSpec {
    fn from(c: &crate::fleet::FleetConfig) -> Self {
        FleetSpec {
            url: Some(c.url.clone()),
            key: Some(c.key.clone()),
            refresh_ms: Some(ms_of(c.refresh)),
            fallback_after_ms: Some(ms_of(c.fallback_after)),
            timeout_ms: Some(ms_of(c.timeout)),
            ttl_ms: Some(ms_of(c.ttl)),
        }
    }
}

/// The time limits of one call (`attempt_timeout_ms`, `total_timeout_ms`): absent takes the
/// default (no attempt limit, 60 s total), `null` is no limit.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecuteSpec {
    /// Longest one attempt may take, ms; `null`: no limit (the default).
    #[serde(default, deserialize_with = "explicit_null")]
    pub attempt_timeout_ms: Option<Option<Num>>,
    /// Longest the whole call may take, ms; `null`: no limit. Default 60 000.
    #[serde(default, deserialize_with = "explicit_null")]
    pub total_timeout_ms: Option<Option<Num>>,
}

// Absent is `None` (the default applies), `null` is `Some(None)` (no limit).
fn explicit_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<Num>>, D::Error> {
    Option::<Num>::deserialize(d).map(Some)
}

impl ExecuteSpec {
    /// The limits, validated.
    pub fn to_config(&self) -> Result<crate::execution::ExecutionConfig, ConfigError> {
        let mut c = crate::execution::ExecutionConfig::default();
        if let Some(v) = self.attempt_timeout_ms {
            c.attempt_timeout = v.map(|n| ms("execute.attempt_timeout", n)).transpose()?;
        }
        if let Some(v) = self.total_timeout_ms {
            c.total_timeout = v.map(|n| ms("execute.total_timeout", n)).transpose()?;
        }
        c.validate()?;
        Ok(c)
    }
}

/// A breaker group's bound.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupSpec {
    /// Breakers kept at most (default 10 000).
    pub max_keys: Option<i64>,
}

impl GroupSpec {
    /// The bound, checked by the group's rule (`group.max_keys`, 1..=100 000 000).
    pub fn max_keys(&self) -> Result<usize, ConfigError> {
        let n = match self.max_keys {
            None => crate::group::DEFAULT_MAX_KEYS,
            Some(v) => usize::try_from(units::whole_u64("group.max_keys", v)?).unwrap_or(usize::MAX),
        };
        crate::group::validate_max_keys(n)?;
        Ok(n)
    }
}

/// A trip policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "policy", rename_all = "snake_case", deny_unknown_fields)]
pub enum TripSpec {
    /// `threshold` consecutive failures.
    Consecutive {
        /// Failures in a row.
        threshold: i64,
    },
    /// `threshold` failures inside a rolling window.
    Window {
        /// Failures in the window.
        threshold: i64,
        /// Window length, ms.
        window_ms: Num,
    },
    /// Failure rate over a rolling window.
    Rate {
        /// Rate in (0, 1].
        threshold: Num,
        /// Calls needed before the rate is judged.
        min_calls: i64,
        /// Window length, ms.
        window_ms: Num,
        /// Buckets in the window (default 10).
        #[serde(default)]
        buckets: Option<i64>,
    },
}

/// A backoff.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackoffSpec {
    /// First interval, ms.
    pub initial_ms: Option<Num>,
    /// Growth per step (>= 1).
    pub multiplier: Option<Num>,
    /// Cap, ms.
    pub max_ms: Option<Num>,
    /// Fraction in [0, 1) that jitter may subtract.
    pub jitter: Option<Num>,
}

/// A breaker.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BreakerSpec {
    /// Trip policy.
    pub trip: Option<TripSpec>,
    /// Open interval.
    pub open_interval: Option<BackoffSpec>,
    /// Probe answers needed to close.
    pub recoveries: Option<i64>,
    /// Probes per interval.
    pub max_probes_in_flight: Option<i64>,
    /// Probe timeout, ms.
    pub probe_timeout_ms: Option<Num>,
    /// Guard on retry-later delays, ms.
    pub max_retry_later_ms: Option<Num>,
    /// Jitter seed.
    pub seed: Option<u64>,
}

/// A retry budget.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetSpec {
    /// Episode budget, ms.
    pub max_rate_limit_duration_ms: Option<Num>,
    /// Cap on one Retry-After wait, ms.
    pub retry_after_cap_ms: Option<Num>,
    /// Counted-path retries.
    pub max_retries: Option<i64>,
    /// Counted-path backoff.
    pub backoff: Option<BackoffSpec>,
    /// Counted-path total, ms.
    pub max_backoff_duration_ms: Option<Num>,
    /// Give up at once when a Retry-After exceeds the cap (default: wait the cap).
    pub give_up_above_cap: Option<bool>,
    /// Jitter seed.
    pub seed: Option<u64>,
}

/// A retry quota.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaSpec {
    /// Tokens in a full bucket.
    pub capacity: Option<i64>,
    /// Cost of a retry.
    pub retry_cost: Option<i64>,
    /// Cost of a retry after a timeout.
    pub timeout_cost: Option<i64>,
    /// Refill per success without retry.
    pub success_refill: Option<i64>,
}

/// An HTTP classifier.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassifierSpec {
    /// Statuses counted as failures.
    pub failure_statuses: Option<Vec<i64>>,
    /// Statuses counted as answers.
    pub answer_statuses: Option<Vec<i64>>,
    /// Statuses whose delay hint opens a retry-later wait.
    pub retry_after_statuses: Option<Vec<i64>>,
    /// Wait for a 429 without a usable hint, ms.
    pub rate_limit_default_wait_ms: Option<Num>,
}

fn ms(field: &str, v: Num) -> Result<Duration, ConfigError> {
    units::from_millis_f64(field, v.0)
}

impl BackoffSpec {
    /// The backoff, starting from `default`.
    pub fn to_backoff(&self, field: &str, default: Backoff) -> Result<Backoff, ConfigError> {
        let mut b = default;
        if let Some(v) = self.initial_ms {
            b.initial = ms(&format!("{field}.initial"), v)?;
        }
        if let Some(v) = self.multiplier {
            b.multiplier = units::finite(&format!("{field}.multiplier"), v.0)?;
        }
        match self.max_ms {
            Some(v) => b.max = ms(&format!("{field}.max"), v)?,
            // A constant interval needs no cap; a larger initial lifts the default cap with it.
            None => b.max = b.max.max(b.initial),
        }
        if let Some(v) = self.jitter {
            b.jitter = units::finite(&format!("{field}.jitter"), v.0)?;
        }
        b.validate(field)?;
        Ok(b)
    }
}

impl TripSpec {
    /// The trip policy.
    pub fn to_policy(&self) -> Result<TripPolicy, ConfigError> {
        let threshold = |v: i64| units::whole("breaker.trip.threshold", v);
        let p = match self {
            TripSpec::Consecutive { threshold: t } => TripPolicy::ConsecutiveFailures {
                threshold: threshold(*t)?,
            },
            TripSpec::Window {
                threshold: t,
                window_ms,
            } => TripPolicy::FailuresInWindow {
                threshold: threshold(*t)?,
                window: ms("breaker.trip.window", *window_ms)?,
            },
            TripSpec::Rate {
                threshold: rate,
                min_calls,
                window_ms,
                buckets,
            } => TripPolicy::FailureRate {
                threshold: units::finite("breaker.trip.threshold", rate.0)?,
                min_calls: units::whole("breaker.trip.min_calls", *min_calls)?,
                window: ms("breaker.trip.window", *window_ms)?,
                buckets: units::whole("breaker.trip.buckets", buckets.unwrap_or(10))?,
            },
        };
        p.validate()?;
        Ok(p)
    }
}

impl BreakerSpec {
    /// The breaker configuration, validated.
    pub fn to_config(&self) -> Result<BreakerConfig, ConfigError> {
        let mut c = BreakerConfig::default();
        if let Some(t) = &self.trip {
            c.trip = t.to_policy()?;
        }
        if let Some(b) = &self.open_interval {
            c.open_interval = b.to_backoff("breaker.open_interval", c.open_interval)?;
        }
        if let Some(v) = self.recoveries {
            c.recoveries = units::whole("breaker.recoveries", v)?;
        }
        if let Some(v) = self.max_probes_in_flight {
            c.max_probes_in_flight = units::whole("breaker.max_probes_in_flight", v)?;
        }
        if let Some(v) = self.probe_timeout_ms {
            c.probe_timeout = Some(ms("breaker.probe_timeout", v)?);
        }
        if let Some(v) = self.max_retry_later_ms {
            c.max_retry_later = ms("breaker.max_retry_later", v)?;
        }
        if let Some(s) = self.seed {
            c.seed = s;
        }
        c.validate()?;
        Ok(c)
    }
}

impl BudgetSpec {
    /// The budget configuration, validated.
    pub fn to_config(&self) -> Result<BudgetConfig, ConfigError> {
        let mut c = BudgetConfig::default();
        if let Some(v) = self.max_rate_limit_duration_ms {
            c.max_rate_limit_duration = ms("budget.max_rate_limit_duration", v)?;
        }
        if let Some(v) = self.retry_after_cap_ms {
            c.retry_after_cap = ms("budget.retry_after_cap", v)?;
        }
        if let Some(v) = self.max_retries {
            c.max_retries = units::whole("budget.max_retries", v)?;
        }
        if let Some(b) = &self.backoff {
            c.backoff = b.to_backoff("budget.backoff", c.backoff)?;
        }
        if let Some(v) = self.max_backoff_duration_ms {
            c.max_backoff_duration = ms("budget.max_backoff_duration", v)?;
        }
        if let Some(v) = self.give_up_above_cap {
            c.give_up_above_cap = v;
        }
        if let Some(s) = self.seed {
            c.seed = s;
        }
        c.validate()?;
        Ok(c)
    }
}

impl QuotaSpec {
    /// The quota configuration, validated.
    pub fn to_config(&self) -> Result<QuotaConfig, ConfigError> {
        let mut c = QuotaConfig::default();
        let tokens = units::whole_u64;
        if let Some(v) = self.capacity {
            c.capacity = tokens("quota.capacity", v)?;
        }
        if let Some(v) = self.retry_cost {
            c.retry_cost = tokens("quota.retry_cost", v)?;
        }
        if let Some(v) = self.timeout_cost {
            c.timeout_cost = tokens("quota.timeout_cost", v)?;
        }
        if let Some(v) = self.success_refill {
            c.success_refill = tokens("quota.success_refill", v)?;
        }
        c.validate()?;
        Ok(c)
    }
}

impl ClassifierSpec {
    /// The classifier configuration, validated.
    pub fn to_config(&self) -> Result<ClassifierConfig, ConfigError> {
        let mut c = ClassifierConfig::default();
        // A number no u16 holds is no status either: 0 stands for it, and the classifier's own
        // rule (100..=599) refuses it with the field.
        let statuses = |v: &[i64]| -> Vec<u16> { v.iter().map(|s| u16::try_from(*s).unwrap_or(0)).collect() };
        if let Some(v) = &self.failure_statuses {
            c.failure_statuses = statuses(v);
        }
        if let Some(v) = &self.answer_statuses {
            c.answer_statuses = statuses(v);
        }
        if let Some(v) = &self.retry_after_statuses {
            c.retry_after_statuses = statuses(v);
        }
        if let Some(v) = self.rate_limit_default_wait_ms {
            c.rate_limit_default_wait = Some(ms("classifier.rate_limit_default_wait", v)?);
        }
        crate::http::Classifier::new(c.clone())?;
        Ok(c)
    }
}

// The other direction: a core configuration in the neutral shape, every field explicit. This is
// the only way holdoff serialises a configuration (`serde_json::to_value` of these).

fn ms_of(d: Duration) -> Num {
    Num(units::as_millis_f64(d))
}

fn whole_of(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl From<&Backoff> for BackoffSpec {
    fn from(b: &Backoff) -> Self {
        BackoffSpec {
            initial_ms: Some(ms_of(b.initial)),
            multiplier: Some(Num(b.multiplier)),
            max_ms: Some(ms_of(b.max)),
            jitter: Some(Num(b.jitter)),
        }
    }
}

impl From<&TripPolicy> for TripSpec {
    fn from(p: &TripPolicy) -> Self {
        match *p {
            TripPolicy::ConsecutiveFailures { threshold } => TripSpec::Consecutive {
                threshold: i64::from(threshold),
            },
            TripPolicy::FailuresInWindow { threshold, window } => TripSpec::Window {
                threshold: i64::from(threshold),
                window_ms: ms_of(window),
            },
            TripPolicy::FailureRate {
                threshold,
                min_calls,
                window,
                buckets,
            } => TripSpec::Rate {
                threshold: Num(threshold),
                min_calls: i64::from(min_calls),
                window_ms: ms_of(window),
                buckets: Some(i64::from(buckets)),
            },
        }
    }
}

impl From<&BreakerConfig> for BreakerSpec {
    fn from(c: &BreakerConfig) -> Self {
        BreakerSpec {
            trip: Some(TripSpec::from(&c.trip)),
            open_interval: Some(BackoffSpec::from(&c.open_interval)),
            recoveries: Some(i64::from(c.recoveries)),
            max_probes_in_flight: Some(i64::from(c.max_probes_in_flight)),
            probe_timeout_ms: c.probe_timeout.map(ms_of),
            max_retry_later_ms: Some(ms_of(c.max_retry_later)),
            seed: Some(c.seed),
        }
    }
}

impl From<&BudgetConfig> for BudgetSpec {
    fn from(c: &BudgetConfig) -> Self {
        BudgetSpec {
            max_rate_limit_duration_ms: Some(ms_of(c.max_rate_limit_duration)),
            retry_after_cap_ms: Some(ms_of(c.retry_after_cap)),
            max_retries: Some(i64::from(c.max_retries)),
            backoff: Some(BackoffSpec::from(&c.backoff)),
            max_backoff_duration_ms: Some(ms_of(c.max_backoff_duration)),
            give_up_above_cap: Some(c.give_up_above_cap),
            seed: Some(c.seed),
        }
    }
}

impl From<&QuotaConfig> for QuotaSpec {
    fn from(c: &QuotaConfig) -> Self {
        QuotaSpec {
            capacity: Some(whole_of(c.capacity)),
            retry_cost: Some(whole_of(c.retry_cost)),
            timeout_cost: Some(whole_of(c.timeout_cost)),
            success_refill: Some(whole_of(c.success_refill)),
        }
    }
}

impl From<&ClassifierConfig> for ClassifierSpec {
    fn from(c: &ClassifierConfig) -> Self {
        let list = |v: &[u16]| Some(v.iter().map(|s| i64::from(*s)).collect());
        ClassifierSpec {
            failure_statuses: list(&c.failure_statuses),
            answer_statuses: list(&c.answer_statuses),
            retry_after_statuses: list(&c.retry_after_statuses),
            rate_limit_default_wait_ms: c.rate_limit_default_wait.map(ms_of),
        }
    }
}

impl From<&crate::execution::ExecutionConfig> for ExecuteSpec {
    fn from(c: &crate::execution::ExecutionConfig) -> Self {
        ExecuteSpec {
            attempt_timeout_ms: Some(c.attempt_timeout.map(ms_of)),
            total_timeout_ms: Some(c.total_timeout.map(ms_of)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_described_configuration_reads_back_the_same() {
        let breaker = BreakerConfig {
            trip: TripPolicy::FailureRate {
                threshold: 0.5,
                min_calls: 20,
                window: Duration::from_millis(1500),
                buckets: 5,
            },
            probe_timeout: Some(Duration::from_micros(2500)),
            seed: 7,
            ..BreakerConfig::default()
        };
        assert_eq!(BreakerSpec::from(&breaker).to_config().unwrap(), breaker);
        let budget = BudgetConfig {
            give_up_above_cap: true,
            ..BudgetConfig::default()
        };
        assert_eq!(BudgetSpec::from(&budget).to_config().unwrap(), budget);
        let quota = QuotaConfig::default();
        assert_eq!(QuotaSpec::from(&quota).to_config().unwrap(), quota);
        let classifier = ClassifierConfig {
            failure_statuses: vec![403],
            rate_limit_default_wait: Some(Duration::from_secs(2)),
            ..ClassifierConfig::default()
        };
        assert_eq!(ClassifierSpec::from(&classifier).to_config().unwrap(), classifier);
        let execute = crate::execution::ExecutionConfig {
            attempt_timeout: Some(Duration::from_millis(250)),
            total_timeout: None,
        };
        assert_eq!(ExecuteSpec::from(&execute).to_config().unwrap(), execute);
        let fleet = crate::fleet::FleetConfig::new("unix:///tmp/redis.sock", "payments");
        assert_eq!(FleetSpec::from(&fleet).to_config().unwrap(), fleet);
        // The shape: milliseconds as numbers, every field present.
        let v = serde_json::to_value(BreakerSpec::from(&BreakerConfig::default())).unwrap();
        assert_eq!(v["open_interval"]["initial_ms"], 30000.0);
        assert_eq!(v["trip"]["policy"], "consecutive");
        assert_eq!(v["probe_timeout_ms"], serde_json::Value::Null);
    }
}

#[cfg(test)]
mod fleet_tests {
    use super::*;

    fn parse(v: serde_json::Value) -> HoldoffConfig {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn fleet_errors_name_the_field_and_groups_are_refused() {
        let c = parse(serde_json::json!({"fleet": {"url": "memory://x", "key": "k", "refresh_ms": 20}}));
        let f = c.fleet_config(false).unwrap().unwrap();
        assert_eq!(
            (f.refresh, f.ttl),
            (Duration::from_millis(20), Duration::from_secs(3600))
        );
        assert_eq!(c.fleet_config(true).unwrap_err().field, "fleet");
        let field = |v: serde_json::Value| {
            parse(serde_json::json!({ "fleet": v }))
                .fleet_config(false)
                .unwrap_err()
                .field
        };
        assert_eq!(field(serde_json::json!({"key": "k"})), "fleet.url");
        assert_eq!(field(serde_json::json!({"url": "memory://x"})), "fleet.key");
        assert_eq!(
            field(serde_json::json!({"url": "memory://x", "key": "k", "refresh_ms": 0})),
            "fleet.refresh"
        );
        assert_eq!(
            field(serde_json::json!({"url": "memory://x", "key": "k", "ttl_ms": "NaN"})),
            "fleet.ttl"
        );
        assert!(parse(serde_json::json!({})).fleet_config(true).unwrap().is_none());
    }
}
