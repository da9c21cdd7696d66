//! The metric model: every series a breaker, a policy, a retry quota and a breaker group report,
//! in one table ([`METRICS`], printed in docs/metrics.md), read from the core's own counters so
//! every language reports the same numbers for the same calls.
//!
//! Names and units follow OpenTelemetry's rules: dot-separated lower-case names under
//! `holdoff.`, units in UCUM (`s`, `1`, or an annotation such as `{call}`), counters
//! cumulative and monotonic, gauges read as they are. Each series has at most one attribute of
//! its own (`state`, `outcome`, `reason`, `source`), whose values are the conformance suite's
//! names; the exporters add `upstream` (the name a user gives a breaker, or a group's key).
//!
//! Counting costs nothing until something reads an object's metrics: the first read
//! ([`crate::Breaker::metrics`], [`crate::Policy::metrics`], [`crate::BreakerGroup::metrics`])
//! allocates the object's counters, and counts start then, so exporters read once when they
//! attach. After that a call adds one or two thread-striped counts (no lock, no shared cache
//! line). Gauges (`state`, `tokens`, `keys`) are read from the object at collection time.

pub(crate) mod counts;
pub(crate) mod policy;
pub(crate) mod quota;

pub use quota::GroupMetrics;

use std::fmt::Write as _;

/// Whether a series is a cumulative count or a value read as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Monotonic, cumulative since counting started (an OpenTelemetry observable counter, a
    /// Prometheus counter).
    Counter,
    /// The current value (an OpenTelemetry observable gauge, a Prometheus gauge).
    Gauge,
}

impl Kind {
    /// `counter` or `gauge`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        }
    }
}

/// One metric of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricDef {
    /// OpenTelemetry name, `holdoff.<object>.<what>`.
    pub name: &'static str,
    /// Counter or gauge.
    pub kind: Kind,
    /// UCUM unit (`s`, `1`, `{call}`).
    pub unit: &'static str,
    /// What it counts, one sentence.
    pub description: &'static str,
    /// The metric's own attribute, if it has one.
    pub attribute: Option<&'static str>,
    /// That attribute's values, in code order (a [`Sample`]'s `attribute` indexes this).
    pub values: &'static [&'static str],
}

/// Every metric, by its index in [`METRICS`] (stable: the C ABI's metric code).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum Metric {
    /// `holdoff.breaker.state`
    BreakerState = 0,
    /// `holdoff.breaker.admitted`
    BreakerAdmitted = 1,
    /// `holdoff.breaker.refused`
    BreakerRefused = 2,
    /// `holdoff.breaker.outcomes`
    BreakerOutcomes = 3,
    /// `holdoff.breaker.stale_answers`
    BreakerStaleAnswers = 4,
    /// `holdoff.breaker.probes`
    BreakerProbes = 5,
    /// `holdoff.breaker.transitions`
    BreakerTransitions = 6,
    /// `holdoff.retry.attempts`
    RetryAttempts = 7,
    /// `holdoff.retry.retries`
    RetryRetries = 8,
    /// `holdoff.retry.waits`
    RetryWaits = 9,
    /// `holdoff.retry.wait.duration`
    RetryWaitDuration = 10,
    /// `holdoff.retry.capped_waits`
    RetryCappedWaits = 11,
    /// `holdoff.retry.give_ups`
    RetryGiveUps = 12,
    /// `holdoff.quota.tokens`
    QuotaTokens = 13,
    /// `holdoff.quota.refused`
    QuotaRefused = 14,
    /// `holdoff.group.keys`
    GroupKeys = 15,
    /// `holdoff.group.evictions`
    GroupEvictions = 16,
}

