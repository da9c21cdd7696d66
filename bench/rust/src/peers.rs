//! The breakers a Rust user would pick instead, each used the way its documentation shows:
//! `failsafe` (failsafe-rs), `recloser`, and a hand-written consecutive-failures breaker
//! behind `std::sync::Mutex` (the floor any lock-based breaker starts from).

use std::hint::black_box;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use failsafe::{backoff, failure_policy, CircuitBreaker, Config};
use recloser::Recloser;

use crate::{allocs_per_op, bytes_of, Bench};

/// Longer than the whole run: open breakers stay open.
const OPEN_FOR: Duration = Duration::from_secs(3600);

/// The baseline: closed until `threshold` consecutive failures, then open for `open_for`, then
/// one caller at a time is let through as a probe; a success closes it.
pub struct MutexBreaker {
    threshold: u32,
    open_for: Duration,
    state: Mutex<MutexState>,
}

struct MutexState {
    failures: u32,
    open_until: Option<Instant>,
}

impl MutexBreaker {
    pub fn new(threshold: u32, open_for: Duration) -> Self {
        MutexBreaker {
            threshold,
            open_for,
            state: Mutex::new(MutexState {
                failures: 0,
                open_until: None,
            }),
        }
    }

    pub fn allow(&self) -> bool {
        let mut s = self.state.lock().unwrap();
        match s.open_until {
            None => true,
            Some(until) => {
                let now = Instant::now();
                if now < until {
                    false
                } else {
                    // Half-open: this caller probes; the others wait another interval.
                    s.open_until = Some(now + self.open_for);
                    true
                }
            }
        }
    }

    pub fn record(&self, success: bool) {
        let mut s = self.state.lock().unwrap();
        if success {
            s.failures = 0;
            s.open_until = None;
        } else {
            s.failures += 1;
            if s.failures >= self.threshold {
                s.open_until = Some(Instant::now() + self.open_for);
            }
        }
    }

    pub fn call<T, E>(&self, f: impl FnOnce() -> Result<T, E>) -> Option<Result<T, E>> {
        if !self.allow() {
            return None;
        }
        let r = f();
        self.record(r.is_ok());
        Some(r)
    }
}

type Failsafe = failsafe::StateMachine<failure_policy::ConsecutiveFailures<backoff::Constant>, ()>;

/// Same trip rule as holdoff's default: five consecutive failures.
fn failsafe_breaker(open_for: Duration) -> Failsafe {
    Config::new()
        .failure_policy(failure_policy::consecutive_failures(
            5,
            backoff::constant(open_for),
        ))
        .build()
}

fn recloser_breaker() -> Recloser {
    Recloser::custom().open_wait(OPEN_FOR).build()
}

fn ok() -> Result<u64, ()> {
    Ok(black_box(1))
}

const FS_NOTE: &str = "failsafe 1.3.0, consecutive_failures(5, constant backoff)";
const RC_NOTE: &str = "recloser 1.4.0, Recloser::custom() defaults (ring of 100 calls, 50 % error rate)";
const MX_NOTE: &str = "hand-written: 5 consecutive failures, std::sync::Mutex<{failures, open_until}>";

/// `protected_call` for the peers: each one's own `call(|| Ok(1))` on a closed breaker, the
/// result checked as holdoff's is (main.rs, bench_protected_call).
pub fn bench_protected_call(b: &mut Bench) {
    let fs = failsafe_breaker(OPEN_FOR);
    let s = b.time_loop(|| {
        black_box(fs.call(ok).unwrap());
    });
    b.push(
        "failsafe",
        "protected_call",
        "ns/op",
        s,
        format!("CircuitBreaker::call(|| Ok(1)); {FS_NOTE}"),
    );
    let rc = recloser_breaker();
    let s = b.time_loop(|| {
        black_box(rc.call(ok).unwrap());
    });
    b.push(
        "recloser",
        "protected_call",
        "ns/op",
        s,
        format!("call(|| Ok(1)); {RC_NOTE}"),
    );
    let mx = MutexBreaker::new(5, OPEN_FOR);
    let s = b.time_loop(|| {
        black_box(mx.call(ok).unwrap().unwrap());
    });
    b.push(
        "mutex-baseline",
        "protected_call",
        "ns/op",
        s,
        format!("call(|| Ok(1)): allow, run, record; {MX_NOTE}"),
    );
}

