//! `holdoff_config`: the language-neutral JSON configuration (the `config` object of every
//! conformance case and `holdoff simulate` scenario), parsed and validated by the core. It is
//! the one way to configure an object: every `holdoff_<object>_new` reads one (NULL: the core's
//! defaults), and `holdoff_config_to_json` writes one back with every field, which is how the
//! Go and C# bindings learn the core's defaults.

use std::ffi::c_char;
use std::sync::{Arc, OnceLock};

use hcore::fleet::FleetConfig;
use hcore::interop::config::{
    BreakerSpec, BudgetSpec, ClassifierSpec, ExecuteSpec, FleetSpec, GroupSpec, HoldoffConfig, QuotaSpec,
};
use hcore::{BreakerConfig, BudgetConfig, ClassifierConfig, ExecutionConfig, QuotaConfig};

use crate::execution::holdoff_execution_options;
use crate::handle::{handle, non_null, write, Handle};
use crate::http::bytes;
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
/// `holdoff_config_parts` bit: the configuration has a `fleet` part (the shared record every
/// breaker built from it attaches to: `holdoff_breaker_new`, and so a policy composed from it).
pub const HOLDOFF_CONFIG_FLEET: u32 = 64;

/// A parsed, validated configuration in holdoff's neutral JSON format (durations in
/// milliseconds, `"NaN"`/`"Infinity"` spelled as strings, unknown keys refused; see
/// `core/src/interop/config.rs`). Immutable and thread-safe. Free with `holdoff_config_free`.
pub struct holdoff_config {
    _private: [u8; 0],
}

/// Each part checked by the core; an absent part is `None` (the core's defaults apply).
#[derive(Default)]
pub(crate) struct ConfigHandle {
    breaker: Option<BreakerConfig>,
    budget: Option<BudgetConfig>,
    quota: Option<QuotaConfig>,
    classifier: Option<ClassifierConfig>,
    group_max_keys: Option<usize>,
    execution: Option<ExecutionConfig>,
    fleet: Option<FleetConfig>,
}

handle!(holdoff_config => ConfigHandle, Config, "config");

impl ConfigHandle {
    pub(crate) fn breaker(&self) -> BreakerConfig {
        self.breaker.clone().unwrap_or_default()
    }

    pub(crate) fn budget(&self) -> BudgetConfig {
        self.budget.clone().unwrap_or_default()
    }

    pub(crate) fn quota(&self) -> QuotaConfig {
        self.quota.unwrap_or_default()
    }

    pub(crate) fn classifier(&self) -> ClassifierConfig {
        self.classifier.clone().unwrap_or_default()
    }

    pub(crate) fn group_max_keys(&self) -> usize {
        self.group_max_keys.unwrap_or(hcore::group::DEFAULT_MAX_KEYS)
    }

    pub(crate) fn execution(&self) -> ExecutionConfig {
        self.execution.unwrap_or_default()
    }

    /// The fleet a breaker built from this configuration attaches to, if any.
    pub(crate) fn fleet(&self) -> Option<&FleetConfig> {
        self.fleet.as_ref()
    }

    /// Refuses a group template with a fleet: a group's breakers stay local (field `fleet`).
    pub(crate) fn check_group(&self) -> Result<(), Fail> {
        if self.fleet.is_some() {
            let e = hcore::ConfigError {
                field: "fleet".into(),
                rule: "not supported with a group".into(),
            };
            return Err(e.into());
        }
        Ok(())
    }

    /// Every part, every field explicit: what the objects built from this configuration use.
    fn to_spec(&self) -> HoldoffConfig {
        HoldoffConfig {
            breaker: Some(BreakerSpec::from(&self.breaker())),
            budget: Some(BudgetSpec::from(&self.budget())),
            quota: Some(QuotaSpec::from(&self.quota())),
            classifier: Some(ClassifierSpec::from(&self.classifier())),
            group: Some(GroupSpec {
                max_keys: Some(i64::try_from(self.group_max_keys()).unwrap_or(i64::MAX)),
            }),
            execute: Some(ExecuteSpec::from(&self.execution())),
            fleet: self.fleet.as_ref().map(FleetSpec::from),
        }
    }
}

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
    let fleet = spec.fleet_config(false)?;
    Ok(ConfigHandle {
        breaker,
        budget,
        quota,
        classifier: spec.classifier.is_some().then_some(classifier),
        group_max_keys: spec.group.is_some().then_some(group_max_keys),
        execution: spec.execute.is_some().then_some(execution),
        fleet,
    })
}