const STATES: &[&str] = &["closed", "open", "half_open", "forced_open", "disabled"];
const OUTCOMES: &[&str] = &[
    "success",
    "answer",
    "failure",
    "timeout",
    "retry_later",
    "cancelled",
];
const REASONS: &[&str] = &[
    "tripped",
    "retry_later",
    "probe_admitted",
    "probe_failed",
    "recovered",
    "forced_open",
    "disabled",
    "reset",
    "fleet_opened",
];
const SOURCES: &[&str] = &["retry_after", "backoff", "breaker"];
const GIVE_UPS: &[&str] = &[
    "budget_spent",
    "retry_after_exceeds_remaining",
    "backoff_exceeds_remaining",
    "attempts_exhausted",
    "not_retryable",
    "quota_empty",
    "breaker_open",
    "cancelled",
    "retry_after_above_cap",
    "total_timeout",
];

const fn def(
    name: &'static str,
    kind: Kind,
    unit: &'static str,
    attribute: Option<&'static str>,
    values: &'static [&'static str],
    description: &'static str,
) -> MetricDef {
    MetricDef {
        name,
        kind,
        unit,
        description,
        attribute,
        values,
    }
}

use Kind::{Counter, Gauge};

/// The table, indexed by [`Metric`].
pub const METRICS: &[MetricDef] = &[
    def(
        "holdoff.breaker.state",
        Gauge,
        "1",
        Some("state"),
        STATES,
        "1 for the breaker's current state, 0 for the others.",
    ),
    def(
        "holdoff.breaker.admitted",
        Counter,
        "{call}",
        None,
        &[],
        "Calls the breaker admitted, probes included.",
    ),
    def(
        "holdoff.breaker.refused",
        Counter,
        "{call}",
        None,
        &[],
        "Calls the breaker refused (open, half-open with no probe due, forced open).",
    ),
    def(
        "holdoff.breaker.outcomes",
        Counter,
        "{call}",
        Some("outcome"),
        OUTCOMES,
        "Outcomes recorded, by kind, stale ones included.",
    ),
    def(
        "holdoff.breaker.stale_answers",
        Counter,
        "{call}",
        None,
        &[],
        "Outcomes that arrived too late to move the breaker (an earlier episode, a lost probe).",
    ),
    def(
        "holdoff.breaker.probes",
        Counter,
        "{probe}",
        None,
        &[],
        "Probes admitted while open or half-open.",
    ),
    def(
        "holdoff.breaker.transitions",
        Counter,
        "{transition}",
        Some("reason"),
        REASONS,
        "State changes, by reason (`tripped` counts the trips).",
    ),
    def(
        "holdoff.retry.attempts",
        Counter,
        "{attempt}",
        None,
        &[],
        "Attempts the policy let go, first attempts and retries.",
    ),
    def(
        "holdoff.retry.retries",
        Counter,
        "{attempt}",
        None,
        &[],
        "Attempts after the first of a call.",
    ),
    def(
        "holdoff.retry.waits",
        Counter,
        "{wait}",
        Some("source"),
        SOURCES,
        "Waits decided before a retry, by where the delay came from.",
    ),
    def(
        "holdoff.retry.wait.duration",
        Counter,
        "s",
        Some("source"),
        SOURCES,
        "Total time of the waits decided before retries, by source.",
    ),
    def(
        "holdoff.retry.capped_waits",
        Counter,
        "{wait}",
        None,
        &[],
        "Waits where the Retry-After cap shortened the server's delay.",
    ),
    def(
        "holdoff.retry.give_ups",
        Counter,
        "{call}",
        Some("reason"),
        GIVE_UPS,
        "Calls that stopped without another retry, by reason: the budget, quota or breaker stopped them, the answer was final (`not_retryable`), or the caller cancelled.",
    ),
    def(
        "holdoff.quota.tokens",
        Gauge,
        "{token}",
        None,
        &[],
        "Tokens left in the retry quota.",
    ),
    def(
        "holdoff.quota.refused",
        Counter,
        "{retry}",
        None,
        &[],
        "Retries the quota refused because it was empty.",
    ),
    def(
        "holdoff.group.keys",
        Gauge,
        "{key}",
        None,
        &[],
        "Breakers the group keeps.",
    ),
    def(
        "holdoff.group.evictions",
        Counter,
        "{breaker}",
        None,
        &[],
        "Idle breakers evicted to make room for a new key.",
    ),
];

