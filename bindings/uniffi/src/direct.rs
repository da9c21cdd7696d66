//! Plain functions beside the uniffi scaffolding: a breaker's admission when its fast-path
//! word does not admit (open, half-open, forced open, disabled, counting), for the Kotlin
//! `FastPath`, with primitives only: as JNI native methods of `dev.holdoff.DirectJni`, or where
//! those cannot bind, as C functions through JNA direct mapping. A uniffi method call allocates
//! call-status and buffer structures on the JVM for each call, which costs far more than the
//! admission itself; this costs one crossing.
//!
//! The answer comes back packed in the returned `i64`, so the caller passes no out-pointer and
//! reads no native memory (each argument and each read of native memory costs the JVM side time
//! on a path whose floor is the crossing itself). Layout, bit 0 the lowest:
//!
//! * bits 0-1, the kind: [`KIND_ADMITTED`], [`KIND_REFUSED`] or [`KIND_SPILLED`];
//!   [`ANSWER_FAILED`] (-1) when nothing was decided (a null breaker, a panic caught): call the
//!   breaker's own `allow`.
//! * admitted: bits 2-33 the permit's raw episode, bits 34-63 its probe id (0 when admitted
//!   while closed or disabled);
//! * refused: bits 2-4 the state (0 closed, 1 open, 2 half-open, 3 forced open, 4 disabled),
//!   bits 5-20 the open episode's number, bits 21-63 the time until the next probe in
//!   nanoseconds plus 1 (0: none, while forced open).
//!
//! An answer whose fields do not fit (a probe id from 2^30, an episode from 2^16, a wait from
//! 2^43 - 1 ns, about 2.4 hours) is [`KIND_SPILLED`]: the whole answer is kept for this thread
//! and read with [`holdoff_uniffi_direct_spilled`].

use std::cell::Cell;
use std::ffi::{c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use holdoff::interop::RawPermit;

/// Bits 0-1 of a packed answer: admitted.
pub const KIND_ADMITTED: i64 = 0;
/// Bits 0-1 of a packed answer: refused.
pub const KIND_REFUSED: i64 = 1;
/// Bits 0-1 of a packed answer: the answer did not fit; read it with
/// [`holdoff_uniffi_direct_spilled`] on the same thread, before the next admission there.
pub const KIND_SPILLED: i64 = 2;
/// The packed answer when nothing was decided (bits 0-1 both set).
pub const ANSWER_FAILED: i64 = -1;

/// A spilled answer: the call was admitted, `out[0]` the permit's raw episode, `out[1]` its
/// probe id.
pub const DIRECT_ADMITTED: i32 = 0;
/// A spilled answer: the call was refused, `out[0]` the time until the next probe in nanoseconds
/// (-1 while forced open, saturated at `i64::MAX`), `out[1]` the state, `out[2]` the episode.
pub const DIRECT_REFUSED: i32 = 1;
/// No spilled answer is held for this thread (or `out` was NULL).
pub const DIRECT_FAILED: i32 = -1;

const PROBE_BITS: u32 = 30;
const REFUSED_EPISODE_BITS: u32 = 16;
const REFUSED_WAIT_BITS: u32 = 43;

/// An admission's answer in the spilled form: a `DIRECT_*` code and three fields.
type Answer = (i32, [i64; 3]);

thread_local! {
    // The last answer of this thread that did not fit in 64 bits, until it is read.
    static SPILLED: Cell<Option<Answer>> = const { Cell::new(None) };
}

/// Packs an answer, or `None` when a field does not fit.
fn pack(answer: Answer) -> Option<i64> {
    let (code, [a, b, c]) = answer;
    let fits = |v: i64, bits: u32| (0..1i64 << bits).contains(&v);
    if code == DIRECT_ADMITTED {
        let (episode, probe) = (a, b);
        (fits(episode, 32) && fits(probe, PROBE_BITS)).then_some(KIND_ADMITTED | episode << 2 | probe << 34)
    } else {
        // A wait of -1 (none) is stored as 0.
        let (wait, state, episode) = (a.saturating_add(1), b, c);
        (fits(wait, REFUSED_WAIT_BITS) && fits(episode, REFUSED_EPISODE_BITS) && fits(state, 3))
            .then_some(KIND_REFUSED | state << 2 | episode << 5 | wait << 21)
    }
}

/// `Breaker::allow` on the breaker at `breaker` (the `breaker_address` of a `FastPathLayout`),
/// its answer packed as the module's documentation says: [`KIND_ADMITTED`] or [`KIND_REFUSED`]
/// in bits 0-1 with the fields above, [`KIND_SPILLED`] when they do not fit, [`ANSWER_FAILED`]
/// when nothing was decided. An admitted permit is recorded with `FastPathWord.record`.
///
/// # Safety
/// `breaker` must be 0 or the address given by a `FastPathLayout` whose `word` object is still
/// alive (it holds the breaker).
#[no_mangle]
pub unsafe extern "C" fn holdoff_uniffi_direct_allow(breaker: u64) -> i64 {
    if breaker == 0 {
        return ANSWER_FAILED;
    }
    let answer = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the caller keeps the breaker alive (see above).
        let b = unsafe { &*(breaker as usize as *const holdoff::Breaker) };
        let answer: Answer = match b.allow() {
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
        };
        pack(answer).unwrap_or_else(|| {
            SPILLED.with(|s| s.set(Some(answer)));
            KIND_SPILLED
        })
    }));
    answer.unwrap_or(ANSWER_FAILED)
}

