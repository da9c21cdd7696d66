//! Threads sharing one breaker and one retry quota against a scripted flaky upstream, on the
//! manual clock. Bounded in calls, not in time; the counters must add up exactly.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use holdoff::{
    Backoff, Breaker, BreakerConfig, Effect, ManualClock, Outcome, QuotaConfig, RetryQuota, State, TripPolicy,
};

const THREADS: u64 = 4;
// Miri interprets every atomic and checks it for data races: a few hundred calls a thread
// cover every path there in about a minute.
const CALLS: u64 = if cfg!(miri) { 300 } else { 20_000 };

#[test]
fn shared_breaker_and_quota_balance() {
    let clock = ManualClock::new();
    let cfg = BreakerConfig {
        trip: TripPolicy::ConsecutiveFailures { threshold: 3 },
        open_interval: Backoff::constant(Duration::from_millis(5)),
        recoveries: 2,
        max_probes_in_flight: 2,
        ..BreakerConfig::default()
    };
    let breaker = Arc::new(Breaker::new(cfg, Arc::new(clock.clone())).unwrap());
    let quota = Arc::new(
        RetryQuota::new(QuotaConfig {
            capacity: 1_000,
            ..QuotaConfig::default()
        })
        .unwrap(),
    );
    let admitted = Arc::new(AtomicU64::new(0));
    let refused = Arc::new(AtomicU64::new(0));
    let recorded = Arc::new(AtomicU64::new(0));
    let cancelled = Arc::new(AtomicU64::new(0));
    let spent = Arc::new(AtomicU64::new(0));
    let refunded = Arc::new(AtomicU64::new(0));

    let threads: Vec<_> = (0..THREADS)
        .map(|id| {
            let (b, q, clock) = (Arc::clone(&breaker), Arc::clone(&quota), clock.clone());
            let (admitted, refused, recorded, cancelled) = (
                Arc::clone(&admitted),
                Arc::clone(&refused),
                Arc::clone(&recorded),
                Arc::clone(&cancelled),
            );
            let (spent, refunded) = (Arc::clone(&spent), Arc::clone(&refunded));
            std::thread::spawn(move || {
                for i in 0..CALLS {
                    if id == 0 && i % 16 == 0 {
                        clock.advance(Duration::from_millis(1));
                    }
                    // The upstream fails in bursts: calls 0..40 of every 100 fail.
                    let n = i + id * 7;
                    let outcome = match n % 100 {
                        0..=39 => Outcome::Failure,
                        40..=44 => Outcome::Cancelled,
                        _ => Outcome::Success,
                    };
                    match b.allow() {
                        Ok(p) => {
                            admitted.fetch_add(1, Ordering::Relaxed);
                            let effect = b.record(p, outcome).unwrap();
                            if outcome == Outcome::Cancelled {
                                assert_eq!(effect, Effect::Ignored);
                                cancelled.fetch_add(1, Ordering::Relaxed);
                            } else {
                                recorded.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        Err(r) => {
                            assert!(r.retry_after.unwrap() <= Duration::from_millis(5));
                            refused.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    if outcome == Outcome::Failure {
                        if let Ok(lease) = q.acquire(n % 3 == 0) {
                            spent.fetch_add(lease.cost(), Ordering::Relaxed);
                            if n % 2 == 0 {
                                refunded.fetch_add(lease.cost(), Ordering::Relaxed);
                                q.on_success(Some(lease)).unwrap();
                            }
                        }
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let (admitted, refused) = (admitted.load(Ordering::Relaxed), refused.load(Ordering::Relaxed));
    assert_eq!(admitted + refused, THREADS * CALLS);
    assert_eq!(
        admitted,
        recorded.load(Ordering::Relaxed) + cancelled.load(Ordering::Relaxed)
    );
    let snap = breaker.snapshot();
    assert_eq!(snap.refusals, refused);
    assert!(
        snap.opens > 0 && snap.closes > 0,
        "the flaky upstream should open and close it: {snap:?}"
    );
    assert!(snap.probes_in_flight <= 2);
    // Tokens: what is left is the capacity minus what was spent and not refunded.
    assert_eq!(
        quota.available(),
        1_000 - (spent.load(Ordering::Relaxed) - refunded.load(Ordering::Relaxed))
    );
    // Never wedged: once the upstream is healthy, it closes within `recoveries` intervals.
    for _ in 0..4 {
        clock.advance(Duration::from_millis(5));
        if let Ok(p) = breaker.allow() {
            breaker.record(p, Outcome::Success).unwrap();
        }
    }
    assert_eq!(breaker.snapshot().state, State::Closed);
}

#[test]
fn breakers_built_on_many_threads_share_equal_configurations_and_nothing_else() {
    const EACH: u64 = if cfg!(miri) { 50 } else { 5_000 };
    let clock: Arc<dyn holdoff::Clock> = Arc::new(ManualClock::new());
    let common = BreakerConfig {
        trip: TripPolicy::ConsecutiveFailures { threshold: 2 },
        seed: 0x5eed_57e5,
        ..BreakerConfig::default()
    };
    let kept: Vec<Breaker> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (clock, common) = (&clock, &common);
                s.spawn(move || {
                    let mut kept = Vec::new();
                    for i in 0..EACH {
                        kept.push(Breaker::new(common.clone(), Arc::clone(clock)).unwrap());
                        // A configuration of its own, made and dropped while the others build.
                        let own = BreakerConfig {
                            seed: (t << 32) | i,
                            ..common.clone()
                        };
                        let b = Breaker::new(own, Arc::clone(clock)).unwrap();
                        assert_eq!(b.config().seed, (t << 32) | i);
                    }
                    kept
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().unwrap()).collect()
    });
    assert_eq!(kept.len() as u64, THREADS * EACH);
    let first = kept[0].config();
    assert!(
        kept.iter().all(|b| std::ptr::eq(b.config(), first)),
        "one copy for all"
    );
    assert_eq!(*first, common);
    for _ in 0..2 {
        let p = kept[0].allow().unwrap();
        kept[0].record(p, Outcome::Failure).unwrap();
    }
    assert_eq!(kept[0].snapshot().state, State::Open);
    assert!(kept[1..].iter().all(|b| b.snapshot().state == State::Closed));
}