impl Metric {
    /// Every metric, in table order.
    pub const ALL: [Metric; 17] = [
        Metric::BreakerState,
        Metric::BreakerAdmitted,
        Metric::BreakerRefused,
        Metric::BreakerOutcomes,
        Metric::BreakerStaleAnswers,
        Metric::BreakerProbes,
        Metric::BreakerTransitions,
        Metric::RetryAttempts,
        Metric::RetryRetries,
        Metric::RetryWaits,
        Metric::RetryWaitDuration,
        Metric::RetryCappedWaits,
        Metric::RetryGiveUps,
        Metric::QuotaTokens,
        Metric::QuotaRefused,
        Metric::GroupKeys,
        Metric::GroupEvictions,
    ];

    /// Its row of the table.
    pub fn def(self) -> &'static MetricDef {
        &METRICS[self as usize]
    }

    /// The metric with this code (its index in [`METRICS`]).
    pub fn from_code(code: u32) -> Option<Metric> {
        Metric::ALL.get(code as usize).copied()
    }
}

/// One reading: a metric, its attribute value if it has one, and the value (a count, a
/// duration in seconds, a state flag, a number of tokens or keys).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Which metric.
    pub metric: Metric,
    /// Index into the metric's [`MetricDef::values`]; `None` for a metric without attribute.
    pub attribute: Option<u16>,
    /// The value, in the metric's unit.
    pub value: f64,
}

impl Sample {
    pub(crate) fn new(metric: Metric, value: u64) -> Sample {
        Sample {
            metric,
            attribute: None,
            value: value as f64,
        }
    }

    pub(crate) fn of(metric: Metric, attribute: usize, value: f64) -> Sample {
        Sample {
            metric,
            attribute: Some(attribute as u16),
            value,
        }
    }

    /// The metric's name.
    pub fn name(&self) -> &'static str {
        self.metric.def().name
    }

    /// The metric's own attribute as (key, value), if it has one.
    pub fn attribute_pair(&self) -> Option<(&'static str, &'static str)> {
        let d = self.metric.def();
        match (d.attribute, self.attribute) {
            (Some(k), Some(i)) => d.values.get(i as usize).map(|v| (k, *v)),
            _ => None,
        }
    }

    /// The series as the conformance suite and the simulator write it: `name` or
    /// `name{key=value,...}`, attributes sorted by key, `upstream` added when given.
    pub fn series(&self, upstream: Option<&str>) -> String {
        let mut attrs: Vec<(&str, &str)> = self.attribute_pair().into_iter().collect();
        if let Some(u) = upstream {
            attrs.push(("upstream", u));
        }
        attrs.sort();
        let mut s = String::from(self.name());
        if !attrs.is_empty() {
            s.push('{');
            for (i, (k, v)) in attrs.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                let _ = write!(s, "{k}={v}");
            }
            s.push('}');
        }
        s
    }
}

