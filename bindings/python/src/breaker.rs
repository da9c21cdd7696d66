//! Breaker, its configuration pieces (backoff, trip policies), permits, snapshots and events.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use holdoff as hc;
use holdoff::interop::Coded;
use pyo3::gc::PyVisit;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use pyo3::{intern, PyTraverseError};

use crate::clock::clock_arg;
use crate::convert::{self, secs_out};

fn opt_secs(d: Option<Duration>) -> Option<f64> {
    d.map(secs_out)
}

fn fmt_opt(v: Option<f64>) -> String {
    v.map_or_else(|| "None".to_owned(), |x| format!("{x:?}"))
}

// ---------------------------------------------------------------------------------------------
// Backoff

/// Exponential backoff: `min(initial * multiplier**n, max)`, then minus up to `jitter` of it
/// (seeded, whole milliseconds). Durations in seconds (float or timedelta).
///
/// Raises `InvalidConfigError` (`ValueError`) naming the field (`backoff.initial`,
/// `backoff.multiplier`, `backoff.max`, `backoff.jitter`) and `ConfigTypeError` for wrong types.
/// `max=None` means `initial` (a constant interval when `multiplier == 1`).
#[pyclass(frozen, module = "holdoff._holdoff")]
#[derive(Clone)]
pub struct Backoff {
    pub(crate) inner: hc::Backoff,
}

pub(crate) fn backoff_from(
    initial: &Bound<'_, PyAny>,
    multiplier: &Bound<'_, PyAny>,
    max: Option<&Bound<'_, PyAny>>,
    jitter: &Bound<'_, PyAny>,
    field: &str,
) -> PyResult<hc::Backoff> {
    let py = initial.py();
    let initial = convert::duration(initial, &format!("{field}.initial"))?;
    let multiplier = convert::finite(multiplier, &format!("{field}.multiplier"))?;
    let max = convert::opt_duration(max, &format!("{field}.max"))?.unwrap_or(initial);
    let jitter = convert::finite(jitter, &format!("{field}.jitter"))?;
    let b = hc::Backoff {
        initial,
        multiplier,
        max,
        jitter,
    };
    b.validate(field).map_err(|e| convert::config_error(py, e))?;
    Ok(b)
}

#[pymethods]
impl Backoff {
    #[new]
    #[pyo3(signature = (initial, multiplier = None, max = None, jitter = None))]
    fn new(
        py: Python<'_>,
        initial: &Bound<'_, PyAny>,
        multiplier: Option<&Bound<'_, PyAny>>,
        max: Option<&Bound<'_, PyAny>>,
        jitter: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let one = 1.0f64.into_pyobject(py)?.into_any();
        let zero = 0.0f64.into_pyobject(py)?.into_any();
        let inner = backoff_from(
            initial,
            multiplier.unwrap_or(&one),
            max,
            jitter.unwrap_or(&zero),
            "backoff",
        )?;
        Ok(Backoff { inner })
    }

    /// The core's default open interval of a breaker (30 s doubling to 300 s, no jitter).
    #[staticmethod]
    fn breaker_default() -> Self {
        Backoff {
            inner: hc::BreakerConfig::default().open_interval,
        }
    }

    /// The core's default backoff of a retry budget's counted path (0.5 s doubling to 60 s).
    #[staticmethod]
    fn budget_default() -> Self {
        Backoff {
            inner: hc::BudgetConfig::default().backoff,
        }
    }

    /// A constant interval of `interval` seconds.
    #[staticmethod]
    fn constant(py: Python<'_>, interval: &Bound<'_, PyAny>) -> PyResult<Self> {
        Self::new(py, interval, None, None, None)
    }

    /// First interval, seconds.
    #[getter]
    fn initial(&self) -> f64 {
        secs_out(self.inner.initial)
    }

    /// Growth factor per step (>= 1).
    #[getter]
    fn multiplier(&self) -> f64 {
        self.inner.multiplier
    }

    /// Cap on the un-jittered interval, seconds.
    #[getter]
    fn max(&self) -> f64 {
        secs_out(self.inner.max)
    }

    /// Fraction in [0, 1) that jitter may subtract.
    #[getter]
    fn jitter(&self) -> f64 {
        self.inner.jitter
    }

    /// The un-jittered, capped interval for step `n` (0-based), seconds.
    fn base(&self, py: Python<'_>, n: &Bound<'_, PyAny>) -> PyResult<f64> {
        let n = convert::int_arg(n, "n")?;
        if n < 0 {
            return Err(convert::input_error(
                py,
                hc::InputError {
                    field: "n".into(),
                    rule: "must not be negative".into(),
                },
            ));
        }
        Ok(secs_out(self.inner.base(n.min(u32::MAX as i64) as u32)))
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.cast::<Backoff>().is_ok_and(|o| o.get().inner == self.inner)
    }

    fn __hash__(&self) -> u64 {
        self.inner.initial.as_nanos() as u64 ^ self.inner.max.as_nanos() as u64
    }

