//! `ManualClock` and `SystemClock`.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, UNIX_EPOCH};

use holdoff as hc;
use pyo3::prelude::*;

use crate::convert;

/// The clock of objects built without one: one process-wide `SystemClock`, so that a breaker and
/// a budget built without clocks share it (a `Policy` needs one clock for both).
pub(crate) fn default_clock() -> Arc<dyn hc::Clock> {
    static CLOCK: OnceLock<Arc<dyn hc::Clock>> = OnceLock::new();
    Arc::clone(CLOCK.get_or_init(hc::SystemClock::shared))
}

/// The shared clock behind a Python clock object, if `obj` is one.
pub(crate) fn shared_clock(obj: &Bound<'_, PyAny>) -> Option<Arc<dyn hc::Clock>> {
    if let Ok(m) = obj.cast::<ManualClock>() {
        return Some(Arc::clone(&m.get().shared));
    }
    if let Ok(s) = obj.cast::<SystemClock>() {
        return Some(Arc::clone(&s.get().shared));
    }
    None
}

/// The `clock=` argument of constructors.
pub(crate) fn clock_arg(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Arc<dyn hc::Clock>> {
    match obj {
        None => Ok(default_clock()),
        Some(o) if o.is_none() => Ok(default_clock()),
        Some(o) => shared_clock(o).ok_or_else(|| {
            convert::type_error(
                o.py(),
                "clock",
                format!(
                    "must be a holdoff.ManualClock or holdoff.SystemClock, not {}",
                    o.get_type().name().map(|n| n.to_string()).unwrap_or_default()
                ),
            )
        }),
    }
}

/// A clock that moves only when told to, for tests. Time is float seconds since the clock's
/// origin; `wall_origin` is the Unix time (seconds) of that origin, used only to turn
/// Retry-After HTTP-dates into delays.
#[pyclass(frozen, module = "holdoff._holdoff")]
pub struct ManualClock {
    clock: hc::ManualClock,
    shared: Arc<dyn hc::Clock>,
}

#[pymethods]
impl ManualClock {
    #[new]
    #[pyo3(signature = (*, wall_origin = None))]
    fn new(wall_origin: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let origin = match wall_origin {
            None => UNIX_EPOCH,
            Some(o) if o.is_none() => UNIX_EPOCH,
            Some(o) => convert::wall_time(Some(o), "wall_origin")?,
        };
        let clock = hc::ManualClock::with_wall_origin(origin);
        Ok(ManualClock {
            shared: Arc::new(clock.clone()),
            clock,
        })
    }

    /// Moves the clock to `t` seconds since its origin. Raises `ClockBackwardsError` (a
    /// `ValueError`) if `t` is earlier than now, `InvalidInputError`/`InputTypeError` for a bad
    /// number.
    fn set(&self, py: Python<'_>, t: &Bound<'_, PyAny>) -> PyResult<()> {
        let d = convert::duration_arg(t, "t")?;
        self.clock
            .set(hc::Instant::from_nanos(nanos(d)))
            .map_err(|e| convert::clock_error(py, e))
    }

    /// Moves the clock forward by `d` seconds (float or timedelta); returns the new time.
    fn advance(&self, d: &Bound<'_, PyAny>) -> PyResult<f64> {
        let d = convert::duration_arg(d, "d")?;
        Ok(self.clock.advance(d).as_nanos() as f64 / 1e9)
    }

    /// The time in seconds since the origin (not counted as a reading).
    fn now(&self) -> f64 {
        self.clock.peek().as_nanos() as f64 / 1e9
    }

    /// The wall time (Unix seconds) that corresponds to now.
    fn wall_time(&self) -> f64 {
        let t = self.clock.peek();
        wall_secs(self.shared.wall_at(t))
    }

    /// The wall time (Unix seconds) of the clock's origin.
    #[getter]
    fn wall_origin(&self) -> f64 {
        wall_secs(self.clock.wall_origin())
    }

    /// How many times holdoff read this clock (tests check the closed fast path reads none).
    #[getter]
    fn reads(&self) -> u64 {
        self.clock.reads()
    }

    fn __repr__(&self) -> String {
        format!(
            "ManualClock(now={:?}, wall_origin={:?})",
            self.now(),
            self.wall_origin()
        )
    }
}

/// The process's monotonic clock; wall time is derived from one wall reading taken when the
/// clock is made. Objects built without a clock share one process-wide `SystemClock`.
#[pyclass(frozen, module = "holdoff._holdoff")]
pub struct SystemClock {
    shared: Arc<dyn hc::Clock>,
}

#[pymethods]
impl SystemClock {
    #[new]
    fn new() -> Self {
        SystemClock {
            shared: hc::SystemClock::shared(),
        }
    }

    /// The process-wide clock used by objects built without `clock=`.
    #[staticmethod]
    fn default() -> Self {
        SystemClock {
            shared: default_clock(),
        }
    }

    /// Seconds since this clock's origin (one monotonic reading).
    fn now(&self) -> f64 {
        self.shared.now().as_nanos() as f64 / 1e9
    }

    /// The wall time (Unix seconds) now, derived from one monotonic reading.
    fn wall_time(&self) -> f64 {
        wall_secs(self.shared.wall_at(self.shared.now()))
    }

    fn __repr__(&self) -> String {
        "SystemClock()".to_owned()
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn wall_secs(t: std::time::SystemTime) -> f64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs_f64(),
        Err(e) => -e.duration().as_secs_f64(),
    }
}
