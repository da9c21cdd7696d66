//! A snapshot racing the change that first makes a breaker's locked state. Its own test binary:
//! run under Miri with the stress tests, its threads would shift the interpreter's schedule for
//! the ones after it (`cargo +nightly miri test -p holdoff --test snapshot_race` runs it alone).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use holdoff::{Backoff, Breaker, BreakerConfig, Effect, ManualClock, Outcome, State, TripPolicy};

#[test]
fn a_snapshot_racing_the_first_locked_change_sees_one_consistent_state() {
    // A breaker that has only been closed has no locked state, and a snapshot of it reads the
    // word with the initial state instead of making one. Raced against the failure that makes
    // the state and trips the breaker, a snapshot must show the breaker before the trip or after
    // it, never the open word with the initial state's counts.
    const ROUNDS: usize = if cfg!(miri) { 20 } else { 2_000 };
    let clock = ManualClock::new();
    let cfg = BreakerConfig {
        trip: TripPolicy::ConsecutiveFailures { threshold: 1 },
        open_interval: Backoff::constant(Duration::from_secs(60)),
        ..BreakerConfig::default()
    };
    let (mut before, mut after) = (0, 0);
    for _ in 0..ROUNDS {
        let b = Breaker::new(cfg.clone(), Arc::new(clock.clone())).unwrap();
        let started = AtomicBool::new(false);
        let seen = std::thread::scope(|s| {
            let reader = s.spawn(|| {
                let mut seen = Vec::new();
                loop {
                    let snap = b.snapshot();
                    seen.push(snap);
                    started.store(true, Ordering::Release);
                    if snap.state != State::Closed {
                        return seen;
                    }
                }
            });
            // The failure goes once the reader is snapshotting, so that the two overlap.
            while !started.load(Ordering::Acquire) {
                std::hint::spin_loop();
            }
            let p = b.allow().unwrap();
            assert_eq!(b.record(p, Outcome::Failure).unwrap(), Effect::Counted);
            reader.join().unwrap()
        });
        for snap in seen {
            match snap.state {
                State::Closed => {
                    assert_eq!((snap.episode, snap.failures, snap.opens), (0, 0, 0));
                    before += 1;
                }
                State::Open => {
                    assert_eq!((snap.episode, snap.opens), (1, 1), "{snap:?}");
                    assert_eq!(snap.retry_after, Some(Duration::from_secs(60)), "{snap:?}");
                    after += 1;
                }
                other => panic!("unexpected {other:?}"),
            }
        }
    }
    assert_eq!(after, ROUNDS, "every reader ends on the open breaker");
    assert!(before >= ROUNDS, "every reader saw the breaker before its trip");
}

/// A manual clock that runs a hook, once, inside the next reading: a deterministic stand-in for
/// another thread acting between two of a reader's steps.
struct HookClock {
    inner: ManualClock,
    hook: std::sync::Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl std::fmt::Debug for HookClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookClock").field("inner", &self.inner).finish()
    }
}

impl holdoff::Clock for HookClock {
    fn now(&self) -> holdoff::Instant {
        let hook = self.hook.lock().unwrap().take();
        if let Some(hook) = hook {
            hook();
        }
        self.inner.now()
    }

    fn wall_at(&self, t: holdoff::Instant) -> std::time::SystemTime {
        self.inner.wall_at(t)
    }
}

#[test]
fn a_snapshot_of_an_idle_breaker_never_shows_refusals_of_a_later_trip() {
    // The snapshot of a breaker that has only been closed reads the word, finds no locked state
    // and reads the clock; another caller trips the breaker and is refused right then (the hook).
    // The snapshot shows the breaker before the trip: closed, episode 0, never opened, and so
    // never refused; the refusal belongs to the open breaker a later snapshot shows.
    let clock = Arc::new(HookClock {
        inner: ManualClock::new(),
        hook: std::sync::Mutex::new(None),
    });
    let cfg = BreakerConfig {
        trip: TripPolicy::ConsecutiveFailures { threshold: 1 },
        open_interval: Backoff::constant(Duration::from_secs(60)),
        ..BreakerConfig::default()
    };
    let b = Arc::new(Breaker::new(cfg, clock.clone()).unwrap());
    let other = Arc::clone(&b);
    *clock.hook.lock().unwrap() = Some(Box::new(move || {
        let p = other.allow().unwrap();
        assert_eq!(other.record(p, Outcome::Failure).unwrap(), Effect::Counted);
        let r = other.allow().unwrap_err();
        assert_eq!(r.state, State::Open);
    }));
    let snap = b.snapshot();
    assert_eq!(
        (snap.state, snap.episode, snap.opens, snap.refusals),
        (State::Closed, 0, 0, 0),
        "{snap:?}"
    );
    let snap = b.snapshot();
    assert_eq!(
        (snap.state, snap.episode, snap.opens, snap.refusals),
        (State::Open, 1, 1, 1),
        "{snap:?}"
    );
}