pub fn bench_peers(b: &mut Bench) {
    // failsafe 1.3.0: StateMachine, a parking_lot::Mutex around the state and the policy.
    let fs_note = FS_NOTE;
    let fs = failsafe_breaker(OPEN_FOR);
    let fs_pair = |fs: &Failsafe| {
        if black_box(fs.is_call_permitted()) {
            fs.on_success();
        }
    };
    let s = b.time_loop(|| fs_pair(&fs));
    b.push(
        "failsafe",
        "allow_record",
        "ns/op",
        s,
        format!("is_call_permitted() + on_success(); {fs_note}"),
    );
    let s = b.two_threads(&failsafe_breaker(OPEN_FOR), fs_pair);
    b.push(
        "failsafe",
        "allow_record_2t",
        "ns/op",
        s,
        format!("is_call_permitted() + on_success(), 2 threads on one breaker; {fs_note}"),
    );
    let open = failsafe_breaker(OPEN_FOR);
    for _ in 0..5 {
        open.on_error();
    }
    assert!(!open.is_call_permitted());
    let s = b.time_loop(|| assert!(!black_box(open.is_call_permitted())));
    b.push(
        "failsafe",
        "refuse_open",
        "ns/op",
        s,
        format!("is_call_permitted() -> false when open; {fs_note}"),
    );
    let s = bytes_of(b, || failsafe_breaker(OPEN_FOR), |fs| fs_pair(fs));
    b.push(
        "failsafe",
        "bytes_per_breaker",
        "bytes",
        s,
        format!(
            "size_of::<StateMachine<..>>() = {} + heap after build() and one call (counting allocator); {fs_note}",
            std::mem::size_of::<Failsafe>()
        ),
    );
    let s = allocs_per_op(b, || fs_pair(&fs));
    b.push(
        "failsafe",
        "allocs_per_allow_record",
        "allocs/op",
        s,
        format!("over 1M is_call_permitted()+on_success(); {fs_note}"),
    );

    // recloser 1.4.0: lock-free (crossbeam-epoch); the only API is call(f), which admits, runs
    // and records, so allow_record and protected_call are the same call.
    let rc_note = RC_NOTE;
    let rc = recloser_breaker();
    let rc_call = |rc: &Recloser| {
        black_box(rc.call(ok).unwrap());
    };
    let s = b.time_loop(|| rc_call(&rc));
    b.push(
        "recloser",
        "allow_record",
        "ns/op",
        s,
        format!("call(|| Ok(1)) (no separate admit/record API); {rc_note}"),
    );
    let s = b.two_threads(&recloser_breaker(), rc_call);
    b.push(
        "recloser",
        "allow_record_2t",
        "ns/op",
        s,
        format!("call(|| Ok(1)), 2 threads on one breaker; {rc_note}"),
    );
    let open = recloser_breaker();
    for _ in 0..200 {
        let _ = open.call(|| Err::<(), ()>(()));
    }
    assert!(matches!(open.call(ok), Err(recloser::Error::Rejected)));
    let s = b.time_loop(|| {
        assert!(matches!(black_box(open.call(ok)), Err(recloser::Error::Rejected)));
    });
    b.push(
        "recloser",
        "refuse_open",
        "ns/op",
        s,
        format!("call(..) -> Err(Rejected) when open; {rc_note}"),
    );
    let s = bytes_of(b, recloser_breaker, |rc| rc_call(rc));
    b.push(
        "recloser",
        "bytes_per_breaker",
        "bytes",
        s,
        format!(
            "size_of::<Recloser>() = {} + heap after build() and one call (counting allocator); {rc_note}",
            std::mem::size_of::<Recloser>()
        ),
    );
    let s = allocs_per_op(b, || rc_call(&rc));
    b.push(
        "recloser",
        "allocs_per_allow_record",
        "allocs/op",
        s,
        format!("over 1M call(|| Ok(1)); {rc_note}"),
    );

    // The Mutex baseline.
    let mx_note = MX_NOTE;
    let mx = MutexBreaker::new(5, OPEN_FOR);
    let mx_pair = |mx: &MutexBreaker| {
        if black_box(mx.allow()) {
            mx.record(true);
        }
    };
    let s = b.time_loop(|| mx_pair(&mx));
    b.push(
        "mutex-baseline",
        "allow_record",
        "ns/op",
        s,
        format!("allow() + record(true); {mx_note}"),
    );
    let s = b.two_threads(&MutexBreaker::new(5, OPEN_FOR), mx_pair);
    b.push(
        "mutex-baseline",
        "allow_record_2t",
        "ns/op",
        s,
        format!("allow() + record(true), 2 threads on one breaker; {mx_note}"),
    );
    let open = MutexBreaker::new(5, OPEN_FOR);
    for _ in 0..5 {
        open.record(false);
    }
    let s = b.time_loop(|| assert!(!black_box(open.allow())));
    b.push(
        "mutex-baseline",
        "refuse_open",
        "ns/op",
        s,
        format!("allow() -> false when open (reads Instant::now()); {mx_note}"),
    );
    let s = bytes_of(b, || MutexBreaker::new(5, OPEN_FOR), |mx| mx_pair(mx));
    b.push(
        "mutex-baseline",
        "bytes_per_breaker",
        "bytes",
        s,
        format!("size_of::<MutexBreaker>(), no heap; {mx_note}"),
    );
    let s = allocs_per_op(b, || mx_pair(&mx));
    b.push(
        "mutex-baseline",
        "allocs_per_allow_record",
        "allocs/op",
        s,
        format!("over 1M allow()+record(true); {mx_note}"),
    );
}
