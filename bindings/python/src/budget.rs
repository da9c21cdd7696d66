//! Retry budget, per-call retry state, decisions, and the retry quota.

use std::sync::{Arc, Mutex};

use holdoff as hc;
use holdoff::interop::Coded;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyList;

use crate::breaker::{outcome_arg, Backoff};
use crate::clock::clock_arg;
use crate::convert::{self, secs_out};

fn fmt_opt(v: Option<f64>) -> String {
    v.map_or_else(|| "None".to_owned(), |x| format!("{x:?}"))
}

fn fmt_opt_str(v: Option<&str>) -> String {
    v.map_or_else(|| "None".to_owned(), |x| format!("'{x}'"))
}

/// The per-call part of retrying: one per logical call (all its attempts), owned by its caller.
#[pyclass(frozen, module = "holdoff._holdoff")]
pub struct RetryState {
    inner: Mutex<hc::RetryState>,
}

#[pymethods]
impl RetryState {
    #[new]
    fn new() -> Self {
        RetryState {
            inner: Mutex::new(hc::RetryState::new()),
        }
    }

    /// Retries taken on the counted path.
    #[getter]
    fn retries(&self) -> u32 {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).retries()
    }

    /// When the counted path started for this call (seconds on the budget's clock), or `None`.
    #[getter]
    fn first_failure(&self) -> Option<f64> {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .first_failure()
            .map(|t| t.as_nanos() as f64 / 1e9)
    }

    fn __repr__(&self) -> String {
        format!(
            "RetryState(retries={}, first_failure={})",
            self.retries(),
            fmt_opt(self.first_failure())
        )
    }
}

/// What to do after an answer. `action` is `"done"`, `"retry"` or `"give_up"`. For a retry:
/// `delay` (seconds, never negative, never shorter than the server asked up to the cap),
/// `source` (`"retry_after"`, `"backoff"`, `"breaker"`), `capped`. For a give-up: `reason`.
/// `server_delay` is the server's own Retry-After (seconds) when the answer carried one.
#[pyclass(frozen, freelist = 64, module = "holdoff._holdoff")]
pub struct Decision {
    action: &'static str,
    #[pyo3(get)]
    delay: Option<f64>,
    #[pyo3(get)]
    source: Option<&'static str>,
    #[pyo3(get)]
    server_delay: Option<f64>,
    #[pyo3(get)]
    capped: bool,
    #[pyo3(get)]
    reason: Option<&'static str>,
}

fn done(py: Python<'_>) -> PyResult<Py<Decision>> {
    static DONE: PyOnceLock<Py<Decision>> = PyOnceLock::new();
    Ok(DONE
        .get_or_try_init(py, || {
            Py::new(
                py,
                Decision {
                    action: "done",
                    delay: None,
                    source: None,
                    server_delay: None,
                    capped: false,
                    reason: None,
                },
            )
        })?
        .clone_ref(py))
}

/// A decision as a Python object; `Done` is one shared object (`Decision.DONE`), so the hot path
/// allocates none and helpers may test it by identity.
pub(crate) fn decision(py: Python<'_>, d: hc::Decision) -> PyResult<Py<Decision>> {
    match d {
        hc::Decision::Done => done(py),
        hc::Decision::Retry {
            delay,
            source,
            server_delay,
            capped,
        } => Py::new(
            py,
            Decision {
                action: "retry",
                delay: Some(secs_out(delay)),
                source: Some(source.name()),
                server_delay: server_delay.map(secs_out),
                capped,
                reason: None,
            },
        ),
        hc::Decision::GiveUp { reason, server_delay } => Py::new(
            py,
            Decision {
                action: "give_up",
                delay: None,
                source: None,
                server_delay: server_delay.map(secs_out),
                capped: false,
                reason: Some(reason.name()),
            },
        ),
    }
}

#[pymethods]
impl Decision {
    /// The one "done" decision (`after_attempt(...) is Decision.DONE` after a success).
    #[classattr]
    #[allow(non_snake_case)]
    fn DONE(py: Python<'_>) -> PyResult<Py<Decision>> {
        done(py)
    }

    /// `"done"`, `"retry"` or `"give_up"`.
    #[getter]
    fn action<'py>(&self, py: Python<'py>) -> Bound<'py, pyo3::types::PyString> {
        match self.action {
            "done" => pyo3::intern!(py, "done").clone(),
            "retry" => pyo3::intern!(py, "retry").clone(),
            _ => pyo3::intern!(py, "give_up").clone(),
        }
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.cast::<Decision>().is_ok_and(|o| {
            let o = o.get();
            o.action == self.action
                && o.delay == self.delay
                && o.source == self.source
                && o.server_delay == self.server_delay
                && o.capped == self.capped
                && o.reason == self.reason
        })
    }

    fn __repr__(&self) -> String {
        match self.action {
            "done" => "Decision(action='done')".to_owned(),
            "retry" => format!(
                "Decision(action='retry', delay={}, source={}, server_delay={}, capped={})",
                fmt_opt(self.delay),
                fmt_opt_str(self.source),
                fmt_opt(self.server_delay),
                if self.capped { "True" } else { "False" }
            ),
            _ => format!(
                "Decision(action='give_up', reason={}, server_delay={})",
                fmt_opt_str(self.reason),
                fmt_opt(self.server_delay)
            ),
        }
    }
}

