//! Milliseconds as JavaScript numbers to and from the core's durations and instants, by the
//! core's unit rules (`holdoff::units`), so a bad value is refused with the field the core names.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use holdoff::interop::units;
use holdoff::Instant;
use napi::bindgen_prelude::*;
use napi::ValueType;

use crate::{err, opts};

/// Milliseconds of a duration as a number. Whole milliseconds and the sub-millisecond rest are
/// converted apart, so that whole milliseconds stay exact past 2^53 nanoseconds (104 days), where
/// a single `nanos as f64` conversion starts rounding.
pub(crate) fn ms(d: Duration) -> f64 {
    nanos_ms(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn nanos_ms(n: u64) -> f64 {
    (n / 1_000_000) as f64 + (n % 1_000_000) as f64 / 1e6
}

pub(crate) fn instant_ms(t: Instant) -> f64 {
    nanos_ms(t.as_nanos())
}

/// A JavaScript number of milliseconds to a duration by the core's rules (`holdoff::units`): a
/// whole number goes through the integer conversion, which is exact at any size.
pub(crate) fn from_ms(field: &str, f: f64) -> std::result::Result<Duration, holdoff::ConfigError> {
    if f.is_finite() && f.fract() == 0.0 && f.abs() < 9.2e18 {
        units::from_millis_i64(field, f as i64)
    } else {
        units::from_millis_f64(field, f)
    }
}

pub(crate) fn set_ms(obj: &mut Object<'_>, key: &str, d: Option<Duration>) -> Result<()> {
    match d {
        Some(d) => obj.set(key, ms(d)),
        None => obj.set(key, Null),
    }
}

/// A duration argument of an operation: a number of milliseconds, checked by the core's units.
pub(crate) fn arg_ms(env: &Env, v: &Unknown<'_>, field: &str) -> Result<Duration> {
    if v.get_type()? != ValueType::Number {
        return Err(err::input_type(
            env,
            field,
            "a number of milliseconds",
            &opts::describe(env, v),
        ));
    }
    input_ms(env, field, unsafe { v.cast::<f64>()? })
}

/// Milliseconds given to an operation (not a configuration) as a duration: what the core's units
/// refuse is a `RangeError` `invalid_input` naming `field`.
pub(crate) fn input_ms(env: &Env, field: &str, f: f64) -> Result<Duration> {
    from_ms(field, f).map_err(|e| {
        err::input(
            env,
            &holdoff::InputError {
                field: e.field,
                rule: e.rule,
            },
        )
    })
}

/// A wall time in Unix milliseconds; `invalid_input` naming `now` for one the core's units refuse.
pub(crate) fn wall(env: &Env, now_unix_ms: f64) -> Result<SystemTime> {
    Ok(UNIX_EPOCH + input_ms(env, "now", now_unix_ms)?)
}
