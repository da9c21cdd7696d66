//! Breaker and group steps: `allow`, `record`, `call`, `record_foreign`, `snapshot`, `events`,
//! `force_open`, `disable`, `reset`, `group_snapshot`.

use std::sync::Arc;

use holdoff::interop::{Coded, ErrorKind, PermitSlot};
use holdoff::{Breaker, HoldoffError, Outcome};
use serde_json::{json, Map, Value};

use super::permit_name;
use crate::{check, event_json, opt_ms, outcome, Ctx, Time, R};

impl<T: Time> Ctx<T> {
    /// The breaker a step acts on: the group's for its `key` (asked once), else the case's.
    fn breaker(&self, step: &Value) -> R<Arc<Breaker>> {
        if let Some(i) = step.get("worker").and_then(Value::as_u64) {
            return self
                .members
                .get(i as usize)
                .map(|m| Arc::clone(m.breaker()))
                .ok_or_else(|| format!("no worker {i}"));
        }
        match step.get("key").and_then(Value::as_str) {
            Some(k) => Ok(self
                .group
                .as_ref()
                .ok_or("step names a key but the case has no group")?
                .get(k)),
            None => self
                .breaker
                .clone()
                .ok_or_else(|| "the case has no breaker".into()),
        }
    }

    /// Asks for a permit; keeps it under the step's `as`. Returns whether it was admitted.
    fn allow(&mut self, step: &Value, actual: &mut Map<String, Value>) -> R<bool> {
        let b = self.breaker(step)?;
        match b.allow() {
            Ok(p) => {
                actual.insert("admitted".into(), json!(true));
                actual.insert("episode".into(), json!(p.episode()));
                actual.insert("probe".into(), json!(p.is_probe()));
                self.permits.insert(permit_name(step), (PermitSlot::new(p), b));
                Ok(true)
            }
            Err(r) => {
                actual.insert("admitted".into(), json!(false));
                actual.insert("retry_after_ms".into(), opt_ms(r.retry_after));
                actual.insert("state".into(), json!(r.state.name()));
                Ok(false)
            }
        }
    }

    /// Records the permit `name` on the breaker that issued it.
    fn record(&mut self, name: &str, o: Outcome, actual: &mut Map<String, Value>) -> R<()> {
        let (slot, b) = self
            .permits
            .get(name)
            .ok_or_else(|| format!("no permit named {name:?}"))?;
        match slot.take(b).and_then(|p| b.record(p, o)) {
            Ok(effect) => actual.insert("effect".into(), json!(effect.name())),
            Err(e) => actual.insert(
                "error".into(),
                json!(ErrorKind::of(&HoldoffError::from(e)).name()),
            ),
        };
        Ok(())
    }

    pub(super) fn allow_step(&mut self, step: &Value, expect: Option<&Value>) -> R<()> {
        let mut a = Map::new();
        self.allow(step, &mut a)?;
        check(
            expect,
            &a,
            &["admitted", "episode", "probe", "retry_after_ms", "state"],
        )
    }

    pub(super) fn record_step(&mut self, step: &Value, expect: Option<&Value>) -> R<()> {
        let name = step
            .get("permit")
            .and_then(Value::as_str)
            .ok_or("record needs permit")?;
        let o = outcome(step.get("outcome").ok_or("record needs outcome")?)?;
        let mut a = Map::new();
        self.record(name, o, &mut a)?;
        check(expect, &a, &["effect", "error"])
    }

    pub(super) fn call_step(&mut self, step: &Value, expect: Option<&Value>) -> R<()> {
        let o = outcome(step.get("outcome").ok_or("call needs outcome")?)?;
        let mut a = Map::new();
        if self.allow(step, &mut a)? {
            self.record(&permit_name(step), o, &mut a)?;
        }
        check(
            expect,
            &a,
            &[
                "admitted",
                "episode",
                "probe",
                "retry_after_ms",
                "state",
                "effect",
            ],
        )
    }

