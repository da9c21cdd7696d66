//! Retry-After parsing (RFC 9110 §10.2.3) and the HTTP classifier.

use holdoff as hc;
use holdoff::interop::Coded;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use crate::breaker::Outcome;
use crate::convert::{self, secs_out};

/// A parsed delay hint: `delay` (seconds, may be 0.0 meaning "now") or `unusable` (`"missing"`,
/// `"malformed"`, `"signed"`, `"conflicting"`), and the header it came from (`source`, the
/// core's stable name: `"retry_after_ms"`, `"x_ms_retry_after_ms"`, `"retry_after"`,
/// `"ratelimit"`, `"ratelimit_reset"`, `"x_ratelimit_reset"`, `"none"`). Truthy when usable.
#[pyclass(frozen, module = "holdoff._holdoff")]
pub struct RetryAfter {
    #[pyo3(get)]
    delay: Option<f64>,
    #[pyo3(get)]
    unusable: Option<&'static str>,
    #[pyo3(get)]
    source: &'static str,
}

impl RetryAfter {
    fn new(r: hc::RetryAfter, source: hc::HintSource) -> Self {
        match r {
            hc::RetryAfter::Delay(d) => RetryAfter {
                delay: Some(secs_out(d)),
                unusable: None,
                source: source.name(),
            },
            hc::RetryAfter::Unusable(u) => RetryAfter {
                delay: None,
                unusable: Some(u.name()),
                source: source.name(),
            },
        }
    }
}

#[pymethods]
impl RetryAfter {
    fn __bool__(&self) -> bool {
        self.delay.is_some()
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.cast::<RetryAfter>().is_ok_and(|o| {
            let o = o.get();
            o.delay == self.delay && o.unusable == self.unusable && o.source == self.source
        })
    }

    fn __repr__(&self) -> String {
        match (self.delay, self.unusable) {
            (Some(d), _) => format!("RetryAfter(delay={d:?}, source='{}')", self.source),
            (None, u) => format!(
                "RetryAfter(unusable='{}', source='{}')",
                u.unwrap_or("missing"),
                self.source
            ),
        }
    }
}

/// A header name or value as text. A `str` that is not valid Unicode text (a lone surrogate, as
/// a client's latin-1 or `surrogateescape` decoding can leave) is read lossily: the bad code
/// points become U+FFFD, so the field is garbage (a malformed hint, an unknown name) instead of
/// an exception that would lose the attempt.
fn text(obj: &Bound<'_, PyAny>, field: &str) -> PyResult<String> {
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(s.to_string_lossy().into_owned());
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        // Header bytes are ISO-8859-1 (RFC 9110 §5.5); every byte maps to one char.
        return Ok(b.as_bytes().iter().map(|&c| c as char).collect());
    }
    Err(convert::input_type_error(
        obj.py(),
        field,
        format!(
            "must be str or bytes, not {}",
            obj.get_type().name().map(|n| n.to_string()).unwrap_or_default()
        ),
    ))
}

/// Headers as (name, value) pairs from: `None`; a mapping (`dict`, `requests`'
/// `CaseInsensitiveDict`, `email.message.Message`); an object with `multi_items()` (httpx) ; or
/// an iterable of pairs.
pub(crate) fn headers(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<(String, String)>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(Vec::new());
    };
    let py = obj.py();
    let pairs = if obj.hasattr("multi_items")? {
        obj.call_method0("multi_items")?
    } else if obj.hasattr("items")? {
        obj.call_method0("items")?
    } else if obj.is_instance_of::<PyString>() {
        return Err(convert::input_type_error(
            py,
            "headers",
            "must be a mapping or an iterable of (name, value) pairs, not str".to_owned(),
        ));
    } else {
        obj.clone()
    };
    let iter = pairs.try_iter().map_err(|_| {
        convert::input_type_error(
            py,
            "headers",
            "must be a mapping or an iterable of (name, value) pairs".to_owned(),
        )
    })?;
    let mut out = Vec::new();
    for pair in iter {
        let pair = pair?;
        let (n, v): (Bound<'_, PyAny>, Bound<'_, PyAny>) = pair.extract().map_err(|_| {
            convert::input_type_error(
                py,
                "headers",
                "every item must be a (name, value) pair".to_owned(),
            )
        })?;
        out.push((text(&n, "headers")?, text(&v, "headers")?));
    }
    Ok(out)
}

