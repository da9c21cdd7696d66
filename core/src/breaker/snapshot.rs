//! The breaker's snapshot: a side-effect-free view read from the word and, once it exists, the
//! locked state.

use super::word::{word_episode, word_failures};
use super::{Breaker, Inner, Snapshot, State};
use crate::clock::LazyNow;
use std::sync::atomic::Ordering;

impl Breaker {
    /// A view of the breaker. Side-effect free: it never admits, expires or advances anything.
    /// Reads the clock once; allocates nothing for a breaker that has only been closed.
    pub fn snapshot(&self) -> Snapshot {
        let now = LazyNow::new(&*self.profile.clock);
        // A breaker that never took the lock for a change is in its initial state: read that
        // rather than making the locked state for a read. The word is loaded before looking for
        // that state: every write to the word is a release made by a thread that had made (or
        // found) the state first (a lock holder; metrics starting to count; a fast-path reset
        // of failures, which only a lock holder counts), so a load that saw any write is
        // followed by a look that finds the state. Finding none, the word loaded is the
        // initial one, which goes with the initial state, and so do no refusals: the refusal
        // count is read only with the locked state found, since another caller may trip the
        // breaker and be refused after the look found none.
        let before = self.word.load(Ordering::Acquire);
        let guard = self.peek();
        let fresh;
        let (inner, w, refusals) = match guard.as_deref() {
            Some(inner) => (
                inner,
                self.word.load(Ordering::Acquire),
                self.refusals.load(Ordering::Relaxed),
            ),
            None => {
                fresh = Inner::new(&self.profile.config, self.seed);
                (&fresh, before, 0)
            }
        };
        let state = State::from_bits(w);
        let t = now.get();
        let open = matches!(state, State::Open | State::HalfOpen);
        let retry_after = open.then(|| self.next_probe_in(inner, t));
        let failures = if self.timed() {
            inner.window.failures(Some(t))
        } else {
            word_failures(w)
        };
        Snapshot {
            state,
            episode: word_episode(w),
            failures: if state == State::Closed || state == State::Disabled {
                failures
            } else {
                0
            },
            recoveries: inner.recoveries,
            probes_in_flight: if open {
                inner.live_probes(t).count() as u32
            } else {
                0
            },
            retry_after,
            probe_ready: retry_after.is_some_and(|wait| wait.is_zero()),
            interval: open.then_some(inner.interval),
            opens: inner.opens,
            closes: inner.closes,
            probes: inner.probes_admitted,
            refusals,
            stale_answers: inner.stale,
            events_dropped: inner.events_dropped,
        }
    }
}
