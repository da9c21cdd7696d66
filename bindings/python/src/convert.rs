//! Argument conversion and error mapping: Python values to the core's types, checked by the
//! core's `units` rules, and core errors to the exceptions of `holdoff._errors`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use holdoff as hc;
use holdoff::interop::Coded;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyFloat, PyInt, PyString, PyType};

const ERRORS: &str = "holdoff._errors";

macro_rules! error_class {
    ($fn:ident, $name:literal) => {
        pub(crate) fn $fn(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
            static CELL: PyOnceLock<Py<PyType>> = PyOnceLock::new();
            CELL.import(py, ERRORS, $name)
        }
    };
}

error_class!(invalid_config_cls, "InvalidConfigError");
error_class!(config_type_cls, "ConfigTypeError");
error_class!(invalid_input_cls, "InvalidInputError");
error_class!(input_type_cls, "InputTypeError");
error_class!(clock_backwards_cls, "ClockBackwardsError");
error_class!(permit_error_cls, "PermitError");
error_class!(breaker_open_cls, "BreakerOpenError");
error_class!(quota_empty_cls, "QuotaEmptyError");

fn raise<'py>(cls: PyResult<&Bound<'py, PyType>>, args: impl pyo3::call::PyCallArgs<'py>) -> PyErr {
    match cls.and_then(|c| c.call1(args)) {
        Ok(instance) => PyErr::from_value(instance),
        Err(e) => e,
    }
}

/// `holdoff.InvalidConfigError` (a `ValueError`) naming the field and the rule.
pub(crate) fn config_error(py: Python<'_>, e: hc::ConfigError) -> PyErr {
    raise(invalid_config_cls(py), (e.field, e.rule))
}

/// `holdoff.ConfigTypeError` (a `TypeError`) naming the field.
pub(crate) fn type_error(py: Python<'_>, field: &str, rule: String) -> PyErr {
    raise(config_type_cls(py), (field.to_owned(), rule))
}

/// `holdoff.InvalidInputError` (a `ValueError`).
pub(crate) fn input_error(py: Python<'_>, e: hc::InputError) -> PyErr {
    raise(invalid_input_cls(py), (e.field, e.rule))
}

/// `holdoff.InputTypeError` (a `TypeError`, code `invalid_input`): an operation argument of the
/// wrong type.
pub(crate) fn input_type_error(py: Python<'_>, field: &str, rule: String) -> PyErr {
    raise(input_type_cls(py), (field.to_owned(), rule))
}

/// An operation's argument (not configuration): the conversions above are shared with the
/// configuration paths and raise `InvalidConfigError` / `ConfigTypeError`; an argument's error is
/// `InvalidInputError` / `InputTypeError` (code `invalid_input`, as in Node), with the same field and
/// rule. Other errors pass through.
pub(crate) fn as_input(py: Python<'_>, e: PyErr) -> PyErr {
    let v = e.value(py);
    let cls = if invalid_config_cls(py).is_ok_and(|c| v.is_instance(c).unwrap_or(false)) {
        invalid_input_cls(py)
    } else if config_type_cls(py).is_ok_and(|c| v.is_instance(c).unwrap_or(false)) {
        input_type_cls(py)
    } else {
        return e;
    };
    match (v.getattr("field"), v.getattr("rule")) {
        (Ok(f), Ok(r)) => raise(cls, (f, r)),
        _ => e,
    }
}

/// `duration` for an operation's argument (`InvalidInputError` / `InputTypeError`).
pub(crate) fn duration_arg(obj: &Bound<'_, PyAny>, field: &str) -> PyResult<Duration> {
    duration(obj, field).map_err(|e| as_input(obj.py(), e))
}

/// `int` for an operation's argument (`InputTypeError`).
pub(crate) fn int_arg(obj: &Bound<'_, PyAny>, field: &str) -> PyResult<i64> {
    int(obj, field).map_err(|e| as_input(obj.py(), e))
}

/// `wall_time` for an operation's argument (`InvalidInputError` / `InputTypeError`).
pub(crate) fn wall_time_arg(obj: Option<&Bound<'_, PyAny>>, field: &str) -> PyResult<SystemTime> {
    wall_time(obj, field).map_err(|e| match obj {
        Some(o) => as_input(o.py(), e),
        None => e,
    })
}

/// `holdoff.ClockBackwardsError` (a `ValueError`).
pub(crate) fn clock_error(py: Python<'_>, e: hc::ClockError) -> PyErr {
    let hc::ClockError::Backwards {
        now_nanos,
        requested_nanos,
    } = e;
    raise(
        clock_backwards_cls(py),
        (now_nanos as f64 / 1e9, requested_nanos as f64 / 1e9),
    )
}

