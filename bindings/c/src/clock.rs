//! `holdoff_clock`: the injected clock (system or manual).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hcore::{Clock, Instant, ManualClock, SystemClock};

use crate::handle::{handle, non_null, write, Handle};
use crate::status::{boundary, holdoff_status, Fail};
use crate::types::ns;

/// A clock: the process's monotonic clock, or a manual clock that moves only when told to.
/// Breakers, budgets and policies read it; a policy's breaker and budget must share one.
/// Times are nanoseconds since the clock's origin (its creation for a system clock, 0 for a
/// manual clock). Thread-safe. Free with `holdoff_clock_free` (objects built with it keep it
/// alive as long as they need it).
pub struct holdoff_clock {
    _private: [u8; 0],
}

pub(crate) struct ClockHandle {
    pub(crate) clock: Arc<dyn Clock>,
    manual: Option<ManualClock>,
}

handle!(holdoff_clock => ClockHandle, Clock, "clock");

pub(crate) fn unix(ns: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(ns)
}

/// Creates a clock reading the process's monotonic clock; its origin is now, and its wall
/// time (for HTTP-dates) is derived from one wall reading taken now.
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER` if `out` is NULL.
///
/// # Safety
/// `out` must be NULL or valid for writing a pointer. On success the caller owns `*out` and
/// frees it once with `holdoff_clock_free`.
#[no_mangle]
pub unsafe extern "C" fn holdoff_clock_new_system(out: *mut *mut holdoff_clock) -> holdoff_status {
    boundary(|| {
        non_null(out, "out")?;
        let handle = Arc::new(ClockHandle {
            clock: SystemClock::shared(),
            manual: None,
        });
        // SAFETY: `out` is non-NULL and, by the contract, valid for a write.
        unsafe { write(out, holdoff_clock::into_ptr(handle)) };
        Ok(holdoff_status::Ok)
    })
}

/// Creates a manual clock at time 0, for tests: it moves only through `holdoff_clock_set` and
/// `holdoff_clock_advance`. `wall_origin_unix_ns` is the wall time at its origin, in
/// nanoseconds since the Unix epoch (used only to turn Retry-After HTTP-dates into delays).
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER` if `out` is NULL.
///
/// # Safety
/// `out` must be NULL or valid for writing a pointer. On success the caller owns `*out` and
/// frees it once with `holdoff_clock_free`.
#[no_mangle]
pub unsafe extern "C" fn holdoff_clock_new_manual(
    wall_origin_unix_ns: u64,
    out: *mut *mut holdoff_clock,
) -> holdoff_status {
    boundary(|| {
        non_null(out, "out")?;
        let manual = ManualClock::with_wall_origin(unix(wall_origin_unix_ns));
        let handle = Arc::new(ClockHandle {
            clock: Arc::new(manual.clone()),
            manual: Some(manual),
        });
        // SAFETY: `out` is non-NULL and, by the contract, valid for a write.
        unsafe { write(out, holdoff_clock::into_ptr(handle)) };
        Ok(holdoff_status::Ok)
    })
}

/// Releases a clock handle. NULL does nothing. Objects built with the clock keep using it.
///
/// # Safety
/// `clock` must be NULL or a live handle from a `holdoff_clock_new_*` function, not used again
/// afterwards and not in use by another thread.
#[no_mangle]
pub unsafe extern "C" fn holdoff_clock_free(clock: *mut holdoff_clock) -> holdoff_status {
    // SAFETY: forwarded contract.
    unsafe { holdoff_clock::free(clock) }
}

/// Writes the clock's time, in nanoseconds since its origin, to `*out_ns`.
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `clock` must be NULL or a live clock handle; `out_ns` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn holdoff_clock_now(clock: *const holdoff_clock, out_ns: *mut u64) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { holdoff_clock::borrow(clock)? };
        non_null(out_ns, "out_ns")?;
        let now = match &c.manual {
            Some(m) => m.peek(),
            None => c.clock.now(),
        };
        // SAFETY: checked non-NULL above; valid by contract.
        unsafe { write(out_ns, now.as_nanos()) };
        Ok(holdoff_status::Ok)
    })
}

/// Writes the wall time that corresponds to the clock's current time, in nanoseconds since
/// the Unix epoch, to `*out_unix_ns` (what Retry-After HTTP-dates are compared with).
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `clock` must be NULL or a live clock handle; `out_unix_ns` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn holdoff_clock_wall_now(
    clock: *const holdoff_clock,
    out_unix_ns: *mut u64,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { holdoff_clock::borrow(clock)? };
        non_null(out_unix_ns, "out_unix_ns")?;
        let now = match &c.manual {
            Some(m) => m.peek(),
            None => c.clock.now(),
        };
        let wall = c.clock.wall_at(now);
        let unix_ns = wall.duration_since(UNIX_EPOCH).map_or(0, ns);
        // SAFETY: checked non-NULL above; valid by contract.
        unsafe { write(out_unix_ns, unix_ns) };
        Ok(holdoff_status::Ok)
    })
}

fn manual(c: &ClockHandle) -> Result<&ManualClock, Fail> {
    c.manual
        .as_ref()
        .ok_or_else(|| Fail::input("clock", "only a manual clock can be set or advanced"))
}

/// Moves a manual clock to `to_ns` nanoseconds since its origin.
///
/// Errors: `HOLDOFF_STATUS_CLOCK_BACKWARDS` if `to_ns` is earlier than the clock shows (the
/// clock does not move); `HOLDOFF_STATUS_INVALID_INPUT` for a system clock;
/// `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `clock` must be NULL or a live clock handle.
#[no_mangle]
pub unsafe extern "C" fn holdoff_clock_set(clock: *const holdoff_clock, to_ns: u64) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { holdoff_clock::borrow(clock)? };
        manual(c)?.set(Instant::from_nanos(to_ns))?;
        Ok(holdoff_status::Ok)
    })
}

/// Moves a manual clock forward by `by_ns` nanoseconds (saturating at the end of the axis).
///
/// Errors: `HOLDOFF_STATUS_INVALID_INPUT` for a system clock; `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `clock` must be NULL or a live clock handle.
#[no_mangle]
pub unsafe extern "C" fn holdoff_clock_advance(clock: *const holdoff_clock, by_ns: u64) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { holdoff_clock::borrow(clock)? };
        manual(c)?.advance(Duration::from_nanos(by_ns));
        Ok(holdoff_status::Ok)
    })
}
