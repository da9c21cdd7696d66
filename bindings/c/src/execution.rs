//! `holdoff_execution`: the retry loop of one logical call (the core's `Execution`,
//! `docs/contract.md` §5a).
//!
//! The library decides everything (what is retried, how long to wait, when to stop, how long an
//! attempt may take, what the caller finally gets); the caller runs each attempt, enforces its
//! time limit with its own timer, and sleeps:
//! ```c
//! holdoff_execution *exec;
//! holdoff_execution_new(policy, NULL, &exec);        /* NULL: no attempt limit, 60 s in total */
//! holdoff_step step;
//! holdoff_execution_next_step(exec, &step);
//! while (step.kind != HOLDOFF_STEP_KIND_FINISH) {
//!     if (step.kind == HOLDOFF_STEP_KIND_WAIT) {
//!         sleep_ns(step.delay_ns);
//!         holdoff_execution_next_step(exec, &step);
//!         continue;
//!     }
//!     int64_t status = do_request(step.has_time_limit ? step.time_limit_ns : 0, &headers, &n);
//!     if (status == TIMED_OUT)
//!         holdoff_execution_complete(exec, HOLDOFF_ATTEMPTED_RAISED, HOLDOFF_OUTCOME_TIMEOUT, 0, &step);
//!     else
//!         holdoff_execution_complete_response(exec, status, headers, n, &step);
//! }
//! /* step.verdict: RETURN, RETHROW, BREAKER_OPEN, GIVE_UP, CANCELLED or INVALID_INPUT */
//! holdoff_execution_free(exec);
//! ```

use std::ffi::{c_char, CStr, CString};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use hcore::interop::{AttemptedKind, Coded, StepKind, VerdictKind};
use hcore::{ConfigError, Execution, ExecutionConfig, Step, Verdict};

use crate::handle::{handle, non_null, write, Handle};
use crate::http::holdoff_header;
use crate::policy::{holdoff_policy, PolicyRef};
use crate::status::{boundary, holdoff_status, Fail};
use crate::types::{
    c_enum, core_coded, core_name, holdoff_give_up_reason, holdoff_wait_source, ns, opt_ns, outcome_from_c,
    outcome_to_c, CEnum,
};

/// `holdoff_execution_options` default total timeout: 60 s, so that a call to an unreachable
/// upstream ends within a minute.
pub const HOLDOFF_EXECUTION_DEFAULT_TOTAL_TIMEOUT_NS: u64 = 60_000_000_000;

const _: () = assert!(hcore::execution::DEFAULT_TOTAL_TIMEOUT.as_nanos() == 60_000_000_000);

/// The retry loop of one logical call under a policy: a state machine the caller drives with
/// `holdoff_execution_next_step`, `holdoff_execution_complete` (or `_complete_response`) and
/// `holdoff_execution_cancel`. It keeps its policy alive. One caller drives it: calls on one
/// handle are serialised by a lock, but steps out of order are refused. Free with
/// `holdoff_execution_free` (during an attempt, that records the attempt as cancelled).
pub struct holdoff_execution {
    _private: [u8; 0],
}

/// The core's execution; `None` once freed (the object itself may outlive its handle in debug
/// builds, see `holdoff_execution_free`).
pub(crate) struct ExecutionHandle(Mutex<Option<Execution<PolicyRef>>>);

handle!(holdoff_execution => ExecutionHandle, Execution, "execution");

/// How a time limit of `holdoff_execution_options` is given.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum holdoff_limit {
    /// The core's default (attempt timeout: none; total timeout:
    /// `HOLDOFF_EXECUTION_DEFAULT_TOTAL_TIMEOUT_NS`). The `_ns` field must be 0.
    Default = 0,
    /// No limit. The `_ns` field must be 0.
    None = 1,
    /// The limit is the `_ns` field, which must be greater than 0.
    Set = 2,
}

/// What a `holdoff_step` asks the caller to do.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum holdoff_step_kind {
    /// Make one attempt now (within `time_limit_ns` if `has_time_limit`), then report it with
    /// `holdoff_execution_complete` or `holdoff_execution_complete_response`.
    Attempt = 0,
    /// Sleep `delay_ns` (cancellably), then call `holdoff_execution_next_step`.
    Wait = 1,
    /// The call is over: `verdict` says what the caller gets.
    Finish = 2,
}

