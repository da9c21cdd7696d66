//! The `metrics` step: an object's series, zeros dropped, compared exactly with `expect.series`.

use std::collections::BTreeMap;

use holdoff::metrics::Sample;
use serde_json::Value;

use crate::{Ctx, Time, R};

impl<T: Time> Ctx<T> {
    pub(super) fn metrics_step(&mut self, step: &Value, expect: Option<&Value>) -> R<()> {
        let of = step
            .get("of")
            .and_then(Value::as_str)
            .ok_or("metrics needs `of`")?;
        let mut got: BTreeMap<String, f64> = BTreeMap::new();
        let mut put = |samples: &[Sample], upstream: Option<&str>| {
            for s in samples.iter().filter(|s| s.value != 0.0) {
                got.insert(s.series(upstream), s.value);
            }
        };
        let mut out = Vec::new();
        match of {
            "breaker" => {
                let b = match &self.policy {
                    Some(p) => p.breaker(),
                    None => self.breaker.as_ref().ok_or("the case has no breaker")?,
                };
                b.metrics(&mut out);
                put(&out, None);
            }
            "policy" => {
                self.policy()?.metrics(&mut out);
                put(&out, None);
            }
            "quota" => {
                self.quota
                    .as_ref()
                    .ok_or("the case has no quota")?
                    .metrics(&mut out);
                put(&out, None);
            }
            "group" => {
                let m = self.group.as_ref().ok_or("the case has no group")?.metrics();
                put(&m.group, None);
                for (key, samples) in &m.breakers {
                    put(samples, Some(key));
                }
            }
            other => return Err(format!("metrics of {other:?}: breaker, policy, quota or group")),
        }
        let Some(expect) = expect else { return Ok(()) };
        let obj = expect.as_object().ok_or("expect must be an object")?;
        if let Some(k) = obj.keys().find(|k| *k != "series") {
            return Err(format!("unknown expect key {k:?}"));
        }
        let Some(want) = obj.get("series") else {
            return Ok(());
        };
        let want = want.as_object().ok_or("series must be an object")?;
        let mut errors = Vec::new();
        for (k, v) in want {
            let v = v.as_f64().ok_or_else(|| format!("series {k}: not a number"))?;
            match got.get(k) {
                Some(g) if (g - v).abs() <= 1e-9 => {}
                Some(g) => errors.push(format!("{k}: expected {v}, got {g}")),
                None => errors.push(format!("{k}: expected {v}, got 0")),
            }
        }
        for (k, g) in &got {
            if !want.contains_key(k) {
                errors.push(format!("{k}: expected 0, got {g}"));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(format!("metrics of {of}: {}", errors.join("; ")))
        }
    }
}
