//! The packed state word: state, two flags, consecutive failures and episode in one atomic, so
//! that a closed breaker admits a call and forgets its failures on a success with one atomic load
//! each (no lock, no clock reading). Everything else that counts toward a trip while closed (or
//! disabled) runs under the lock and writes the count back into this word with a
//! compare-and-swap, since the fast path may clear it at any moment.
//!
//! The layout is part of the C ABI (version [`FAST_PATH_VERSION`], docs/ffi.md "The fast-path
//! word"): a binding reads the word atomically from the address [`Breaker::fast_path_word`]
//! gives and admits or recognises a clean success without calling into the library, with the
//! two checks [`fast_admit`] and [`fast_success`]. Every write to the word is a read-modify-write
//! that keeps the flags, so a binding never sees a flag cleared.

use std::sync::atomic::Ordering;

use crate::sync::AtomicU64;

use super::{Breaker, Effect, Inner, Outcome, Permit, State};
use crate::clock::LazyNow;

/// Version of the word's layout below; bumped whenever a bit changes meaning.
pub const FAST_PATH_VERSION: u32 = 1;
/// Bits 0..3: the state (0 closed, 1 open, 2 half-open, 3 forced open, 4 disabled).
pub const FAST_PATH_STATE_MASK: u64 = 0b111;
/// Bit 3: the breaker's metrics are counting, so every admission and outcome goes through the
/// library to be counted.
pub const FAST_PATH_COUNTING: u64 = 1 << 3;
/// Bit 4: the trip policy counts over a time window, so every outcome goes through the library
/// (it reads the clock).
pub const FAST_PATH_TIMED: u64 = 1 << 4;
/// Bits 5..32: consecutive failures counted toward a trip (consecutive policy, while closed).
const FAIL_SHIFT: u32 = 5;
const FAIL_MASK: u64 = (1 << 27) - 1;
const FLAGS: u64 = FAST_PATH_COUNTING | FAST_PATH_TIMED;
// Bits 32..64: the episode, raised by every trip.
const STATE_MASK: u64 = FAST_PATH_STATE_MASK;

/// A binding's admission on the word alone: `Some(episode)` (the permit's episode, not a probe)
/// when the breaker is closed and not counting metrics, else `None` (call the library).
#[inline]
pub fn fast_admit(word: u64) -> Option<u32> {
    (word & (STATE_MASK | FAST_PATH_COUNTING) == 0).then_some((word >> 32) as u32)
}

/// A binding's success on the word alone: true when the permit admitted under `episode` (not a
/// probe) can be recorded as a success without calling the library, because the breaker is
/// still closed in that episode with no failures pending and neither flag set: recording it
/// would change nothing. False: call the library.
#[inline]
pub fn fast_success(word: u64, episode: u32) -> bool {
    word == u64::from(episode) << 32
}

pub(super) fn pack(state: State, failures: u64, episode: u32) -> u64 {
    (state as u64) | ((failures & FAIL_MASK) << FAIL_SHIFT) | ((episode as u64) << 32)
}

fn flags(w: u64) -> u64 {
    w & FLAGS
}