/// Parses one Retry-After field value (RFC 9110 §10.2.3): delay-seconds or an HTTP-date
/// (IMF-fixdate, RFC 850, asctime), surrounding whitespace allowed. A past date means now (0.0).
/// Never raises for a bad value: garbage, signs and disagreeing lists are `unusable`.
/// `now` is the wall time HTTP-dates are measured from: Unix seconds, an aware datetime, a
/// holdoff clock, or `None` for the system clock.
#[pyfunction]
#[pyo3(signature = (value, now = None))]
pub fn parse_retry_after(value: &Bound<'_, PyAny>, now: Option<&Bound<'_, PyAny>>) -> PyResult<RetryAfter> {
    let v = text(value, "value")?;
    let wall = convert::wall_time_arg(now, "now")?;
    Ok(RetryAfter::new(
        hc::parse_retry_after(&v, wall),
        hc::HintSource::RetryAfter,
    ))
}

/// Reads the delay hint of a response's headers (names case-insensitive). The first of these
/// fields present is the hint, even when unusable: `retry-after-ms`, `x-ms-retry-after-ms`
/// (milliseconds, decimals rounded up), `Retry-After`, `RateLimit` (the structured field's `t`,
/// seconds), `RateLimit-Reset` (delta seconds), `X-RateLimit-Reset` (Unix epoch seconds).
/// Several fields of one name that agree give their value; disagreeing ones are `conflicting`.
/// `headers` is a mapping or an iterable of (name, value) pairs (`str` or `bytes`; text that is
/// not valid Unicode reads as garbage); `now` as in `parse_retry_after`.
#[pyfunction]
#[pyo3(signature = (headers, now = None))]
pub fn hint_from_headers(headers: &Bound<'_, PyAny>, now: Option<&Bound<'_, PyAny>>) -> PyResult<RetryAfter> {
    let h = self::headers(Some(headers))?;
    let wall = convert::wall_time_arg(now, "now")?;
    let (r, s) = hc::hint_from_headers(h.iter().map(|(n, v)| (n.as_str(), v.as_str())), wall);
    Ok(RetryAfter::new(r, s))
}

/// A classified response: the `outcome` the breaker and budget are told, the parsed `hint`, and
/// `should_retry`, the provider's `x-should-retry` header (`True`/`False`, or `None` when absent
/// or neither).
#[pyclass(frozen, module = "holdoff._holdoff")]
pub struct Classification {
    #[pyo3(get)]
    outcome: Py<Outcome>,
    #[pyo3(get)]
    hint: Py<RetryAfter>,
    #[pyo3(get)]
    should_retry: Option<bool>,
}

pub(crate) fn classification(py: Python<'_>, c: hc::Classification) -> PyResult<Classification> {
    Ok(Classification {
        outcome: Py::new(py, Outcome { inner: c.outcome })?,
        hint: Py::new(py, RetryAfter::new(c.hint, c.source))?,
        should_retry: c.should_retry,
    })
}

#[pymethods]
impl Classification {
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "Classification(outcome={}, hint={}, should_retry={})",
            self.outcome.bind(py).repr()?,
            self.hint.bind(py).repr()?,
            match self.should_retry {
                Some(true) => "True",
                Some(false) => "False",
                None => "None",
            }
        ))
    }
}

/// The caller's status as a wide integer, for the core's `check_status` (which refuses a value
/// outside 0..=999 with `InvalidInputError` naming `status`). An int beyond the i64 range saturates,
/// so it is refused by the same rule; a non-int is `InputTypeError`.
pub(crate) fn status_int(obj: &Bound<'_, PyAny>) -> PyResult<i64> {
    convert::int_arg(obj, "status")
}