/// `holdoff.PermitError` with the stable name as `code`.
pub(crate) fn permit_error(py: Python<'_>, e: hc::PermitError) -> PyErr {
    raise(
        permit_error_cls(py),
        (hc::interop::ErrorKind::of(&hc::HoldoffError::from(e)).name(),),
    )
}

/// `holdoff.PermitError` for a quota lease: the core's stable name as `code`, with words about
/// a lease rather than a breaker's permit.
pub(crate) fn lease_error(py: Python<'_>, e: hc::PermitError) -> PyErr {
    let message = match e {
        hc::PermitError::AlreadyRecorded => "this quota lease was already given back",
        hc::PermitError::Foreign => "this quota lease was issued by another quota",
    };
    raise(
        permit_error_cls(py),
        (
            hc::interop::ErrorKind::of(&hc::HoldoffError::from(e)).name(),
            message.to_owned(),
        ),
    )
}

/// `holdoff.BreakerOpenError` for a refusal.
pub(crate) fn breaker_open(py: Python<'_>, r: hc::Refusal) -> PyErr {
    raise(
        breaker_open_cls(py),
        (r.retry_after.map(secs_out), r.state.name(), r.episode),
    )
}

/// `holdoff.QuotaEmptyError`.
pub(crate) fn quota_empty(py: Python<'_>, e: hc::QuotaEmpty) -> PyErr {
    raise(quota_empty_cls(py), (e.available, e.cost))
}

/// Any core error.
pub(crate) fn holdoff_error(py: Python<'_>, e: hc::HoldoffError) -> PyErr {
    match e {
        hc::HoldoffError::Config(c) => config_error(py, c),
        hc::HoldoffError::Input(i) => input_error(py, i),
        hc::HoldoffError::Clock(c) => clock_error(py, c),
        hc::HoldoffError::Permit(p) => permit_error(py, p),
    }
}

/// A duration as float seconds (Python's unit).
pub(crate) fn secs_out(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".to_owned())
}

fn timedelta(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    static CELL: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    CELL.import(py, "datetime", "timedelta")
}

fn datetime(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    static CELL: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    CELL.import(py, "datetime", "datetime")
}

/// A real number (int or float, not bool) as f64; huge ints are refused as too large.
fn real(obj: &Bound<'_, PyAny>, field: &str, what: &str) -> PyResult<f64> {
    let py = obj.py();
    if obj.is_instance_of::<PyFloat>() {
        return obj.extract::<f64>();
    }
    if obj.is_instance_of::<PyInt>() && !obj.is_instance_of::<PyBool>() {
        return obj.extract::<f64>().map_err(|_| {
            config_error(
                py,
                hc::ConfigError {
                    field: field.to_owned(),
                    rule: "is too large".to_owned(),
                },
            )
        });
    }
    Err(type_error(
        py,
        field,
        format!("must be {what}, not {}", type_name(obj)),
    ))
}

/// Float seconds (int, float or `datetime.timedelta`) to a `Duration`, by the core's rules
/// (`units::from_secs_f64`: NaN, infinities, negatives and values past 2^53-1 ms refused).
pub(crate) fn duration(obj: &Bound<'_, PyAny>, field: &str) -> PyResult<Duration> {
    let py = obj.py();
    let secs = if obj.is_instance(timedelta(py)?)? {
        // Exact to the microsecond (a float of seconds is not, past about 10^8 s).
        let days: i64 = obj.getattr("days")?.extract()?;
        let seconds: i64 = obj.getattr("seconds")?.extract()?;
        let micros: i64 = obj.getattr("microseconds")?.extract()?;
        let total = i128::from(days) * 86_400_000_000 + i128::from(seconds) * 1_000_000 + i128::from(micros);
        if total >= 0 && total / 1000 <= i128::from(hc::interop::units::MAX_MILLIS) {
            return Ok(Duration::from_micros(total as u64));
        }
        // Out of range: the core's rule names the field and says why.
        total as f64 / 1e6
    } else {
        real(obj, field, "a number of seconds or a datetime.timedelta")?
    };
    hc::interop::units::from_secs_f64(field, secs).map_err(|e| config_error(py, e))
}

/// `duration`, with `None` meaning "not set".
pub(crate) fn opt_duration(obj: Option<&Bound<'_, PyAny>>, field: &str) -> PyResult<Option<Duration>> {
    match obj {
        None => Ok(None),
        Some(o) if o.is_none() => Ok(None),
        Some(o) => duration(o, field).map(Some),
    }
}

/// A finite float (rates, multipliers, jitter), by `units::finite`.
pub(crate) fn finite(obj: &Bound<'_, PyAny>, field: &str) -> PyResult<f64> {
    let v = real(obj, field, "a number")?;
    hc::interop::units::finite(field, v).map_err(|e| config_error(obj.py(), e))
}

