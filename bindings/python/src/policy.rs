//! One upstream's breaker, budget and quota composed: `before_attempt` / `after_attempt`, the
//! two functions every helper (decorators, context managers, `call`) is built on.

use std::sync::Mutex;

use holdoff as hc;
use pyo3::gc::PyVisit;
use pyo3::prelude::*;
use pyo3::PyTraverseError;

use crate::breaker::{outcome_arg, take_permit, Breaker, Permit};
use crate::budget::{decision, Decision, RetryBudget, RetryQuota};
use crate::convert::{self, secs_out};
use crate::http::{self, Classification, Classifier};

/// The per-call state of a policy: one per logical call (all its attempts).
#[pyclass(frozen, freelist = 64, module = "holdoff._holdoff")]
pub struct Call {
    inner: Mutex<hc::Call>,
}

#[pymethods]
impl Call {
    #[new]
    fn new() -> Self {
        Call {
            inner: Mutex::new(hc::Call::new()),
        }
    }

    /// Attempts admitted so far.
    #[getter]
    fn attempts(&self) -> u32 {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).attempts()
    }

    /// Retries taken on the budget's counted path.
    #[getter]
    fn retries(&self) -> u32 {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retry_state()
            .retries()
    }

    fn __repr__(&self) -> String {
        format!("Call(attempts={}, retries={})", self.attempts(), self.retries())
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
/// and the budget must share one clock (`InvalidConfig` naming `policy.clock` otherwise).
#[pyclass(frozen, subclass, weakref, module = "holdoff._holdoff")]
pub struct Policy {
    inner: hc::Policy,
    breaker: Py<Breaker>,
    budget: Py<RetryBudget>,
    quota: Option<Py<RetryQuota>>,
    classifier: Py<Classifier>,
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
            inner,
            breaker: breaker.unbind(),
            budget: budget.unbind(),
            quota: quota.map(Bound::unbind),
            classifier,
        })
    }

    /// Before an attempt: a `Permit` (go: make the attempt and pass the permit to
    /// `after_attempt`), `Wait(delay)` (the breaker is open; wait, then ask again) or
    /// `Stop(reason, retry_after)` (give up now). A first attempt never waits for an open breaker.
    fn before_attempt(&self, py: Python<'_>, call: &Bound<'_, Call>) -> PyResult<Py<PyAny>> {
        let before = {
            let mut c = call.get().inner.lock().unwrap_or_else(|e| e.into_inner());
            self.inner.before_attempt(&mut c)
        };
        Ok(match before {
            hc::Before::Go(p) => Py::new(
                py,
                Permit {
                    slot: hc::PermitSlot::new(p),
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
        let permit = take_permit(py, permit, self.inner.breaker())?;
        let d = {
            let mut c = call.get().inner.lock().unwrap_or_else(|e| e.into_inner());
            self.inner.after_attempt(&mut c, permit, outcome)
        }
        .map_err(|e| convert::permit_error(py, e))?;
        decision(py, d)
    }

    /// `after_attempt` for an HTTP response: classifies (status, headers) with the policy's
    /// classifier at the decision's one clock reading, then decides. Returns
    /// `(Decision, Classification)`. Raises `InvalidInput` for a status outside 100..599 (before
    /// the permit is used).
    #[pyo3(signature = (call, permit, status, headers = None))]
    fn after_response(
        &self,
        py: Python<'_>,
        call: &Bound<'_, Call>,
        permit: &Bound<'_, PyAny>,
        status: &Bound<'_, PyAny>,
        headers: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<(Py<Decision>, Classification)> {
        let status = http::status_arg(status)?;
        let h = http::headers(headers)?;
        let permit = take_permit(py, permit, self.inner.breaker())?;
        let (d, c) = {
            let mut cs = call.get().inner.lock().unwrap_or_else(|e| e.into_inner());
            self.inner.after_response(
                &mut cs,
                permit,
                status,
                h.iter().map(|(n, v)| (n.as_str(), v.as_str())),
            )
        }
        .map_err(|e| convert::holdoff_error(py, e))?;
        Ok((decision(py, d)?, http::classification(py, c)?))
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
