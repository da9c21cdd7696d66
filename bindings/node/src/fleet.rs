//! The fleet a breaker shares with other workers (`holdoff_fleet`, docs/fleet.md): attaching it
//! when the breaker is built, one tick by hand, closing it, and the in-memory store's control
//! for tests. Every rule is the core's; the background work is `holdoff_fleet`'s threads.
//!
//! The breaker's handle owns its `Fleet`: `breakerClose` closes it, and so does the handle's
//! finalizer when JavaScript collects the breaker (`Fleet`'s drop stops and joins its threads).
//! A tick and a close touch the store (a Redis round trip, bounded by the fleet's `timeout`), so
//! they run on the libuv thread pool and JavaScript gets a Promise.

use std::sync::Arc;

use holdoff::fleet::{FleetConfig, SyncReport};
use holdoff::interop::memory_store_control;
use holdoff::Breaker;
use holdoff_fleet::{Fleet, FleetError};
use napi::bindgen_prelude::*;
use napi::ValueType;
use napi_derive::napi;

use crate::breaker::BreakerBox;
use crate::err::{self, Kind};
use crate::opts;

/// Attaches `breaker` to the fleet `config` names (`None`: no fleet). `RangeError`
/// `invalid_config` naming the field the fleet refuses.
pub(crate) fn attach(
    env: &Env,
    breaker: &Arc<Breaker>,
    config: Option<FleetConfig>,
) -> Result<Option<Arc<Fleet>>> {
    let Some(config) = config else { return Ok(None) };
    match holdoff_fleet::attach(breaker, &config) {
        Ok(f) => Ok(Some(Arc::new(f))),
        Err(FleetError::Config(c)) => Err(err::config(env, &c)),
        Err(e @ FleetError::TlsNotBuilt) => Err(err::throw(
            env,
            Kind::Range,
            "invalid_config",
            format!("invalid configuration: {e}"),
            Some("fleet.url"),
        )),
        // A breaker built here has no fleet yet, and a first exchange that fails is not an
        // error (the breaker starts detached).
        Err(e) => Err(err::throw(env, Kind::Plain, "fleet_error", e.to_string(), None)),
    }
}

/// What one tick did (`Breaker.syncFleet()`), as `holdoff.d.ts` `FleetSync` describes it.
#[napi(object)]
pub struct FleetSync {
    /// Whether the exchange with the store succeeded (and the view was applied).
    pub ok: bool,
    /// Whether the breaker follows the fleet after this tick.
    pub attached: bool,
    /// Whether this tick detached the breaker (no successful sync for `fallbackAfterMs`).
    pub detached: bool,
    /// Whether this tick re-attached a detached breaker.
    pub reattached: bool,
    /// Whether this tick claimed a probe grant and got it.
    pub granted: bool,
    /// Operations sent to the store.
    pub sent: u32,
    /// The shared record as of this tick; `null` when the exchange failed.
    pub record: Option<FleetRecordView>,
    /// Why the exchange failed (`null` when it succeeded).
    pub error: Option<String>,
    /// Whether the fleet was closed before this tick (which then did nothing; JavaScript throws).
    pub closed: bool,
}

/// The fleet's shared record (store-clock times in the store's milliseconds).
#[napi(object)]
pub struct FleetRecordView {
    /// `closed` or `open`.
    pub state: String,
    /// The fleet's episode: +1 on every open from closed; 0 = never opened.
    pub episode: f64,
    /// Answers to current-episode probes counted this episode.
    pub recoveries: u32,
    /// Failed probes this episode.
    pub step: u32,
    /// Store ms from which the fleet's next probe may be granted (while open).
    pub next_probe_at: f64,
    /// Grants made in the current probe window.
    pub window_granted: u32,
    /// Probe grants outstanding.
    pub leases: u32,
    /// Store ms of the last change.
    pub updated_at: f64,
}

