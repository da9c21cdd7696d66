//! Retry-budget steps: `decide`, `budget_state` (each naming a logical `call`).

use holdoff::RetryBudget;
use serde_json::{json, Map, Value};

use super::call_name;
use crate::json::DECISION_KEYS;
use crate::{check, decision_json, outcome, Ctx, Time, R};

impl<T: Time> Ctx<T> {
    fn budget(&self) -> R<&RetryBudget> {
        self.budget
            .as_deref()
            .ok_or_else(|| "the case has no budget".into())
    }

    /// The budget's decision after the named call's attempt ended with `outcome`.
    pub(super) fn decide(&mut self, step: &Value, expect: Option<&Value>) -> R<()> {
        let o = outcome(step.get("outcome").ok_or("decide needs outcome")?)?;
        let budget = self.budget.clone().ok_or("the case has no budget")?;
        let call = self.calls.entry(call_name(step)).or_default();
        let a = decision_json(&budget.decide(call, o));
        check(expect, &a, DECISION_KEYS)
    }

    pub(super) fn budget_state(&self, step: &Value, expect: Option<&Value>) -> R<()> {
        let start = self.budget()?.episode_start();
        let mut a = Map::new();
        a.insert("episode_active".into(), json!(start.is_some()));
        a.insert(
            "episode_start_ms".into(),
            start.map_or(Value::Null, |t| json!(t.as_nanos() / 1_000_000)),
        );
        let retries = self.calls.get(&call_name(step)).map_or(0, |c| c.retries());
        a.insert("retries".into(), json!(retries));
        check(expect, &a, &["episode_active", "episode_start_ms", "retries"])
    }
}
