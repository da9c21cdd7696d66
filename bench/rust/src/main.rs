//! The Rust side of the cross-language benchmark (`bash bench/run`): holdoff against the
//! `failsafe` and `recloser` crates and a hand-written Mutex breaker, in one process.
//!
//! Every figure is a set of raw samples, one per repetition: a repetition times one batch of
//! calls with `std::time::Instant` (batch size calibrated to about `HOLDOFF_BENCH_BATCH_MS`
//! milliseconds, default 100) and reports ns per call. Results are appended as JSON Lines to
//! `$HOLDOFF_BENCH_OUT` (one JSON object a line: lang, subject, op, unit, samples, note; the
//! cross-language format every binding's bench writes, see the README's Performance section)
//! and printed as a table.
//!
//! Environment: `HOLDOFF_BENCH_OUT` (output file, appended), `HOLDOFF_BENCH_REPS` (default 7,
//! at least 5), `HOLDOFF_BENCH_BATCH_MS` (default 100), `HOLDOFF_BENCH_QUICK=1` (small sizes,
//! for a smoke run: no 1M group, 100k-call replays), `HOLDOFF_BENCH_ONLY=allow_record` (only
//! `allow_record` and `allow_record_metrics`, to compare the two), `HOLDOFF_BENCH_ONLY=protected_call`
//! (only `protected_call`, holdoff's and the peers').

mod alloc;
mod peers;

use std::future::Future;
use std::hint::black_box;
use std::io::Write;
use std::pin::pin;
use std::sync::{Arc, Barrier};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant, SystemTime};

use holdoff::fleet::FleetConfig;
use holdoff::{
    Backoff, Breaker, BreakerConfig, BreakerGroup, BudgetConfig, Classifier, Clock, Outcome, RetryBudget,
    RetryState, SystemClock,
};

/// The record format asks for at least five repetitions.
const MIN_REPS: usize = 5;

#[global_allocator]
static GLOBAL: alloc::Counting = alloc::Counting;

/// One output line.
pub struct Record {
    subject: &'static str,
    op: &'static str,
    unit: &'static str,
    samples: Vec<f64>,
    note: String,
}

pub struct Bench {
    reps: usize,
    batch: Duration,
    quick: bool,
    records: Vec<Record>,
}

impl Bench {
    fn push(
        &mut self,
        subject: &'static str,
        op: &'static str,
        unit: &'static str,
        samples: Vec<f64>,
        note: impl Into<String>,
    ) {
        let r = Record {
            subject,
            op,
            unit,
            samples,
            note: note.into(),
        };
        let mut s = r.samples.clone();
        s.sort_by(f64::total_cmp);
        eprintln!(
            "  {:<15} {:<24} {:>12.1} {:<9} [{:.1}, {:.1}]",
            r.subject,
            r.op,
            s[s.len() / 2],
            r.unit,
            s[0],
            s[s.len() - 1]
        );
        self.records.push(r);
    }

    /// ns per call of `batch(n)`, which runs n calls and returns the time they took.
    /// The first runs warm up and size the batch; then `reps` timed repetitions.
    pub fn ns_per_op(&self, mut batch: impl FnMut(u64) -> Duration) -> Vec<f64> {
        let mut n = 16u64;
        let floor = self.batch / 8;
        loop {
            let t = batch(n);
            if t >= floor || n >= 1 << 40 {
                let per = t.as_secs_f64() / n as f64;
                n = ((self.batch.as_secs_f64() / per.max(1e-12)) as u64).max(1);
                break;
            }
            n *= 4;
        }
        (0..self.reps)
            .map(|_| batch(n).as_nanos() as f64 / n as f64)
            .collect()
    }

    /// Same for a loop body taking no state: `op` runs n times under one timer.
    pub fn time_loop(&self, mut op: impl FnMut()) -> Vec<f64> {
        self.ns_per_op(|n| {
            let t = Instant::now();
            for _ in 0..n {
                op();
            }
            t.elapsed()
        })
    }

    /// Two threads sharing `shared`, each running `op` n times; the value is the wall time
    /// from the first thread's start to the last thread's end, divided by n (ops per thread).
    /// Each thread reads its own clock: the spawning thread may be scheduled late.
    pub fn two_threads<S: Sync>(&self, shared: &S, op: impl Fn(&S) + Sync) -> Vec<f64> {
        self.ns_per_op(|n| {
            let start = Barrier::new(2);
            let spans: Vec<(Instant, Instant)> = std::thread::scope(|s| {
                let workers: Vec<_> = (0..2)
                    .map(|_| {
                        s.spawn(|| {
                            start.wait();
                            let t0 = Instant::now();
                            for _ in 0..n {
                                op(shared);
                            }
                            (t0, Instant::now())
                        })
                    })
                    .collect();
                workers.into_iter().map(|w| w.join().unwrap()).collect()
            });
            let first = spans.iter().map(|s| s.0).min().unwrap();
            let last = spans.iter().map(|s| s.1).max().unwrap();
            last - first
        })
    }