/// What an attempt came to, as the caller saw it (`holdoff_execution_complete`).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum holdoff_attempted {
    /// The operation returned a value meaning `outcome` (`SUCCESS` unless your classifier says
    /// otherwise). A `HOLDOFF_VERDICT_RETURN` returns that value.
    Returned = 0,
    /// The operation failed with an error classified as `outcome`: a transport error
    /// (`FAILURE`), a timeout or the attempt's time limit passing (`TIMEOUT`), the upstream
    /// asking to retry later (`RETRY_LATER` with its delay), a final answer (`ANSWER`).
    Raised = 1,
    /// The caller cancelled the attempt (its own cancellation, not a deadline: one reported at
    /// or after the attempt's time limit is recorded as a timeout).
    Cancelled = 2,
    /// A programming error, not an answer of the upstream: recorded as cancelled, moves nothing,
    /// and finishes at once with `HOLDOFF_VERDICT_RETHROW`.
    Bug = 3,
}

/// How a call ended, and what the caller surfaces.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum holdoff_verdict {
    /// Return the last attempt's value or response (a success, or a final answer returned).
    Return = 0,
    /// Report the last attempt's own error, unchanged: a final answer raised as an error
    /// (`reason` `NOT_RETRYABLE`), a programming error, or an error classified as a success.
    Rethrow = 1,
    /// The breaker refused (a first attempt, or a retry it stays open past what is left of the
    /// budget or the total timeout): an "upstream unavailable" error with `retry_after_ns`
    /// (none while forced open).
    BreakerOpen = 2,
    /// Gave up for `reason` (retries or budget spent, quota empty, total timeout, Retry-After
    /// above the cap): an "upstream unavailable" error with the last attempt's error or result
    /// attached.
    GiveUp = 3,
    /// The caller's own cancellation: propagate it.
    Cancelled = 4,
    /// The operation handed over a value that is not an HTTP status (outside 0..=999): an
    /// invalid-input error naming `status`. The attempt was recorded as cancelled.
    InvalidInput = 5,
}

c_enum!(holdoff_limit: Default, None, Set);
c_enum!(holdoff_step_kind: Attempt, Wait, Finish);
c_enum!(holdoff_attempted: Returned, Raised, Cancelled, Bug);
c_enum!(holdoff_verdict: Return, Rethrow, BreakerOpen, GiveUp, Cancelled, InvalidInput);
core_coded!(
    holdoff_step_kind => StepKind,
    holdoff_attempted => AttemptedKind,
    holdoff_verdict => VerdictKind,
);

/// The time limits of an execution. Fill it with `holdoff_execution_options_init`, or
/// zero-initialise it and set `struct_size`: both give the core's defaults (no attempt timeout,
/// `HOLDOFF_EXECUTION_DEFAULT_TOTAL_TIMEOUT_NS` in total). To set a limit, set its kind to
/// `HOLDOFF_LIMIT_SET` and its `_ns` field; `HOLDOFF_LIMIT_NONE` removes it.
///
/// These are the arguments of one call, not an object's configuration (that is a
/// `holdoff_config`): a caller may narrow them per call, as the Go binding does with a
/// context's deadline. `holdoff_config_execution_options` fills them from a configuration's
/// `execute` part.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct holdoff_execution_options {
    /// `sizeof(holdoff_execution_options)`; a mismatch is `HOLDOFF_STATUS_ABI_MISMATCH`.
    pub struct_size: usize,
    /// Longest one attempt may take, ns (> 0), when `attempt_timeout` is `HOLDOFF_LIMIT_SET`;
    /// otherwise 0.
    pub attempt_timeout_ns: u64,
    /// Longest the whole call may take, waits included, ns (> 0), when `total_timeout` is
    /// `HOLDOFF_LIMIT_SET`; otherwise 0.
    pub total_timeout_ns: u64,
    /// The `holdoff_limit` of `attempt_timeout_ns`. Default (0): no attempt timeout.
    pub attempt_timeout: u32,
    /// The `holdoff_limit` of `total_timeout_ns`. Default (0): 60 s.
    pub total_timeout: u32,
}

