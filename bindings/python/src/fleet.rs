//! The fleet a breaker shares with other workers (`holdoff_fleet`, docs/fleet.md): its
//! configuration, attaching it when the breaker is built, one tick by hand, and the in-memory
//! store's control for tests. Every rule is the core's; the background work (a Redis url) is
//! `holdoff_fleet`'s threads, which never take the GIL except to run a state-change callback.
//! So every call here that may wait on them (a tick, a close) releases the GIL first.

use std::sync::Arc;

use holdoff as hc;
use holdoff::fleet::{FleetConfig as CoreFleetConfig, FleetRecord as CoreRecord, SyncReport};
use holdoff_fleet::{Fleet, FleetError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString, PyType};

use crate::convert::{self, secs_out};

/// The options a `fleet` mapping may carry, in the order `FleetConfig` takes them.
const OPTIONS: [&str; 6] = ["url", "key", "refresh", "fallback_after", "timeout", "ttl"];

fn fleet_error_cls(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    static CELL: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    CELL.import(py, "holdoff._errors", "FleetError")
}

/// `holdoff.FleetError` (a `RuntimeError`, code `fleet_error`) with `message`.
pub(crate) fn fleet_error(py: Python<'_>, message: String) -> PyErr {
    match fleet_error_cls(py).and_then(|c| c.call1((message,))) {
        Ok(instance) => PyErr::from_value(instance),
        Err(e) => e,
    }
}

/// `InvalidConfigError` naming `field`.
pub(crate) fn refused(py: Python<'_>, field: &str, rule: impl Into<String>) -> PyErr {
    convert::config_error(
        py,
        hc::ConfigError {
            field: field.to_owned(),
            rule: rule.into(),
        },
    )
}

fn text(obj: &Bound<'_, PyAny>, field: &str) -> PyResult<String> {
    if !obj.is_instance_of::<PyString>() {
        let name = obj.get_type().name().map(|n| n.to_string()).unwrap_or_default();
        return Err(convert::type_error(
            obj.py(),
            field,
            format!("must be a str, not {name}"),
        ));
    }
    obj.extract::<String>()
}

/// A url with its password, if any, shown as `***` (`redis://user:***@host`, `?pass=***`).
fn redacted(url: &str) -> String {
    let mut out = url.to_owned();
    if let Some(scheme_end) = out.find("://") {
        let rest = scheme_end + 3;
        if let Some(at) = out[rest..].find('@').map(|i| rest + i) {
            if let Some(colon) = out[rest..at].find(':').map(|i| rest + i) {
                out.replace_range(colon + 1..at, "***");
            }
        }
    }
    if let Some(q) = out.find('?') {
        let query: Vec<String> = out[q + 1..]
            .split('&')
            .map(|kv| match kv.split_once('=') {
                Some((k, _)) if k == "pass" || k == "password" => format!("{k}=***"),
                _ => kv.to_owned(),
            })
            .collect();
        out.replace_range(q + 1.., &query.join("&"));
    }
    out
}

/// Where a breaker's fleet keeps its shared record and how it syncs with it. Durations in
/// seconds (float or timedelta); `None` takes the default.
///
/// * `url`: `memory://<name>` (this process's in-memory store: no thread, tick it with
///   `Breaker.sync_fleet()`; for tests), `redis://[user:password@]host[:port][/db]`,
///   `unix:///path/redis.sock[?db=N&user=U&pass=P]` (a background thread per breaker);
///   `rediss://` is refused by this build (no TLS).
/// * `key`: the upstream's name, shared by every worker calling it (1..200 bytes, no
///   whitespace or control characters).
/// * `refresh` (0.05): period of the background sync.
/// * `fallback_after` (1.0): with no successful sync for this long the breaker detaches and
///   runs purely local until a sync succeeds again.
/// * `timeout` (0.05): bound on one store round trip (connect, read, write).
/// * `ttl` (3600.0): the shared record expires when no worker wrote it for this long.
///
/// Raises `InvalidConfigError` / `ConfigTypeError` naming the field (`fleet.url`, `fleet.key`,
/// `fleet.refresh`, `fleet.fallback_after`, `fleet.timeout`, `fleet.ttl`).
#[pyclass(frozen, module = "holdoff._holdoff")]
pub struct FleetConfig {
    pub(crate) inner: CoreFleetConfig,
}

