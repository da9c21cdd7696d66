//! `holdoff_policy`: one upstream's breaker, budget and quota composed (`docs/contract.md` §5).
//!
//! A retry loop in C, on these two calls only:
//! ```c
//! holdoff_policy_call *call; holdoff_policy_call_new(&call);
//! for (;;) {
//!     holdoff_before b; holdoff_permit p;
//!     holdoff_policy_before_attempt(policy, call, &b, &p);
//!     if (b.action == HOLDOFF_BEFORE_ACTION_WAIT) { sleep_ns(b.delay_ns); continue; }
//!     if (b.action == HOLDOFF_BEFORE_ACTION_GIVE_UP) break;
//!     int status = do_request();
//!     holdoff_decision d;
//!     holdoff_policy_after_response(policy, call, &p, status, headers, n, &d, NULL);
//!     if (d.kind != HOLDOFF_DECISION_KIND_RETRY) break;
//!     sleep_ns(d.delay_ns);
//! }
//! holdoff_policy_call_free(call);
//! ```

use std::sync::{Arc, Mutex};

use hcore::{Before, Call, Policy};

use crate::breaker::{holdoff_breaker, holdoff_permit, permit_to_c, take_permit};
use crate::budget::{decision_to_c, holdoff_decision, holdoff_retry_budget};
use crate::handle::{handle, non_null, write, Handle};
use crate::http::{classification_to_c, holdoff_classification, holdoff_classifier, holdoff_header};
use crate::quota::holdoff_retry_quota;
use crate::status::{boundary, holdoff_status};
use crate::types::{holdoff_before_action, holdoff_give_up_reason, ns, opt_ns, outcome_from_c};

/// One upstream's breaker, retry budget, optional quota and classifier. Thread-safe: share it
/// between the upstream's callers; each logical call has its own `holdoff_policy_call`. Free
/// with `holdoff_policy_free`.
pub struct holdoff_policy {
    _private: [u8; 0],
}

handle!(holdoff_policy => PolicyHandle, Policy, "policy", on_free = PolicyHandle::release);

/// What a policy handle stands for: the core's policy, an owner of its breaker's fleet link (if
/// the breaker has one) until the policy handle is freed.
pub(crate) struct PolicyHandle {
    policy: Policy,
}

impl PolicyHandle {
    fn release(&self) {
        crate::fleet::release(self.policy.breaker());
    }
}

impl std::ops::Deref for PolicyHandle {
    type Target = Policy;

    fn deref(&self) -> &Policy {
        &self.policy
    }
}

/// An owning reference to a policy handle's policy, as an execution holds it.
pub(crate) struct PolicyRef(pub(crate) Arc<PolicyHandle>);

impl std::ops::Deref for PolicyRef {
    type Target = Policy;

    fn deref(&self) -> &Policy {
        &self.0.policy
    }
}

/// The state of one logical call (all its attempts) under a policy. Thread-safe (internally
/// locked). Free with `holdoff_policy_call_free`.
pub struct holdoff_policy_call {
    _private: [u8; 0],
}

handle!(holdoff_policy_call => Mutex<Call>, PolicyCall, "call");

/// What to do before an attempt (`holdoff_policy_before_attempt`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct holdoff_before {
    /// How long to wait before asking again, ns (action `WAIT`).
    pub delay_ns: u64,
    /// The breaker's time until its next probe, ns (action `GIVE_UP`, `has_retry_after`).
    pub retry_after_ns: u64,
    /// The `holdoff_before_action`.
    pub action: u32,
    /// The `holdoff_give_up_reason` (action `GIVE_UP`: always `BREAKER_OPEN`).
    pub reason: u32,
    /// 1 if `retry_after_ns` is set (0 while forced open).
    pub has_retry_after: u8,
}