/// A whole count, by `units::whole`: floats and bools are type errors, negative and huge ints
/// are refused there; the range is the core configuration's rule, checked when it is built.
pub(crate) fn whole(obj: &Bound<'_, PyAny>, field: &str) -> PyResult<u32> {
    let v = int(obj, field)?;
    hc::interop::units::whole(field, v).map_err(|e| config_error(obj.py(), e))
}

/// A whole number of tokens, by `units::whole_u64` (the quota's rules check the range).
pub(crate) fn whole_u64(obj: &Bound<'_, PyAny>, field: &str) -> PyResult<u64> {
    let v = int(obj, field)?;
    hc::interop::units::whole_u64(field, v).map_err(|e| config_error(obj.py(), e))
}

/// A bool option (`True`/`False` only: an int or a string is a `ConfigTypeError`, never read as
/// truthy).
pub(crate) fn flag(obj: &Bound<'_, PyAny>, field: &str) -> PyResult<bool> {
    if !obj.is_instance_of::<PyBool>() {
        return Err(type_error(
            obj.py(),
            field,
            format!("must be a bool, not {}", type_name(obj)),
        ));
    }
    obj.extract::<bool>()
}

/// A Python int as i64; ints beyond i64 saturate (so the range check that follows refuses them).
pub(crate) fn int(obj: &Bound<'_, PyAny>, field: &str) -> PyResult<i64> {
    if !obj.is_instance_of::<PyInt>() || obj.is_instance_of::<PyBool>() {
        return Err(type_error(
            obj.py(),
            field,
            format!("must be an int, not {}", type_name(obj)),
        ));
    }
    match obj.extract::<i64>() {
        Ok(v) => Ok(v),
        Err(_) => Ok(if obj.lt(0)? { i64::MIN } else { i64::MAX }),
    }
}

/// A PRNG seed: an int in `0..2^64`.
pub(crate) fn seed(obj: &Bound<'_, PyAny>, field: &str) -> PyResult<u64> {
    if !obj.is_instance_of::<PyInt>() || obj.is_instance_of::<PyBool>() {
        return Err(type_error(
            obj.py(),
            field,
            format!("must be an int, not {}", type_name(obj)),
        ));
    }
    obj.extract::<u64>().map_err(|_| {
        config_error(
            obj.py(),
            hc::ConfigError {
                field: field.to_owned(),
                rule: "must be between 0 and 2^64-1".to_owned(),
            },
        )
    })
}

/// A list of HTTP statuses (any iterable of ints; each 100..=599 is checked by the core).
pub(crate) fn statuses(obj: &Bound<'_, PyAny>, field: &str) -> PyResult<Vec<u16>> {
    let py = obj.py();
    if obj.is_instance_of::<PyString>() {
        return Err(type_error(
            py,
            field,
            "must be a list of ints, not str".to_owned(),
        ));
    }
    let iter = obj.try_iter().map_err(|_| {
        type_error(
            py,
            field,
            format!("must be a list of ints, not {}", type_name(obj)),
        )
    })?;
    let mut out = Vec::new();
    for item in iter {
        let v = int(&item?, field)?;
        // Only the u16 range is the binding's to check; the core's classifier refuses statuses
        // outside 100..=599 with the same field and rule as in every other language.
        let status = u16::try_from(v).unwrap_or(0);
        out.push(status);
    }
    Ok(out)
}

/// A wall-clock time: float/int Unix seconds, an aware `datetime`, a holdoff clock (its wall
/// time now), or `None` for the system's wall clock.
pub(crate) fn wall_time(obj: Option<&Bound<'_, PyAny>>, field: &str) -> PyResult<SystemTime> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(SystemTime::now());
    };
    let py = obj.py();
    if let Some(clock) = crate::clock::shared_clock(obj) {
        let c = clock;
        return Ok(c.wall_at(c.now()));
    }
    let secs = if obj.is_instance(datetime(py)?)? {
        if obj.getattr("tzinfo")?.is_none() {
            return Err(type_error(
                py,
                field,
                "must be a timezone-aware datetime (a naive one has no defined instant)".to_owned(),
            ));
        }
        obj.call_method0("timestamp")?.extract::<f64>()?
    } else {
        real(obj, field, "Unix seconds, an aware datetime or a holdoff clock")?
    };
    let d = hc::interop::units::from_secs_f64(field, secs).map_err(|e| config_error(py, e))?;
    Ok(UNIX_EPOCH + d)
}

/// The callable check shared by callbacks.
pub(crate) fn callable(obj: &Bound<'_, PyAny>, field: &str) -> PyResult<()> {
    if obj.is_callable() {
        Ok(())
    } else {
        Err(PyTypeError::new_err(format!(
            "{field} must be callable, not {}",
            type_name(obj)
        )))
    }
}
