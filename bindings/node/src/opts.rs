//! JavaScript option objects to the core's neutral configuration (`holdoff::config`).
//!
//! This module only checks JavaScript types (a number where a number belongs, a whole number
//! where a count belongs) and renames camelCase options to the core's fields. Every rule about
//! values (NaN, infinities, negative or zero durations, ranges, budget against cap) is the
//! core's, through `holdoff::config` and `holdoff::units`, so the errors name the same field in
//! every language.

use holdoff::interop::config::{
    BackoffSpec, BreakerSpec, BudgetSpec, ClassifierSpec, FleetSpec, GroupSpec, HoldoffConfig, Num,
    QuotaSpec, TripSpec,
};
use napi::bindgen_prelude::*;
use napi::ValueType;

use crate::err::{self, Kind};

fn type_name(env: &Env, v: &Unknown<'_>) -> String {
    match v.get_type() {
        Ok(ValueType::Undefined) => "undefined".into(),
        Ok(ValueType::Null) => "null".into(),
        Ok(ValueType::Boolean) => "a boolean".into(),
        Ok(ValueType::Number) => "a number".into(),
        Ok(ValueType::String) => "a string".into(),
        Ok(ValueType::Symbol) => "a symbol".into(),
        Ok(ValueType::Object) if is_array(env, v) => "an array".into(),
        Ok(ValueType::Object) => "an object".into(),
        Ok(ValueType::Function) => "a function".into(),
        Ok(ValueType::External) => "an external".into(),
        Ok(ValueType::BigInt) => "a bigint".into(),
        _ => "an unknown value".into(),
    }
}

/// The type of a value, in words, for error messages.
pub fn describe(env: &Env, v: &Unknown<'_>) -> String {
    type_name(env, v)
}

fn is_array(env: &Env, v: &Unknown<'_>) -> bool {
    let mut out = false;
    // SAFETY: both handles belong to the current callback's env.
    let status = unsafe { napi::sys::napi_is_array(env.raw(), v.raw(), &mut out) };
    status == napi::sys::Status::napi_ok && out
}

/// One option object being read: its JavaScript path (for messages) and core path (for the
/// error's `field`).
pub struct Opts<'e> {
    env: &'e Env,
    obj: Option<Object<'e>>,
    js: String,
    core: String,
}

