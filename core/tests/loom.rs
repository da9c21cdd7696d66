//! Model checks of the breaker's, quota's and budget's concurrent paths with loom: every
//! interleaving (up to `LOOM_MAX_PREEMPTIONS`, 2 by default here) of two or three threads
//! admitting, recording and cancelling around a trip and around a half-open probe.
//!
//! Compiled only under `--cfg loom`, where `core/src/sync.rs` swaps std's atomics and locks for
//! loom's. Run with `core/loom.sh`. Time moves only through the manual clock, advanced by the
//! main thread between phases (or by a model thread where the clock's move is the race).
//!
//! Invariants (`docs/contract.md` §3): never more probes in flight than `max_probes_in_flight`;
//! a trip or a re-open is never lost (state, counters and events agree afterwards); never a
//! close without `recoveries` consecutive current-episode answers; every admitted permit is
//! recorded or cancelled exactly once and the breaker's counters add up to what the threads saw.
#![cfg(loom)]

use std::sync::Arc;
use std::time::Duration;

use loom::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use loom::thread;

use holdoff::interop::{LeaseSlot, PermitSlot, RawPermit};
use holdoff::{
    fast_admit, fast_success, Backoff, Breaker, BreakerConfig, BreakerGroup, BudgetConfig, Decision, Effect,
    Instant, ManualClock, Outcome, Permit, PermitError, QuotaConfig, Reason, RetryBudget, RetryQuota,
    RetryState, State, TripPolicy,
};

const INTERVAL: Duration = Duration::from_secs(60);

/// Runs `f` under every interleaving loom explores, with a preemption bound of 2 unless
/// `LOOM_MAX_PREEMPTIONS` says otherwise (unbounded runs of three threads take minutes).
fn model<F: Fn() + Sync + Send + 'static>(f: F) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(2);
    }
    builder.check(f);
}

fn breaker(threshold: u32, recoveries: u32, max_probes: u32) -> (Arc<Breaker>, ManualClock) {
    let clock = ManualClock::new();
    let cfg = BreakerConfig {
        trip: TripPolicy::ConsecutiveFailures { threshold },
        open_interval: Backoff::constant(INTERVAL),
        recoveries,
        max_probes_in_flight: max_probes,
        ..BreakerConfig::default()
    };
    (
        Arc::new(Breaker::new(cfg, Arc::new(clock.clone())).unwrap()),
        clock,
    )
}

/// Trips a closed breaker with `n` sequential failures (its threshold), in the main thread.
fn trip(b: &Breaker, n: u32) {
    for _ in 0..n {
        let p = b.allow().unwrap();
        assert_eq!(b.record(p, Outcome::Failure), Ok(Effect::Counted));
    }
    assert_eq!(b.snapshot().state, State::Open);
}

fn reasons(b: &Breaker) -> Vec<Reason> {
    b.drain_events().iter().map(|e| e.reason).collect()
}

/// What one thread saw, to check against the breaker's own counters.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Tally {
    admitted: u64,
    probes: u64,
    refused: u64,
    counted: u64,
    stale: u64,
    ignored: u64,
}

impl Tally {
    fn sum(tallies: impl IntoIterator<Item = Tally>) -> Tally {
        tallies.into_iter().fold(Tally::default(), |a, t| Tally {
            admitted: a.admitted + t.admitted,
            probes: a.probes + t.probes,
            refused: a.refused + t.refused,
            counted: a.counted + t.counted,
            stale: a.stale + t.stale,
            ignored: a.ignored + t.ignored,
        })
    }

    fn record(&mut self, b: &Breaker, p: Permit, outcome: Outcome) -> Effect {
        let effect = b.record(p, outcome).unwrap();
        match effect {
            Effect::Counted => self.counted += 1,
            Effect::Stale => self.stale += 1,
            Effect::Ignored => self.ignored += 1,
        }
        effect
    }
}

/// Counts probe permits held by the model's threads. A thread enters after `allow` returned the
/// probe and leaves before recording it, so this interval lies inside the breaker's own
/// in-flight interval: a count above the maximum here is a count above it in the breaker.
#[derive(Clone)]
struct ProbeGate {
    held: Arc<AtomicUsize>,
    max: usize,
}

