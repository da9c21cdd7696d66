//! One upstream's breaker, budget and quota composed: `before_attempt` / `after_attempt` for
//! callers that drive each attempt themselves; the helpers run on `Execution`
//! (`execution.rs`), the core's retry loop over this policy.

use std::sync::Mutex;

use holdoff as hc;
use holdoff::interop::Coded;
use pyo3::gc::PyVisit;
use pyo3::prelude::*;
use pyo3::types::PyList;
use pyo3::PyTraverseError;

use crate::breaker::{outcome_arg, take_permit, Breaker, Permit};
use crate::budget::{decision, Decision, RetryBudget, RetryQuota};
use crate::convert::{self, secs_out};
use crate::execution::Execution;
use crate::http::{self, Classification, Classifier};

/// The per-call state of a policy: one per logical call (all its attempts).
///
/// The core's state is taken out of the lock for the length of one policy operation and put
/// back after it, so no lock is held while the core runs: the breaker's state-change callback
/// (Python code, called from inside the operation) may read this `PolicyCall` without deadlocking,
/// and sees its figures as they were when the operation started. Using one `PolicyCall` in two
/// operations at once (from the callback, or from two threads) raises `RuntimeError` instead of
/// losing one of the updates.
#[pyclass(frozen, freelist = 64, module = "holdoff._holdoff", name = "PolicyCall")]
pub struct Call {
    inner: Mutex<CallCell>,
}

struct CallCell {
    // `None` while an operation has it out.
    state: Option<hc::Call>,
    // (attempts, retries) when the state was last taken out: what the getters show meanwhile.
    figures: (u32, u32),
}

impl Call {
    fn cell(&self) -> std::sync::MutexGuard<'_, CallCell> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn figures(&self) -> (u32, u32) {
        let c = self.cell();
        match &c.state {
            Some(s) => (s.attempts(), s.retry_state().retries()),
            None => c.figures,
        }
    }

    /// Runs `f` on the state with the lock released, then puts the state back (also when `f`
    /// panics, the state is put back by the guard).
    fn with_state<R>(&self, f: impl FnOnce(&mut hc::Call) -> R) -> PyResult<R> {
        struct PutBack<'a> {
            call: &'a Call,
            state: Option<hc::Call>,
        }
        impl Drop for PutBack<'_> {
            fn drop(&mut self) {
                self.call.cell().state = self.state.take();
            }
        }
        let state = {
            let mut c = self.cell();
            let Some(state) = c.state.take() else {
                return Err(pyo3::exceptions::PyRuntimeError::new_err(
                    "this PolicyCall is in use by another policy operation (a state-change callback, \
                     or another thread): use one PolicyCall per logical call",
                ));
            };
            c.figures = (state.attempts(), state.retry_state().retries());
            state
        };
        let mut guard = PutBack {
            call: self,
            state: Some(state),
        };
        Ok(f(guard.state.as_mut().expect("just put in")))
    }
}

#[pymethods]
impl Call {
    #[new]
    fn new() -> Self {
        Call {
            inner: Mutex::new(CallCell {
                state: Some(hc::Call::new()),
                figures: (0, 0),
            }),
        }
    }

    /// Attempts admitted so far.
    #[getter]
    fn attempts(&self) -> u32 {
        self.figures().0
    }

    /// Retries taken on the budget's counted path.
    #[getter]
    fn retries(&self) -> u32 {
        self.figures().1
    }

    fn __repr__(&self) -> String {
        let (a, r) = self.figures();
        format!("PolicyCall(attempts={a}, retries={r})")
    }
}

/// `before_attempt`: the breaker is open; wait `delay` seconds, then ask again.
#[pyclass(frozen, module = "holdoff._holdoff")]
pub struct Wait {
    #[pyo3(get)]
    delay: f64,
}

#[pymethods]
impl Wait {
    fn __repr__(&self) -> String {
        format!("Wait(delay={:?})", self.delay)
    }
}

