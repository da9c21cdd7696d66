//! The metric model (`holdoff::metrics`, docs/metrics.md): the core's table, and each object's
//! readings as name, attributes and value. Nothing here is restated: names, kinds, units,
//! attributes and values all come from the core.

use std::collections::HashMap;

use holdoff::metrics::{Kind, Sample, METRICS};

use crate::{Breaker, BreakerGroup, Policy, RetryQuota};

/// Whether a series is a cumulative count or a value read as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, uniffi::Enum)]
pub enum MetricKind {
    /// Monotonic, cumulative since counting started (Micrometer: a `FunctionCounter`).
    Counter,
    /// The current value (Micrometer: a `Gauge`).
    Gauge,
}

impl From<Kind> for MetricKind {
    fn from(k: Kind) -> Self {
        match k {
            Kind::Counter => MetricKind::Counter,
            Kind::Gauge => MetricKind::Gauge,
        }
    }
}

#[uniffi::export]
impl MetricKind {
    /// The core's name: `counter` or `gauge`.
    pub fn stable_name(&self) -> String {
        match self {
            MetricKind::Counter => Kind::Counter,
            MetricKind::Gauge => Kind::Gauge,
        }
        .name()
        .to_owned()
    }
}

/// One row of the metric table.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct MetricDef {
    /// OpenTelemetry name, `holdoff.<object>.<what>` (`holdoff.breaker.refused`).
    pub name: String,
    pub kind: MetricKind,
    /// UCUM unit: `s` (durations, in seconds), `1`, or an annotation such as `{call}`.
    pub unit: String,
    /// What it counts, one sentence.
    pub description: String,
    /// The metric's own attribute (`state`, `outcome`, `reason`, `source`), if it has one.
    pub attribute: Option<String>,
    /// That attribute's values, in the core's order; empty without an attribute.
    pub values: Vec<String>,
}

/// The metric table (17 rows), the core's, in its order.
#[uniffi::export]
pub fn metric_table() -> Vec<MetricDef> {
    METRICS
        .iter()
        .map(|d| MetricDef {
            name: d.name.to_owned(),
            kind: d.kind.into(),
            unit: d.unit.to_owned(),
            description: d.description.to_owned(),
            attribute: d.attribute.map(str::to_owned),
            values: d.values.iter().map(|v| (*v).to_owned()).collect(),
        })
        .collect()
}

/// One series' value now: the metric's `name`, its `attributes` (its own attribute, and
/// `upstream` = the key for a group's breakers; empty for a metric without attribute) and the
/// `value` in the metric's unit (a count, seconds, 1/0 for a state, tokens, keys).
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct MetricReading {
    pub name: String,
    pub attributes: HashMap<String, String>,
    pub value: f64,
}

fn readings(samples: &[Sample], upstream: Option<&str>, out: &mut Vec<MetricReading>) {
    out.extend(samples.iter().map(|s| {
        let mut attributes = HashMap::with_capacity(2);
        if let Some((k, v)) = s.attribute_pair() {
            attributes.insert(k.to_owned(), v.to_owned());
        }
        if let Some(u) = upstream {
            attributes.insert("upstream".to_owned(), u.to_owned());
        }
        MetricReading {
            name: s.name().to_owned(),
            attributes,
            value: s.value,
        }
    }));
}

fn read(fill: impl FnOnce(&mut Vec<Sample>)) -> Vec<MetricReading> {
    let mut samples = Vec::with_capacity(32);
    fill(&mut samples);
    let mut out = Vec::with_capacity(samples.len());
    readings(&samples, None, &mut out);
    out
}

#[uniffi::export]
impl Breaker {
    /// This breaker's series (docs/metrics.md), zeros included: the state gauge (one reading per
    /// state, 1 for the current one), admitted, refused, outcomes by kind, stale answers, probes,
    /// transitions by reason. The first call starts counting (calls made before it are not
    /// counted); later calls only read. Reads no clock.
    pub fn metrics(&self) -> Vec<MetricReading> {
        read(|v| self.inner.metrics(v))
    }
}

#[uniffi::export]
impl Policy {
    /// This policy's retry series only (attempts, retries, waits and their total duration in
    /// seconds by source, capped waits, give-ups by reason), zeros included; its breaker's and
    /// quota's come from their own `metrics()`. The first call starts counting.
    pub fn metrics(&self) -> Vec<MetricReading> {
        read(|v| self.inner.metrics(v))
    }
}

#[uniffi::export]
impl RetryQuota {
    /// This quota's series: tokens available (a gauge) and retries refused for want of tokens.
    /// The first call starts counting refusals.
    pub fn metrics(&self) -> Vec<MetricReading> {
        read(|v| self.inner.metrics(v))
    }
}

#[uniffi::export]
impl BreakerGroup {
    /// The group's own series (`holdoff.group.keys`, `holdoff.group.evictions`), then every kept
    /// breaker's series with the attribute `upstream` = its key, keys sorted. The first call
    /// starts counting on every breaker the group keeps or makes from then on.
    pub fn metrics(&self) -> Vec<MetricReading> {
        let m = self.inner.metrics();
        let mut out = Vec::with_capacity(m.group.len() + m.breakers.len() * 24);
        readings(&m.group, None, &mut out);
        for (key, samples) in &m.breakers {
            readings(samples, Some(key), &mut out);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BreakerConfig, ManualClock, Outcome, TripPolicy};

    fn value(r: &[MetricReading], name: &str, attrs: &[(&str, &str)]) -> f64 {
        let want: HashMap<String, String> = attrs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        r.iter()
            .find(|x| x.name == name && x.attributes == want)
            .unwrap_or_else(|| panic!("no {name} {attrs:?}"))
            .value
    }

    #[test]
    fn the_table_is_the_cores() {
        let t = metric_table();
        assert_eq!(t.len(), METRICS.len());
        assert_eq!(t[0].name, "holdoff.breaker.state");
        assert_eq!(
            t[0].values,
            ["closed", "open", "half_open", "forced_open", "disabled"]
        );
        assert_eq!(t[10].unit, "s");
        assert_eq!(t[10].kind.stable_name(), "counter");
    }

    #[test]
    fn a_group_names_each_breaker_by_its_key() {
        let config = BreakerConfig {
            trip: Some(TripPolicy::Consecutive { threshold: 1 }),
            ..Default::default()
        };
        let g = BreakerGroup::new(config, Some(ManualClock::new()), None, None).unwrap();
        assert_eq!(value(&g.metrics(), "holdoff.group.keys", &[]), 0.0);
        let b = g.get("pay".to_owned());
        let crate::Admission::Admitted { permit, .. } = b.allow() else {
            panic!("refused")
        };
        permit.record(Outcome::Failure).unwrap();
        assert!(matches!(b.allow(), crate::Admission::Refused { .. }));
        let r = g.metrics();
        assert_eq!(value(&r, "holdoff.group.keys", &[]), 1.0);
        assert_eq!(value(&r, "holdoff.breaker.refused", &[("upstream", "pay")]), 1.0);
        assert_eq!(
            value(
                &r,
                "holdoff.breaker.state",
                &[("state", "open"), ("upstream", "pay")]
            ),
            1.0
        );
        assert_eq!(
            value(
                &r,
                "holdoff.breaker.transitions",
                &[("reason", "tripped"), ("upstream", "pay")]
            ),
            1.0
        );
    }
}