impl ProbeGate {
    fn new(max: u32) -> Self {
        ProbeGate {
            held: Arc::new(AtomicUsize::new(0)),
            max: max as usize,
        }
    }

    fn enter(&self) {
        let n = self.held.fetch_add(1, Ordering::SeqCst) + 1;
        assert!(n <= self.max, "{n} probes in flight, max {}", self.max);
    }

    fn leave(&self) {
        self.held.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One call: admit, then record `outcome` (or be refused). Returns the effect if admitted.
fn call(b: &Breaker, gate: &ProbeGate, outcome: Outcome, t: &mut Tally) -> Option<Effect> {
    match b.allow() {
        Ok(p) => {
            let probe = p.is_probe();
            if probe {
                t.probes += 1;
                gate.enter();
                gate.leave();
            } else {
                t.admitted += 1;
            }
            let effect = t.record(b, p, outcome);
            if outcome == Outcome::Cancelled {
                assert_eq!(effect, Effect::Ignored);
            }
            Some(effect)
        }
        Err(r) => {
            assert!(
                matches!(r.state, State::Open | State::HalfOpen),
                "refused while {:?}",
                r.state
            );
            assert!(r.retry_after.is_some_and(|d| !d.is_zero()), "refused with {r:?}");
            t.refused += 1;
            None
        }
    }
}

/// Spawns one model thread per outcome, each making one call; returns every thread's tally and
/// effect, in spawn order.
fn race(b: &Arc<Breaker>, gate: &ProbeGate, outcomes: &[Outcome]) -> Vec<(Tally, Option<Effect>)> {
    let handles: Vec<_> = outcomes
        .iter()
        .map(|&o| {
            let (b, gate) = (Arc::clone(b), gate.clone());
            thread::spawn(move || {
                let mut t = Tally::default();
                let e = call(&b, &gate, o, &mut t);
                (t, e)
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

/// A breaker of threshold 2 that `recoveries` answers close and `max_probes` probes may test at
/// once, tripped and brought to the time of its first probe; and a gate `max_probes` wide.
fn half_open(recoveries: u32, max_probes: u32) -> (Arc<Breaker>, ManualClock, ProbeGate) {
    let (b, clock) = breaker(2, recoveries, max_probes);
    trip(&b, 2);
    clock.set(Instant::from_millis(60_000)).unwrap();
    (b, clock, ProbeGate::new(max_probes))
}

/// What every caller of a [`race`] did, summed.
fn race_tally(b: &Arc<Breaker>, gate: &ProbeGate, outcomes: &[Outcome]) -> Tally {
    Tally::sum(race(b, gate, outcomes).iter().map(|x| x.0))
}

/// The breaker's counters agree with what the model's threads saw (the main thread's setup only
/// trips, which adds none of these).
fn counters_add_up(b: &Breaker, t: Tally) {
    let s = b.snapshot();
    assert_eq!(s.probes, t.probes, "{s:?} {t:?}");
    assert_eq!(s.refusals, t.refused, "{s:?} {t:?}");
    assert_eq!(s.stale_answers, t.stale, "{s:?} {t:?}");
    // Every permit was recorded or cancelled, so none holds a slot.
    assert_eq!(s.probes_in_flight, 0, "{s:?}");
}

// ---------------------------------------------------------------------------------------------
// Around a trip: the closed fast path (one atomic load to admit, a load or CAS to record a
// success) racing the locked failure path that trips.

/// A failure that completes the threshold races a success that clears the count: either the
/// success came first (closed, one failure counted) or the trip happened and is visible in the
/// state, the counters and the events, with the success counted before it, stale or refused.
#[test]
fn trip_racing_a_success_is_never_lost() {
    model(|| {
        let (b, _clock) = breaker(2, 1, 1);
        let gate = ProbeGate::new(1);
        let p = b.allow().unwrap();
        b.record(p, Outcome::Failure).unwrap();
        let r = race(&b, &gate, &[Outcome::Failure, Outcome::Success]);
        let (fail, ok) = (r[0], r[1]);
        assert_eq!(fail.1, Some(Effect::Counted));
        let s = b.snapshot();
        let events = reasons(&b);
        match s.state {
            State::Closed => {
                // The success cleared the count before the failure counted.
                assert_eq!(
                    (s.opens, s.failures, s.episode),
                    (0, 1, 0),
                    "{s:?} {fail:?} {ok:?}"
                );
                assert_eq!(ok.1, Some(Effect::Counted));
                assert!(events.is_empty(), "{events:?}");
            }
            State::Open => {
                assert_eq!((s.opens, s.episode), (1, 1), "{s:?}");
                assert_eq!(events, vec![Reason::Tripped]);
                assert!(
                    matches!(ok.1, Some(Effect::Counted | Effect::Stale) | None),
                    "{ok:?}"
                );
            }
            other => panic!("unexpected state {other:?}"),
        }
        counters_add_up(&b, Tally::sum([fail.0, ok.0]));
    });
}

/// Three failures race against a threshold of two: exactly one trip, exactly two failures
/// counted, the third stale (admitted before the trip) or refused (after it).
#[test]
fn concurrent_failures_trip_exactly_once() {
    model(|| {
        let (b, _clock) = breaker(2, 1, 1);
        let gate = ProbeGate::new(1);
        let t = race_tally(&b, &gate, &[Outcome::Failure; 3]);
        let s = b.snapshot();
        assert_eq!((s.state, s.opens, s.episode), (State::Open, 1, 1), "{s:?}");
        assert_eq!(reasons(&b), vec![Reason::Tripped]);
        assert_eq!(t.counted, 2, "{t:?}");
        assert_eq!(t.stale + t.refused, 1, "{t:?}");
        counters_add_up(&b, t);
    });
}

/// A retry-later racing a failure and a success on the closed path: the breaker ends open with
/// one trip, whichever reason won, and every answer that landed after it is stale.
#[test]
fn retry_later_racing_the_fast_path_opens_once() {
    model(|| {
        let (b, _clock) = breaker(1, 1, 1);
        let gate = ProbeGate::new(1);
        let t = race_tally(
            &b,
            &gate,
            &[Outcome::RetryLater(Duration::from_secs(5)), Outcome::Failure],
        );
        let s = b.snapshot();
        assert_eq!((s.state, s.opens, s.episode), (State::Open, 1, 1), "{s:?}");
        let events = reasons(&b);
        assert!(
            events == vec![Reason::Tripped] || events == vec![Reason::RetryLater],
            "{events:?}"
        );
        // The first to record opened it; the other was stale (admitted before) or refused.
        assert_eq!(t.counted, 1, "{t:?}");
        assert_eq!(t.stale + t.refused, 1, "{t:?}");
        counters_add_up(&b, t);
    });
}

// ---------------------------------------------------------------------------------------------
// Around a half-open probe: every admission while open takes the lock; what matters is that the
// window, the in-flight list and the episode stay consistent whatever the order.

/// Two callers race for the one probe of an interval: exactly one gets it, the other is refused,
/// and one success does not close a breaker that needs two.
#[test]
fn one_probe_per_interval() {
    model(|| {
        let (b, clock, gate) = half_open(2, 1);
        let t = race_tally(&b, &gate, &[Outcome::Success, Outcome::Success]);
        assert_eq!((t.probes, t.refused, t.counted), (1, 1, 1), "{t:?}");
        let s = b.snapshot();
        assert_eq!(
            (s.state, s.recoveries, s.closes),
            (State::HalfOpen, 1, 0),
            "{s:?}"
        );
        assert_eq!(reasons(&b), vec![Reason::Tripped, Reason::ProbeAdmitted]);
        counters_add_up(&b, t);
    });
}

/// Three callers, two probe slots, three answers needed: two probes, one refusal, no close.
#[test]
fn probes_never_exceed_the_maximum() {
    model(|| {
        let (b, clock, gate) = half_open(3, 2);
        let t = race_tally(&b, &gate, &[Outcome::Success; 3]);
        assert_eq!((t.probes, t.refused, t.counted), (2, 1, 2), "{t:?}");
        let s = b.snapshot();
        assert_eq!(
            (s.state, s.recoveries, s.closes),
            (State::HalfOpen, 2, 0),
            "{s:?}"
        );
        counters_add_up(&b, t);
    });
}

/// A cancelled probe frees its slot, but its window stays spent: of two racing callers exactly
/// one is admitted as the probe, whatever the order, and a fresh caller in the same interval is
/// refused; no probe is left in flight after the cancellation.
#[test]
fn cancelled_probe_spends_its_window() {
    model(|| {
        let (b, clock, gate) = half_open(2, 1);
        let t = race_tally(&b, &gate, &[Outcome::Cancelled, Outcome::Success]);
        assert_eq!((t.probes, t.refused), (1, 1), "{t:?}");
        assert_eq!(t.counted + t.ignored, 1, "{t:?}");
        let s = b.snapshot();
        assert_eq!(
            (s.state, s.recoveries, s.closes, s.probes_in_flight),
            (State::HalfOpen, t.counted as u32, 0, 0)
        );
        counters_add_up(&b, t);
        assert!(b.allow().is_err(), "the interval's probe was spent");
    });
}

/// A probe failure racing a sibling probe's success: the failure always re-opens (never a
/// close: two answers are needed and one failed), with a new window, whatever the order, and
/// discards the ramp: the sibling's success counts only if it landed first, and is stale after.
#[test]
fn failure_during_half_open_reopens() {
    model(|| {
        let (b, clock, gate) = half_open(2, 2);
        let r = race(&b, &gate, &[Outcome::Success, Outcome::Failure]);
        let (ok, fail) = (r[0], r[1]);
        // The failing caller always gets a probe: the success cannot close or re-arm the
        // two-probe window on its own.
        assert_eq!((fail.0.probes, fail.1), (1, Some(Effect::Counted)), "{fail:?}");
        let t = Tally::sum([ok.0, fail.0]);
        let s = b.snapshot();
        assert_eq!((s.state, s.closes), (State::Open, 0), "{s:?}");
        // The failure discarded the count, and a sibling answering after it is stale.
        assert_eq!(s.recoveries, 0, "{s:?}");
        assert!(
            matches!(ok.1, None | Some(Effect::Counted) | Some(Effect::Stale)),
            "{ok:?}"
        );
        assert_eq!(
            s.stale_answers,
            u64::from(ok.1 == Some(Effect::Stale)),
            "{s:?} {ok:?}"
        );
        assert_eq!(
            reasons(&b),
            vec![Reason::Tripped, Reason::ProbeAdmitted, Reason::ProbeFailed]
        );
        // The re-open re-armed the window: nobody is admitted before the next interval.
        assert_eq!(s.retry_after, Some(INTERVAL), "{s:?}");
        counters_add_up(&b, t);
    });
}

/// The probe becomes due while a caller asks: it is admitted at the new time or refused with
/// the full wait measured from the old one, never anything in between (one clock reading).
#[test]
fn probe_due_while_the_clock_moves() {
    model(|| {
        let (b, clock) = breaker(1, 1, 1);
        trip(&b, 1);
        let c = clock.clone();
        let mover = thread::spawn(move || {
            c.advance(INTERVAL);
        });
        let b2 = Arc::clone(&b);
        let caller = thread::spawn(move || match b2.allow() {
            Ok(p) => {
                assert!(p.is_probe());
                b2.record(p, Outcome::Success).unwrap()
            }
            Err(r) => {
                assert_eq!(r.retry_after, Some(INTERVAL), "{r:?}");
                Effect::Ignored
            }
        });
        mover.join().unwrap();
        let effect = caller.join().unwrap();
        let s = b.snapshot();
        if effect == Effect::Counted {
            assert_eq!((s.state, s.closes), (State::Closed, 1), "{s:?}");
        } else {
            assert_eq!(
                (s.state, s.refusals, s.probe_ready),
                (State::Open, 1, true),
                "{s:?}"
            );
        }
    });
}

/// A refusal without the lock races the lock holder re-opening on a probe's retry-later (a new
/// window at 150 s). The refusal pairs the state with its own wait, whichever it read: half-open
/// until the window the probe re-armed (60 s), or open until the provider's deadline (90 s); and
/// the published deadline never outlives the window: the next probe goes at exactly 150 s.
#[test]
fn refusal_racing_a_reopen_never_wedges_the_probe() {
    model(|| {
        let (b, clock) = breaker(1, 2, 1);
        trip(&b, 1);
        clock.set(Instant::from_millis(60_000)).unwrap();
        let gate = ProbeGate::new(1);
        let probe = b.allow().unwrap();
        assert!(probe.is_probe());
        gate.enter();
        let b1 = Arc::clone(&b);
        let answer = thread::spawn(move || {
            b1.record(probe, Outcome::RetryLater(Duration::from_secs(90)))
                .unwrap()
        });
        let b2 = Arc::clone(&b);
        let caller = thread::spawn(move || b2.allow().map(|p| p.is_probe()));
        assert_eq!(answer.join().unwrap(), Effect::Counted);
        gate.leave();
        let r = caller.join().unwrap().unwrap_err();
        match r.state {
            State::HalfOpen => assert_eq!(r.retry_after, Some(INTERVAL), "{r:?}"),
            State::Open => assert_eq!(r.retry_after, Some(Duration::from_secs(90)), "{r:?}"),
            other => panic!("refused while {other:?}"),
        }
        assert_eq!(r.episode, 1, "{r:?}");
        clock.set(Instant::from_millis(149_999)).unwrap();
        let r = b.allow().unwrap_err();
        assert_eq!(
            (r.state, r.retry_after),
            (State::Open, Some(Duration::from_millis(1)))
        );
        clock.set(Instant::from_millis(150_000)).unwrap();
        let next = b.allow().expect("the probe of the new window is due");
        assert!(next.is_probe());
        gate.enter();
        let s = b.snapshot();
        assert_eq!((s.probes, s.refusals, s.probes_in_flight), (2, 2, 1), "{s:?}");
        assert_eq!(b.allow().unwrap_err().state, State::HalfOpen);
        gate.leave();
        assert_eq!(b.record(next, Outcome::Cancelled), Ok(Effect::Ignored));
    });
}

/// Two callers at the due time race one lock-free refuser's read of the published deadline
/// against the lock holder admitting probes (two slots): never more than two probes, and every
/// refusal waits the full interval the second admission re-armed.
#[test]
fn refusal_racing_probe_admissions_never_exceeds_the_maximum() {
    model(|| {
        let (b, _clock, gate) = half_open(3, 2);
        let first = b.allow().unwrap();
        assert!(first.is_probe());
        gate.enter();
        let r = race(&b, &gate, &[Outcome::Success, Outcome::Success]);
        let t = Tally::sum(r.iter().map(|x| x.0));
        assert_eq!((t.probes, t.refused), (1, 1), "{t:?}");
        gate.leave();
        assert_eq!(b.record(first, Outcome::Success), Ok(Effect::Counted));
        let s = b.snapshot();
        assert_eq!(
            (s.state, s.recoveries, s.refusals),
            (State::HalfOpen, 2, 1),
            "{s:?}"
        );
        let late = b.allow().unwrap_err();
        assert_eq!(late.retry_after, Some(INTERVAL), "{late:?}");
    });
}

/// Closing needs `recoveries` consecutive current-episode answers, one per interval. In the
/// first interval a probe success races a stale failure (a call admitted before the trip),
/// which discards recovery progress; the second interval's success closes exactly when the
/// first success survived.
#[test]
fn close_needs_the_current_episodes_answers() {
    model(|| {
        let (b, clock) = breaker(2, 2, 1);
        let old = b.allow().unwrap();
        trip(&b, 2);
        clock.set(Instant::from_millis(60_000)).unwrap();
        let gate = ProbeGate::new(1);
        let b1 = Arc::clone(&b);
        let stale = thread::spawn(move || b1.record(old, Outcome::Failure).unwrap());
        let r = race(&b, &gate, &[Outcome::Success]);
        assert_eq!(stale.join().unwrap(), Effect::Stale);
        assert_eq!((r[0].0.probes, r[0].1), (1, Some(Effect::Counted)));
        let first = b.snapshot();
        assert_eq!((first.state, first.closes), (State::HalfOpen, 0), "{first:?}");
        assert!(first.recoveries <= 1, "{first:?}");

        clock.set(Instant::from_millis(120_000)).unwrap();
        let t = race_tally(&b, &gate, &[Outcome::Success, Outcome::Success]);
        // One probe; the other caller is refused, or admitted as a plain call once it closed.
        assert_eq!((t.probes, t.refused + t.admitted), (1, 1), "{t:?}");
        assert_eq!(t.counted, 1 + t.admitted, "{t:?}");
        if t.admitted == 1 {
            assert_eq!(first.recoveries, 1, "admitted closed without a close: {t:?}");
        }
        let s = b.snapshot();
        if first.recoveries == 1 {
            assert_eq!((s.state, s.closes), (State::Closed, 1), "{s:?}");
            assert_eq!(reasons(&b).last(), Some(&Reason::Recovered));
        } else {
            assert_eq!(
                (s.state, s.closes, s.recoveries),
                (State::HalfOpen, 0, 1),
                "{s:?}"
            );
        }
    });
}

/// A shared permit object recorded from two threads: exactly one takes it.
#[test]
fn permit_slot_is_taken_once() {
    model(|| {
        let (b, _clock) = breaker(1, 1, 1);
        let slot = Arc::new(PermitSlot::new(b.allow().unwrap()));
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let (b, slot) = (Arc::clone(&b), Arc::clone(&slot));
                thread::spawn(move || match slot.take(&b) {
                    Ok(p) => {
                        b.record(p, Outcome::Failure).unwrap();
                        true
                    }
                    Err(e) => {
                        assert_eq!(e, PermitError::AlreadyRecorded);
                        false
                    }
                })
            })
            .collect();
        let taken: Vec<bool> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(taken.iter().filter(|&&t| t).count(), 1);
        assert_eq!(b.snapshot().opens, 1);
    });
}

/// Two threads asking a group for the same new key get the same breaker.
#[test]
fn group_creates_one_breaker_per_key() {
    model(|| {
        let group =
            Arc::new(BreakerGroup::new(BreakerConfig::default(), Arc::new(ManualClock::new())).unwrap());
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let g = Arc::clone(&group);
                thread::spawn(move || g.get("api"))
            })
            .collect();
        let got: Vec<Arc<Breaker>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert!(Arc::ptr_eq(&got[0], &got[1]));
        assert_eq!(group.len(), 1);
    });
}

// ---------------------------------------------------------------------------------------------
// Quota and budget.

/// A 10-token quota: a retry costs 5, a retry after a timeout 10, a success refills
/// `success_refill`.
fn quota(success_refill: u64) -> Arc<RetryQuota> {
    let config = QuotaConfig {
        capacity: 10,
        retry_cost: 5,
        timeout_cost: 10,
        success_refill,
    };
    Arc::new(RetryQuota::new(config).unwrap())
}

/// Three retries race for a 10-token bucket (5, 10 after a timeout, 5), each refunding on
/// success: what the threads hold never exceeds the bucket, and it ends full.
#[test]
fn quota_acquire_and_refund_balance() {
    model(|| {
        let q = quota(1);
        let held = Arc::new(AtomicU64::new(0));
        let handles: Vec<_> = [false, true, false]
            .into_iter()
            .map(|after_timeout| {
                let (q, held) = (Arc::clone(&q), Arc::clone(&held));
                thread::spawn(move || match q.acquire(after_timeout) {
                    Ok(lease) => {
                        let cost = lease.cost();
                        let now = held.fetch_add(cost, Ordering::SeqCst) + cost;
                        assert!(now <= 10, "{now} tokens held from a bucket of 10");
                        held.fetch_sub(cost, Ordering::SeqCst);
                        q.on_success(Some(lease)).unwrap();
                        cost
                    }
                    Err(e) => {
                        assert!(e.available < e.cost, "{e:?}");
                        0
                    }
                })
            })
            .collect();
        let spent: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert!(spent >= 5, "the first acquire always succeeds");
        assert_eq!(q.available(), 10);
    });
}

/// Refills racing a lease's refund never overfill the bucket.
#[test]
fn quota_refill_never_overfills() {
    model(|| {
        let q = quota(3);
        let lease = q.acquire(false).unwrap();
        let q1 = Arc::clone(&q);
        let refund = thread::spawn(move || q1.on_success(Some(lease)).unwrap());
        let q2 = Arc::clone(&q);
        let refill = thread::spawn(move || {
            q2.on_success(None).unwrap();
            assert!(q2.available() <= 10);
        });
        refund.join().unwrap();
        refill.join().unwrap();
        assert_eq!(q.available(), 10);
    });
}

/// A lease given back by two threads at once goes back exactly once: one give-back refunds, the
/// other is refused as already recorded, and the bucket ends full, not overfilled.
#[test]
fn lease_slot_is_taken_once() {
    model(|| {
        let q = quota(0);
        let _other = q.acquire(false).unwrap();
        let slot = Arc::new(LeaseSlot::new(q.acquire(false).unwrap()));
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let (q, slot) = (Arc::clone(&q), Arc::clone(&slot));
                thread::spawn(move || slot.take(&q).map(|l| q.on_success(Some(l)).unwrap()).is_ok())
            })
            .collect();
        let oks = handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .filter(|ok| *ok)
            .count();
        assert_eq!(oks, 1);
        assert_eq!(q.available(), 5, "one refund of 5 with the other lease still out");
    });
}

/// The budget's lock-free "no episode" flag: a success racing the start (and the end) of a
/// rate-limit episode never leaves an episode that a later success cannot end.
#[test]
fn budget_episode_flag_follows_the_episode() {
    model(|| {
        let clock = ManualClock::new();
        let budget = Arc::new(RetryBudget::new(BudgetConfig::default(), Arc::new(clock)).unwrap());
        let outcomes = [
            Outcome::RetryLater(Duration::from_secs(1)),
            Outcome::Success,
            Outcome::Failure,
        ];
        let handles: Vec<_> = outcomes
            .into_iter()
            .map(|o| {
                let budget = Arc::clone(&budget);
                thread::spawn(move || budget.decide(&mut RetryState::new(), o))
            })
            .collect();
        let decisions: Vec<Decision> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(decisions[1], Decision::Done);
        assert!(
            matches!(decisions[0], Decision::Retry { .. }),
            "{:?}",
            decisions[0]
        );
        assert_eq!(
            budget.decide(&mut RetryState::new(), Outcome::Success),
            Decision::Done
        );
        assert_eq!(budget.episode_start(), None);
    });
}

/// What a binding's call on the fast-path word came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    /// Refused by the library (the word did not admit).
    Refused,
    /// Admitted and recorded on the word alone.
    Word,
    /// Recorded through the library, with this effect.
    Library(Effect),
}

