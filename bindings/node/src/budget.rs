//! The retry budget (`holdoff::RetryBudget`) and the per-call state it decides on
//! (`holdoff::RetryState`).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use holdoff::interop::{Coded, DecisionKind, DecisionParts};
use holdoff::{Decision, RetryBudget, RetryState};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::clock::{clock_of, ClockBox};
use crate::convert::{instant_ms, ms, set_ms};
use crate::{codes, err, external, lock, opts};

/// A retry budget, and the two numbers of its last decision that `budget_decide` does not
/// return (`[delayMs, serverDelayMs]` as f64 bits), which JavaScript reads in place.
pub struct BudgetBox {
    pub(crate) budget: Arc<RetryBudget>,
    out: Arc<[AtomicU64; 2]>,
    /// The state `budget_decide_fresh` left changed, until `retry_state_take` takes it.
    fresh: Mutex<Option<RetryState>>,
    /// 1 while a rate-limit episode is under way, else 0: written after every decision this
    /// binding makes on the budget (`note_episode`), read in place by JavaScript, whose
    /// `policy.execute` runs a first attempt without the core only while it is 0.
    pub(crate) episode: Arc<AtomicU32>,
}

/// Writes the budget's episode state into its flag (see `BudgetBox::episode`), after a decision
/// on it.
pub(crate) fn note_episode(flag: &AtomicU32, budget: &RetryBudget) {
    flag.store(u32::from(budget.episode_start().is_some()), Ordering::Release);
}

/// The per-call state of a budget (`holdoff::RetryState`).
pub struct RetryStateBox {
    state: Mutex<RetryState>,
}

/// A retry budget from options; `RangeError`/`TypeError` `invalid_config`.
#[napi(catch_unwind)]
pub fn budget_new(
    env: &Env,
    options: Unknown<'_>,
    clock: Option<&External<ClockBox>>,
) -> Result<External<BudgetBox>> {
    let cfg = opts::budget(env, Some(options))?
        .to_config()
        .map_err(|e| err::config(env, &e))?;
    let budget = RetryBudget::new(cfg, clock_of(clock)).map_err(|e| err::config(env, &e))?;
    Ok(External::new(BudgetBox {
        budget: Arc::new(budget),
        out: Arc::new([AtomicU64::new(0), AtomicU64::new(0)]),
        fresh: Mutex::new(None),
        episode: Arc::new(AtomicU32::new(0)),
    }))
}

/// The state of a fresh logical call, for `budgetDecide`.
#[napi(catch_unwind)]
pub fn retry_state_new() -> External<RetryStateBox> {
    External::new(RetryStateBox {
        state: Mutex::new(RetryState::new()),
    })
}

/// A decision as `{ decision: 'done' }`, `{ decision: 'retry', delayMs, source, serverDelayMs,
/// capped }` or `{ decision: 'give_up', reason, serverDelayMs }`.
pub(crate) fn decision_object<'e>(env: &'e Env, d: &Decision) -> Result<Object<'e>> {
    let p = DecisionParts::from(*d);
    let mut o = Object::new(env)?;
    o.set("decision", p.kind.name())?;
    if let Some(source) = p.source {
        o.set("delayMs", ms(p.delay))?;
        o.set("source", source.name())?;
    }
    if let Some(reason) = p.reason {
        o.set("reason", reason.name())?;
    }
    if p.kind != DecisionKind::Done {
        set_ms(&mut o, "serverDelayMs", p.server_delay)?;
    }
    if p.kind == DecisionKind::Retry {
        o.set("capped", p.capped)?;
    }
    Ok(o)
}

/// Decides what to do after an answer (outcome codes as in `breakerRecord`): the decision
/// object (`decision_object`). `holdoff.js` uses it only where external buffers are refused.
#[napi(catch_unwind)]
pub fn budget_decide<'e>(
    env: &'e Env,
    h: &External<BudgetBox>,
    state: &External<RetryStateBox>,
    outcome_code: u32,
    retry_later_ms: f64,
) -> Result<Object<'e>> {
    let o = codes::outcome(env, outcome_code, retry_later_ms)?;
    let d = h.budget.decide(&mut lock(&state.state), o);
    note_episode(&h.episode, &h.budget);
    decision_object(env, &d)
}

/// Packing of a decision's codes in the number `budget_decide_code` returns.
const KIND_BITS: f64 = 4.0; // DecisionKind codes < 4
const SOURCE_BITS: f64 = 16.0; // WaitSource codes + 1 < 16
const REASON_BITS: f64 = 64.0; // GiveUpReason codes + 1 < 64

/// `budget_decide` without building an object (a decision object built natively costs several
/// times the decision): returns `kind + 4 * (source + 1) + 64 * (reason + 1) + 4096 * capped +
/// 8192 * hasServerDelay` (codes indexing `decisionNames()`, `+ 1` terms 0 when absent); a retry's
/// `delayMs` and the `serverDelayMs` are then in the budget's out buffer (`budgetOut`).
#[napi(catch_unwind)]
pub fn budget_decide_code(
    env: &Env,
    h: &External<BudgetBox>,
    state: &External<RetryStateBox>,
    outcome_code: u32,
    retry_later_ms: f64,
) -> Result<f64> {
    let o = codes::outcome(env, outcome_code, retry_later_ms)?;
    let d = h.budget.decide(&mut lock(&state.state), o);
    note_episode(&h.episode, &h.budget);
    Ok(pack(h, d))
}