    /// Repeats a measurement `reps` times (each a fresh object or run).
    pub fn repeat(&self, f: impl FnMut() -> f64) -> Vec<f64> {
        self.repeat_n(self.reps, f)
    }

    pub fn repeat_n(&self, n: usize, mut f: impl FnMut() -> f64) -> Vec<f64> {
        (0..n).map(|_| f()).collect()
    }
}

/// Allocation calls per call of `op` over one million calls (counting allocator).
pub fn allocs_per_op(b: &Bench, mut op: impl FnMut()) -> Vec<f64> {
    const N: u64 = 1_000_000;
    op(); // lazy first-use allocations (thread-locals) are not the hot path
    b.repeat(|| {
        let ((), allocs, _) = alloc::counted(|| {
            for _ in 0..N {
                op()
            }
        });
        allocs as f64 / N as f64
    })
}

/// `size_of::<T>()` plus the heap it holds after `make` and one call of `touch` (lazy
/// first-use allocations count): the memory of one breaker.
pub fn bytes_of<T>(b: &Bench, make: impl Fn() -> T, touch: impl Fn(&T)) -> Vec<f64> {
    b.repeat(|| {
        let (obj, _, heap) = alloc::counted(|| {
            let obj = make();
            touch(&obj);
            obj
        });
        drop(obj);
        (std::mem::size_of::<T>() as i64 + heap) as f64
    })
}

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One admission and its success, treated as the peers' are (peers.rs): the admission decision
/// goes through `black_box` as a `bool`, then the success is recorded. Neither the permit nor
/// the returned `Effect` goes through `black_box` as well: each adds its own round trip
/// through the stack, measured at several ns per loop on this machine, a cost of the harness
/// that the peers' loops (one `bool`) do not carry. Nothing is optimised away without them:
/// both calls are atomic loads, and the permit is checked against the second.
fn pair(b: &Breaker) {
    let admission = b.allow();
    if black_box(admission.is_ok()) {
        b.record(admission.unwrap(), Outcome::Success).unwrap();
    }
}

fn holdoff_breaker(cfg: BreakerConfig) -> Breaker {
    Breaker::new(cfg, SystemClock::shared()).unwrap()
}

/// A breaker tripped by five failures, open for an hour (longer than the run).
fn open_breaker() -> Breaker {
    let b = holdoff_breaker(BreakerConfig {
        open_interval: Backoff::constant(Duration::from_secs(3600)),
        ..BreakerConfig::default()
    });
    for _ in 0..5 {
        let p = b.allow().unwrap();
        b.record(p, Outcome::Failure).unwrap();
    }
    assert!(b.allow().is_err());
    b
}

/// Polls a future that completes without waiting (no timer, no I/O), as a caller's executor
/// would on its first poll. Inlined into the timed loop as the peers' `call` are: out of line,
/// the future is built in the loop's frame and copied into this one on every call, and the
/// copy's loads of the future's not-yet-written fields stall on the loop's last store there
/// (store forwarding), a cost of this harness rather than of the helper.
#[inline(always)]
fn ready<F: Future>(f: F) -> F::Output {
    let mut cx = Context::from_waker(Waker::noop());
    match pin!(f).poll(&mut cx) {
        Poll::Ready(v) => v,
        Poll::Pending => unreachable!("the operation never waits"),
    }
}

fn classify_ok(r: &Result<u64, ()>) -> Outcome {
    if r.is_ok() {
        Outcome::Success
    } else {
        Outcome::Failure
    }
}

