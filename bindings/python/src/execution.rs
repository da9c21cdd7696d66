//! One logical call's retry loop: the core's `Execution` state machine, stepped from Python.
//! The helpers of `holdoff._retrying` (decorators, `call`, `call_async`, attempt iterators) are
//! one loop per flavour over it; every decision (admit, wait, give up, what the caller gets) is
//! the core's.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use holdoff as hc;
use holdoff::interop::Coded;
use pyo3::gc::PyVisit;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyString;
use pyo3::{intern, PyTraverseError};

use crate::breaker::{outcome_arg, Outcome};
use crate::convert::{self, secs_out};
use crate::http;
use crate::policy::Policy;

fn fmt_opt(v: Option<f64>) -> String {
    v.map_or_else(|| "None".to_owned(), |x| format!("{x:?}"))
}

/// `Execution.next_step()`: make attempt `number` now (`probe`: whether it probes an open
/// breaker), within `time_limit` seconds (`None`: no limit), then report it with `complete` or
/// `complete_response`.
#[pyclass(frozen, freelist = 64, module = "holdoff._holdoff")]
pub struct AttemptPlan {
    #[pyo3(get)]
    number: u32,
    #[pyo3(get)]
    probe: bool,
    #[pyo3(get)]
    time_limit: Option<f64>,
}

#[pymethods]
impl AttemptPlan {
    fn __repr__(&self) -> String {
        format!(
            "AttemptPlan(number={}, probe={}, time_limit={})",
            self.number,
            if self.probe { "True" } else { "False" },
            fmt_opt(self.time_limit)
        )
    }
}

/// A wait before the next attempt (what a `before_sleep` hook is shown): after `attempts`
/// attempts, sleep `delay` seconds (never negative, never shorter than the server asked, up to
/// the budget's cap), from `source` (`"backoff"`, `"retry_after"`, `"breaker"`); `capped` when
/// the cap shortened the server's delay `server_delay` (seconds, `None` without one). Then call
/// `next_step()`.
#[pyclass(frozen, freelist = 64, module = "holdoff._holdoff")]
pub struct WaitPlan {
    #[pyo3(get)]
    attempts: u32,
    #[pyo3(get)]
    delay: f64,
    source: hc::WaitSource,
    #[pyo3(get)]
    capped: bool,
    #[pyo3(get)]
    server_delay: Option<f64>,
}

fn source_name<'py>(py: Python<'py>, s: hc::WaitSource) -> Bound<'py, PyString> {
    match s {
        hc::WaitSource::Backoff => intern!(py, "backoff").clone(),
        hc::WaitSource::RetryAfter => intern!(py, "retry_after").clone(),
        hc::WaitSource::Breaker => intern!(py, "breaker").clone(),
    }
}

#[pymethods]
impl WaitPlan {
    #[getter]
    fn source<'py>(&self, py: Python<'py>) -> Bound<'py, PyString> {
        source_name(py, self.source)
    }

    fn __repr__(&self) -> String {
        format!(
            "WaitPlan(attempts={}, delay={:?}, source='{}', capped={}, server_delay={})",
            self.attempts,
            self.delay,
            self.source.name(),
            if self.capped { "True" } else { "False" },
            fmt_opt(self.server_delay)
        )
    }
}

/// How the call ended. `kind`: `"return"` (return the last attempt's value), `"rethrow"`
/// (re-raise its exception unchanged: a final answer raised, a programming error, an exception
/// classified as a success), `"breaker_open"`, `"give_up"`, `"cancelled"` (propagate the
/// caller's cancellation) or `"invalid_input"` (the last response's status was not a status).
/// `attempts` made; `reason` (a give-up reason; `"not_retryable"` for a final answer raised;
/// `"breaker_open"` for a refusal); `retry_after` (seconds until trying again could help: the
/// breaker's next probe, or the server's delay), `server_delay` (the server's own delay,
/// seconds) and `capped` (whether it was above the budget's cap).
#[pyclass(frozen, freelist = 64, module = "holdoff._holdoff")]
pub struct Verdict {
    inner: hc::Verdict,
}