/// One step of an execution: what to do next, or how the call ended. Fields that a kind does not
/// use are 0.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct holdoff_step {
    /// `ATTEMPT`: how long the attempt may take, ns (the smaller of the attempt timeout and what
    /// is left of the total timeout), when `has_time_limit`. Enforce it with your timer and
    /// report an expiry as `HOLDOFF_ATTEMPTED_RAISED` + `HOLDOFF_OUTCOME_TIMEOUT`.
    pub time_limit_ns: u64,
    /// `WAIT`: how long to sleep, ns (never shorter than the server asked, up to the cap).
    pub delay_ns: u64,
    /// `WAIT`, and `FINISH` with `GIVE_UP`: the server's own delay before the cap, ns, when
    /// `has_server_delay`.
    pub server_delay_ns: u64,
    /// `FINISH` with `BREAKER_OPEN` or `GIVE_UP`: when trying again could help, ns, when
    /// `has_retry_after` (the breaker's time to its next probe; the server's delay for a
    /// rate-limit give-up; for a total timeout the open breaker's wait, else the server's
    /// capped delay).
    pub retry_after_ns: u64,
    /// The delay of `last_outcome` when it is `HOLDOFF_OUTCOME_RETRY_LATER`, ns.
    pub last_retry_later_ns: u64,
    /// The `holdoff_step_kind`.
    pub kind: u32,
    /// Attempts admitted so far; for `ATTEMPT`, this attempt's number (1 for the first).
    pub attempts: u32,
    /// `WAIT`: the `holdoff_wait_source` of the delay.
    pub source: u32,
    /// `FINISH`: the `holdoff_verdict`.
    pub verdict: u32,
    /// `FINISH`: the `holdoff_give_up_reason`, when `has_reason` (`GIVE_UP` always;
    /// `RETHROW` of a final answer: `NOT_RETRYABLE`).
    pub reason: u32,
    /// The `holdoff_outcome` the last completed attempt was recorded as, when
    /// `has_last_outcome` (what an "after attempt" hook shows; a programming error, a
    /// cancelled attempt and a value that is not a status are `CANCELLED`).
    pub last_outcome: u32,
    /// `ATTEMPT`: 1 if the attempt is a probe of an open breaker.
    pub probe: u8,
    /// `WAIT`, and `FINISH` with `GIVE_UP`: 1 if the server's delay was above the budget's
    /// cap (a wait then waits the cap).
    pub capped: u8,
    /// 1 if `time_limit_ns` is set (0: the attempt has no limit).
    pub has_time_limit: u8,
    /// 1 if `server_delay_ns` is set.
    pub has_server_delay: u8,
    /// 1 if `retry_after_ns` is set.
    pub has_retry_after: u8,
    /// 1 if `reason` is set.
    pub has_reason: u8,
    /// 1 if `last_outcome` is set (an attempt was completed).
    pub has_last_outcome: u8,
    /// Reserved, 0 (the struct has no padding: every byte is written).
    pub reserved: u8,
}

const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(offset_of!(holdoff_execution_options, struct_size) == 0);
    assert!(offset_of!(holdoff_execution_options, attempt_timeout) == size_of::<usize>() + 16);
    assert!(offset_of!(holdoff_step, last_retry_later_ns) == 32);
    assert!(offset_of!(holdoff_step, kind) == 40);
    assert!(offset_of!(holdoff_step, last_outcome) == 60);
    assert!(offset_of!(holdoff_step, probe) == 64);
    assert!(offset_of!(holdoff_step, has_last_outcome) == 70);
    assert!(offset_of!(holdoff_step, reserved) == 71);
    assert!(size_of::<holdoff_step>() == 72);
};

fn invalid_limit(field: &str, rule: String) -> Fail {
    ConfigError {
        field: field.to_owned(),
        rule,
    }
    .into()
}

/// A limit from C: `None` keeps the default, `Some(None)` is no limit.
fn limit(kind: u32, value_ns: u64, field: &str) -> Result<Option<Option<Duration>>, Fail> {
    let k = holdoff_limit::from_code(kind)
        .ok_or_else(|| invalid_limit(field, format!("{kind} is not a holdoff_limit (0..=2)")))?;
    match k {
        holdoff_limit::Set => Ok(Some(Some(Duration::from_nanos(value_ns)))),
        // A duration given without HOLDOFF_LIMIT_SET would otherwise be dropped unseen.
        _ if value_ns != 0 => Err(invalid_limit(
            field,
            format!("{value_ns} ns given but the limit is not HOLDOFF_LIMIT_SET"),
        )),
        holdoff_limit::Default => Ok(None),
        holdoff_limit::None => Ok(Some(None)),
    }
}

