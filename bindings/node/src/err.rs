//! JavaScript errors with the stable holdoff `code` (conformance/README.md "Stable error names").
//!
//! napi-rs turns an `Err` into a plain `Error` whose `code` is a napi status; holdoff needs a
//! `RangeError` or `TypeError` with `code` and, for configuration errors, the `field` the core
//! names. So the error object is built and thrown here, and the function returns a
//! `PendingException` error, which napi-rs leaves alone.

use holdoff::interop::{Coded, ErrorKind};
use holdoff::{ClockError, ConfigError, HoldoffError, InputError};
use napi::bindgen_prelude::*;
use napi::{JsError, JsRangeError, JsTypeError};

/// Which JavaScript error constructor to use.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// A value of the wrong type (`TypeError`).
    Type,
    /// A value of the right type outside its range (`RangeError`).
    Range,
    /// Anything else (`Error`).
    Plain,
}

/// Throws `kind` with `code`, `message` and (if given) a `field` property, and returns the error
/// the native function must return so that napi-rs does not throw a second one.
pub fn throw(env: &Env, kind: Kind, code: &str, message: String, field: Option<&str>) -> Error {
    let e: Error<String> = Error::new(code.to_owned(), message);
    let raw = env.raw();
    // SAFETY: `raw` is the live env of the current callback.
    let value = unsafe {
        match kind {
            Kind::Type => JsTypeError::from(e).into_value(raw),
            Kind::Range => JsRangeError::from(e).into_value(raw),
            Kind::Plain => JsError::from(e).into_value(raw),
        }
    };
    if value.is_null() {
        return Error::new(Status::GenericFailure, format!("could not create a {code} error"));
    }
    if let Some(f) = field {
        let mut obj = Object::from_raw(raw, value);
        let _ = obj.set("field", f);
    }
    // SAFETY: as above; `value` is an error object created in this env.
    unsafe { napi::sys::napi_throw(raw, value) };
    Error::new(Status::PendingException, String::new())
}

/// The option name a JavaScript user writes for a core field: `breaker.open_interval.initial`
/// is `openInterval.initialMs` (camelCase, durations in milliseconds); the fleet's fields keep
/// their `fleet.` prefix, as the option is `{ fleet: { refreshMs } }` (`fleet.refresh` is
/// `fleet.refreshMs`).
pub fn js_option(field: &str) -> String {
    const FLEET_DURATIONS: &[&str] = &["refresh", "fallback_after", "timeout", "ttl"];
    if field == "fleet" {
        return field.to_owned();
    }
    if let Some(rest) = field.strip_prefix("fleet.") {
        let ms = if FLEET_DURATIONS.contains(&rest) { "Ms" } else { "" };
        return format!("fleet.{}{ms}", js_option(&format!("_.{rest}")));
    }
    const DURATIONS: &[&str] = &[
        "initial",
        "max",
        "window",
        "probe_timeout",
        "max_retry_later",
        "max_rate_limit_duration",
        "retry_after_cap",
        "max_backoff_duration",
        "rate_limit_default_wait",
        "attempt_timeout",
        "total_timeout",
    ];
    let mut parts = field.split('.');
    let _component = parts.next();
    parts
        .map(|seg| {
            let mut out = String::with_capacity(seg.len() + 2);
            let mut upper = false;
            for c in seg.chars() {
                if c == '_' {
                    upper = true;
                } else if upper {
                    out.extend(c.to_uppercase());
                    upper = false;
                } else {
                    out.push(c);
                }
            }
            if DURATIONS.contains(&seg) {
                out.push_str("Ms");
            }
            out
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// A configuration value the core refused: `RangeError`, code `invalid_config`.
pub fn config(env: &Env, e: &ConfigError) -> Error {
    let msg = format!(
        "invalid configuration: {} (option {}): {}",
        e.field,
        js_option(&e.field),
        e.rule
    );
    throw(env, Kind::Range, "invalid_config", msg, Some(&e.field))
}

/// An operation argument out of range: `RangeError`, code `invalid_input`.
pub fn input(env: &Env, e: &InputError) -> Error {
    let msg = format!("invalid input: {}: {}", e.field, e.rule);
    throw(env, Kind::Range, "invalid_input", msg, Some(&e.field))
}

/// An operation argument of the wrong type: `TypeError`, code `invalid_input`.
pub fn input_type(env: &Env, field: &str, what: &str, got: &str) -> Error {
    let msg = format!("invalid input: {field} must be {what}, got {got}");
    throw(env, Kind::Type, "invalid_input", msg, Some(field))
}

/// Any core error, mapped by its stable name.
pub fn holdoff(env: &Env, e: &HoldoffError) -> Error {
    match e {
        HoldoffError::Config(c) => config(env, c),
        HoldoffError::Input(i) => input(env, i),
        HoldoffError::Clock(c) => clock(env, c),
        HoldoffError::Permit(p) => throw(env, Kind::Plain, ErrorKind::of(e).name(), p.to_string(), None),
    }
}

/// A manual clock set backwards: `RangeError`, code `clock_backwards`.
pub fn clock(env: &Env, e: &ClockError) -> Error {
    let ClockError::Backwards {
        now_nanos,
        requested_nanos,
    } = e;
    let msg = format!(
        "a manual clock cannot go backwards: it shows {} ms, {} ms was requested",
        *now_nanos as f64 / 1e6,
        *requested_nanos as f64 / 1e6
    );
    throw(env, Kind::Range, "clock_backwards", msg, Some("ms"))
}

#[cfg(test)]
mod tests {
    use super::js_option;

    #[test]
    fn option_names() {
        assert_eq!(
            js_option("breaker.open_interval.initial"),
            "openInterval.initialMs"
        );
        assert_eq!(js_option("breaker.trip.min_calls"), "trip.minCalls");
        assert_eq!(
            js_option("budget.max_rate_limit_duration"),
            "maxRateLimitDurationMs"
        );
        assert_eq!(js_option("quota.retry_cost"), "retryCost");
        assert_eq!(js_option("policy.clock"), "clock");
        assert_eq!(js_option("execute.total_timeout"), "totalTimeoutMs");
        assert_eq!(js_option("fleet.fallback_after"), "fleet.fallbackAfterMs");
        assert_eq!(js_option("fleet.url"), "fleet.url");
        assert_eq!(js_option("fleet"), "fleet");
    }
}