fn verdict(py: Python<'_>, v: hc::Verdict) -> PyResult<Py<Verdict>> {
    // The common end of a call, a first attempt's success, is one shared object.
    static RETURNED_FIRST: PyOnceLock<Py<Verdict>> = PyOnceLock::new();
    if let hc::Verdict::Return { attempts: 1 } = v {
        return Ok(RETURNED_FIRST
            .get_or_try_init(py, || Py::new(py, Verdict { inner: v }))?
            .clone_ref(py));
    }
    Py::new(py, Verdict { inner: v })
}

#[pymethods]
impl Verdict {
    #[getter]
    fn kind<'py>(&self, py: Python<'py>) -> Bound<'py, PyString> {
        match self.inner {
            hc::Verdict::Return { .. } => intern!(py, "return").clone(),
            hc::Verdict::Rethrow { .. } => intern!(py, "rethrow").clone(),
            hc::Verdict::BreakerOpen { .. } => intern!(py, "breaker_open").clone(),
            hc::Verdict::GiveUp(_) => intern!(py, "give_up").clone(),
            hc::Verdict::Cancelled { .. } => intern!(py, "cancelled").clone(),
            hc::Verdict::InvalidInput { .. } => intern!(py, "invalid_input").clone(),
        }
    }

    #[getter]
    fn attempts(&self) -> u32 {
        self.inner.attempts()
    }

    #[getter]
    fn reason(&self) -> Option<&'static str> {
        match self.inner {
            hc::Verdict::Rethrow { reason, .. } => reason.map(|r| r.name()),
            hc::Verdict::BreakerOpen { .. } => Some(hc::GiveUpReason::BreakerOpen.name()),
            hc::Verdict::GiveUp(g) => Some(g.reason.name()),
            _ => None,
        }
    }

    #[getter]
    fn retry_after(&self) -> Option<f64> {
        match self.inner {
            hc::Verdict::BreakerOpen { retry_after, .. } => retry_after.map(secs_out),
            hc::Verdict::GiveUp(g) => g.retry_after.map(secs_out),
            _ => None,
        }
    }

    #[getter]
    fn server_delay(&self) -> Option<f64> {
        match self.inner {
            hc::Verdict::GiveUp(g) => g.server_delay.map(secs_out),
            _ => None,
        }
    }

    #[getter]
    fn capped(&self) -> bool {
        matches!(self.inner, hc::Verdict::GiveUp(g) if g.capped)
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.cast::<Verdict>().is_ok_and(|o| o.get().inner == self.inner)
    }

    fn __repr__(&self) -> String {
        let kind = hc::interop::VerdictKind::of(&self.inner).name();
        match self.inner {
            hc::Verdict::BreakerOpen {
                attempts,
                retry_after,
            } => format!(
                "Verdict(kind='{kind}', attempts={attempts}, retry_after={})",
                fmt_opt(retry_after.map(secs_out))
            ),
            hc::Verdict::GiveUp(g) => format!(
                "Verdict(kind='{kind}', attempts={}, reason='{}', retry_after={}, \
                 server_delay={}, capped={})",
                g.attempts,
                g.reason.name(),
                fmt_opt(g.retry_after.map(secs_out)),
                fmt_opt(g.server_delay.map(secs_out)),
                if g.capped { "True" } else { "False" }
            ),
            v => format!("Verdict(kind='{kind}', attempts={})", v.attempts()),
        }
    }
}

/// A time limit argument: absent (the core's default), `None` (no limit), or seconds.
pub(crate) enum LimitArg<'py> {
    Default,
    Given(Bound<'py, PyAny>),
}

impl<'a, 'py> FromPyObject<'a, 'py> for LimitArg<'py> {
    type Error = PyErr;

    fn extract(obj: pyo3::Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(LimitArg::Given(obj.to_owned()))
    }
}

fn limit(arg: &LimitArg<'_>, default: Option<Duration>, field: &str) -> PyResult<Option<Duration>> {
    match arg {
        LimitArg::Default => Ok(default),
        LimitArg::Given(v) => convert::opt_duration(Some(v), field),
    }
}