/// `before_attempt`: give up now (`reason` is `"breaker_open"`): the breaker stays open beyond
/// what is left of the budget. `retry_after` is the breaker's time to its next probe (seconds,
/// `None` while forced open).
#[pyclass(frozen, module = "holdoff._holdoff")]
pub struct Stop {
    #[pyo3(get)]
    reason: &'static str,
    #[pyo3(get)]
    retry_after: Option<f64>,
}

#[pymethods]
impl Stop {
    fn __repr__(&self) -> String {
        format!(
            "Stop(reason='{}', retry_after={})",
            self.reason,
            self.retry_after
                .map_or_else(|| "None".to_owned(), |v| format!("{v:?}"))
        )
    }
}

/// One upstream's breaker, retry budget and optional quota (and HTTP classifier). The breaker
/// and the budget must share one clock (`InvalidConfigError` naming `policy.clock` otherwise).
#[pyclass(frozen, subclass, weakref, module = "holdoff._holdoff")]
pub struct Policy {
    inner: std::sync::Arc<hc::Policy>,
    breaker: Py<Breaker>,
    budget: Py<RetryBudget>,
    quota: Option<Py<RetryQuota>>,
    classifier: Py<Classifier>,
}

impl Policy {
    /// The core's policy, shared with the executions of its calls.
    pub(crate) fn shared(&self) -> std::sync::Arc<hc::Policy> {
        std::sync::Arc::clone(&self.inner)
    }
}

#[pymethods]
impl Policy {
    #[new]
    #[pyo3(signature = (breaker, budget, quota = None, classifier = None))]
    fn new(
        py: Python<'_>,
        breaker: Bound<'_, Breaker>,
        budget: Bound<'_, RetryBudget>,
        quota: Option<Bound<'_, RetryQuota>>,
        classifier: Option<Bound<'_, Classifier>>,
    ) -> PyResult<Self> {
        let classifier = match classifier {
            Some(c) => c.unbind(),
            None => Py::new(
                py,
                Classifier {
                    inner: hc::Classifier::default(),
                },
            )?,
        };
        let inner = hc::Policy::new(
            std::sync::Arc::clone(&breaker.get().inner),
            std::sync::Arc::clone(&budget.get().inner),
            quota.as_ref().map(|q| std::sync::Arc::clone(&q.get().inner)),
            classifier.get().inner.clone(),
        )
        .map_err(|e| convert::config_error(py, e))?;
        Ok(Policy {
            inner: std::sync::Arc::new(inner),
            breaker: breaker.unbind(),
            budget: budget.unbind(),
            quota: quota.map(Bound::unbind),
            classifier,
        })
    }

    /// A new call with the default limits (no attempt timeout, a total timeout of 60 s) and
    /// its first step: `(execution, step)`, as `Execution(policy)._begin()` without the
    /// template. What `policy.call` starts each call with.
    fn _begin(slf: &Bound<'_, Self>) -> PyResult<(Py<Execution>, Py<PyAny>)> {
        crate::execution::begin(slf.py(), slf.clone().unbind(), hc::ExecutionConfig::default())
    }

    /// Before an attempt: a `Permit` (go: make the attempt and pass the permit to
    /// `after_attempt`), `Wait(delay)` (the breaker is open; wait, then ask again) or
    /// `Stop(reason, retry_after)` (give up now). A first attempt never waits for an open breaker.
    fn before_attempt(&self, py: Python<'_>, call: &Bound<'_, Call>) -> PyResult<Py<PyAny>> {
        let before = call.get().with_state(|c| self.inner.before_attempt(c))?;
        Ok(match before {
            hc::Before::Go(p) => Py::new(
                py,
                Permit {
                    slot: hc::interop::PermitSlot::new(p),
                },
            )?
            .into_any(),
            hc::Before::Wait(d) => Py::new(py, Wait { delay: secs_out(d) })?.into_any(),
            hc::Before::GiveUp { reason, retry_after } => Py::new(
                py,
                Stop {
                    reason: reason.name(),
                    retry_after: retry_after.map(secs_out),
                },
            )?
            .into_any(),
        })
    }