    fn __repr__(&self) -> String {
        format!(
            "Backoff(initial={:?}, multiplier={:?}, max={:?}, jitter={:?})",
            self.initial(),
            self.multiplier(),
            self.max(),
            self.jitter()
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Trip policies

fn validate_trip(py: Python<'_>, trip: hc::TripPolicy) -> PyResult<hc::TripPolicy> {
    hc::BreakerConfig {
        trip,
        ..hc::BreakerConfig::default()
    }
    .validate()
    .map_err(|e| convert::config_error(py, e))?;
    Ok(trip)
}

/// Trip after `threshold` consecutive failures (the default, 5). Needs no clock: the closed
/// path stays lock-free.
#[pyclass(frozen, module = "holdoff._holdoff")]
pub struct ConsecutiveFailures {
    inner: hc::TripPolicy,
}

#[pymethods]
impl ConsecutiveFailures {
    #[new]
    #[pyo3(signature = (threshold = None))]
    fn new(py: Python<'_>, threshold: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let threshold = match threshold {
            Some(t) => convert::whole(t, "breaker.trip.threshold")?,
            None => 5,
        };
        Ok(ConsecutiveFailures {
            inner: validate_trip(py, hc::TripPolicy::ConsecutiveFailures { threshold })?,
        })
    }

    #[getter]
    fn threshold(&self) -> u32 {
        match self.inner {
            hc::TripPolicy::ConsecutiveFailures { threshold } => threshold,
            _ => 0,
        }
    }

    fn __repr__(&self) -> String {
        format!("ConsecutiveFailures(threshold={})", self.threshold())
    }
}

/// Trip after `threshold` failures inside a rolling `window` (seconds), whatever succeeded in
/// between.
#[pyclass(frozen, module = "holdoff._holdoff")]
pub struct FailuresInWindow {
    inner: hc::TripPolicy,
}

#[pymethods]
impl FailuresInWindow {
    #[new]
    fn new(py: Python<'_>, threshold: &Bound<'_, PyAny>, window: &Bound<'_, PyAny>) -> PyResult<Self> {
        let threshold = convert::whole(threshold, "breaker.trip.threshold")?;
        let window = convert::duration(window, "breaker.trip.window")?;
        Ok(FailuresInWindow {
            inner: validate_trip(py, hc::TripPolicy::FailuresInWindow { threshold, window })?,
        })
    }

    #[getter]
    fn threshold(&self) -> u32 {
        match self.inner {
            hc::TripPolicy::FailuresInWindow { threshold, .. } => threshold,
            _ => 0,
        }
    }

    #[getter]
    fn window(&self) -> f64 {
        match self.inner {
            hc::TripPolicy::FailuresInWindow { window, .. } => secs_out(window),
            _ => 0.0,
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "FailuresInWindow(threshold={}, window={:?})",
            self.threshold(),
            self.window()
        )
    }
}

/// Trip when failures / calls >= `threshold` (a rate in (0, 1]) over a rolling `window`
/// (seconds) of `buckets` buckets, once at least `min_calls` calls were seen in it.
#[pyclass(frozen, module = "holdoff._holdoff")]
pub struct FailureRate {
    inner: hc::TripPolicy,
}

#[pymethods]
impl FailureRate {
    #[new]
    #[pyo3(signature = (threshold, min_calls, window, buckets = None))]
    fn new(
        py: Python<'_>,
        threshold: &Bound<'_, PyAny>,
        min_calls: &Bound<'_, PyAny>,
        window: &Bound<'_, PyAny>,
        buckets: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let threshold = convert::finite(threshold, "breaker.trip.threshold")?;
        let min_calls = convert::whole(min_calls, "breaker.trip.min_calls")?;
        let window = convert::duration(window, "breaker.trip.window")?;
        let buckets = match buckets {
            Some(b) => convert::whole(b, "breaker.trip.buckets")?,
            None => 10,
        };
        Ok(FailureRate {
            inner: validate_trip(
                py,
                hc::TripPolicy::FailureRate {
                    threshold,
                    min_calls,
                    window,
                    buckets,
                },
            )?,
        })
    }

    #[getter]
    fn threshold(&self) -> f64 {
        match self.inner {
            hc::TripPolicy::FailureRate { threshold, .. } => threshold,
            _ => 0.0,
        }
    }

    #[getter]
    fn min_calls(&self) -> u32 {
        match self.inner {
            hc::TripPolicy::FailureRate { min_calls, .. } => min_calls,
            _ => 0,
        }
    }

    #[getter]
    fn window(&self) -> f64 {
        match self.inner {
            hc::TripPolicy::FailureRate { window, .. } => secs_out(window),
            _ => 0.0,
        }
    }

    #[getter]
    fn buckets(&self) -> u32 {
        match self.inner {
            hc::TripPolicy::FailureRate { buckets, .. } => buckets,
            _ => 0,
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "FailureRate(threshold={:?}, min_calls={}, window={:?}, buckets={})",
            self.threshold(),
            self.min_calls(),
            self.window(),
            self.buckets()
        )
    }
}

fn trip_arg(obj: &Bound<'_, PyAny>) -> PyResult<hc::TripPolicy> {
    if let Ok(t) = obj.cast::<ConsecutiveFailures>() {
        return Ok(t.get().inner);
    }
    if let Ok(t) = obj.cast::<FailuresInWindow>() {
        return Ok(t.get().inner);
    }
    if let Ok(t) = obj.cast::<FailureRate>() {
        return Ok(t.get().inner);
    }
    Err(convert::type_error(
        obj.py(),
        "breaker.trip",
        format!(
            "must be ConsecutiveFailures, FailuresInWindow or FailureRate, not {}",
            obj.get_type().name().map(|n| n.to_string()).unwrap_or_default()
        ),
    ))
}

// ---------------------------------------------------------------------------------------------
// Outcome

/// What happened to a call: `Outcome.SUCCESS`, `ANSWER` (reachable, not retryable: a 404),
/// `FAILURE`, `TIMEOUT`, `CANCELLED`, or `Outcome.retry_later(delay)`. Functions that take an
/// outcome also accept the names as strings (`"success"`, ...).
#[pyclass(frozen, module = "holdoff._holdoff")]
#[derive(Clone, Copy)]
pub struct Outcome {
    pub(crate) inner: hc::Outcome,
}

#[pymethods]
impl Outcome {
    #[classattr]
    const SUCCESS: Outcome = Outcome {
        inner: hc::Outcome::Success,
    };
    #[classattr]
    const ANSWER: Outcome = Outcome {
        inner: hc::Outcome::Answer,
    };
    #[classattr]
    const FAILURE: Outcome = Outcome {
        inner: hc::Outcome::Failure,
    };
    #[classattr]
    const TIMEOUT: Outcome = Outcome {
        inner: hc::Outcome::Timeout,
    };
    #[classattr]
    const CANCELLED: Outcome = Outcome {
        inner: hc::Outcome::Cancelled,
    };

    /// The upstream asked to be left alone for `delay` seconds (float or timedelta). A zero
    /// delay counts as a plain failure.
    #[staticmethod]
    fn retry_later(delay: &Bound<'_, PyAny>) -> PyResult<Outcome> {
        Ok(Outcome {
            inner: hc::Outcome::RetryLater(convert::duration_arg(delay, "delay")?),
        })
    }

    /// `"success"`, `"answer"`, `"failure"`, `"timeout"`, `"retry_later"` or `"cancelled"`.
    #[getter]
    fn name(&self) -> &'static str {
        hc::interop::OutcomeKind::of(&self.inner).name()
    }

    /// The retry-later delay in seconds, else `None`.
    #[getter]
    fn delay(&self) -> Option<f64> {
        match self.inner {
            hc::Outcome::RetryLater(d) => Some(secs_out(d)),
            _ => None,
        }
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.cast::<Outcome>().is_ok_and(|o| o.get().inner == self.inner)
    }

    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.inner.hash(&mut h);
        h.finish()
    }