/// The closed fast path with a fleet attached: a real `redis-server` started here on a unix
/// socket (`holdoff_fleet::testing`), the fleet's background threads running. The fleet is
/// never consulted on this path, so the figure should match `allow_record`. Without
/// `redis-server` on PATH the row is left out and the reason printed.
fn bench_fleet(b: &mut Bench) {
    let server = match holdoff_fleet::testing::RedisServer::unix() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("rust: allow_record_fleet not measured: cannot start redis-server: {e}");
            return;
        }
    };
    let br = Arc::new(holdoff_breaker(BreakerConfig::default()));
    let fleet = holdoff_fleet::attach(&br, &FleetConfig::new(server.url(), "bench")).unwrap();
    let s = b.time_loop(|| pair(&br));
    let attached = fleet.is_attached();
    fleet.close();
    assert!(attached, "the fleet stayed attached while measured");
    b.push(
        "holdoff",
        "allow_record_fleet",
        "ns/op",
        s,
        "allow() + record(permit, Success) on a closed breaker attached to a fleet on a local redis-server (background sync and pub/sub threads running); compare allow_record",
    );
}

const CONFIG: &str = "BreakerConfig::default() (5 consecutive failures), SystemClock";

/// The closed fast path, without and with the metric model counting (its first read starts
/// the breaker's counters; exporters read at collection, never on this path).
fn bench_allow_record(b: &mut Bench) {
    let br = holdoff_breaker(BreakerConfig::default());
    let s = b.time_loop(|| pair(&br));
    b.push(
        "holdoff",
        "allow_record",
        "ns/op",
        s,
        format!("allow() + record(permit, Success); {CONFIG}"),
    );

    let br = holdoff_breaker(BreakerConfig::default());
    let mut readings = Vec::new();
    br.metrics(&mut readings);
    let s = b.time_loop(|| pair(&br));
    readings.clear();
    br.metrics(&mut readings);
    let admitted = readings
        .iter()
        .find(|r| r.metric == holdoff::metrics::Metric::BreakerAdmitted)
        .map_or(0.0, |r| r.value);
    assert!(admitted > 0.0, "the breaker counted the measured calls");
    b.push(
        "holdoff",
        "allow_record_metrics",
        "ns/op",
        s,
        format!(
            "allow_record with the breaker's metrics counting (Breaker::metrics read once before, as an exporter does when it attaches; {admitted:.0} calls counted); {CONFIG}; compare allow_record"
        ),
    );
}

/// `protected_call`: a trivial successful operation through the breaker's own helper, as the
/// peers' `call(|| Ok(1))` (peers::bench_protected_call): admit, run, classify, record, return
/// the value. holdoff's helper is async, so its future is created, pinned and polled once.
fn bench_protected_call(b: &mut Bench) {
    let br = holdoff_breaker(BreakerConfig::default());
    let s = b.time_loop(|| {
        black_box(
            ready(holdoff_tokio::call(
                &br,
                async { Ok::<u64, ()>(black_box(1)) },
                classify_ok,
            ))
            .unwrap(),
        );
    });
    b.push(
        "holdoff",
        "protected_call",
        "ns/op",
        s,
        "holdoff_tokio::call(&breaker, async { Ok(1) }, classify), polled once with a no-op waker",
    );
}

