//! The C ABI driven from Rust, so that Miri (`core/miri.sh`) can check every raw-pointer read
//! and write, `Arc` round trip and atomic flag this crate's `unsafe` blocks make: the C runner
//! exercises the same code, but Miri cannot interpret C.

use std::ffi::CStr;
use std::mem::MaybeUninit;
use std::ptr;

use crate::breaker::*;
use crate::clock::*;
use crate::config::*;
use crate::status::{holdoff_last_error_message, holdoff_status};

const OUTCOME_SUCCESS: u32 = 0;
const OUTCOME_FAILURE: u32 = 2;
const SECOND: u64 = 1_000_000_000;

fn manual_clock() -> *mut holdoff_clock {
    let mut clock = ptr::null_mut();
    // SAFETY: `clock` is a valid out-parameter.
    let st = unsafe { holdoff_clock_new_manual(0, &mut clock) };
    assert_eq!(st, holdoff_status::Ok);
    clock
}

/// A configuration parsed from `json`, or the status it was refused with.
fn config(json: &str) -> Result<*mut holdoff_config, holdoff_status> {
    let mut c = ptr::null_mut();
    // SAFETY: the text is valid for its length; `c` is a valid out-parameter.
    match unsafe { holdoff_config_parse(json.as_ptr().cast(), json.len(), &mut c) } {
        holdoff_status::Ok => Ok(c),
        other => Err(other),
    }
}