/// Takes this thread's spilled answer (see [`KIND_SPILLED`]): writes its three fields to
/// `out[0..3]` and returns [`DIRECT_ADMITTED`] or [`DIRECT_REFUSED`]; [`DIRECT_FAILED`] when
/// none is held or `out` is NULL.
///
/// # Safety
/// `out` must be NULL or valid for writing three `i64`.
#[no_mangle]
pub unsafe extern "C" fn holdoff_uniffi_direct_spilled(out: *mut i64) -> i32 {
    if out.is_null() {
        return DIRECT_FAILED;
    }
    match SPILLED.with(Cell::take) {
        Some((code, values)) => {
            // SAFETY: checked non-NULL; valid for three writes by contract.
            unsafe { std::ptr::copy_nonoverlapping(values.as_ptr(), out, 3) };
            code
        }
        None => DIRECT_FAILED,
    }
}

/// The packed answer's layout version, which `DirectJni.version` reports.
pub const DIRECT_VERSION: i32 = 1;

// The same two functions as JNI native methods of the Kotlin `dev.holdoff.DirectJni` (static,
// primitives only; the JNI environment and class are not used). A JNI call from the JVM costs
// a small fraction of a JNA one (no libffi closure and call, no error-number bookkeeping), and
// on a refusal that crossing is most of the cost. They are bound by
// `holdoff_uniffi_direct_register_jni`; FastPath calls the C functions above through JNA when
// that fails.

/// JNI `DirectJni.allow(breaker: Long): Long`: [`holdoff_uniffi_direct_allow`].
///
/// # Safety
/// As [`holdoff_uniffi_direct_allow`].
#[no_mangle]
pub unsafe extern "system" fn Java_dev_holdoff_DirectJni_allow(
    _env: *mut c_void,
    _class: *mut c_void,
    breaker: i64,
) -> i64 {
    // SAFETY: the caller's contract is the C function's.
    unsafe { holdoff_uniffi_direct_allow(breaker as u64) }
}

/// JNI `DirectJni.spilled(out: Long): Int`: [`holdoff_uniffi_direct_spilled`] (`out` an address).
///
/// # Safety
/// As [`holdoff_uniffi_direct_spilled`].
#[no_mangle]
pub unsafe extern "system" fn Java_dev_holdoff_DirectJni_spilled(
    _env: *mut c_void,
    _class: *mut c_void,
    out: i64,
) -> i32 {
    // SAFETY: the caller's contract is the C function's.
    unsafe { holdoff_uniffi_direct_spilled(out as usize as *mut i64) }
}

/// JNI `DirectJni.version(): Int`: [`DIRECT_VERSION`], checked once when the class binds; it
/// does nothing else, so it is also the benchmark's measure of the JNI crossing alone.
#[no_mangle]
pub extern "system" fn Java_dev_holdoff_DirectJni_version(_env: *mut c_void, _class: *mut c_void) -> i32 {
    DIRECT_VERSION
}