impl<'e> Opts<'e> {
    /// Reads `value` as an options object (or `undefined`), refusing keys not in `allowed`.
    pub fn new(
        env: &'e Env,
        value: Option<Unknown<'e>>,
        js: &str,
        core: &str,
        allowed: &[&str],
    ) -> Result<Opts<'e>> {
        let obj = match value {
            None => None,
            Some(v) => match v.get_type()? {
                ValueType::Undefined => None,
                ValueType::Object if !is_array(env, &v) => Some(unsafe { v.cast::<Object>()? }),
                _ => {
                    let shown = if js.is_empty() { "options" } else { js };
                    return Err(err::throw(
                        env,
                        Kind::Type,
                        "invalid_config",
                        format!(
                            "invalid configuration: {shown} must be an object, got {}",
                            type_name(env, &v)
                        ),
                        Some(core),
                    ));
                }
            },
        };
        let o = Opts {
            env,
            obj,
            js: js.to_owned(),
            core: core.to_owned(),
        };
        if let Some(obj) = &o.obj {
            for key in Object::keys(obj)? {
                if !allowed.contains(&key.as_str()) {
                    let field = o.core_name(&key);
                    return Err(err::throw(
                        env,
                        Kind::Type,
                        "invalid_config",
                        format!(
                            "invalid configuration: unknown option {} (known: {})",
                            o.js_name(&key),
                            allowed.join(", ")
                        ),
                        Some(&field),
                    ));
                }
            }
        }
        Ok(o)
    }

    fn js_name(&self, key: &str) -> String {
        if self.js.is_empty() {
            key.to_owned()
        } else {
            format!("{}.{key}", self.js)
        }
    }

    fn core_name(&self, key: &str) -> String {
        format!("{}.{key}", self.core)
    }

    fn get(&self, key: &str) -> Result<Option<Unknown<'e>>> {
        match &self.obj {
            None => Ok(None),
            Some(o) => o.get::<Unknown>(key),
        }
    }

    fn type_error(&self, key: &str, core: &str, what: &str, v: &Unknown<'_>) -> Error {
        err::throw(
            self.env,
            Kind::Type,
            "invalid_config",
            format!(
                "invalid configuration: {} (field {}) must be {what}, got {}",
                self.js_name(key),
                self.core_name(core),
                type_name(self.env, v)
            ),
            Some(&self.core_name(core)),
        )
    }

    fn range_error(&self, key: &str, core: &str, rule: String) -> Error {
        err::throw(
            self.env,
            Kind::Range,
            "invalid_config",
            format!(
                "invalid configuration: {} (field {}): {rule}",
                self.js_name(key),
                self.core_name(core)
            ),
            Some(&self.core_name(core)),
        )
    }

    /// A nested options object.
    pub fn child(&self, key: &str, core: &str, allowed: &[&str]) -> Result<Option<Opts<'e>>> {
        match self.get(key)? {
            None => Ok(None),
            Some(v) => Opts::new(
                self.env,
                Some(v),
                &self.js_name(key),
                &self.core_name(core),
                allowed,
            )
            .map(Some),
        }
    }

    /// A number (NaN and infinities included: the core refuses them with its own rule).
    pub fn num(&self, key: &str, core: &str, what: &str) -> Result<Option<Num>> {
        match self.get(key)? {
            None => Ok(None),
            Some(v) if v.get_type()? == ValueType::Number => Ok(Some(Num(unsafe { v.cast::<f64>()? }))),
            Some(v) => Err(self.type_error(key, core, what, &v)),
        }
    }

    /// A whole number (a count).
    pub fn int(&self, key: &str, core: &str) -> Result<Option<i64>> {
        match self.num(key, core, "a whole number")? {
            None => Ok(None),
            Some(Num(f)) if f.is_finite() && f.fract() == 0.0 => Ok(Some(f as i64)),
            Some(Num(f)) => Err(self.range_error(key, core, format!("must be a whole number, got {f}"))),
        }
    }

    /// A PRNG seed: a whole number in 0..=2^53-1 (JavaScript numbers hold no more exactly).
    pub fn seed(&self, key: &str, core: &str) -> Result<Option<u64>> {
        match self.num(key, core, "a whole number")? {
            None => Ok(None),
            Some(Num(f))
                if f.is_finite() && f.fract() == 0.0 && (0.0..=9_007_199_254_740_991.0).contains(&f) =>
            {
                Ok(Some(f as u64))
            }
            Some(Num(f)) => Err(self.range_error(
                key,
                core,
                format!("must be a whole number between 0 and 2^53-1, got {f}"),
            )),
        }
    }

    /// A boolean.
    pub fn boolean(&self, key: &str, core: &str) -> Result<Option<bool>> {
        match self.get(key)? {
            None => Ok(None),
            Some(v) if v.get_type()? == ValueType::Boolean => Ok(Some(unsafe { v.cast::<bool>()? })),
            Some(v) => Err(self.type_error(key, core, "a boolean", &v)),
        }
    }

    /// A string.
    pub fn string(&self, key: &str, core: &str) -> Result<Option<String>> {
        match self.get(key)? {
            None => Ok(None),
            Some(v) if v.get_type()? == ValueType::String => Ok(Some(unsafe { v.cast::<String>()? })),
            Some(v) => Err(self.type_error(key, core, "a string", &v)),
        }
    }

    /// An array of whole numbers (HTTP statuses).
    pub fn int_list(&self, key: &str, core: &str) -> Result<Option<Vec<i64>>> {
        let Some(v) = self.get(key)? else {
            return Ok(None);
        };
        if !is_array(self.env, &v) {
            return Err(self.type_error(key, core, "an array of whole numbers", &v));
        }
        let arr = unsafe { v.cast::<Array>()? };
        let mut out = Vec::with_capacity(arr.len() as usize);
        for i in 0..arr.len() {
            let item = arr.get_element::<Unknown>(i)?;
            if item.get_type()? != ValueType::Number {
                return Err(self.type_error(key, core, "an array of whole numbers", &item));
            }
            let f = unsafe { item.cast::<f64>()? };
            if !f.is_finite() || f.fract() != 0.0 {
                return Err(self.range_error(key, core, format!("must hold whole numbers, got {f}")));
            }
            out.push(f as i64);
        }
        Ok(Some(out))
    }

    /// A required value that is missing.
    fn missing(&self, key: &str, core: &str) -> Error {
        err::throw(
            self.env,
            Kind::Type,
            "invalid_config",
            format!(
                "invalid configuration: {} (field {}) is required",
                self.js_name(key),
                self.core_name(core)
            ),
            Some(&self.core_name(core)),
        )
    }
}