/// A binding's admission and success on the fast-path word alone (docs/ffi.md "The fast-path
/// word"), falling back to the library as a binding does.
fn binding_call(b: &Breaker, outcome: Outcome) -> Via {
    let w = b.fast_path_word().load(Ordering::Acquire);
    let raw = match fast_admit(w) {
        Some(episode) => RawPermit {
            breaker: b.id(),
            episode,
            probe: 0,
        },
        None => match b.allow() {
            Ok(p) => RawPermit::from(p),
            Err(_) => return Via::Refused,
        },
    };
    if outcome == Outcome::Success
        && raw.probe == 0
        && fast_success(b.fast_path_word().load(Ordering::Acquire), raw.episode)
    {
        return Via::Word;
    }
    Via::Library(b.record(Permit::from(raw), outcome).unwrap())
}

#[test]
fn binding_fast_path_agrees_with_the_library() {
    // One failure pending of a threshold of 2: a binding's success (admitted on the word, then
    // recorded through the library since failures are pending) races a library failure. Either
    // the success forgets the pending failure first (closed, one failure) or the failure trips
    // first and the success is stale or refused: a failure is never lost and a stale success
    // never counted.
    model(|| {
        let (b, _clock) = breaker(2, 1, 1);
        let p = b.allow().unwrap();
        assert_eq!(b.record(p, Outcome::Failure), Ok(Effect::Counted));
        let b1 = b.clone();
        let fast = thread::spawn(move || binding_call(&b1, Outcome::Success));
        let b2 = b.clone();
        let slow = thread::spawn(move || {
            let p = b2.allow().unwrap();
            b2.record(p, Outcome::Failure).unwrap()
        });
        let success = fast.join().unwrap();
        assert_eq!(slow.join().unwrap(), Effect::Counted);
        let snap = b.snapshot();
        match success {
            Via::Word => panic!("a failure was pending: the word cannot vouch for a success"),
            Via::Library(Effect::Counted) if snap.state == State::Closed => assert_eq!(snap.failures, 1),
            Via::Library(Effect::Stale) | Via::Refused => {
                assert_eq!(snap.state, State::Open);
                assert_eq!(reasons(&b), vec![Reason::Tripped]);
            }
            other => panic!("unexpected {other:?}"),
        }
    });
}