/// The retry budget of one upstream, shared by its callers. Durations in seconds (float or
/// timedelta): `max_rate_limit_duration` (1800: one rate-limit episode's total),
/// `retry_after_cap` (300: cap on one Retry-After wait; the budget must be at least twice it),
/// `give_up_above_cap` (False: a longer Retry-After waits the cap, `capped=True`; True: give up
/// at once with reason `"retry_after_above_cap"` and the server's delay), `max_retries` (10,
/// counted path), `backoff` (a `Backoff`, default 0.5 s doubling to 60 s),
/// `max_backoff_duration` (43200), `seed` (0), `clock`. Raises `InvalidConfigError` /
/// `ConfigTypeError` naming the field (`budget.give_up_above_cap` must be a bool).
#[pyclass(frozen, module = "holdoff._holdoff")]
pub struct RetryBudget {
    pub(crate) inner: Arc<hc::RetryBudget>,
}

#[pymethods]
impl RetryBudget {
    #[new]
    #[pyo3(signature = (*, max_rate_limit_duration = None, retry_after_cap = None,
                        give_up_above_cap = None, max_retries = None, backoff = None,
                        max_backoff_duration = None, seed = None, clock = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        max_rate_limit_duration: Option<&Bound<'_, PyAny>>,
        retry_after_cap: Option<&Bound<'_, PyAny>>,
        give_up_above_cap: Option<&Bound<'_, PyAny>>,
        max_retries: Option<&Bound<'_, PyAny>>,
        backoff: Option<&Bound<'_, PyAny>>,
        max_backoff_duration: Option<&Bound<'_, PyAny>>,
        seed: Option<&Bound<'_, PyAny>>,
        clock: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let mut c = hc::BudgetConfig::default();
        if let Some(v) = max_rate_limit_duration {
            c.max_rate_limit_duration = convert::duration(v, "budget.max_rate_limit_duration")?;
        }
        if let Some(v) = retry_after_cap {
            c.retry_after_cap = convert::duration(v, "budget.retry_after_cap")?;
        }
        if let Some(v) = give_up_above_cap.filter(|o| !o.is_none()) {
            c.give_up_above_cap = convert::flag(v, "budget.give_up_above_cap")?;
        }
        if let Some(v) = max_retries {
            c.max_retries = convert::whole(v, "budget.max_retries")?;
        }
        if let Some(b) = backoff.filter(|o| !o.is_none()) {
            c.backoff = b
                .cast::<Backoff>()
                .map_err(|_| {
                    convert::type_error(py, "budget.backoff", "must be a holdoff.Backoff".to_owned())
                })?
                .get()
                .inner;
        }
        if let Some(v) = max_backoff_duration {
            c.max_backoff_duration = convert::duration(v, "budget.max_backoff_duration")?;
        }
        if let Some(v) = seed {
            c.seed = convert::seed(v, "budget.seed")?;
        }
        let clock = clock_arg(clock)?;
        let inner = hc::RetryBudget::new(c, clock).map_err(|e| convert::config_error(py, e))?;
        Ok(RetryBudget {
            inner: Arc::new(inner),
        })
    }

    /// Decides what to do after an answer for the call whose state is `state`. Reads the clock
    /// at most once.
    fn decide(
        &self,
        py: Python<'_>,
        state: &Bound<'_, RetryState>,
        outcome: &Bound<'_, PyAny>,
    ) -> PyResult<Py<Decision>> {
        let outcome = outcome_arg(outcome)?;
        let d = {
            let mut s = state.get().inner.lock().unwrap_or_else(|e| e.into_inner());
            self.inner.decide(&mut s, outcome)
        };
        decision(py, d)
    }

    /// Whether a Retry-After above the cap gives up at once (`retry_after_above_cap`) instead
    /// of waiting the cap.
    #[getter]
    fn give_up_above_cap(&self) -> bool {
        self.inner.config().give_up_above_cap
    }

    /// When the current rate-limit episode started (seconds on the clock), or `None`.
    #[getter]
    fn episode_start(&self) -> Option<f64> {
        self.inner.episode_start().map(|t| t.as_nanos() as f64 / 1e9)
    }

    fn __repr__(&self) -> String {
        let c = self.inner.config();
        format!(
            "RetryBudget(max_rate_limit_duration={:?}, retry_after_cap={:?}, give_up_above_cap={}, \
             max_retries={})",
            secs_out(c.max_rate_limit_duration),
            secs_out(c.retry_after_cap),
            if c.give_up_above_cap { "True" } else { "False" },
            c.max_retries
        )
    }
}

