//! `holdoff_budget` (the retry budget) and `holdoff_retry_state` (one logical call's part).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use hcore::{Backoff, BudgetConfig, Decision, RetryBudget, RetryState};

use crate::breaker::check_size;
use crate::clock::{holdoff_clock, ClockHandle};
use crate::handle::{handle, non_null, write, Handle};
use crate::status::{boundary, holdoff_status, Fail, Res};
use crate::types::{
    holdoff_decision_kind, holdoff_give_up_reason, holdoff_wait_source, ns, opt_ns, outcome_from_c,
};

/// The retry budget of one upstream (`docs/contract.md` §4): when to retry, how long to wait,
/// when to give up. Shared by every caller of the upstream; thread-safe. Free with
/// `holdoff_budget_free`.
pub struct holdoff_budget {
    _private: [u8; 0],
}

handle!(holdoff_budget => RetryBudget, Budget, "budget");

/// The per-call part of retrying (retries taken, first failure): one per logical call, across
/// its attempts. Thread-safe (internally locked). Free with `holdoff_retry_state_free`.
pub struct holdoff_retry_state {
    _private: [u8; 0],
}

handle!(holdoff_retry_state => Mutex<RetryState>, RetryState, "state");

/// Configuration of a retry budget. Fill it with `holdoff_budget_options_init`, then change
/// fields. Durations are nanoseconds.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct holdoff_budget_options {
    /// `sizeof(holdoff_budget_options)`, set by `holdoff_budget_options_init`.
    pub struct_size: usize,
    /// Total time one rate-limit episode may take, ns; at least twice `retry_after_cap_ns`.
    /// Default 30 min.
    pub max_rate_limit_duration_ns: u64,
    /// Cap on one Retry-After wait, ns (> 0). Default 300 s.
    pub retry_after_cap_ns: u64,
    /// First backoff of the counted path, ns (> 0). Default 500 ms.
    pub backoff_initial_ns: u64,
    /// Backoff growth per retry (finite, >= 1). Default 2.
    pub backoff_multiplier: f64,
    /// Backoff cap, ns (>= initial). Default 60 s.
    pub backoff_max_ns: u64,
    /// Fraction in [0, 1) of a backoff that jitter may subtract. Default 0.
    pub backoff_jitter: f64,
    /// Total time of the counted path from a call's first failure, ns (> 0). Default 12 h.
    pub max_backoff_duration_ns: u64,
    /// Seed of the jitter PRNG. Default 0.
    pub seed: u64,
    /// Retries allowed on the counted path (0 disables it). Default 10.
    pub max_retries: u32,
    /// What to do when a server asks for longer than `retry_after_cap_ns`: 0 (default) waits the
    /// cap and the decision says `capped`; 1 gives up at once with
    /// `HOLDOFF_GIVE_UP_REASON_RETRY_AFTER_ABOVE_CAP` and the server's delay (for callers who
    /// would rather reschedule than ask before the time the server named). Other values are
    /// `HOLDOFF_STATUS_INVALID_CONFIG` (`budget.give_up_above_cap`).
    pub give_up_above_cap: u8,
}

/// A retry decision (`holdoff_budget_decide`, `holdoff_policy_after`).
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

/// A budget's rate-limit episode (`holdoff_budget_episode`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct holdoff_episode {
    /// When the episode started, ns since the clock's origin (if `active`).
    pub start_ns: u64,
    /// 1 if a rate-limit episode is under way.
    pub active: u8,
}

pub(crate) fn decision_to_c(d: Decision) -> holdoff_decision {
    let mut out = holdoff_decision {
        delay_ns: 0,
        server_delay_ns: 0,
        kind: holdoff_decision_kind::Done as u32,
        source: 0,
        reason: 0,
        capped: 0,
        has_server_delay: 0,
    };
    match d {
        Decision::Done => {}
        Decision::Retry {
            delay,
            source,
            server_delay,
            capped,
        } => {
            out.kind = holdoff_decision_kind::Retry as u32;
            out.delay_ns = ns(delay);
            out.source = holdoff_wait_source::from(source) as u32;
            (out.has_server_delay, out.server_delay_ns) = opt_ns(server_delay);
            out.capped = u8::from(capped);
        }
        Decision::GiveUp { reason, server_delay } => {
            out.kind = holdoff_decision_kind::GiveUp as u32;
            out.reason = holdoff_give_up_reason::from(reason) as u32;
            (out.has_server_delay, out.server_delay_ns) = opt_ns(server_delay);
        }
    }
    out
}

impl holdoff_budget_options {
    fn defaults() -> Self {
        let d = BudgetConfig::default();
        holdoff_budget_options {
            struct_size: std::mem::size_of::<Self>(),
            max_rate_limit_duration_ns: ns(d.max_rate_limit_duration),
            retry_after_cap_ns: ns(d.retry_after_cap),
            backoff_initial_ns: ns(d.backoff.initial),
            backoff_multiplier: d.backoff.multiplier,
            backoff_max_ns: ns(d.backoff.max),
            backoff_jitter: d.backoff.jitter,
            max_backoff_duration_ns: ns(d.max_backoff_duration),
            seed: d.seed,
            max_retries: d.max_retries,
            give_up_above_cap: u8::from(d.give_up_above_cap),
        }
    }

