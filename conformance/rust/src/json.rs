//! The JSON the steps speak: durations in milliseconds, outcomes, decisions, state changes and
//! header lists.

use std::time::Duration;

use holdoff::interop::{Coded, DecisionKind, DecisionParts, OutcomeKind};
use holdoff::{Decision, Outcome, StateChange};
use serde_json::{json, Map, Value};

use crate::R;

/// A duration in milliseconds: an integer when whole, else fractional.
pub fn ms(d: Duration) -> Value {
    let n = d.as_nanos();
    if n % 1_000_000 == 0 {
        json!((n / 1_000_000) as u64)
    } else {
        json!(n as f64 / 1e6)
    }
}

/// [`ms`], or `null`.
pub fn opt_ms(d: Option<Duration>) -> Value {
    d.map_or(Value::Null, ms)
}

/// An outcome: `"success"`, `"answer"`, `"failure"`, `"timeout"`, `"cancelled"` or
/// `{"retry_later_ms": N}`.
pub fn outcome(v: &Value) -> R<Outcome> {
    Ok(match v {
        Value::String(s) => match OutcomeKind::from_name(s) {
            Some(k) if k != OutcomeKind::RetryLater => k.outcome(Duration::ZERO),
            _ => return Err(format!("unknown outcome {s:?}")),
        },
        Value::Object(o) => {
            let d = o
                .get("retry_later_ms")
                .and_then(Value::as_u64)
                .ok_or("retry_later_ms must be an integer")?;
            Outcome::RetryLater(Duration::from_millis(d))
        }
        _ => return Err(format!("bad outcome {v}")),
    })
}

/// An outcome's name and its retry-later delay (`null` for any other outcome).
pub(crate) fn outcome_json(o: &Outcome) -> (Value, Value) {
    let later = match o {
        Outcome::RetryLater(d) => ms(*d),
        _ => Value::Null,
    };
    (json!(OutcomeKind::of(o).name()), later)
}

/// What [`decision_json`] may produce, for a step to assert.
pub(crate) const DECISION_KEYS: &[&str] = &[
    "decision",
    "delay_ms",
    "source",
    "server_delay_ms",
    "capped",
    "reason",
];

/// A budget's or policy's decision: `decision` and, by kind, `delay_ms`, `source`,
/// `server_delay_ms`, `capped`, `reason`.
pub fn decision_json(d: &Decision) -> Map<String, Value> {
    let p = DecisionParts::from(*d);
    let mut m = Map::new();
    m.insert("decision".into(), json!(p.kind.name()));
    match p.kind {
        DecisionKind::Done => {}
        DecisionKind::Retry => {
            m.insert("delay_ms".into(), ms(p.delay));
            m.insert("source".into(), json!(p.source.map(Coded::name)));
            m.insert("server_delay_ms".into(), opt_ms(p.server_delay));
            m.insert("capped".into(), json!(p.capped));
        }
        DecisionKind::GiveUp => {
            m.insert("reason".into(), json!(p.reason.map(Coded::name)));
            m.insert("server_delay_ms".into(), opt_ms(p.server_delay));
        }
    }
    m
}

/// One item of an `events` step.
pub fn event_json(e: &StateChange) -> Value {
    json!({
        "at": e.at.as_nanos() / 1_000_000,
        "from": e.from.name(),
        "to": e.to.name(),
        "episode": e.episode,
        "reason": e.reason.name(),
        "requested_delay_ms": opt_ms(e.requested_delay),
        "open_for_ms": opt_ms(e.open_for),
    })
}

/// The `headers` of a step or a scripted response (`[[name, value], ...]`; none when absent).
pub fn headers(v: &Value) -> R<Vec<(String, String)>> {
    let Some(list) = v.get("headers") else {
        return Ok(Vec::new());
    };
    list.as_array()
        .ok_or("headers must be an array")?
        .iter()
        .map(|pair| match pair.as_array().map(Vec::as_slice) {
            Some([Value::String(n), Value::String(v)]) => Ok((n.clone(), v.clone())),
            _ => Err(format!("bad header {pair}")),
        })
        .collect()
}
