//! `holdoff_config`: the language-neutral JSON configuration (the `config` object of every
//! conformance case and `holdoff simulate` scenario), parsed and validated by the core.

use std::ffi::c_char;
use std::sync::Arc;

use hcore::config::HoldoffConfig;
use hcore::{BreakerConfig, BudgetConfig, ClassifierConfig, ExecutionConfig, QuotaConfig};

use crate::breaker::{holdoff_breaker, holdoff_group, new_breaker, new_group};
use crate::budget::{holdoff_budget, new_budget};
use crate::clock::holdoff_clock;
use crate::execution::holdoff_execution_options;
use crate::handle::{handle, non_null, write, Handle};
use crate::http::{bytes, holdoff_classifier, new_classifier};
use crate::quota::{holdoff_quota, new_quota};
use crate::status::{boundary, holdoff_status, Fail};

/// `holdoff_config_parts` bit: the configuration has a `breaker` part.
pub const HOLDOFF_CONFIG_BREAKER: u32 = 1;
/// `holdoff_config_parts` bit: the configuration has a `budget` part.
pub const HOLDOFF_CONFIG_BUDGET: u32 = 2;
/// `holdoff_config_parts` bit: the configuration has a `quota` part.
pub const HOLDOFF_CONFIG_QUOTA: u32 = 4;
/// `holdoff_config_parts` bit: the configuration has a `classifier` part.
pub const HOLDOFF_CONFIG_CLASSIFIER: u32 = 8;
/// `holdoff_config_parts` bit: the configuration has a `group` part (`max_keys`).
pub const HOLDOFF_CONFIG_GROUP: u32 = 16;
/// `holdoff_config_parts` bit: the configuration has an `execute` part (the time limits of
/// `holdoff_execution_new`).
pub const HOLDOFF_CONFIG_EXECUTE: u32 = 32;

/// A parsed, validated configuration in holdoff's neutral JSON format (durations in
/// milliseconds, `"NaN"`/`"Infinity"` spelled as strings, unknown keys refused; see
/// `core/src/config.rs`). Immutable and thread-safe. Free with `holdoff_config_free`.
pub struct holdoff_config {
    _private: [u8; 0],
}

pub(crate) struct ConfigHandle {
    breaker: Option<BreakerConfig>,
    budget: Option<BudgetConfig>,
    quota: Option<QuotaConfig>,
    classifier: Option<ClassifierConfig>,
    /// `group.max_keys`, checked (the core's default when absent).
    group_max_keys: usize,
    has_group: bool,
    /// `execute`, checked (the core's defaults when absent).
    execution: ExecutionConfig,
    has_execute: bool,
}

handle!(holdoff_config => ConfigHandle, Config, "config");

fn parse(text: &[u8]) -> Result<ConfigHandle, Fail> {
    let spec: HoldoffConfig = serde_json::from_slice(text).map_err(|e| {
        Fail::new(
            holdoff_status::InvalidConfig,
            "config",
            format!("invalid configuration: config: {e}"),
        )
    })?;
    // The order the reference runner builds in, so the first error is the same one.
    let breaker = spec.breaker.as_ref().map(|s| s.to_config()).transpose()?;
    let group_max_keys = spec.group.clone().unwrap_or_default().max_keys()?;
    let budget = spec.budget.as_ref().map(|s| s.to_config()).transpose()?;
    let quota = spec.quota.as_ref().map(|s| s.to_config()).transpose()?;
    let classifier = spec.classifier.clone().unwrap_or_default().to_config()?;
    let execution = spec.execute.clone().unwrap_or_default().to_config()?;
    Ok(ConfigHandle {
        breaker,
        budget,
        quota,
        classifier: spec.classifier.is_some().then_some(classifier),
        group_max_keys,
        has_group: spec.group.is_some(),
        execution,
        has_execute: spec.execute.is_some(),
    })
}

/// Parses and validates a JSON configuration of `len` bytes (UTF-8, no NUL needed), e.g.
/// `{"breaker": {"trip": {"policy": "consecutive", "threshold": 5}}, "budget": {}}`. Every part
/// and field is optional (absent ones take the core's defaults).
///
/// Errors: `HOLDOFF_STATUS_INVALID_CONFIG` with `holdoff_last_error_field` naming the first
/// invalid field as the conformance suite does (`breaker.open_interval.initial` for a NaN or
/// negative `initial_ms`, `group.max_keys` for a bound outside 1..=100000000,
/// `execute.total_timeout` for a `total_timeout_ms` of 0; `config` for
/// JSON that does not parse or has an unknown key);
/// `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `json` must be valid for reading `len` bytes; `out` NULL or valid for writing a pointer. On
/// success the caller owns `*out` and frees it once with `holdoff_config_free`.
#[no_mangle]
pub unsafe extern "C" fn holdoff_config_parse(
    json: *const c_char,
    len: usize,
    out: *mut *mut holdoff_config,
) -> holdoff_status {
    boundary(|| {
        non_null(json, "json")?;
        // SAFETY: forwarded contract.
        let text = unsafe { bytes(json, len, "json")? };
        non_null(out, "out")?;
        let cfg = Arc::new(parse(text)?);
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out, holdoff_config::into_ptr(cfg)) };
        Ok(holdoff_status::Ok)
    })
}

/// Releases a configuration. NULL does nothing. Objects built from it do not need it.
///
/// # Safety
/// `config` must be NULL or a live configuration handle, not used again afterwards and not in
/// use by another thread.
#[no_mangle]
pub unsafe extern "C" fn holdoff_config_free(config: *mut holdoff_config) -> holdoff_status {
    // SAFETY: forwarded contract.
    unsafe { holdoff_config::free(config) }
}