    fn to_config(self) -> Result<BudgetConfig, Fail> {
        check_size(self.struct_size, std::mem::size_of::<Self>(), "options")?;
        let d = Duration::from_nanos;
        let give_up_above_cap = match self.give_up_above_cap {
            0 => false,
            1 => true,
            v => {
                return Err(Fail::new(
                    holdoff_status::InvalidConfig,
                    "budget.give_up_above_cap",
                    format!("invalid configuration: budget.give_up_above_cap: {v} is not a boolean (0 or 1)"),
                ))
            }
        };
        Ok(BudgetConfig {
            max_rate_limit_duration: d(self.max_rate_limit_duration_ns),
            retry_after_cap: d(self.retry_after_cap_ns),
            max_retries: self.max_retries,
            backoff: Backoff {
                initial: d(self.backoff_initial_ns),
                multiplier: self.backoff_multiplier,
                max: d(self.backoff_max_ns),
                jitter: self.backoff_jitter,
            },
            max_backoff_duration: d(self.max_backoff_duration_ns),
            give_up_above_cap,
            seed: self.seed,
        })
    }
}

/// Fills `*options` with the core's defaults (episode budget 30 min, Retry-After cap 300 s,
/// 10 retries, backoff 500 ms doubling to 60 s without jitter, counted budget 12 h, a server's
/// delay above the cap waits the cap, seed 0).
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `options` must be NULL or valid for a write of `holdoff_budget_options`.
#[no_mangle]
pub unsafe extern "C" fn holdoff_budget_options_init(options: *mut holdoff_budget_options) -> holdoff_status {
    boundary(|| {
        non_null(options, "options")?;
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(options, holdoff_budget_options::defaults()) };
        Ok(holdoff_status::Ok)
    })
}

/// Creates a retry budget reading `clock` (share the clock with the breaker of a policy).
///
/// Errors: `HOLDOFF_STATUS_INVALID_CONFIG` naming the field (e.g.
/// `budget.max_rate_limit_duration` when it leaves no room for two capped waits);
/// `HOLDOFF_STATUS_ABI_MISMATCH`; `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `options` must be NULL or point to a readable `holdoff_budget_options`; `clock` NULL or a
/// live clock handle; `out` NULL or valid for writing a pointer. On success the caller owns
/// `*out` and frees it once with `holdoff_budget_free`.
#[no_mangle]
pub unsafe extern "C" fn holdoff_budget_new(
    options: *const holdoff_budget_options,
    clock: *const holdoff_clock,
    out: *mut *mut holdoff_budget,
) -> holdoff_status {
    boundary(|| {
        non_null(options, "options")?;
        // SAFETY: forwarded contract.
        let c = unsafe { holdoff_clock::borrow(clock)? };
        non_null(out, "out")?;
        // SAFETY: checked non-NULL; readable by contract. Copied, not kept.
        let config = unsafe { crate::breaker::read_options(options, "options") }?.to_config()?;
        // SAFETY: `out` checked non-NULL; valid by contract.
        unsafe { new_budget(config, c, out) }
    })
}

/// # Safety
/// `out` must be non-NULL and valid for writing a pointer.
pub(crate) unsafe fn new_budget(
    config: BudgetConfig,
    clock: &ClockHandle,
    out: *mut *mut holdoff_budget,
) -> Res {
    let b = Arc::new(RetryBudget::new(config, Arc::clone(&clock.clock))?);
    // SAFETY: forwarded contract.
    unsafe { write(out, holdoff_budget::into_ptr(b)) };
    Ok(holdoff_status::Ok)
}

/// Releases a budget handle. NULL does nothing. A policy using the budget keeps it alive.
///
/// # Safety
/// `budget` must be NULL or a live budget handle, not used again afterwards and not in use by
/// another thread.
#[no_mangle]
pub unsafe extern "C" fn holdoff_budget_free(budget: *mut holdoff_budget) -> holdoff_status {
    // SAFETY: forwarded contract.
    unsafe { holdoff_budget::free(budget) }
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
pub unsafe extern "C" fn holdoff_budget_decide(
    budget: *const holdoff_budget,
    state: *const holdoff_retry_state,
    outcome: u32,
    retry_later_ns: u64,
    out: *mut holdoff_decision,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let b = unsafe { holdoff_budget::borrow(budget)? };
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
pub unsafe extern "C" fn holdoff_budget_episode(
    budget: *const holdoff_budget,
    out: *mut holdoff_episode,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let b = unsafe { holdoff_budget::borrow(budget)? };
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

const _: () = assert!(std::mem::offset_of!(holdoff_budget_options, struct_size) == 0);