/// A status checked by the core: 0..=999 (outside 100..=599 it is a broken upstream, classified
/// as a failure), else `InvalidInputError` naming `status`.
pub(crate) fn status_arg(obj: &Bound<'_, PyAny>) -> PyResult<u16> {
    hc::check_status(status_int(obj)?).map_err(|e| convert::input_error(obj.py(), e))
}

/// Turns (status, headers) into an `Outcome`: 1xx-3xx success; 429/503 (`retry_after_statuses`)
/// with a usable non-zero delay hint: retry later; 408, 410, 429, 460 and 5xx (except 501, 505,
/// 511): failure; other statuses: answer. A status outside 100..599 (a 0, a 600, a 999) is a
/// broken upstream: failure. `x-should-retry: false` makes a status from 400 up an answer,
/// `true` makes an answer a failure. `failure_statuses` / `answer_statuses` (each 100..599)
/// override all of that, and `rate_limit_default_wait` (seconds) is the wait of a 429 without a
/// usable hint.
#[pyclass(frozen, module = "holdoff._holdoff")]
pub struct Classifier {
    pub(crate) inner: hc::Classifier,
}

#[pymethods]
impl Classifier {
    #[new]
    #[pyo3(signature = (*, failure_statuses = None, answer_statuses = None,
                        retry_after_statuses = None, rate_limit_default_wait = None))]
    fn new(
        py: Python<'_>,
        failure_statuses: Option<&Bound<'_, PyAny>>,
        answer_statuses: Option<&Bound<'_, PyAny>>,
        retry_after_statuses: Option<&Bound<'_, PyAny>>,
        rate_limit_default_wait: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let mut c = hc::ClassifierConfig::default();
        if let Some(v) = failure_statuses.filter(|o| !o.is_none()) {
            c.failure_statuses = convert::statuses(v, "classifier.failure_statuses")?;
        }
        if let Some(v) = answer_statuses.filter(|o| !o.is_none()) {
            c.answer_statuses = convert::statuses(v, "classifier.answer_statuses")?;
        }
        if let Some(v) = retry_after_statuses.filter(|o| !o.is_none()) {
            c.retry_after_statuses = convert::statuses(v, "classifier.retry_after_statuses")?;
        }
        c.rate_limit_default_wait =
            convert::opt_duration(rate_limit_default_wait, "classifier.rate_limit_default_wait")?;
        let inner = hc::Classifier::new(c).map_err(|e| convert::config_error(py, e))?;
        Ok(Classifier { inner })
    }

    /// Classifies a response. `status` is an int: 0..999 classifies (outside 100..599 as a
    /// failure); any other int raises `InvalidInputError` (a `ValueError`, field `status`), a non-int
    /// `InputTypeError`. `now` is the wall time for HTTP-dates (see `parse_retry_after`).
    #[pyo3(signature = (status, headers = None, now = None))]
    fn classify(
        &self,
        py: Python<'_>,
        status: &Bound<'_, PyAny>,
        headers: Option<&Bound<'_, PyAny>>,
        now: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Classification> {
        let status = status_arg(status)?;
        let h = self::headers(headers)?;
        let wall = convert::wall_time_arg(now, "now")?;
        let c = self
            .inner
            .classify(status, h.iter().map(|(n, v)| (n.as_str(), v.as_str())), wall)
            .map_err(|e| convert::input_error(py, e))?;
        classification(py, c)
    }

    #[getter]
    fn failure_statuses(&self) -> Vec<u16> {
        self.inner.config().failure_statuses.clone()
    }

    #[getter]
    fn answer_statuses(&self) -> Vec<u16> {
        self.inner.config().answer_statuses.clone()
    }

    #[getter]
    fn retry_after_statuses(&self) -> Vec<u16> {
        self.inner.config().retry_after_statuses.clone()
    }

    #[getter]
    fn rate_limit_default_wait(&self) -> Option<f64> {
        self.inner.config().rate_limit_default_wait.map(secs_out)
    }

    fn __repr__(&self) -> String {
        let c = self.inner.config();
        format!(
            "Classifier(failure_statuses={:?}, answer_statuses={:?}, retry_after_statuses={:?})",
            c.failure_statuses, c.answer_statuses, c.retry_after_statuses
        )
    }
}
