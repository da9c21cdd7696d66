//! An `execute` step's script: what each attempt does, the runner's own values, errors and
//! responses (each carrying the number of the attempt that made it, so that `returns: i` and
//! `cause: i` can be checked), and the classifiers the runner hands to the helpers.

use std::fmt;
use std::time::Duration;

use holdoff::interop::{Coded, OutcomeKind};
use holdoff::Outcome;
use holdoff_conformance::{headers, outcome, R};
use holdoff_tokio::HttpResponse;
use serde_json::Value;

/// What one attempt does.
#[derive(Debug, Clone)]
pub enum Act {
    /// Return a value the runner's classifier calls this outcome.
    Returns(Outcome),
    /// Answer an HTTP response.
    Response {
        status: i64,
        headers: Vec<(String, String)>,
    },
    Transport,
    Timeout,
    RetryLater(Duration),
    /// An error of the runner's own type, classified as an answer.
    Answer,
    /// A programming error: a panic.
    Bug,
    /// Run until the helper's own time limit cuts the attempt.
    HitsDeadline,
    /// The caller cancels during the attempt.
    Cancelled,
}

#[derive(Debug, Clone)]
pub struct Item {
    pub takes: Duration,
    pub act: Act,
}

const ITEM_KEYS: &[&str] = &[
    "takes_ms",
    "returns",
    "response",
    "raises",
    "hits_deadline",
    "cancelled",
];

pub fn parse(script: &Value) -> R<Vec<Item>> {
    let items = script.as_array().ok_or("execute needs a script")?;
    items
        .iter()
        .map(|item| {
            let obj = item.as_object().ok_or("a script item is an object")?;
            if let Some(k) = obj.keys().find(|k| !ITEM_KEYS.contains(&k.as_str())) {
                return Err(format!("unknown script key {k:?}"));
            }
            let takes = Duration::from_millis(obj.get("takes_ms").and_then(Value::as_u64).unwrap_or(0));
            let act = if let Some(o) = obj.get("returns") {
                Act::Returns(outcome(o)?)
            } else if let Some(r) = obj.get("response") {
                Act::Response {
                    status: r
                        .get("status")
                        .and_then(Value::as_i64)
                        .ok_or("response needs a status")?,
                    headers: headers(r)?,
                }
            } else if obj.get("hits_deadline").and_then(Value::as_bool) == Some(true) {
                Act::HitsDeadline
            } else if obj.get("cancelled").and_then(Value::as_bool) == Some(true) {
                Act::Cancelled
            } else {
                match obj
                    .get("raises")
                    .ok_or("an attempt returns, responds or raises")?
                {
                    Value::String(s) => match s.as_str() {
                        "transport" => Act::Transport,
                        "timeout" => Act::Timeout,
                        "answer" => Act::Answer,
                        "bug" => Act::Bug,
                        other => return Err(format!("unknown raise {other:?}")),
                    },
                    v => match outcome(v)? {
                        Outcome::RetryLater(d) => Act::RetryLater(d),
                        o => return Err(format!("cannot raise {}", OutcomeKind::of(&o).name())),
                    },
                }
            };
            Ok(Item { takes, act })
        })
        .collect()
}

/// A value returned by attempt `attempt`, which the runner's classifier calls `outcome`.
#[derive(Debug, Clone, PartialEq)]
pub struct Val {
    pub attempt: u32,
    pub outcome: Outcome,
}

/// A response answered by attempt `attempt` (the `[async http]` flavour).
#[derive(Debug, Clone, PartialEq)]
pub struct Resp {
    pub attempt: u32,
    pub status: i64,
    pub headers: Vec<(String, String)>,
}

impl HttpResponse for Resp {
    fn status(&self) -> i64 {
        self.status
    }

    fn headers(&self) -> impl Iterator<Item = (&str, &str)> {
        self.headers.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }
}

/// The runner's errors: what attempt `attempt` raised.
#[derive(Debug, Clone, PartialEq)]
pub enum Raised {
    Transport(u32),
    Timeout(u32),
    RetryLater(u32, Duration),
    Answer(u32),
    /// The operation saw its caller's cancellation.
    Cancelled(u32),
    /// An attempt the script does not have.
    Overrun(u32),
}

impl Raised {
    pub fn attempt(&self) -> u32 {
        match *self {
            Raised::Transport(n)
            | Raised::Timeout(n)
            | Raised::RetryLater(n, _)
            | Raised::Answer(n)
            | Raised::Cancelled(n)
            | Raised::Overrun(n) => n,
        }
    }

    /// The runner's classifier for its own errors.
    pub fn outcome(&self) -> Outcome {
        match *self {
            Raised::Transport(_) | Raised::Overrun(_) => Outcome::Failure,
            Raised::Timeout(_) => Outcome::Timeout,
            Raised::RetryLater(_, d) => Outcome::RetryLater(d),
            Raised::Answer(_) => Outcome::Answer,
            Raised::Cancelled(_) => Outcome::Cancelled,
        }
    }
}

impl fmt::Display for Raised {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

impl std::error::Error for Raised {}

/// The payload of a programming error's panic.
#[derive(Debug)]
pub struct Bug(pub u32);

/// Does what `item` says for attempt `n` that is not about its result: moves the clock by
/// `takes_ms` (tokio's paused clock, as the operation's own sleep), panics for a bug, hangs
/// until the helper's limit. Returns the error to raise, or `None` for a value or response.
pub async fn perform(n: u32, item: &Item) -> Option<Raised> {
    match item.act {
        Act::HitsDeadline => std::future::pending().await,
        _ => tokio::time::sleep(item.takes).await,
    }
    match item.act {
        Act::Returns(_) | Act::Response { .. } => None,
        Act::Transport => Some(Raised::Transport(n)),
        Act::Timeout => Some(Raised::Timeout(n)),
        Act::RetryLater(d) => Some(Raised::RetryLater(n, d)),
        Act::Answer => Some(Raised::Answer(n)),
        Act::Cancelled => Some(Raised::Cancelled(n)),
        Act::Bug => std::panic::panic_any(Bug(n)),
        Act::HitsDeadline => unreachable!("pending"),
    }
}
