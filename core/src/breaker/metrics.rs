//! The breaker's counters for the metric model (crate::metrics): admissions, refusals and
//! outcomes striped by thread on the call path; stale answers, probes and state changes on the
//! paths that already hold the lock.

use std::sync::atomic::Ordering;

use super::word::FAST_PATH_COUNTING;
use super::{Breaker, Effect, Outcome, Reason, State};
use crate::metrics::counts::{Counts, LazyCounts};
use crate::metrics::{Metric, Sample};

// Striped counters.
const ADMITTED: usize = 0;
const REFUSED: usize = 1;
const OUTCOMES: usize = 2; // six kinds, in code order
                           // Rare counters.
const STALE: usize = 0;
const PROBES: usize = 1;
const TRANSITIONS: usize = 2; // nine reasons, in code order
pub(super) const RARE: usize = TRANSITIONS + 9;

pub(super) type BreakerCounts = LazyCounts<RARE>;

fn outcome_index(o: &Outcome) -> usize {
    match o {
        Outcome::Success => 0,
        Outcome::Answer => 1,
        Outcome::Failure => 2,
        Outcome::Timeout => 3,
        Outcome::RetryLater(_) => 4,
        Outcome::Cancelled => 5,
    }
}

fn reason_index(r: Reason) -> usize {
    match r {
        Reason::Tripped => 0,
        Reason::RetryLater => 1,
        Reason::ProbeAdmitted => 2,
        Reason::ProbeFailed => 3,
        Reason::Recovered => 4,
        Reason::ForcedOpen => 5,
        Reason::Disabled => 6,
        Reason::Reset => 7,
        Reason::FleetOpened => 8,
    }
}

fn state_index(s: State) -> usize {
    match s {
        State::Closed => 0,
        State::Open => 1,
        State::HalfOpen => 2,
        State::ForcedOpen => 3,
        State::Disabled => 4,
    }
}

impl Breaker {
    /// Counts an admission decided off the closed fast path (a refusal, a probe). The word's
    /// counting flag is read first: it is on the breaker's own cache line, where the counters
    /// are two pointer hops away, and a breaker nobody reads the metrics of has it clear. A
    /// decision racing the first metrics read may go uncounted, as a call made before it.
    #[inline]
    pub(super) fn count_allow_slow(&self, admitted: bool) {
        if self.word.load(Ordering::Relaxed) & FAST_PATH_COUNTING != 0 {
            self.count_allow(admitted);
        }
    }

    #[inline]
    pub(super) fn count_allow(&self, admitted: bool) {
        if let Some(c) = self.counts() {
            c.add(if admitted { ADMITTED } else { REFUSED }, 1);
        }
    }

    #[inline]
    pub(super) fn count_record(&self, outcome: &Outcome, effect: Effect) {
        if let Some(c) = self.counts() {
            c.add(OUTCOMES + outcome_index(outcome), 1);
            if effect == Effect::Stale {
                c.add_rare(STALE, 1);
            }
        }
    }

    pub(super) fn count_probe(&self) {
        if let Some(c) = self.counts() {
            c.add_rare(PROBES, 1);
        }
    }

    pub(super) fn count_transition(&self, reason: Reason) {
        if let Some(c) = self.counts() {
            c.add_rare(TRANSITIONS + reason_index(reason), 1);
        }
    }

    /// The metric counters, once counting has started: one more pointer hop than a slot of
    /// the breaker's own, taken only when the word says counting is on (or on a slow path).
    #[inline]
    fn counts(&self) -> Option<&Counts<RARE>> {
        self.slow.get().and_then(|s| s.counts.get())
    }

    /// Starts counting for the metric model, if it has not started.
    pub(crate) fn enable_metrics(&self) {
        self.slow().counts.enable();
        self.word_counting();
    }

    /// Appends this breaker's series to `out` (docs/metrics.md): the state gauge (one sample per
    /// state, 1 for the current one), then admitted, refused, outcomes by kind, stale answers,
    /// probes and transitions by reason, zeros included. The first call starts counting (a
    /// call made before it is not counted); later calls only read. No clock is read.
    pub fn metrics(&self, out: &mut Vec<Sample>) {
        let c = self.slow().counts.enable();
        self.word_counting();
        let state = state_index(State::from_bits(self.word.load(Ordering::Acquire)));
        for s in 0..5 {
            out.push(Sample::of(
                Metric::BreakerState,
                s,
                f64::from(u8::from(s == state)),
            ));
        }
        out.push(Sample::new(Metric::BreakerAdmitted, c.get(ADMITTED)));
        out.push(Sample::new(Metric::BreakerRefused, c.get(REFUSED)));
        for k in 0..6 {
            out.push(Sample::of(Metric::BreakerOutcomes, k, c.get(OUTCOMES + k) as f64));
        }
        out.push(Sample::new(Metric::BreakerStaleAnswers, c.get_rare(STALE)));
        out.push(Sample::new(Metric::BreakerProbes, c.get_rare(PROBES)));
        for r in 0..9 {
            out.push(Sample::of(
                Metric::BreakerTransitions,
                r,
                c.get_rare(TRANSITIONS + r) as f64,
            ));
        }
    }
}
