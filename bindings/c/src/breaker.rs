//! `holdoff_breaker` and `holdoff_breaker_group`: the circuit breaker, alone or keyed by upstream.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use hcore::interop::{drain_events_up_to, RawPermit};
use hcore::{Breaker, BreakerGroup, Permit, StateChange};

use crate::clock::holdoff_clock;
use crate::config::{build, config_or_defaults, holdoff_config};
use crate::fleet::fleet_fail;
use crate::handle::{handle, non_null, write, Handle};
use crate::status::{boundary, holdoff_status, Fail};
use crate::types::{holdoff_effect, holdoff_reason, holdoff_state, opt_ns, outcome_from_c};

/// A circuit breaker for one upstream (`docs/contract.md` §3). Thread-safe: share one handle
/// between every thread that calls the upstream. While closed, `holdoff_breaker_allow` and
/// recording a success take no lock and read no clock. Free with `holdoff_breaker_free`.
pub struct holdoff_breaker {
    _private: [u8; 0],
}

// A handle is the core breaker's own `Arc`, whoever made it (`holdoff_breaker_new` or a group):
// an idle breaker costs its one allocation and nothing else. The few breakers with a `fleet` part
// have their link in a table of their own (fleet.rs), released when a handle is freed.
handle!(holdoff_breaker => Breaker, Breaker, "breaker", on_free = crate::fleet::release);

/// Breakers keyed by upstream (host, registry, provider, tenant), created on first use from one
/// template; each gets its own jitter seed mixed with its key. Thread-safe. Free with
/// `holdoff_breaker_group_free`.
///
/// Bounded, because keys often come from request data: the group keeps at most `max_keys`
/// breakers (the configuration's `group.max_keys`, `HOLDOFF_GROUP_DEFAULT_MAX_KEYS`
/// unless it says otherwise). A new key at a full group evicts the least recently used
/// idle breaker (closed, no failure counted); open, half-open, forced-open and disabled breakers,
/// and closed ones counting failures, are never evicted. With none idle among the 64 least
/// recently used, the new key gets an overflow breaker the group does not keep: no call fails
/// because the group is full. `holdoff_breaker_group_snapshot` counts evictions and overflows.
pub struct holdoff_breaker_group {
    _private: [u8; 0],
}

handle!(holdoff_breaker_group => BreakerGroup, Group, "group");

/// The keys a group keeps, copied at one moment (`holdoff_breaker_group_keys`), sorted by their bytes.
/// Immutable and thread-safe. Free with `holdoff_key_list_free`.
pub struct holdoff_key_list {
    _private: [u8; 0],
}

/// Each key's bytes followed by a NUL (the key itself may hold NULs: its length is kept).
pub(crate) struct KeyList {
    keys: Vec<Box<[u8]>>,
}

handle!(holdoff_key_list => KeyList, KeyList, "keys");

/// The `max_keys` of a group whose configuration has no `group.max_keys`.
pub const HOLDOFF_GROUP_DEFAULT_MAX_KEYS: usize = 10_000;
/// The largest `group.max_keys` a configuration accepts.
pub const HOLDOFF_GROUP_MAX_KEYS_LIMIT: usize = 100_000_000;

const _: () = assert!(HOLDOFF_GROUP_DEFAULT_MAX_KEYS == hcore::group::DEFAULT_MAX_KEYS);
const _: () = assert!(HOLDOFF_GROUP_MAX_KEYS_LIMIT == hcore::group::MAX_KEYS_LIMIT);

/// A side-effect-free view of a group's counts (`holdoff_breaker_group_snapshot`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct holdoff_group_snapshot {
    /// Breakers the group keeps now (at most `max_keys`).
    pub keys: usize,
    /// The bound on `keys`.
    pub max_keys: usize,
    /// Idle breakers evicted to make room for a new key, since the group was made.
    pub evictions: u64,
    /// Overflow breakers handed out (not kept) because nothing could be evicted.
    pub overflows: u64,
}

