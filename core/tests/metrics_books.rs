//! Threads mixing successes recorded on the lock-free closed path with failures recorded under
//! the lock, on one breaker whose metrics are counting, on the manual clock: every admission,
//! refusal, outcome, stale answer and trip must be counted exactly once, and the metric model
//! must agree with the breaker's own snapshot and with what the threads saw.

use std::sync::Arc;
use std::time::Duration;

use holdoff::metrics::Sample;
use holdoff::{Backoff, Breaker, BreakerConfig, Effect, ManualClock, Outcome, TripPolicy};

const THREADS: u64 = 4;
const CALLS: u64 = if cfg!(miri) { 300 } else { 20_000 };

/// What one thread saw: admissions, refusals, successes and failures recorded, stale answers.
#[derive(Default, Clone, Copy)]
struct Seen {
    admitted: u64,
    refused: u64,
    successes: u64,
    failures: u64,
    stale: u64,
}

fn value(samples: &[Sample], series: &str) -> f64 {
    samples
        .iter()
        .find(|s| s.series(None) == series)
        .unwrap_or_else(|| panic!("no series {series}"))
        .value
}

#[test]
fn fast_successes_and_locked_failures_are_each_counted_once() {
    let clock = ManualClock::new();
    let cfg = BreakerConfig {
        trip: TripPolicy::ConsecutiveFailures { threshold: 3 },
        open_interval: Backoff::constant(Duration::from_millis(5)),
        ..BreakerConfig::default()
    };
    let breaker = Arc::new(Breaker::new(cfg, Arc::new(clock.clone())).unwrap());
    // The first read starts counting, before any call.
    let mut out = Vec::new();
    breaker.metrics(&mut out);
    assert_eq!(value(&out, "holdoff.breaker.admitted"), 0.0);

    let threads: Vec<_> = (0..THREADS)
        .map(|id| {
            let (b, clock) = (Arc::clone(&breaker), clock.clone());
            std::thread::spawn(move || {
                let mut seen = Seen::default();
                for i in 0..CALLS {
                    if id == 0 && i % 16 == 0 {
                        clock.advance(Duration::from_millis(1));
                    }
                    let Ok(permit) = b.allow() else {
                        seen.refused += 1;
                        continue;
                    };
                    seen.admitted += 1;
                    // Bursts of failures (8 of every 64 calls of a thread) among successes.
                    let outcome = if (i + id * 5) % 64 < 8 {
                        seen.failures += 1;
                        Outcome::Failure
                    } else {
                        seen.successes += 1;
                        Outcome::Success
                    };
                    if b.record(permit, outcome).unwrap() == Effect::Stale {
                        seen.stale += 1;
                    }
                }
                seen
            })
        })
        .collect();
    let total = threads
        .into_iter()
        .map(|t| t.join().unwrap())
        .fold(Seen::default(), |a, s| Seen {
            admitted: a.admitted + s.admitted,
            refused: a.refused + s.refused,
            successes: a.successes + s.successes,
            failures: a.failures + s.failures,
            stale: a.stale + s.stale,
        });
    assert_eq!(total.admitted + total.refused, THREADS * CALLS);

    out.clear();
    breaker.metrics(&mut out);
    let snap = breaker.snapshot();
    assert!(snap.opens > 0, "the failures tripped the breaker at least once");
    assert!(total.refused > 0, "and it refused calls while open");
    assert_eq!(value(&out, "holdoff.breaker.admitted"), total.admitted as f64);
    assert_eq!(value(&out, "holdoff.breaker.refused"), total.refused as f64);
    assert_eq!(snap.refusals, total.refused);
    assert_eq!(
        value(&out, "holdoff.breaker.outcomes{outcome=success}"),
        total.successes as f64
    );
    assert_eq!(
        value(&out, "holdoff.breaker.outcomes{outcome=failure}"),
        total.failures as f64
    );
    assert_eq!(value(&out, "holdoff.breaker.stale_answers"), total.stale as f64);
    assert_eq!(snap.stale_answers, total.stale);
    assert_eq!(
        value(&out, "holdoff.breaker.transitions{reason=tripped}"),
        snap.opens as f64,
        "every trip counted once"
    );
    assert_eq!(value(&out, "holdoff.breaker.probes"), snap.probes as f64);
}
