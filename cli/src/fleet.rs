//! A fleet of simulated workers: with a `fleet` in the configuration, every worker's breaker is
//! attached to one shared record through the core's [`FleetMember`], and the workers share one
//! [`MemoryStore`] (the same rules as the Redis script: `holdoff::fleet::apply`). The simulator
//! never connects anywhere: whatever the url names, the store is in memory, private to the run,
//! and its clock is the virtual clock.
//!
//! Each worker syncs every `refresh_ms` of virtual time (so a worker's view is up to one refresh
//! old, as a real worker's is) and at once when its breaker pushes an op (a trip, a retry-later,
//! a probe answer), as the waker makes a real worker's background thread do.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use holdoff::fleet::{memory_store_reset, FleetConfig, FleetMember, MemoryStore};
use holdoff::Breaker;

use crate::error::CliError;
use crate::scenario::Scenario;

/// The staleness bound used to count requests before a known Retry-After, ns: the fleet's
/// `refresh_ms`, or the core's default refresh (50 ms) without a fleet, so that a local and a
/// shared configuration are counted alike.
pub fn staleness_bound(scn: &Scenario) -> u64 {
    let refresh = match scn.config.fleet_config(false) {
        Ok(Some(c)) => c.refresh,
        _ => FleetConfig::new("memory://default", "default").refresh,
    };
    u64::try_from(refresh.as_nanos()).unwrap_or(u64::MAX)
}

/// The shared store of one run's fleet.
pub struct Fleet {
    config: FleetConfig,
    store: MemoryStore,
    name: String,
}

fn config_error(scn: &Scenario, e: holdoff::ConfigError) -> CliError {
    CliError::in_file(&scn.config_origin, e.rule).field(format!("config.{}", e.field))
}

impl Fleet {
    /// The fleet of a scenario's configuration, if it has one: a fresh in-memory store for this
    /// run. Errors: the configuration's `fleet` is invalid (the field is named), or it has no
    /// breaker to share (`config.fleet`).
    pub fn from_config(scn: &Scenario) -> Result<Option<Fleet>, CliError> {
        let group = scn.config.group.is_some();
        let Some(config) = scn.config.fleet_config(group).map_err(|e| config_error(scn, e))? else {
            return Ok(None);
        };
        if scn.config.breaker.is_none() {
            // Without a breaker the simulator's workers run a disabled one: nothing to share.
            return Err(CliError::in_file(
                &scn.config_origin,
                "a fleet shares a breaker: give a breaker too",
            )
            .field("config.fleet"));
        }
        // One store per run, so that two runs in one process (`compare`) never share a record.
        static RUNS: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "holdoff-simulate-{}-{}",
            std::process::id(),
            RUNS.fetch_add(1, Ordering::Relaxed)
        );
        Ok(Some(Fleet {
            store: MemoryStore::named(&name),
            config,
            name,
        }))
    }

    /// The period of each worker's sync, ns.
    pub fn refresh_ns(&self) -> u64 {
        u64::try_from(self.config.refresh.as_nanos()).unwrap_or(u64::MAX)
    }

    /// Attaches worker `index`'s breaker; its waker puts `index` on `woken`.
    pub fn attach(
        &self,
        breaker: &Arc<Breaker>,
        index: usize,
        woken: Arc<Mutex<Vec<usize>>>,
        origin: &Path,
    ) -> Result<Link, CliError> {
        let member = FleetMember::attach_as(breaker, self.config.clone(), format!("worker-{index}"))
            .map_err(|e| CliError::in_file(origin, e.to_string()).field("config.fleet"))?;
        member.set_waker(Some(Arc::new(move || {
            woken.lock().unwrap_or_else(|e| e.into_inner()).push(index);
        })));
        Ok(Link {
            member,
            store: self.store.clone(),
            refresh: self.refresh_ns(),
        })
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        memory_store_reset(&self.name);
    }
}

/// One worker's link to the fleet.
pub struct Link {
    member: FleetMember,
    store: MemoryStore,
    refresh: u64,
}

impl Link {
    /// One sync at the breaker's clock (the virtual time). The in-memory store never fails, so
    /// nothing is reported.
    pub fn sync(&mut self) {
        self.member.sync(&self.store);
    }

    /// The period of this worker's sync, ns.
    pub fn refresh_ns(&self) -> u64 {
        self.refresh
    }
}