/// Leave to make one call, from `holdoff_breaker_allow` (or `holdoff_policy_before_attempt`). Record it
/// exactly once with `holdoff_breaker_record` (or `holdoff_policy_after_attempt`); a second record is
/// `HOLDOFF_STATUS_PERMIT_ALREADY_RECORDED`. A plain value: copy it freely, but record only one
/// copy. An unrecorded probe permit holds its probe slot until the probe timeout.
#[repr(C)]
#[derive(Debug)]
pub struct holdoff_permit {
    /// The episode this call was admitted under: 0 while closed (or disabled), otherwise the
    /// number of the open episode whose probe this is.
    pub episode: u32,
    /// 1 if this call is a probe of an open breaker, else 0.
    pub probe: u8,
    /// 0 until recorded; the library sets it to 1 (atomically) when it records the permit. Do not
    /// write it.
    pub recorded: u8,
    /// Reserved, 0.
    pub reserved: u16,
    /// Internal: the issuing breaker's id. Do not modify.
    pub raw_breaker: u32,
    /// Internal: the breaker's episode counter at admission. Do not modify.
    pub raw_episode: u32,
    /// Internal: the probe's id (0 for a call admitted while closed). Do not modify.
    pub raw_probe: u32,
}

/// Why a call was refused (with `HOLDOFF_STATUS_BREAKER_OPEN`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct holdoff_refusal {
    /// Time until a call could be admitted, ns; valid when `has_retry_after` is 1.
    pub retry_after_ns: u64,
    /// The `holdoff_state` when it refused.
    pub state: u32,
    /// The open episode's number.
    pub episode: u32,
    /// 0 while forced open (no retry time until an operator resets), else 1.
    pub has_retry_after: u8,
}

/// A side-effect-free view of a breaker (`holdoff_breaker_snapshot`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct holdoff_snapshot {
    /// Failures counted by the trip policy now (consecutive, or inside the window).
    pub failures: u64,
    /// While open or half-open (`has_retry_after`): time until the next probe may be admitted,
    /// ns (0 when one may go now).
    pub retry_after_ns: u64,
    /// The open interval in force, ns, if open or half-open (`has_interval`).
    pub interval_ns: u64,
    /// Times the breaker opened from closed.
    pub opens: u64,
    /// Times the breaker closed by recovering.
    pub closes: u64,
    /// Probes admitted.
    pub probes: u64,
    /// Admissions refused.
    pub refusals: u64,
    /// Stale answers received.
    pub stale_answers: u64,
    /// Events dropped because nobody drained the queue.
    pub events_dropped: u64,
    /// The `holdoff_state`.
    pub state: u32,
    /// Number of the current (or last) open episode; 0 before the first trip.
    pub episode: u32,
    /// Consecutive current-episode probe answers so far.
    pub recoveries: u32,
    /// Probes admitted and not yet answered, cancelled or timed out.
    pub probes_in_flight: u32,
    /// 1 if `retry_after_ns` is set (open or half-open).
    pub has_retry_after: u8,
    /// 1 if `holdoff_breaker_allow` would admit a probe now.
    pub probe_ready: u8,
    /// 1 if `interval_ns` is set (open or half-open).
    pub has_interval: u8,
}

/// One state change (`holdoff_breaker_drain_events`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct holdoff_state_change {
    /// When it happened, ns since the clock's origin.
    pub at_ns: u64,
    /// For `HOLDOFF_REASON_RETRY_LATER`: the delay the provider asked for, ns, before the guard
    /// (`has_requested_delay`).
    pub requested_delay_ns: u64,
    /// For openings: time until the first probe may be admitted, ns (`has_open_for`).
    pub open_for_ns: u64,
    /// The `holdoff_state` before.
    pub from: u32,
    /// The `holdoff_state` after.
    pub to: u32,
    /// The episode number after the change.
    pub episode: u32,
    /// The `holdoff_reason`.
    pub reason: u32,
    /// 1 if `requested_delay_ns` is set.
    pub has_requested_delay: u8,
    /// 1 if `open_for_ns` is set.
    pub has_open_for: u8,
}

