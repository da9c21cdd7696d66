//! The reference conformance runner: every case of `conformance/cases` through holdoff's public
//! Rust API, following the runner contract in `conformance/README.md`, on a [`ManualClock`].
//! The steps other than `execute` run in `holdoff-conformance` (shared with holdoff-tokio's
//! runner); this runner drives `execute` steps through the core's [`Execution`]. Prints one line
//! per case and ends with `N passed, N failed, N skipped`; exits non-zero on any failure.
//!
//! `HOLDOFF_CASES=substring` runs only the cases whose id contains it.

use std::time::Duration;

use holdoff::interop::{Coded, OutcomeKind};
use holdoff::{Attempted, Execution, ExecutionConfig, ManualClock, Outcome, Policy, Step, Verdict};
use holdoff_conformance::{complete, headers, ms, opt_ms, outcome, run_case, Ctx, Execute, Tally, R};
use serde_json::{json, Value};

/// Runs `execute` steps as a helper over the core's [`Execution`] does.
struct Driver;

impl Execute<ManualClock> for Driver {
    async fn execute(&mut self, ctx: &Ctx<ManualClock>, step: &Value) -> R<Value> {
        execute(ctx.policy()?, ctx.execution_config()?, ctx.time(), step)
    }
}

/// Runs one `execute` step through the core's [`Execution`], as a helper does: each attempt does
/// what the script says (moving the manual clock by its `takes_ms`), each wait advances the
/// clock by its delay, and `cancel_in_wait` cancels during that wait. Returns what a helper's
/// hooks and its caller would see: `attempts`, `waits` and `result`.
fn execute(policy: &Policy, cfg: ExecutionConfig, clock: &ManualClock, step: &Value) -> R<Value> {
    let script = step
        .get("script")
        .and_then(Value::as_array)
        .ok_or("execute needs a script")?;
    let cancel_in_wait = step.get("cancel_in_wait").and_then(Value::as_u64);
    let mut exec = Execution::new(policy, cfg).map_err(|e| e.to_string())?;
    let (mut attempts, mut waits) = (Vec::new(), Vec::new());
    let mut step_now = exec.next_step().map_err(|e| e.to_string())?;
    let verdict = loop {
        match step_now {
            Step::Attempt(plan) => {
                let item = script
                    .get(plan.number as usize - 1)
                    .ok_or_else(|| format!("attempt {} is not in the script", plan.number))?;
                let at = clock.peek().as_nanos() / 1_000_000;
                let takes = item.get("takes_ms").and_then(Value::as_u64).unwrap_or(0);
                clock.advance(Duration::from_millis(takes));
                let next = if let Some(r) = item.get("response") {
                    let status = r
                        .get("status")
                        .and_then(Value::as_i64)
                        .ok_or("response needs a status")?;
                    let hs = headers(r)?;
                    exec.complete_response(status, hs.iter().map(|(n, v)| (n.as_str(), v.as_str())))
                } else {
                    exec.complete(attempted(item)?)
                }
                .map_err(|e| e.to_string())?;
                attempts.push(json!({
                    "at": at,
                    "probe": plan.probe,
                    "outcome": exec.last_outcome().map(|o| OutcomeKind::of(&o).name()),
                }));
                step_now = next;
            }
            Step::Wait(w) => {
                waits.push(json!({
                    "delay_ms": ms(w.delay),
                    "source": w.source.name(),
                    "capped": w.capped,
                    "server_delay_ms": opt_ms(w.server_delay),
                }));
                if cancel_in_wait == Some(waits.len() as u64) {
                    break exec.cancel();
                }
                clock.advance(w.delay);
                step_now = exec.next_step().map_err(|e| e.to_string())?;
            }
            Step::Finish(v) => break v,
        }
    };
    let n = verdict.attempts();
    let cause = if n > 0 { json!(n) } else { Value::Null };
    let result = match verdict {
        Verdict::Return { .. } => json!({"returns": n}),
        Verdict::Rethrow { .. } => json!({"raises": "original", "attempt": n}),
        Verdict::BreakerOpen { retry_after, .. } => json!({
            "raises": "breaker_open", "attempts": n, "retry_after_ms": opt_ms(retry_after), "cause": cause,
        }),
        Verdict::GiveUp(g) => json!({
            "raises": "give_up", "reason": g.reason.name(), "attempts": n,
            "retry_after_ms": opt_ms(g.retry_after), "server_delay_ms": opt_ms(g.server_delay),
            "capped": g.capped, "cause": cause,
        }),
        Verdict::Cancelled { .. } => json!({"raises": "cancelled", "attempts": n}),
        Verdict::InvalidInput { .. } => json!({"raises": "invalid_input", "attempts": n}),
    };
    Ok(json!({"attempts": attempts, "waits": waits, "result": result}))
}

/// What a scripted attempt that does not return a response reports.
fn attempted(item: &Value) -> R<Attempted> {
    if let Some(o) = item.get("returns") {
        return Ok(Attempted::Returned(outcome(o)?));
    }
    if item.get("hits_deadline").and_then(Value::as_bool) == Some(true) {
        return Ok(Attempted::Raised(Outcome::Timeout));
    }
    if item.get("cancelled").and_then(Value::as_bool) == Some(true) {
        return Ok(Attempted::Cancelled);
    }
    Ok(
        match item
            .get("raises")
            .ok_or("an attempt returns, responds or raises")?
        {
            Value::String(s) => match s.as_str() {
                "transport" => Attempted::Raised(Outcome::Failure),
                "timeout" => Attempted::Raised(Outcome::Timeout),
                "answer" => Attempted::Raised(Outcome::Answer),
                "bug" => Attempted::Bug,
                other => return Err(format!("unknown raise {other:?}")),
            },
            v => Attempted::Raised(outcome(v)?),
        },
    )
}

fn main() {
    let mut tally = Tally::default();
    for (id, case) in holdoff_conformance::cases() {
        // The manual clock never waits: each case is ready at its first poll.
        tally.note(&id, complete(run_case::<ManualClock>(&case, &mut Driver)));
    }
    tally.finish();
}