fn bench_holdoff(b: &mut Bench) {
    let br = holdoff_breaker(BreakerConfig::default());
    let s = b.two_threads(&br, pair);
    b.push(
        "holdoff",
        "allow_record_2t",
        "ns/op",
        s,
        format!(
            "allow() + record(permit, Success), 2 threads on one breaker; wall ns / ops per thread; {CONFIG}"
        ),
    );

    let br = open_breaker();
    let s = b.time_loop(|| {
        black_box(br.allow()).unwrap_err();
    });
    b.push(
        "holdoff",
        "refuse_open",
        "ns/op",
        s,
        "allow() -> Err(Refusal) on a breaker tripped by 5 failures (reads the clock for retry_after; the bindings use force_open)",
    );

    // What a refusal cannot avoid: the one clock reading that tells whether a probe is due.
    let clock: Arc<dyn Clock> = SystemClock::shared();
    let s = b.time_loop(|| {
        black_box(clock.now());
    });
    b.push(
        "floor",
        "clock_read",
        "ns/op",
        s,
        "one reading of the breaker's clock (Clock::now on SystemClock::shared() through Arc<dyn Clock>), which every refusal while open takes once",
    );

    // The budget's decision for a 429 whose Retry-After says 1 s, as the other languages
    // measure it: a fresh per-call state and RetryBudget::decide(RetryLater(1 s)). A fresh budget
    // per repetition, so that every decision falls early in one rate-limit episode (a retry
    // after 1 s). Parsing the header is timed apart and given in the note.
    let retry_later = Outcome::RetryLater(Duration::from_secs(1));
    let s = b.ns_per_op(|n| {
        let budget = RetryBudget::new(BudgetConfig::default(), SystemClock::shared()).unwrap();
        let t = Instant::now();
        for _ in 0..n {
            let mut call = RetryState::new();
            black_box(budget.decide(&mut call, black_box(retry_later)));
        }
        t.elapsed()
    });
    let check = RetryBudget::new(BudgetConfig::default(), SystemClock::shared())
        .unwrap()
        .decide(&mut RetryState::new(), retry_later);
    assert!(matches!(check, holdoff::Decision::Retry { delay, .. } if delay == Duration::from_secs(1)));
    let classifier = Classifier::default();
    let wall = SystemTime::now();
    let headers = [("Retry-After", "1")];
    assert_eq!(
        classifier.classify(429, headers, wall).unwrap().outcome,
        retry_later
    );
    let mut parse = b.time_loop(|| {
        black_box(classifier.classify(429, black_box(headers), wall).unwrap());
    });
    parse.sort_by(f64::total_cmp);
    b.push(
        "holdoff",
        "budget_429",
        "ns/op",
        s,
        format!(
            "RetryBudget::decide(fresh RetryState, RetryLater(1 s)) -> Retry 1 s; BudgetConfig::default(), SystemClock; \
             parsing the response first (Classifier::classify(429, [Retry-After: 1])) adds a median {:.0} ns",
            parse[parse.len() / 2]
        ),
    );

    let clock = SystemClock::shared();
    // Breakers on one clock with equal configurations share one profile, as a group's do: this
    // one keeps the profile alive, so the figure is what each further breaker adds.
    let _sibling = Breaker::new(BreakerConfig::default(), Arc::clone(&clock)).unwrap();
    let s = bytes_of(
        b,
        || Breaker::new(BreakerConfig::default(), Arc::clone(&clock)).unwrap(),
        pair,
    );
    b.push(
        "holdoff",
        "bytes_per_breaker",
        "bytes",
        s,
        format!(
            "size_of::<Breaker>() = {} + heap after new() and one allow+record (counting allocator), beside another breaker on the same clock with the same configuration: the clock, the configuration and their profile are shared, not counted (a lone breaker adds its profile, 40 bytes, and a configuration of its own its copy, about 150 bytes)",
            std::mem::size_of::<Breaker>()
        ),
    );

    const KEYS: usize = 100_000;
    let keys: Vec<String> = (0..KEYS).map(|i| format!("upstream-{i:06}")).collect();
    let s = b.repeat(|| {
        let (group, _, heap) = alloc::counted(|| {
            let g = BreakerGroup::with_max_keys(BreakerConfig::default(), KEYS, Arc::clone(&clock)).unwrap();
            for k in &keys {
                g.get(k);
            }
            g
        });
        assert_eq!(group.len(), KEYS);
        drop(group);
        heap as f64 / KEYS as f64
    });
    b.push(
        "holdoff",
        "bytes_per_group_entry",
        "bytes",
        s,
        "heap growth over BreakerGroup::get of 100k new 16-byte keys / 100k: key String, Arc<Breaker>, map slot",
    );

    let br = holdoff_breaker(BreakerConfig::default());
    let s = allocs_per_op(b, || pair(&br));
    b.push(
        "holdoff",
        "allocs_per_allow_record",
        "allocs/op",
        s,
        "allocation calls over 1M allow()+record(Success) / 1M (counting global allocator)",
    );

    for (op, size) in [
        ("group_lookup_10", 10usize),
        ("group_lookup_10k", 10_000),
        ("group_lookup_1m", 1_000_000),
    ] {
        if b.quick && size > 10_000 {
            continue;
        }
        let t0 = Instant::now();
        let keys: Vec<String> = (0..size).map(|i| format!("upstream-{i:07}")).collect();
        // Bounded to the keys it holds, so every lookup finds its key (no eviction measured).
        let group = BreakerGroup::with_max_keys(BreakerConfig::default(), size, Arc::clone(&clock)).unwrap();
        for k in &keys {
            group.get(k);
        }
        let built = t0.elapsed();
        // A stride coprime to the size walks every key in a scattered order.
        let stride = 7919 % size;
        let stride = if stride == 0 { 7 } else { stride };
        let mut i = 0usize;
        let s = b.time_loop(|| {
            black_box(group.get(black_box(&keys[i])));
            i += stride;
            if i >= size {
                i -= size;
            }
        });
        b.push(
            "holdoff",
            op,
            "ns/op",
            s,
            format!(
                "BreakerGroup::get(existing key) with {size} keys, scattered order, Arc clone+drop included; group built in {:.2} s",
                built.as_secs_f64()
            ),
        );
    }
}

