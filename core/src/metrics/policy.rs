//! A policy's counters for the metric model: attempts, retries and waits striped by thread on
//! the call path; capped waits and give-ups, which end or slow a call, as plain atomic counts.

use super::counts::LazyCounts;
use super::{Metric, Sample};
use crate::budget::{Decision, GiveUpReason, WaitSource};
use crate::policy::{Before, Call, Policy};

// Striped counters.
const ATTEMPTS: usize = 0;
const RETRIES: usize = 1;
const WAITS: usize = 2; // three sources, in code order
const WAIT_NANOS: usize = 5; // three sources, in code order
                             // Rare counters.
const CAPPED: usize = 0;
const GIVE_UPS: usize = 1; // ten reasons, in code order
const RARE: usize = GIVE_UPS + 10;

pub(crate) type PolicyCounts = LazyCounts<RARE>;

fn source_index(s: WaitSource) -> usize {
    match s {
        WaitSource::RetryAfter => 0,
        WaitSource::Backoff => 1,
        WaitSource::Breaker => 2,
    }
}

fn give_up_index(r: GiveUpReason) -> usize {
    match r {
        GiveUpReason::BudgetSpent => 0,
        GiveUpReason::RetryAfterExceedsRemaining => 1,
        GiveUpReason::BackoffExceedsRemaining => 2,
        GiveUpReason::AttemptsExhausted => 3,
        GiveUpReason::NotRetryable => 4,
        GiveUpReason::QuotaEmpty => 5,
        GiveUpReason::BreakerOpen => 6,
        GiveUpReason::Cancelled => 7,
        GiveUpReason::RetryAfterAboveCap => 8,
        GiveUpReason::TotalTimeout => 9,
    }
}

fn nanos(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Policy {
    #[inline]
    pub(crate) fn count_before(&self, call: &Call, before: &Before) {
        let Some(c) = self.counts.get() else { return };
        match before {
            Before::Go(_) => {
                c.add(ATTEMPTS, 1);
                if call.attempts() > 1 {
                    c.add(RETRIES, 1);
                }
            }
            Before::Wait(w) => {
                let s = source_index(WaitSource::Breaker);
                c.add(WAITS + s, 1);
                c.add(WAIT_NANOS + s, nanos(*w));
            }
            Before::GiveUp { reason, .. } => c.add_rare(GIVE_UPS + give_up_index(*reason), 1),
        }
    }

    #[inline]
    pub(crate) fn count_decision(&self, d: &Decision) {
        let Some(c) = self.counts.get() else { return };
        match d {
            Decision::Done => {}
            Decision::Retry {
                delay,
                source,
                capped,
                ..
            } => {
                let s = source_index(*source);
                c.add(WAITS + s, 1);
                c.add(WAIT_NANOS + s, nanos(*delay));
                if *capped {
                    c.add_rare(CAPPED, 1);
                }
            }
            Decision::GiveUp { reason, .. } => c.add_rare(GIVE_UPS + give_up_index(*reason), 1),
        }
    }

    /// A give-up decided outside the policy's two functions (an execution's total timeout
    /// before an attempt, a stop after a wait, a cancel during a wait).
    pub(crate) fn count_give_up(&self, reason: GiveUpReason) {
        if let Some(c) = self.counts.get() {
            c.add_rare(GIVE_UPS + give_up_index(reason), 1);
        }
    }

    /// Appends this policy's retry series to `out` (docs/metrics.md): attempts, retries, waits
    /// and their total duration by source (seconds), capped waits, give-ups by reason, zeros
    /// included. Its breaker's and quota's series are read from them
    /// ([`crate::Breaker::metrics`], [`crate::RetryQuota::metrics`]). The first call starts
    /// counting; later calls only read.
    pub fn metrics(&self, out: &mut Vec<Sample>) {
        let c = self.counts.enable();
        out.push(Sample::new(Metric::RetryAttempts, c.get(ATTEMPTS)));
        out.push(Sample::new(Metric::RetryRetries, c.get(RETRIES)));
        for s in 0..3 {
            out.push(Sample::of(Metric::RetryWaits, s, c.get(WAITS + s) as f64));
        }
        for s in 0..3 {
            let secs = c.get(WAIT_NANOS + s) as f64 / 1e9;
            out.push(Sample::of(Metric::RetryWaitDuration, s, secs));
        }
        out.push(Sample::new(Metric::RetryCappedWaits, c.get_rare(CAPPED)));
        for r in 0..10 {
            out.push(Sample::of(
                Metric::RetryGiveUps,
                r,
                c.get_rare(GIVE_UPS + r) as f64,
            ));
        }
    }
}
