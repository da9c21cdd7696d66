//! The fast-path word of a breaker, for callers that admit a call and record a clean success
//! without calling into the library (docs/ffi.md "The fast-path word"). The header's
//! `holdoff_fast_allow` and `holdoff_fast_record_success` (static inline, GCC and Clang) are
//! the C side; other bindings read the word with their own atomics.

use hcore::{FAST_PATH_COUNTING, FAST_PATH_STATE_MASK, FAST_PATH_VERSION};

use crate::breaker::holdoff_breaker;
use crate::handle::{non_null, write, Handle};
use crate::status::{boundary, holdoff_status};

/// The layout version of the fast-path word `holdoff_breaker_fast_path` describes. A caller
/// built for another version must not read the word (and calls the library instead).
pub const HOLDOFF_FAST_PATH_VERSION: u32 = 1;
/// The bits of the word that must all be 0 for a call to be admitted without the library:
/// the state (bits 0..3, 0 = closed) and the counting flag (bit 3).
pub const HOLDOFF_FAST_PATH_ADMIT_MASK: u64 = 0xF;

const _: () = assert!(HOLDOFF_FAST_PATH_VERSION == FAST_PATH_VERSION);
const _: () = assert!(HOLDOFF_FAST_PATH_ADMIT_MASK == FAST_PATH_STATE_MASK | FAST_PATH_COUNTING);

/// Where a breaker's fast-path word is and how to read it.
///
/// The word is a 64-bit value, read atomically with acquire ordering (never written by the
/// caller). Layout (version 1): bits 0..3 the state (0 closed, 1 open, 2 half-open, 3 forced
/// open, 4 disabled); bit 3 set while the breaker's metrics count every call; bit 4 set when the
/// trip policy counts over a time window; bits 5..32 consecutive failures; bits 32..64 the
/// episode.
///
/// - Admission: if `(word & admit_mask) == 0`, the call is admitted with a permit whose
///   `raw_breaker` is `breaker`, `raw_episode` is `word >> 32` and every other field 0.
/// - Success: a permit admitted that way (or by `holdoff_breaker_allow` while closed, so
///   `raw_probe == 0`) that succeeded needs no record when `word == (uint64_t)raw_episode << 32`
///   (closed in that episode, no flag, no failure pending): recording it would change nothing.
/// - Anything else goes through `holdoff_breaker_allow` / `holdoff_breaker_record`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct holdoff_fast_path {
    /// The word; valid while the breaker handle (or a policy or group holding the breaker) lives.
    pub word: *const u64,
    /// `HOLDOFF_FAST_PATH_ADMIT_MASK` as the library sees it.
    pub admit_mask: u64,
    /// The breaker's id, for the permits admitted on the word.
    pub breaker: u32,
    /// `HOLDOFF_FAST_PATH_VERSION` as the library sees it: read the word only if it matches.
    pub version: u32,
}

/// Writes where `breaker`'s fast-path word is to `*out`. The word's address is fixed for the
/// breaker's life; reading it after `holdoff_breaker_free` (with nothing else holding the
/// breaker) is a use after free.
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER` (`breaker`, `out`).
///
/// # Safety
/// `breaker` must be NULL or a live breaker handle; `out` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn holdoff_breaker_fast_path(
    breaker: *const holdoff_breaker,
    out: *mut holdoff_fast_path,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let b = unsafe { holdoff_breaker::borrow(breaker)? };
        non_null(out, "out")?;
        let fp = holdoff_fast_path {
            word: b.fast_path_word().as_ptr().cast_const(),
            admit_mask: HOLDOFF_FAST_PATH_ADMIT_MASK,
            breaker: b.id(),
            version: HOLDOFF_FAST_PATH_VERSION,
        };
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out, fp) };
        Ok(holdoff_status::Ok)
    })
}