/// Copies a caller's options struct whose first field is its `struct_size`. The size is read
/// alone first: a caller built against an older, smaller struct gets
/// `HOLDOFF_STATUS_ABI_MISMATCH` before any byte past its struct is read.
///
/// # Safety
/// `ptr` must be non-NULL and readable for a `usize`, and for `size_of::<T>()` bytes when that
/// leading `usize` equals `size_of::<T>()`.
unsafe fn read_options<T: Copy>(ptr: *const T, param: &str) -> Result<T, Fail> {
    // SAFETY: the options struct starts with `struct_size: usize` (asserted at compile time
    // next to it); readable by contract.
    let got = unsafe { ptr.cast::<usize>().read_unaligned() };
    let want = std::mem::size_of::<T>();
    if got != want {
        return Err(Fail::new(
            holdoff_status::AbiMismatch,
            &format!("{param}.struct_size"),
            format!(
                "{param}.struct_size is {got} but this library's struct is {want} bytes: \
                 initialise it with its _init function and use the header of this library version"
            ),
        ));
    }
    // SAFETY: the caller's struct is as large as ours; readable by contract.
    Ok(unsafe { ptr.read_unaligned() })
}

impl holdoff_execution_options {
    fn defaults() -> Self {
        holdoff_execution_options {
            struct_size: std::mem::size_of::<Self>(),
            attempt_timeout_ns: 0,
            total_timeout_ns: 0,
            attempt_timeout: holdoff_limit::Default as u32,
            total_timeout: holdoff_limit::Default as u32,
        }
    }

    /// The core's configuration, validated (fields named as the core names them).
    fn to_config(self) -> Result<ExecutionConfig, Fail> {
        let mut c = ExecutionConfig::default();
        if let Some(v) = limit(
            self.attempt_timeout,
            self.attempt_timeout_ns,
            "execute.attempt_timeout",
        )? {
            c.attempt_timeout = v;
        }
        if let Some(v) = limit(self.total_timeout, self.total_timeout_ns, "execute.total_timeout")? {
            c.total_timeout = v;
        }
        c.validate()?;
        Ok(c)
    }

    /// The options that give `c` (for a configuration parsed from JSON), both limits
    /// explicit.
    pub(crate) fn from_config(c: &ExecutionConfig) -> Result<Self, Fail> {
        let (attempt_timeout, attempt_timeout_ns) = limit_to_c(c.attempt_timeout, "execute.attempt_timeout")?;
        let (total_timeout, total_timeout_ns) = limit_to_c(c.total_timeout, "execute.total_timeout")?;
        Ok(holdoff_execution_options {
            attempt_timeout,
            attempt_timeout_ns,
            total_timeout,
            total_timeout_ns,
            ..Self::defaults()
        })
    }
}

/// A limit as (`holdoff_limit`, ns). One too long for `uint64_t` nanoseconds is refused naming
/// its field rather than shortened.
fn limit_to_c(d: Option<Duration>, field: &str) -> Result<(u32, u64), Fail> {
    match d {
        None => Ok((holdoff_limit::None as u32, 0)),
        Some(d) => u64::try_from(d.as_nanos())
            .map(|n| (holdoff_limit::Set as u32, n))
            .map_err(|_| invalid_limit(field, "must fit in uint64_t nanoseconds (about 584 years)".into())),
    }
}

fn empty_step(kind: holdoff_step_kind) -> holdoff_step {
    holdoff_step {
        time_limit_ns: 0,
        delay_ns: 0,
        server_delay_ns: 0,
        retry_after_ns: 0,
        last_retry_later_ns: 0,
        kind: kind as u32,
        attempts: 0,
        source: 0,
        verdict: 0,
        reason: 0,
        last_outcome: 0,
        probe: 0,
        capped: 0,
        has_time_limit: 0,
        has_server_delay: 0,
        has_retry_after: 0,
        has_reason: 0,
        has_last_outcome: 0,
        reserved: 0,
    }
}