/// A decision's packed codes (`budget_decide_code`), its numbers stored in the out buffer.
fn pack(h: &BudgetBox, d: Decision) -> f64 {
    let p = DecisionParts::from(d);
    let [delay, server] = &*h.out;
    delay.store(ms(p.delay).to_bits(), Ordering::Relaxed);
    server.store(p.server_delay.map_or(0.0, ms).to_bits(), Ordering::Relaxed);
    let opt = |c: Option<u32>| c.map_or(0.0, |c| f64::from(c) + 1.0);
    f64::from(p.kind.code())
        + KIND_BITS * opt(p.source.map(|s| s.code()))
        + KIND_BITS * SOURCE_BITS * opt(p.reason.map(|r| r.code()))
        + KIND_BITS * SOURCE_BITS * REASON_BITS * f64::from(u8::from(p.capped))
        + 2.0 * KIND_BITS * SOURCE_BITS * REASON_BITS * f64::from(u8::from(p.server_delay.is_some()))
}

/// Added to `budget_decide_fresh`'s number when the decision changed the fresh state.
const STATE_KEPT: f64 = 4.0 * KIND_BITS * SOURCE_BITS * REASON_BITS;

/// `budget_decide_code` for a call that has no state yet (`budget.newCall()` makes none until a
/// decision changes it: most calls end with a decision that leaves it fresh). Decides on a fresh
/// state; if the decision changed it, adds 16384 to the number and keeps the state for
/// `retry_state_take`.
#[napi(catch_unwind)]
pub fn budget_decide_fresh(
    env: &Env,
    h: &External<BudgetBox>,
    outcome_code: u32,
    retry_later_ms: f64,
) -> Result<f64> {
    let o = codes::outcome(env, outcome_code, retry_later_ms)?;
    let mut state = RetryState::new();
    let d = h.budget.decide(&mut state, o);
    note_episode(&h.episode, &h.budget);
    let packed = pack(h, d);
    if state == RetryState::new() {
        return Ok(packed);
    }
    *lock(&h.fresh) = Some(state);
    Ok(packed + STATE_KEPT)
}

/// The state the last `budget_decide_fresh` changed, as a handle (a fresh state if none).
#[napi(catch_unwind)]
pub fn retry_state_take(h: &External<BudgetBox>) -> External<RetryStateBox> {
    External::new(RetryStateBox {
        state: Mutex::new(lock(&h.fresh).take().unwrap_or_default()),
    })
}

/// The budget's out buffer (`budget_decide_code`) as a 16-byte external `ArrayBuffer`, to view as
/// a `Float64Array` (`[delayMs, serverDelayMs]`), or `null` when the runtime refuses external
/// buffers (the caller then uses `budget_decide`). Call once per budget object.
#[napi(catch_unwind)]
pub fn budget_out<'e>(env: &'e Env, h: &External<BudgetBox>) -> Result<Option<Unknown<'e>>> {
    let data = h.out.as_ptr();
    // SAFETY: `data` points at 16 bytes that live as long as the kept Arc, until the finalizer
    // runs; JavaScript only reads them, on this thread, between native calls.
    unsafe {
        external::view(
            env,
            data.cast_mut().cast(),
            std::mem::size_of::<[AtomicU64; 2]>(),
            Arc::clone(&h.out),
        )
    }
}

/// The budget's episode flag (`BudgetBox::episode`: 1 while a rate-limit episode is under way,
/// else 0) as a 4-byte external `ArrayBuffer`, to view as a `Uint32Array`; `null` when the
/// runtime refuses external buffers (a copy would go stale: the caller then never runs a call
/// without the core). Only this thread writes it, inside native calls, so JavaScript reads it
/// with a plain load between them.
#[napi(catch_unwind)]
pub fn budget_episode_flag<'e>(env: &'e Env, h: &External<BudgetBox>) -> Result<Option<Unknown<'e>>> {
    note_episode(&h.episode, &h.budget);
    let data = h.episode.as_ptr();
    // SAFETY: `data` points at 4 bytes that live as long as the kept Arc, until the finalizer
    // runs; JavaScript only reads them.
    unsafe {
        external::view(
            env,
            data.cast(),
            std::mem::size_of::<AtomicU32>(),
            Arc::clone(&h.episode),
        )
    }
}

/// When the current rate-limit episode started (ms on the budget's clock), or `null`.
#[napi(catch_unwind)]
pub fn budget_episode_start_ms(h: &External<BudgetBox>) -> Either<f64, Null> {
    match h.budget.episode_start() {
        Some(t) => Either::A(instant_ms(t)),
        None => Either::B(Null),
    }
}

/// Retries this call took on the counted path.
#[napi(catch_unwind)]
pub fn retry_state_retries(state: &External<RetryStateBox>) -> u32 {
    lock(&state.state).retries()
}

/// When this call first failed (ms on the budget's clock), or `null`.
#[napi(catch_unwind)]
pub fn retry_state_first_failure_ms(state: &External<RetryStateBox>) -> Either<f64, Null> {
    match lock(&state.state).first_failure() {
        Some(t) => Either::A(instant_ms(t)),
        None => Either::B(Null),
    }
}