/// One logical call's retry loop over a `Policy` (the core's `Execution`), driven by its
/// caller:
///
/// ```text
/// step = ex.next_step()
/// AttemptPlan: run the operation once within step.time_limit, then
///              step = ex.complete("returned" | "raised", outcome) / ex.complete("cancelled")
///                     / ex.complete("bug") / ex.complete_response(status, headers)
/// WaitPlan:    sleep step.delay, then step = ex.next_step()  (the caller cancelled: ex.cancel())
/// Verdict:     the call is over; turn it into a return value or an exception
/// ```
///
/// `attempt_timeout` (seconds, float or timedelta; default `None`: no limit) bounds each
/// attempt, `total_timeout` (default 60 s; `None`: only the budget bounds the call) the whole
/// call, waits included; a limit must be greater than 0 (`InvalidConfigError` naming
/// `execute.attempt_timeout` / `execute.total_timeout`). A step out of order raises
/// `InvalidInputError` naming `execution`. One caller drives an execution, one step at a time: a
/// step taken while another runs (from a breaker's state-change callback, or another thread)
/// raises `InvalidInputError` naming `execution` and changes nothing; the getters meanwhile show the
/// execution as it was when the running step began. An execution never stepped is no call (its
/// policy's metrics count nothing for it). An execution dropped during an attempt
/// records it as cancelled, so a probe is never held by a lost call.
#[pyclass(frozen, module = "holdoff._holdoff")]
pub struct Execution {
    cell: Mutex<Cell>,
    config: hc::ExecutionConfig,
    policy: Py<Policy>,
}

/// The core's execution, taken out for the length of one step so that no lock is held while the
/// core runs (the breaker's state-change callback is Python code called from inside a step).
struct Cell {
    // `None` while a step has it out.
    inner: Option<Core>,
    // What the getters show while a step has it out: the figures when that step began.
    seen: Seen,
}

/// The core's execution is made at the first step: one never stepped (a helper's template, an
/// object made and dropped) is no call, where the core's, dropped unfinished, would count as a
/// call cancelled in the metrics.
// Unboxed: the cell holds one for the object's life, and boxing would allocate once per call.
#[allow(clippy::large_enum_variant)]
enum Core {
    Unmade,
    Made(hc::Execution<Arc<hc::Policy>>),
}

impl Core {
    fn seen(&self) -> Seen {
        match self {
            Core::Made(e) => Seen::of(e),
            Core::Unmade => Seen::UNSTARTED,
        }
    }
}

#[derive(Clone, Copy)]
struct Seen {
    attempts: u32,
    last_outcome: Option<hc::Outcome>,
    verdict: Option<hc::Verdict>,
}

impl Seen {
    const UNSTARTED: Seen = Seen {
        attempts: 0,
        last_outcome: None,
        verdict: None,
    };

    fn of(e: &hc::Execution<Arc<hc::Policy>>) -> Self {
        Seen {
            attempts: e.attempts(),
            last_outcome: e.last_outcome(),
            verdict: e.verdict(),
        }
    }
}

const IN_USE: &str = "in use by another step (a breaker's state-change callback, or another \
                      thread): one caller drives an execution, one step at a time";

fn step_out(py: Python<'_>, step: hc::Step) -> PyResult<Py<PyAny>> {
    // The common start of a call, the first attempt under the default limits, is one shared
    // object (a plan is immutable).
    static FIRST_BY_DEFAULT: PyOnceLock<Py<AttemptPlan>> = PyOnceLock::new();
    Ok(match step {
        hc::Step::Attempt(hc::AttemptPlan {
            number: 1,
            probe: false,
            time_limit: Some(hc::execution::DEFAULT_TOTAL_TIMEOUT),
        }) => FIRST_BY_DEFAULT
            .get_or_try_init(py, || {
                Py::new(
                    py,
                    AttemptPlan {
                        number: 1,
                        probe: false,
                        time_limit: Some(secs_out(hc::execution::DEFAULT_TOTAL_TIMEOUT)),
                    },
                )
            })?
            .clone_ref(py)
            .into_any(),
        hc::Step::Attempt(a) => Py::new(
            py,
            AttemptPlan {
                number: a.number,
                probe: a.probe,
                time_limit: a.time_limit.map(secs_out),
            },
        )?
        .into_any(),
        hc::Step::Wait(w) => Py::new(
            py,
            WaitPlan {
                attempts: w.attempts,
                delay: secs_out(w.delay),
                source: w.source,
                capped: w.capped,
                server_delay: w.server_delay.map(secs_out),
            },
        )?
        .into_any(),
        hc::Step::Finish(v) => verdict(py, v)?.into_any(),
    })
}