fn sync_view(r: SyncReport) -> FleetSync {
    FleetSync {
        ok: r.ok,
        attached: r.attached,
        detached: r.detached,
        reattached: r.reattached,
        granted: r.granted,
        sent: u32::try_from(r.sent).unwrap_or(u32::MAX),
        record: r.record.map(|x| FleetRecordView {
            state: x.state.name().to_owned(),
            episode: x.episode as f64,
            recoveries: x.recoveries,
            step: x.step,
            next_probe_at: x.next_probe_at as f64,
            window_granted: x.window_granted,
            leases: u32::try_from(x.leases.len()).unwrap_or(u32::MAX),
            updated_at: x.updated_at as f64,
        }),
        error: r.error.map(|e| e.to_string()),
        closed: false,
    }
}

/// One tick of a breaker's fleet, off the JavaScript thread.
pub struct SyncTask(Arc<Fleet>);

impl Task for SyncTask {
    type Output = FleetSync;
    type JsValue = FleetSync;

    fn compute(&mut self) -> Result<FleetSync> {
        Ok(match self.0.sync_now() {
            Ok(r) => sync_view(r),
            Err(_) => FleetSync {
                ok: false,
                attached: false,
                detached: false,
                reattached: false,
                granted: false,
                sent: 0,
                record: None,
                error: None,
                closed: true,
            },
        })
    }

    fn resolve(&mut self, _env: Env, output: FleetSync) -> Result<FleetSync> {
        Ok(output)
    }
}

/// Closes a breaker's fleet (joins its threads) off the JavaScript thread.
pub struct CloseTask(Option<Arc<Fleet>>);

impl Task for CloseTask {
    type Output = ();
    type JsValue = ();

    fn compute(&mut self) -> Result<()> {
        if let Some(f) = self.0.take() {
            f.close();
        }
        Ok(())
    }

    fn resolve(&mut self, _env: Env, _output: ()) -> Result<()> {
        Ok(())
    }
}

/// One tick of the breaker's fleet now: `FleetSync`, or `null` when the breaker has no fleet.
/// A store failure is in the result (`ok: false`), never a rejection; a closed fleet resolves
/// with `closed: true` (JavaScript throws).
#[napi(catch_unwind)]
pub fn breaker_sync_fleet(h: &External<BreakerBox>) -> Option<AsyncTask<SyncTask>> {
    h.fleet.as_ref().map(|f| AsyncTask::new(SyncTask(Arc::clone(f))))
}

/// Closes the breaker's fleet (idempotent): the background threads stopped and joined, the
/// connections closed, the breaker purely local from then on. Resolves when done.
#[napi(catch_unwind)]
pub fn breaker_close(h: &External<BreakerBox>) -> AsyncTask<CloseTask> {
    AsyncTask::new(CloseTask(h.fleet.clone()))
}

/// Whether the breaker follows a fleet now (`false` without a fleet, while detached, after close).
#[napi]
pub fn breaker_fleet_attached(h: &External<BreakerBox>) -> bool {
    h.fleet.as_ref().is_some_and(|f| f.is_attached())
}

fn string_arg(env: &Env, v: &Unknown<'_>, field: &str, what: &str) -> Result<String> {
    if v.get_type()? != ValueType::String {
        return Err(err::input_type(env, field, what, &opts::describe(env, v)));
    }
    unsafe { v.cast::<String>() }
}

/// For tests: makes the in-memory store `memory://<name>` fail every exchange (`down`), work
/// again (`up`) or forget its records (`flush`). `invalid_input` naming `name` or `action`.
#[napi(catch_unwind)]
pub fn fleet_memory_store_control(env: &Env, name: Unknown<'_>, action: Unknown<'_>) -> Result<()> {
    let name = string_arg(env, &name, "name", "a store name (the part after memory://)")?;
    let action = string_arg(env, &action, "action", "'down', 'up' or 'flush'")?;
    memory_store_control(&name, &action).map_err(|e| err::input(env, &e))
}

/// For tests: the in-memory store `memory://<name>` emptied and up (a fresh store per case).
#[napi(catch_unwind)]
pub fn fleet_memory_store_reset(env: &Env, name: Unknown<'_>) -> Result<()> {
    let name = string_arg(env, &name, "name", "a store name (the part after memory://)")?;
    holdoff::interop::memory_store_reset(&name);
    Ok(())
}
