//! Comparing a step's `expect` with what the operation produced.

use serde_json::{Map, Value};

use crate::R;

/// Compares `expect` with `actual`; `known` lists every key the op may assert (an unknown one
/// fails). A key the op did not produce compares as `null`; numbers compare by value.
pub fn check(expect: Option<&Value>, actual: &Map<String, Value>, known: &[&str]) -> R<()> {
    let Some(expect) = expect else { return Ok(()) };
    let obj = expect.as_object().ok_or("expect must be an object")?;
    for (k, v) in obj {
        if !known.contains(&k.as_str()) {
            return Err(format!("unknown expect key {k:?}"));
        }
        let got = actual.get(k).unwrap_or(&Value::Null);
        let same = match (v, got) {
            (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
            _ => v == got,
        };
        if !same {
            return Err(format!(
                "{k}: expected {v}, got {got}  (all: {})",
                Value::Object(actual.clone())
            ));
        }
    }
    Ok(())
}

/// Compares an `execute` step's expectation with `got` (`{"attempts": [...], "waits": [...],
/// "result": {...}}`): `attempts` and `waits` are exact lists (each item asserting the keys it
/// lists), `result` asserts the keys it lists.
pub fn check_execute(expect: Option<&Value>, got: &Value) -> R<()> {
    let Some(expect) = expect.and_then(Value::as_object) else {
        return Ok(());
    };
    for (k, v) in expect {
        match k.as_str() {
            "attempts" | "waits" => {
                let want = v.as_array().ok_or("attempts and waits are arrays")?;
                let have = got[k].as_array().expect("array");
                if want.len() != have.len() {
                    return Err(format!(
                        "{k}: expected {}, got {}: {}",
                        want.len(),
                        have.len(),
                        got[k]
                    ));
                }
                let keys: &[&str] = if k == "attempts" {
                    &["at", "probe", "outcome"]
                } else {
                    &["delay_ms", "source", "capped", "server_delay_ms"]
                };
                for (i, (w, h)) in want.iter().zip(have).enumerate() {
                    check(Some(w), h.as_object().expect("object"), keys)
                        .map_err(|e| format!("{k}[{i}]: {e}"))?;
                }
            }
            "result" => check(
                Some(v),
                got["result"].as_object().expect("object"),
                &[
                    "returns",
                    "raises",
                    "reason",
                    "attempts",
                    "attempt",
                    "retry_after_ms",
                    "server_delay_ms",
                    "capped",
                    "cause",
                ],
            )
            .map_err(|e| format!("result: {e}"))?,
            other => return Err(format!("unknown expect key {other:?}")),
        }
    }
    Ok(())
}