pub(crate) fn permit_to_c(p: Permit) -> holdoff_permit {
    let episode = p.episode();
    let probe = u8::from(p.is_probe());
    let raw = RawPermit::from(p);
    holdoff_permit {
        episode,
        probe,
        recorded: 0,
        reserved: 0,
        raw_breaker: raw.breaker,
        raw_episode: raw.episode,
        raw_probe: raw.probe,
    }
}

/// Takes a C permit for recording on `breaker`: foreign first (the permit stays usable), then
/// the one-shot flag, as the core's `PermitSlot` does.
///
/// # Safety
/// `permit` must be non-NULL, valid for reads and writes, and its `recorded` byte accessed only
/// atomically by concurrent holdoff calls.
pub(crate) unsafe fn take_permit(permit: *mut holdoff_permit, breaker: &Breaker) -> Result<Permit, Fail> {
    // SAFETY: by the contract, `permit` is valid for reads.
    let (raw_breaker, raw_episode, raw_probe) =
        unsafe { ((*permit).raw_breaker, (*permit).raw_episode, (*permit).raw_probe) };
    if raw_breaker != breaker.id() {
        return Err(hcore::PermitError::Foreign.into());
    }
    // SAFETY: the field is a valid, aligned `u8` for the permit's lifetime (the contract), and
    // holdoff only accesses it atomically, so two threads recording one permit race safely:
    // exactly one wins.
    let flag = unsafe { AtomicU8::from_ptr(std::ptr::addr_of_mut!((*permit).recorded)) };
    if flag.swap(1, Ordering::AcqRel) != 0 {
        return Err(hcore::PermitError::AlreadyRecorded.into());
    }
    Ok(Permit::from(RawPermit {
        breaker: raw_breaker,
        episode: raw_episode,
        probe: raw_probe,
    }))
}

fn state_change_to_c(e: &StateChange) -> holdoff_state_change {
    let (has_requested_delay, requested_delay_ns) = opt_ns(e.requested_delay);
    let (has_open_for, open_for_ns) = opt_ns(e.open_for);
    holdoff_state_change {
        at_ns: e.at.as_nanos(),
        requested_delay_ns,
        open_for_ns,
        from: holdoff_state::from(e.from) as u32,
        to: holdoff_state::from(e.to) as u32,
        episode: e.episode,
        reason: holdoff_reason::from(e.reason) as u32,
        has_requested_delay,
        has_open_for,
    }
}

/// Creates a closed breaker from `config`'s `breaker` part (the core's defaults if it has none,
/// or if `config` is NULL), reading `clock`. The configuration was validated when parsed. With a
/// `fleet` part the breaker is attached to the fleet's shared record: a Redis url starts the
/// link's background thread (nothing connects before it runs, so this never waits on Redis); the
/// link closes when this handle and every policy composed from it are freed.
///
/// Errors: `HOLDOFF_STATUS_INVALID_CONFIG` naming `fleet.url` for a `rediss://` url in a build
/// without TLS; `HOLDOFF_STATUS_NULL_PARAMETER` (`clock`, `out`).
///
/// # Safety
/// `config` must be NULL or a live configuration handle; `clock` NULL or a live clock handle;
/// `out` NULL or valid for writing a pointer. On success the caller owns `*out` and frees it
/// once with `holdoff_breaker_free`.
#[no_mangle]
pub unsafe extern "C" fn holdoff_breaker_new(
    config: *const holdoff_config,
    clock: *const holdoff_clock,
    out: *mut *mut holdoff_breaker,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { config_or_defaults(config)? };
        // SAFETY: forwarded contract.
        let k = unsafe { holdoff_clock::borrow(clock)? };
        let breaker = Arc::new(Breaker::new(c.breaker(), Arc::clone(&k.clock))?);
        let fleet = c
            .fleet()
            .map(|f| holdoff_fleet::attach(&breaker, f))
            .transpose()
            .map_err(fleet_fail)?;
        non_null(out, "out")?;
        if let Some(fleet) = fleet {
            crate::fleet::link(&breaker, fleet);
        }
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out, holdoff_breaker::into_ptr(breaker)) };
        Ok(holdoff_status::Ok)
    })
}