impl Execution {
    fn unstarted(config: hc::ExecutionConfig, policy: Py<Policy>) -> Self {
        Execution {
            config,
            cell: Mutex::new(Cell {
                seen: Seen::UNSTARTED,
                inner: Some(Core::Unmade),
            }),
            policy,
        }
    }

    fn cell(&self) -> MutexGuard<'_, Cell> {
        self.cell.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The figures the getters show: the execution's own, or (while a step has it out) those
    /// when that step began.
    fn seen(&self) -> Seen {
        let c = self.cell();
        c.inner.as_ref().map_or(c.seen, Core::seen)
    }

    /// Runs one step on the core's execution with the lock released, then puts it back (also
    /// when the step panics). A step while another runs is refused: `InvalidInputError` naming
    /// `execution`, nothing changed.
    fn with_inner<R>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut hc::Execution<Arc<hc::Policy>>) -> R,
    ) -> PyResult<R> {
        struct PutBack<'a> {
            ex: &'a Execution,
            inner: Option<hc::Execution<Arc<hc::Policy>>>,
        }
        impl Drop for PutBack<'_> {
            fn drop(&mut self) {
                self.ex.cell().inner = self.inner.take().map(Core::Made);
            }
        }
        let taken = {
            let mut c = self.cell();
            let Some(core) = c.inner.take() else {
                return Err(convert::input_error(
                    py,
                    hc::InputError {
                        field: "execution".to_owned(),
                        rule: IN_USE.to_owned(),
                    },
                ));
            };
            c.seen = core.seen();
            core
        };
        let inner = match taken {
            Core::Made(e) => e,
            Core::Unmade => {
                let policy = self.policy.bind(py).get().shared();
                match hc::Execution::new(policy, self.config) {
                    Ok(e) => e,
                    Err(e) => {
                        self.cell().inner = Some(Core::Unmade);
                        return Err(convert::config_error(py, e));
                    }
                }
            }
        };
        let mut guard = PutBack {
            ex: self,
            inner: Some(inner),
        };
        Ok(f(guard.inner.as_mut().expect("just taken out")))
    }
}

/// A new call over `policy` with the limits `config` (valid), and its first step:
/// `(execution, step)`.
pub(crate) fn begin(
    py: Python<'_>,
    policy: Py<Policy>,
    config: hc::ExecutionConfig,
) -> PyResult<(Py<Execution>, Py<PyAny>)> {
    let shared = policy.bind(py).get().shared();
    let mut inner = hc::Execution::new(shared, config).map_err(|e| convert::config_error(py, e))?;
    // No lock to take: the call is not shared with anyone until this returns.
    let step = inner.next_step();
    let ex = Py::new(
        py,
        Execution {
            config,
            cell: Mutex::new(Cell {
                seen: Seen::UNSTARTED,
                inner: Some(Core::Made(inner)),
            }),
            policy,
        },
    )?;
    let step = step.map_err(|e| convert::holdoff_error(py, e))?;
    Ok((ex, step_out(py, step)?))
}

