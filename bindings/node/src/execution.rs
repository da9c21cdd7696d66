//! The retry loop of one call of the JavaScript helpers (`policy.execute`, `executeResponse`,
//! `fetch`): the core's [`Execution`] behind an opaque handle. JavaScript runs each attempt,
//! sleeps, calls the hooks and turns the verdict into a value or an error; every decision (admit,
//! wait, give up, what the caller gets) is the core's.
//!
//! Steps cross N-API as one number, so that a call whose first attempt succeeds builds no object:
//!
//! | number | step |
//! |---|---|
//! | `> 0` | [`Step::Attempt`]: its time limit in milliseconds, `Infinity` for none |
//! | `-1` | [`Step::Wait`]: read it with `execWait` |
//! | `<= -2` | [`Step::Finish`]: `-2 - code`, `code` indexing `verdictNames()` (the core's names); read a verdict other than `return` with `execVerdict` |
//!
//! Dropping the handle (garbage collection) during an attempt records it as cancelled, as the
//! core's `Execution` does when dropped, so a probe is never held by an abandoned call.

use std::sync::atomic::AtomicU32;
use std::sync::Arc;
use std::time::Duration;

use holdoff::interop::config::{ExecuteSpec, Num};
use holdoff::interop::Coded;
use holdoff::{AttemptPlan, Execution, ExecutionConfig, GiveUpReason, Policy, Step, Verdict};
use napi::bindgen_prelude::*;
use napi::ValueType;
use napi_derive::napi;

use crate::breaker::permit_from_raw;
use crate::budget::note_episode;
use crate::codes;
use crate::convert::{ms, set_ms};
use crate::err::{self, Kind};
use crate::http::{headers_of, status_int};
use crate::policy::PolicyBox;

/// One call of a retry helper: the core's execution (`None` before the first `exec_start`) and
/// the last step it returned. A handle is started again for another call once its call is
/// finished (`holdoff.js` keeps a few per policy), so that a call costs no new handle.
pub struct ExecBox {
    exec: Option<Execution<Arc<Policy>>>,
    last: Option<Step>,
    /// The episode flag of the policy's budget (`BudgetBox::episode`), written after each
    /// attempt reported; `None` before the first start.
    episode: Option<Arc<AtomicU32>>,
}

impl ExecBox {
    fn exec(&mut self, env: &Env) -> Result<&mut Execution<Arc<Policy>>> {
        match self.exec.as_mut() {
            Some(e) => Ok(e),
            None => Err(err::input_type(
                env,
                "execution",
                "a started execution",
                "a handle never started",
            )),
        }
    }
}

const STEP_WAIT: f64 = -1.0;

/// A time limit option: `undefined` keeps the core's default, `null` is no limit, a number of
/// milliseconds is checked by the core (`ExecuteSpec`), anything else is a `TypeError`.
fn limit_option(env: &Env, v: &Unknown<'_>, js: &str, core: &str) -> Result<Option<Option<Num>>> {
    Ok(match v.get_type()? {
        ValueType::Undefined => None,
        ValueType::Null => Some(None),
        ValueType::Number => Some(Some(Num(unsafe { v.cast::<f64>()? }))),
        _ => {
            return Err(err::throw(
                env,
                Kind::Type,
                "invalid_config",
                format!(
                "invalid configuration: {js} (field {core}) must be a number of milliseconds or null, got {}",
                crate::opts::describe(env, v)
            ),
                Some(core),
            ))
        }
    })
}

/// A handle for the calls of a retry helper, to start with `exec_start`.
#[napi(catch_unwind)]
pub fn exec_new() -> External<ExecBox> {
    External::new(ExecBox {
        exec: None,
        last: None,
        episode: None,
    })
}