    fn __repr__(&self) -> String {
        match self.inner {
            hc::Outcome::RetryLater(d) => format!("Outcome.retry_later({:?})", secs_out(d)),
            o => format!(
                "Outcome.{}",
                hc::interop::OutcomeKind::of(&o).name().to_uppercase()
            ),
        }
    }
}

/// An outcome argument: an `Outcome` or its name.
pub(crate) fn outcome_arg(obj: &Bound<'_, PyAny>) -> PyResult<hc::Outcome> {
    if let Ok(o) = obj.cast::<Outcome>() {
        return Ok(o.get().inner);
    }
    if let Ok(s) = obj.cast::<PyString>() {
        let name = s.to_cow()?;
        return Ok(match hc::interop::OutcomeKind::from_name(&name) {
            // A retry-later needs its delay: only `Outcome.retry_later(delay)` gives one.
            Some(k) if k != hc::interop::OutcomeKind::RetryLater => k.outcome(Duration::ZERO),
            _ => {
                let other = &*name;
                return Err(convert::input_type_error(
                    obj.py(),
                    "outcome",
                    format!(
                        "unknown outcome {other:?} (success, answer, failure, timeout, cancelled; \
                         Outcome.retry_later(delay) for a delay)"
                    ),
                ));
            }
        });
    }
    Err(convert::input_type_error(
        obj.py(),
        "outcome",
        format!(
            "must be a holdoff.Outcome or its name, not {}",
            obj.get_type().name().map(|n| n.to_string()).unwrap_or_default()
        ),
    ))
}

// ---------------------------------------------------------------------------------------------
// Permit

/// Leave to make one call, returned by `Breaker.allow()` / `Policy.before_attempt()`. Record it
/// exactly once; a second record raises `PermitError` (`permit_already_recorded`), a record on
/// another breaker raises `PermitError` (`foreign_permit`). A probe permit that is never recorded
/// holds its slot until the probe timeout.
#[pyclass(frozen, freelist = 64, module = "holdoff._holdoff")]
pub struct Permit {
    pub(crate) slot: hc::interop::PermitSlot,
}

#[pymethods]
impl Permit {
    /// The episode the call was admitted under (0 while closed).
    #[getter]
    fn episode(&self) -> u32 {
        self.slot.episode()
    }

    /// Whether the call is a probe of an open breaker.
    #[getter]
    fn probe(&self) -> bool {
        self.slot.is_probe()
    }

    /// Whether the permit was already recorded.
    #[getter]
    fn recorded(&self) -> bool {
        self.slot.is_taken()
    }

    fn __repr__(&self) -> String {
        format!(
            "Permit(episode={}, probe={}, recorded={})",
            self.episode(),
            if self.probe() { "True" } else { "False" },
            if self.recorded() { "True" } else { "False" }
        )
    }
}

pub(crate) fn take_permit(
    py: Python<'_>,
    permit: &Bound<'_, PyAny>,
    breaker: &hc::Breaker,
) -> PyResult<hc::Permit> {
    let p = permit.cast::<Permit>().map_err(|_| {
        convert::input_type_error(
            py,
            "permit",
            format!(
                "must be a holdoff.Permit, not {}",
                permit
                    .get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            ),
        )
    })?;
    p.get()
        .slot
        .take(breaker)
        .map_err(|e| convert::permit_error(py, e))
}

// ---------------------------------------------------------------------------------------------
// Snapshot and events

