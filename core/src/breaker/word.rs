//! The packed state word: state, consecutive failures and episode in one atomic, so that a closed
//! breaker admits a call and forgets its failures on a success with one atomic load each (no
//! lock, no clock reading). Everything else that counts toward a trip while closed (or disabled)
//! runs under the lock and writes the count back into this word with a compare-and-swap, since
//! the fast path may clear it at any moment.

use std::sync::atomic::Ordering;

use super::{Breaker, Effect, Inner, Outcome, Permit, State};
use crate::clock::LazyNow;

// State in bits 0..3, consecutive failures in bits 3..32, episode in 32..64.
const STATE_MASK: u64 = 0b111;
const FAIL_SHIFT: u32 = 3;
const FAIL_MASK: u64 = (1 << 29) - 1;

pub(super) fn pack(state: State, failures: u64, episode: u32) -> u64 {
    (state as u64) | ((failures & FAIL_MASK) << FAIL_SHIFT) | ((episode as u64) << 32)
}

pub(super) fn word_failures(w: u64) -> u64 {
    (w >> FAIL_SHIFT) & FAIL_MASK
}

pub(super) fn word_episode(w: u64) -> u32 {
    (w >> 32) as u32
}

impl State {
    pub(super) fn from_bits(b: u64) -> State {
        match b & STATE_MASK {
            0 => State::Closed,
            1 => State::Open,
            2 => State::HalfOpen,
            3 => State::ForcedOpen,
            _ => State::Disabled,
        }
    }
}

impl Breaker {
    /// `allow`'s closed arm: while closed or disabled, a call is admitted on one atomic load.
    /// `None` when admission needs the lock (open, half-open, forced open).
    #[inline]
    pub(super) fn allow_fast(&self) -> Option<Permit> {
        let w = self.word.load(Ordering::Acquire);
        match State::from_bits(w) {
            State::Closed | State::Disabled => Some(Permit {
                breaker: self.id,
                episode: word_episode(w),
                probe: 0,
            }),
            _ => None,
        }
    }

    /// The closed path of a success or an answer under the consecutive policy: one atomic load
    /// (and a compare-and-swap only when there were failures to forget). True when done.
    #[inline]
    pub(super) fn record_fast(&self, permit: &Permit, outcome: Outcome) -> bool {
        if matches!(outcome, Outcome::Success | Outcome::Answer) && !self.timed {
            let w = self.word.load(Ordering::Acquire);
            if State::from_bits(w) == State::Closed && word_episode(w) == permit.episode && permit.probe == 0
            {
                return word_failures(w) == 0 || self.reset_failures(w, permit.episode);
            }
        }
        false
    }

    #[cold]
    fn reset_failures(&self, mut w: u64, episode: u32) -> bool {
        loop {
            if State::from_bits(w) != State::Closed || word_episode(w) != episode {
                return false;
            }
            let new = pack(State::Closed, 0, episode);
            match self
                .word
                .compare_exchange_weak(w, new, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return true,
                Err(actual) => w = actual,
            }
        }
    }

    /// An outcome for a closed breaker that the fast path did not take, under the lock: counted
    /// toward a trip if its permit was admitted since the last trip or reset, else stale.
    pub(super) fn record_closed(
        &self,
        inner: &mut Inner,
        w: u64,
        permit: &Permit,
        outcome: Outcome,
        now: &LazyNow<'_>,
    ) -> Effect {
        let episode = word_episode(w);
        // A probe's answer after the close belongs to the ramp that is over (a probe lost at its
        // deadline and answering late, a sibling of the closing probe): stale.
        if permit.episode != episode || permit.probe != 0 {
            inner.stale += 1;
            return Effect::Stale;
        }
        if let Outcome::RetryLater(d) = outcome {
            if !d.is_zero() {
                self.trip(inner, w, now.get(), Some(d));
                return Effect::Counted;
            }
        }
        let failure = outcome.is_failure();
        if self.timed {
            let t = now.get();
            if inner.window.record(t, failure) {
                self.trip(inner, w, t, None);
            }
            return Effect::Counted;
        }
        // Consecutive policy: count under the lock; the fast path may concurrently reset the
        // count on a success, hence the CAS loop.
        let mut w = w;
        loop {
            if State::from_bits(w) != State::Closed || word_episode(w) != episode {
                inner.stale += 1;
                return Effect::Stale;
            }
            let failures = if failure {
                (word_failures(w) + 1).min(self.threshold)
            } else {
                0
            };
            let new = pack(State::Closed, failures, episode);
            match self
                .word
                .compare_exchange_weak(w, new, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    if failure && failures >= self.threshold {
                        self.trip(inner, new, now.get(), None);
                    }
                    return Effect::Counted;
                }
                Err(actual) => w = actual,
            }
        }
    }

    /// An outcome for a disabled breaker: counted like closed, so the snapshot shows what the
    /// breaker would have seen, but never tripped.
    pub(super) fn record_disabled(
        &self,
        inner: &mut Inner,
        w: u64,
        permit: &Permit,
        outcome: Outcome,
        now: &LazyNow<'_>,
    ) -> Effect {
        if permit.episode != word_episode(w) {
            inner.stale += 1;
            return Effect::Stale;
        }
        let failure = outcome.is_failure();
        if self.timed {
            inner.window.record(now.get(), failure);
        } else {
            let _ = self.word.fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                let f = if failure {
                    (word_failures(w) + 1).min(FAIL_MASK)
                } else {
                    0
                };
                Some(pack(State::from_bits(w), f, word_episode(w)))
            });
        }
        Effect::Counted
    }

    /// Writes a new state, zero failures and `episode` over `old`, the word the change was
    /// decided on under the lock.
    pub(super) fn store_state(&self, old: u64, to: State, episode: u32) {
        let new = pack(to, 0, episode);
        // Only the lock holder changes state; the fast path only clears the failure count of a
        // closed word, which every store here overwrites on purpose. A swap rather than a plain
        // store: every write to the word is then a read-modify-write, so the fast path's CAS and
        // this write are ordered for loom as they are for the hardware (loom models a plain
        // store racing a CAS as unordered and would report a trip undone by a stale reset: see
        // tests/loom.rs). Off the fast path, so the cost does not matter.
        let prev = self.word.swap(new, Ordering::AcqRel);
        debug_assert_eq!(
            prev & !(FAIL_MASK << FAIL_SHIFT),
            old & !(FAIL_MASK << FAIL_SHIFT),
            "the breaker word changed state under the lock"
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::breaker::tests::incident_one;
    use crate::breaker::Outcome;

    #[test]
    fn closed_fast_path_reads_no_clock() {
        let (b, clock) = incident_one();
        for _ in 0..10 {
            let p = b.allow().unwrap();
            b.record(p, Outcome::Success).unwrap();
        }
        assert_eq!(clock.reads(), 0);
    }
}
