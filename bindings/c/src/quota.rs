//! `holdoff_retry_quota`: the retry quota, a token bucket shared by an upstream's callers.

use std::sync::atomic::{AtomicU8, Ordering};

use hcore::interop::{take_lease, RawLease};
use hcore::{PermitError, RetryQuota};

use crate::config::{build, holdoff_config};
use crate::handle::{handle, non_null, write, Handle};
use crate::status::{boundary, holdoff_status, Fail};

/// A retry quota: retries cost tokens, retries after a timeout cost more, successes refund
/// (AWS SDK standard mode). Clock-free and lock-free; thread-safe. Free with
/// `holdoff_retry_quota_free`.
pub struct holdoff_retry_quota {
    _private: [u8; 0],
}

handle!(holdoff_retry_quota => RetryQuota, Quota, "quota");

/// The result of `holdoff_retry_quota_acquire`: a lease on the tokens of one retry. Give an acquired
/// lease back with `holdoff_retry_quota_on_success` on the quota that issued it, when the call finally
/// succeeds (at most once). A plain value: copy it freely, but give back only one copy.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct holdoff_quota_lease {
    /// Tokens the retry cost (or would have cost, if not acquired).
    pub cost: u64,
    /// Tokens left in the bucket after the acquisition.
    pub available: u64,
    /// 1 if the tokens were taken; 0 if the bucket could not pay (give up with
    /// `HOLDOFF_GIVE_UP_REASON_QUOTA_EMPTY`).
    pub acquired: u8,
    /// 0 until given back; the library sets it to 1 (atomically). Do not write it.
    pub returned: u8,
    /// Reserved, 0.
    pub reserved: u16,
    /// Internal: the issuing quota's id (0 when not acquired). Do not modify.
    pub raw_quota: u32,
}

/// Creates a full retry quota from `config`'s `quota` part (the core's defaults if it has none,
/// or if `config` is NULL). The configuration was validated when parsed.
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER` (`out`).
///
/// # Safety
/// `config` must be NULL or a live configuration handle; `out` NULL or valid for writing a
/// pointer. On success the caller owns `*out` and frees it once with `holdoff_retry_quota_free`.
#[no_mangle]
pub unsafe extern "C" fn holdoff_retry_quota_new(
    config: *const holdoff_config,
    out: *mut *mut holdoff_retry_quota,
) -> holdoff_status {
    // SAFETY: forwarded contract.
    unsafe { build(config, out, |c| Ok(RetryQuota::new(c.quota())?)) }
}

/// Releases a quota handle. NULL does nothing. A policy using the quota keeps it alive.
///
/// # Safety
/// `quota` must be NULL or a live quota handle, not used again afterwards and not in use by
/// another thread.
#[no_mangle]
pub unsafe extern "C" fn holdoff_retry_quota_free(quota: *mut holdoff_retry_quota) -> holdoff_status {
    // SAFETY: forwarded contract.
    unsafe { holdoff_retry_quota::free(quota) }
}

/// Takes the cost of one retry (`after_timeout` nonzero selects the timeout cost) and writes
/// the lease to `*out_lease`: `acquired` is 0 if the bucket could not pay (nothing taken).
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `quota` must be NULL or a live quota handle; `out_lease` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn holdoff_retry_quota_acquire(
    quota: *const holdoff_retry_quota,
    after_timeout: u8,
    out_lease: *mut holdoff_quota_lease,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let q = unsafe { holdoff_retry_quota::borrow(quota)? };
        non_null(out_lease, "out_lease")?;
        let lease = match q.acquire(after_timeout != 0) {
            Ok(lease) => {
                let raw = RawLease::from(lease);
                holdoff_quota_lease {
                    cost: raw.cost,
                    available: q.available(),
                    acquired: 1,
                    returned: 0,
                    reserved: 0,
                    raw_quota: raw.quota,
                }
            }
            Err(e) => holdoff_quota_lease {
                cost: e.cost,
                available: e.available,
                acquired: 0,
                returned: 0,
                reserved: 0,
                raw_quota: 0,
            },
        };
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out_lease, lease) };
        Ok(holdoff_status::Ok)
    })
}

/// A call succeeded: refunds `lease` (marking it returned), or, if `lease` is NULL (the call
/// needed no retry), adds the configured refill. Never fills past capacity. The core checks the
/// lease: it must come from this quota and be given back once.
///
/// Errors: `HOLDOFF_STATUS_FOREIGN_PERMIT` if another quota issued the lease (it stays usable
/// on its own quota); `HOLDOFF_STATUS_PERMIT_ALREADY_RECORDED` if it was already given back;
/// `HOLDOFF_STATUS_INVALID_INPUT` if it was not acquired (it holds no tokens); the field is
/// `lease` for all three, and the bucket is unchanged. `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `quota` must be NULL or a live quota handle; `lease` NULL or a valid, writable lease from
/// `holdoff_retry_quota_acquire` (other threads may give back the same lease concurrently; only one
/// succeeds).
#[no_mangle]
pub unsafe extern "C" fn holdoff_retry_quota_on_success(
    quota: *const holdoff_retry_quota,
    lease: *mut holdoff_quota_lease,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let q = unsafe { holdoff_retry_quota::borrow(quota)? };
        if lease.is_null() {
            q.on_success(None).map_err(lease_error)?;
            return Ok(holdoff_status::Ok);
        }
        // SAFETY: non-NULL; valid for reads by contract.
        let (acquired, raw) = unsafe {
            (
                (*lease).acquired,
                RawLease {
                    quota: (*lease).raw_quota,
                    cost: (*lease).cost,
                },
            )
        };
        // The struct doubles as the answer to a failed acquisition, which took nothing.
        if acquired == 0 {
            return Err(Fail::input("lease", "was not acquired: nothing to give back"));
        }
        // SAFETY: the field is a valid, aligned `u8` for the lease's lifetime (contract) and
        // holdoff only accesses it atomically: one of two concurrent returns wins.
        let flag = unsafe { AtomicU8::from_ptr(std::ptr::addr_of_mut!((*lease).returned)) };
        let taken = take_lease(raw, q, || flag.swap(1, Ordering::AcqRel) != 0).map_err(lease_error)?;
        q.on_success(Some(taken)).map_err(lease_error)?;
        Ok(holdoff_status::Ok)
    })
}

fn lease_error(e: PermitError) -> Fail {
    match e {
        PermitError::Foreign => Fail::new(
            holdoff_status::ForeignPermit,
            "lease",
            "this quota lease was issued by another quota",
        ),
        PermitError::AlreadyRecorded => Fail::new(
            holdoff_status::PermitAlreadyRecorded,
            "lease",
            "this quota lease was already given back",
        ),
    }
}

/// Writes the tokens left to `*out_available`.
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `quota` must be NULL or a live quota handle; `out_available` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn holdoff_retry_quota_available(
    quota: *const holdoff_retry_quota,
    out_available: *mut u64,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let q = unsafe { holdoff_retry_quota::borrow(quota)? };
        non_null(out_available, "out_available")?;
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out_available, q.available()) };
        Ok(holdoff_status::Ok)
    })
}

const _: () = assert!(std::mem::size_of::<holdoff_quota_lease>() == 24);
