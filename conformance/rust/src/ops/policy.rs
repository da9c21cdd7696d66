//! Policy steps (`"policy": true`): `before`, `after` (each naming a logical `call`).

use std::sync::Arc;

use holdoff::interop::{Coded, ErrorKind, OutcomeKind, PermitSlot};
use holdoff::{Before, HoldoffError};
use serde_json::{json, Map, Value};

use super::{call_name, permit_name};
use crate::json::DECISION_KEYS;
use crate::{check, decision_json, headers, ms, opt_ms, outcome, Ctx, Time, R};

/// What an `after` step may assert: a decision, an `error`, the classified `outcome`.
fn after_keys() -> Vec<&'static str> {
    [DECISION_KEYS, &["error", "outcome"]].concat()
}

impl<T: Time> Ctx<T> {
    /// Asks before an attempt of the named call; a permit is kept under the step's `as`.
    pub(super) fn before(&mut self, step: &Value, expect: Option<&Value>) -> R<()> {
        let policy = self.policy.as_ref().ok_or("the case has no policy")?;
        let call = self.policy_calls.entry(call_name(step)).or_default();
        let mut a = Map::new();
        match policy.before_attempt(call) {
            Before::Go(p) => {
                a.insert("action".into(), json!("go"));
                a.insert("episode".into(), json!(p.episode()));
                a.insert("probe".into(), json!(p.is_probe()));
                self.permits.insert(
                    permit_name(step),
                    (PermitSlot::new(p), Arc::clone(policy.breaker())),
                );
            }
            Before::Wait(d) => {
                a.insert("action".into(), json!("wait"));
                a.insert("delay_ms".into(), ms(d));
            }
            Before::GiveUp { reason, retry_after } => {
                a.insert("action".into(), json!("give_up"));
                a.insert("reason".into(), json!(reason.name()));
                a.insert("retry_after_ms".into(), opt_ms(retry_after));
            }
        }
        check(
            expect,
            &a,
            &[
                "action",
                "episode",
                "probe",
                "delay_ms",
                "reason",
                "retry_after_ms",
            ],
        )
    }

    /// Reports the attempt of the permit `permit` (default `"_last"`): an `outcome`, or a
    /// `status` with `headers` for the policy to classify.
    pub(super) fn after(&mut self, step: &Value, expect: Option<&Value>) -> R<()> {
        let policy = self.policy.as_ref().ok_or("the case has no policy")?;
        let name = step.get("permit").and_then(Value::as_str).unwrap_or("_last");
        let (slot, _) = self
            .permits
            .get(name)
            .ok_or_else(|| format!("no permit named {name:?}"))?;
        let call = self.policy_calls.entry(call_name(step)).or_default();
        let mut a = Map::new();
        let permit = match slot.take(policy.breaker()) {
            Ok(p) => p,
            Err(e) => {
                a.insert(
                    "error".into(),
                    json!(ErrorKind::of(&HoldoffError::from(e)).name()),
                );
                return check(expect, &a, &after_keys());
            }
        };
        let result = if let Some(status) = step.get("status").and_then(Value::as_i64) {
            let headers = headers(step)?;
            policy
                .after_response(
                    call,
                    permit,
                    status,
                    headers.iter().map(|(n, v)| (n.as_str(), v.as_str())),
                )
                .map(|(d, c)| (d, Some(c.outcome)))
        } else {
            let o = outcome(step.get("outcome").ok_or("after needs outcome or status")?)?;
            policy
                .after_attempt(call, permit, o)
                .map(|d| (d, None))
                .map_err(HoldoffError::from)
        };
        match result {
            Ok((d, o)) => {
                a = decision_json(&d);
                if let Some(o) = o {
                    a.insert("outcome".into(), json!(OutcomeKind::of(&o).name()));
                }
            }
            Err(e) => {
                a.insert("error".into(), json!(ErrorKind::of(&e).name()));
            }
        }
        check(expect, &a, &after_keys())
    }
}