/// Starts a call of a retry helper on `h` (a new handle, or one whose last call finished) with
/// its time limits (`attemptTimeoutMs`: default none; `totalTimeoutMs`: default 60 000; `null` is
/// no limit) and returns its first step (as `execNext`). `invalid_config` naming
/// `execute.attempt_timeout` or `execute.total_timeout` for a limit the core refuses (the handle
/// is then left as it was).
#[napi(catch_unwind)]
pub fn exec_start(
    env: &Env,
    h: &mut External<ExecBox>,
    policy: &External<PolicyBox>,
    attempt_timeout_ms: Unknown<'_>,
    total_timeout_ms: Unknown<'_>,
) -> Result<f64> {
    let spec = ExecuteSpec {
        attempt_timeout_ms: limit_option(
            env,
            &attempt_timeout_ms,
            "attemptTimeoutMs",
            "execute.attempt_timeout",
        )?,
        total_timeout_ms: limit_option(env, &total_timeout_ms, "totalTimeoutMs", "execute.total_timeout")?,
    };
    start(env, h, policy, spec)
}

/// `exec_start` with both time limits left at the core's defaults (the options gave neither):
/// two arguments fewer to convert.
#[napi(catch_unwind)]
pub fn exec_start_default(env: &Env, h: &mut External<ExecBox>, policy: &External<PolicyBox>) -> Result<f64> {
    let spec = ExecuteSpec {
        attempt_timeout_ms: None,
        total_timeout_ms: None,
    };
    start(env, h, policy, spec)
}

fn start(env: &Env, h: &mut ExecBox, policy: &PolicyBox, spec: ExecuteSpec) -> Result<f64> {
    let config = spec.to_config().map_err(|e| err::config(env, &e))?;
    let exec = Execution::new(Arc::clone(&policy.policy), config).map_err(|e| err::config(env, &e))?;
    // The previous call of this handle is finished: replacing its execution records nothing.
    h.episode = Some(Arc::clone(&policy.episode));
    let exec = h.exec.insert(exec);
    let step = exec.next_step().map_err(|e| err::holdoff(env, &e))?;
    Ok(step_number(h, step))
}

/// `step_number` after an attempt was reported: the budget decided, so its episode flag is
/// written first.
fn reported(h: &mut ExecBox, step: Step) -> f64 {
    if let (Some(flag), Some(e)) = (&h.episode, &h.exec) {
        note_episode(flag, e.policy().budget());
    }
    step_number(h, step)
}

/// The limits of a call given none (the core's defaults).
fn default_config(env: &Env) -> Result<ExecutionConfig> {
    let spec = ExecuteSpec {
        attempt_timeout_ms: None,
        total_timeout_ms: None,
    };
    spec.to_config().map_err(|e| err::config(env, &e))
}

/// A first attempt's time limit under `c`: the smaller of its two limits; `None` for none.
fn first_limit(c: &ExecutionConfig) -> Option<Duration> {
    match (c.attempt_timeout, c.total_timeout) {
        (Some(a), Some(t)) => Some(a.min(t)),
        (a, t) => a.or(t),
    }
}

/// The first attempt's time limit in milliseconds when `execute` is given no limits (from the
/// core's default total timeout; `Infinity` for none): what `execAdmitted` continues from.
#[napi(catch_unwind)]
pub fn exec_default_limit_ms(env: &Env) -> Result<f64> {
    Ok(first_limit(&default_config(env)?).map_or(f64::INFINITY, ms))
}

