//! The steps other than `execute`, through holdoff's public API: [`Ctx::step`] dispatches each
//! op to its area's module.

mod breaker;
mod budget;
mod clock;
mod http;
mod metrics;
mod policy;
mod quota;

use serde_json::Value;

use crate::{Ctx, Time, R};

impl<T: Time> Ctx<T> {
    /// Runs one step that is not `execute` and compares its `expect`; an unknown op fails.
    pub async fn step(&mut self, step: &Value) -> R<()> {
        let op = step.get("op").and_then(Value::as_str).ok_or("step without op")?;
        let expect = step.get("expect");
        match op {
            "allow" => self.allow_step(step, expect),
            "record" => self.record_step(step, expect),
            "call" => self.call_step(step, expect),
            "record_foreign" => self.record_foreign(step, expect),
            "snapshot" => self.snapshot(step, expect),
            "events" => self.events(step, expect),
            "force_open" | "disable" | "reset" => self.command(op, step, expect),
            "group_snapshot" => self.group_snapshot(expect),
            "clock_set" => self.clock_set(step, expect).await,
            "clock_advance" => self.clock_advance(step, expect).await,
            "decide" => self.decide(step, expect),
            "budget_state" => self.budget_state(step, expect),
            "parse_retry_after" => self.parse_retry_after(step, expect),
            "hint" => self.hint(step, expect),
            "classify" => self.classify(step, expect),
            "quota_acquire" => self.quota_acquire(step, expect),
            "quota_success" => self.quota_success(step, expect),
            "before" => self.before(step, expect),
            "after" => self.after(step, expect),
            "fleet_sync" => self.fleet_sync(step, expect),
            "fleet_store" => self.fleet_store_step(step, expect),
            "metrics" => self.metrics_step(step, expect),
            other => Err(format!("unknown op {other:?}")),
        }
    }
}

/// The logical call a budget or policy step names (`call`; `"default"` when absent).
fn call_name(step: &Value) -> String {
    step.get("call")
        .and_then(Value::as_str)
        .unwrap_or("default")
        .to_owned()
}

/// The name a step keeps its permit under (`as`; `"_last"` when absent).
fn permit_name(step: &Value) -> String {
    step.get("as")
        .and_then(Value::as_str)
        .unwrap_or("_last")
        .to_owned()
}
