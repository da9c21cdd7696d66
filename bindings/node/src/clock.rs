//! The clock: a manual clock for tests and simulations (`holdoff::ManualClock`), and the system
//! clock every object built without one shares.

use std::sync::{Arc, LazyLock};
use std::time::UNIX_EPOCH;

use holdoff::{Clock, Instant, ManualClock, SystemClock};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::convert::{arg_ms, from_ms, instant_ms, ms};
use crate::{err, opts};

/// One clock shared by every object built without an explicit clock, so that a policy's
/// breaker and budget share it (the core requires one clock per policy).
static SYSTEM_CLOCK: LazyLock<Arc<dyn Clock>> = LazyLock::new(SystemClock::shared);

/// A manual clock and the one shared handle every object built on it holds.
pub struct ClockBox {
    manual: ManualClock,
    shared: Arc<dyn Clock>,
}

/// The shared handle of the manual clock `c`, or the system clock when there is none.
pub(crate) fn clock_of(c: Option<&External<ClockBox>>) -> Arc<dyn Clock> {
    match c {
        Some(c) => Arc::clone(&c.shared),
        None => Arc::clone(&SYSTEM_CLOCK),
    }
}

/// Whether `c` is the system clock every object built without a clock shares.
pub(crate) fn is_system_clock(c: &Arc<dyn Clock>) -> bool {
    Arc::ptr_eq(c, &SYSTEM_CLOCK)
}

/// A manual clock at 0 whose origin is `wallOriginUnixMs` on the wall (default the Unix epoch).
#[napi(catch_unwind)]
pub fn clock_new(env: &Env, options: Unknown<'_>) -> Result<External<ClockBox>> {
    let origin = match opts::clock(env, Some(options))? {
        None => UNIX_EPOCH,
        Some(v) => UNIX_EPOCH + from_ms("clock.wall_origin_unix_ms", v).map_err(|e| err::config(env, &e))?,
    };
    let manual = ManualClock::with_wall_origin(origin);
    let shared: Arc<dyn Clock> = Arc::new(manual.clone());
    Ok(External::new(ClockBox { manual, shared }))
}

/// The clock's time in milliseconds since its origin (not counted as a reading).
#[napi]
pub fn clock_now(c: &External<ClockBox>) -> f64 {
    instant_ms(c.manual.peek())
}

/// Sets the clock; `RangeError` `clock_backwards` if earlier than now.
#[napi(catch_unwind)]
pub fn clock_set(env: &Env, c: &External<ClockBox>, to_ms: Unknown<'_>) -> Result<()> {
    let d = arg_ms(env, &to_ms, "ms")?;
    let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    c.manual
        .set(Instant::from_nanos(nanos))
        .map_err(|e| err::clock(env, &e))
}

/// Moves the clock forward; returns the new time in milliseconds.
#[napi(catch_unwind)]
pub fn clock_advance(env: &Env, c: &External<ClockBox>, by_ms: Unknown<'_>) -> Result<f64> {
    let d = arg_ms(env, &by_ms, "ms")?;
    Ok(instant_ms(c.manual.advance(d)))
}

/// How many times the core read this clock.
#[napi]
pub fn clock_reads(c: &External<ClockBox>) -> f64 {
    c.manual.reads() as f64
}

/// The wall time of the clock's origin, in Unix milliseconds.
#[napi]
pub fn clock_wall_origin_unix_ms(c: &External<ClockBox>) -> f64 {
    c.manual
        .wall_origin()
        .duration_since(UNIX_EPOCH)
        .map(ms)
        .unwrap_or(0.0)
}

/// The wall time the clock shows now, in Unix milliseconds.
#[napi]
pub fn clock_wall_now_unix_ms(c: &External<ClockBox>) -> f64 {
    c.shared
        .wall_at(c.manual.peek())
        .duration_since(UNIX_EPOCH)
        .map(ms)
        .unwrap_or(0.0)
}