/// A call of `policy.execute` (no options: default limits) whose first attempt `holdoff.js`
/// admitted itself on the breaker's fast-path word under `rawEpisode`, `elapsedMs` ago, and which
/// did not end there as a clean success: `h` (a new handle, or one whose last call finished)
/// continues it as if `execStartDefault` had admitted that attempt, its limits counted from
/// `elapsedMs` before now (the core's `Execution::admitted`). Report the attempt next
/// (`execComplete`, `execSucceeded`). `RangeError` `invalid_input` naming `elapsedMs` for a
/// negative or non-finite number.
#[napi(catch_unwind)]
pub fn exec_admitted(
    env: &Env,
    h: &mut External<ExecBox>,
    policy: &External<PolicyBox>,
    raw_episode: u32,
    elapsed_ms: f64,
) -> Result<()> {
    if !(elapsed_ms.is_finite() && elapsed_ms >= 0.0) {
        return Err(err::throw(
            env,
            Kind::Range,
            "invalid_input",
            format!("invalid input: elapsedMs must be a number of milliseconds >= 0, got {elapsed_ms}"),
            Some("elapsedMs"),
        ));
    }
    let config = default_config(env)?;
    let permit = permit_from_raw(policy.policy.breaker().id(), raw_episode, 0);
    // Finite and not negative: only a value past Duration's range fails, and saturates.
    let elapsed = Duration::try_from_secs_f64(elapsed_ms / 1000.0).unwrap_or(Duration::MAX);
    let exec = Execution::admitted(Arc::clone(&policy.policy), config, permit, elapsed)
        .map_err(|e| err::config(env, &e))?;
    h.episode = Some(Arc::clone(&policy.episode));
    h.exec = Some(exec);
    h.last = Some(Step::Attempt(AttemptPlan {
        number: 1,
        probe: false,
        time_limit: first_limit(&config),
    }));
    Ok(())
}

fn step_number(h: &mut ExecBox, step: Step) -> f64 {
    h.last = Some(step);
    match step {
        Step::Attempt(plan) => plan.time_limit.map_or(f64::INFINITY, ms),
        Step::Wait(_) => STEP_WAIT,
        Step::Finish(v) => -2.0 - codes::verdict_code(&v),
    }
}

/// Starts the call, or the next attempt after a wait. Returns the step as a number: `> 0` an
/// attempt with that time limit in milliseconds (`Infinity`: none), `-1` a wait (`execWait`),
/// `<= -2` finished (`verdictNames()[-2 - step]`; `execVerdict` for the rest).
#[napi(catch_unwind)]
pub fn exec_next(env: &Env, h: &mut External<ExecBox>) -> Result<f64> {
    let step = h.exec(env)?.next_step().map_err(|e| err::holdoff(env, &e))?;
    Ok(step_number(h, step))
}

/// The attempt in progress as one number: `2 * number + probe` (number 1 for the first attempt,
/// probe 1 for a probe of an open breaker); 0 when the last step was not an attempt.
#[napi(catch_unwind)]
pub fn exec_plan(h: &External<ExecBox>) -> f64 {
    match h.last {
        Some(Step::Attempt(p)) => 2.0 * f64::from(p.number) + f64::from(u8::from(p.probe)),
        _ => 0.0,
    }
}

/// Reports the attempt: `how` is 0 returned / 1 raised (with the outcome's code and, for a
/// retry later, its delay), 2 the caller cancelled, 3 a programming error. Returns the next step
/// (as `execNext`).
#[napi(catch_unwind)]
pub fn exec_complete(
    env: &Env,
    h: &mut External<ExecBox>,
    how: u32,
    outcome_code: u32,
    retry_later_ms: f64,
) -> Result<f64> {
    let attempted = codes::attempted(env, how, outcome_code, retry_later_ms)?;
    let step = h
        .exec(env)?
        .complete(attempted)
        .map_err(|e| err::holdoff(env, &e))?;
    Ok(reported(h, step))
}

/// `exec_complete` for an attempt that returned a success (`how` 0, outcome `success`), the
/// common case, without the three numbers to convert. Returns the next step (as `execNext`).
#[napi(catch_unwind)]
pub fn exec_succeeded(env: &Env, h: &mut External<ExecBox>) -> Result<f64> {
    let step = h
        .exec(env)?
        .complete(holdoff::Attempted::Returned(holdoff::Outcome::Success))
        .map_err(|e| err::holdoff(env, &e))?;
    Ok(reported(h, step))
}

