//! A fleet: one breaker shared by every worker calling the same upstream, through a store
//! (`docs/fleet.md`). The rules are the core's (`holdoff::fleet`) and the IO is `holdoff-fleet`'s;
//! this module converts the option and the tick's report.

use std::time::Duration as StdDuration;

use holdoff::interop::config::{FleetSpec, HoldoffConfig};

use crate::{count, Duration, HoldoffError};

/// The `fleet` option of [`crate::Breaker`]: where the shared record lives and how this worker
/// keeps its view of it. Absent durations take the core's defaults.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct FleetConfig {
    /// The store: `redis://[user:password@]host[:port][/db]`, `unix:///path/redis.sock`,
    /// `rediss://...` (only in a build with TLS), or `memory://<name>` (this process only, ticked
    /// by hand with `Breaker.syncFleet()`: for tests).
    pub url: String,
    /// The shared record's key, the upstream's name: 1..=200 bytes, no whitespace or control
    /// characters. Every worker calling that upstream uses the same key.
    pub key: String,
    /// Period of the background sync (> 0; default 50 ms).
    #[uniffi(default)]
    pub refresh: Option<Duration>,
    /// With no successful sync for this long the worker detaches and runs as a purely local
    /// breaker until a sync succeeds again (> 0; default 1 s).
    #[uniffi(default)]
    pub fallback_after: Option<Duration>,
    /// Bound on one store round trip: connect, read, write (> 0; default 50 ms).
    #[uniffi(default)]
    pub timeout: Option<Duration>,
    /// The shared record expires when no worker wrote it for this long (> 0; default 1 h).
    #[uniffi(default)]
    pub ttl: Option<Duration>,
}

impl FleetConfig {
    /// The core's configuration, validated by the core through the neutral format (so defaults,
    /// field names and rules are its own); `group` refuses any fleet with the field `fleet`.
    pub(crate) fn to_core(
        fleet: Option<&FleetConfig>,
        group: bool,
    ) -> Result<Option<holdoff::FleetConfig>, HoldoffError> {
        let spec = fleet.map(|f| FleetSpec {
            url: Some(f.url.clone()),
            key: Some(f.key.clone()),
            refresh_ms: f.refresh.map(Duration::num),
            fallback_after_ms: f.fallback_after.map(Duration::num),
            timeout_ms: f.timeout.map(Duration::num),
            ttl_ms: f.ttl.map(Duration::num),
        });
        let config = HoldoffConfig {
            fleet: spec,
            ..HoldoffConfig::default()
        };
        Ok(config.fleet_config(group)?)
    }
}

/// Links `breaker` to its fleet: background threads for a Redis url, none for `memory://`.
pub(crate) fn attach(
    breaker: &std::sync::Arc<holdoff::Breaker>,
    config: &holdoff::FleetConfig,
) -> Result<holdoff_fleet::Fleet, HoldoffError> {
    holdoff_fleet::attach(breaker, config).map_err(|e| match e {
        holdoff_fleet::FleetError::Config(c) => c.into(),
        // The url names a store this build cannot reach: a configuration error on the url.
        holdoff_fleet::FleetError::TlsNotBuilt => config_error(
            "fleet.url",
            "is rediss://, which needs a build of the native library with TLS".to_owned(),
        ),
        // A new breaker has no fleet yet, and attaching neither syncs nor connects: these
        // cannot happen here, and are told as the configuration that was refused.
        other => config_error("fleet", other.to_string()),
    })
}

fn config_error(field: &str, rule: String) -> HoldoffError {
    holdoff::ConfigError {
        field: field.to_owned(),
        rule,
    }
    .into()
}

/// The fleet's shared record's state; `stableName()` is the core's name for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, uniffi::Enum)]
pub enum FleetState {
    /// Workers call freely (each still trips on its own evidence and tells the fleet).
    Closed,
    /// The fleet holds off: probes only against a grant.
    Open,
}

impl From<holdoff::fleet::FleetState> for FleetState {
    fn from(s: holdoff::fleet::FleetState) -> Self {
        match s {
            holdoff::fleet::FleetState::Closed => FleetState::Closed,
            holdoff::fleet::FleetState::Open => FleetState::Open,
        }
    }
}

