//! Attached breakers on the real clock against a real redis-server: staleness, Redis killed and
//! restarted, a corrupt record, skewed clocks. Bounds have wide margins (a shared 2-core machine);
//! the figures are printed (`cargo test -p holdoff-fleet --test live -- --nocapture`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant as StdInstant};

use holdoff::fleet::FleetConfig;
use std::time::SystemTime;

use holdoff::{Backoff, Breaker, BreakerConfig, Clock, Instant, Outcome, State, SystemClock};
use holdoff_fleet::testing::RedisServer;
use holdoff_fleet::Fleet;

fn config(url: &str, key: &str) -> FleetConfig {
    let mut c = FleetConfig::new(url, key);
    c.fallback_after = Duration::from_millis(300);
    c.timeout = Duration::from_millis(100);
    c
}

fn breaker(clock: Arc<dyn Clock>, interval: Duration) -> Arc<Breaker> {
    let config = BreakerConfig {
        open_interval: Backoff::constant(interval),
        ..BreakerConfig::default()
    };
    Arc::new(Breaker::new(config, clock).unwrap())
}

/// Five consecutive failures: the default trip policy.
fn trip(b: &Breaker) {
    for _ in 0..5 {
        if let Ok(p) = b.allow() {
            b.record(p, Outcome::Failure).unwrap();
        }
    }
}

fn fleet_of(n: usize, url: &str, key: &str, interval: Duration) -> Vec<(Arc<Breaker>, Fleet)> {
    (0..n)
        .map(|_| {
            let b = breaker(SystemClock::shared(), interval);
            let f = holdoff_fleet::attach(&b, &config(url, key)).unwrap();
            (b, f)
        })
        .collect()
}

fn wait_for(within: Duration, what: &str, mut done: impl FnMut() -> bool) -> Duration {
    let start = StdInstant::now();
    while !done() {
        assert!(start.elapsed() < within, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(2));
    }
    start.elapsed()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

#[test]
fn a_trip_reaches_every_worker_within_the_staleness_bound() {
    let server = RedisServer::unix().unwrap();
    let (rounds, n) = (20, 8);
    let mut samples = Vec::new();
    for round in 0..rounds {
        let workers = fleet_of(
            n,
            &server.url(),
            &format!("stale-{round}"),
            Duration::from_secs(30),
        );
        all_attached(&workers, true);
        let start = Barrier::new(n);
        std::thread::scope(|s| {
            let observers: Vec<_> = workers[1..]
                .iter()
                .map(|(b, _)| {
                    let start = &start;
                    s.spawn(move || {
                        start.wait();
                        // Polls like a caller would; sleeps so that 7 pollers leave the 2 cores
                        // to Redis and the sync threads.
                        loop {
                            match b.allow() {
                                Ok(p) => {
                                    b.record(p, Outcome::Success).unwrap();
                                }
                                Err(_) => return StdInstant::now(),
                            }
                            std::thread::sleep(Duration::from_micros(200));
                        }
                    })
                })
                .collect();
            start.wait();
            std::thread::sleep(Duration::from_millis(5));
            let tripped = StdInstant::now();
            trip(&workers[0].0);
            for h in observers {
                samples.push(h.join().unwrap().saturating_duration_since(tripped));
            }
        });
        for (b, _) in &workers[1..] {
            assert_eq!(b.snapshot().state, State::Open, "round {round}");
        }
    }
    samples.sort();
    let (p50, p99, max) = (
        percentile(&samples, 0.5),
        percentile(&samples, 0.99),
        *samples.last().unwrap(),
    );
    println!(
        "staleness over {} samples ({rounds} trips x {} workers): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        samples.len(),
        n - 1,
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        max.as_secs_f64() * 1e3
    );
    assert!(p99 < Duration::from_millis(100), "p99 {p99:?}");
    // Pub/sub carries it, not the 50 ms refresh (which alone would give a median near 25 ms).
    assert!(p50 < Duration::from_millis(20), "p50 {p50:?}");
}

/// Callers on every worker (a call every 0.5 ms) while `body` runs, then stopped. Asserts that
/// no call waited on Redis and returns how many calls ended and the longest.
fn under_load(workers: &[(Arc<Breaker>, Fleet)], body: impl FnOnce()) -> (u64, Duration) {
    let (stop, longest, calls) = (AtomicBool::new(false), AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|s| {
        for (b, _) in workers {
            let (stop, longest, calls) = (&stop, &longest, &calls);
            s.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let t = StdInstant::now();
                    if let Ok(p) = b.allow() {
                        b.record(p, Outcome::Success).unwrap();
                    }
                    longest.fetch_max(t.elapsed().as_micros() as u64, Ordering::Relaxed);
                    calls.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_micros(500));
                }
            });
        }
        std::thread::sleep(Duration::from_millis(100));
        body();
        stop.store(true, Ordering::Relaxed);
    });
    let longest = Duration::from_micros(longest.load(Ordering::Relaxed));
    assert!(longest < Duration::from_millis(50), "a call waited {longest:?}");
    (calls.load(Ordering::Relaxed), longest)
}