/// Tokens taken for one retry; give them back once with `RetryQuota.on_success(lease)` on the
/// quota that issued it (the core's `LeaseSlot`: it carries the issuing quota's identity).
#[pyclass(frozen, module = "holdoff._holdoff")]
pub struct QuotaLease {
    slot: hc::interop::LeaseSlot,
}

#[pymethods]
impl QuotaLease {
    /// Tokens taken.
    #[getter]
    fn cost(&self) -> u64 {
        self.slot.cost()
    }

    /// Whether the lease was already given back.
    #[getter]
    fn returned(&self) -> bool {
        self.slot.is_taken()
    }

    fn __repr__(&self) -> String {
        format!(
            "QuotaLease(cost={}, returned={})",
            self.slot.cost(),
            if self.slot.is_taken() { "True" } else { "False" }
        )
    }
}

/// A token bucket shared by every caller of one upstream: a retry costs `retry_cost` (5), a
/// retry after a timeout `timeout_cost` (10), a success refunds its lease or adds
/// `success_refill` (1); `capacity` 500. All whole tokens.
#[pyclass(frozen, module = "holdoff._holdoff")]
pub struct RetryQuota {
    pub(crate) inner: Arc<hc::RetryQuota>,
}

#[pymethods]
impl RetryQuota {
    #[new]
    #[pyo3(signature = (*, capacity = None, retry_cost = None, timeout_cost = None,
                        success_refill = None))]
    fn new(
        py: Python<'_>,
        capacity: Option<&Bound<'_, PyAny>>,
        retry_cost: Option<&Bound<'_, PyAny>>,
        timeout_cost: Option<&Bound<'_, PyAny>>,
        success_refill: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let mut c = hc::QuotaConfig::default();
        if let Some(v) = capacity {
            c.capacity = convert::whole_u64(v, "quota.capacity")?;
        }
        if let Some(v) = retry_cost {
            c.retry_cost = convert::whole_u64(v, "quota.retry_cost")?;
        }
        if let Some(v) = timeout_cost {
            c.timeout_cost = convert::whole_u64(v, "quota.timeout_cost")?;
        }
        if let Some(v) = success_refill {
            c.success_refill = convert::whole_u64(v, "quota.success_refill")?;
        }
        let inner = hc::RetryQuota::new(c).map_err(|e| convert::config_error(py, e))?;
        Ok(RetryQuota {
            inner: Arc::new(inner),
        })
    }

    /// Takes the cost of one retry (`timeout=True`: the timeout cost). Raises `QuotaEmptyError`
    /// (with `available` and `cost`) when the bucket cannot pay.
    #[pyo3(signature = (timeout = false))]
    fn acquire(&self, py: Python<'_>, timeout: bool) -> PyResult<QuotaLease> {
        self.inner
            .acquire(timeout)
            .map(|lease| QuotaLease {
                slot: hc::interop::LeaseSlot::new(lease),
            })
            .map_err(|e| convert::quota_empty(py, e))
    }

    /// A call succeeded: refunds `lease`, or adds `success_refill` when it needed no retry.
    /// A lease is given back at most once: a second time raises `PermitError`
    /// (`permit_already_recorded`), a lease of another quota `PermitError` (`foreign_permit`,
    /// and the lease stays good on its own quota), as in C, Go and C#; neither changes the
    /// bucket.
    #[pyo3(signature = (lease = None))]
    fn on_success(&self, py: Python<'_>, lease: Option<&Bound<'_, QuotaLease>>) -> PyResult<()> {
        let result = match lease {
            None => self.inner.on_success(None),
            Some(l) => l
                .get()
                .slot
                .take(&self.inner)
                .and_then(|lease| self.inner.on_success(Some(lease))),
        };
        result.map_err(|e| convert::lease_error(py, e))
    }

    /// Tokens left.
    /// This quota's series (docs/metrics.md) as a list of `MetricReading`: tokens left (a
    /// gauge) and retries refused for want of tokens. The first call starts counting refusals.
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let mut out = Vec::with_capacity(2);
        self.inner.metrics(&mut out);
        crate::metrics::readings(py, &out)
    }

    #[getter]
    fn available(&self) -> u64 {
        self.inner.available()
    }

    #[getter]
    fn capacity(&self) -> u64 {
        self.inner.config().capacity
    }

    #[getter]
    fn retry_cost(&self) -> u64 {
        self.inner.config().retry_cost
    }

    #[getter]
    fn timeout_cost(&self) -> u64 {
        self.inner.config().timeout_cost
    }

    #[getter]
    fn success_refill(&self) -> u64 {
        self.inner.config().success_refill
    }

    fn __repr__(&self) -> String {
        format!(
            "RetryQuota(available={}, capacity={})",
            self.inner.available(),
            self.inner.config().capacity
        )
    }
}
