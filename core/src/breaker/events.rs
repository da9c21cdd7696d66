//! State changes: the one way a breaker changes state (a `Transition` applied under the lock,
//! which writes the state word and records the change), the queue that bindings without
//! callbacks drain, and the listener, called only after the lock is released so it may call back
//! into the breaker.

use std::sync::Arc;
use std::time::Duration;

use super::refusal::Locked;
use super::word::word_episode;
use super::{Breaker, Inner, Reason, State};
use crate::clock::Instant;

/// How many state changes a breaker keeps for [`Breaker::drain_events`] before dropping the
/// oldest.
pub const EVENT_QUEUE_CAPACITY: usize = 1024;

/// One state change, with the time of the reading that caused it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateChange {
    /// When it happened on the breaker's clock.
    pub at: Instant,
    /// State before.
    pub from: State,
    /// State after.
    pub to: State,
    /// The episode number after the change (0 before the first trip).
    pub episode: u32,
    /// Why.
    pub reason: Reason,
    /// For [`Reason::RetryLater`]: the delay the provider asked for, before the guard.
    pub requested_delay: Option<Duration>,
    /// For openings: how long until the first probe may be admitted.
    pub open_for: Option<Duration>,
}

/// Callback for state changes. Called after the breaker's lock is released, so it may call back
/// into the breaker.
pub type Listener = Arc<dyn Fn(&StateChange) + Send + Sync>;

/// A change of state decided under the lock, as `Breaker::apply` takes it. The failure count of
/// the new word is always zero: every change of state starts counting afresh.
pub(super) struct Transition {
    /// The word the change was decided on, read under the lock.
    pub(super) from: u64,
    /// The state after.
    pub(super) to: State,
    /// Whether the change starts a new episode (a trip, an operator's act), which makes the
    /// answers to every permit admitted before it stale.
    pub(super) new_episode: bool,
    /// The reading that caused it.
    pub(super) at: Instant,
    pub(super) reason: Reason,
    /// For a retry-later: the provider's delay, before the guard.
    pub(super) requested_delay: Option<Duration>,
    /// For an opening: how long until the first probe may be admitted.
    pub(super) open_for: Option<Duration>,
}

impl Transition {
    /// A change to `to` within the current episode, with nothing to report but its reason.
    pub(super) fn new(from: u64, to: State, reason: Reason, at: Instant) -> Transition {
        Transition {
            from,
            to,
            new_episode: false,
            at,
            reason,
            requested_delay: None,
            open_for: None,
        }
    }
}

impl Breaker {
    /// Makes a change of state: writes the word, queues the event (dropping the oldest when the
    /// queue is full) and keeps it for the listener, which `Breaker::finish` calls once the
    /// lock is released.
    pub(super) fn apply(&self, inner: &mut Inner, change: Transition) {
        let episode = if change.new_episode {
            word_episode(change.from).wrapping_add(1)
        } else {
            word_episode(change.from)
        };
        self.seq_begin(inner);
        self.store_state(change.from, change.to, episode);
        inner.open = matches!(change.to, State::Open | State::HalfOpen);
        self.count_transition(change.reason);
        let ev = StateChange {
            at: change.at,
            from: State::from_bits(change.from),
            to: change.to,
            episode,
            reason: change.reason,
            requested_delay: change.requested_delay,
            open_for: change.open_for,
        };
        if inner.events.len() == EVENT_QUEUE_CAPACITY {
            inner.events.pop_front();
            inner.events_dropped += 1;
        }
        inner.events.push_back(ev);
        if inner.listener.is_some() {
            inner.pending.push(ev);
        }
    }

    /// Releases the lock, then hands the changes it made to the listener: a listener that calls
    /// back into the breaker must find it unlocked.
    /// A fleet link's waker, if an op was pushed, is called the same way.
    pub(super) fn finish(&self, mut inner: Locked<'_>) {
        let wake = inner.fleet_take_wake();
        if inner.pending.is_empty() {
            drop(inner);
            if let Some(wake) = wake {
                wake();
            }
            return;
        }
        let pending = std::mem::take(&mut inner.pending);
        let listener = inner.listener.clone();
        drop(inner);
        if let Some(wake) = wake {
            wake();
        }
        if let Some(l) = listener {
            for ev in &pending {
                l(ev);
            }
        }
    }

    /// Takes the state changes queued since the last call (at most [`EVENT_QUEUE_CAPACITY`]; the
    /// snapshot counts any dropped). Bindings that cannot be called back from Rust poll this.
    pub fn drain_events(&self) -> Vec<StateChange> {
        self.peek()
            .map_or_else(Vec::new, |mut i| i.events.drain(..).collect())
    }

    /// Takes at most `max` of the oldest queued state changes, leaving the rest queued: for
    /// bindings that drain into a caller's fixed-size buffer (the C ABI; see
    /// [`crate::interop::drain_events_up_to`]).
    pub(crate) fn drain_events_up_to(&self, max: usize) -> Vec<StateChange> {
        let Some(mut inner) = self.peek() else {
            return Vec::new();
        };
        let n = max.min(inner.events.len());
        inner.events.drain(..n).collect()
    }

    /// Calls `listener` after every state change, outside the breaker's lock (so it may call
    /// back into the breaker without deadlock). `None` removes it. A listener that calls back
    /// should hold a `Weak` of the breaker: an `Arc` would be a reference cycle, never freed.
    pub fn set_listener(&self, listener: Option<Listener>) {
        match self.peek() {
            Some(mut inner) => inner.listener = listener,
            // Removing a listener from a breaker that never had one makes nothing.
            None if listener.is_none() => {}
            // Setting one makes the locked state.
            None => self.lock().listener = listener,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::breaker::tests::{fail, incident_one};
    use crate::sync::Mutex;

    #[test]
    fn undrained_events_are_dropped_and_counted() {
        let (b, _) = incident_one();
        for _ in 0..EVENT_QUEUE_CAPACITY + 4 {
            b.force_open();
        }
        assert_eq!(b.snapshot().events_dropped, 4);
        assert_eq!(b.drain_events_up_to(3).len(), 3);
        assert_eq!(b.drain_events().len(), EVENT_QUEUE_CAPACITY - 3);
    }

    #[test]
    fn listener_may_reenter() {
        let (b, _) = incident_one();
        let b = Arc::new(b);
        let seen = Arc::new(Mutex::new(Vec::new()));
        // A Weak handle: a listener owning an Arc of its own breaker would be a cycle (Miri
        // reports it as a leak).
        let (b2, seen2) = (Arc::downgrade(&b), Arc::clone(&seen));
        b.set_listener(Some(Arc::new(move |ev: &StateChange| {
            let state = b2.upgrade().map(|b| b.snapshot().state);
            seen2.lock().unwrap().push((ev.to, state));
        })));
        fail(&b, 5);
        assert_eq!(*seen.lock().unwrap(), vec![(State::Open, Some(State::Open))]);
    }
}