/// Binds `dev.holdoff.DirectJni`'s native methods (`allow`, `spilled`, `version`) to the JNI
/// entry points above, in this copy of the library: called through JNA with the caller's
/// `JNIEnv` (JNA's `JNIEnv.CURRENT`), so JNI needs no `System.load` (which needs the library's
/// file, and JNA deletes the copy it extracts from a jar once loaded). Returns 0 when bound;
/// -1 when `env` is NULL, the class is not found from the calling class's loader, or the JVM
/// refuses the methods (any pending Java exception is cleared).
///
/// # Safety
/// `env` must be NULL or the calling thread's `JNIEnv` pointer.
#[no_mangle]
pub unsafe extern "C" fn holdoff_uniffi_direct_register_jni(env: *mut c_void) -> i32 {
    let env = env.cast::<jni_sys::JNIEnv>();
    if env.is_null() {
        return -1;
    }
    let method = |name: &'static CStr, signature: &'static CStr, function: *mut c_void| {
        jni_sys::JNINativeMethod {
            // The JVM only reads them (jni.h declares them `char *` for C's sake).
            name: name.as_ptr().cast_mut(),
            signature: signature.as_ptr().cast_mut(),
            fnPtr: function,
        }
    };
    let methods = [
        method(c"allow", c"(J)J", Java_dev_holdoff_DirectJni_allow as *mut c_void),
        method(
            c"spilled",
            c"(J)I",
            Java_dev_holdoff_DirectJni_spilled as *mut c_void,
        ),
        method(
            c"version",
            c"()I",
            Java_dev_holdoff_DirectJni_version as *mut c_void,
        ),
    ];
    // SAFETY: `env` is the calling thread's JNIEnv (the caller's contract), which points to the
    // JVM's function table; FindClass, ExceptionClear and RegisterNatives are JNI 1.1 functions.
    unsafe {
        let table = &(**env).v1_1;
        let class = (table.FindClass)(env, c"dev/holdoff/DirectJni".as_ptr());
        if class.is_null() {
            (table.ExceptionClear)(env);
            return -1;
        }
        if (table.RegisterNatives)(env, class, methods.as_ptr(), methods.len() as i32) != 0 {
            (table.ExceptionClear)(env);
            return -1;
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    fn breaker(trip: u32, interval: Duration) -> (Arc<holdoff::ManualClock>, holdoff::Breaker) {
        let clock = Arc::new(holdoff::ManualClock::new());
        let b = holdoff::Breaker::new(
            holdoff::BreakerConfig {
                trip: holdoff::TripPolicy::ConsecutiveFailures { threshold: trip },
                open_interval: holdoff::Backoff::constant(interval),
                ..holdoff::BreakerConfig::default()
            },
            clock.clone(),
        )
        .unwrap();
        (clock, b)
    }

    fn fail(b: &holdoff::Breaker, episode: u32, probe: u32) {
        let p = holdoff::Permit::from(RawPermit {
            breaker: b.id(),
            episode,
            probe,
        });
        b.record(p, holdoff::Outcome::Failure).unwrap();
    }

    #[test]
    fn admits_then_refuses_with_the_time_to_the_probe() {
        let (clock, b) = breaker(1, Duration::from_secs(30));
        let addr = &b as *const holdoff::Breaker as u64;
        assert_eq!(unsafe { holdoff_uniffi_direct_allow(addr) }, KIND_ADMITTED);
        fail(&b, 0, 0);
        clock.advance(Duration::from_nanos(7));
        let refused = unsafe { holdoff_uniffi_direct_allow(addr) };
        // Open (1), episode 1, 30 s less 7 ns to the probe (plus 1 in the field).
        assert_eq!(
            refused,
            KIND_REFUSED | 1 << 2 | 1 << 5 | (30_000_000_000 - 7 + 1) << 21
        );
        // Due: a probe of episode 1 (the raw episode), probe id 1.
        clock.advance(Duration::from_secs(30));
        let probe = unsafe { holdoff_uniffi_direct_allow(addr) };
        assert_eq!(probe & 3, KIND_ADMITTED);
        assert_eq!(((probe >> 2) & 0xffff_ffff, probe >> 34), (1, 1));
        b.force_open();
        let forced = unsafe { holdoff_uniffi_direct_allow(addr) };
        // Forced open (3), no wait (0); the episode is the breaker's.
        assert_eq!(
            (forced & 3, (forced >> 2) & 7, forced >> 21),
            (KIND_REFUSED, 3, 0)
        );
        assert_eq!(unsafe { holdoff_uniffi_direct_allow(0) }, ANSWER_FAILED);
        let mut out = [7i64; 3];
        assert_eq!(
            unsafe { holdoff_uniffi_direct_spilled(out.as_mut_ptr()) },
            DIRECT_FAILED
        );
        assert_eq!(out, [7; 3]);
    }

    #[test]
    fn a_wait_too_long_to_pack_is_spilled_exactly_once() {
        let day = Duration::from_secs(86_400);
        let (clock, b) = breaker(1, day);
        let addr = &b as *const holdoff::Breaker as u64;
        fail(&b, 0, 0);
        clock.advance(Duration::from_nanos(3));
        assert_eq!(unsafe { holdoff_uniffi_direct_allow(addr) }, KIND_SPILLED);
        let mut out = [0i64; 3];
        assert_eq!(
            unsafe { holdoff_uniffi_direct_spilled(out.as_mut_ptr()) },
            DIRECT_REFUSED
        );
        assert_eq!(out, [86_400_000_000_000 - 3, 1, 1]);
        assert_eq!(
            unsafe { holdoff_uniffi_direct_spilled(out.as_mut_ptr()) },
            DIRECT_FAILED
        );
        assert_eq!(
            unsafe { holdoff_uniffi_direct_spilled(std::ptr::null_mut()) },
            DIRECT_FAILED
        );
    }

    #[test]
    fn packing_bounds() {
        assert_eq!(
            pack((DIRECT_ADMITTED, [u32::MAX.into(), (1 << 30) - 1, 0])),
            Some(!3)
        );
        assert_eq!(pack((DIRECT_ADMITTED, [0, 1 << 30, 0])), None);
        assert_eq!(
            pack((DIRECT_REFUSED, [(1 << 43) - 2, 4, (1 << 16) - 1])).map(|v| v >> 21),
            Some(-1)
        );
        assert_eq!(pack((DIRECT_REFUSED, [(1 << 43) - 1, 1, 0])), None);
        assert_eq!(pack((DIRECT_REFUSED, [0, 1, 1 << 16])), None);
        assert_eq!(
            pack((DIRECT_REFUSED, [-1, 3, 5])),
            Some(KIND_REFUSED | 3 << 2 | 5 << 5)
        );
    }
}
