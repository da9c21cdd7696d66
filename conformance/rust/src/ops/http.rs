//! Retry-After and classification steps: `parse_retry_after`, `hint`, `classify` (wall time is
//! the case's `wall_origin_unix_ms` + now).

use holdoff::interop::{Coded, ErrorKind};
use holdoff::{hint_from_headers, parse_retry_after, HoldoffError, RetryAfter};
use serde_json::{json, Map, Value};

use crate::json::outcome_json;
use crate::{check, headers, ms, Ctx, Time, R};

/// `delay_ms` or `unusable`.
fn retry_after_json(r: RetryAfter, a: &mut Map<String, Value>) {
    match r {
        RetryAfter::Delay(d) => a.insert("delay_ms".into(), ms(d)),
        RetryAfter::Unusable(u) => a.insert("unusable".into(), json!(u.name())),
    };
}

impl<T: Time> Ctx<T> {
    pub(super) fn parse_retry_after(&self, step: &Value, expect: Option<&Value>) -> R<()> {
        let v = step
            .get("value")
            .and_then(Value::as_str)
            .ok_or("parse_retry_after needs value")?;
        let mut a = Map::new();
        retry_after_json(parse_retry_after(v, self.wall_now()), &mut a);
        check(expect, &a, &["delay_ms", "unusable"])
    }

    pub(super) fn hint(&self, step: &Value, expect: Option<&Value>) -> R<()> {
        let headers = headers(step)?;
        let pairs = headers.iter().map(|(n, v)| (n.as_str(), v.as_str()));
        let (r, src) = hint_from_headers(pairs, self.wall_now());
        let mut a = Map::new();
        retry_after_json(r, &mut a);
        a.insert("source".into(), json!(src.name()));
        check(expect, &a, &["delay_ms", "unusable", "source"])
    }

    pub(super) fn classify(&self, step: &Value, expect: Option<&Value>) -> R<()> {
        let headers = headers(step)?;
        let pairs = headers.iter().map(|(n, v)| (n.as_str(), v.as_str()));
        let status = step
            .get("status")
            .and_then(Value::as_i64)
            .ok_or("classify needs an integer status")?;
        let wall = self.wall_now();
        let mut a = Map::new();
        match holdoff::check_status(status).and_then(|s| self.classifier.classify(s, pairs, wall)) {
            Ok(c) => {
                let (name, later) = outcome_json(&c.outcome);
                a.insert("outcome".into(), name);
                a.insert("retry_later_ms".into(), later);
            }
            Err(e) => {
                a.insert(
                    "error".into(),
                    json!(ErrorKind::of(&HoldoffError::from(e)).name()),
                );
            }
        }
        check(expect, &a, &["outcome", "retry_later_ms", "error"])
    }
}