#[test]
fn binding_fast_success_never_hides_a_trip() {
    // A clean closed breaker: a binding's success on the word races a library failure that
    // trips it (threshold 1). The trip always stands, and a success that reached the library
    // after the failure's count is stale, never counted beside a trip it did not prevent.
    model(|| {
        let (b, _clock) = breaker(1, 1, 1);
        let b1 = b.clone();
        let fast = thread::spawn(move || binding_call(&b1, Outcome::Success));
        let b2 = b.clone();
        let slow = thread::spawn(move || {
            let p = b2.allow().unwrap();
            b2.record(p, Outcome::Failure).unwrap()
        });
        let success = fast.join().unwrap();
        assert_eq!(slow.join().unwrap(), Effect::Counted);
        assert_eq!(b.snapshot().state, State::Open);
        assert_eq!(reasons(&b), vec![Reason::Tripped]);
        assert!(
            matches!(success, Via::Word | Via::Refused | Via::Library(Effect::Stale)),
            "{success:?}"
        );
    });
}

/// A binding's admission attempt on the refusal block (docs/ffi.md "The refusal block") at the
/// reading `now_ns`, falling back to the library as a binding does: the permit, or the
/// refusal's state and wait.
fn binding_allow(b: &Breaker, now_ns: u64) -> Result<Permit, (State, Option<Duration>)> {
    match holdoff::breaker::refuse_on_block(b.fast_path_word(), &b.refusal_cells(), || now_ns) {
        Some(r) => Err((r.state, r.retry_after)),
        None => b.allow().map_err(|r| (r.state, r.retry_after)),
    }
}

