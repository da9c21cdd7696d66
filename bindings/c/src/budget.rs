//! `holdoff_retry_budget` (the retry budget) and `holdoff_retry_state` (one logical call's part).

use std::sync::{Arc, Mutex};

use hcore::interop::DecisionParts;
use hcore::{Decision, RetryBudget, RetryState};

use crate::clock::holdoff_clock;
use crate::config::{build, holdoff_config};
use crate::handle::{handle, non_null, write, Handle};
use crate::status::{boundary, holdoff_status};
use crate::types::{
    holdoff_decision_kind, holdoff_give_up_reason, holdoff_wait_source, ns, opt_ns, outcome_from_c,
};

/// The retry budget of one upstream (`docs/contract.md` §4): when to retry, how long to wait,
/// when to give up. Shared by every caller of the upstream; thread-safe. Free with
/// `holdoff_retry_budget_free`.
pub struct holdoff_retry_budget {
    _private: [u8; 0],
}

handle!(holdoff_retry_budget => RetryBudget, Budget, "budget");

/// The per-call part of retrying (retries taken, first failure): one per logical call, across
/// its attempts. Thread-safe (internally locked). Free with `holdoff_retry_state_free`.
pub struct holdoff_retry_state {
    _private: [u8; 0],
}

handle!(holdoff_retry_state => Mutex<RetryState>, RetryState, "state");

/// A retry decision (`holdoff_retry_budget_decide`, `holdoff_policy_after_attempt`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct holdoff_decision {
    /// How long to wait before the next attempt, ns (kind `RETRY`); never negative, never
    /// shorter than the server asked up to the cap.
    pub delay_ns: u64,
    /// The server's own Retry-After before the cap, ns (`has_server_delay`).
    pub server_delay_ns: u64,
    /// The `holdoff_decision_kind`.
    pub kind: u32,
    /// The `holdoff_wait_source` (kind `RETRY`).
    pub source: u32,
    /// The `holdoff_give_up_reason` (kind `GIVE_UP`).
    pub reason: u32,
    /// 1 if the cap shortened the server's value (kind `RETRY`; never silent).
    pub capped: u8,
    /// 1 if `server_delay_ns` is set (kind `RETRY` on the Retry-After path; kind `GIVE_UP` when
    /// the server's delay was the reason, e.g. `RETRY_AFTER_ABOVE_CAP`).
    pub has_server_delay: u8,
}

/// A budget's rate-limit episode (`holdoff_retry_budget_episode`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct holdoff_episode {
    /// When the episode started, ns since the clock's origin (if `active`).
    pub start_ns: u64,
    /// 1 if a rate-limit episode is under way.
    pub active: u8,
}

pub(crate) fn decision_to_c(d: Decision) -> holdoff_decision {
    let p = DecisionParts::from(d);
    let (has_server_delay, server_delay_ns) = opt_ns(p.server_delay);
    holdoff_decision {
        delay_ns: ns(p.delay),
        server_delay_ns,
        kind: holdoff_decision_kind::from(p.kind) as u32,
        source: p.source.map_or(0, |s| holdoff_wait_source::from(s) as u32),
        reason: p.reason.map_or(0, |r| holdoff_give_up_reason::from(r) as u32),
        capped: u8::from(p.capped),
        has_server_delay,
    }
}

