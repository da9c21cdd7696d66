//! The metric model (`holdoff::metrics`, docs/metrics.md): the table, and each object's readings.
//!
//! Readings cross N-API as flat arrays of numbers, three per sample: the metric's code (its
//! index in the table), the attribute value's index in that row's `values` (-1 for a metric
//! without attribute) and the value in the metric's unit (seconds for durations). `holdoff.js`
//! turns them into `{ name, attributes, value }` objects with the table it read once, which
//! costs far less than building each object here.

use holdoff::metrics::{Sample, METRICS};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::breaker::BreakerBox;
use crate::group::GroupBox;
use crate::policy::PolicyBox;
use crate::quota::QuotaBox;

/// The table, in code order: `{ name, kind, unit, description, attribute, values }` per row,
/// `kind` `counter` or `gauge`, `attribute` the row's own attribute key or `null`, `values` that
/// attribute's values in code order (empty without one).
#[napi(catch_unwind)]
pub fn metric_table<'e>(env: &'e Env) -> Result<Array<'e>> {
    let mut arr = env.create_array(METRICS.len() as u32)?;
    for (i, d) in METRICS.iter().enumerate() {
        let mut o = Object::new(env)?;
        o.set("name", d.name)?;
        o.set("kind", d.kind.name())?;
        o.set("unit", d.unit)?;
        o.set("description", d.description)?;
        match d.attribute {
            Some(a) => o.set("attribute", a)?,
            None => o.set("attribute", Null)?,
        }
        o.set("values", d.values.to_vec())?;
        arr.set(i as u32, o)?;
    }
    Ok(arr)
}

/// Samples as the flat triples described above.
fn flat(samples: &[Sample]) -> Vec<f64> {
    let mut out = Vec::with_capacity(samples.len() * 3);
    for s in samples {
        out.push(f64::from(s.metric as u16));
        out.push(s.attribute.map_or(-1.0, f64::from));
        out.push(s.value);
    }
    out
}

/// What one object's `metrics(&mut Vec<Sample>)` appends, as flat triples.
fn read(f: impl FnOnce(&mut Vec<Sample>)) -> Vec<f64> {
    let mut v = Vec::with_capacity(32);
    f(&mut v);
    flat(&v)
}

/// The breaker's series as flat triples (the first read starts counting).
#[napi(catch_unwind)]
pub fn breaker_metrics(h: &External<BreakerBox>) -> Vec<f64> {
    read(|v| h.breaker.metrics(v))
}

/// The policy's retry series as flat triples (the first read starts counting); its breaker's
/// and quota's are read from them.
#[napi(catch_unwind)]
pub fn policy_metrics(h: &External<PolicyBox>) -> Vec<f64> {
    read(|v| h.policy.metrics(v))
}

/// The quota's series as flat triples (the first read starts counting refusals).
#[napi(catch_unwind)]
pub fn quota_metrics(h: &External<QuotaBox>) -> Vec<f64> {
    read(|v| h.quota.metrics(v))
}

/// The group's readings: `{ own, keys, breakers }`, `own` its two series as flat triples,
/// `keys` the kept breakers' keys (sorted) and `breakers[i]` the flat triples of `keys[i]`'s
/// breaker. The first read starts counting on every breaker the group keeps or makes.
#[napi(catch_unwind)]
pub fn group_metrics<'e>(env: &'e Env, h: &External<GroupBox>) -> Result<Object<'e>> {
    let m = h.group.metrics();
    let mut o = Object::new(env)?;
    o.set("own", flat(&m.group))?;
    let (keys, breakers): (Vec<String>, Vec<Vec<f64>>) =
        m.breakers.into_iter().map(|(k, s)| (k, flat(&s))).unzip();
    o.set("keys", keys)?;
    o.set("breakers", breakers)?;
    Ok(o)
}
