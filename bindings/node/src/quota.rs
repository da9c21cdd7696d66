//! The retry quota (`holdoff::RetryQuota`), a token bucket, and the leases it issues.

use std::sync::Arc;

use holdoff::interop::LeaseSlot;
use holdoff::{PermitError, RetryQuota};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::{err, opts};

/// A retry quota.
pub struct QuotaBox {
    pub(crate) quota: Arc<RetryQuota>,
}

/// A retry quota (token bucket) from options.
#[napi(catch_unwind)]
pub fn quota_new(env: &Env, options: Unknown<'_>) -> Result<External<QuotaBox>> {
    let cfg = opts::quota(env, Some(options))?
        .to_config()
        .map_err(|e| err::config(env, &e))?;
    let quota = RetryQuota::new(cfg).map_err(|e| err::config(env, &e))?;
    Ok(External::new(QuotaBox {
        quota: Arc::new(quota),
    }))
}

/// A lease the quota issued, held as one native object: the core's `LeaseSlot` gives it back at
/// most once and only to its own quota.
pub struct LeaseBox {
    slot: LeaseSlot,
}

/// Takes the cost of one retry: `{ acquired: true, cost, available, lease }` (`lease` the handle
/// to give back with `quotaGiveBack`) or `{ acquired: false, cost, available }`.
#[napi(catch_unwind)]
pub fn quota_acquire<'e>(env: &'e Env, h: &External<QuotaBox>, after_timeout: bool) -> Result<Object<'e>> {
    let mut o = Object::new(env)?;
    match h.quota.acquire(after_timeout) {
        Ok(lease) => {
            o.set("acquired", true)?;
            o.set("cost", lease.cost() as f64)?;
            o.set(
                "lease",
                External::new(LeaseBox {
                    slot: LeaseSlot::new(lease),
                }),
            )?;
        }
        Err(e) => {
            o.set("acquired", false)?;
            o.set("cost", e.cost as f64)?;
        }
    }
    o.set("available", h.quota.available() as f64)?;
    Ok(o)
}

/// A call succeeded without a retry: adds the success refill. Returns the tokens left.
#[napi(catch_unwind)]
pub fn quota_on_success(h: &External<QuotaBox>) -> f64 {
    // Without a lease there is nothing foreign to refuse.
    let _ = h.quota.on_success(None);
    h.quota.available() as f64
}

/// A call succeeded after a retry: gives `lease` back to the quota (the core's `LeaseSlot::take`
/// and `RetryQuota::on_success`). Returns the tokens left, or -1 when another quota issued the
/// lease, -2 when it was already given back (the bucket is then unchanged).
#[napi(catch_unwind)]
pub fn quota_give_back(h: &External<QuotaBox>, lease: &External<LeaseBox>) -> f64 {
    match lease
        .slot
        .take(&h.quota)
        .and_then(|l| h.quota.on_success(Some(l)))
    {
        Ok(()) => h.quota.available() as f64,
        Err(PermitError::Foreign) => -1.0,
        Err(PermitError::AlreadyRecorded) => -2.0,
    }
}

/// Whether the lease was given back.
#[napi(catch_unwind)]
pub fn lease_given_back(lease: &External<LeaseBox>) -> bool {
    lease.slot.is_taken()
}

/// Tokens left.
#[napi(catch_unwind)]
pub fn quota_available(h: &External<QuotaBox>) -> f64 {
    h.quota.available() as f64
}
