//! Probes and their windows: opening an episode, admission while open, the ramp back to closed,
//! and probes lost at their deadline or cancelled.
//!
//! An open interval is a probe window: it admits at most `max_probes_in_flight` probes, however
//! fast they are answered, and admitting the last one re-arms it one interval later, so recovery
//! ramps one interval at a time instead of bursting (docs/contract.md §3; docs/incidents.md,
//! incident 1). A probe holds its slot until it is answered, cancelled or lost at its deadline;
//! its window stays spent whatever becomes of it.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::events::Transition;
use super::word::word_episode;
use super::{Breaker, Effect, Inner, Outcome, Permit, Reason, Refusal, State};
use crate::clock::{Instant, LazyNow};

/// A probe admitted and not yet answered, cancelled or lost.
#[derive(Debug, Clone, Copy)]
pub(super) struct InFlight {
    id: u32,
    admitted: Instant,
    timeout: Duration,
}

impl InFlight {
    // Judged by age, not by a saturating deadline: at the end of the clock axis a deadline would
    // equal "now" and every probe would be lost the moment it was admitted.
    fn alive(&self, t: Instant) -> bool {
        t.saturating_since(self.admitted) < self.timeout
    }

    pub(super) fn deadline(&self) -> Instant {
        self.admitted.saturating_add(self.timeout)
    }
}

impl Inner {
    /// The probes in flight at `t`: those lost at their deadline no longer hold a slot, whether
    /// or not anyone has observed the loss yet.
    pub(super) fn live_probes(&self, t: Instant) -> impl Iterator<Item = &InFlight> {
        self.probes.iter().filter(move |p| p.alive(t))
    }

    pub(super) fn new_window(&mut self, eligible_at: Instant) {
        self.eligible_at = eligible_at;
        self.probe_window = self.probe_window.wrapping_add(1);
        self.window_admitted = 0;
        self.armed_at = None;
    }
}

impl Breaker {
    /// Admission when the fast path could not admit: a probe if one is due, else a refusal with
    /// the time until the next. Refuses without the lock when it can (refusal.rs), else takes
    /// the lock; reads the clock at most once either way (`now`, or this breaker's clock when
    /// `None`).
    #[cold]
    pub(super) fn allow_slow(&self, now: Option<&LazyNow<'_>>) -> Result<Permit, Refusal> {
        let own = LazyNow::new(&*self.profile.clock);
        let now = now.unwrap_or(&own);
        if let Some(refusal) = self.refuse_fast(now) {
            return Err(refusal);
        }
        let mut inner = self.lock();
        let w = self.word.load(Ordering::Acquire);
        let state = State::from_bits(w);
        let episode = word_episode(w);
        let result = match state {
            State::Closed | State::Disabled => Ok(Permit {
                breaker: self.id,
                episode,
                probe: 0,
            }),
            State::ForcedOpen => {
                self.count_refusal();
                Err(Refusal {
                    retry_after: None,
                    state,
                    episode,
                })
            }
            State::Open | State::HalfOpen => {
                let t = inner.at(now);
                inner.probes.retain(|p| p.alive(t));
                let max = self.config().max_probes_in_flight as usize;
                if t >= inner.eligible_at
                    && (inner.window_admitted as usize) < max
                    && inner.probes.len() < max
                    && inner.fleet_may_probe(t)
                {
                    inner.fleet_spend_grant(t);
                    let id = inner.next_probe;
                    inner.next_probe = inner.next_probe.wrapping_add(1).max(1);
                    let timeout = self.config().probe_timeout.unwrap_or(inner.interval);
                    inner.window_admitted += 1;
                    if inner.window_admitted as usize == max {
                        let next = t.saturating_add(inner.interval);
                        inner.new_window(next);
                        inner.armed_at = Some(t);
                    }
                    inner.probes.push(InFlight {
                        id,
                        admitted: t,
                        timeout,
                    });
                    inner.probes_admitted += 1;
                    self.count_probe();
                    if state == State::Open {
                        self.apply(
                            &mut inner,
                            Transition::new(w, State::HalfOpen, Reason::ProbeAdmitted, t),
                        );
                    }
                    Ok(Permit {
                        breaker: self.id,
                        episode,
                        probe: id,
                    })
                } else {
                    self.count_refusal();
                    inner.fleet_demand();
                    Err(Refusal {
                        retry_after: Some(self.next_probe_in(&inner, t)),
                        state,
                        episode,
                    })
                }
            }
        };
        self.finish(inner);
        result
    }

