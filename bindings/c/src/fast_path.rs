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

/// The layout and protocol version of the refusal block `holdoff_breaker_refusal_path`
/// describes. A caller built for another version must not use the block (and calls
/// `holdoff_breaker_allow` instead).
pub const HOLDOFF_REFUSAL_PATH_VERSION: u32 = 1;

const _: () = assert!(HOLDOFF_REFUSAL_PATH_VERSION == hcore::breaker::REFUSAL_PATH_VERSION);

/// Where a breaker's refusal block is: what a refusal of an open breaker reads and writes, so a
/// caller can refuse without calling into the library (docs/ffi.md "The refusal block").
///
/// The block starts at the fast-path word: `refuse_until` is at byte offset 8 from `word`,
/// `refusals` at 16 and `seq` at 24 (the pointers are given as well). Every cell is read with an
/// atomic load (acquire or stronger); the caller writes nothing but an atomic add of 1 to
/// `*refusals` for each refusal it makes.
///
/// Protocol (version 1), `now` being nanoseconds on the breaker's clock and never earlier than
/// the clock would read:
/// 1. `s = load(seq)`, then `w = load(word)`; if `(w & counting_mask) != 0` call the library.
/// 2. State `w & 7`: forced open (3): refused with no retry-after. Open (1) or half-open (2):
///    `until = load(refuse_until)`; if `s` is odd, `until == 0` or `load(seq) != s`, call the
///    library; else if `now >= until` call the library; else refused, retry after
///    `until - now` ns. Any other state: call the library.
/// 3. A refusal adds 1 to `*refusals` and carries the state and the episode `(uint32_t)(w >> 32)`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct holdoff_refusal_path {
    /// The fast-path word (as `holdoff_fast_path.word`); the block's start.
    pub word: *const u64,
    /// The refusal deadline, nanoseconds on the breaker's clock; 0 when a refusal needs the
    /// library.
    pub refuse_until: *const u64,
    /// The breaker's refusal count (its snapshot's `refusals`): add 1 atomically per refusal.
    pub refusals: *mut u64,
    /// The sequence counter: odd while the library changes the word's state or the deadline.
    pub seq: *const u32,
    /// The word's bits that send every refusal to the library when set (the counting flag).
    pub counting_mask: u64,
    /// `HOLDOFF_REFUSAL_PATH_VERSION` as the library sees it: use the block only if it matches.
    pub version: u32,
}

