//! The policy (`holdoff::Policy`): a breaker, a budget, an optional quota and a classifier, and
//! the manual API around one attempt on its per-call state (`PolicyCall`, the core's
//! `policy::Call`). The retry helpers run on `execution.rs`.

use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex};

use holdoff::interop::Coded;
use holdoff::{Before, Call, PermitError, Policy};
use napi::bindgen_prelude::*;
use napi::ValueType;
use napi_derive::napi;

use crate::breaker::{permit_from_raw, permit_object, BreakerBox};
use crate::budget::{decision_object, note_episode, BudgetBox};
use crate::convert::{ms, set_ms};
use crate::http::{headers_of, outcome_set, status_int, ClassifierBox};
use crate::quota::QuotaBox;
use crate::{codes, err, lock, opts};

/// A policy, shared with the executions of its retry helpers (`execution.rs`).
pub struct PolicyBox {
    pub(crate) policy: Arc<Policy>,
    /// Its budget's episode flag (`BudgetBox::episode`), written after its decisions.
    pub(crate) episode: Arc<AtomicU32>,
}

/// The per-call state of the manual policy API (`policy.newCall()`).
pub struct PolicyCallBox {
    call: Mutex<Call>,
}

/// A policy over a breaker, a budget (same clock), an optional quota and a classifier.
#[napi(catch_unwind)]
pub fn policy_new(
    env: &Env,
    breaker: &External<BreakerBox>,
    budget: &External<BudgetBox>,
    quota: Option<&External<QuotaBox>>,
    classifier: Option<&External<ClassifierBox>>,
) -> Result<External<PolicyBox>> {
    let policy = Policy::new(
        Arc::clone(&breaker.breaker),
        Arc::clone(&budget.budget),
        quota.map(|q| Arc::clone(&q.quota)),
        classifier.map(|c| c.classifier.clone()).unwrap_or_default(),
    )
    .map_err(|e| err::config(env, &e))?;
    Ok(External::new(PolicyBox {
        policy: Arc::new(policy),
        episode: Arc::clone(&budget.episode),
    }))
}

/// Whether `policy.execute` may run a first attempt on the breaker's fast-path word, with no
/// native call, when it is given no options: its clock is the system clock (a manual clock's
/// readings are counted and driven by tests: every call goes through the core) and it has no
/// quota (a success deposits in it). The rest of what a first-attempt success would need from
/// the core changes later and is watched by `holdoff.js`: the breaker's word, the budget's
/// episode flag (`budgetEpisodeFlag`) and whether the policy's retry metrics count (from their
/// first read, `policyMetrics`, on).
#[napi(catch_unwind)]
pub fn policy_fast_eligible(h: &External<PolicyBox>) -> bool {
    crate::clock::is_system_clock(h.policy.breaker().clock()) && h.policy.quota().is_none()
}

/// A fresh logical call for the manual policy API.
#[napi(catch_unwind)]
pub fn policy_new_call() -> External<PolicyCallBox> {
    External::new(PolicyCallBox {
        call: Mutex::new(Call::new()),
    })
}

/// Attempts admitted so far in this call.
#[napi(catch_unwind)]
pub fn policy_call_attempts(call: &External<PolicyCallBox>) -> u32 {
    lock(&call.call).attempts()
}

/// Retries this call took on the budget's counted path.
#[napi(catch_unwind)]
pub fn policy_call_retries(call: &External<PolicyCallBox>) -> u32 {
    lock(&call.call).retry_state().retries()
}

fn before_object<'e>(env: &'e Env, b: Before, breaker: u32) -> Result<Object<'e>> {
    match b {
        Before::Go(p) => {
            let mut o = permit_object(env, p, breaker)?;
            o.set("action", "go")?;
            Ok(o)
        }
        Before::Wait(d) => {
            let mut o = Object::new(env)?;
            o.set("action", "wait")?;
            o.set("delayMs", ms(d))?;
            Ok(o)
        }
        Before::GiveUp { reason, retry_after } => {
            let mut o = Object::new(env)?;
            o.set("action", "give_up")?;
            o.set("reason", reason.name())?;
            set_ms(&mut o, "retryAfterMs", retry_after)?;
            Ok(o)
        }
    }
}

/// Before an attempt: `{ action: 'go', ...permit }`, `{ action: 'wait', delayMs }` or
/// `{ action: 'give_up', reason, retryAfterMs }`.
#[napi(catch_unwind)]
pub fn policy_before_attempt<'e>(
    env: &'e Env,
    h: &External<PolicyBox>,
    call: &External<PolicyCallBox>,
) -> Result<Object<'e>> {
    let b = h.policy.before_attempt(&mut lock(&call.call));
    before_object(env, b, h.policy.breaker().id())
}

/// After an attempt: the decision object, or `null` if the permit belongs to another breaker.
#[napi(catch_unwind)]
#[allow(clippy::too_many_arguments)]
pub fn policy_after_attempt<'e>(
    env: &'e Env,
    h: &External<PolicyBox>,
    call: &External<PolicyCallBox>,
    breaker: u32,
    episode: u32,
    probe: u32,
    outcome_code: u32,
    retry_later_ms: f64,
) -> Result<Option<Object<'e>>> {
    let o = codes::outcome(env, outcome_code, retry_later_ms)?;
    let permit = permit_from_raw(breaker, episode, probe);
    let d = h.policy.after_attempt(&mut lock(&call.call), permit, o);
    note_episode(&h.episode, h.policy.budget());
    match d {
        Ok(d) => decision_object(env, &d).map(Some),
        Err(_) => Ok(None),
    }
}

/// After an attempt that got an HTTP response (flat headers): the decision object with the
/// classified `outcome`, or `null` if the permit belongs to another breaker.
#[napi(catch_unwind)]
#[allow(clippy::too_many_arguments)]
pub fn policy_after_response<'e>(
    env: &'e Env,
    h: &External<PolicyBox>,
    call: &External<PolicyCallBox>,
    breaker: u32,
    episode: u32,
    probe: u32,
    status: Unknown<'_>,
    headers: Vec<String>,
) -> Result<Option<Object<'e>>> {
    if status.get_type()? != ValueType::Number {
        return Err(err::input_type(
            env,
            "status",
            "an HTTP status number",
            &opts::describe(env, &status),
        ));
    }
    let status = status_int(unsafe { status.cast::<f64>()? });
    let permit = permit_from_raw(breaker, episode, probe);
    let r = h
        .policy
        .after_response(&mut lock(&call.call), permit, status, headers_of(&headers));
    note_episode(&h.episode, h.policy.budget());
    match r {
        Ok((d, c)) => {
            let mut o = decision_object(env, &d)?;
            outcome_set(&mut o, &c.outcome)?;
            Ok(Some(o))
        }
        Err(holdoff::HoldoffError::Permit(PermitError::Foreign)) => Ok(None),
        Err(e) => Err(err::holdoff(env, &e)),
    }
}