/// A side-effect-free view of a breaker (times in seconds).
#[pyclass(frozen, module = "holdoff._holdoff")]
pub struct Snapshot {
    #[pyo3(get)]
    state: &'static str,
    #[pyo3(get)]
    episode: u32,
    #[pyo3(get)]
    failures: u64,
    #[pyo3(get)]
    recoveries: u32,
    #[pyo3(get)]
    probes_in_flight: u32,
    #[pyo3(get)]
    retry_after: Option<f64>,
    #[pyo3(get)]
    probe_ready: bool,
    #[pyo3(get)]
    interval: Option<f64>,
    #[pyo3(get)]
    opens: u64,
    #[pyo3(get)]
    closes: u64,
    #[pyo3(get)]
    probes: u64,
    #[pyo3(get)]
    refusals: u64,
    #[pyo3(get)]
    stale_answers: u64,
    #[pyo3(get)]
    events_dropped: u64,
}

impl From<hc::Snapshot> for Snapshot {
    fn from(s: hc::Snapshot) -> Self {
        Snapshot {
            state: s.state.name(),
            episode: s.episode,
            failures: s.failures,
            recoveries: s.recoveries,
            probes_in_flight: s.probes_in_flight,
            retry_after: opt_secs(s.retry_after),
            probe_ready: s.probe_ready,
            interval: opt_secs(s.interval),
            opens: s.opens,
            closes: s.closes,
            probes: s.probes,
            refusals: s.refusals,
            stale_answers: s.stale_answers,
            events_dropped: s.events_dropped,
        }
    }
}

impl Snapshot {
    fn fields(&self, py: Python<'_>) -> PyResult<Vec<(&'static str, Py<PyAny>)>> {
        Ok(vec![
            ("state", self.state.into_pyobject(py)?.into_any().unbind()),
            ("episode", self.episode.into_pyobject(py)?.into_any().unbind()),
            ("failures", self.failures.into_pyobject(py)?.into_any().unbind()),
            (
                "recoveries",
                self.recoveries.into_pyobject(py)?.into_any().unbind(),
            ),
            (
                "probes_in_flight",
                self.probes_in_flight.into_pyobject(py)?.into_any().unbind(),
            ),
            (
                "retry_after",
                self.retry_after.into_pyobject(py)?.into_any().unbind(),
            ),
            (
                "probe_ready",
                self.probe_ready.into_pyobject(py)?.to_owned().into_any().unbind(),
            ),
            ("interval", self.interval.into_pyobject(py)?.into_any().unbind()),
            ("opens", self.opens.into_pyobject(py)?.into_any().unbind()),
            ("closes", self.closes.into_pyobject(py)?.into_any().unbind()),
            ("probes", self.probes.into_pyobject(py)?.into_any().unbind()),
            ("refusals", self.refusals.into_pyobject(py)?.into_any().unbind()),
            (
                "stale_answers",
                self.stale_answers.into_pyobject(py)?.into_any().unbind(),
            ),
            (
                "events_dropped",
                self.events_dropped.into_pyobject(py)?.into_any().unbind(),
            ),
        ])
    }
}

#[pymethods]
impl Snapshot {
    /// The fields as a dict.
    fn as_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, v) in self.fields(py)? {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        let Ok(o) = other.cast::<Snapshot>() else {
            return Ok(false);
        };
        self.as_dict(py)?.eq(o.get().as_dict(py)?)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let mut parts = Vec::new();
        for (k, v) in self.fields(py)? {
            parts.push(format!("{k}={}", v.bind(py).repr()?));
        }
        Ok(format!("Snapshot({})", parts.join(", ")))
    }
}

/// One state change: when (`at`, seconds on the breaker's clock), from and to which state, the
/// episode after it, why, and for openings the provider's requested delay and the time until the
/// first probe (seconds).
#[pyclass(frozen, module = "holdoff._holdoff")]
pub struct StateChange {
    #[pyo3(get)]
    at: f64,
    #[pyo3(get)]
    from_state: &'static str,
    #[pyo3(get)]
    to_state: &'static str,
    #[pyo3(get)]
    episode: u32,
    #[pyo3(get)]
    reason: &'static str,
    #[pyo3(get)]
    requested_delay: Option<f64>,
    #[pyo3(get)]
    open_for: Option<f64>,
}

impl From<&hc::StateChange> for StateChange {
    fn from(e: &hc::StateChange) -> Self {
        StateChange {
            at: e.at.as_nanos() as f64 / 1e9,
            from_state: e.from.name(),
            to_state: e.to.name(),
            episode: e.episode,
            reason: e.reason.name(),
            requested_delay: opt_secs(e.requested_delay),
            open_for: opt_secs(e.open_for),
        }
    }
}