const MS: &str = "a number of milliseconds";

fn backoff(o: &Opts<'_>) -> Result<BackoffSpec> {
    Ok(BackoffSpec {
        initial_ms: o.num("initialMs", "initial", MS)?,
        multiplier: o.num("multiplier", "multiplier", "a number")?,
        max_ms: o.num("maxMs", "max", MS)?,
        jitter: o.num("jitter", "jitter", "a number")?,
    })
}

const BACKOFF_KEYS: &[&str] = &["initialMs", "multiplier", "maxMs", "jitter"];

fn trip(o: &Opts<'_>) -> Result<TripSpec> {
    let policy = o
        .string("policy", "policy")?
        .unwrap_or_else(|| "consecutive".to_owned());
    let req_int = |k: &str, c: &str| -> Result<i64> { o.int(k, c)?.ok_or_else(|| o.missing(k, c)) };
    let req_num =
        |k: &str, c: &str, w: &str| -> Result<Num> { o.num(k, c, w)?.ok_or_else(|| o.missing(k, c)) };
    match policy.as_str() {
        "consecutive" => Ok(TripSpec::Consecutive {
            threshold: req_int("threshold", "threshold")?,
        }),
        "window" => Ok(TripSpec::Window {
            threshold: req_int("threshold", "threshold")?,
            window_ms: req_num("windowMs", "window", MS)?,
        }),
        "rate" => Ok(TripSpec::Rate {
            threshold: req_num("threshold", "threshold", "a number (a failure rate in (0, 1])")?,
            min_calls: req_int("minCalls", "min_calls")?,
            window_ms: req_num("windowMs", "window", MS)?,
            buckets: o.int("buckets", "buckets")?,
        }),
        other => Err(o.range_error(
            "policy",
            "policy",
            format!("must be \"consecutive\", \"window\" or \"rate\", got {other:?}"),
        )),
    }
}

/// Breaker options (camelCase, milliseconds) to the core's spec, and the `fleet` option (the
/// neutral configuration's top-level `fleet`) as the configuration whose `fleet_config` says
/// what to attach.
pub fn breaker<'e>(env: &'e Env, value: Option<Unknown<'e>>) -> Result<(BreakerSpec, HoldoffConfig)> {
    let o = Opts::new(
        env,
        value,
        "",
        "breaker",
        &[
            "trip",
            "openInterval",
            "recoveries",
            "maxProbesInFlight",
            "probeTimeoutMs",
            "maxRetryLaterMs",
            "seed",
            "fleet",
        ],
    )?;
    let fleet = HoldoffConfig {
        fleet: fleet(env, o.get("fleet")?)?,
        ..HoldoffConfig::default()
    };
    let trip_opts = o.child(
        "trip",
        "trip",
        &["policy", "threshold", "windowMs", "minCalls", "buckets"],
    )?;
    let spec = BreakerSpec {
        trip: trip_opts.as_ref().map(trip).transpose()?,
        open_interval: o
            .child("openInterval", "open_interval", BACKOFF_KEYS)?
            .as_ref()
            .map(backoff)
            .transpose()?,
        recoveries: o.int("recoveries", "recoveries")?,
        max_probes_in_flight: o.int("maxProbesInFlight", "max_probes_in_flight")?,
        probe_timeout_ms: o.num("probeTimeoutMs", "probe_timeout", MS)?,
        max_retry_later_ms: o.num("maxRetryLaterMs", "max_retry_later", MS)?,
        seed: o.seed("seed", "seed")?,
    };
    Ok((spec, fleet))
}

