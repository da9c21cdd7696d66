//! `holdoff._holdoff`: the private extension module under the `holdoff` Python package.
//!
//! A thin skin over the core: it converts Python values (float seconds, `timedelta`, ints) with
//! the core's `units` rules, maps the core's errors to the exceptions of `holdoff._errors`, and
//! offers Python shapes. No breaker or budget logic lives here; the helpers (decorators, context
//! managers, `call`) are Python code stepping the core's retry loop, `Execution`.
//! Nothing releases the GIL (every operation takes nanoseconds) but the fleet's tick and close,
//! which may wait on its background thread.

use pyo3::prelude::*;

mod breaker;
mod budget;
mod clock;
mod convert;
mod execution;
mod fleet;
mod http;
mod metrics;
mod policy;

#[pymodule(gil_used = false)]
fn _holdoff(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<clock::ManualClock>()?;
    m.add_class::<clock::SystemClock>()?;
    m.add_class::<breaker::Backoff>()?;
    m.add_class::<breaker::ConsecutiveFailures>()?;
    m.add_class::<breaker::FailuresInWindow>()?;
    m.add_class::<breaker::FailureRate>()?;
    m.add_class::<breaker::Outcome>()?;
    m.add_class::<breaker::Permit>()?;
    m.add_class::<breaker::Snapshot>()?;
    m.add_class::<breaker::StateChange>()?;
    m.add_class::<breaker::Breaker>()?;
    m.add_class::<breaker::BreakerGroup>()?;
    m.add_class::<breaker::GroupSnapshot>()?;
    m.add_class::<fleet::FleetConfig>()?;
    m.add_class::<fleet::FleetRecord>()?;
    m.add_class::<fleet::FleetSync>()?;
    m.add_class::<budget::RetryState>()?;
    m.add_class::<budget::Decision>()?;
    m.add_class::<budget::RetryBudget>()?;
    m.add_class::<budget::QuotaLease>()?;
    m.add_class::<budget::RetryQuota>()?;
    m.add_class::<http::RetryAfter>()?;
    m.add_class::<http::Classification>()?;
    m.add_class::<http::Classifier>()?;
    m.add_class::<policy::Call>()?;
    m.add_class::<policy::Wait>()?;
    m.add_class::<policy::Stop>()?;
    m.add_class::<policy::Policy>()?;
    m.add_class::<execution::AttemptPlan>()?;
    m.add_class::<execution::WaitPlan>()?;
    m.add_class::<execution::Verdict>()?;
    m.add_class::<execution::Execution>()?;
    m.add_class::<metrics::MetricDef>()?;
    m.add_class::<metrics::MetricReading>()?;
    m.add("METRICS", metrics::table(m.py())?)?;
    m.add("DEFAULT_TOTAL_TIMEOUT", execution::default_total_timeout())?;
    m.add_function(wrap_pyfunction!(http::parse_retry_after, m)?)?;
    m.add_function(wrap_pyfunction!(http::hint_from_headers, m)?)?;
    m.add_function(wrap_pyfunction!(fleet::memory_store_control, m)?)?;
    m.add_function(wrap_pyfunction!(fleet::memory_store_reset, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