impl FleetConfig {
    fn build(
        url: &Bound<'_, PyAny>,
        key: &Bound<'_, PyAny>,
        durations: [Option<&Bound<'_, PyAny>>; 4],
    ) -> PyResult<CoreFleetConfig> {
        let py = url.py();
        let mut c = CoreFleetConfig::new(text(url, "fleet.url")?, text(key, "fleet.key")?);
        let [refresh, fallback_after, timeout, ttl] = durations;
        let fields = [
            (refresh, "fleet.refresh", &mut c.refresh),
            (fallback_after, "fleet.fallback_after", &mut c.fallback_after),
            (timeout, "fleet.timeout", &mut c.timeout),
            (ttl, "fleet.ttl", &mut c.ttl),
        ];
        for (value, field, slot) in fields {
            if let Some(d) = convert::opt_duration(value, field)? {
                *slot = d;
            }
        }
        c.validate().map_err(|e| convert::config_error(py, e))?;
        Ok(c)
    }
}

#[pymethods]
impl FleetConfig {
    #[new]
    #[pyo3(signature = (url, key, *, refresh = None, fallback_after = None, timeout = None, ttl = None))]
    fn new(
        url: &Bound<'_, PyAny>,
        key: &Bound<'_, PyAny>,
        refresh: Option<&Bound<'_, PyAny>>,
        fallback_after: Option<&Bound<'_, PyAny>>,
        timeout: Option<&Bound<'_, PyAny>>,
        ttl: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        Ok(FleetConfig {
            inner: Self::build(url, key, [refresh, fallback_after, timeout, ttl])?,
        })
    }

    /// The store's url, as given.
    #[getter]
    fn url(&self) -> &str {
        &self.inner.url
    }

    /// The shared record's key.
    #[getter]
    fn key(&self) -> &str {
        &self.inner.key
    }

    /// Period of the background sync, seconds.
    #[getter]
    fn refresh(&self) -> f64 {
        secs_out(self.inner.refresh)
    }

    /// Seconds without a successful sync after which the breaker runs purely local.
    #[getter]
    fn fallback_after(&self) -> f64 {
        secs_out(self.inner.fallback_after)
    }

    /// Bound on one store round trip, seconds.
    #[getter]
    fn timeout(&self) -> f64 {
        secs_out(self.inner.timeout)
    }

    /// Expiry of an unused shared record, seconds.
    #[getter]
    fn ttl(&self) -> f64 {
        secs_out(self.inner.ttl)
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<FleetConfig>()
            .is_ok_and(|o| o.get().inner == self.inner)
    }

    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (&self.inner.url, &self.inner.key).hash(&mut h);
        h.finish()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let url = PyString::new(py, &redacted(&self.inner.url)).repr()?;
        let key = PyString::new(py, &self.inner.key).repr()?;
        Ok(format!(
            "FleetConfig(url={url}, key={key}, refresh={:?}, fallback_after={:?}, timeout={:?}, ttl={:?})",
            self.refresh(),
            self.fallback_after(),
            self.timeout(),
            self.ttl()
        ))
    }
}