fn attempted_arg(
    attempted: &Bound<'_, PyAny>,
    outcome: Option<&Bound<'_, PyAny>>,
) -> PyResult<hc::Attempted> {
    let py = attempted.py();
    let name = attempted.cast::<PyString>().map_err(|_| {
        convert::input_type_error(
            py,
            "attempted",
            "must be \"returned\", \"raised\", \"cancelled\" or \"bug\"".to_owned(),
        )
    })?;
    let name = name.to_cow()?;
    let needs = |what: &str| -> PyResult<hc::Outcome> {
        match outcome {
            Some(o) if !o.is_none() => outcome_arg(o),
            _ => Err(convert::input_type_error(
                py,
                "outcome",
                format!("an attempt that {what} needs its outcome"),
            )),
        }
    };
    let none = |what: &str| -> PyResult<()> {
        match outcome {
            Some(o) if !o.is_none() => Err(convert::input_type_error(
                py,
                "outcome",
                format!("an attempt {what} takes no outcome"),
            )),
            _ => Ok(()),
        }
    };
    Ok(match &*name {
        "returned" => hc::Attempted::Returned(needs("returned")?),
        "raised" => hc::Attempted::Raised(needs("raised")?),
        "cancelled" => {
            none("cancelled")?;
            hc::Attempted::Cancelled
        }
        "bug" => {
            none("that was a programming error")?;
            hc::Attempted::Bug
        }
        other => {
            return Err(convert::input_type_error(
                py,
                "attempted",
                format!("unknown {other:?} (returned, raised, cancelled, bug)"),
            ))
        }
    })
}