impl From<FleetState> for holdoff::fleet::FleetState {
    fn from(s: FleetState) -> Self {
        match s {
            FleetState::Closed => holdoff::fleet::FleetState::Closed,
            FleetState::Open => holdoff::fleet::FleetState::Open,
        }
    }
}

#[uniffi::export]
impl FleetState {
    /// The conformance suite's stable name, the core's: `closed`, `open`.
    pub fn stable_name(&self) -> String {
        holdoff::fleet::FleetState::from(*self).name().to_owned()
    }
}

/// The fleet's shared record as one sync saw it. Times are on the store's clock, as a duration
/// since its origin: the Unix epoch for Redis (`TIME`), the breaker's clock for `memory://` and
/// for a Redis url with `?clock=caller`.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct FleetRecord {
    /// The fleet's open episode (0: never opened).
    pub episode: i64,
    pub state: FleetState,
    /// When the fleet's next probe may go (store clock).
    pub next_probe_at: Duration,
    /// Probe grants in the current probe window.
    pub window_granted: i64,
    /// Answers to this episode's probes counted toward closing.
    pub recoveries: i64,
    /// Index of the open interval's backoff step.
    pub step: i64,
    /// Probe grants outstanding (at most `maxProbesInFlight`).
    pub leases: i64,
    /// When a worker last changed the record (store clock).
    pub updated_at: Duration,
}

fn store_time(ms: u64) -> Duration {
    Duration::from_std(StdDuration::from_millis(ms))
}

impl From<&holdoff::fleet::FleetRecord> for FleetRecord {
    fn from(r: &holdoff::fleet::FleetRecord) -> Self {
        FleetRecord {
            episode: count(r.episode),
            state: r.state.into(),
            next_probe_at: store_time(r.next_probe_at),
            window_granted: i64::from(r.window_granted),
            recoveries: i64::from(r.recoveries),
            step: i64::from(r.step),
            leases: count(r.leases.len() as u64),
            updated_at: store_time(r.updated_at),
        }
    }
}

/// What one tick of the fleet (`Breaker.syncFleet()`) did.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct FleetSync {
    /// Whether the exchange with the store succeeded (and the view was applied).
    pub ok: bool,
    /// Whether the breaker follows the fleet after this tick.
    pub attached: bool,
    /// Whether this tick detached the breaker (`fallbackAfter` without a successful sync).
    pub detached: bool,
    /// Whether this tick re-attached a detached breaker.
    pub reattached: bool,
    /// Whether this tick claimed a probe grant and got it (the breaker's probe is due now).
    pub granted: bool,
    /// Operations sent to the store.
    pub sent: i64,
    /// The shared record after the exchange; null when it failed.
    pub record: Option<FleetRecord>,
    /// Why the exchange failed; null when it succeeded.
    pub error: Option<String>,
}

impl From<holdoff::fleet::SyncReport> for FleetSync {
    fn from(r: holdoff::fleet::SyncReport) -> Self {
        FleetSync {
            ok: r.ok,
            attached: r.attached,
            detached: r.detached,
            reattached: r.reattached,
            granted: r.granted,
            sent: count(r.sent as u64),
            record: r.record.as_ref().map(FleetRecord::from),
            error: r.error.map(|e| e.to_string()),
        }
    }
}

/// For tests: controls the in-process store `memory://<name>`: `"down"` makes its exchanges
/// fail (as a Redis that cannot be reached), `"up"` undoes that, `"flush"` wipes its records.
/// Any other `action` is `InvalidInput` naming `action`.
#[uniffi::export]
pub fn memory_store_control(name: String, action: String) -> Result<(), HoldoffError> {
    Ok(holdoff::fleet::memory_store_control(&name, &action)?)
}

/// For tests: wipes the in-process store `memory://<name>` and brings it up (a fresh store,
/// before each test that uses it).
#[uniffi::export]
pub fn memory_store_reset(name: String) {
    holdoff::fleet::memory_store_reset(&name);
}
