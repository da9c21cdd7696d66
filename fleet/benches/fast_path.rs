//! The closed fast path (`allow` + recording a success) with a fleet attached next to without
//! (`cargo bench -p holdoff-fleet`): the fleet must cost nothing there. "redis" runs the real
//! background threads against a redis-server this bench starts on a unix socket; "memory" is
//! attached to the in-process store with no thread.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use holdoff::fleet::FleetConfig;
use holdoff::{Breaker, BreakerConfig, Outcome, SystemClock};
use holdoff_fleet::testing::RedisServer;

fn breaker() -> Arc<Breaker> {
    Arc::new(Breaker::new(BreakerConfig::default(), SystemClock::shared()).unwrap())
}

fn pair(b: &Breaker) {
    let p = b.allow().unwrap();
    b.record(black_box(p), Outcome::Success).unwrap();
}

fn closed(c: &mut Criterion) {
    let server = RedisServer::unix().expect("redis-server on PATH");
    let mut g = c.benchmark_group("fleet_closed_allow_record");

    let local = breaker();
    g.bench_function("no_fleet", |bench| bench.iter(|| pair(&local)));

    let memory = breaker();
    let memory_fleet = holdoff_fleet::attach(&memory, &FleetConfig::new("memory://bench", "bench")).unwrap();
    g.bench_function("fleet_memory", |bench| bench.iter(|| pair(&memory)));

    let redis = breaker();
    let redis_fleet = holdoff_fleet::attach(&redis, &FleetConfig::new(server.url(), "bench")).unwrap();
    g.bench_function("fleet_redis", |bench| bench.iter(|| pair(&redis)));
    assert!(redis_fleet.is_attached(), "the fleet stayed attached throughout");

    g.finish();
    drop((memory_fleet, redis_fleet));
}

criterion_group!(benches, closed);
criterion_main!(benches);