/// At the due time a binding refusing on the block races the library admitting the probe
/// (which re-arms the window and publishes a new deadline): exactly one probe, and the other
/// call is refused half-open with the full interval, counted once, whichever path refused it.
#[test]
fn binding_refusal_agrees_with_the_library() {
    model(|| {
        let (b, clock) = breaker(1, 1, 1);
        trip(&b, 1);
        clock.set(Instant::from_millis(60_000)).unwrap();
        let b1 = Arc::clone(&b);
        let binding = thread::spawn(move || binding_allow(&b1, 60_000_000_000));
        let b2 = Arc::clone(&b);
        let library = thread::spawn(move || b2.allow().map_err(|r| (r.state, r.retry_after)));
        let (probe, refusal) = match (binding.join().unwrap(), library.join().unwrap()) {
            (Ok(p), Err(r)) | (Err(r), Ok(p)) => (p, r),
            (x, y) => panic!("one probe and one refusal, got {:?} and {:?}", x.err(), y.err()),
        };
        assert!(probe.is_probe());
        assert_eq!(refusal, (State::HalfOpen, Some(INTERVAL)));
        assert_eq!(b.snapshot().refusals, 1);
        assert_eq!(b.record(probe, Outcome::Success), Ok(Effect::Counted));
        assert_eq!(b.snapshot().state, State::Closed);
    });
}
