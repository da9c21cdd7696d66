//! Every numeric code that stands for a core enum across N-API, in one place. The codes and names
//! are the core's (`holdoff::interop::Coded`, the C ABI's numbers); `holdoff.js` reads the name
//! tables (`outcomeNames`, `stateNames`, `verdictNames`, indexed by code) at load time.
//!
//! | enum | direction | codes |
//! |---|---|---|
//! | [`Outcome`] | JS -> core (and back by `execLastOutcome`) | [`OutcomeKind`]: 0 success, 1 answer, 2 failure, 3 timeout, 4 retry later, 5 cancelled |
//! | [`Effect`] / [`PermitError`] | core -> JS (`breakerRecord`) | 0 counted, 1 stale, 2 ignored, -1 foreign, -2 already recorded |
//! | [`State`] of a [`Refusal`] | core -> JS (`breakerAllow`) | `-1 - (state + 8 * episode)`, `state` its code |
//! | [`Verdict`] | core -> JS (finished steps) | [`VerdictKind`] |
//! | [`Attempted`] | JS -> core (`execComplete`) | [`AttemptedKind`]: 0 returned, 1 raised, 2 cancelled, 3 bug |

use std::time::Duration;

use holdoff::interop::{AttemptedKind, Coded, DecisionKind, OutcomeKind, VerdictKind};
use holdoff::{Attempted, Effect, GiveUpReason, Outcome, PermitError, Refusal, State, Verdict, WaitSource};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::convert::input_ms;
use crate::err::{self, Kind};

// ---------------------------------------------------------------------------------------------
// Outcome

/// The outcome of a code (the core's [`OutcomeKind`] codes), `retry_later_ms` read only for a
/// retry-later; `RangeError` `invalid_input` naming `outcome` for an unknown code, naming
/// `outcome.retryLaterMs` for a delay the core's units refuse.
#[inline]
pub(crate) fn outcome(env: &Env, code: u32, retry_later_ms: f64) -> Result<Outcome> {
    match OutcomeKind::from_code(code) {
        Some(OutcomeKind::RetryLater) => {
            let d = input_ms(env, "outcome.retryLaterMs", retry_later_ms)?;
            Ok(Outcome::RetryLater(d))
        }
        // The hot path: no duration to convert.
        Some(k) => Ok(k.outcome(Duration::ZERO)),
        None => Err(err::throw(
            env,
            Kind::Range,
            "invalid_input",
            format!("invalid input: unknown outcome code {code}"),
            Some("outcome"),
        )),
    }
}

/// The code of an outcome (the inverse of [`outcome`]).
pub(crate) fn outcome_code(o: Outcome) -> u32 {
    OutcomeKind::of(&o).code()
}

/// The core's outcome names, indexed by their codes (`holdoff.js` builds its name-to-code
/// table from this).
#[napi]
pub fn outcome_names() -> Vec<&'static str> {
    names::<OutcomeKind>()
}

/// The names of a coded enum indexed by code (the codes of these enums are dense from 0).
fn names<K: Coded>() -> Vec<&'static str> {
    K::ALL.iter().map(|k| k.name()).collect()
}

// ---------------------------------------------------------------------------------------------
// Effect of a record

/// What recording did: the [`Effect`]'s code (0 counted, 1 stale, 2 ignored); -1 a foreign
/// permit, -2 one already recorded.
pub(crate) fn effect_code(r: std::result::Result<Effect, PermitError>) -> i32 {
    match r {
        Ok(e) => e.code() as i32,
        Err(PermitError::Foreign) => -1,
        Err(PermitError::AlreadyRecorded) => -2,
    }
}

// ---------------------------------------------------------------------------------------------
// Breaker state of a refusal

/// How many state codes a refusal code leaves room for (`State` has five).
const REFUSAL_STATES: f64 = 8.0;

/// A refusal as one negative number: `-1 - (state + 8 * episode)`, `state` the code of
/// [`state_names`].
pub(crate) fn refusal_code(r: &Refusal) -> f64 {
    -1.0 - (f64::from(r.state.code()) + REFUSAL_STATES * f64::from(r.episode))
}

/// The core's state names indexed by their code, which refusal codes carry.
#[napi]
pub fn state_names() -> Vec<&'static str> {
    names::<State>()
}

// ---------------------------------------------------------------------------------------------
// Verdict of a finished call

/// The code of a verdict: its kind's code.
pub(crate) fn verdict_code(v: &Verdict) -> f64 {
    f64::from(VerdictKind::of(v).code())
}

/// The core's verdict names, indexed by the codes of finished steps.
#[napi]
pub fn verdict_names() -> Vec<&'static str> {
    names::<VerdictKind>()
}

// ---------------------------------------------------------------------------------------------
// How an attempt ended

/// How an attempt ended from its code `how` (the core's [`AttemptedKind`] codes: 0 returned,
/// 1 raised, 2 cancelled, 3 bug; with the outcome's code and, for a retry later, its delay, when
/// it returned or raised); `RangeError` `invalid_input` naming `attempted` for an unknown `how`,
/// as [`outcome`] for a bad outcome.
pub(crate) fn attempted(env: &Env, how: u32, outcome_code: u32, retry_later_ms: f64) -> Result<Attempted> {
    let kind = AttemptedKind::from_code(how).ok_or_else(|| {
        err::throw(
            env,
            Kind::Range,
            "invalid_input",
            format!("invalid input: unknown attempt code {how}"),
            Some("attempted"),
        )
    })?;
    let o = match kind {
        AttemptedKind::Returned | AttemptedKind::Raised => outcome(env, outcome_code, retry_later_ms)?,
        AttemptedKind::Cancelled | AttemptedKind::Bug => Outcome::Cancelled,
    };
    Ok(kind.attempted(o))
}

// ---------------------------------------------------------------------------------------------
// Decision of a budget

/// The core's names for a decision's parts, indexed by the codes `budget_decide_code` packs:
/// `[kinds, sources, reasons]`.
#[napi]
pub fn decision_names() -> Vec<Vec<&'static str>> {
    vec![
        names::<DecisionKind>(),
        names::<WaitSource>(),
        names::<GiveUpReason>(),
    ]
}