    /// Records the permit on a second breaker built from the same configuration.
    pub(super) fn record_foreign(&mut self, step: &Value, expect: Option<&Value>) -> R<()> {
        let name = step
            .get("permit")
            .and_then(Value::as_str)
            .ok_or("record_foreign needs permit")?;
        let (slot, _) = self
            .permits
            .get(name)
            .ok_or_else(|| format!("no permit named {name:?}"))?;
        let cfg = self
            .config
            .breaker
            .as_ref()
            .ok_or("no breaker config")?
            .to_config()
            .map_err(|e| e.to_string())?;
        let other = Breaker::new(cfg, Arc::clone(&self.clock)).map_err(|e| e.to_string())?;
        let mut a = Map::new();
        match slot.take(&other) {
            Ok(p) => {
                let _ = other.record(p, Outcome::Success);
                a.insert("effect".into(), json!("counted"));
            }
            Err(e) => {
                a.insert(
                    "error".into(),
                    json!(ErrorKind::of(&HoldoffError::from(e)).name()),
                );
            }
        }
        check(expect, &a, &["error", "effect"])
    }

    pub(super) fn snapshot(&self, step: &Value, expect: Option<&Value>) -> R<()> {
        let s = self.breaker(step)?.snapshot();
        let mut a = Map::new();
        for (k, v) in [
            ("state", json!(s.state.name())),
            ("episode", json!(s.episode)),
            ("failures", json!(s.failures)),
            ("recoveries", json!(s.recoveries)),
            ("probes_in_flight", json!(s.probes_in_flight)),
            ("retry_after_ms", opt_ms(s.retry_after)),
            ("probe_ready", json!(s.probe_ready)),
            ("interval_ms", opt_ms(s.interval)),
            ("opens", json!(s.opens)),
            ("closes", json!(s.closes)),
            ("probes", json!(s.probes)),
            ("refusals", json!(s.refusals)),
            ("stale_answers", json!(s.stale_answers)),
        ] {
            a.insert(k.into(), v);
        }
        let known: Vec<&str> = a.keys().map(String::as_str).collect();
        check(expect, &a, &known)
    }

    /// The state changes since the last `events` step: an exact list.
    pub(super) fn events(&self, step: &Value, expect: Option<&Value>) -> R<()> {
        let got: Vec<Value> = self
            .breaker(step)?
            .drain_events()
            .iter()
            .map(event_json)
            .collect();
        let want = expect
            .and_then(Value::as_array)
            .ok_or("events expects an array")?;
        if want.len() != got.len() {
            return Err(format!(
                "expected {} events, got {}: {}",
                want.len(),
                got.len(),
                Value::Array(got)
            ));
        }
        for (i, (w, g)) in want.iter().zip(&got).enumerate() {
            let g = g.as_object().expect("an event is an object");
            let known: Vec<&str> = g.keys().map(String::as_str).collect();
            check(Some(w), g, &known).map_err(|e| format!("event {i}: {e}"))?;
        }
        Ok(())
    }

    /// `force_open`, `disable` or `reset`.
    pub(super) fn command(&self, op: &str, step: &Value, expect: Option<&Value>) -> R<()> {
        let b = self.breaker(step)?;
        match op {
            "force_open" => b.force_open(),
            "disable" => b.disable(),
            _ => b.reset(),
        }
        check(expect, &Map::new(), &[])
    }

    pub(super) fn group_snapshot(&self, expect: Option<&Value>) -> R<()> {
        let g = self.group.as_ref().ok_or("the case has no group")?;
        let s = g.snapshot();
        let mut a = Map::new();
        a.insert("keys".into(), json!(g.keys()));
        a.insert("max_keys".into(), json!(s.max_keys));
        a.insert("evictions".into(), json!(s.evictions));
        a.insert("overflows".into(), json!(s.overflows));
        check(expect, &a, &["keys", "max_keys", "evictions", "overflows"])
    }
}