#[pymethods]
impl StateChange {
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.cast::<StateChange>().is_ok_and(|o| {
            let o = o.get();
            o.at == self.at
                && o.from_state == self.from_state
                && o.to_state == self.to_state
                && o.episode == self.episode
                && o.reason == self.reason
                && o.requested_delay == self.requested_delay
                && o.open_for == self.open_for
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "StateChange(at={:?}, from_state='{}', to_state='{}', episode={}, reason='{}', \
             requested_delay={}, open_for={})",
            self.at,
            self.from_state,
            self.to_state,
            self.episode,
            self.reason,
            fmt_opt(self.requested_delay),
            fmt_opt(self.open_for)
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Breaker

fn effect_str<'py>(py: Python<'py>, e: hc::Effect) -> Bound<'py, PyString> {
    match e {
        hc::Effect::Counted => intern!(py, "counted").clone(),
        hc::Effect::Stale => intern!(py, "stale").clone(),
        hc::Effect::Ignored => intern!(py, "ignored").clone(),
    }
}

/// Builds a breaker configuration from the constructor's keyword arguments.
#[allow(clippy::too_many_arguments)]
pub(crate) fn breaker_config(
    trip: Option<&Bound<'_, PyAny>>,
    open_interval: Option<&Bound<'_, PyAny>>,
    recoveries: Option<&Bound<'_, PyAny>>,
    max_probes_in_flight: Option<&Bound<'_, PyAny>>,
    probe_timeout: Option<&Bound<'_, PyAny>>,
    max_retry_later: Option<&Bound<'_, PyAny>>,
    seed: Option<&Bound<'_, PyAny>>,
    py: Python<'_>,
) -> PyResult<hc::BreakerConfig> {
    let mut c = hc::BreakerConfig::default();
    if let Some(t) = trip.filter(|o| !o.is_none()) {
        c.trip = trip_arg(t)?;
    }
    if let Some(b) = open_interval.filter(|o| !o.is_none()) {
        c.open_interval = b
            .cast::<Backoff>()
            .map_err(|_| {
                convert::type_error(
                    py,
                    "breaker.open_interval",
                    "must be a holdoff.Backoff".to_owned(),
                )
            })?
            .get()
            .inner;
    }
    if let Some(v) = recoveries {
        c.recoveries = convert::whole(v, "breaker.recoveries")?;
    }
    if let Some(v) = max_probes_in_flight {
        c.max_probes_in_flight = convert::whole(v, "breaker.max_probes_in_flight")?;
    }
    c.probe_timeout = convert::opt_duration(probe_timeout, "breaker.probe_timeout")?;
    if let Some(v) = max_retry_later {
        c.max_retry_later = convert::duration(v, "breaker.max_retry_later")?;
    }
    if let Some(v) = seed {
        c.seed = convert::seed(v, "breaker.seed")?;
    }
    c.validate().map_err(|e| convert::config_error(py, e))?;
    Ok(c)
}

type ListenerCell = Arc<Mutex<Option<Py<PyAny>>>>;

/// A breaker's fleet and the configuration it was built with, boxed: most breakers have no
/// fleet, and inline the two would add about 200 bytes to every breaker object.
struct FleetParts {
    fleet: holdoff_fleet::Fleet,
    config: hc::fleet::FleetConfig,
}

/// A circuit breaker for one upstream. Safe to share between threads.
///
/// Keyword arguments (durations in seconds, float or timedelta): `trip` (a trip policy, default
/// `ConsecutiveFailures(5)`), `open_interval` (a `Backoff`, default 30 s doubling to 300 s),
/// `recoveries` (3), `max_probes_in_flight` (1), `probe_timeout` (None: the open interval),
/// `max_retry_later` (300 s), `seed` (0), `clock` (a `ManualClock`/`SystemClock`), `fleet` (a
/// `FleetConfig` or a dict of its options: the breaker shares its open episodes, probes and
/// recoveries with every breaker of the same fleet key; see `FleetConfig`).
/// Raises `InvalidConfigError`/`ConfigTypeError` naming the field.
///
/// With a fleet the breaker owns it: `close()` (or `with breaker:`, or freeing the breaker)
/// stops its background threads and closes its connections.
#[pyclass(frozen, weakref, module = "holdoff._holdoff")]
pub struct Breaker {
    pub(crate) inner: Arc<hc::Breaker>,
    // Made by the first `on_state_change`: a breaker without a callback allocates none.
    listener: OnceLock<ListenerCell>,
    // The fleet this breaker shares, owned: closed by `close()`, and at the latest when the
    // breaker is freed (see `Drop`).
    fleet: Option<Box<FleetParts>>,
}

impl Breaker {
    pub(crate) fn wrap(inner: Arc<hc::Breaker>) -> Breaker {
        Breaker {
            inner,
            listener: OnceLock::new(),
            fleet: None,
        }
    }

    fn fleet(&self) -> Option<&holdoff_fleet::Fleet> {
        self.fleet.as_deref().map(|f| &f.fleet)
    }
}

impl Drop for Breaker {
    fn drop(&mut self) {
        // Joining the fleet's threads with the GIL held would deadlock with a thread waiting
        // for it to run a state-change callback: close with the GIL released.
        if let Some(f) = self.fleet() {
            Python::attach(|py| crate::fleet::close(py, f));
        }
    }
}

#[pymethods]
impl Breaker {
    #[new]
    #[pyo3(signature = (*, trip = None, open_interval = None, recoveries = None,
                        max_probes_in_flight = None, probe_timeout = None,
                        max_retry_later = None, seed = None, clock = None, fleet = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        trip: Option<&Bound<'_, PyAny>>,
        open_interval: Option<&Bound<'_, PyAny>>,
        recoveries: Option<&Bound<'_, PyAny>>,
        max_probes_in_flight: Option<&Bound<'_, PyAny>>,
        probe_timeout: Option<&Bound<'_, PyAny>>,
        max_retry_later: Option<&Bound<'_, PyAny>>,
        seed: Option<&Bound<'_, PyAny>>,
        clock: Option<&Bound<'_, PyAny>>,
        fleet: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let config = breaker_config(
            trip,
            open_interval,
            recoveries,
            max_probes_in_flight,
            probe_timeout,
            max_retry_later,
            seed,
            py,
        )?;
        let fleet_config = crate::fleet::fleet_arg(fleet)?;
        let clock = clock_arg(clock)?;
        let inner = Arc::new(hc::Breaker::new(config, clock).map_err(|e| convert::config_error(py, e))?);
        let fleet = match fleet_config {
            Some(config) => Some(Box::new(FleetParts {
                fleet: crate::fleet::attach(py, &inner, &config)?,
                config,
            })),
            None => None,
        };
        Ok(Breaker {
            inner,
            listener: OnceLock::new(),
            fleet,
        })
    }