fn finish_into(s: &mut holdoff_step, v: Verdict) {
    s.kind = holdoff_step_kind::Finish as u32;
    s.verdict = VerdictKind::of(&v).code();
    s.attempts = v.attempts();
    let reason = match v {
        Verdict::Rethrow { reason, .. } => reason,
        Verdict::BreakerOpen { retry_after, .. } => {
            (s.has_retry_after, s.retry_after_ns) = opt_ns(retry_after);
            None
        }
        Verdict::GiveUp(g) => {
            (s.has_retry_after, s.retry_after_ns) = opt_ns(g.retry_after);
            (s.has_server_delay, s.server_delay_ns) = opt_ns(g.server_delay);
            s.capped = u8::from(g.capped);
            Some(g.reason)
        }
        Verdict::Return { .. } | Verdict::Cancelled { .. } | Verdict::InvalidInput { .. } => None,
    };
    if let Some(r) = reason {
        s.has_reason = 1;
        s.reason = holdoff_give_up_reason::from(r) as u32;
    }
}

/// A step as C sees it, with the execution's count of attempts and last outcome.
fn step_to_c(exec: &Execution<PolicyRef>, step: Step) -> holdoff_step {
    let mut s = empty_step(holdoff_step_kind::Attempt);
    s.attempts = exec.attempts();
    if let Some(o) = exec.last_outcome() {
        let (kind, later) = outcome_to_c(o);
        s.has_last_outcome = 1;
        s.last_outcome = kind as u32;
        s.last_retry_later_ns = later;
    }
    match step {
        Step::Attempt(a) => {
            s.attempts = a.number;
            s.probe = u8::from(a.probe);
            (s.has_time_limit, s.time_limit_ns) = opt_ns(a.time_limit);
        }
        Step::Wait(w) => {
            s.kind = holdoff_step_kind::Wait as u32;
            s.attempts = w.attempts;
            s.delay_ns = ns(w.delay);
            s.source = holdoff_wait_source::from(w.source) as u32;
            s.capped = u8::from(w.capped);
            (s.has_server_delay, s.server_delay_ns) = opt_ns(w.server_delay);
        }
        Step::Finish(v) => finish_into(&mut s, v),
    }
    s
}

impl ExecutionHandle {
    fn lock(&self) -> MutexGuard<'_, Option<Execution<PolicyRef>>> {
        // The execution's state is consistent between core calls, so a poisoned lock is usable.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Runs `f` on the live execution behind a handle and writes the step it gives to `out`.
///
/// # Safety
/// `execution` must be NULL or a live execution handle; `out` NULL or valid for a write.
unsafe fn drive(
    execution: *const holdoff_execution,
    out: *mut holdoff_step,
    f: impl FnOnce(&mut Execution<PolicyRef>) -> Result<holdoff_step, Fail>,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let h = unsafe { holdoff_execution::borrow(execution)? };
        non_null(out, "out")?;
        let mut guard = h.lock();
        let exec = guard.as_mut().ok_or_else(|| {
            Fail::new(
                holdoff_status::InvalidHandle,
                "execution",
                "this execution was freed",
            )
        })?;
        let step = f(exec)?;
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out, step) };
        Ok(holdoff_status::Ok)
    })
}

/// Fills `*options` with the core's defaults (no attempt timeout, 60 s in total: both limits
/// `HOLDOFF_LIMIT_DEFAULT`, their `_ns` fields 0) and sets `struct_size`.
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `options` must be NULL or valid for a write of `holdoff_execution_options`.
#[no_mangle]
pub unsafe extern "C" fn holdoff_execution_options_init(
    options: *mut holdoff_execution_options,
) -> holdoff_status {
    boundary(|| {
        non_null(options, "options")?;
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(options, holdoff_execution_options::defaults()) };
        Ok(holdoff_status::Ok)
    })
}