/// The configuration a constructor reads: the handle's, or the core's defaults for NULL.
///
/// # Safety
/// `config` must be NULL or a live configuration handle.
pub(crate) unsafe fn config_or_defaults<'a>(config: *const holdoff_config) -> Result<&'a ConfigHandle, Fail> {
    static DEFAULTS: OnceLock<ConfigHandle> = OnceLock::new();
    if config.is_null() {
        return Ok(DEFAULTS.get_or_init(ConfigHandle::default));
    }
    // SAFETY: forwarded contract.
    unsafe { holdoff_config::borrow(config) }
}

/// The body of every `holdoff_<object>_new`: `make` builds the object from the configuration
/// (the core's defaults for NULL), and its new handle is written to `*out`.
///
/// # Safety
/// `config` must be NULL or a live configuration handle; `out` NULL or valid for writing a
/// pointer.
pub(crate) unsafe fn build<H: Handle>(
    config: *const holdoff_config,
    out: *mut *mut H,
    make: impl FnOnce(&ConfigHandle) -> Result<H::Target, Fail>,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { config_or_defaults(config)? };
        let made = Arc::new(make(c)?);
        non_null(out, "out")?;
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out, H::into_ptr(made)) };
        Ok(holdoff_status::Ok)
    })
}

/// Parses and validates a JSON configuration of `len` bytes (UTF-8, no NUL needed), e.g.
/// `{"breaker": {"trip": {"policy": "consecutive", "threshold": 5}}, "budget": {}}`. Every part
/// and field is optional (absent ones take the core's defaults).
///
/// Errors: `HOLDOFF_STATUS_INVALID_CONFIG` with `holdoff_last_error_field` naming the first
/// invalid field as the conformance suite does (`breaker.open_interval.initial` for a NaN or
/// negative `initial_ms`, `group.max_keys` for a bound outside 1..=100000000,
/// `execute.total_timeout` for a `total_timeout_ms` of 0; `fleet.url`, `fleet.key`,
/// `fleet.refresh`, `fleet.fallback_after`, `fleet.timeout`, `fleet.ttl` for a bad `fleet` part;
/// `config` for JSON that does not parse or has an unknown key);
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
            (c.group_max_keys.is_some(), HOLDOFF_CONFIG_GROUP),
            (c.execution.is_some(), HOLDOFF_CONFIG_EXECUTE),
            (c.fleet.is_some(), HOLDOFF_CONFIG_FLEET),
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

/// Writes the neutral JSON of `config` (NULL: the core's defaults) into `buf`: every part
/// (`breaker`, `budget`, `quota`, `classifier`, `group`, `execute`; `fleet` when it has one)
/// with every field explicit,
/// absent parts and fields filled with the core's defaults, so it is exactly what the objects
/// built from the configuration use. Durations are float milliseconds; `null` is "none" (no
/// probe timeout, no default wait, no limit). The text is UTF-8 followed by a NUL, and
/// `holdoff_config_parse` reads it back to the same configuration.
///
/// Writes the text's length in bytes (without the NUL) to `*out_len`. With `capacity` 0 only
/// the length is written (`buf` may then be NULL): call once to size the buffer, then again
/// with `capacity` at least the length + 1.
///
/// Errors: `HOLDOFF_STATUS_INVALID_INPUT` naming `capacity` when it is neither 0 nor at least
/// the length + 1 (nothing is written); `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `config` must be NULL or a live configuration handle; `buf` valid for writing `capacity`
/// bytes; `out_len` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn holdoff_config_to_json(
    config: *const holdoff_config,
    buf: *mut c_char,
    capacity: usize,
    out_len: *mut usize,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { config_or_defaults(config)? };
        non_null(out_len, "out_len")?;
        if capacity > 0 {
            non_null(buf, "buf")?;
        }
        // Serialising plain numbers, strings and maps cannot fail.
        let text = serde_json::to_vec(&c.to_spec()).unwrap_or_default();
        if capacity > 0 {
            if capacity <= text.len() {
                return Err(Fail::input(
                    "capacity",
                    format!(
                        "{capacity} bytes cannot hold the {} bytes and the NUL",
                        text.len()
                    ),
                ));
            }
            // SAFETY: `buf` is valid for `capacity` > `text.len()` bytes by contract, and the
            // library's own text cannot overlap the caller's buffer.
            unsafe {
                std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), text.len());
                write(buf.add(text.len()), 0);
            }
        }
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out_len, text.len()) };
        Ok(holdoff_status::Ok)
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
        let o = holdoff_execution_options::from_config(&c.execution())?;
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out_options, o) };
        Ok(holdoff_status::Ok)
    })
}