/// Releases a breaker handle. NULL does nothing. Permits it issued become foreign to every
/// breaker; a policy or group using the breaker keeps it alive.
///
/// # Safety
/// `breaker` must be NULL or a live breaker handle, not used again afterwards and not in use
/// by another thread.
#[no_mangle]
pub unsafe extern "C" fn holdoff_breaker_free(breaker: *mut holdoff_breaker) -> holdoff_status {
    // SAFETY: forwarded contract.
    unsafe { holdoff_breaker::free(breaker) }
}

/// Asks to make a call: admits it (while closed or disabled, or as a probe when one is due)
/// or refuses it. This is the only act of admission: a refused call spends nothing, and an
/// admitted probe is spent even if never made, so do not use this as a "ready?" check.
///
/// Returns `HOLDOFF_STATUS_OK` and writes `*out_permit` when admitted;
/// `HOLDOFF_STATUS_BREAKER_OPEN` (not an error) when refused, writing `*out_refusal` if it is
/// not NULL. Errors: `HOLDOFF_STATUS_NULL_PARAMETER` (`breaker`, `out_permit`).
///
/// Thread-safe; while closed it takes no lock and reads no clock.
///
/// # Safety
/// `breaker` must be NULL or a live breaker handle; `out_permit` NULL or valid for a write;
/// `out_refusal` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn holdoff_breaker_allow(
    breaker: *const holdoff_breaker,
    out_permit: *mut holdoff_permit,
    out_refusal: *mut holdoff_refusal,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let b = unsafe { holdoff_breaker::borrow(breaker)? };
        non_null(out_permit, "out_permit")?;
        match b.allow() {
            Ok(p) => {
                // SAFETY: checked non-NULL; valid by contract.
                unsafe { write(out_permit, permit_to_c(p)) };
                Ok(holdoff_status::Ok)
            }
            Err(r) => {
                if !out_refusal.is_null() {
                    let (has_retry_after, retry_after_ns) = opt_ns(r.retry_after);
                    let refusal = holdoff_refusal {
                        retry_after_ns,
                        state: holdoff_state::from(r.state) as u32,
                        episode: r.episode,
                        has_retry_after,
                    };
                    // SAFETY: non-NULL; valid by contract.
                    unsafe { write(out_refusal, refusal) };
                }
                Ok(holdoff_status::BreakerOpen)
            }
        }
    })
}

/// Reports the outcome of a call admitted by `holdoff_breaker_allow`. `outcome` is a
/// `holdoff_outcome`; `retry_later_ns` is the provider's delay for
/// `HOLDOFF_OUTCOME_RETRY_LATER` (ignored otherwise). Marks the permit recorded and writes
/// the `holdoff_effect` to `*out_effect` if it is not NULL.
///
/// Errors: `HOLDOFF_STATUS_FOREIGN_PERMIT` if another breaker issued the permit (it stays
/// usable); `HOLDOFF_STATUS_PERMIT_ALREADY_RECORDED` for a second record;
/// `HOLDOFF_STATUS_INVALID_INPUT` for an unknown outcome (the permit stays unrecorded);
/// `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// Thread-safe; a success while closed under the consecutive policy takes no lock.
///
/// # Safety
/// `breaker` must be NULL or a live breaker handle; `permit` NULL or a valid, writable permit
/// from `holdoff_breaker_allow` (other threads may record the same permit concurrently; only
/// one succeeds); `out_effect` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn holdoff_breaker_record(
    breaker: *const holdoff_breaker,
    permit: *mut holdoff_permit,
    outcome: u32,
    retry_later_ns: u64,
    out_effect: *mut u32,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let b = unsafe { holdoff_breaker::borrow(breaker)? };
        non_null(permit, "permit")?;
        let o = outcome_from_c(outcome, retry_later_ns)?;
        // SAFETY: non-NULL; valid and writable by contract.
        let p = unsafe { take_permit(permit, b)? };
        let effect = b.record(p, o)?;
        if !out_effect.is_null() {
            // SAFETY: non-NULL; valid by contract.
            unsafe { write(out_effect, holdoff_effect::from(effect) as u32) };
        }
        Ok(holdoff_status::Ok)
    })
}