    /// After an attempt: records `outcome` on the breaker, asks the budget, takes the retry's
    /// cost from the quota; returns a `Decision` (done, retry after `delay` seconds, or give up
    /// with a reason). Raises `PermitError` for a permit recorded twice or of another breaker.
    fn after_attempt(
        &self,
        py: Python<'_>,
        call: &Bound<'_, Call>,
        permit: &Bound<'_, PyAny>,
        outcome: &Bound<'_, PyAny>,
    ) -> PyResult<Py<Decision>> {
        let outcome = outcome_arg(outcome)?;
        // The permit is taken only once the call's state is ours: a busy `Call` leaves it
        // unrecorded, for the caller to record elsewhere.
        let d = call.get().with_state(|c| {
            let permit = take_permit(py, permit, self.inner.breaker())?;
            self.inner
                .after_attempt(c, permit, outcome)
                .map_err(|e| convert::permit_error(py, e))
        })??;
        decision(py, d)
    }

    /// `after_attempt` for an HTTP response: classifies (status, headers) with the policy's
    /// classifier at the decision's one clock reading, then decides. Returns
    /// `(Decision, Classification)`. A status outside 100..599 (0..999) is a broken upstream,
    /// recorded as a failure. Any other int raises `InvalidInputError` (field `status`) and the permit
    /// is recorded as cancelled (a probe frees its slot; its window stays spent); a non-int
    /// raises `InputTypeError` and leaves the permit unused.
    #[pyo3(signature = (call, permit, status, headers = None))]
    fn after_response(
        &self,
        py: Python<'_>,
        call: &Bound<'_, Call>,
        permit: &Bound<'_, PyAny>,
        status: &Bound<'_, PyAny>,
        headers: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<(Py<Decision>, Classification)> {
        let status = http::status_int(status)?;
        let h = http::headers(headers)?;
        let (d, c) = call.get().with_state(|cs| {
            let permit = take_permit(py, permit, self.inner.breaker())?;
            self.inner
                .after_response(
                    cs,
                    permit,
                    status,
                    h.iter().map(|(n, v)| (n.as_str(), v.as_str())),
                )
                .map_err(|e| convert::holdoff_error(py, e))
        })??;
        Ok((decision(py, d)?, http::classification(py, c)?))
    }

    /// This policy's retry series (docs/metrics.md) as a list of `MetricReading`: attempts,
    /// retries, waits and their total duration by source (seconds), capped waits and give-ups
    /// by reason, zeros included. Its breaker's and quota's series are theirs
    /// (`policy.breaker.metrics()`, `policy.quota.metrics()`). The first call starts counting.
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let mut out = Vec::with_capacity(24);
        self.inner.metrics(&mut out);
        crate::metrics::readings(py, &out)
    }

    #[getter]
    fn breaker(&self, py: Python<'_>) -> Py<Breaker> {
        self.breaker.clone_ref(py)
    }

    #[getter]
    fn budget(&self, py: Python<'_>) -> Py<RetryBudget> {
        self.budget.clone_ref(py)
    }

    #[getter]
    fn quota(&self, py: Python<'_>) -> Option<Py<RetryQuota>> {
        self.quota.as_ref().map(|q| q.clone_ref(py))
    }

    #[getter]
    fn classifier(&self, py: Python<'_>) -> Py<Classifier> {
        self.classifier.clone_ref(py)
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.breaker)?;
        visit.call(&self.budget)?;
        if let Some(q) = &self.quota {
            visit.call(q)?;
        }
        visit.call(&self.classifier)?;
        Ok(())
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "Policy(breaker={}, budget={})",
            self.breaker.bind(py).repr()?,
            self.budget.bind(py).repr()?
        ))
    }
}