/// Waits until every worker is attached (`true`) or detached (`false`); returns how long.
fn all_attached(workers: &[(Arc<Breaker>, Fleet)], attached: bool) -> Duration {
    let what = if attached { "attached" } else { "detached" };
    wait_for(Duration::from_secs(5), what, || {
        workers.iter().all(|(_, f)| f.is_attached() == attached)
    })
}

/// After Redis failed: every worker detaches, not at the first failure but `fallback_after`
/// (300 ms) after its last success (up to a refresh earlier).
fn all_detach(workers: &[(Arc<Breaker>, Fleet)], how: &str) {
    let detached = all_attached(workers, false);
    println!("redis {how}: every worker detached after {detached:?} (fallback_after 300 ms, timeout 100 ms)");
    assert!(detached >= Duration::from_millis(200), "{detached:?}");
}

fn evalsha_calls(server: &RedisServer) -> u64 {
    let info = server.command(&["INFO", "commandstats"]).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
        .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
}

#[test]
fn redis_killed_and_restarted_mid_run_nothing_hangs_and_workers_reattach() {
    let mut server = RedisServer::tcp().unwrap();
    let n = 6;
    let workers = fleet_of(n, &server.url(), "kill", Duration::from_millis(400));
    all_attached(&workers, true);
    let (calls, longest) = under_load(&workers, || {
        server.stop();
        all_detach(&workers, "killed");
        // Local protection while detached: a trip at one worker opens that worker only.
        trip(&workers[0].0);
        assert_eq!(workers[0].0.snapshot().state, State::Open);
        assert_eq!(workers[1].0.snapshot().state, State::Closed);
        std::thread::sleep(Duration::from_millis(300));
        server.start().unwrap();
        let before = evalsha_calls(&server);
        let back = all_attached(&workers, true);
        println!("redis restarted: every worker re-attached after {back:?}");
        // The trip made while detached is re-published: the fleet opens everywhere.
        wait_for(Duration::from_secs(2), "fleet open", || {
            workers.iter().all(|(b, _)| b.snapshot().state != State::Closed)
        });
        std::thread::sleep(Duration::from_millis(500));
        // No burst: about one exchange per worker per refresh (50 ms), plus the wakes.
        let per_worker_per_s = (evalsha_calls(&server) - before) as f64
            / n as f64
            / (back + Duration::from_millis(500)).as_secs_f64();
        println!("after the restart: {per_worker_per_s:.1} exchanges per worker per second");
        assert!(per_worker_per_s < 60.0, "{per_worker_per_s}");
    });
    println!("{calls} calls, the longest {longest:?}");
    assert!(calls > 1000);
    let closing = StdInstant::now();
    drop(workers);
    assert!(
        closing.elapsed() < Duration::from_secs(2),
        "close took {:?}",
        closing.elapsed()
    );
}