fn breaker(clock: *const holdoff_clock) -> *mut holdoff_breaker {
    let c = config(r#"{"breaker": {"trip": {"policy": "consecutive", "threshold": 2}}}"#).unwrap();
    let mut b = ptr::null_mut();
    // SAFETY: live configuration and clock, a valid out-parameter; the breaker does not need
    // the configuration once built.
    unsafe {
        assert_eq!(holdoff_breaker_new(c, clock, &mut b), holdoff_status::Ok);
        assert_eq!(holdoff_config_free(c), holdoff_status::Ok);
    }
    b
}

fn allow(b: *const holdoff_breaker) -> Result<holdoff_permit, holdoff_refusal> {
    let mut permit = MaybeUninit::<holdoff_permit>::uninit();
    let mut refusal = MaybeUninit::<holdoff_refusal>::uninit();
    // SAFETY: live breaker; both out-parameters valid for a write.
    match unsafe { holdoff_breaker_allow(b, permit.as_mut_ptr(), refusal.as_mut_ptr()) } {
        // SAFETY: written on success.
        holdoff_status::Ok => Ok(unsafe { permit.assume_init() }),
        // SAFETY: written on a refusal.
        holdoff_status::BreakerOpen => Err(unsafe { refusal.assume_init() }),
        other => panic!("allow: {other:?}"),
    }
}

fn record(b: *const holdoff_breaker, permit: &mut holdoff_permit, outcome: u32) -> holdoff_status {
    let mut effect = u32::MAX;
    // SAFETY: live breaker, a permit it issued, a valid out-parameter.
    unsafe { holdoff_breaker_record(b, permit, outcome, 0, &mut effect) }
}

fn snapshot(b: *const holdoff_breaker) -> holdoff_snapshot {
    let mut s = MaybeUninit::<holdoff_snapshot>::uninit();
    // SAFETY: live breaker, valid out-parameter.
    let st = unsafe { holdoff_breaker_snapshot(b, s.as_mut_ptr()) };
    assert_eq!(st, holdoff_status::Ok);
    // SAFETY: written on success.
    unsafe { s.assume_init() }
}

#[test]
fn trip_probe_and_events_through_the_abi() {
    let clock = manual_clock();
    let b = breaker(clock);
    for _ in 0..2 {
        let mut p = allow(b).unwrap();
        assert_eq!(record(b, &mut p, OUTCOME_FAILURE), holdoff_status::Ok);
        assert_eq!(p.recorded, 1);
        // The same permit again: refused, nothing counted twice.
        assert_eq!(
            record(b, &mut p, OUTCOME_SUCCESS),
            holdoff_status::PermitAlreadyRecorded
        );
    }
    let refusal = allow(b).unwrap_err();
    assert_eq!(
        (refusal.has_retry_after, refusal.retry_after_ns),
        (1, 30 * SECOND)
    );
    assert_eq!(snapshot(b).opens, 1);

    // Drain into a buffer smaller than the queue, then the rest.
    let mut events = [MaybeUninit::<holdoff_state_change>::uninit(); 1];
    let mut len = usize::MAX;
    // SAFETY: `events` is valid for `capacity` writes; `len` for one.
    let st = unsafe { holdoff_breaker_drain_events(b, events[0].as_mut_ptr(), 1, &mut len) };
    assert_eq!((st, len), (holdoff_status::Ok, 1));
    // SAFETY: the first `len` elements were written.
    assert_eq!(unsafe { events[0].assume_init_ref() }.at_ns, 0);
    // SAFETY: a zero capacity allows a NULL buffer.
    let st = unsafe { holdoff_breaker_drain_events(b, ptr::null_mut(), 0, &mut len) };
    assert_eq!((st, len), (holdoff_status::Ok, 0));

    // SAFETY: live manual clock.
    let st = unsafe { holdoff_clock_advance(clock, 30 * SECOND) };
    assert_eq!(st, holdoff_status::Ok);
    let mut probe = allow(b).unwrap();
    assert_eq!(probe.probe, 1);
    assert_eq!(record(b, &mut probe, OUTCOME_SUCCESS), holdoff_status::Ok);

    // SAFETY: live handles, each freed once; the breaker keeps its own reference to the clock.
    unsafe {
        assert_eq!(holdoff_clock_free(clock), holdoff_status::Ok);
        assert_eq!(holdoff_breaker_free(b), holdoff_status::Ok);
    }
}

#[test]
fn breakers_of_equal_configurations_share_it_and_a_handle_is_the_breaker() {
    use crate::handle::Handle;
    let clock = manual_clock();
    let (a, b) = (breaker(clock), breaker(clock));
    let mut d = ptr::null_mut();
    // SAFETY: NULL asks for the default configuration; live clock; valid out-parameter.
    let st = unsafe { holdoff_breaker_new(ptr::null(), clock, &mut d) };
    assert_eq!(st, holdoff_status::Ok);
    // SAFETY: live breaker handles, borrowed while none is freed.
    let (ra, rb, rd) = unsafe {
        (
            holdoff_breaker::borrow(a).unwrap(),
            holdoff_breaker::borrow(b).unwrap(),
            holdoff_breaker::borrow(d).unwrap(),
        )
    };
    assert!(
        ptr::eq(ra.config(), rb.config()),
        "two parses of one text, one copy"
    );
    assert!(
        !ptr::eq(ra.config(), rd.config()),
        "another configuration, another copy"
    );
    assert_ne!(ra.id(), rb.id());
    assert!(crate::fleet::fleet_of(ra).is_none());
    // The handle is the core breaker's own allocation: nothing is allocated around it.
    assert_eq!(a as usize, ra as *const hcore::Breaker as usize);
    // Sharing the configuration shares no state: tripping one leaves the other closed.
    for _ in 0..2 {
        let mut p = allow(a).unwrap();
        assert_eq!(record(a, &mut p, OUTCOME_FAILURE), holdoff_status::Ok);
    }
    assert_eq!(snapshot(a).state, 1);
    assert_eq!((snapshot(b).state, snapshot(b).opens), (0, 0));
    // SAFETY: live handles, each freed once.
    unsafe {
        for h in [a, b, d] {
            assert_eq!(holdoff_breaker_free(h), holdoff_status::Ok);
        }
        assert_eq!(holdoff_clock_free(clock), holdoff_status::Ok);
    }
}

/// A fleet link belongs to the breaker handle and every policy composed from it: freeing the
/// handle first leaves the link to the policy, and the last owner closes it.
#[test]
fn a_fleet_link_lives_until_its_last_owner_lets_go() {
    use crate::budget::{holdoff_retry_budget_free, holdoff_retry_budget_new};
    use crate::fleet::fleet_of;
    use crate::handle::Handle;
    use crate::policy::{holdoff_policy_free, holdoff_policy_new};
    let clock = manual_clock();
    let c =
        config(r#"{"fleet": {"url": "memory://abi-link-owners", "key": "k", "refresh_ms": 50}}"#).unwrap();
    let (mut w, mut budget, mut policy) = (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
    // SAFETY: live configuration and clock, valid out-parameters; each handle freed once below,
    // and `kept` is an owning reference of our own, valid after the handles are gone.
    unsafe {
        assert_eq!(holdoff_breaker_new(c, clock, &mut w), holdoff_status::Ok);
        assert_eq!(holdoff_config_free(c), holdoff_status::Ok);
        let kept = holdoff_breaker::clone_arc(w).unwrap();
        let local = breaker(clock);
        assert!(fleet_of(&kept).is_some_and(|f| f.is_attached()));
        assert!(fleet_of(holdoff_breaker::borrow(local).unwrap()).is_none());
        assert_eq!(
            holdoff_retry_budget_new(ptr::null(), clock, &mut budget),
            holdoff_status::Ok
        );
        assert_eq!(
            holdoff_policy_new(w, budget, ptr::null(), ptr::null(), &mut policy),
            holdoff_status::Ok
        );
        assert_eq!(holdoff_breaker_free(w), holdoff_status::Ok);
        let fleet = fleet_of(&kept).expect("the policy still owns the link");
        assert!(fleet.is_attached());
        // Freeing another breaker touches no other link.
        assert_eq!(holdoff_breaker_free(local), holdoff_status::Ok);
        assert!(fleet_of(&kept).is_some());
        assert_eq!(holdoff_policy_free(policy), holdoff_status::Ok);
        assert!(fleet_of(&kept).is_none(), "the last owner let go");
        assert!(!fleet.is_attached(), "and the link closed");
        assert_eq!(holdoff_retry_budget_free(budget), holdoff_status::Ok);
        assert_eq!(holdoff_clock_free(clock), holdoff_status::Ok);
    }
}

#[test]
fn null_parameters_are_refused_with_a_message() {
    let clock = manual_clock();
    let b = breaker(clock);
    // SAFETY: NULL out-parameters are checked before any write.
    let st = unsafe { holdoff_breaker_allow(b, ptr::null_mut(), ptr::null_mut()) };
    assert_eq!(st, holdoff_status::NullParameter);
    // SAFETY: the message is a NUL-terminated string owned by this thread's last error.
    let msg = unsafe { CStr::from_ptr(holdoff_last_error_message()) };
    assert!(msg.to_str().unwrap().contains("out_permit"), "{msg:?}");
    // SAFETY: NULL handles are checked before any read.
    let st = unsafe { holdoff_breaker_snapshot(ptr::null(), ptr::null_mut()) };
    assert_eq!(st, holdoff_status::NullParameter);
    // SAFETY: freeing NULL is a no-op; the others are live handles freed once.
    unsafe {
        assert_eq!(holdoff_breaker_free(ptr::null_mut()), holdoff_status::Ok);
        assert_eq!(holdoff_breaker_free(b), holdoff_status::Ok);
        assert_eq!(holdoff_clock_free(clock), holdoff_status::Ok);
    }
}

/// Debug builds catch a freed handle, a double free and a handle of the wrong type by the
/// registry's status, checked before any dereference. The quarantine keeps freed objects
/// allocated, so Miri could not see a stale read here: the status assertions are what count.
#[cfg(debug_assertions)]
#[test]
fn stale_and_mistyped_handles_are_caught() {
    let clock = manual_clock();
    let b = breaker(clock);
    // SAFETY: a live handle, freed once.
    assert_eq!(unsafe { holdoff_breaker_free(b) }, holdoff_status::Ok);
    let mut s = MaybeUninit::<holdoff_snapshot>::uninit();
    // SAFETY: the debug registry refuses a freed handle before any use.
    let st = unsafe { holdoff_breaker_snapshot(b, s.as_mut_ptr()) };
    assert_eq!(st, holdoff_status::InvalidHandle);
    // SAFETY: as above; a second free is refused.
    assert_eq!(unsafe { holdoff_breaker_free(b) }, holdoff_status::InvalidHandle);
    // SAFETY: as above; a clock is not a breaker.
    let st = unsafe { holdoff_breaker_snapshot(clock.cast(), s.as_mut_ptr()) };
    assert_eq!(st, holdoff_status::InvalidHandle);
    // SAFETY: a live handle, freed once.
    assert_eq!(unsafe { holdoff_clock_free(clock) }, holdoff_status::Ok);
}

/// Two threads record one permit: its `recorded` flag is taken atomically, exactly one wins,
/// and Miri checks the accesses for data races.
#[test]
fn one_permit_recorded_from_two_threads() {
    struct Shared(*const holdoff_breaker, *mut holdoff_permit);
    // SAFETY: both pointees are shared between threads by design: the breaker is `Sync` and the
    // permit's flag is only ever accessed atomically by the library.
    unsafe impl Sync for Shared {}

    let clock = manual_clock();
    let b = breaker(clock);
    let mut permit = allow(b).unwrap();
    let shared = Shared(b, &mut permit);
    let wins: u32 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let shared = &shared;
                s.spawn(move || {
                    let mut effect = 0;
                    // SAFETY: live breaker, a permit it issued that outlives the scope.
                    let st = unsafe {
                        holdoff_breaker_record(shared.0, shared.1, OUTCOME_FAILURE, 0, &mut effect)
                    };
                    match st {
                        holdoff_status::Ok => 1,
                        holdoff_status::PermitAlreadyRecorded => 0,
                        other => panic!("record: {other:?}"),
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(wins, 1);
    assert_eq!(snapshot(b).failures, 1);
    // SAFETY: live handles, each freed once.
    unsafe {
        assert_eq!(holdoff_breaker_free(b), holdoff_status::Ok);
        assert_eq!(holdoff_clock_free(clock), holdoff_status::Ok);
    }
}

fn quota() -> *mut crate::quota::holdoff_retry_quota {
    use crate::quota::*;
    let mut q = ptr::null_mut();
    // SAFETY: NULL is the core's defaults; a valid out-parameter.
    let st = unsafe { holdoff_retry_quota_new(ptr::null(), &mut q) };
    assert_eq!(st, holdoff_status::Ok);
    q
}

fn available(q: *const crate::quota::holdoff_retry_quota) -> u64 {
    let mut n = u64::MAX;
    // SAFETY: live quota, valid out-parameter.
    let st = unsafe { crate::quota::holdoff_retry_quota_available(q, &mut n) };
    assert_eq!(st, holdoff_status::Ok);
    n
}

/// A lease goes back through the core's rule: refused by another quota (its flag untouched),
/// accepted once by its own, refused the second time; the buckets move only once.
#[test]
fn a_lease_goes_back_once_and_only_to_its_quota() {
    use crate::quota::*;
    let (q, other) = (quota(), quota());
    let mut lease = MaybeUninit::<holdoff_quota_lease>::uninit();
    // SAFETY: live quota, valid out-parameter.
    let st = unsafe { holdoff_retry_quota_acquire(q, 0, lease.as_mut_ptr()) };
    assert_eq!(st, holdoff_status::Ok);
    // SAFETY: written on success.
    let mut lease = unsafe { lease.assume_init() };
    assert_eq!((lease.acquired, lease.cost, available(q)), (1, 5, 495));
    // SAFETY: live quotas, a lease from `holdoff_retry_quota_acquire`.
    let st = unsafe { holdoff_retry_quota_on_success(other, &mut lease) };
    assert_eq!((st, lease.returned), (holdoff_status::ForeignPermit, 0));
    // SAFETY: as above.
    let st = unsafe { holdoff_retry_quota_on_success(q, &mut lease) };
    assert_eq!((st, lease.returned), (holdoff_status::Ok, 1));
    // SAFETY: as above.
    let st = unsafe { holdoff_retry_quota_on_success(q, &mut lease) };
    assert_eq!(st, holdoff_status::PermitAlreadyRecorded);
    assert_eq!((available(q), available(other)), (500, 500));
    // SAFETY: live handles, each freed once.
    unsafe {
        assert_eq!(holdoff_retry_quota_free(q), holdoff_status::Ok);
        assert_eq!(holdoff_retry_quota_free(other), holdoff_status::Ok);
    }
}

/// Two threads give back one lease: its `returned` flag is taken atomically, one refund.
#[test]
fn one_lease_given_back_from_two_threads() {
    use crate::quota::*;
    struct Shared(*const holdoff_retry_quota, *mut holdoff_quota_lease);
    // SAFETY: the quota is `Sync` and the lease's flag is only accessed atomically by the library.
    unsafe impl Sync for Shared {}
    let q = quota();
    let mut lease = MaybeUninit::<holdoff_quota_lease>::uninit();
    // SAFETY: live quota, valid out-parameter.
    let st = unsafe { holdoff_retry_quota_acquire(q, 1, lease.as_mut_ptr()) };
    assert_eq!(st, holdoff_status::Ok);
    // SAFETY: written on success.
    let mut lease = unsafe { lease.assume_init() };
    let shared = Shared(q, &mut lease);
    let wins: u32 = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let shared = &shared;
                // SAFETY: live quota, a lease it issued that outlives the scope.
                s.spawn(
                    move || match unsafe { holdoff_retry_quota_on_success(shared.0, shared.1) } {
                        holdoff_status::Ok => 1,
                        holdoff_status::PermitAlreadyRecorded => 0,
                        other => panic!("on_success: {other:?}"),
                    },
                )
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!((wins, available(q)), (1, 500));
    // SAFETY: a live handle, freed once.
    assert_eq!(unsafe { holdoff_retry_quota_free(q) }, holdoff_status::Ok);
}

/// The key list hands out pointers into its own storage, valid until it is freed; a key may
/// hold a NUL (its length says where it ends).
#[test]
fn group_keys_and_counts_through_the_abi() {
    let clock = manual_clock();
    assert_eq!(
        config(r#"{"group": {"max_keys": 0}}"#).unwrap_err(),
        holdoff_status::InvalidConfig
    );
    let c = config(r#"{"group": {"max_keys": 2}}"#).unwrap();
    let mut g = ptr::null_mut();
    // SAFETY: live configuration and clock, valid out-parameter.
    unsafe {
        assert_eq!(holdoff_breaker_group_new(c, clock, &mut g), holdoff_status::Ok);
        assert_eq!(holdoff_config_free(c), holdoff_status::Ok);
    }
    for key in ["b", "a\0x", "c"] {
        let mut b = ptr::null_mut();
        // SAFETY: live group; the key is valid for its length.
        let st = unsafe { holdoff_breaker_group_get(g, key.as_ptr().cast(), key.len(), &mut b) };
        assert_eq!(st, holdoff_status::Ok);
        // SAFETY: a live handle, freed once.
        assert_eq!(unsafe { holdoff_breaker_free(b) }, holdoff_status::Ok);
    }
    let mut stats = MaybeUninit::<holdoff_group_snapshot>::uninit();
    // SAFETY: live group, valid out-parameter.
    let st = unsafe { holdoff_breaker_group_snapshot(g, stats.as_mut_ptr()) };
    assert_eq!(st, holdoff_status::Ok);
    // SAFETY: written on success.
    let stats = unsafe { stats.assume_init() };
    assert_eq!(
        (stats.keys, stats.max_keys, stats.evictions, stats.overflows),
        (2, 2, 1, 0)
    );
    let mut list = ptr::null_mut();
    // SAFETY: live group, valid out-parameter.
    let st = unsafe { holdoff_breaker_group_keys(g, &mut list) };
    assert_eq!(st, holdoff_status::Ok);
    let mut n = 0;
    // SAFETY: live list, valid out-parameter.
    assert_eq!(unsafe { holdoff_key_list_len(list, &mut n) }, holdoff_status::Ok);
    let keys: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            let (mut k, mut len) = (ptr::null(), 0);
            // SAFETY: live list, valid out-parameters.
            let st = unsafe { holdoff_key_list_get(list, i, &mut k, &mut len) };
            assert_eq!(st, holdoff_status::Ok);
            // SAFETY: the key's bytes and its NUL live in the list until it is freed.
            let bytes = unsafe { std::slice::from_raw_parts(k.cast::<u8>(), len + 1) };
            assert_eq!(bytes[len], 0);
            bytes[..len].to_vec()
        })
        .collect();
    assert_eq!(keys, [b"a\0x".to_vec(), b"c".to_vec()]);
    let (mut k, mut len) = (ptr::null(), usize::MAX);
    // SAFETY: live list; an index past the end is refused before any write.
    let st = unsafe { holdoff_key_list_get(list, 2, &mut k, &mut len) };
    assert_eq!(st, holdoff_status::InvalidInput);
    assert_eq!((k, len), (ptr::null(), usize::MAX));
    // SAFETY: live handles, each freed once.
    unsafe {
        assert_eq!(holdoff_key_list_free(list), holdoff_status::Ok);
        assert_eq!(holdoff_breaker_group_free(g), holdoff_status::Ok);
        assert_eq!(holdoff_clock_free(clock), holdoff_status::Ok);
    }
}

/// An execution driven through the ABI: a failed attempt waits the backoff, a zero time limit
/// is refused naming its field, and an execution freed during a probe gives the probe back at
/// once (the quarantine of debug builds must not hold it).
#[test]
fn an_execution_through_the_abi() {
    use crate::budget::*;
    use crate::execution::*;
    use crate::policy::*;
    let clock = manual_clock();
    let b = breaker(clock);
    let (mut budget, mut policy) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: NULL is the core's defaults; live handles, valid out-parameters.
    unsafe {
        assert_eq!(
            holdoff_retry_budget_new(ptr::null(), clock, &mut budget),
            holdoff_status::Ok
        );
        let st = holdoff_policy_new(b, budget, ptr::null(), ptr::null(), &mut policy);
        assert_eq!(st, holdoff_status::Ok);
    }
    let new = |options: *const holdoff_execution_options| {
        let mut x = ptr::null_mut();
        // SAFETY: live policy; options NULL or initialised; valid out-parameter.
        let st = unsafe { holdoff_execution_new(policy, options, &mut x) };
        (st, x)
    };
    let step = |f: &dyn Fn(*mut holdoff_step) -> holdoff_status| {
        let mut s = MaybeUninit::<holdoff_step>::uninit();
        assert_eq!(f(s.as_mut_ptr()), holdoff_status::Ok);
        // SAFETY: written on success.
        unsafe { s.assume_init() }
    };

    let mut o = MaybeUninit::<holdoff_execution_options>::uninit();
    // SAFETY: `o` is valid for a write.
    let st = unsafe { holdoff_execution_options_init(o.as_mut_ptr()) };
    assert_eq!(st, holdoff_status::Ok);
    // SAFETY: initialised just above.
    let mut o = unsafe { o.assume_init() };
    o.attempt_timeout = 2; // HOLDOFF_LIMIT_SET, with 0 ns
    let (st, x) = new(&o);
    assert_eq!((st, x), (holdoff_status::InvalidConfig, ptr::null_mut()));

    let (st, x) = new(ptr::null());
    assert_eq!(st, holdoff_status::Ok);
    let first = step(&|s| {
        // SAFETY: a live execution and a valid out-parameter.
        unsafe { holdoff_execution_next_step(x, s) }
    });
    assert_eq!((first.kind, first.attempts, first.has_time_limit), (0, 1, 1));
    assert_eq!(first.time_limit_ns, 60 * SECOND);
    let wait = step(&|s| {
        // SAFETY: a live execution with an attempt in progress and a valid out-parameter.
        unsafe { holdoff_execution_complete(x, 1, OUTCOME_FAILURE, 0, s) }
    });
    assert_eq!((wait.kind, wait.delay_ns, wait.attempts), (1, SECOND / 2, 1));
    assert_eq!((wait.has_last_outcome, wait.last_outcome), (1, OUTCOME_FAILURE));
    // SAFETY: a live execution, freed once, with no attempt in progress.
    assert_eq!(unsafe { holdoff_execution_free(x) }, holdoff_status::Ok);

    // A second failure trips the breaker (threshold 2); then free an execution holding its
    // probe.
    let mut p = allow(b).unwrap();
    assert_eq!(record(b, &mut p, OUTCOME_FAILURE), holdoff_status::Ok);
    assert_eq!(snapshot(b).opens, 1);
    // SAFETY: live manual clock.
    let st = unsafe { holdoff_clock_advance(clock, 30 * SECOND) };
    assert_eq!(st, holdoff_status::Ok);
    let (_, x) = new(ptr::null());
    let probe = step(&|s| {
        // SAFETY: a live execution and a valid out-parameter.
        unsafe { holdoff_execution_next_step(x, s) }
    });
    assert_eq!((probe.kind, probe.probe), (0, 1));
    assert_eq!(snapshot(b).probes_in_flight, 1);
    // SAFETY: a live execution, freed once, during its attempt.
    assert_eq!(unsafe { holdoff_execution_free(x) }, holdoff_status::Ok);
    assert_eq!(snapshot(b).probes_in_flight, 0);

    // SAFETY: live handles, each freed once.
    unsafe {
        assert_eq!(holdoff_policy_free(policy), holdoff_status::Ok);
        assert_eq!(holdoff_retry_budget_free(budget), holdoff_status::Ok);
        assert_eq!(holdoff_breaker_free(b), holdoff_status::Ok);
        assert_eq!(holdoff_clock_free(clock), holdoff_status::Ok);
    }
}

/// The neutral JSON of a configuration is written into the caller's buffer with its NUL, only
/// once the buffer is large enough, and parses back to the same text.
#[test]
fn a_configuration_written_as_json_through_the_abi() {
    let mut len = usize::MAX;
    // SAFETY: capacity 0 asks for the length only; a valid out-parameter.
    let st = unsafe { holdoff_config_to_json(ptr::null(), ptr::null_mut(), 0, &mut len) };
    assert_eq!(st, holdoff_status::Ok);
    let mut buf = vec![0x55_u8; len + 1];
    let mut got = usize::MAX;
    // SAFETY: `buf` holds `len` bytes, one short of the NUL.
    let st = unsafe { holdoff_config_to_json(ptr::null(), buf.as_mut_ptr().cast(), len, &mut got) };
    assert_eq!((st, got), (holdoff_status::InvalidInput, usize::MAX));
    assert_eq!(buf, vec![0x55_u8; len + 1], "nothing written on an error");
    // SAFETY: `buf` holds `len + 1` bytes.
    let st = unsafe { holdoff_config_to_json(ptr::null(), buf.as_mut_ptr().cast(), len + 1, &mut got) };
    assert_eq!((st, got), (holdoff_status::Ok, len));
    let text = CStr::from_bytes_with_nul(&buf)
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["breaker"]["open_interval"]["initial_ms"], 30000.0);
    assert_eq!(v["budget"]["max_retries"], 10);
    assert_eq!(v["quota"]["capacity"], 500);
    assert_eq!(
        v["classifier"]["retry_after_statuses"],
        serde_json::json!([429, 503])
    );
    assert_eq!(v["group"]["max_keys"], 10_000);
    assert_eq!(v["execute"]["total_timeout_ms"], 60000.0);
    assert_eq!(v["execute"]["attempt_timeout_ms"], serde_json::Value::Null);

    // A parsed configuration: what it sets, and the defaults for the rest, reads back the same.
    let c = config(r#"{"breaker": {"recoveries": 7}, "execute": {"total_timeout_ms": null}}"#).unwrap();
    let mut len = 0;
    // SAFETY: live configuration; capacity 0.
    let st = unsafe { holdoff_config_to_json(c, ptr::null_mut(), 0, &mut len) };
    assert_eq!(st, holdoff_status::Ok);
    let mut buf = vec![0_u8; len + 1];
    // SAFETY: live configuration; `buf` holds `len + 1` bytes.
    let st = unsafe { holdoff_config_to_json(c, buf.as_mut_ptr().cast(), buf.len(), &mut len) };
    assert_eq!(st, holdoff_status::Ok);
    // SAFETY: a live handle, freed once.
    assert_eq!(unsafe { holdoff_config_free(c) }, holdoff_status::Ok);
    let text = std::str::from_utf8(&buf[..len]).unwrap();
    let v: serde_json::Value = serde_json::from_str(text).unwrap();
    assert_eq!(v["breaker"]["recoveries"], 7);
    assert_eq!(v["breaker"]["max_probes_in_flight"], 1);
    assert_eq!(v["execute"]["total_timeout_ms"], serde_json::Value::Null);
    let again = config(text).unwrap();
    let mut len2 = 0;
    // SAFETY: live configuration; capacity 0; then freed once.
    unsafe {
        assert_eq!(
            holdoff_config_to_json(again, ptr::null_mut(), 0, &mut len2),
            holdoff_status::Ok
        );
        assert_eq!(holdoff_config_free(again), holdoff_status::Ok);
    }
    assert_eq!(len2, len);
}

fn last_error_field() -> String {
    // SAFETY: a NUL-terminated string owned by this thread's last error.
    unsafe { CStr::from_ptr(crate::status::holdoff_last_error_field()) }
        .to_str()
        .unwrap()
        .to_owned()
}

/// The C structs Go (cgo) and C# (P/Invoke) mirror field by field.
#[test]
fn metric_struct_layouts() {
    use crate::metrics::*;
    use std::mem::{align_of, offset_of, size_of};
    let p = size_of::<usize>();
    assert_eq!(offset_of!(holdoff_metric_info, name), 0);
    assert_eq!(offset_of!(holdoff_metric_info, unit), p);
    assert_eq!(offset_of!(holdoff_metric_info, description), 2 * p);
    assert_eq!(offset_of!(holdoff_metric_info, attribute), 3 * p);
    assert_eq!(offset_of!(holdoff_metric_info, kind), 4 * p);
    assert_eq!(offset_of!(holdoff_metric_info, value_count), 4 * p + 4);
    assert_eq!(size_of::<holdoff_metric_info>(), 4 * p + 8);
    assert_eq!(offset_of!(holdoff_metric_sample, metric), 0);
    assert_eq!(offset_of!(holdoff_metric_sample, attribute), 4);
    assert_eq!(offset_of!(holdoff_metric_sample, value), 8);
    assert_eq!(offset_of!(holdoff_metric_sample, upstream), 16);
    assert_eq!(size_of::<holdoff_metric_sample>(), 16 + p);
    assert_eq!(align_of::<holdoff_metric_sample>(), 8);
    assert_eq!(
        (
            holdoff_metric_kind::Counter as u32,
            holdoff_metric_kind::Gauge as u32,
            HOLDOFF_METRIC_NO_ATTRIBUTE
        ),
        (0, 1, u32::MAX)
    );
}

fn c_str(p: *const std::ffi::c_char) -> Option<&'static str> {
    // SAFETY: the library's strings are static (or live in a list the caller keeps).
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_str().unwrap())
}

/// The table through `holdoff_metric_describe` is the core's, row by row; codes and indexes
/// past the end are refused (describe, naming `metric`) or NULL (attribute values).
#[test]
fn the_metric_table_through_the_abi() {
    use crate::metrics::*;
    use hcore::metrics::{Kind, METRICS};
    let n = holdoff_metric_count();
    assert_eq!(n as usize, METRICS.len());
    for (code, d) in (0..n).zip(METRICS) {
        let mut info = MaybeUninit::<holdoff_metric_info>::uninit();
        // SAFETY: a valid out-parameter.
        let st = unsafe { holdoff_metric_describe(code, info.as_mut_ptr()) };
        assert_eq!(st, holdoff_status::Ok);
        // SAFETY: written on success.
        let info = unsafe { info.assume_init() };
        assert_eq!(c_str(info.name), Some(d.name));
        assert_eq!(c_str(info.unit), Some(d.unit));
        assert_eq!(c_str(info.description), Some(d.description));
        assert_eq!(c_str(info.attribute), d.attribute);
        assert_eq!(info.kind, u32::from(d.kind == Kind::Gauge));
        assert_eq!(info.value_count as usize, d.values.len());
        let values: Vec<_> = (0..=info.value_count)
            .map(|i| c_str(holdoff_metric_attribute_value(code, i)))
            .collect();
        let want: Vec<_> = d.values.iter().map(|v| Some(*v)).chain([None]).collect();
        assert_eq!(values, want, "{}", d.name);
    }
    assert_eq!(c_str(holdoff_metric_attribute_value(3, 2)), Some("failure"));
    assert!(holdoff_metric_attribute_value(n, 0).is_null());
    assert!(holdoff_metric_attribute_value(u32::MAX, 0).is_null());
    let mut info = MaybeUninit::<holdoff_metric_info>::uninit();
    // SAFETY: refused before any write.
    let st = unsafe { holdoff_metric_describe(n, info.as_mut_ptr()) };
    assert_eq!(st, holdoff_status::InvalidInput);
    assert_eq!(last_error_field(), "metric");
    // SAFETY: NULL is checked before any write.
    let st = unsafe { holdoff_metric_describe(0, ptr::null_mut()) };
    assert_eq!(st, holdoff_status::NullParameter);
    assert_eq!(last_error_field(), "out");
}

/// Every reading of a list as `series -> value`, zeros dropped, the conformance suite's way.
fn readings(list: *const crate::metrics::holdoff_metric_list) -> Vec<(String, f64)> {
    use crate::metrics::*;
    // SAFETY: a live list.
    let n = unsafe { holdoff_metric_list_len(list) };
    let mut out = Vec::new();
    for i in 0..n {
        let mut s = MaybeUninit::<holdoff_metric_sample>::uninit();
        // SAFETY: a live list, a valid out-parameter.
        let st = unsafe { holdoff_metric_list_get(list, i, s.as_mut_ptr()) };
        assert_eq!(st, holdoff_status::Ok);
        // SAFETY: written on success.
        let s = unsafe { s.assume_init() };
        let mut info = MaybeUninit::<holdoff_metric_info>::uninit();
        // SAFETY: a valid out-parameter.
        let st = unsafe { holdoff_metric_describe(s.metric, info.as_mut_ptr()) };
        assert_eq!(st, holdoff_status::Ok);
        // SAFETY: written on success.
        let info = unsafe { info.assume_init() };
        let mut attrs = Vec::new();
        if s.attribute != HOLDOFF_METRIC_NO_ATTRIBUTE {
            let value = c_str(holdoff_metric_attribute_value(s.metric, s.attribute)).unwrap();
            attrs.push(format!("{}={value}", c_str(info.attribute).unwrap()));
        }
        if let Some(u) = c_str(s.upstream) {
            attrs.push(format!("upstream={u}"));
        }
        let name = c_str(info.name).unwrap();
        let series = if attrs.is_empty() {
            name.to_owned()
        } else {
            format!("{name}{{{}}}", attrs.join(","))
        };
        if s.value != 0.0 {
            out.push((series, s.value));
        }
    }
    out
}

fn owned(pairs: &[(&str, f64)]) -> Vec<(String, f64)> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

/// A breaker read once (counting starts), tripped by two failures, refused once; then the
/// list's error paths: NULL list, NULL out, an index past the end.
#[test]
fn breaker_metrics_through_the_abi() {
    use crate::metrics::*;
    let clock = manual_clock();
    let b = breaker(clock);
    let mut list = ptr::null_mut();
    // SAFETY: live breaker, valid out-parameter; the first read starts counting.
    let st = unsafe { holdoff_breaker_metrics(b, &mut list) };
    assert_eq!(st, holdoff_status::Ok);
    // SAFETY: a live list.
    assert_eq!(unsafe { holdoff_metric_list_len(list) }, 5 + 2 + 6 + 2 + 9);
    assert_eq!(
        readings(list),
        owned(&[("holdoff.breaker.state{state=closed}", 1.0)])
    );
    // SAFETY: a live list, freed once.
    assert_eq!(unsafe { holdoff_metric_list_free(list) }, holdoff_status::Ok);
    for _ in 0..2 {
        let mut p = allow(b).unwrap();
        assert_eq!(record(b, &mut p, OUTCOME_FAILURE), holdoff_status::Ok);
    }
    allow(b).unwrap_err();
    // SAFETY: live breaker, valid out-parameter.
    let st = unsafe { holdoff_breaker_metrics(b, &mut list) };
    assert_eq!(st, holdoff_status::Ok);
    let want = [
        ("holdoff.breaker.state{state=open}", 1.0),
        ("holdoff.breaker.admitted", 2.0),
        ("holdoff.breaker.refused", 1.0),
        ("holdoff.breaker.outcomes{outcome=failure}", 2.0),
        ("holdoff.breaker.transitions{reason=tripped}", 1.0),
    ];
    assert_eq!(readings(list), owned(&want));

    let mut s = MaybeUninit::<holdoff_metric_sample>::uninit();
    // SAFETY: each error is found before any write.
    unsafe {
        assert_eq!(
            holdoff_metric_list_get(list, 24, s.as_mut_ptr()),
            holdoff_status::InvalidInput
        );
        assert_eq!(last_error_field(), "index");
        assert_eq!(
            holdoff_metric_list_get(list, usize::MAX, s.as_mut_ptr()),
            holdoff_status::InvalidInput
        );
        assert_eq!(
            holdoff_metric_list_get(list, 0, ptr::null_mut()),
            holdoff_status::NullParameter
        );
        assert_eq!(last_error_field(), "out");
        assert_eq!(
            holdoff_metric_list_get(ptr::null(), 0, s.as_mut_ptr()),
            holdoff_status::NullParameter
        );
        assert_eq!(last_error_field(), "list");
        assert_eq!(holdoff_metric_list_len(ptr::null()), 0);
        assert_eq!(
            holdoff_breaker_metrics(b, ptr::null_mut()),
            holdoff_status::NullParameter
        );
        assert_eq!(last_error_field(), "out");
        assert_eq!(
            holdoff_breaker_metrics(ptr::null(), &mut list),
            holdoff_status::NullParameter
        );
        assert_eq!(last_error_field(), "breaker");
        assert_eq!(holdoff_metric_list_free(list), holdoff_status::Ok);
        assert_eq!(holdoff_metric_list_free(ptr::null_mut()), holdoff_status::Ok);
        assert_eq!(holdoff_breaker_free(b), holdoff_status::Ok);
        assert_eq!(holdoff_clock_free(clock), holdoff_status::Ok);
    }
}

/// A group read before its breakers exist still counts on them; each reading carries its
/// key as `upstream`. A policy and a quota give their own series; NULL handles are named.
#[test]
fn group_policy_and_quota_metrics_through_the_abi() {
    use crate::metrics::*;
    let clock = manual_clock();
    let c = config(r#"{"group": {"max_keys": 4}}"#).unwrap();
    let (mut g, mut list) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: live configuration and clock, valid out-parameters; the read starts counting.
    unsafe {
        assert_eq!(holdoff_breaker_group_new(c, clock, &mut g), holdoff_status::Ok);
        assert_eq!(holdoff_config_free(c), holdoff_status::Ok);
        assert_eq!(holdoff_breaker_group_metrics(g, &mut list), holdoff_status::Ok);
        assert_eq!(holdoff_metric_list_len(list), 2);
        assert_eq!(holdoff_metric_list_free(list), holdoff_status::Ok);
    }
    for key in ["pay", "auth", "pay"] {
        let mut b = ptr::null_mut();
        // SAFETY: live group; the key is valid for its length.
        let st = unsafe { holdoff_breaker_group_get(g, key.as_ptr().cast(), key.len(), &mut b) };
        assert_eq!(st, holdoff_status::Ok);
        let mut p = allow(b).unwrap();
        assert_eq!(record(b, &mut p, OUTCOME_SUCCESS), holdoff_status::Ok);
        // SAFETY: a live handle, freed once.
        assert_eq!(unsafe { holdoff_breaker_free(b) }, holdoff_status::Ok);
    }
    // SAFETY: live group, valid out-parameter.
    let st = unsafe { holdoff_breaker_group_metrics(g, &mut list) };
    assert_eq!(st, holdoff_status::Ok);
    let want = [
        ("holdoff.group.keys", 2.0),
        ("holdoff.breaker.state{state=closed,upstream=auth}", 1.0),
        ("holdoff.breaker.admitted{upstream=auth}", 1.0),
        ("holdoff.breaker.outcomes{outcome=success,upstream=auth}", 1.0),
        ("holdoff.breaker.state{state=closed,upstream=pay}", 1.0),
        ("holdoff.breaker.admitted{upstream=pay}", 2.0),
        ("holdoff.breaker.outcomes{outcome=success,upstream=pay}", 2.0),
    ];
    assert_eq!(readings(list), owned(&want));

    let q = quota();
    let mut budget = ptr::null_mut();
    let mut policy = ptr::null_mut();
    let b = breaker(clock);
    // SAFETY: live handles and valid out-parameters; NULL handles are checked first.
    unsafe {
        assert_eq!(holdoff_metric_list_free(list), holdoff_status::Ok);
        assert_eq!(holdoff_retry_quota_metrics(q, &mut list), holdoff_status::Ok);
        assert_eq!(
            readings(list),
            owned(&[("holdoff.quota.tokens", available(q) as f64)])
        );
        assert_eq!(holdoff_metric_list_free(list), holdoff_status::Ok);
        let st = crate::budget::holdoff_retry_budget_new(ptr::null(), clock, &mut budget);
        assert_eq!(st, holdoff_status::Ok);
        let st = crate::policy::holdoff_policy_new(b, budget, q, ptr::null(), &mut policy);
        assert_eq!(st, holdoff_status::Ok);
        assert_eq!(holdoff_policy_metrics(policy, &mut list), holdoff_status::Ok);
        // The retry series only: attempts, retries, 3 waits, 3 durations, capped, 10 give-ups.
        assert_eq!(holdoff_metric_list_len(list), 19);
        assert_eq!(readings(list), Vec::new());
        assert_eq!(holdoff_metric_list_free(list), holdoff_status::Ok);
        assert_eq!(
            holdoff_policy_metrics(ptr::null(), &mut list),
            holdoff_status::NullParameter
        );
        assert_eq!(last_error_field(), "policy");
        assert_eq!(
            holdoff_retry_quota_metrics(ptr::null(), &mut list),
            holdoff_status::NullParameter
        );
        assert_eq!(last_error_field(), "quota");
        assert_eq!(
            holdoff_breaker_group_metrics(ptr::null(), &mut list),
            holdoff_status::NullParameter
        );
        assert_eq!(last_error_field(), "group");
        assert_eq!(crate::policy::holdoff_policy_free(policy), holdoff_status::Ok);
        assert_eq!(
            crate::budget::holdoff_retry_budget_free(budget),
            holdoff_status::Ok
        );
        assert_eq!(crate::quota::holdoff_retry_quota_free(q), holdoff_status::Ok);
        assert_eq!(holdoff_breaker_free(b), holdoff_status::Ok);
        assert_eq!(holdoff_breaker_group_free(g), holdoff_status::Ok);
        assert_eq!(holdoff_clock_free(clock), holdoff_status::Ok);
    }
}