/// Reports an attempt that got an HTTP response (flat headers): the policy's classifier reads
/// status and headers at the decision's clock reading. A number that is not a whole status
/// (outside 0..=999, fractional, infinite) finishes with the `invalid_input` verdict, the attempt
/// recorded as cancelled. Returns the next step (as `execNext`).
#[napi(catch_unwind)]
pub fn exec_complete_response(
    env: &Env,
    h: &mut External<ExecBox>,
    status: f64,
    headers: Vec<String>,
) -> Result<f64> {
    let status = status_int(status);
    let step = h
        .exec(env)?
        .complete_response(status, headers_of(&headers))
        .map_err(|e| err::holdoff(env, &e))?;
    Ok(reported(h, step))
}

/// The caller cancelled (during a wait, or an attempt the helper abandons): records an attempt
/// in progress as cancelled and finishes. Returns the finished step.
#[napi(catch_unwind)]
pub fn exec_cancel(env: &Env, h: &mut External<ExecBox>) -> Result<f64> {
    let v = h.exec(env)?.cancel();
    Ok(step_number(h, Step::Finish(v)))
}

/// The helper cannot make the attempt the last wait leads to (a request body that cannot be sent
/// twice): finishes with the core's give-up (`attempts_exhausted`, carrying that wait as
/// `retryAfterMs`). `invalid_input` naming `execution` unless the last step was a wait. Returns
/// the finished step.
#[napi(catch_unwind)]
pub fn exec_stop(env: &Env, h: &mut External<ExecBox>) -> Result<f64> {
    let v = h.exec(env)?.stop().map_err(|e| err::holdoff(env, &e))?;
    Ok(step_number(h, Step::Finish(v)))
}

/// The outcome code the last attempt was recorded as (see `outcomeNames`), or -1 before any.
#[napi(catch_unwind)]
pub fn exec_last_outcome(h: &External<ExecBox>) -> i32 {
    h.exec
        .as_ref()
        .and_then(|e| e.last_outcome())
        .map_or(-1, |o| codes::outcome_code(o) as i32)
}

/// The wait the last step asked for: `{ attempts, delayMs, source, capped, serverDelayMs }`
/// (`source` the core's name: `backoff`, `retry_after`, `breaker`), or `null`.
#[napi(catch_unwind)]
pub fn exec_wait<'e>(env: &'e Env, h: &External<ExecBox>) -> Result<Option<Object<'e>>> {
    let Some(Step::Wait(w)) = h.last else {
        return Ok(None);
    };
    let mut o = Object::new(env)?;
    o.set("attempts", w.attempts)?;
    o.set("delayMs", ms(w.delay))?;
    o.set("source", w.source.name())?;
    o.set("capped", w.capped)?;
    set_ms(&mut o, "serverDelayMs", w.server_delay)?;
    Ok(Some(o))
}

/// The verdict of a finished call: `{ attempts, reason, retryAfterMs, serverDelayMs, capped }`
/// (`reason` the core's give-up reason, or `null`), or `null` while the call runs.
#[napi(catch_unwind)]
pub fn exec_verdict<'e>(env: &'e Env, h: &External<ExecBox>) -> Result<Option<Object<'e>>> {
    let Some(v) = h.exec.as_ref().and_then(|e| e.verdict()) else {
        return Ok(None);
    };
    let mut o = Object::new(env)?;
    o.set("attempts", v.attempts())?;
    let (reason, retry_after, server_delay, capped) = match v {
        Verdict::Rethrow { reason, .. } => (reason.map(|r| r.name()), None, None, false),
        Verdict::BreakerOpen { retry_after, .. } => {
            (Some(GiveUpReason::BreakerOpen.name()), retry_after, None, false)
        }
        Verdict::GiveUp(g) => (Some(g.reason.name()), g.retry_after, g.server_delay, g.capped),
        _ => (None, None, None, false),
    };
    match reason {
        Some(r) => o.set("reason", r)?,
        None => o.set("reason", Null)?,
    }
    set_ms(&mut o, "retryAfterMs", retry_after)?;
    set_ms(&mut o, "serverDelayMs", server_delay)?;
    o.set("capped", capped)?;
    Ok(Some(o))
}
