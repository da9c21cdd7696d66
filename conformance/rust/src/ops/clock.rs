//! Clock steps: `clock_set`, `clock_advance`.

use std::time::Duration;

use holdoff::interop::{Coded, ErrorKind};
use holdoff::{HoldoffError, Instant};
use serde_json::{json, Map, Value};

use crate::{check, Ctx, Time, R};

impl<T: Time> Ctx<T> {
    pub(super) async fn clock_set(&self, step: &Value, expect: Option<&Value>) -> R<()> {
        let to = step
            .get("to_ms")
            .and_then(Value::as_u64)
            .ok_or("clock_set needs to_ms")?;
        let mut a = Map::new();
        if let Err(e) = self.time.move_to(Instant::from_millis(to)).await {
            a.insert(
                "error".into(),
                json!(ErrorKind::of(&HoldoffError::from(e)).name()),
            );
        }
        check(expect, &a, &["error"])
    }

    pub(super) async fn clock_advance(&self, step: &Value, expect: Option<&Value>) -> R<()> {
        let by = step
            .get("by_ms")
            .and_then(Value::as_u64)
            .ok_or("clock_advance needs by_ms")?;
        self.time.move_by(Duration::from_millis(by)).await;
        check(expect, &Map::new(), &[])
    }
}
