//! The store a fleet shares: one atomic exchange per sync ([`FleetStore`]), and the in-process
//! [`MemoryStore`] that the conformance cases and unit tests use.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use super::record::{apply, FleetOp, FleetRecord, Reply};

/// What one exchange returns: the record after the ops, the store's clock when it applied them
/// (ms), and one reply per op, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exchanged {
    /// The record after every op.
    pub record: FleetRecord,
    /// The store's clock at the exchange, ms.
    pub store_now_ms: u64,
    /// One reply per op, in the order sent.
    pub replies: Vec<Reply>,
}

/// Why an exchange failed. The worker keeps its ops for the next sync either way.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The store could not be reached or did not answer within the timeout.
    #[error("fleet store unavailable: {0}")]
    Unavailable(String),
    /// The store answered with a record that is not a valid fleet record (refused, never used).
    #[error("fleet store holds a corrupt record: {0}")]
    Corrupt(String),
}

/// A store of fleet records. `exchange` applies `ops` in order to the record of `key`
/// atomically (with [`apply`]: nothing else may change the record in between), stores it if it
/// changed, and returns it with the store's clock and each op's reply.
///
/// `caller_now_ms` is the caller's clock in ms: a store with its own clock (Redis `TIME`)
/// ignores it; [`MemoryStore`] (and a Redis store with `?clock=caller`) uses it as the store's
/// clock. Must not block longer than the fleet's `timeout`.
pub trait FleetStore: Send + Sync {
    /// One atomic exchange; see the trait.
    fn exchange(&self, key: &str, ops: &[FleetOp], caller_now_ms: u64) -> Result<Exchanged, StoreError>;
}

#[derive(Default)]
struct Shared {
    down: bool,
    records: HashMap<String, FleetRecord>,
}

/// A process-global in-memory store, one per name (`memory://<name>`): every [`MemoryStore`]
/// of the same name shares the records. The store's clock is the caller's time. For tests and
/// single-process fleets (several breakers sharing one record).
#[derive(Clone)]
pub struct MemoryStore {
    shared: Arc<Mutex<Shared>>,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore").finish_non_exhaustive()
    }
}

fn registry() -> &'static Mutex<HashMap<String, Arc<Mutex<Shared>>>> {
    static REGISTRY: OnceLock<Mutex<HashMap<String, Arc<Mutex<Shared>>>>> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

fn shared(name: &str) -> Arc<Mutex<Shared>> {
    let mut reg = registry().lock().unwrap_or_else(|e| e.into_inner());
    Arc::clone(reg.entry(name.to_owned()).or_default())
}

impl MemoryStore {
    /// The store named `name` (created empty on first use).
    pub fn named(name: &str) -> MemoryStore {
        MemoryStore { shared: shared(name) }
    }

    /// The store a `memory://<name>` url names; `None` for another scheme.
    pub fn for_url(url: &str) -> Option<MemoryStore> {
        url.strip_prefix("memory://").map(MemoryStore::named)
    }
}

impl FleetStore for MemoryStore {
    fn exchange(&self, key: &str, ops: &[FleetOp], caller_now_ms: u64) -> Result<Exchanged, StoreError> {
        let mut s = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        if s.down {
            return Err(StoreError::Unavailable("memory store is down".into()));
        }
        let mut record = s.records.get(key).cloned().unwrap_or_default();
        let replies: Vec<Reply> = ops
            .iter()
            .map(|op| apply(&mut record, op, caller_now_ms))
            .collect();
        if replies
            .iter()
            .any(|r| matches!(r, Reply::Applied | Reply::Granted { .. }))
        {
            s.records.insert(key.to_owned(), record.clone());
        }
        Ok(Exchanged {
            record,
            store_now_ms: caller_now_ms,
            replies,
        })
    }
}

/// What [`memory_store_control`] does to a named memory store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreAction {
    /// Every exchange fails with [`StoreError::Unavailable`] until `Up`.
    Down,
    /// Exchanges work again (records kept).
    Up,
    /// Every record is wiped (as a Redis `FLUSHDB` or an expiry would).
    Flush,
}

impl StoreAction {
    /// `"down"`, `"up"` or `"flush"`; `None` for anything else.
    pub fn from_name(name: &str) -> Option<StoreAction> {
        match name {
            "down" => Some(StoreAction::Down),
            "up" => Some(StoreAction::Up),
            "flush" => Some(StoreAction::Flush),
            _ => None,
        }
    }
}

/// The test control of the memory store `name` (the `<name>` of `memory://<name>`): `"down"`
/// makes its exchanges fail, `"up"` restores them, `"flush"` wipes its records. Errors:
/// [`InputError`](crate::InputError) on field `action` for any other action.
pub fn memory_store_control(name: &str, action: &str) -> Result<(), crate::InputError> {
    let action = StoreAction::from_name(action).ok_or_else(|| crate::InputError {
        field: "action".into(),
        rule: "must be \"down\", \"up\" or \"flush\"".into(),
    })?;
    let s = shared(name);
    let mut s = s.lock().unwrap_or_else(|e| e.into_inner());
    match action {
        StoreAction::Down => s.down = true,
        StoreAction::Up => s.down = false,
        StoreAction::Flush => s.records.clear(),
    }
    Ok(())
}

/// Forgets every record of the memory store `name` and brings it up: a fresh store, for a
/// runner that reuses names between runs.
pub fn memory_store_reset(name: &str) {
    let s = shared(name);
    let mut s = s.lock().unwrap_or_else(|e| e.into_inner());
    s.down = false;
    s.records.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_stores_share_records_and_obey_the_control() {
        let a = MemoryStore::named("store-test");
        let b = MemoryStore::for_url("memory://store-test").unwrap();
        let open = FleetOp::Open {
            seen_episode: 1,
            delay_ms: 100,
            retry_later: false,
        };
        let x = a.exchange("k", &[open], 5).unwrap();
        assert_eq!((x.store_now_ms, x.replies.clone()), (5, vec![Reply::Applied]));
        assert_eq!(
            b.exchange("k", &[FleetOp::Read], 6).unwrap().record.next_probe_at,
            105
        );
        memory_store_control("store-test", "down").unwrap();
        assert!(matches!(b.exchange("k", &[], 7), Err(StoreError::Unavailable(_))));
        memory_store_control("store-test", "up").unwrap();
        memory_store_control("store-test", "flush").unwrap();
        assert_eq!(a.exchange("k", &[], 8).unwrap().record.episode, 0);
        assert_eq!(
            memory_store_control("store-test", "melt").unwrap_err().field,
            "action"
        );
    }
}