    /// Time from `t` until the next probe may be admitted (zero when one may go now): when the
    /// window opens, or, while every slot is held by a live probe, when the first of them is
    /// lost, whichever is later. For an open or half-open breaker.
    pub(super) fn next_probe_in(&self, inner: &Inner, t: Instant) -> Duration {
        let max = self.config().max_probes_in_flight as usize;
        let mut until = inner.eligible_at;
        if inner.live_probes(t).count() >= max {
            if let Some(first) = inner.live_probes(t).map(InFlight::deadline).min() {
                until = until.max(first);
            }
        }
        inner.fleet_wait(t, until.saturating_since(t))
    }

    /// A cancelled call. A cancelled probe frees its slot, but the window it was admitted in
    /// stays spent: it may already have reached the upstream, and callers cancelling on short
    /// deadlines must not turn one probe per interval into a stream. A probe already lost at its
    /// deadline has no slot left to free.
    pub(super) fn cancel(&self, inner: &mut Inner, w: u64, permit: &Permit) -> Effect {
        if matches!(State::from_bits(w), State::Open | State::HalfOpen)
            && permit.probe != 0
            && permit.episode == word_episode(w)
        {
            inner.probes.retain(|p| p.id != permit.probe);
        }
        Effect::Ignored
    }

    /// An outcome for an open or half-open breaker: only the answer to a live probe of the
    /// current episode moves recovery; any other failure discards its progress.
    pub(super) fn record_open(
        &self,
        inner: &mut Inner,
        w: u64,
        permit: &Permit,
        outcome: Outcome,
        t: Instant,
    ) -> Effect {
        let episode = word_episode(w);
        let current = permit.probe != 0
            && permit.episode == episode
            && inner.probes.iter().any(|p| p.id == permit.probe && p.alive(t));
        if !current {
            inner.stale += 1;
            if permit.probe != 0 && permit.episode == episode {
                // A probe of this episode no longer in flight: lost at its deadline, or discarded
                // when a sibling failed. Its loss took effect then; its answer moves nothing,
                // whoever observed the loss first.
                return Effect::Stale;
            }
            match outcome {
                Outcome::RetryLater(d) if !d.is_zero() => {
                    inner.recoveries = 0;
                    let until = t.saturating_add(d.min(self.config().max_retry_later));
                    if until > inner.eligible_at {
                        inner.new_window(until);
                    }
                    inner.hold_until = inner.hold_until.max(until);
                    inner.fleet_retry_later(until);
                }
                o if o.is_failure() => {
                    inner.recoveries = 0;
                    inner.fleet_stale_failure();
                }
                _ => {}
            }
            return Effect::Stale;
        }
        inner.probes.retain(|p| p.id != permit.probe);
        match outcome {
            Outcome::Success | Outcome::Answer => {
                inner.recoveries += 1;
                inner.fleet_answer(true, t);
                if inner.recoveries >= self.config().recoveries && inner.fleet_may_close() {
                    self.close(inner, w, t);
                } else {
                    self.pace_ramp(inner);
                }
            }
            Outcome::RetryLater(d) if !d.is_zero() => {
                inner.recoveries = 0;
                // The ramp is over: probes still in flight beside this one belong to it, so
                // their answers are stale (docs/contract.md §3: any failure discards the count),
                // as gobreaker's generation makes them.
                inner.probes.clear();
                let wait = d.min(self.config().max_retry_later);
                inner.interval = wait;
                // A deadline already known (a longer Retry-After learned meanwhile) stands.
                let next = t.saturating_add(wait).max(inner.hold_until);
                inner.hold_until = next;
                inner.new_window(next);
                inner.fleet_answer(false, next);
                let change = Transition {
                    requested_delay: Some(d),
                    open_for: Some(next.saturating_since(t)),
                    ..Transition::new(w, State::Open, Reason::RetryLater, t)
                };
                self.apply(inner, change);
            }
            _ => {
                inner.recoveries = 0;
                inner.probes.clear();
                let step = inner.step;
                inner.interval = self.config().open_interval.interval(step, &mut inner.rng);
                inner.step = step.saturating_add(1);
                // A Retry-After learned meanwhile is never brought forward by a failed probe;
                // the window this probe re-armed is not a deadline and does not hold it.
                let next = t.saturating_add(inner.interval).max(inner.hold_until);
                inner.new_window(next);
                inner.fleet_answer(false, next);
                let change = Transition {
                    open_for: Some(next.saturating_since(t)),
                    ..Transition::new(w, State::Open, Reason::ProbeFailed, t)
                };
                self.apply(inner, change);
            }
        }
        Effect::Counted
    }