    /// One tick of the breaker's fleet now, as its background thread does (with `memory://`
    /// there is none: this is the only tick): send what the breaker has for the fleet, one
    /// exchange with the store (bounded by the fleet's `timeout`), apply the shared record.
    /// Returns a `FleetSync`; a store that fails shows in it (`ok=False`, `error`), never as an
    /// exception. Raises `FleetError` when the breaker has no fleet or it was closed. Meant for
    /// tests and conformance runners: a Redis fleet syncs by itself.
    fn sync_fleet(&self, py: Python<'_>) -> PyResult<crate::fleet::FleetSync> {
        let Some(f) = self.fleet() else {
            return Err(crate::fleet::fleet_error(
                py,
                "this breaker has no fleet".to_owned(),
            ));
        };
        crate::fleet::sync(py, f)
    }

    /// The fleet configuration the breaker was built with, else `None`.
    #[getter]
    #[pyo3(name = "fleet")]
    fn fleet_config(&self) -> Option<crate::fleet::FleetConfig> {
        self.fleet.as_deref().map(|f| crate::fleet::FleetConfig {
            inner: f.config.clone(),
        })
    }

    /// Whether the breaker follows its fleet now: `False` without a fleet, after `close()`,
    /// and while detached (no successful sync for the fleet's `fallback_after`).
    #[getter]
    fn fleet_attached(&self) -> bool {
        self.fleet().is_some_and(|f| f.is_attached())
    }

    /// Closes the breaker's fleet: its background threads stopped and joined, its connections
    /// closed; the breaker goes on as a purely local breaker. Idempotent; nothing to do without
    /// a fleet. Freeing the breaker does the same.
    fn close(&self, py: Python<'_>) {
        if let Some(f) = self.fleet() {
            crate::fleet::close(py, f);
        }
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Closes the fleet (`close()`); exceptions propagate.
    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) {
        self.close(py);
    }

    /// Asks to make a call: returns a `Permit`, or raises `BreakerOpenError` (with `retry_after`
    /// seconds, `None` while forced open). Admission is the only act: there is no separate
    /// "ready?" check that could spend a probe. Reads no clock while closed.
    fn allow(&self, py: Python<'_>) -> PyResult<Permit> {
        match self.inner.allow() {
            Ok(p) => Ok(Permit {
                slot: hc::interop::PermitSlot::new(p),
            }),
            Err(r) => Err(convert::breaker_open(py, r)),
        }
    }

    /// Records the outcome of a permitted call; returns `"counted"`, `"stale"` (an answer from
    /// an earlier episode or a lost probe: kept in metrics, moves nothing) or `"ignored"` (a
    /// cancelled call). Raises `PermitError` for a second record or another breaker's permit.
    fn record<'py>(
        &self,
        py: Python<'py>,
        permit: &Bound<'py, PyAny>,
        outcome: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyString>> {
        let outcome = outcome_arg(outcome)?;
        let permit = take_permit(py, permit, &self.inner)?;
        let effect = self
            .inner
            .record(permit, outcome)
            .map_err(|e| convert::permit_error(py, e))?;
        Ok(effect_str(py, effect))
    }

    /// A side-effect-free view (reads the clock once).
    fn snapshot(&self) -> Snapshot {
        self.inner.snapshot().into()
    }

    /// This breaker's series (docs/metrics.md) as a list of `MetricReading`: the state gauge
    /// (one reading per state, 1.0 for the current one), admitted, refused, outcomes by kind,
    /// stale answers, probes and transitions by reason, zeros included. The first call starts
    /// counting (calls before it are not counted); later calls only read. No clock is read.
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let mut out = Vec::with_capacity(32);
        self.inner.metrics(&mut out);
        crate::metrics::readings(py, &out)
    }

    /// The current state: `"closed"`, `"open"`, `"half_open"`, `"forced_open"`, `"disabled"`.
    #[getter]
    fn state(&self) -> &'static str {
        self.inner.snapshot().state.name()
    }

    /// Opens the breaker until `reset()`; refuses every call with `retry_after=None`.
    fn force_open(&self) {
        self.inner.force_open();
    }

    /// Admits every call and never trips until `reset()`; outcomes are still counted.
    fn disable(&self) {
        self.inner.disable();
    }

    /// Back to closed with fresh counts; answers to older permits become stale.
    fn reset(&self) {
        self.inner.reset();
    }

    /// The state changes since the last call (at most 1024 are kept; see
    /// `Snapshot.events_dropped`).
    fn drain_events(&self) -> Vec<StateChange> {
        self.inner.drain_events().iter().map(StateChange::from).collect()
    }

    /// Calls `callback(event: StateChange)` after every state change, outside the breaker's
    /// lock: the callback may call back into the breaker. `None` removes it. An exception in the
    /// callback goes to `sys.unraisablehook` and does not affect the breaker.
    fn on_state_change(&self, callback: Option<Bound<'_, PyAny>>) -> PyResult<()> {
        let callback = callback.filter(|c| !c.is_none());
        if let Some(c) = &callback {
            convert::callable(c, "callback")?;
        }
        let has = callback.is_some();
        let old = match self.listener.get() {
            None if !has => None,
            _ => std::mem::replace(
                &mut *self
                    .listener
                    .get_or_init(ListenerCell::default)
                    .lock()
                    .unwrap_or_else(|e| e.into_inner()),
                callback.map(Bound::unbind),
            ),
        };
        // Dropped after the lock is released: the old callback's finalizer may run Python code.
        drop(old);
        if !has {
            self.inner.set_listener(None);
            return Ok(());
        }
        let Some(listener) = self.listener.get() else {
            return Ok(()); // unreachable: made above for a callback
        };
        let cell = Arc::clone(listener);
        self.inner
            .set_listener(Some(Arc::new(move |ev: &hc::StateChange| {
                Python::attach(|py| {
                    // Clone the callback out of the cell so the callback may replace itself.
                    let cb = cell
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .as_ref()
                        .map(|c| c.clone_ref(py));
                    if let Some(cb) = cb {
                        let result = Py::new(py, StateChange::from(ev)).and_then(|e| cb.call1(py, (e,)));
                        if let Err(err) = result {
                            err.write_unraisable(py, Some(cb.bind(py)));
                        }
                    }
                })
            })));
        Ok(())
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        if let Some(Ok(guard)) = self.listener.get().map(|l| l.try_lock()) {
            if let Some(cb) = guard.as_ref() {
                visit.call(cb)?;
            }
        }
        Ok(())
    }

    fn __clear__(&self) {
        self.inner.set_listener(None);
        let old = self
            .listener
            .get()
            .and_then(|l| l.lock().ok())
            .and_then(|mut g| g.take());
        drop(old);
    }

    fn __repr__(&self) -> String {
        let s = self.inner.snapshot();
        format!("Breaker(state='{}', episode={})", s.state.name(), s.episode)
    }
}