/// Fleet options (`{ url, key, refreshMs, fallbackAfterMs, timeoutMs, ttlMs }`) to the core's
/// spec; the core checks the values (and that `url` and `key` are given).
fn fleet<'e>(env: &'e Env, value: Option<Unknown<'e>>) -> Result<Option<FleetSpec>> {
    if value.is_none() {
        return Ok(None);
    }
    let o = Opts::new(
        env,
        value,
        "fleet",
        "fleet",
        &["url", "key", "refreshMs", "fallbackAfterMs", "timeoutMs", "ttlMs"],
    )?;
    if o.obj.is_none() {
        return Ok(None);
    }
    Ok(Some(FleetSpec {
        url: o.string("url", "url")?,
        key: o.string("key", "key")?,
        refresh_ms: o.num("refreshMs", "refresh", MS)?,
        fallback_after_ms: o.num("fallbackAfterMs", "fallback_after", MS)?,
        timeout_ms: o.num("timeoutMs", "timeout", MS)?,
        ttl_ms: o.num("ttlMs", "ttl", MS)?,
    }))
}

/// Budget options to the core's spec.
pub fn budget<'e>(env: &'e Env, value: Option<Unknown<'e>>) -> Result<BudgetSpec> {
    let o = Opts::new(
        env,
        value,
        "",
        "budget",
        &[
            "maxRateLimitDurationMs",
            "retryAfterCapMs",
            "maxRetries",
            "backoff",
            "maxBackoffDurationMs",
            "giveUpAboveCap",
            "seed",
        ],
    )?;
    Ok(BudgetSpec {
        max_rate_limit_duration_ms: o.num("maxRateLimitDurationMs", "max_rate_limit_duration", MS)?,
        retry_after_cap_ms: o.num("retryAfterCapMs", "retry_after_cap", MS)?,
        max_retries: o.int("maxRetries", "max_retries")?,
        backoff: o
            .child("backoff", "backoff", BACKOFF_KEYS)?
            .as_ref()
            .map(backoff)
            .transpose()?,
        max_backoff_duration_ms: o.num("maxBackoffDurationMs", "max_backoff_duration", MS)?,
        give_up_above_cap: o.boolean("giveUpAboveCap", "give_up_above_cap")?,
        seed: o.seed("seed", "seed")?,
    })
}

/// Quota options to the core's spec.
pub fn quota<'e>(env: &'e Env, value: Option<Unknown<'e>>) -> Result<QuotaSpec> {
    let o = Opts::new(
        env,
        value,
        "",
        "quota",
        &["capacity", "retryCost", "timeoutCost", "successRefill"],
    )?;
    Ok(QuotaSpec {
        capacity: o.int("capacity", "capacity")?,
        retry_cost: o.int("retryCost", "retry_cost")?,
        timeout_cost: o.int("timeoutCost", "timeout_cost")?,
        success_refill: o.int("successRefill", "success_refill")?,
    })
}

/// Classifier options to the core's spec.
pub fn classifier<'e>(env: &'e Env, value: Option<Unknown<'e>>) -> Result<ClassifierSpec> {
    let o = Opts::new(
        env,
        value,
        "",
        "classifier",
        &[
            "failureStatuses",
            "answerStatuses",
            "retryAfterStatuses",
            "rateLimitDefaultWaitMs",
        ],
    )?;
    Ok(ClassifierSpec {
        failure_statuses: o.int_list("failureStatuses", "failure_statuses")?,
        answer_statuses: o.int_list("answerStatuses", "answer_statuses")?,
        retry_after_statuses: o.int_list("retryAfterStatuses", "retry_after_statuses")?,
        rate_limit_default_wait_ms: o.num("rateLimitDefaultWaitMs", "rate_limit_default_wait", MS)?,
    })
}

/// Group options (`{ maxKeys }`) to the core's spec.
pub fn group<'e>(env: &'e Env, value: Option<Unknown<'e>>) -> Result<GroupSpec> {
    let o = Opts::new(env, value, "", "group", &["maxKeys"])?;
    Ok(GroupSpec {
        max_keys: o.int("maxKeys", "max_keys")?,
    })
}

/// Manual clock options: `{ wallOriginUnixMs }`.
pub fn clock<'e>(env: &'e Env, value: Option<Unknown<'e>>) -> Result<Option<f64>> {
    let o = Opts::new(env, value, "", "clock", &["wallOriginUnixMs"])?;
    Ok(o.num("wallOriginUnixMs", "wall_origin_unix_ms", MS)?.map(|n| n.0))
}