/// Starts a logical call under `policy` (kept alive by the execution) with the time limits of
/// `options` (NULL: the defaults). Nothing happens until `holdoff_execution_next_step`; the
/// total timeout runs from that first step.
///
/// Errors: `HOLDOFF_STATUS_INVALID_CONFIG` naming `execute.attempt_timeout` or
/// `execute.total_timeout` (a zero `_ns` with `HOLDOFF_LIMIT_SET`, a non-zero one without it,
/// an unknown `holdoff_limit`); `HOLDOFF_STATUS_ABI_MISMATCH`; `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `policy` must be NULL or a live policy handle; `options` NULL or readable; `out` NULL or
/// valid for writing a pointer. On success the caller owns `*out` and frees it once with
/// `holdoff_execution_free`.
#[no_mangle]
pub unsafe extern "C" fn holdoff_execution_new(
    policy: *const holdoff_policy,
    options: *const holdoff_execution_options,
    out: *mut *mut holdoff_execution,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract (checks NULL and, in debug builds, liveness).
        let p = PolicyRef(unsafe { holdoff_policy::clone_arc(policy)? });
        non_null(out, "out")?;
        let o = if options.is_null() {
            holdoff_execution_options::defaults()
        } else {
            // SAFETY: non-NULL; readable by contract. Copied, not kept.
            unsafe { read_options(options, "options")? }
        };
        let exec = Execution::new(p, o.to_config()?)?;
        let h = Arc::new(ExecutionHandle(Mutex::new(Some(exec))));
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out, holdoff_execution::into_ptr(h)) };
        Ok(holdoff_status::Ok)
    })
}

/// Releases an execution. NULL does nothing. During an attempt, the attempt is recorded as
/// cancelled first (a probe frees its slot at once; its window stays spent), or as a timeout if
/// its time limit has passed.
///
/// # Safety
/// `execution` must be NULL or a live execution handle, not used again afterwards and not in
/// use by another thread.
#[no_mangle]
pub unsafe extern "C" fn holdoff_execution_free(execution: *mut holdoff_execution) -> holdoff_status {
    if execution.is_null() {
        return holdoff_status::Ok;
    }
    // Dropped here rather than with the handle's memory: debug builds keep a freed object
    // allocated for a while (the quarantine), and an attempt in progress must give back its
    // permit now (the core's `Drop` does).
    let st = boundary(|| {
        // SAFETY: forwarded contract.
        let h = unsafe { holdoff_execution::borrow(execution)? };
        let taken = h.lock().take();
        drop(taken);
        Ok(holdoff_status::Ok)
    });
    if st != holdoff_status::Ok {
        return st;
    }
    // SAFETY: forwarded contract.
    unsafe { holdoff_execution::free(execution) }
}

/// Starts the call, or the next attempt after a wait: writes an `ATTEMPT` (the breaker admitted
/// it), a `WAIT` (for an open breaker) or a `FINISH` step to `*out`. Once finished, it writes
/// the same `FINISH` step again. Reads the clock at most once.
///
/// Errors: `HOLDOFF_STATUS_INVALID_INPUT` naming `execution` while an attempt is in progress
/// (complete it first); `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `execution` must be NULL or a live execution handle; `out` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn holdoff_execution_next_step(
    execution: *const holdoff_execution,
    out: *mut holdoff_step,
) -> holdoff_status {
    // SAFETY: forwarded contract.
    unsafe {
        drive(execution, out, |e| {
            let step = e.next_step()?;
            Ok(step_to_c(e, step))
        })
    }
}

/// Reports what the attempt in progress came to (`holdoff_attempted`; for `RETURNED` and
/// `RAISED`, its `holdoff_outcome` and, for `RETRY_LATER`, the delay in ns) and writes the next
/// step, a `WAIT` or a `FINISH`, to `*out`. Records it on the breaker, asks the budget and the
/// quota. Reads the clock at most once.
///
/// Errors: `HOLDOFF_STATUS_INVALID_INPUT` naming `execution` when no attempt is in progress,
/// `attempted` or `outcome` for an unknown code (the attempt then stays in progress);
/// `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `execution` must be NULL or a live execution handle; `out` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn holdoff_execution_complete(
    execution: *const holdoff_execution,
    attempted: u32,
    outcome: u32,
    retry_later_ns: u64,
    out: *mut holdoff_step,
) -> holdoff_status {
    // SAFETY: forwarded contract.
    unsafe {
        drive(execution, out, |e| {
            let kind = AttemptedKind::from_code(attempted).ok_or_else(|| {
                Fail::input(
                    "attempted",
                    format!("{attempted} is not a holdoff_attempted (0..=3)"),
                )
            })?;
            let o = outcome_from_c(outcome, retry_later_ns)?;
            let step = e.complete(kind.attempted(o))?;
            Ok(step_to_c(e, step))
        })
    }
}