    /// After an answered probe that did not close the breaker: the next probe may go one ramp
    /// step after this window was armed.
    fn pace_ramp(&self, inner: &mut Inner) {
        // The upstream answers: the ramp runs at the first step of the open interval, not at the
        // backoff grown during the outage or at a long provider's delay (those only said when
        // the first probe may go); never slower than the interval in force, so a short
        // Retry-After keeps its own pace. Chosen once per ramp (one jitter draw).
        if inner.recoveries == 1 {
            let first = self.config().open_interval.interval(0, &mut inner.rng);
            inner.interval = first.min(inner.interval);
        }
        let ramp = inner.interval;
        if let Some(armed) = inner.armed_at {
            let due = armed.saturating_add(ramp);
            if due < inner.eligible_at {
                inner.eligible_at = due;
            }
        }
    }

    /// Opens a closed breaker: a new episode, whose first probe may go after the open interval's
    /// first step, or after the provider's delay (bounded by `max_retry_later`) for a
    /// retry-later, after which the backoff starts again from its first step.
    pub(super) fn trip(&self, inner: &mut Inner, w: u64, t: Instant, retry_later: Option<Duration>) {
        let (wait, reason) = match retry_later {
            Some(d) => {
                inner.step = 0;
                (d.min(self.config().max_retry_later), Reason::RetryLater)
            }
            None => {
                let d = self.config().open_interval.interval(0, &mut inner.rng);
                inner.step = 1;
                (d, Reason::Tripped)
            }
        };
        inner.interval = wait;
        inner.new_window(t.saturating_add(wait));
        inner.start_afresh();
        if retry_later.is_some() {
            inner.hold_until = t.saturating_add(wait);
        }
        inner.opens += 1;
        inner.fleet_opened(t.saturating_add(wait), retry_later.is_some());
        let change = Transition {
            new_episode: true,
            requested_delay: retry_later,
            open_for: Some(wait),
            ..Transition::new(w, State::Open, reason, t)
        };
        self.apply(inner, change);
    }

    /// Closes a recovered breaker, in the same episode: answers to its probes still in flight
    /// are stale from now on.
    pub(super) fn close(&self, inner: &mut Inner, w: u64, t: Instant) {
        inner.start_afresh();
        inner.step = 0;
        inner.closes += 1;
        self.apply(inner, Transition::new(w, State::Closed, Reason::Recovered, t));
    }
}

#[cfg(test)]
mod tests {
    use crate::breaker::tests::{fail, incident_one};
    use crate::breaker::{Outcome, State};
    use crate::clock::Instant;

    #[test]
    fn ramp_needs_three_answers() {
        let (b, clock) = incident_one();
        fail(&b, 5);
        assert_eq!(b.snapshot().state, State::Open);
        for k in 1..=3u64 {
            clock.set(Instant::from_millis(60_000 * k)).unwrap();
            let p = b.allow().unwrap();
            assert_eq!(p.episode(), 1);
            assert!(b.allow().is_err());
            b.record(p, Outcome::Success).unwrap();
        }
        assert_eq!(b.snapshot().state, State::Closed);
    }
}