// ---------------------------------------------------------------------------------------------
// Group

/// Counts of a `BreakerGroup`, read without side effects: `keys` (breakers kept now),
/// `max_keys` (the bound), `evictions` (idle breakers evicted to make room) and `overflows`
/// (breakers handed out without being kept, because nothing could be evicted).
#[pyclass(frozen, module = "holdoff._holdoff")]
pub struct GroupSnapshot {
    #[pyo3(get)]
    keys: usize,
    #[pyo3(get)]
    max_keys: usize,
    #[pyo3(get)]
    evictions: u64,
    #[pyo3(get)]
    overflows: u64,
}

#[pymethods]
impl GroupSnapshot {
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.cast::<GroupSnapshot>().is_ok_and(|o| {
            let o = o.get();
            (o.keys, o.max_keys, o.evictions, o.overflows)
                == (self.keys, self.max_keys, self.evictions, self.overflows)
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "GroupSnapshot(keys={}, max_keys={}, evictions={}, overflows={})",
            self.keys, self.max_keys, self.evictions, self.overflows
        )
    }
}

/// Breakers keyed by upstream (host, registry, provider, tenant), made lazily from one template
/// (the same keyword arguments as `Breaker`) and bounded by `max_keys` (default 10 000,
/// 1..100 000 000; `InvalidConfigError` naming `group.max_keys`). Each key's breaker gets the
/// template's seed mixed with the key, so a fleet of breakers does not probe in lockstep.
///
/// A new key at a full group evicts the least recently used idle breaker (closed, no failure
/// counted); when none is idle it gets an overflow breaker the group does not keep, so no call
/// fails because the group is full. `get` (and `group[key]`) marks a key used; `peek` does not.
/// Ask the group for the breaker of each call rather than keeping one: a kept breaker may be
/// evicted while idle, and the next `get` of its key makes a fresh one. Groups stay local: a
/// `fleet` is refused (`InvalidConfigError` naming `fleet`).
#[pyclass(frozen, module = "holdoff._holdoff", mapping)]
pub struct BreakerGroup {
    inner: hc::BreakerGroup,
    // The Python wrapper of each breaker the group keeps, so that `group[key]` is one object
    // (with its state-change callback) for as long as the core keeps that breaker. An entry is
    // handed out only while it wraps the breaker the core holds for its key now; entries of
    // evicted keys are swept once they outnumber half the kept ones (amortised O(1) per
    // eviction), so the cache stays within 1.5 times the group's size.
    wrappers: Mutex<HashMap<String, Py<Breaker>>>,
}

/// Entries of evicted keys tolerated before a sweep, on top of half the kept ones.
const STALE_SLACK: usize = 16;

impl BreakerGroup {
    /// The wrapper of `core`, the breaker the core handed out for `key`: cached while the group
    /// keeps that breaker; an overflow breaker (not kept) is wrapped afresh.
    fn wrapper(&self, py: Python<'_>, key: &str, core: Arc<hc::Breaker>) -> PyResult<Py<Breaker>> {
        if let Some(w) = self.lock().get(key) {
            if Arc::ptr_eq(&w.get().inner, &core) {
                return Ok(w.clone_ref(py));
            }
        }
        let kept = self.inner.peek(key).is_some_and(|b| Arc::ptr_eq(&b, &core));
        // Allocate and drop Python objects without holding the map's lock: an allocation may run
        // the garbage collector, and a finalizer may call back into this group.
        let fresh = Py::new(py, Breaker::wrap(Arc::clone(&core)))?;
        let (w, unused, sweep) = {
            let mut map = self.lock();
            if !kept {
                // The key's entry, if any, wraps a breaker the group no longer keeps.
                (fresh, map.remove(key), false)
            } else {
                match map.get(key) {
                    Some(existing) if Arc::ptr_eq(&existing.get().inner, &core) => {
                        (existing.clone_ref(py), Some(fresh), false)
                    }
                    _ => {
                        let old = map.insert(key.to_owned(), fresh.clone_ref(py));
                        let sweep = map.len() > STALE_SLACK && {
                            let kept_now = self.inner.len();
                            map.len().saturating_sub(kept_now) > kept_now / 2 + STALE_SLACK
                        };
                        (fresh, old, sweep)
                    }
                }
            }
        };
        drop(unused);
        if sweep {
            self.sweep();
        }
        Ok(w)
    }