/// The `fleet` argument of a breaker: a `FleetConfig`, or a mapping with its keyword names
/// (`{"url": ..., "key": ..., "refresh": 0.02}`); `None` is no fleet.
pub(crate) fn fleet_arg(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<CoreFleetConfig>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(None);
    };
    let py = obj.py();
    if let Ok(c) = obj.cast::<FleetConfig>() {
        return Ok(Some(c.get().inner.clone()));
    }
    let Ok(map) = obj.cast::<PyDict>() else {
        let name = obj.get_type().name().map(|n| n.to_string()).unwrap_or_default();
        return Err(convert::type_error(
            py,
            "fleet",
            format!("must be a holdoff.FleetConfig or a dict of its options, not {name}"),
        ));
    };
    let mut values: [Option<Bound<'_, PyAny>>; 6] = Default::default();
    for (k, v) in map.iter() {
        let name = k.extract::<String>().ok();
        let Some(i) = name.as_deref().and_then(|n| OPTIONS.iter().position(|o| *o == n)) else {
            return Err(convert::type_error(
                py,
                &format!("fleet.{}", k.str()?),
                format!("is not a fleet option (one of {})", OPTIONS.join(", ")),
            ));
        };
        values[i] = Some(v);
    }
    let [url, key, refresh, fallback_after, timeout, ttl] = values;
    fn required<'py>(
        v: Option<Bound<'py, PyAny>>,
        py: Python<'py>,
        field: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        v.filter(|o| !o.is_none())
            .ok_or_else(|| refused(py, field, "is required"))
    }
    let (url, key) = (required(url, py, "fleet.url")?, required(key, py, "fleet.key")?);
    let durations = [
        refresh.as_ref(),
        fallback_after.as_ref(),
        timeout.as_ref(),
        ttl.as_ref(),
    ];
    FleetConfig::build(&url, &key, durations).map(Some)
}

/// Links `breaker` to `config`'s fleet (a Redis url makes its first exchange here, bounded by
/// the fleet's `timeout`, then starts its background threads; a store that does not answer
/// leaves the breaker detached, not an error). The GIL is released meanwhile, so other Python
/// threads run during the round trip.
pub(crate) fn attach(
    py: Python<'_>,
    breaker: &Arc<hc::Breaker>,
    config: &CoreFleetConfig,
) -> PyResult<Fleet> {
    py.detach(|| holdoff_fleet::attach(breaker, config))
        .map_err(|e| match e {
            FleetError::Config(c) => convert::config_error(py, c),
            e @ FleetError::TlsNotBuilt => refused(py, "fleet.url", e.to_string()),
            // A breaker built here has no fleet yet, and a failed first exchange is not an error.
            e => fleet_error(py, e.to_string()),
        })
}

/// One tick of `fleet` with the GIL released (the background thread may need it meanwhile to
/// run a state-change callback).
pub(crate) fn sync(py: Python<'_>, fleet: &Fleet) -> PyResult<FleetSync> {
    match py.detach(|| fleet.sync_now()) {
        Ok(r) => FleetSync::new(py, r),
        Err(e) => Err(fleet_error(py, e.to_string())),
    }
}

/// Closes `fleet` (joins its threads) with the GIL released, for the same reason.
pub(crate) fn close(py: Python<'_>, fleet: &Fleet) {
    py.detach(|| fleet.close());
}

/// The fleet's shared record as one tick saw it. Store-clock times are seconds on the store's
/// clock (Redis `TIME`, Unix seconds; the caller's clock for `memory://`).
#[pyclass(frozen, module = "holdoff._holdoff")]
pub struct FleetRecord {
    /// `"closed"` or `"open"`.
    #[pyo3(get)]
    state: &'static str,
    /// +1 on every open from closed; 0: never opened.
    #[pyo3(get)]
    episode: u64,
    /// Answers to current-episode probes counted this episode.
    #[pyo3(get)]
    recoveries: u32,
    /// Failed probes this episode (the open interval's step).
    #[pyo3(get)]
    step: u32,
    /// From when the fleet's next probe may be granted (while open), store seconds.
    #[pyo3(get)]
    next_probe_at: f64,
    /// Grants made in the current probe window.
    #[pyo3(get)]
    window_granted: u32,
    /// Probe grants outstanding.
    #[pyo3(get)]
    leases: usize,
    /// The last change, store seconds.
    #[pyo3(get)]
    updated_at: f64,
}

