//! Conversions from the numbers other languages pass (float seconds, float or integer
//! milliseconds, nanoseconds, signed integers) to [`Duration`] and whole counts, with the one set
//! of rules every binding shares: NaN, infinities, negative values and values too large for the
//! Rust type are refused with a [`ConfigError`] naming the field; nothing is silently clamped.
//! These are type conversions only: every range rule (a threshold of 1..=1000000, a cap > 0)
//! is the core configuration's own `validate`.

use std::time::Duration;

use crate::error::ConfigError;

/// The largest duration any binding may pass: 2^53 - 1 milliseconds (about 285 616 years), the
/// largest whole number of milliseconds every language's number type holds exactly.
pub const MAX_MILLIS: u64 = (1 << 53) - 1;

fn check(field: &str, v: f64, what: &str) -> Result<f64, ConfigError> {
    if v.is_nan() {
        return Err(ConfigError::new(
            field,
            format!("must be a number of {what}, not NaN"),
        ));
    }
    if v.is_infinite() {
        return Err(ConfigError::new(
            field,
            format!("must be a finite number of {what}"),
        ));
    }
    if v < 0.0 {
        return Err(ConfigError::new(field, format!("must not be negative ({what})")));
    }
    Ok(v)
}

/// A duration from float seconds (Python's unit). Sub-nanosecond parts are rounded to the
/// nearest nanosecond.
pub fn from_secs_f64(field: &str, secs: f64) -> Result<Duration, ConfigError> {
    let s = check(field, secs, "seconds")?;
    if s * 1000.0 > MAX_MILLIS as f64 {
        return Err(ConfigError::new(
            field,
            "is too large (at most 2^53-1 milliseconds)",
        ));
    }
    // Whole and fractional parts apart: `s * 1e9` in one f64 would round away whole units past
    // about 104 days.
    let whole = s.trunc();
    Ok(Duration::from_secs(whole as u64) + Duration::from_nanos(((s - whole) * 1e9).round() as u64))
}

/// A duration from float milliseconds (Node's and the conformance suite's unit).
pub fn from_millis_f64(field: &str, ms: f64) -> Result<Duration, ConfigError> {
    let m = check(field, ms, "milliseconds")?;
    if m > MAX_MILLIS as f64 {
        return Err(ConfigError::new(
            field,
            "is too large (at most 2^53-1 milliseconds)",
        ));
    }
    let whole = m.trunc();
    Ok(Duration::from_millis(whole as u64) + Duration::from_nanos(((m - whole) * 1e6).round() as u64))
}

/// A duration from signed integer milliseconds.
pub fn from_millis_i64(field: &str, ms: i64) -> Result<Duration, ConfigError> {
    if ms < 0 {
        return Err(ConfigError::new(field, "must not be negative (milliseconds)"));
    }
    if ms as u64 > MAX_MILLIS {
        return Err(ConfigError::new(
            field,
            "is too large (at most 2^53-1 milliseconds)",
        ));
    }
    Ok(Duration::from_millis(ms as u64))
}

/// A duration from unsigned nanoseconds (the C ABI's unit); every value is representable.
pub fn from_nanos_u64(ns: u64) -> Duration {
    Duration::from_nanos(ns)
}

/// A whole count (a threshold, a number of retries) from a signed integer. Only what a `u32`
/// cannot hold is refused here; the range of each field is the rule of the configuration it
/// goes into, checked by its `validate`.
pub fn whole(field: &str, v: i64) -> Result<u32, ConfigError> {
    u32::try_from(whole_u64(field, v)?)
        .map_err(|_| ConfigError::new(field, "is too large (at most 4294967295)"))
}

/// A whole number of tokens or keys from a signed integer: negatives are refused; the range is
/// the configuration's rule.
pub fn whole_u64(field: &str, v: i64) -> Result<u64, ConfigError> {
    u64::try_from(v).map_err(|_| ConfigError::new(field, "must not be negative"))
}

/// A finite float (rates, multipliers, jitter): NaN and infinities are refused here, the range
/// is checked by the config it goes into.
pub fn finite(field: &str, v: f64) -> Result<f64, ConfigError> {
    if !v.is_finite() {
        return Err(ConfigError::new(field, "must be a finite number"));
    }
    Ok(v)
}

/// Milliseconds of a duration as a float, for bindings that report milliseconds.
pub fn as_millis_f64(d: Duration) -> f64 {
    // Whole milliseconds stay exact up to 2^53; only the sub-millisecond part is a fraction.
    d.as_millis() as f64 + f64::from(d.subsec_nanos() % 1_000_000) / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_the_field() {
        assert_eq!(from_secs_f64("a.b", f64::NAN).unwrap_err().field, "a.b");
        assert!(from_secs_f64("a", -0.5).is_err());
        assert!(from_millis_f64("a", f64::INFINITY).is_err());
        assert!(from_millis_i64("a", -1).is_err());
        assert!(from_millis_f64("a", 1e300).is_err());
        assert_eq!(from_secs_f64("a", 1.5).unwrap(), Duration::from_millis(1500));
        assert_eq!(whole("n", -1).unwrap_err().field, "n");
        assert_eq!(
            whole("n", 1 << 32).unwrap_err().rule,
            "is too large (at most 4294967295)"
        );
        assert_eq!(whole("n", 7).unwrap(), 7);
        assert_eq!(whole_u64("n", 1 << 40).unwrap(), 1 << 40);
    }

    #[test]
    fn whole_milliseconds_stay_exact_for_centuries() {
        // 100 years in ms: a product with 1e6 in f64 would drop whole nanoseconds here.
        let ms = 3_155_760_000_001.0;
        assert_eq!(
            from_millis_f64("t", ms).unwrap(),
            Duration::from_millis(3_155_760_000_001)
        );
        assert_eq!(as_millis_f64(Duration::from_millis(3_155_760_000_001)), ms);
        assert_eq!(
            from_secs_f64("t", 3_155_760_001.0).unwrap(),
            Duration::from_secs(3_155_760_001)
        );
        assert_eq!(from_millis_f64("t", 1.5).unwrap(), Duration::from_micros(1500));
    }
}