    // Drops the wrappers of breakers the core no longer keeps.
    fn sweep(&self) {
        let stale: Vec<Py<Breaker>> = {
            let mut map = self.lock();
            let keys: Vec<String> = map
                .iter()
                .filter(|(k, w)| {
                    !self
                        .inner
                        .peek(k)
                        .is_some_and(|b| Arc::ptr_eq(&b, &w.get().inner))
                })
                .map(|(k, _)| k.clone())
                .collect();
            keys.iter().filter_map(|k| map.remove(k)).collect()
        };
        drop(stale);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Py<Breaker>>> {
        self.wrappers.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[pymethods]
impl BreakerGroup {
    #[new]
    #[pyo3(signature = (*, trip = None, open_interval = None, recoveries = None,
                        max_probes_in_flight = None, probe_timeout = None,
                        max_retry_later = None, seed = None, max_keys = None, clock = None,
                        fleet = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        trip: Option<&Bound<'_, PyAny>>,
        open_interval: Option<&Bound<'_, PyAny>>,
        recoveries: Option<&Bound<'_, PyAny>>,
        max_probes_in_flight: Option<&Bound<'_, PyAny>>,
        probe_timeout: Option<&Bound<'_, PyAny>>,
        max_retry_later: Option<&Bound<'_, PyAny>>,
        seed: Option<&Bound<'_, PyAny>>,
        max_keys: Option<&Bound<'_, PyAny>>,
        clock: Option<&Bound<'_, PyAny>>,
        fleet: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let config = breaker_config(
            trip,
            open_interval,
            recoveries,
            max_probes_in_flight,
            probe_timeout,
            max_retry_later,
            seed,
            py,
        )?;
        // Accepted so that a group refuses a fleet as every language does (groups stay local),
        // after the fleet's own checks.
        if crate::fleet::fleet_arg(fleet)?.is_some() {
            return Err(crate::fleet::refused(py, "fleet", "not supported with a group"));
        }
        let max_keys = match max_keys.filter(|o| !o.is_none()) {
            // Out-of-range ints saturate (negative to 0), so the core refuses them by its rule.
            Some(v) => {
                let v = convert::int(v, "group.max_keys")?;
                usize::try_from(v.max(0)).unwrap_or(usize::MAX)
            }
            None => hc::group::DEFAULT_MAX_KEYS,
        };
        let clock = clock_arg(clock)?;
        let inner = hc::BreakerGroup::with_max_keys(config, max_keys, clock)
            .map_err(|e| convert::config_error(py, e))?;
        Ok(BreakerGroup {
            inner,
            wrappers: Mutex::new(HashMap::new()),
        })
    }

    /// The breaker for `key`, created on first use, and marked most recently used. The same
    /// object while the group keeps that breaker; an overflow breaker (a full group with nothing
    /// idle to evict) is a fresh one every time.
    fn get(&self, py: Python<'_>, key: &str) -> PyResult<Py<Breaker>> {
        let core = self.inner.get(key);
        self.wrapper(py, key, core)
    }

    fn __getitem__(&self, py: Python<'_>, key: &str) -> PyResult<Py<Breaker>> {
        self.get(py, key)
    }

    /// The breaker for `key` if the group keeps one, without creating it or marking it used.
    fn peek(&self, py: Python<'_>, key: &str) -> PyResult<Option<Py<Breaker>>> {
        match self.inner.peek(key) {
            Some(core) => self.wrapper(py, key, core).map(Some),
            None => Ok(None),
        }
    }

    /// Keys with a breaker, sorted.
    fn keys(&self) -> Vec<String> {
        self.inner.keys()
    }

    /// The bound on the number of breakers kept.
    #[getter]
    fn max_keys(&self) -> usize {
        self.inner.max_keys()
    }

    /// The group's series (docs/metrics.md) as a list of `MetricReading`: breakers kept (a
    /// gauge) and evictions, then every kept breaker's series (`Breaker.metrics`) with the
    /// attribute `upstream` set to its key, keys sorted. The first call starts counting on every
    /// breaker the group keeps or makes from then on.
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let m = self.inner.metrics();
        crate::metrics::group_readings(py, &m)
    }

    /// Counts: breakers kept, the bound, evictions and overflows so far.
    fn snapshot(&self) -> GroupSnapshot {
        let s = self.inner.snapshot();
        GroupSnapshot {
            keys: s.keys,
            max_keys: s.max_keys,
            evictions: s.evictions,
            overflows: s.overflows,
        }
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __contains__(&self, key: &Bound<'_, PyAny>) -> bool {
        key.extract::<String>()
            .is_ok_and(|k| self.inner.peek(&k).is_some())
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        if let Ok(map) = self.wrappers.try_lock() {
            for w in map.values() {
                visit.call(w)?;
            }
        }
        Ok(())
    }

    fn __clear__(&self) {
        let old = self.wrappers.lock().map(|mut m| std::mem::take(&mut *m)).ok();
        drop(old);
    }

    fn __repr__(&self) -> String {
        let s = self.inner.snapshot();
        format!("BreakerGroup(keys={}, max_keys={})", s.keys, s.max_keys)
    }
}