/// Composes a policy. `quota` and `classifier` may be NULL (no quota; the default
/// classifier). The policy keeps its parts alive; free your own handles when you like.
///
/// Errors: `HOLDOFF_STATUS_INVALID_CONFIG` (field `policy.clock`) if the breaker and the budget
/// do not share one clock handle's clock; `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `breaker`, `budget` must be NULL or live handles; `quota`, `classifier` NULL or live
/// handles; `out` NULL or valid for writing a pointer. On success the caller owns `*out` and
/// frees it once with `holdoff_policy_free`.
#[no_mangle]
pub unsafe extern "C" fn holdoff_policy_new(
    breaker: *const holdoff_breaker,
    budget: *const holdoff_retry_budget,
    quota: *const holdoff_retry_quota,
    classifier: *const holdoff_classifier,
    out: *mut *mut holdoff_policy,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract (each clone checks NULL and, in debug, liveness).
        let b = unsafe { holdoff_breaker::clone_arc(breaker)? };
        // SAFETY: as above.
        let g = unsafe { holdoff_retry_budget::clone_arc(budget)? };
        let q = if quota.is_null() {
            None
        } else {
            // SAFETY: as above.
            Some(unsafe { holdoff_retry_quota::clone_arc(quota)? })
        };
        let c = if classifier.is_null() {
            hcore::Classifier::default()
        } else {
            // SAFETY: as above.
            unsafe { holdoff_classifier::borrow(classifier)? }.clone()
        };
        non_null(out, "out")?;
        let policy = Policy::new(b, g, q, c)?;
        crate::fleet::acquire(policy.breaker());
        let p = Arc::new(PolicyHandle { policy });
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out, holdoff_policy::into_ptr(p)) };
        Ok(holdoff_status::Ok)
    })
}

/// Releases a policy handle. NULL does nothing.
///
/// # Safety
/// `policy` must be NULL or a live policy handle, not used again afterwards and not in use by
/// another thread.
#[no_mangle]
pub unsafe extern "C" fn holdoff_policy_free(policy: *mut holdoff_policy) -> holdoff_status {
    // SAFETY: forwarded contract.
    unsafe { holdoff_policy::free(policy) }
}

/// Creates the state of a fresh logical call.
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `out` must be NULL or valid for writing a pointer. On success the caller owns `*out` and
/// frees it once with `holdoff_policy_call_free`.
#[no_mangle]
pub unsafe extern "C" fn holdoff_policy_call_new(out: *mut *mut holdoff_policy_call) -> holdoff_status {
    boundary(|| {
        non_null(out, "out")?;
        let c = Arc::new(Mutex::new(Call::new()));
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out, holdoff_policy_call::into_ptr(c)) };
        Ok(holdoff_status::Ok)
    })
}

/// Releases a call state. NULL does nothing.
///
/// # Safety
/// `call` must be NULL or a live call handle, not used again afterwards and not in use by
/// another thread.
#[no_mangle]
pub unsafe extern "C" fn holdoff_policy_call_free(call: *mut holdoff_policy_call) -> holdoff_status {
    // SAFETY: forwarded contract.
    unsafe { holdoff_policy_call::free(call) }
}

/// Writes the attempts admitted so far for the call to `*out_attempts`.
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `call` must be NULL or a live call handle; `out_attempts` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn holdoff_policy_call_attempts(
    call: *const holdoff_policy_call,
    out_attempts: *mut u32,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { holdoff_policy_call::borrow(call)? };
        non_null(out_attempts, "out_attempts")?;
        let n = c.lock().unwrap_or_else(|e| e.into_inner()).attempts();
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out_attempts, n) };
        Ok(holdoff_status::Ok)
    })
}

/// Before an attempt: go (the permit is written to `*out_permit`), wait for the breaker, or
/// give up now because the breaker stays open beyond what is left of the budget. A first
/// attempt does not wait for an open breaker. Reads the clock at most once.
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `policy`, `call` must be NULL or live handles; `out`, `out_permit` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn holdoff_policy_before_attempt(
    policy: *const holdoff_policy,
    call: *const holdoff_policy_call,
    out: *mut holdoff_before,
    out_permit: *mut holdoff_permit,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let p = unsafe { holdoff_policy::borrow(policy)? };
        // SAFETY: forwarded contract.
        let c = unsafe { holdoff_policy_call::borrow(call)? };
        non_null(out, "out")?;
        non_null(out_permit, "out_permit")?;
        let before = p.before_attempt(&mut c.lock().unwrap_or_else(|e| e.into_inner()));
        let mut b = holdoff_before {
            delay_ns: 0,
            retry_after_ns: 0,
            action: holdoff_before_action::Go as u32,
            reason: 0,
            has_retry_after: 0,
        };
        match before {
            Before::Go(permit) => {
                // SAFETY: checked non-NULL; valid by contract.
                unsafe { write(out_permit, permit_to_c(permit)) };
            }
            Before::Wait(d) => {
                b.action = holdoff_before_action::Wait as u32;
                b.delay_ns = ns(d);
            }
            Before::GiveUp { reason, retry_after } => {
                b.action = holdoff_before_action::GiveUp as u32;
                b.reason = holdoff_give_up_reason::from(reason) as u32;
                (b.has_retry_after, b.retry_after_ns) = opt_ns(retry_after);
            }
        }
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out, b) };
        Ok(holdoff_status::Ok)
    })
}

