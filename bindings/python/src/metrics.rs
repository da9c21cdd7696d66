//! The metric model (the core's `holdoff::metrics`, docs/metrics.md): the table as `METRICS`,
//! a tuple of `MetricDef`, and an object's readings as `MetricReading`s. The exporters
//! (`holdoff.otel`, `holdoff.prometheus`) are Python code over these readings.

use holdoff::metrics::{self as hm, Sample};
use pyo3::gc::PyVisit;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use pyo3::PyTraverseError;

/// One row of the metric table (docs/metrics.md): `name` (OpenTelemetry name,
/// `holdoff.<object>.<what>`), `kind` (`"counter"`: cumulative since counting started, or
/// `"gauge"`: the current value), `unit` (UCUM: `"s"`, `"1"`, `"{call}"`), `description` (one
/// sentence), `attribute` (the metric's own attribute key, `None` when it has none) and
/// `values` (that attribute's values, in code order; empty without one).
#[pyclass(frozen, module = "holdoff._holdoff")]
pub struct MetricDef {
    def: &'static hm::MetricDef,
}

#[pymethods]
impl MetricDef {
    #[getter]
    fn name(&self) -> &'static str {
        self.def.name
    }

    #[getter]
    fn kind(&self) -> &'static str {
        self.def.kind.name()
    }

    #[getter]
    fn unit(&self) -> &'static str {
        self.def.unit
    }

    #[getter]
    fn description(&self) -> &'static str {
        self.def.description
    }

    #[getter]
    fn attribute(&self) -> Option<&'static str> {
        self.def.attribute
    }

    #[getter]
    fn values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.def.values)
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<MetricDef>()
            .is_ok_and(|o| std::ptr::eq(o.get().def, self.def))
    }

    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.def.name.hash(&mut h);
        h.finish()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let d = self.def;
        Ok(format!(
            "MetricDef(name='{}', kind='{}', unit='{}', attribute={}, values={})",
            d.name,
            d.kind.name(),
            d.unit,
            d.attribute
                .map_or_else(|| "None".to_owned(), |a| format!("'{a}'")),
            self.values(py)?.repr()?
        ))
    }
}

/// The table, in the core's order (its index is the C ABI's metric code).
pub(crate) fn table(py: Python<'_>) -> PyResult<Bound<'_, PyTuple>> {
    let defs = hm::METRICS
        .iter()
        .map(|def| Py::new(py, MetricDef { def }))
        .collect::<PyResult<Vec<_>>>()?;
    PyTuple::new(py, defs)
}

/// One reading of an object's metrics: the series `name` (a `MetricDef.name`), its
/// `attributes` (the metric's own, such as `{"state": "open"}`, and `upstream` for a group's
/// breakers; `{}` for none) and `value` (a float in the metric's unit: a count, seconds for a
/// duration, 1 or 0 for a state, tokens, keys).
#[pyclass(frozen, freelist = 64, module = "holdoff._holdoff")]
pub struct MetricReading {
    #[pyo3(get)]
    name: Py<PyString>,
    #[pyo3(get)]
    attributes: Py<PyDict>,
    #[pyo3(get)]
    value: f64,
}

#[pymethods]
impl MetricReading {
    /// A reading made by hand (to compare with): `attributes` is copied into a new dict.
    #[new]
    fn new(name: Bound<'_, PyString>, attributes: &Bound<'_, PyDict>, value: f64) -> PyResult<Self> {
        Ok(MetricReading {
            name: name.unbind(),
            attributes: attributes.copy()?.unbind(),
            value,
        })
    }

    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        let Ok(o) = other.cast::<MetricReading>() else {
            return Ok(false);
        };
        let o = o.get();
        Ok(o.value == self.value
            && o.name.bind(py).as_any().eq(self.name.bind(py))?
            && o.attributes.bind(py).as_any().eq(self.attributes.bind(py))?)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "MetricReading(name={}, attributes={}, value={:?})",
            self.name.bind(py).repr()?,
            self.attributes.bind(py).repr()?,
            self.value
        ))
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.attributes)
    }
}

/// Appends `samples` to `out` as readings, with `upstream` (a group's key) as an attribute.
fn push(py: Python<'_>, out: &Bound<'_, PyList>, samples: &[Sample], upstream: Option<&str>) -> PyResult<()> {
    for s in samples {
        let attributes = PyDict::new(py);
        if let Some((k, v)) = s.attribute_pair() {
            attributes.set_item(PyString::intern(py, k), PyString::intern(py, v))?;
        }
        if let Some(u) = upstream {
            attributes.set_item(pyo3::intern!(py, "upstream"), u)?;
        }
        let r = MetricReading {
            name: PyString::intern(py, s.name()).unbind(),
            attributes: attributes.unbind(),
            value: s.value,
        };
        out.append(Py::new(py, r)?)?;
    }
    Ok(())
}

/// An object's samples (a breaker's, a policy's, a quota's) as a list of readings.
pub(crate) fn readings<'py>(py: Python<'py>, samples: &[Sample]) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    push(py, &out, samples, None)?;
    Ok(out)
}

/// A group's readings: its own series, then each kept breaker's with `upstream` = its key.
pub(crate) fn group_readings<'py>(py: Python<'py>, m: &hm::GroupMetrics) -> PyResult<Bound<'py, PyList>> {
    let out = readings(py, &m.group)?;
    for (key, samples) in &m.breakers {
        push(py, &out, samples, Some(key))?;
    }
    Ok(out)
}
