//! Hot-path benchmarks (`cargo bench -p holdoff`): the costs a caller pays on every call.
//! Figures are recorded in the README.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use criterion::{criterion_group, criterion_main, Criterion};
use holdoff::{
    parse_retry_after, Breaker, BreakerConfig, BudgetConfig, Outcome, RetryBudget, RetryState, SystemClock,
    TripPolicy,
};

fn breaker(trip: TripPolicy) -> Arc<Breaker> {
    Arc::new(
        Breaker::new(
            BreakerConfig {
                trip,
                ..BreakerConfig::default()
            },
            SystemClock::shared(),
        )
        .unwrap(),
    )
}

fn pair(b: &Breaker) {
    let p = b.allow().unwrap();
    b.record(black_box(p), Outcome::Success).unwrap();
}

fn closed(c: &mut Criterion) {
    let mut g = c.benchmark_group("closed_allow_record");
    let policies = [
        ("consecutive", TripPolicy::ConsecutiveFailures { threshold: 5 }),
        (
            "window",
            TripPolicy::FailuresInWindow {
                threshold: 5,
                window: Duration::from_secs(10),
            },
        ),
        (
            "rate",
            TripPolicy::FailureRate {
                threshold: 0.5,
                min_calls: 20,
                window: Duration::from_secs(10),
                buckets: 10,
            },
        ),
    ];
    for (name, trip) in policies {
        let b = breaker(trip);
        g.bench_function(format!("{name}/1_thread"), |bench| bench.iter(|| pair(&b)));
        // The pair's cost on one thread while a second thread does the same on the same breaker.
        g.bench_function(format!("{name}/2_threads"), |bench| {
            bench.iter_custom(|iters| {
                let stop = Arc::new(AtomicBool::new(false));
                let (b2, stop2) = (Arc::clone(&b), Arc::clone(&stop));
                let other = std::thread::spawn(move || {
                    while !stop2.load(Ordering::Relaxed) {
                        for _ in 0..64 {
                            pair(&b2);
                        }
                    }
                });
                let start = std::time::Instant::now();
                for _ in 0..iters {
                    pair(&b);
                }
                let elapsed = start.elapsed();
                stop.store(true, Ordering::Relaxed);
                other.join().unwrap();
                elapsed
            })
        });
    }
    g.finish();
}

fn open(c: &mut Criterion) {
    let b = breaker(TripPolicy::ConsecutiveFailures { threshold: 1 });
    let p = b.allow().unwrap();
    b.record(p, Outcome::Failure).unwrap();
    c.bench_function("open_refusal", |bench| {
        bench.iter(|| black_box(b.allow()).unwrap_err())
    });
}

fn budget(c: &mut Criterion) {
    let budget = RetryBudget::new(BudgetConfig::default(), SystemClock::shared()).unwrap();
    c.bench_function("budget_decide_429_retry_after", |bench| {
        bench.iter(|| {
            let mut call = RetryState::new();
            black_box(budget.decide(
                &mut call,
                Outcome::RetryLater(Duration::from_secs(black_box(120))),
            ))
        })
    });
}

fn retry_after(c: &mut Criterion) {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_559_559_600);
    c.bench_function("parse_retry_after/delta_seconds", |bench| {
        bench.iter(|| parse_retry_after(black_box("120"), now))
    });
    c.bench_function("parse_retry_after/imf_fixdate", |bench| {
        bench.iter(|| parse_retry_after(black_box("Mon, 03 Jun 2019 11:30:12 GMT"), now))
    });
}

criterion_group!(benches, closed, open, budget, retry_after);
criterion_main!(benches);