/// Writes a view of the breaker to `*out`. Side-effect free: never admits, expires or
/// advances anything. Reads the clock once.
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `breaker` must be NULL or a live breaker handle; `out` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn holdoff_breaker_snapshot(
    breaker: *const holdoff_breaker,
    out: *mut holdoff_snapshot,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let b = unsafe { holdoff_breaker::borrow(breaker)? };
        non_null(out, "out")?;
        let s = b.snapshot();
        let (has_retry_after, retry_after_ns) = opt_ns(s.retry_after);
        let (has_interval, interval_ns) = opt_ns(s.interval);
        let snap = holdoff_snapshot {
            failures: s.failures,
            retry_after_ns,
            interval_ns,
            opens: s.opens,
            closes: s.closes,
            probes: s.probes,
            refusals: s.refusals,
            stale_answers: s.stale_answers,
            events_dropped: s.events_dropped,
            state: holdoff_state::from(s.state) as u32,
            episode: s.episode,
            recoveries: s.recoveries,
            probes_in_flight: s.probes_in_flight,
            has_retry_after,
            probe_ready: u8::from(s.probe_ready),
            has_interval,
        };
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out, snap) };
        Ok(holdoff_status::Ok)
    })
}

/// Moves up to `capacity` of the oldest queued state changes into `events[0..]`, in order, and
/// writes how many to `*out_len`; the rest stay queued for the next call (the breaker keeps at
/// most 1024, then drops the oldest and counts them in the snapshot's `events_dropped`). Poll
/// this instead of registering a callback: the library never calls into C.
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER` (`events` may be NULL only if `capacity` is 0).
///
/// # Safety
/// `breaker` must be NULL or a live breaker handle; `events` valid for writing `capacity`
/// elements; `out_len` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn holdoff_breaker_drain_events(
    breaker: *const holdoff_breaker,
    events: *mut holdoff_state_change,
    capacity: usize,
    out_len: *mut usize,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let b = unsafe { holdoff_breaker::borrow(breaker)? };
        if capacity > 0 {
            non_null(events, "events")?;
        }
        non_null(out_len, "out_len")?;
        let taken = drain_events_up_to(b, capacity);
        for (i, e) in taken.iter().enumerate() {
            // SAFETY: `i < taken.len() <= capacity`, and `events` is valid for `capacity`
            // writes by contract.
            unsafe { write(events.add(i), state_change_to_c(e)) };
        }
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out_len, taken.len()) };
        Ok(holdoff_status::Ok)
    })
}

/// # Safety
/// `breaker` must be NULL or a live breaker handle.
unsafe fn operator(breaker: *const holdoff_breaker, f: fn(&Breaker)) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let b = unsafe { holdoff_breaker::borrow(breaker)? };
        f(b);
        Ok(holdoff_status::Ok)
    })
}

/// Opens the breaker until `holdoff_breaker_reset`, refusing every call with no retry time.
/// Starts a new episode: answers to calls admitted before it are stale.
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `breaker` must be NULL or a live breaker handle.
#[no_mangle]
pub unsafe extern "C" fn holdoff_breaker_force_open(breaker: *const holdoff_breaker) -> holdoff_status {
    // SAFETY: forwarded contract.
    unsafe { operator(breaker, Breaker::force_open) }
}

/// Admits every call and never trips until `holdoff_breaker_reset` (outcomes are still
/// counted). Starts a new episode.
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `breaker` must be NULL or a live breaker handle.
#[no_mangle]
pub unsafe extern "C" fn holdoff_breaker_disable(breaker: *const holdoff_breaker) -> holdoff_status {
    // SAFETY: forwarded contract.
    unsafe { operator(breaker, Breaker::disable) }
}

/// Back to closed with fresh counts. Starts a new episode: answers to permits admitted before
/// the reset are stale.
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `breaker` must be NULL or a live breaker handle.
#[no_mangle]
pub unsafe extern "C" fn holdoff_breaker_reset(breaker: *const holdoff_breaker) -> holdoff_status {
    // SAFETY: forwarded contract.
    unsafe { operator(breaker, Breaker::reset) }
}

/// Creates an empty group whose template is `config`'s `breaker` part (the core's defaults if
/// it has none, or if `config` is NULL), bounded by its `group.max_keys`
/// (`HOLDOFF_GROUP_DEFAULT_MAX_KEYS` if absent), reading `clock`. The configuration was
/// validated when parsed, so `holdoff_breaker_group_get` cannot fail on it. A group's breakers
/// stay local: a configuration with a `fleet` part is refused.
///
/// Errors: `HOLDOFF_STATUS_INVALID_CONFIG` naming `fleet` when the configuration has a `fleet`
/// part; `HOLDOFF_STATUS_NULL_PARAMETER` (`clock`, `out`).
///
/// # Safety
/// `config` must be NULL or a live configuration handle; `clock` NULL or a live clock handle;
/// `out` NULL or valid for writing a pointer. On success the caller owns `*out` and frees it
/// once with `holdoff_breaker_group_free`.
#[no_mangle]
pub unsafe extern "C" fn holdoff_breaker_group_new(
    config: *const holdoff_config,
    clock: *const holdoff_clock,
    out: *mut *mut holdoff_breaker_group,
) -> holdoff_status {
    // SAFETY: forwarded contract.
    unsafe {
        build(config, out, |c| {
            let k = holdoff_clock::borrow(clock)?;
            c.check_group()?;
            Ok(BreakerGroup::with_max_keys(
                c.breaker(),
                c.group_max_keys(),
                Arc::clone(&k.clock),
            )?)
        })
    }
}

/// Releases a group handle. NULL does nothing. Breaker handles obtained from it stay valid.
///
/// # Safety
/// `group` must be NULL or a live group handle, not used again afterwards and not in use by
/// another thread.
#[no_mangle]
pub unsafe extern "C" fn holdoff_breaker_group_free(group: *mut holdoff_breaker_group) -> holdoff_status {
    // SAFETY: forwarded contract.
    unsafe { holdoff_breaker_group::free(group) }
}

/// Writes a new handle to the breaker for `key` (UTF-8, `key_len` bytes, no NUL needed) to
/// `*out`: the one the group keeps for the key (created on first use), which this marks most
/// recently used. A new key at a full group evicts the least recently used idle breaker, or,
/// with none idle, gets an overflow breaker the group does not keep (each such call makes a
/// fresh one). Free each handle with `holdoff_breaker_free`. Two calls for the same key may
/// write the same pointer: each is still a reference of its own, freed once.
///
/// Ask the group for the breaker of each call (a lookup takes tens of nanoseconds) and record
/// a permit on the handle that admitted it: a handle kept longer may be to a breaker the group
/// has since evicted (it stays valid and usable, but the group no longer hands it out).
///
/// Errors: `HOLDOFF_STATUS_INVALID_INPUT` if the key is not UTF-8;
/// `HOLDOFF_STATUS_NULL_PARAMETER` (`key` may be NULL only if `key_len` is 0).
///
/// # Safety
/// `group` must be NULL or a live group handle; `key` valid for reading `key_len` bytes; `out`
/// NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn holdoff_breaker_group_get(
    group: *const holdoff_breaker_group,
    key: *const std::ffi::c_char,
    key_len: usize,
    out: *mut *mut holdoff_breaker,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let g = unsafe { holdoff_breaker_group::borrow(group)? };
        // SAFETY: forwarded contract.
        let key = unsafe { crate::http::bytes(key, key_len, "key")? };
        let key = std::str::from_utf8(key).map_err(|_| Fail::input("key", "must be UTF-8"))?;
        non_null(out, "out")?;
        let b = g.get(key);
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out, holdoff_breaker::into_ptr(b)) };
        Ok(holdoff_status::Ok)
    })
}

/// Writes the number of breakers the group keeps to `*out_len` (overflow breakers are not
/// kept).
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `group` must be NULL or a live group handle; `out_len` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn holdoff_breaker_group_len(
    group: *const holdoff_breaker_group,
    out_len: *mut usize,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let g = unsafe { holdoff_breaker_group::borrow(group)? };
        non_null(out_len, "out_len")?;
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out_len, g.len()) };
        Ok(holdoff_status::Ok)
    })
}

/// Writes the group's counts (breakers kept, `max_keys`, evictions, overflows) to `*out`,
/// read together. Side-effect free: marks no key used.
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `group` must be NULL or a live group handle; `out` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn holdoff_breaker_group_snapshot(
    group: *const holdoff_breaker_group,
    out: *mut holdoff_group_snapshot,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let g = unsafe { holdoff_breaker_group::borrow(group)? };
        non_null(out, "out")?;
        let s = g.snapshot();
        let stats = holdoff_group_snapshot {
            keys: s.keys,
            max_keys: s.max_keys,
            evictions: s.evictions,
            overflows: s.overflows,
        };
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out, stats) };
        Ok(holdoff_status::Ok)
    })
}

/// Copies the keys the group keeps now, sorted by their bytes, into a new key list written to
/// `*out`. Side-effect free: marks no key used. Read it with `holdoff_key_list_len` and
/// `holdoff_key_list_get`; free it with `holdoff_key_list_free`.
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `group` must be NULL or a live group handle; `out` NULL or valid for writing a pointer. On
/// success the caller owns `*out` and frees it once with `holdoff_key_list_free`.
#[no_mangle]
pub unsafe extern "C" fn holdoff_breaker_group_keys(
    group: *const holdoff_breaker_group,
    out: *mut *mut holdoff_key_list,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let g = unsafe { holdoff_breaker_group::borrow(group)? };
        non_null(out, "out")?;
        let keys = g
            .keys()
            .into_iter()
            .map(|k| {
                let mut bytes = k.into_bytes();
                bytes.push(0);
                bytes.into_boxed_slice()
            })
            .collect();
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out, holdoff_key_list::into_ptr(Arc::new(KeyList { keys }))) };
        Ok(holdoff_status::Ok)
    })
}

/// Releases a key list. NULL does nothing; the pointers `holdoff_key_list_get` gave become
/// invalid.
///
/// # Safety
/// `list` must be NULL or a live key-list handle, not used again afterwards and not in use by
/// another thread.
#[no_mangle]
pub unsafe extern "C" fn holdoff_key_list_free(list: *mut holdoff_key_list) -> holdoff_status {
    // SAFETY: forwarded contract.
    unsafe { holdoff_key_list::free(list) }
}

/// Writes the number of keys in the list to `*out_len`.
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `list` must be NULL or a live key-list handle; `out_len` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn holdoff_key_list_len(
    list: *const holdoff_key_list,
    out_len: *mut usize,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let l = unsafe { holdoff_key_list::borrow(list)? };
        non_null(out_len, "out_len")?;
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out_len, l.keys.len()) };
        Ok(holdoff_status::Ok)
    })
}

/// Writes the key at `index` (0-based, in sorted order) to `*out_key` and its length in bytes
/// (without the terminator) to `*out_key_len`. The key is UTF-8, followed by a NUL (it may
/// itself hold NULs: use the length); the pointer stays valid until the list is freed.
///
/// Errors: `HOLDOFF_STATUS_INVALID_INPUT` for an index at or past the length (field `index`);
/// `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `list` must be NULL or a live key-list handle; `out_key` and `out_key_len` NULL or valid for
/// a write.
#[no_mangle]
pub unsafe extern "C" fn holdoff_key_list_get(
    list: *const holdoff_key_list,
    index: usize,
    out_key: *mut *const std::ffi::c_char,
    out_key_len: *mut usize,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let l = unsafe { holdoff_key_list::borrow(list)? };
        non_null(out_key, "out_key")?;
        non_null(out_key_len, "out_key_len")?;
        let key = l.keys.get(index).ok_or_else(|| {
            Fail::input(
                "index",
                format!("{index} is past the last key (the list has {})", l.keys.len()),
            )
        })?;
        // SAFETY: both checked non-NULL; valid by contract. The bytes live in the list, which
        // the caller keeps until it frees it.
        unsafe {
            write(out_key, key.as_ptr().cast());
            write(out_key_len, key.len() - 1);
        }
        Ok(holdoff_status::Ok)
    })
}