#[test]
fn a_hung_redis_costs_each_exchange_its_timeout_and_calls_nothing() {
    let server = RedisServer::unix().unwrap();
    let workers = fleet_of(4, &server.url(), "hung", Duration::from_millis(400));
    all_attached(&workers, true);
    under_load(&workers, || {
        server.pause().unwrap();
        all_detach(&workers, "frozen");
        // sync_now is bounded by the timeout too (it may also fail at once during the backoff).
        let t = StdInstant::now();
        let report = workers[0].1.sync_now().unwrap();
        assert!(
            !report.ok && t.elapsed() < Duration::from_millis(500),
            "{report:?} {:?}",
            t.elapsed()
        );
        server.resume().unwrap();
        println!(
            "redis thawed: every worker re-attached after {:?}",
            all_attached(&workers, true)
        );
    });
}

#[test]
fn a_corrupt_record_costs_redis_little_and_the_next_trip_replaces_it() {
    let server = RedisServer::unix().unwrap();
    let n = 8;
    let workers = fleet_of(n, &server.url(), "corrupt", Duration::from_millis(400));
    all_attached(&workers, true);
    // A hostile value: a record whose state is no state.
    server
        .command(&["HSET", "holdoff:fleet:corrupt", "state", "ajar"])
        .unwrap();
    all_attached(&workers, false);
    // Backed off (25 ms doubling to 1 s, jittered): not one script call per worker per refresh
    // (50 ms: 20 per second).
    let (before, start) = (evalsha_calls(&server), StdInstant::now());
    std::thread::sleep(Duration::from_secs(2));
    let rate = (evalsha_calls(&server) - before) as f64 / n as f64 / start.elapsed().as_secs_f64();
    println!("corrupt record: {rate:.1} exchanges per worker per second");
    assert!(rate < 4.0, "{rate} exchanges per worker per second");
    // Detached workers are local breakers; reads leave the record as it is.
    for (b, _) in &workers {
        assert_eq!(b.snapshot().state, State::Closed);
    }
    let state = server
        .command(&["HGET", "holdoff:fleet:corrupt", "state"])
        .unwrap();
    assert!(state.contains("ajar"), "untouched by reads: {state}");
    // Any worker's trip carries an open, which replaces the record; the fleet follows it.
    trip(&workers[3].0);
    let repaired = wait_for(Duration::from_secs(3), "repaired", || {
        workers
            .iter()
            .all(|(b, f)| f.is_attached() && b.snapshot().state == State::Open)
    });
    println!("a trip replaced the corrupt record; every worker open after {repaired:?}");
    let state = server
        .command(&["HGET", "holdoff:fleet:corrupt", "state"])
        .unwrap();
    assert!(state.contains("open"), "{state}");
}

/// The system clock shifted by `offset`: another machine's monotonic clock.
#[derive(Debug)]
struct Skewed {
    base: SystemClock,
    offset: Duration,
}

impl Clock for Skewed {
    fn now(&self) -> Instant {
        self.base.now().saturating_add(self.offset)
    }
    fn wall_at(&self, t: Instant) -> SystemTime {
        self.base.wall_at(t)
    }
}