/// Writes which parts the configuration has to `*out_parts`, as `HOLDOFF_CONFIG_*` bits.
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `config` must be NULL or a live configuration handle; `out_parts` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn holdoff_config_parts(
    config: *const holdoff_config,
    out_parts: *mut u32,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { holdoff_config::borrow(config)? };
        non_null(out_parts, "out_parts")?;
        let mut parts = 0;
        for (present, bit) in [
            (c.breaker.is_some(), HOLDOFF_CONFIG_BREAKER),
            (c.budget.is_some(), HOLDOFF_CONFIG_BUDGET),
            (c.quota.is_some(), HOLDOFF_CONFIG_QUOTA),
            (c.classifier.is_some(), HOLDOFF_CONFIG_CLASSIFIER),
            (c.has_group, HOLDOFF_CONFIG_GROUP),
            (c.has_execute, HOLDOFF_CONFIG_EXECUTE),
        ] {
            if present {
                parts |= bit;
            }
        }
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out_parts, parts) };
        Ok(holdoff_status::Ok)
    })
}

/// Creates a closed breaker from the configuration's `breaker` part (the core's defaults if it
/// has none), reading `clock`. Free it with `holdoff_breaker_free`.
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `config`, `clock` must be NULL or live handles; `out` NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn holdoff_config_new_breaker(
    config: *const holdoff_config,
    clock: *const holdoff_clock,
    out: *mut *mut holdoff_breaker,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { holdoff_config::borrow(config)? };
        // SAFETY: forwarded contract.
        let k = unsafe { holdoff_clock::borrow(clock)? };
        non_null(out, "out")?;
        // SAFETY: `out` checked non-NULL; valid by contract.
        unsafe { new_breaker(c.breaker.clone().unwrap_or_default(), k, out) }
    })
}

/// Creates a breaker group whose template is the configuration's `breaker` part (the core's
/// defaults if it has none), bounded by its `group.max_keys` (`HOLDOFF_GROUP_DEFAULT_MAX_KEYS`
/// if absent), reading `clock`. Free it with `holdoff_group_free`.
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `config`, `clock` must be NULL or live handles; `out` NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn holdoff_config_new_group(
    config: *const holdoff_config,
    clock: *const holdoff_clock,
    out: *mut *mut holdoff_group,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { holdoff_config::borrow(config)? };
        // SAFETY: forwarded contract.
        let k = unsafe { holdoff_clock::borrow(clock)? };
        non_null(out, "out")?;
        // SAFETY: `out` checked non-NULL; valid by contract.
        unsafe { new_group(c.breaker.clone().unwrap_or_default(), c.group_max_keys, k, out) }
    })
}

/// Creates a retry budget from the configuration's `budget` part (the core's defaults if it
/// has none), reading `clock`. Free it with `holdoff_budget_free`.
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `config`, `clock` must be NULL or live handles; `out` NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn holdoff_config_new_budget(
    config: *const holdoff_config,
    clock: *const holdoff_clock,
    out: *mut *mut holdoff_budget,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { holdoff_config::borrow(config)? };
        // SAFETY: forwarded contract.
        let k = unsafe { holdoff_clock::borrow(clock)? };
        non_null(out, "out")?;
        // SAFETY: `out` checked non-NULL; valid by contract.
        unsafe { new_budget(c.budget.clone().unwrap_or_default(), k, out) }
    })
}

/// Creates a full retry quota from the configuration's `quota` part (the core's defaults if
/// it has none). Free it with `holdoff_quota_free`.
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `config` must be NULL or a live handle; `out` NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn holdoff_config_new_quota(
    config: *const holdoff_config,
    out: *mut *mut holdoff_quota,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { holdoff_config::borrow(config)? };
        non_null(out, "out")?;
        // SAFETY: `out` checked non-NULL; valid by contract.
        unsafe { new_quota(c.quota.unwrap_or_default(), out) }
    })
}

/// Creates a classifier from the configuration's `classifier` part (the default classifier
/// if it has none). Free it with `holdoff_classifier_free`.
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `config` must be NULL or a live handle; `out` NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn holdoff_config_new_classifier(
    config: *const holdoff_config,
    out: *mut *mut holdoff_classifier,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { holdoff_config::borrow(config)? };
        non_null(out, "out")?;
        // SAFETY: `out` checked non-NULL; valid by contract.
        unsafe { new_classifier(c.classifier.clone().unwrap_or_default(), out) }
    })
}

/// Writes the time limits of the configuration's `execute` part (`attempt_timeout_ms`,
/// `total_timeout_ms`; `null` is no limit; the core's defaults when absent) to `*out_options`,
/// for `holdoff_execution_new`. Both limits are written explicitly (`HOLDOFF_LIMIT_SET` or
/// `HOLDOFF_LIMIT_NONE`).
///
/// Errors: `HOLDOFF_STATUS_INVALID_CONFIG` naming the field for a limit longer than
/// `uint64_t` nanoseconds hold (about 584 years); `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `config` must be NULL or a live handle; `out_options` NULL or valid for a write of
/// `holdoff_execution_options`.
#[no_mangle]
pub unsafe extern "C" fn holdoff_config_execution_options(
    config: *const holdoff_config,
    out_options: *mut holdoff_execution_options,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { holdoff_config::borrow(config)? };
        non_null(out_options, "out_options")?;
        let o = holdoff_execution_options::from_config(&c.execution)?;
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out_options, o) };
        Ok(holdoff_status::Ok)
    })
}
