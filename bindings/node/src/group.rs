//! The breaker group (`holdoff::BreakerGroup`): a bounded set of breakers keyed by upstream,
//! made lazily from one template.

use std::sync::Arc;

use holdoff::BreakerGroup;
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::breaker::BreakerBox;
use crate::clock::{clock_of, ClockBox};
use crate::{err, opts};

/// A breaker group.
pub struct GroupBox {
    pub(crate) group: BreakerGroup,
}

/// A bounded group of breakers keyed by upstream, made lazily from one template (breaker
/// options); `group` holds `{ maxKeys }` (default 10 000; `invalid_config` naming
/// `group.max_keys` outside 1..=100 000 000).
#[napi(catch_unwind)]
pub fn group_new(
    env: &Env,
    options: Unknown<'_>,
    group: Unknown<'_>,
    clock: Option<&External<ClockBox>>,
) -> Result<External<GroupBox>> {
    let (spec, neutral) = opts::breaker(env, Some(options))?;
    // Groups stay local: a `fleet` is refused (field `fleet`).
    neutral.fleet_config(true).map_err(|e| err::config(env, &e))?;
    let cfg = spec.to_config().map_err(|e| err::config(env, &e))?;
    let max_keys = opts::group(env, Some(group))?
        .max_keys()
        .map_err(|e| err::config(env, &e))?;
    let group =
        BreakerGroup::with_max_keys(cfg, max_keys, clock_of(clock)).map_err(|e| err::config(env, &e))?;
    Ok(External::new(GroupBox { group }))
}

/// The breaker the core hands out for `key` (`BreakerGroup::get`: marks it most recently used,
/// may evict an idle breaker or hand out an overflow one). `null` when that is the breaker of
/// `cached` (the JavaScript wrapper already made for the key), else a new handle.
#[napi(catch_unwind)]
pub fn group_get(
    h: &External<GroupBox>,
    key: String,
    cached: Option<&External<BreakerBox>>,
) -> Option<External<BreakerBox>> {
    let b = h.group.get(&key);
    match cached {
        Some(c) if Arc::ptr_eq(&c.breaker, &b) => None,
        _ => Some(External::new(BreakerBox::new(b))),
    }
}

/// Whether the group keeps `breaker` for `key` now (`BreakerGroup::peek`, which marks nothing):
/// false for an evicted breaker and for an overflow breaker the group never kept.
#[napi(catch_unwind)]
pub fn group_keeps(h: &External<GroupBox>, key: String, breaker: &External<BreakerBox>) -> bool {
    h.group
        .peek(&key)
        .is_some_and(|b| Arc::ptr_eq(&b, &breaker.breaker))
}

/// The breaker the group keeps for `key`, without making it or marking it used; `null` if none.
#[napi(catch_unwind)]
pub fn group_peek(h: &External<GroupBox>, key: String) -> Option<External<BreakerBox>> {
    h.group.peek(&key).map(|b| External::new(BreakerBox::new(b)))
}

/// Keys with a breaker, sorted.
#[napi(catch_unwind)]
pub fn group_keys(h: &External<GroupBox>) -> Vec<String> {
    h.group.keys()
}

/// The group's counts (`BreakerGroup::snapshot`): `{ size, maxKeys, evictions, overflows }`.
#[napi(catch_unwind)]
pub fn group_snapshot<'e>(env: &'e Env, h: &External<GroupBox>) -> Result<Object<'e>> {
    let s = h.group.snapshot();
    let mut o = Object::new(env)?;
    o.set("size", s.keys as f64)?;
    o.set("maxKeys", s.max_keys as f64)?;
    o.set("evictions", s.evictions as f64)?;
    o.set("overflows", s.overflows as f64)?;
    Ok(o)
}