/// After an attempt: records the outcome (`holdoff_outcome`, with the provider's delay for
/// `RETRY_LATER`) on the breaker, asks the budget, takes a retry's cost from the quota, and
/// writes done, retry after a delay, or give up. The delay is never shorter than the breaker
/// needs before it would admit the retry. Reads the clock at most once.
///
/// Errors: `HOLDOFF_STATUS_FOREIGN_PERMIT`, `HOLDOFF_STATUS_PERMIT_ALREADY_RECORDED`,
/// `HOLDOFF_STATUS_INVALID_INPUT` (unknown outcome), `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `policy`, `call` must be NULL or live handles; `permit` NULL or a valid, writable permit
/// from `holdoff_policy_before_attempt`; `out` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn holdoff_policy_after_attempt(
    policy: *const holdoff_policy,
    call: *const holdoff_policy_call,
    permit: *mut holdoff_permit,
    outcome: u32,
    retry_later_ns: u64,
    out: *mut holdoff_decision,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let p = unsafe { holdoff_policy::borrow(policy)? };
        // SAFETY: forwarded contract.
        let c = unsafe { holdoff_policy_call::borrow(call)? };
        non_null(permit, "permit")?;
        non_null(out, "out")?;
        let o = outcome_from_c(outcome, retry_later_ns)?;
        // SAFETY: non-NULL; valid and writable by contract.
        let taken = unsafe { take_permit(permit, p.breaker())? };
        let d = p.after_attempt(&mut c.lock().unwrap_or_else(|e| e.into_inner()), taken, o)?;
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out, decision_to_c(d)) };
        Ok(holdoff_status::Ok)
    })
}

/// `holdoff_policy_after_attempt` for an HTTP response: classifies (`status`, headers) with the
/// policy's classifier at the decision's one clock reading (so HTTP-dates and the delay agree),
/// then decides. Writes the classification to `*out_classification` if it is not NULL.
/// `status` is whatever integer the HTTP client gave: 0..=999 is a status (one outside
/// 100..=599 is a broken upstream, recorded as a failure).
///
/// Errors: `HOLDOFF_STATUS_INVALID_INPUT` for a value outside 0..=999 (negative, 1000, 70000;
/// field `status`): the permit is then recorded as cancelled (a probe frees its slot at once,
/// its window stays spent) and cannot be recorded again; `HOLDOFF_STATUS_FOREIGN_PERMIT`,
/// `HOLDOFF_STATUS_PERMIT_ALREADY_RECORDED`, `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// As `holdoff_policy_after_attempt`; `headers` valid for reading `n_headers` headers;
/// `out_classification` NULL or valid for a write.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn holdoff_policy_after_response(
    policy: *const holdoff_policy,
    call: *const holdoff_policy_call,
    permit: *mut holdoff_permit,
    status: i64,
    headers: *const holdoff_header,
    n_headers: usize,
    out: *mut holdoff_decision,
    out_classification: *mut holdoff_classification,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let p = unsafe { holdoff_policy::borrow(policy)? };
        // SAFETY: forwarded contract.
        let c = unsafe { holdoff_policy_call::borrow(call)? };
        non_null(permit, "permit")?;
        non_null(out, "out")?;
        // SAFETY: forwarded contract.
        let hs = unsafe { crate::http::headers(headers, n_headers)? };
        // SAFETY: non-NULL; valid and writable by contract.
        let taken = unsafe { take_permit(permit, p.breaker())? };
        let (d, cls) = p.after_response(
            &mut c.lock().unwrap_or_else(|e| e.into_inner()),
            taken,
            status,
            hs.iter().map(|(n, v)| (n.as_str(), v.as_str())),
        )?;
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out, decision_to_c(d)) };
        if !out_classification.is_null() {
            // SAFETY: non-NULL; valid by contract.
            unsafe { write(out_classification, classification_to_c(&cls)) };
        }
        Ok(holdoff_status::Ok)
    })
}