/// Creates a retry budget from `config`'s `budget` part (the core's defaults if it has none, or
/// if `config` is NULL), reading `clock` (share the clock with the breaker of a policy). The
/// configuration was validated when parsed.
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER` (`clock`, `out`).
///
/// # Safety
/// `config` must be NULL or a live configuration handle; `clock` NULL or a live clock handle;
/// `out` NULL or valid for writing a pointer. On success the caller owns `*out` and frees it
/// once with `holdoff_retry_budget_free`.
#[no_mangle]
pub unsafe extern "C" fn holdoff_retry_budget_new(
    config: *const holdoff_config,
    clock: *const holdoff_clock,
    out: *mut *mut holdoff_retry_budget,
) -> holdoff_status {
    // SAFETY: forwarded contract.
    unsafe {
        build(config, out, |c| {
            let k = holdoff_clock::borrow(clock)?;
            Ok(RetryBudget::new(c.budget(), Arc::clone(&k.clock))?)
        })
    }
}

/// Releases a budget handle. NULL does nothing. A policy using the budget keeps it alive.
///
/// # Safety
/// `budget` must be NULL or a live budget handle, not used again afterwards and not in use by
/// another thread.
#[no_mangle]
pub unsafe extern "C" fn holdoff_retry_budget_free(budget: *mut holdoff_retry_budget) -> holdoff_status {
    // SAFETY: forwarded contract.
    unsafe { holdoff_retry_budget::free(budget) }
}

/// Decides what to do after an attempt's outcome (`holdoff_outcome`, plus the provider's
/// delay for `RETRY_LATER`), updating the call's `state`: done, retry after a delay, or give
/// up. Reads the clock at most once (not at all for a success or a final answer).
///
/// Errors: `HOLDOFF_STATUS_INVALID_INPUT` for an unknown outcome;
/// `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `budget` and `state` must be NULL or live handles of their types; `out` NULL or valid for a
/// write.
#[no_mangle]
pub unsafe extern "C" fn holdoff_retry_budget_decide(
    budget: *const holdoff_retry_budget,
    state: *const holdoff_retry_state,
    outcome: u32,
    retry_later_ns: u64,
    out: *mut holdoff_decision,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let b = unsafe { holdoff_retry_budget::borrow(budget)? };
        // SAFETY: forwarded contract.
        let s = unsafe { holdoff_retry_state::borrow(state)? };
        non_null(out, "out")?;
        let o = outcome_from_c(outcome, retry_later_ns)?;
        let d = b.decide(&mut s.lock().unwrap_or_else(|e| e.into_inner()), o);
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out, decision_to_c(d)) };
        Ok(holdoff_status::Ok)
    })
}

/// Writes the budget's rate-limit episode (active, start time) to `*out`.
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `budget` must be NULL or a live budget handle; `out` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn holdoff_retry_budget_episode(
    budget: *const holdoff_retry_budget,
    out: *mut holdoff_episode,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let b = unsafe { holdoff_retry_budget::borrow(budget)? };
        non_null(out, "out")?;
        let e = match b.episode_start() {
            Some(t) => holdoff_episode {
                start_ns: t.as_nanos(),
                active: 1,
            },
            None => holdoff_episode {
                start_ns: 0,
                active: 0,
            },
        };
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out, e) };
        Ok(holdoff_status::Ok)
    })
}

/// Creates the state of a fresh logical call.
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `out` must be NULL or valid for writing a pointer. On success the caller owns `*out` and
/// frees it once with `holdoff_retry_state_free`.
#[no_mangle]
pub unsafe extern "C" fn holdoff_retry_state_new(out: *mut *mut holdoff_retry_state) -> holdoff_status {
    boundary(|| {
        non_null(out, "out")?;
        let s = Arc::new(Mutex::new(RetryState::new()));
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out, holdoff_retry_state::into_ptr(s)) };
        Ok(holdoff_status::Ok)
    })
}

/// Releases a call state. NULL does nothing.
///
/// # Safety
/// `state` must be NULL or a live call-state handle, not used again afterwards and not in use
/// by another thread.
#[no_mangle]
pub unsafe extern "C" fn holdoff_retry_state_free(state: *mut holdoff_retry_state) -> holdoff_status {
    // SAFETY: forwarded contract.
    unsafe { holdoff_retry_state::free(state) }
}

/// Writes the retries the call took on the counted path to `*out_retries`.
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `state` must be NULL or a live call-state handle; `out_retries` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn holdoff_retry_state_retries(
    state: *const holdoff_retry_state,
    out_retries: *mut u32,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let s = unsafe { holdoff_retry_state::borrow(state)? };
        non_null(out_retries, "out_retries")?;
        let n = s.lock().unwrap_or_else(|e| e.into_inner()).retries();
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out_retries, n) };
        Ok(holdoff_status::Ok)
    })
}