/// The table as Markdown (docs/metrics.md carries it; a test keeps the two equal).
pub fn markdown_table() -> String {
    let mut s =
        String::from("| name | kind | unit | attribute (values) | meaning |\n|---|---|---|---|---|\n");
    for d in METRICS {
        let attr = match d.attribute {
            Some(a) => format!("`{a}` ({})", d.values.join(", ")),
            None => String::from("-"),
        };
        let _ = writeln!(
            s,
            "| `{}` | {} | `{}` | {} | {} |",
            d.name,
            d.kind.name(),
            d.unit,
            attr,
            d.description
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::breaker::{Reason, State};
    use crate::budget::{GiveUpReason, WaitSource};
    use crate::interop::{Coded, OutcomeKind};

    fn names<T: Coded>() -> Vec<&'static str> {
        T::ALL.iter().map(|v| v.name()).collect()
    }

    #[test]
    fn attribute_values_are_the_suites_names_in_code_order() {
        assert_eq!(STATES, names::<State>());
        assert_eq!(OUTCOMES, names::<OutcomeKind>());
        assert_eq!(REASONS, names::<Reason>());
        assert_eq!(SOURCES, names::<WaitSource>());
        assert_eq!(GIVE_UPS, names::<GiveUpReason>());
        for (i, v) in [State::Closed, State::HalfOpen, State::Disabled]
            .iter()
            .enumerate()
        {
            let _ = i;
            assert_eq!(STATES[v.code() as usize], v.name());
        }
    }

    #[test]
    fn the_table_is_indexed_by_metric_and_names_follow_the_rules() {
        assert_eq!(METRICS.len(), Metric::ALL.len());
        for (i, m) in Metric::ALL.iter().enumerate() {
            assert_eq!(*m as usize, i);
            assert_eq!(Metric::from_code(i as u32), Some(*m));
            let n = m.def().name;
            assert!(n.starts_with("holdoff."), "{n}");
            assert!(
                n.chars().all(|c| c.is_ascii_lowercase() || c == '.' || c == '_'),
                "{n}"
            );
            assert_eq!(m.def().attribute.is_some(), !m.def().values.is_empty(), "{n}");
        }
        assert_eq!(Metric::from_code(17), None);
    }

    #[test]
    fn series_names_sort_attributes_and_add_the_upstream() {
        let s = Sample::of(Metric::BreakerOutcomes, 2, 3.0);
        assert_eq!(s.series(None), "holdoff.breaker.outcomes{outcome=failure}");
        assert_eq!(
            s.series(Some("pay")),
            "holdoff.breaker.outcomes{outcome=failure,upstream=pay}"
        );
        assert_eq!(
            Sample::new(Metric::BreakerAdmitted, 1).series(None),
            "holdoff.breaker.admitted"
        );
        assert_eq!(
            Sample::of(Metric::BreakerState, 2, 1.0).series(Some("a")),
            "holdoff.breaker.state{state=half_open,upstream=a}"
        );
    }

    fn value(samples: &[Sample], series: &str) -> f64 {
        samples
            .iter()
            .filter(|s| s.series(None) == series)
            .map(|s| s.value)
            .sum()
    }

    #[test]
    fn counting_starts_at_the_first_read_and_adds_up_across_threads() {
        use crate::{Breaker, BreakerConfig, ManualClock, Outcome};
        use std::sync::Arc;
        let b = Arc::new(Breaker::new(BreakerConfig::default(), Arc::new(ManualClock::new())).unwrap());
        let p = b.allow().unwrap();
        b.record(p, Outcome::Success).unwrap();
        let mut out = Vec::new();
        b.metrics(&mut out);
        assert_eq!(
            value(&out, "holdoff.breaker.admitted"),
            0.0,
            "a call before the first read is not counted"
        );
        assert_eq!(value(&out, "holdoff.breaker.state{state=closed}"), 1.0);
        assert_eq!(out.len(), 5 + 2 + 6 + 2 + 9);
        let threads: Vec<_> = (0..12)
            .map(|_| {
                let b = Arc::clone(&b);
                std::thread::spawn(move || {
                    for _ in 0..5_000 {
                        let p = b.allow().unwrap();
                        b.record(p, Outcome::Success).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let p = b.allow().unwrap();
        b.record(p, Outcome::Failure).unwrap();
        out.clear();
        b.metrics(&mut out);
        assert_eq!(value(&out, "holdoff.breaker.admitted"), 60_001.0);
        assert_eq!(value(&out, "holdoff.breaker.outcomes{outcome=success}"), 60_000.0);
        assert_eq!(value(&out, "holdoff.breaker.outcomes{outcome=failure}"), 1.0);
        assert_eq!(value(&out, "holdoff.breaker.refused"), 0.0);
    }

    #[test]
    fn the_docs_carry_the_table() {
        let doc = include_str!("../../../docs/metrics.md");
        assert!(
            doc.contains(&markdown_table()),
            "docs/metrics.md must contain the table printed by holdoff::metrics::markdown_table():\n{}",
            markdown_table()
        );
    }
}
