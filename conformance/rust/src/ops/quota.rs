//! Retry-quota steps: `quota_acquire`, `quota_success`.

use std::sync::Arc;

use holdoff::interop::{Coded, ErrorKind, LeaseSlot};
use holdoff::{HoldoffError, RetryQuota};
use serde_json::{json, Map, Value};

use crate::{check, Ctx, Time, R};

impl<T: Time> Ctx<T> {
    fn quota(&self) -> R<Arc<RetryQuota>> {
        self.quota.clone().ok_or_else(|| "the case has no quota".into())
    }

    /// Takes a lease; keeps it under the step's `as` (an unnamed lease is never given back).
    pub(super) fn quota_acquire(&mut self, step: &Value, expect: Option<&Value>) -> R<()> {
        let q = self.quota()?;
        let timeout = step.get("timeout").and_then(Value::as_bool).unwrap_or(false);
        let mut a = Map::new();
        match q.acquire(timeout) {
            Ok(lease) => {
                a.insert("acquired".into(), json!(true));
                a.insert("cost".into(), json!(lease.cost()));
                let slot = LeaseSlot::new(lease);
                if let Some(n) = step.get("as").and_then(Value::as_str) {
                    self.leases.insert(n.to_owned(), slot);
                }
            }
            Err(e) => {
                a.insert("acquired".into(), json!(false));
                a.insert("cost".into(), json!(e.cost));
            }
        }
        a.insert("available".into(), json!(q.available()));
        check(expect, &a, &["acquired", "cost", "available"])
    }

    /// A success: gives the named lease back (to a second quota built from the same
    /// configuration when `foreign`), or refills without one.
    pub(super) fn quota_success(&self, step: &Value, expect: Option<&Value>) -> R<()> {
        let q = self.quota()?;
        let foreign = step.get("foreign").and_then(Value::as_bool).unwrap_or(false);
        let result = match step.get("lease").and_then(Value::as_str) {
            Some(n) => {
                let slot = self
                    .leases
                    .get(n)
                    .ok_or_else(|| format!("no lease named {n:?}"))?;
                let to = if foreign {
                    let cfg = self
                        .config
                        .quota
                        .as_ref()
                        .ok_or("no quota config")?
                        .to_config()
                        .map_err(|e| e.to_string())?;
                    Arc::new(RetryQuota::new(cfg).map_err(|e| e.to_string())?)
                } else {
                    Arc::clone(&q)
                };
                slot.take(&to).and_then(|l| to.on_success(Some(l)))
            }
            None => q.on_success(None),
        };
        let mut a = Map::new();
        if let Err(e) = result {
            a.insert(
                "error".into(),
                json!(ErrorKind::of(&HoldoffError::from(e)).name()),
            );
        }
        a.insert("available".into(), json!(q.available()));
        check(expect, &a, &["available", "error"])
    }
}
