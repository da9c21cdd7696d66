//! The helper flavours a case runs in (`conformance/README.md`, "Execute"), and the ones that
//! cannot express it.

use holdoff_conformance::R;
use serde_json::Value;

use crate::rig;

/// One of the crate's helpers, as the runner drives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    Async,
    AsyncHttp,
    Reqwest,
}

impl Flavour {
    pub fn name(self) -> &'static str {
        match self {
            Flavour::Async => "async",
            Flavour::AsyncHttp => "async http",
            Flavour::Reqwest => "reqwest",
        }
    }
}

/// The flavours a case runs in: the HTTP flavours if a script answers a response, else
/// `[async]` if a script returns a value, else all three.
pub fn flavours(case: &Value) -> R<Vec<Flavour>> {
    let (mut returns, mut responds) = (false, false);
    for step in case["steps"].as_array().ok_or("case without steps")? {
        if step["op"] == "execute" {
            returns |= has(step, "returns");
            responds |= has(step, "response");
        }
    }
    Ok(match (returns, responds) {
        (_, true) => vec![Flavour::AsyncHttp, Flavour::Reqwest],
        (true, false) => vec![Flavour::Async],
        (false, false) => vec![Flavour::Async, Flavour::AsyncHttp, Flavour::Reqwest],
    })
}

/// Whether an `execute` step's script has an item with `key`.
pub fn has(step: &Value, key: &str) -> bool {
    step["script"]
        .as_array()
        .is_some_and(|items| items.iter().any(|i| i.get(key).is_some()))
}

/// Why a flavour cannot express a case, if it cannot.
pub fn inapplicable(case: &Value, flavour: Flavour) -> Option<String> {
    if flavour != Flavour::Reqwest {
        return None;
    }
    let statuses = case["steps"]
        .as_array()?
        .iter()
        .filter(|s| s["op"] == "execute")
        .flat_map(|s| s["script"].as_array().into_iter().flatten())
        .filter_map(|i| i.pointer("/response/status").and_then(Value::as_i64));
    statuses.into_iter().find(|s| !rig::can_send(*s)).map(|s| {
        format!(
            "a server cannot answer status {s} to reqwest (http::StatusCode is 100..=999; hyper \
             refuses such a status line), so it never reaches the middleware"
        )
    })
}