#[test]
fn workers_with_clocks_seconds_apart_agree_on_the_fleet_deadline() {
    let server = RedisServer::unix().unwrap();
    let url = server.url();
    let interval = Duration::from_millis(1500);
    let a = breaker(SystemClock::shared(), interval);
    let b = breaker(
        Arc::new(Skewed {
            base: SystemClock::new(),
            offset: Duration::from_secs(7),
        }),
        interval,
    );
    let fa = holdoff_fleet::attach(&a, &config(&url, "skew")).unwrap();
    let fb = holdoff_fleet::attach(&b, &config(&url, "skew")).unwrap();
    wait_for(Duration::from_secs(5), "attached", || {
        fa.is_attached() && fb.is_attached()
    });
    trip(&a);
    wait_for(Duration::from_secs(2), "b open", || {
        b.snapshot().state == State::Open
    });
    // Both read their remaining time at (nearly) the same real instant.
    let (ra, rb) = (
        a.snapshot().retry_after.unwrap(),
        b.snapshot().retry_after.unwrap(),
    );
    println!("time to the fleet's next probe: a {ra:?}, b (clock +7 s) {rb:?}");
    let diff = if ra > rb { ra - rb } else { rb - ra };
    assert!(diff < Duration::from_millis(100), "a {ra:?} b {rb:?}");
    // Converted at millisecond resolution.
    assert!(
        rb > Duration::from_millis(1000) && rb <= interval + Duration::from_millis(2),
        "{rb:?}"
    );
    // Neither probes before the fleet's time; one of them gets the fleet's one probe after it.
    let mut refused = 0;
    for br in [&a, &b] {
        refused += usize::from(br.allow().is_err());
    }
    assert_eq!(refused, 2);
    drop((fa, fb));
}

#[test]
fn attach_makes_the_first_exchange_so_a_new_worker_starts_open_and_a_wrong_address_shows() {
    let server = RedisServer::unix().unwrap();
    let workers = fleet_of(1, &server.url(), "start", Duration::from_secs(30));
    assert!(workers[0].1.is_attached(), "attached as attach returns");
    trip(&workers[0].0);
    let (b, _f) = &workers[0];
    wait_for(Duration::from_secs(5), "the trip published", || {
        workers[0]
            .1
            .sync_now()
            .unwrap()
            .record
            .is_some_and(|r| r.episode == 1)
    });
    assert_eq!(b.snapshot().state, State::Open);
    // A worker started during the open refuses its very first call.
    let late = breaker(SystemClock::shared(), Duration::from_secs(30));
    let fleet = holdoff_fleet::attach(&late, &config(&server.url(), "start")).unwrap();
    assert!(fleet.is_attached());
    assert!(late.allow().is_err(), "{:?}", late.snapshot());

    // Nothing listens there: attach returns within its bound, not attached, and stays so.
    let dir = std::env::temp_dir().join(format!("holdoff-nowhere-{}", std::process::id()));
    let url = format!("unix://{}/redis.sock", dir.display());
    let lone = breaker(SystemClock::shared(), Duration::from_secs(30));
    let start = StdInstant::now();
    let fleet = holdoff_fleet::attach(&lone, &config(&url, "start")).unwrap();
    let took = start.elapsed();
    println!("attach to a missing socket took {took:?}");
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert!(!fleet.is_attached());
    std::thread::sleep(Duration::from_millis(400));
    assert!(
        !fleet.is_attached(),
        "never attached while the store never answered"
    );
    assert!(lone.allow().is_ok(), "a plain local breaker meanwhile");
}

#[test]
fn a_reset_closes_the_fleet_on_every_worker() {
    let server = RedisServer::unix().unwrap();
    let workers = fleet_of(3, &server.url(), "reset", Duration::from_secs(30));
    trip(&workers[0].0);
    wait_for(Duration::from_secs(5), "every worker open", || {
        workers.iter().all(|(b, _)| b.snapshot().state == State::Open)
    });
    workers[1].0.reset();
    let took = wait_for(Duration::from_secs(5), "every worker closed", || {
        workers.iter().all(|(b, _)| b.snapshot().state == State::Closed)
    });
    println!("a reset reached every worker in {took:?}");
    let rec = workers[2].1.sync_now().unwrap().record.unwrap();
    assert_eq!((rec.state.name(), rec.episode), ("closed", 1));
    trip(&workers[2].0);
    wait_for(Duration::from_secs(5), "a new episode everywhere", || {
        workers.iter().all(|(b, _)| b.snapshot().state == State::Open)
    });
    let rec = workers[0].1.sync_now().unwrap().record.unwrap();
    assert_eq!((rec.state.name(), rec.episode), ("open", 2));
}