fn store_secs(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

impl From<CoreRecord> for FleetRecord {
    fn from(r: CoreRecord) -> Self {
        FleetRecord {
            state: r.state.name(),
            episode: r.episode,
            recoveries: r.recoveries,
            step: r.step,
            next_probe_at: store_secs(r.next_probe_at),
            window_granted: r.window_granted,
            leases: r.leases.len(),
            updated_at: store_secs(r.updated_at),
        }
    }
}

#[pymethods]
impl FleetRecord {
    fn __repr__(&self) -> String {
        format!(
            "FleetRecord(state='{}', episode={}, recoveries={}, step={}, next_probe_at={:?}, \
             window_granted={}, leases={}, updated_at={:?})",
            self.state,
            self.episode,
            self.recoveries,
            self.step,
            self.next_probe_at,
            self.window_granted,
            self.leases,
            self.updated_at
        )
    }
}

/// What one tick (`Breaker.sync_fleet()`) did.
#[pyclass(frozen, module = "holdoff._holdoff")]
pub struct FleetSync {
    /// Whether the exchange with the store succeeded (and the view was applied).
    #[pyo3(get)]
    ok: bool,
    /// Whether the breaker follows the fleet after this tick.
    #[pyo3(get)]
    attached: bool,
    /// Whether this tick detached the breaker (no successful sync for `fallback_after`).
    #[pyo3(get)]
    detached: bool,
    /// Whether this tick re-attached a detached breaker.
    #[pyo3(get)]
    reattached: bool,
    /// Whether this tick claimed a probe grant and got it.
    #[pyo3(get)]
    granted: bool,
    /// Operations sent to the store.
    #[pyo3(get)]
    sent: usize,
    /// The shared record after this tick; `None` when the exchange failed.
    #[pyo3(get)]
    record: Option<Py<FleetRecord>>,
    /// Why the exchange failed; `None` when it succeeded.
    #[pyo3(get)]
    error: Option<String>,
}

impl FleetSync {
    fn new(py: Python<'_>, r: SyncReport) -> PyResult<Self> {
        let record = r.record.map(|x| Py::new(py, FleetRecord::from(x))).transpose()?;
        Ok(FleetSync {
            ok: r.ok,
            attached: r.attached,
            detached: r.detached,
            reattached: r.reattached,
            granted: r.granted,
            sent: r.sent,
            record,
            error: r.error.map(|e| e.to_string()),
        })
    }
}

#[pymethods]
impl FleetSync {
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let record = match &self.record {
            Some(r) => r.bind(py).repr()?.to_string(),
            None => "None".to_owned(),
        };
        let b = |v: bool| if v { "True" } else { "False" };
        Ok(format!(
            "FleetSync(ok={}, attached={}, detached={}, reattached={}, granted={}, sent={}, \
             record={record}, error={})",
            b(self.ok),
            b(self.attached),
            b(self.detached),
            b(self.reattached),
            b(self.granted),
            self.sent,
            self.error.as_ref().into_pyobject(py)?.repr()?
        ))
    }
}

/// For tests: `action` on the in-memory store `memory://<name>` of this process: `"down"`
/// (every exchange fails, as a store that is unreachable), `"up"` (back), `"flush"` (the
/// shared record is wiped, as a Redis `FLUSHALL`). Raises `InvalidInputError` naming `action`
/// for any other action.
#[pyfunction]
pub(crate) fn memory_store_control(py: Python<'_>, name: &str, action: &str) -> PyResult<()> {
    hc::fleet::memory_store_control(name, action).map_err(|e| convert::input_error(py, e))
}

/// For tests: the in-memory store `memory://<name>` of this process emptied and up, as new.
#[pyfunction]
pub(crate) fn memory_store_reset(name: &str) {
    hc::fleet::memory_store_reset(name);
}