#[pymethods]
impl Execution {
    #[new]
    #[pyo3(
        signature = (policy, *, attempt_timeout = LimitArg::Default, total_timeout = LimitArg::Default),
        text_signature = "(policy, *, attempt_timeout=None, total_timeout=60.0)"
    )]
    fn new(
        py: Python<'_>,
        policy: Bound<'_, Policy>,
        attempt_timeout: LimitArg<'_>,
        total_timeout: LimitArg<'_>,
    ) -> PyResult<Self> {
        let defaults = hc::ExecutionConfig::default();
        let config = hc::ExecutionConfig {
            attempt_timeout: limit(
                &attempt_timeout,
                defaults.attempt_timeout,
                "execute.attempt_timeout",
            )?,
            total_timeout: limit(&total_timeout, defaults.total_timeout, "execute.total_timeout")?,
        };
        config.validate().map_err(|e| convert::config_error(py, e))?;
        Ok(Execution::unstarted(config, policy.unbind()))
    }

    /// A new call, not started, with this execution's policy and limits (what a helper makes
    /// for each call; no argument is converted again).
    fn fresh(&self, py: Python<'_>) -> Self {
        Execution::unstarted(self.config, self.policy.clone_ref(py))
    }

    /// `fresh()` and its first `next_step()` in one call: `(execution, step)`, the new call and
    /// its first step (an `AttemptPlan`, or the `Verdict` of a refusal). What the sync helper
    /// starts each call with.
    fn _begin(&self, py: Python<'_>) -> PyResult<(Py<Execution>, Py<PyAny>)> {
        begin(py, self.policy.clone_ref(py), self.config)
    }

    /// `complete("returned", Outcome.SUCCESS)` for the sync helper's common case: `None` when
    /// the call is over with its value returned (the `return` verdict), else the next step (a
    /// `WaitPlan`, or another `Verdict`).
    fn _succeeded(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let step = self
            .with_inner(py, |e| e.complete(hc::Attempted::Returned(hc::Outcome::Success)))?
            .map_err(|e| convert::holdoff_error(py, e))?;
        match step {
            hc::Step::Finish(hc::Verdict::Return { .. }) => Ok(None),
            step => step_out(py, step).map(Some),
        }
    }

    /// Starts the call, or the next attempt after a wait: an `AttemptPlan`, a `WaitPlan` (the
    /// breaker is open; sleep, then ask again) or the `Verdict` (a first attempt refused at
    /// once, a retry that would wait past the budget or the total timeout). Once finished it
    /// returns the verdict again.
    fn next_step(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let step = self
            .with_inner(py, |e| e.next_step())?
            .map_err(|e| convert::holdoff_error(py, e))?;
        step_out(py, step)
    }

    /// Reports what the attempt came to: `"returned"` with the outcome its value means
    /// (`Outcome.SUCCESS` unless a result classifier says otherwise), `"raised"` with the
    /// outcome its exception means (`FAILURE` for a transport error, `TIMEOUT`, a retry-later,
    /// `ANSWER` for a final answer), `"cancelled"` (the caller's own cancellation: the call
    /// ends with the `cancelled` verdict, never retried; at or after the attempt's limit the
    /// breaker records the attempt as a timeout; so does an outcome `CANCELLED`) or `"bug"` (a
    /// programming error: recorded as cancelled, moves nothing, the call ends with `rethrow`).
    /// Returns the `WaitPlan` before the next attempt or the `Verdict`. Arguments are checked
    /// before the attempt is touched (`InputTypeError` / `InvalidInputError`).
    #[pyo3(signature = (attempted, outcome = None))]
    fn complete(
        &self,
        py: Python<'_>,
        attempted: &Bound<'_, PyAny>,
        outcome: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let attempted = attempted_arg(attempted, outcome)?;
        let step = self
            .with_inner(py, |e| e.complete(attempted))?
            .map_err(|e| convert::holdoff_error(py, e))?;
        step_out(py, step)
    }

    /// Reports an HTTP response: the policy's classifier reads (status, headers) at this one
    /// clock reading (Retry-After and the other delay headers honoured). A status outside
    /// 100..599 is a broken upstream (a failure). A value that is not a status (outside 0..999)
    /// raises `InvalidInputError` naming `status`: the attempt is recorded as cancelled and the
    /// call is over (its verdict `invalid_input`). A status that is not an int or headers that
    /// cannot be read raise `InputTypeError` before the attempt is touched.
    #[pyo3(signature = (status, headers = None))]
    fn complete_response(
        &self,
        py: Python<'_>,
        status: &Bound<'_, PyAny>,
        headers: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let status = http::status_int(status)?;
        let h = http::headers(headers)?;
        let refused = hc::check_status(status).err();
        let step = self
            .with_inner(py, |e| {
                e.complete_response(status, h.iter().map(|(n, v)| (n.as_str(), v.as_str())))
            })?
            .map_err(|e| convert::holdoff_error(py, e))?;
        let step = step_out(py, step)?;
        match refused {
            Some(e) => Err(convert::input_error(py, e)),
            None => Ok(step),
        }
    }

    /// The caller cancelled outside an attempt (during a wait): the call ends with the
    /// `cancelled` verdict, and a retry the quota paid for gives its tokens back. During an
    /// attempt it records the attempt as cancelled (at or after its limit: a timeout). Once
    /// finished, returns the verdict unchanged.
    fn cancel(&self, py: Python<'_>) -> PyResult<Py<Verdict>> {
        let v = self.with_inner(py, |e| e.cancel())?;
        verdict(py, v)
    }

    /// Attempts admitted so far.
    #[getter]
    fn attempts(&self) -> u32 {
        self.seen().attempts
    }

    /// The outcome the last completed attempt was recorded as (an after-attempt hook shows
    /// it), or `None`.
    #[getter]
    fn last_outcome(&self) -> Option<Outcome> {
        self.seen().last_outcome.map(|inner| Outcome { inner })
    }

    /// The verdict once the call is over, else `None`.
    #[getter]
    fn verdict(&self, py: Python<'_>) -> PyResult<Option<Py<Verdict>>> {
        self.seen().verdict.map(|v| verdict(py, v)).transpose()
    }

    /// The attempt timeout, seconds (`None`: no limit).
    #[getter]
    fn attempt_timeout(&self) -> Option<f64> {
        self.config.attempt_timeout.map(secs_out)
    }

    /// The total timeout, seconds (`None`: no limit).
    #[getter]
    fn total_timeout(&self) -> Option<f64> {
        self.config.total_timeout.map(secs_out)
    }

    #[getter]
    fn policy(&self, py: Python<'_>) -> Py<Policy> {
        self.policy.clone_ref(py)
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.policy)
    }

    fn __repr__(&self) -> String {
        let s = self.seen();
        format!(
            "Execution(attempts={}, verdict={})",
            s.attempts,
            s.verdict.map_or_else(
                || "None".to_owned(),
                |v| format!("'{}'", hc::interop::VerdictKind::of(&v).name())
            )
        )
    }
}

/// The default total timeout of a call, seconds.
pub(crate) fn default_total_timeout() -> f64 {
    secs_out(hc::execution::DEFAULT_TOTAL_TIMEOUT)
}