/// Reports the attempt in progress as an HTTP response: the policy's classifier reads
/// (`status`, headers) at this one clock reading (Retry-After and the other delay headers
/// included); writes the next step to `*out`. `status` is whatever integer the client gave:
/// one outside 0..=999 finishes with `HOLDOFF_VERDICT_INVALID_INPUT` (the status is
/// `HOLDOFF_STATUS_OK`; the attempt is recorded as cancelled).
///
/// Errors: `HOLDOFF_STATUS_INVALID_INPUT` naming `execution` when no attempt is in progress;
/// `HOLDOFF_STATUS_NULL_PARAMETER` (`headers` may be NULL only if `n_headers` is 0).
///
/// # Safety
/// `execution` must be NULL or a live execution handle; `headers` valid for reading
/// `n_headers` headers; `out` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn holdoff_execution_complete_response(
    execution: *const holdoff_execution,
    status: i64,
    headers: *const holdoff_header,
    n_headers: usize,
    out: *mut holdoff_step,
) -> holdoff_status {
    let respond = |e: &mut Execution<PolicyRef>| {
        // SAFETY: forwarded contract.
        let hs = unsafe { crate::http::headers(headers, n_headers)? };
        let step = e.complete_response(status, hs.iter().map(|(n, v)| (n.as_str(), v.as_str())))?;
        Ok(step_to_c(e, step))
    };
    // SAFETY: forwarded contract.
    unsafe { drive(execution, out, respond) }
}

/// The caller cancelled: finishes the call with `HOLDOFF_VERDICT_CANCELLED` and writes that
/// `FINISH` step to `*out`. Call it when the caller cancels during a wait (or before the first
/// step); during an attempt it records the attempt as cancelled, as `holdoff_execution_complete`
/// with `HOLDOFF_ATTEMPTED_CANCELLED` does (which may finish otherwise: a cancellation at the
/// attempt's time limit is a timeout). Once finished, it writes the verdict unchanged.
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `execution` must be NULL or a live execution handle; `out` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn holdoff_execution_cancel(
    execution: *const holdoff_execution,
    out: *mut holdoff_step,
) -> holdoff_status {
    // SAFETY: forwarded contract.
    unsafe {
        drive(execution, out, |e| {
            let v = e.cancel();
            Ok(step_to_c(e, Step::Finish(v)))
        })
    }
}

/// The caller cannot make the attempt a `WAIT` step leads to (a request body it cannot send
/// twice): finishes the call with `HOLDOFF_VERDICT_GIVE_UP`, reason `attempts_exhausted`, the
/// forgone wait as `retry_after`, and writes that `FINISH` step to `*out`. Once finished, it
/// writes the verdict unchanged.
///
/// Errors: `HOLDOFF_STATUS_INVALID_INPUT` naming `execution` unless the last step was a `WAIT`;
/// `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `execution` must be NULL or a live execution handle; `out` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn holdoff_execution_stop(
    execution: *const holdoff_execution,
    out: *mut holdoff_step,
) -> holdoff_status {
    // SAFETY: forwarded contract.
    unsafe {
        drive(execution, out, |e| {
            let v = e.stop()?;
            Ok(step_to_c(e, Step::Finish(v)))
        })
    }
}

/// The stable name of a `holdoff_verdict` (`return`, `rethrow`, `breaker_open`, `give_up`,
/// `cancelled`, `invalid_input`); NULL for an unknown value. Static string.
#[no_mangle]
pub extern "C" fn holdoff_verdict_name(verdict: u32) -> *const c_char {
    static NAMES: OnceLock<Vec<(u32, CString)>> = OnceLock::new();
    core_name::<VerdictKind>(&NAMES, verdict)
}

/// The name of a `holdoff_step_kind` (`attempt`, `wait`, `finish`); NULL for an unknown
/// value. Static string.
#[no_mangle]
pub extern "C" fn holdoff_step_kind_name(kind: u32) -> *const c_char {
    static NAMES: OnceLock<Vec<(u32, CString)>> = OnceLock::new();
    core_name::<StepKind>(&NAMES, kind)
}