/// The initial word of a breaker: closed, episode 0, `TIMED` set for a window policy.
pub(super) fn initial_word(timed: bool) -> u64 {
    pack(State::Closed, 0, 0) | if timed { FAST_PATH_TIMED } else { 0 }
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
    /// The fast-path word, for bindings that read it in place (docs/ffi.md "The fast-path word").
    /// Its address is fixed for the breaker's life.
    pub fn fast_path_word(&self) -> &AtomicU64 {
        &self.word
    }

    /// Sets the counting flag, so bindings stop admitting and recording on the word and every
    /// call is counted.
    pub(super) fn word_counting(&self) {
        self.word.fetch_or(FAST_PATH_COUNTING, Ordering::AcqRel);
    }

    /// `allow`'s closed arm: while closed or disabled, a call is admitted on one atomic load,
    /// and counted for the metric model when the word says it is counting. `None` when
    /// admission needs the lock (open, half-open, forced open); the caller counts that one.
    #[inline]
    pub(super) fn allow_fast(&self) -> Option<Permit> {
        let w = self.word.load(Ordering::Acquire);
        match State::from_bits(w) {
            State::Closed | State::Disabled => {
                // The flag, not the counter block, decides: it is in the word already loaded,
                // so a breaker nobody reads the metrics of pays no second load. The block is
                // made before the flag is set (a read-modify-write on this word, which this
                // acquire load follows), so a set flag finds it.
                if w & FAST_PATH_COUNTING != 0 {
                    self.count_allow(true);
                }
                Some(Permit {
                    breaker: self.id,
                    episode: word_episode(w),
                    probe: 0,
                })
            }
            _ => None,
        }
    }

    /// The closed path of a success or an answer under the consecutive policy: one atomic load
    /// (and a compare-and-swap only when there were failures to forget). True when done, the
    /// outcome counted as [`Effect::Counted`] for the metric model when the word says it is
    /// counting; false when the outcome needs the lock (the caller records and counts it).
    #[inline]
    pub(super) fn record_fast(&self, permit: &Permit, outcome: Outcome) -> bool {
        if matches!(outcome, Outcome::Success | Outcome::Answer) {
            let w = self.word.load(Ordering::Acquire);
            // Closed (state bits zero) and not timed: the flag is set for a window policy at
            // construction and never cleared.
            if w & (STATE_MASK | FAST_PATH_TIMED) == 0
                && word_episode(w) == permit.episode
                && permit.probe == 0
                && (word_failures(w) == 0 || self.reset_failures(w, permit.episode))
            {
                // As in `allow_fast`: the flag in the word already loaded decides.
                if w & FAST_PATH_COUNTING != 0 {
                    self.count_record(&outcome, Effect::Counted);
                }
                return true;
            }
        }
        false
    }

    #[cold]
    fn reset_failures(&self, mut w: u64, episode: u32) -> bool {
        let threshold = self.threshold();
        loop {
            // A closed word holding `threshold` failures is a trip in progress: the failure that
            // reached it wrote the count under the lock and is about to open the breaker. A
            // success must not clear it and call itself counted while the trip goes ahead; it
            // waits for the lock instead and finds the breaker open (stale).
            if State::from_bits(w) != State::Closed
                || word_episode(w) != episode
                || word_failures(w) >= threshold
            {
                return false;
            }
            let new = pack(State::Closed, 0, episode) | flags(w);
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
                let t = inner.at(now);
                self.trip(inner, w, t, Some(d));
                return Effect::Counted;
            }
        }
        let failure = outcome.is_failure();
        if self.timed() {
            let t = inner.at(now);
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
                (word_failures(w) + 1).min(self.threshold())
            } else {
                0
            };
            let new = pack(State::Closed, failures, episode) | flags(w);
            match self
                .word
                .compare_exchange_weak(w, new, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    if failure && failures >= self.threshold() {
                        let t = inner.at(now);
                        self.trip(inner, new, t, None);
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
        if self.timed() {
            let t = inner.at(now);
            inner.window.record(t, failure);
        } else {
            let _ = self.word.fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                let f = if failure {
                    (word_failures(w) + 1).min(FAIL_MASK)
                } else {
                    0
                };
                Some(pack(State::from_bits(w), f, word_episode(w)) | flags(w))
            });
        }
        Effect::Counted
    }

    /// Writes a new state, zero failures and `episode` over `old`, the word the change was
    /// decided on under the lock.
    pub(super) fn store_state(&self, old: u64, to: State, episode: u32) {
        let new = pack(to, 0, episode);
        // Only the lock holder changes state; the fast path only clears the failure count of a
        // closed word, which every store here overwrites on purpose, and the flags, which it
        // keeps. A read-modify-write rather than a plain store: the fast path's CAS and this
        // write are then ordered for loom as they are for the hardware (loom models a plain
        // store racing a CAS as unordered and would report a trip undone by a stale reset: see
        // tests/loom.rs). Off the fast path, so the cost does not matter.
        let prev = match self
            .word
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |p| Some(new | flags(p)))
        {
            Ok(p) | Err(p) => p,
        };
        debug_assert_eq!(
            prev & !(FAIL_MASK << FAIL_SHIFT) & !FLAGS,
            old & !(FAIL_MASK << FAIL_SHIFT) & !FLAGS,
            "the breaker word changed state under the lock"
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::breaker::tests::incident_one;
    use crate::breaker::Outcome;

    #[test]
    fn binding_checks_follow_the_layout() {
        use crate::breaker::{fast_admit, fast_success, FAST_PATH_COUNTING};
        let (b, clock) = incident_one();
        let word = || b.fast_path_word().load(std::sync::atomic::Ordering::Acquire);
        assert_eq!(word(), 0, "closed, episode 0, no flags, no failures");
        assert_eq!(fast_admit(word()), Some(0));
        assert!(fast_success(word(), 0));
        let p = b.allow().unwrap();
        b.record(p, Outcome::Failure).unwrap();
        assert_eq!(word(), 1 << 5, "one failure in bits 5..32");
        assert_eq!(fast_admit(word()), Some(0), "pending failures still admit");
        assert!(!fast_success(word(), 0), "but a success must reach the library");
        for _ in 0..4 {
            let p = b.allow().unwrap();
            b.record(p, Outcome::Failure).unwrap();
        }
        assert_eq!(word(), (1 << 32) | 1, "open in episode 1");
        assert_eq!(fast_admit(word()), None);
        assert!(!fast_success(word(), 0));
        b.metrics(&mut Vec::new());
        assert_eq!(word(), (1 << 32) | 1 | FAST_PATH_COUNTING);
        b.reset();
        assert_eq!(word(), (2 << 32) | FAST_PATH_COUNTING, "reset keeps the flag");
        assert_eq!(fast_admit(word()), None, "counting: every admission is counted");
        let _ = clock;
    }

    #[test]
    fn timed_policy_sets_its_flag() {
        use crate::breaker::{fast_admit, fast_success, Breaker, BreakerConfig, FAST_PATH_TIMED};
        use crate::{ManualClock, TripPolicy};
        use std::time::Duration;
        let b = Breaker::new(
            BreakerConfig {
                trip: TripPolicy::FailuresInWindow {
                    threshold: 3,
                    window: Duration::from_secs(10),
                },
                ..BreakerConfig::default()
            },
            std::sync::Arc::new(ManualClock::new()),
        )
        .unwrap();
        let w = b.fast_path_word().load(std::sync::atomic::Ordering::Acquire);
        assert_eq!(w, FAST_PATH_TIMED);
        assert_eq!(fast_admit(w), Some(0), "admission needs no clock");
        assert!(!fast_success(w, 0), "an outcome does");
    }

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
