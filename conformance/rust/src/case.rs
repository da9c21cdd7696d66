//! Running one case: build it, then each step in order, moving time to each step's `at`.

use std::future::Future;
use std::sync::Arc;

use holdoff::interop::{Coded, ErrorKind};
use holdoff::{HoldoffError, Instant};
use serde_json::{json, Map, Value};

use crate::{check, check_execute, Ctx, FleetBackend, MemoryBackend, Time, R};

/// How a runner runs an `execute` step (`conformance/README.md`, "Execute"): through its
/// language's retry helpers, on the case's objects and time.
pub trait Execute<T> {
    /// Runs the step; returns what the helper's hooks and its caller saw: `{"attempts": [...],
    /// "waits": [...], "result": {...}}` (compared by [`check_execute`]).
    fn execute(&mut self, ctx: &Ctx<T>, step: &Value) -> impl Future<Output = R<Value>>;
}

/// Runs `case` on a fresh `T`, its `execute` steps through `helpers`. An `expect_error` case
/// passes when building fails with that error; any other passes when every step meets its
/// `expect`. The error names the step, its op, the time and the repetition.
pub async fn run_case<T: Time>(case: &Value, helpers: &mut impl Execute<T>) -> R<()> {
    run_case_on(case, helpers, Arc::new(MemoryBackend)).await
}

/// [`run_case`] with the fleet cases' store on `backend` (see [`FleetBackend`]).
pub async fn run_case_on<T: Time>(
    case: &Value,
    helpers: &mut impl Execute<T>,
    backend: Arc<dyn FleetBackend>,
) -> R<()> {
    let mut ctx = match (Ctx::<T>::build_on(case, backend), case.get("expect_error")) {
        (Ok(_), Some(e)) => return Err(format!("expected configuration error {e}, but it built")),
        (Err(err), Some(e)) => {
            let mut a = Map::new();
            a.insert("error".into(), json!(ErrorKind::of(&err).name()));
            if let HoldoffError::Config(c) = &err {
                a.insert("field".into(), json!(c.field));
            }
            return check(Some(e), &a, &["error", "field"]);
        }
        (Err(err), None) => return Err(format!("configuration refused: {err}")),
        (Ok(ctx), None) => ctx,
    };
    let steps = case
        .get("steps")
        .and_then(Value::as_array)
        .ok_or("case without steps")?;
    for (i, step) in steps.iter().enumerate() {
        let repeat = step.get("repeat").and_then(Value::as_u64).unwrap_or(1);
        let every = step.get("every_ms").and_then(Value::as_u64).unwrap_or(0);
        let op = step.get("op").and_then(Value::as_str).unwrap_or("?");
        for r in 0..repeat {
            if let Some(at) = step.get("at").and_then(Value::as_u64) {
                let t = at + r * every;
                ctx.time
                    .move_to(Instant::from_millis(t))
                    .await
                    .map_err(|e| format!("step {i}: clock cannot move to {t}: {e}"))?;
            }
            let done = if op == "execute" {
                let got = helpers.execute(&ctx, step).await;
                got.and_then(|got| check_execute(step.get("expect"), &got))
            } else {
                ctx.step(step).await
            };
            done.map_err(|e| {
                let rep = if repeat > 1 {
                    format!(" (repetition {r})")
                } else {
                    String::new()
                };
                format!("step {i} {op} at {}{rep}: {e}", ctx.now_ms())
            })?;
        }
    }
    Ok(())
}