/// Writes where `breaker`'s refusal block is to `*out`. Its addresses are fixed for the
/// breaker's life and valid as long as the fast-path word's (see `holdoff_breaker_fast_path`).
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER` (`breaker`, `out`).
///
/// # Safety
/// `breaker` must be NULL or a live breaker handle; `out` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn holdoff_breaker_refusal_path(
    breaker: *const holdoff_breaker,
    out: *mut holdoff_refusal_path,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let b = unsafe { holdoff_breaker::borrow(breaker)? };
        non_null(out, "out")?;
        let cells = b.refusal_cells();
        let rp = holdoff_refusal_path {
            word: b.fast_path_word().as_ptr().cast_const(),
            refuse_until: cells.refuse_until.as_ptr().cast_const(),
            refusals: cells.refusals.as_ptr(),
            seq: cells.seq.as_ptr().cast_const(),
            counting_mask: FAST_PATH_COUNTING,
            version: HOLDOFF_REFUSAL_PATH_VERSION,
        };
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out, rp) };
        Ok(holdoff_status::Ok)
    })
}

#[cfg(test)]
mod tests {
    use std::ptr;
    use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

    use super::*;
    use crate::breaker::{
        holdoff_breaker_allow, holdoff_breaker_free, holdoff_breaker_new, holdoff_breaker_record,
    };
    use crate::breaker::{holdoff_breaker_snapshot, holdoff_permit, holdoff_refusal, holdoff_snapshot};
    use crate::clock::{holdoff_clock_free, holdoff_clock_new_manual, holdoff_clock_set};

    /// The protocol of `holdoff_refusal_path` as a C caller runs it: `Some((state, episode,
    /// retry_after_ns))` when refused on the block, `None` to call the library.
    fn refuse(rp: &holdoff_refusal_path, now: u64) -> Option<(u32, u32, Option<u64>)> {
        // SAFETY: the breaker behind `rp` is alive for the whole test; the cells are atomics.
        let (word, until, refusals, seq) = unsafe {
            (
                AtomicU64::from_ptr(rp.word.cast_mut()),
                AtomicU64::from_ptr(rp.refuse_until.cast_mut()),
                AtomicU64::from_ptr(rp.refusals),
                AtomicU32::from_ptr(rp.seq.cast_mut()),
            )
        };
        let s = seq.load(Ordering::Acquire);
        let w = word.load(Ordering::Acquire);
        if w & rp.counting_mask != 0 {
            return None;
        }
        let retry = match w & 7 {
            3 => None,
            1 | 2 => {
                let u = until.load(Ordering::Acquire);
                if s & 1 != 0 || u == 0 || seq.load(Ordering::Acquire) != s || now >= u {
                    return None;
                }
                Some(u - now)
            }
            _ => return None,
        };
        refusals.fetch_add(1, Ordering::Relaxed);
        Some(((w & 7) as u32, (w >> 32) as u32, retry))
    }

    #[test]
    fn a_refusal_on_the_block_is_the_librarys() {
        let mut clock = ptr::null_mut();
        let mut b = ptr::null_mut();
        let mut rp = std::mem::MaybeUninit::<holdoff_refusal_path>::uninit();
        // SAFETY: valid out-parameters; a NULL configuration is the defaults.
        unsafe {
            assert_eq!(holdoff_clock_new_manual(0, &mut clock), holdoff_status::Ok);
            assert_eq!(
                holdoff_breaker_new(ptr::null(), clock, &mut b),
                holdoff_status::Ok
            );
            assert_eq!(
                holdoff_breaker_refusal_path(b, rp.as_mut_ptr()),
                holdoff_status::Ok
            );
            assert_eq!(
                holdoff_breaker_refusal_path(ptr::null(), rp.as_mut_ptr()),
                holdoff_status::NullParameter
            );
        }
        // SAFETY: written on success.
        let rp = unsafe { rp.assume_init() };
        assert_eq!(rp.version, HOLDOFF_REFUSAL_PATH_VERSION);
        assert_eq!(rp.counting_mask, FAST_PATH_COUNTING);
        let base = rp.word as usize;
        assert_eq!(
            (
                rp.refuse_until as usize - base,
                rp.refusals as usize - base,
                rp.seq as usize - base
            ),
            (8, 16, 24)
        );
        assert_eq!(refuse(&rp, 0), None, "closed");
        // SAFETY: live breaker; permits it issued; valid out-parameters.
        let lib = |at: u64| unsafe {
            assert_eq!(holdoff_clock_set(clock, at), holdoff_status::Ok);
            let mut p = std::mem::zeroed::<holdoff_permit>();
            let mut r = std::mem::zeroed::<holdoff_refusal>();
            let st = holdoff_breaker_allow(b, &mut p, &mut r);
            assert_eq!(st, holdoff_status::BreakerOpen);
            (
                r.state,
                r.episode,
                (r.has_retry_after != 0).then_some(r.retry_after_ns),
            )
        };
        for _ in 0..5 {
            // SAFETY: as above.
            unsafe {
                let mut p = std::mem::zeroed::<holdoff_permit>();
                let mut r = std::mem::zeroed::<holdoff_refusal>();
                assert_eq!(holdoff_breaker_allow(b, &mut p, &mut r), holdoff_status::Ok);
                assert_eq!(
                    holdoff_breaker_record(b, &mut p, 2, 0, ptr::null_mut()),
                    holdoff_status::Ok
                );
            }
        }
        let on_block = refuse(&rp, 1_000_000_000).expect("open, before the deadline");
        assert_eq!(on_block, lib(1_000_000_000));
        assert_eq!(on_block.0, 1, "open");
        let snap = || {
            // SAFETY: live breaker, valid out-parameter.
            unsafe {
                let mut s = std::mem::zeroed::<holdoff_snapshot>();
                assert_eq!(holdoff_breaker_snapshot(b, &mut s), holdoff_status::Ok);
                s
            }
        };
        assert_eq!(snap().refusals, 2, "the block's refusal and the library's");
        let until = on_block.2.unwrap() + 1_000_000_000;
        assert_eq!(refuse(&rp, until), None, "at the deadline the library decides");
        assert_eq!(snap().refusals, 2);
        // SAFETY: live handles, freed once.
        unsafe {
            assert_eq!(holdoff_breaker_free(b), holdoff_status::Ok);
            assert_eq!(holdoff_clock_free(clock), holdoff_status::Ok);
        }
    }
}
