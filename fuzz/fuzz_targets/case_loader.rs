//! The conformance-case loader: the Rust reference runner (`core/tests/conformance.rs`, included
//! unchanged through `build.rs`) fed arbitrary JSON, either a case file (`{"cases": [...]}`) or
//! one case. A malformed case must be a failed case (`Err`), never a panic in the core, and
//! running the same case twice gives the same verdict (no hidden global state leaks into a case).
//!
//! The runner itself trusts `conformance/schema.json` in three places, which are not core
//! behaviour and are skipped here (see `runnable`): a `policy` case without a breaker or budget
//! (`expect`), `at + repeat * every_ms` past `u64` (overflow), and huge `repeat` counts (time).
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;

#[allow(dead_code, clippy::all)]
mod runner {
    include!(concat!(env!("OUT_DIR"), "/conformance_runner.rs"));

    pub fn run(case: &Value) -> Result<(), String> {
        complete(run_case::<ManualClock>(case, &mut Driver))
    }
}

/// Repetitions allowed per case, so that one input stays fast.
const MAX_REPEATS: u64 = 2_000;

fn runnable(case: &Value) -> bool {
    if case.get("policy").and_then(Value::as_bool).unwrap_or(false) {
        let has = |k: &str| {
            case.get("config")
                .and_then(|c| c.get(k))
                .is_some_and(|v| !v.is_null())
        };
        if !has("breaker") || !has("budget") {
            return false;
        }
    }
    let Some(steps) = case.get("steps").and_then(Value::as_array) else {
        return true;
    };
    let mut total = 0u64;
    for step in steps {
        let repeat = step.get("repeat").and_then(Value::as_u64).unwrap_or(1);
        total = total.saturating_add(repeat.max(1));
        if total > MAX_REPEATS {
            return false;
        }
        if let Some(at) = step.get("at").and_then(Value::as_u64) {
            let every = step.get("every_ms").and_then(Value::as_u64).unwrap_or(0);
            let last = repeat
                .saturating_sub(1)
                .checked_mul(every)
                .and_then(|x| x.checked_add(at));
            if last.is_none() {
                return false;
            }
        }
    }
    true
}

fuzz_target!(|data: &[u8]| {
    let Ok(doc) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let cases: Vec<&Value> = match doc.get("cases").and_then(Value::as_array) {
        Some(list) => list.iter().take(8).collect(),
        None => vec![&doc],
    };
    for case in cases {
        if !runnable(case) {
            continue;
        }
        let first = runner::run(case);
        let second = runner::run(case);
        assert_eq!(first, second, "the same case gave two verdicts");
    }
});
