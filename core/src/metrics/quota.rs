//! The retry quota's and the breaker group's series for the metric model.

use super::counts::LazyCounts;
use super::{Metric, Sample};
use crate::group::BreakerGroup;
use crate::quota::RetryQuota;

pub(crate) type QuotaCounts = LazyCounts<1>;

impl RetryQuota {
    pub(crate) fn count_refused(&self) {
        if let Some(c) = self.counts.get() {
            c.add_rare(0, 1);
        }
    }

    /// Appends this quota's series to `out` (docs/metrics.md): tokens left (a gauge) and
    /// retries refused for want of tokens. The first call starts counting refusals.
    pub fn metrics(&self, out: &mut Vec<Sample>) {
        let c = self.counts.enable();
        out.push(Sample::new(Metric::QuotaTokens, self.available()));
        out.push(Sample::new(Metric::QuotaRefused, c.get_rare(0)));
    }
}

/// A group's series: its own, and each kept breaker's under its key (the `upstream`
/// attribute), keys sorted.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupMetrics {
    /// `holdoff.group.keys` and `holdoff.group.evictions`.
    pub group: Vec<Sample>,
    /// Each kept breaker's series ([`crate::Breaker::metrics`]), by key.
    pub breakers: Vec<(String, Vec<Sample>)>,
}

impl BreakerGroup {
    /// The group's series (docs/metrics.md): breakers kept (a gauge) and evictions since the
    /// group was made, then every kept breaker's series under its key. The first call starts
    /// counting on every breaker the group keeps or makes from then on.
    pub fn metrics(&self) -> GroupMetrics {
        let (snapshot, kept) = self.start_metrics();
        let breakers = kept
            .into_iter()
            .map(|(k, b)| {
                let mut v = Vec::with_capacity(32);
                b.metrics(&mut v);
                (k, v)
            })
            .collect();
        GroupMetrics {
            group: vec![
                Sample::new(Metric::GroupKeys, snapshot.keys as u64),
                Sample::new(Metric::GroupEvictions, snapshot.evictions),
            ],
            breakers,
        }
    }
}