/// The name of a `holdoff_attempted` (`returned`, `raised`, `cancelled`, `bug`); NULL for an
/// unknown value. Static string.
#[no_mangle]
pub extern "C" fn holdoff_attempted_name(attempted: u32) -> *const c_char {
    static NAMES: OnceLock<Vec<(u32, CString)>> = OnceLock::new();
    core_name::<AttemptedKind>(&NAMES, attempted)
}

/// The name of a `holdoff_limit` (`default`, `none`, `set`); NULL for an unknown value. Static
/// string.
#[no_mangle]
pub extern "C" fn holdoff_limit_name(limit: u32) -> *const c_char {
    const NAMES: [&CStr; 3] = [c"default", c"none", c"set"];
    holdoff_limit::from_code(limit).map_or(std::ptr::null(), |l| NAMES[l as usize].as_ptr())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_names() {
        use crate::types::tests::{s, tied};
        assert_eq!(
            tied::<holdoff_verdict, VerdictKind>(holdoff_verdict_name),
            [
                "return",
                "rethrow",
                "breaker_open",
                "give_up",
                "cancelled",
                "invalid_input"
            ]
        );
        tied::<holdoff_step_kind, StepKind>(holdoff_step_kind_name);
        tied::<holdoff_attempted, AttemptedKind>(holdoff_attempted_name);
        let limits: Vec<_> = holdoff_limit::ALL
            .iter()
            .map(|l| s(holdoff_limit_name(*l as u32)))
            .collect();
        assert_eq!(limits, ["default", "none", "set"]);
        assert!(holdoff_limit_name(3).is_null());
    }

    fn field(r: Result<ExecutionConfig, Fail>) -> (holdoff_status, String) {
        let f = r.unwrap_err();
        (f.status, f.field)
    }

    #[test]
    fn options_give_the_core_defaults_and_refuse_what_it_refuses() {
        let d = holdoff_execution_options::defaults();
        assert_eq!(d.to_config().unwrap(), ExecutionConfig::default());
        let set = |attempt: u64, total: u64| holdoff_execution_options {
            attempt_timeout: holdoff_limit::Set as u32,
            attempt_timeout_ns: attempt,
            total_timeout: holdoff_limit::Set as u32,
            total_timeout_ns: total,
            ..d
        };
        let c = set(100, 5_000).to_config().unwrap();
        assert_eq!(c.attempt_timeout, Some(Duration::from_nanos(100)));
        assert_eq!(c.total_timeout, Some(Duration::from_nanos(5_000)));
        let none = holdoff_execution_options {
            total_timeout: holdoff_limit::None as u32,
            ..d
        };
        assert_eq!(none.to_config().unwrap().total_timeout, None);
        let config = holdoff_status::InvalidConfig;
        assert_eq!(
            field(set(0, 1).to_config()),
            (config, "execute.attempt_timeout".into())
        );
        assert_eq!(
            field(set(1, 0).to_config()),
            (config, "execute.total_timeout".into())
        );
        // A duration without HOLDOFF_LIMIT_SET, and an unknown kind.
        let forgot = holdoff_execution_options {
            attempt_timeout_ns: 100,
            ..d
        };
        assert_eq!(
            field(forgot.to_config()),
            (config, "execute.attempt_timeout".into())
        );
        let unknown = holdoff_execution_options {
            total_timeout: 3,
            ..d
        };
        assert_eq!(
            field(unknown.to_config()),
            (config, "execute.total_timeout".into())
        );
    }

    #[test]
    fn options_from_a_parsed_configuration_are_explicit_and_never_shortened() {
        let c = ExecutionConfig::default();
        let o = holdoff_execution_options::from_config(&c).unwrap();
        assert_eq!(
            (o.attempt_timeout, o.total_timeout, o.total_timeout_ns),
            (
                holdoff_limit::None as u32,
                holdoff_limit::Set as u32,
                HOLDOFF_EXECUTION_DEFAULT_TOTAL_TIMEOUT_NS
            )
        );
        assert_eq!(o.to_config().unwrap(), c);
        let long = ExecutionConfig {
            attempt_timeout: Some(Duration::from_nanos(u64::MAX) + Duration::from_nanos(1)),
            total_timeout: None,
        };
        let f = holdoff_execution_options::from_config(&long).unwrap_err();
        assert_eq!(
            (f.status, f.field.as_str()),
            (holdoff_status::InvalidConfig, "execute.attempt_timeout")
        );
    }
}