/// The simulator (`holdoff simulate`, the CLI library's `sim::run`) on a modelled upstream:
/// one call a millisecond, an outage of 503s and a stretch of 429s with Retry-After.
fn bench_replay(b: &mut Bench) {
    let dir = std::env::temp_dir().join(format!("holdoff-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sizes: &[(&'static str, u64)] = if b.quick {
        &[("replay_1m", 100_000), ("replay_10m", 200_000)]
    } else {
        &[("replay_1m", 1_000_000), ("replay_10m", 10_000_000)]
    };
    for &(op, n) in sizes {
        let pct = |p: u64| n * p / 100;
        let text = format!(
            "name = \"bench-{n}\"\n[config.breaker]\n[config.budget]\n\
             [[callers.arrivals]]\nkind = \"rate\"\nevery_ms = 1\nto_ms = {}\n\
             [[upstream.phases]]\nfrom_ms = 0\nto_ms = {}\nstatus = 200\n\
             [[upstream.phases]]\nfrom_ms = {}\nto_ms = {}\nstatus = 503\n\
             [[upstream.phases]]\nfrom_ms = {}\nto_ms = {}\nstatus = 200\n\
             [[upstream.phases]]\nfrom_ms = {}\nto_ms = {}\nstatus = 429\nretry_after = \"2\"\n\
             [[upstream.phases]]\nfrom_ms = {}\nstatus = 200\n",
            n - 1,
            pct(10),
            pct(10),
            pct(16),
            pct(16),
            pct(50),
            pct(50),
            pct(53),
            pct(53),
        );
        let path = dir.join(format!("{op}.toml"));
        std::fs::write(&path, text).unwrap();
        let scn = holdoff_cli::scenario::load(&path).unwrap();
        let mut calls = 0;
        // The minimum of five repetitions: ten million calls take seconds.
        let s = b.repeat_n(MIN_REPS, || {
            let t = Instant::now();
            let run = holdoff_cli::sim::run(&scn, holdoff_cli::sim::Options::default(), None).unwrap();
            let e = t.elapsed();
            calls = run.summary.calls;
            e.as_nanos() as f64 / calls as f64
        });
        let mut sorted = s.clone();
        sorted.sort_by(f64::total_cmp);
        let med = sorted[sorted.len() / 2];
        b.push(
            "holdoff",
            op,
            "ns/call",
            s,
            format!(
                "holdoff_cli::sim::run: {calls} calls (1/ms; 503 outage 10-16%, 429 Retry-After 2 s at 50-53%), breaker + budget defaults; median {:.2} M calls/s",
                1e3 / med
            ),
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

fn write_records(records: &[Record], path: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    for r in records {
        let line = serde_json::json!({
            "lang": "rust",
            "subject": r.subject,
            "op": r.op,
            "unit": r.unit,
            "samples": r.samples,
            "note": r.note,
        });
        writeln!(f, "{line}")?;
    }
    Ok(())
}

fn main() {
    let reps = (env_num("HOLDOFF_BENCH_REPS", 7) as usize).max(MIN_REPS);
    let batch = Duration::from_millis(env_num("HOLDOFF_BENCH_BATCH_MS", 100).max(1));
    let quick = std::env::var("HOLDOFF_BENCH_QUICK").is_ok_and(|v| v == "1");
    let only = std::env::var("HOLDOFF_BENCH_ONLY").unwrap_or_default();
    let mut b = Bench {
        reps,
        batch,
        quick,
        records: Vec::new(),
    };
    let t0 = Instant::now();
    eprintln!(
        "rust: {reps} repetitions of ~{} ms batches (median [min, max])",
        batch.as_millis()
    );
    match only.as_str() {
        "allow_record" => bench_allow_record(&mut b),
        "protected_call" => {
            bench_protected_call(&mut b);
            peers::bench_protected_call(&mut b);
        }
        _ => {
            bench_allow_record(&mut b);
            bench_holdoff(&mut b);
            bench_protected_call(&mut b);
            bench_fleet(&mut b);
            peers::bench_peers(&mut b);
            peers::bench_protected_call(&mut b);
            bench_replay(&mut b);
        }
    }
    eprintln!("rust: done in {:.1} s", t0.elapsed().as_secs_f64());
    if let Ok(path) = std::env::var("HOLDOFF_BENCH_OUT") {
        if let Err(e) = write_records(&b.records, &path) {
            eprintln!("rust: cannot write {path}: {e}");
            std::process::exit(1);
        }
        eprintln!("rust: {} records appended to {path}", b.records.len());
    }
}
