//! One plain C function beside the uniffi scaffolding: a breaker's admission when its fast-path
//! word does not admit (open, half-open, forced open, disabled, counting), for the Kotlin
//! `FastPath`, which calls it through JNA direct mapping with primitives only. A uniffi method
//! call allocates call-status and buffer structures on the JVM for each call, which costs far
//! more than the admission itself; this costs one crossing.

use std::panic::{catch_unwind, AssertUnwindSafe};

use holdoff::interop::RawPermit;

/// The call was admitted: `out[0]` the permit's raw episode, `out[1]` its probe id (0 when
/// admitted while closed or disabled).
pub const DIRECT_ADMITTED: i32 = 0;
/// The call was refused: `out[0]` the time until the next probe in nanoseconds (-1 while forced
/// open, saturated at `i64::MAX`), `out[1]` the state (0 closed, 1 open, 2 half-open, 3 forced
/// open, 4 disabled), `out[2]` the open episode's number.
pub const DIRECT_REFUSED: i32 = 1;
/// Nothing was decided (a null argument, a panic caught): call the breaker's own `allow`.
pub const DIRECT_FAILED: i32 = -1;

/// `Breaker::allow` on the breaker at `breaker` (the `breaker_address` of a `FastPathLayout`),
/// writing the answer to `out[0..3]`; returns [`DIRECT_ADMITTED`], [`DIRECT_REFUSED`] or
/// [`DIRECT_FAILED`]. An admitted permit is recorded with `FastPathWord.record`.
///
/// # Safety
/// `breaker` must be the address given by a `FastPathLayout` whose `word` object is still alive
/// (it holds the breaker), and `out` NULL or valid for writing three `i64`.
#[no_mangle]
pub unsafe extern "C" fn holdoff_uniffi_direct_allow(breaker: u64, out: *mut i64) -> i32 {
    if breaker == 0 || out.is_null() {
        return DIRECT_FAILED;
    }
    let answer = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the caller keeps the breaker alive (see above).
        let b = unsafe { &*(breaker as usize as *const holdoff::Breaker) };
        match b.allow() {
            Ok(p) => {
                let raw = RawPermit::from(p);
                (DIRECT_ADMITTED, [i64::from(raw.episode), i64::from(raw.probe), 0])
            }
            Err(r) => {
                let nanos = r
                    .retry_after
                    .map_or(-1, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
                (DIRECT_REFUSED, [nanos, r.state as i64, i64::from(r.episode)])
            }
        }
    }));
    match answer {
        Ok((code, values)) => {
            // SAFETY: checked non-NULL; valid for three writes by contract.
            unsafe { std::ptr::copy_nonoverlapping(values.as_ptr(), out, 3) };
            code
        }
        Err(_) => DIRECT_FAILED,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn admits_then_refuses_with_the_time_to_the_probe() {
        let clock = Arc::new(holdoff::ManualClock::new());
        let b = holdoff::Breaker::new(
            holdoff::BreakerConfig {
                trip: holdoff::TripPolicy::ConsecutiveFailures { threshold: 1 },
                ..holdoff::BreakerConfig::default()
            },
            clock.clone(),
        )
        .unwrap();
        let addr = &b as *const holdoff::Breaker as u64;
        let mut out = [7i64; 3];
        assert_eq!(
            unsafe { holdoff_uniffi_direct_allow(addr, out.as_mut_ptr()) },
            DIRECT_ADMITTED
        );
        assert_eq!(out, [0, 0, 0]);
        let p = holdoff::Permit::from(RawPermit {
            breaker: b.id(),
            episode: 0,
            probe: 0,
        });
        b.record(p, holdoff::Outcome::Failure).unwrap();
        assert_eq!(
            unsafe { holdoff_uniffi_direct_allow(addr, out.as_mut_ptr()) },
            DIRECT_REFUSED
        );
        assert_eq!(out, [30_000_000_000, 1, 1]);
        b.force_open();
        assert_eq!(
            unsafe { holdoff_uniffi_direct_allow(addr, out.as_mut_ptr()) },
            DIRECT_REFUSED
        );
        assert_eq!((out[0], out[1]), (-1, 3));
        assert_eq!(
            unsafe { holdoff_uniffi_direct_allow(0, out.as_mut_ptr()) },
            DIRECT_FAILED
        );
        assert_eq!(
            unsafe { holdoff_uniffi_direct_allow(addr, std::ptr::null_mut()) },
            DIRECT_FAILED
        );
    }
}
