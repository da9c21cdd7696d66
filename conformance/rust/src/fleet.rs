//! Fleet cases (`"workers": N` or a `config.fleet`): the store a case's workers share, and the
//! `fleet_sync` and `fleet_store` steps. [`FleetBackend`] lets a runner put the same cases on
//! another store (the `holdoff-fleet` crate runs them on a real redis-server).

use std::sync::Arc;

use holdoff::fleet::{
    memory_store_control, memory_store_reset, FleetConfig, FleetStore, MemoryStore, SyncReport,
};
use serde_json::{json, Map, Value};

use crate::{check, Ctx, Time, R};

/// Where a runner keeps the fleet cases' shared records.
pub trait FleetBackend {
    /// The url the case's workers use instead of `memory://<case id>` (`memory_url`).
    fn url(&self, case_id: &str, memory_url: &str) -> String;
    /// The store for `config` (its url already rewritten).
    fn store(&self, config: &FleetConfig) -> R<Arc<dyn FleetStore>>;
    /// A `fleet_store` step: `"down"`, `"up"` or `"flush"` on the store at `url`.
    fn control(&self, url: &str, action: &str) -> R<()>;
    /// Before each case: a fresh, empty, up store at `url`.
    fn reset(&self, url: &str) -> R<()>;
}

/// The in-process store of the cases as written (`memory://<case id>`).
#[derive(Debug, Clone, Copy, Default)]
pub struct MemoryBackend;

fn memory_name(url: &str) -> R<&str> {
    url.strip_prefix("memory://")
        .ok_or_else(|| format!("not a memory:// url: {url}"))
}

impl FleetBackend for MemoryBackend {
    fn url(&self, _case_id: &str, memory_url: &str) -> String {
        memory_url.to_owned()
    }

    fn store(&self, config: &FleetConfig) -> R<Arc<dyn FleetStore>> {
        Ok(Arc::new(MemoryStore::named(memory_name(&config.url)?)))
    }

    fn control(&self, url: &str, action: &str) -> R<()> {
        memory_store_control(memory_name(url)?, action).map_err(|e| e.to_string())
    }

    fn reset(&self, url: &str) -> R<()> {
        memory_store_reset(memory_name(url)?);
        Ok(())
    }
}

/// Whether a case is a fleet case.
pub fn is_fleet_case(case: &Value) -> bool {
    case.get("workers").is_some() || case.pointer("/config/fleet").is_some()
}

/// The suite's fleet cases (see [`crate::cases`]; `HOLDOFF_CASES` applies).
pub fn fleet_cases() -> Vec<(String, Value)> {
    crate::cases()
        .into_iter()
        .filter(|(_, c)| is_fleet_case(c))
        .collect()
}

/// What a `fleet_sync` step compares.
fn report_json(r: &SyncReport) -> Map<String, Value> {
    let rec = r.record.as_ref();
    let mut a = Map::new();
    a.insert("ok".into(), json!(r.ok));
    a.insert("attached".into(), json!(r.attached));
    a.insert("granted".into(), json!(r.granted));
    a.insert("fleet_state".into(), json!(rec.map(|x| x.state.name())));
    a.insert("fleet_episode".into(), json!(rec.map(|x| x.episode)));
    a.insert("fleet_recoveries".into(), json!(rec.map(|x| x.recoveries)));
    a
}

const SYNC_KEYS: &[&str] = &[
    "ok",
    "attached",
    "granted",
    "fleet_state",
    "fleet_episode",
    "fleet_recoveries",
];

impl<T: Time> Ctx<T> {
    /// `fleet_sync`: the named worker's tick, or every worker's in order.
    pub(crate) fn fleet_sync(&self, step: &Value, expect: Option<&Value>) -> R<()> {
        let store = self.fleet_store.as_ref().ok_or("the case has no fleet")?;
        let which: Vec<usize> = match step.get("worker").and_then(Value::as_u64) {
            Some(i) => vec![i as usize],
            None => (0..self.members.len()).collect(),
        };
        for i in which {
            let m = self.members.get(i).ok_or_else(|| format!("no worker {i}"))?;
            check(expect, &report_json(&m.sync(&**store)), SYNC_KEYS)
                .map_err(|e| format!("worker {i}: {e}"))?;
        }
        Ok(())
    }

    /// `fleet_store`: `down`, `up` or `flush`.
    pub(crate) fn fleet_store_step(&self, step: &Value, expect: Option<&Value>) -> R<()> {
        let url = &self.members.first().ok_or("the case has no fleet")?.config().url;
        let action = step
            .get("action")
            .and_then(Value::as_str)
            .ok_or("fleet_store needs action")?;
        self.fleet_backend.control(url, action)?;
        check(expect, &Map::new(), &[])
    }
}
