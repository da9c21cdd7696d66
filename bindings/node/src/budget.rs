//! The retry budget (`holdoff::RetryBudget`) and the per-call state it decides on
//! (`holdoff::RetryState`).

use std::sync::{Arc, Mutex};

use holdoff::interop::{Coded, DecisionKind, DecisionParts};
use holdoff::{Decision, RetryBudget, RetryState};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::clock::{clock_of, ClockBox};
use crate::convert::{instant_ms, ms, set_ms};
use crate::{codes, err, lock, opts};

/// A retry budget.
pub struct BudgetBox {
    pub(crate) budget: Arc<RetryBudget>,
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

/// Decides what to do after an answer (outcome codes as in `breakerRecord`).
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
    decision_object(env, &d)
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
