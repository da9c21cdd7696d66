//! A fleet: one breaker shared by every worker that calls the same upstream (docs/fleet.md).
//!
//! Sans-IO like the rest of the core: this module holds the rules and the worker's side, never
//! a socket or a thread.
//!
//! * [`FleetRecord`], [`FleetOp`] and [`apply`] (`record.rs`): the shared record of one key and
//!   the one statement of the rules, which the Redis script transcribes.
//! * [`FleetStore`] (`store.rs`): one atomic exchange per sync; [`MemoryStore`] is the
//!   in-process store (`memory://<name>`) the conformance cases use, with
//!   [`memory_store_control`].
//! * [`FleetMember`] (`member.rs`): one worker's link for one breaker; [`FleetMember::sync`] is
//!   one tick (drain the outbox, one exchange, apply the view), which a background thread in the
//!   `holdoff-fleet` crate (or a test, by hand) calls every `refresh`.
//!
//! The breaker's closed fast path never consults the fleet: only its locked paths do
//! (`breaker/fleet.rs`).

mod member;
mod record;
mod store;

use std::sync::Arc;
use std::time::Duration;

pub use member::{FleetMember, SyncReport};
pub use record::{
    apply, FleetOp, FleetRecord, FleetState, Lease, Reply, MAX_LEASES, MAX_STORE_VALUE, MAX_WORKER_LEN,
};
pub use store::{
    memory_store_control, memory_store_reset, Exchanged, FleetStore, MemoryStore, StoreAction, StoreError,
};

use crate::error::ConfigError;

/// The callback a breaker calls (outside its lock) when it pushes an op for the fleet, so that
/// a background thread can sync at once. It must only notify: never block, never call back into
/// the breaker synchronously.
pub type Waker = Arc<dyn Fn() + Send + Sync>;

/// Longest fleet key, in bytes.
pub const MAX_KEY_LEN: usize = 200;

/// Shortest `refresh` and `timeout`.
pub const MIN_PERIOD: Duration = Duration::from_millis(1);

/// Where a fleet's shared record lives and how a worker keeps its view of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetConfig {
    /// The store: `memory://<name>`, `redis://[user:password@]host[:port][/db]`, `rediss://...`
    /// or `unix:///path/to/socket`.
    pub url: String,
    /// The shared record's key: the upstream's name (1..=200 bytes, no whitespace or control
    /// characters). Every worker calling that upstream uses the same key.
    pub key: String,
    /// Period of the background sync. Default 50 ms.
    pub refresh: Duration,
    /// With no successful sync for this long, the worker detaches and runs as a purely local
    /// breaker until a sync succeeds again. Default 1 s.
    pub fallback_after: Duration,
    /// Bound on one store round trip (connect, read, write). Default 50 ms.
    pub timeout: Duration,
    /// The shared record expires when no worker wrote it for this long. Default 1 h.
    pub ttl: Duration,
}

impl FleetConfig {
    /// A configuration with the defaults for `url` and `key` (not yet validated).
    pub fn new(url: impl Into<String>, key: impl Into<String>) -> FleetConfig {
        FleetConfig {
            url: url.into(),
            key: key.into(),
            refresh: Duration::from_millis(50),
            fallback_after: Duration::from_secs(1),
            timeout: Duration::from_millis(50),
            ttl: Duration::from_secs(3600),
        }
    }

    /// Checks every field; the error names it: `fleet.url` (scheme one of `memory`, `redis`,
    /// `rediss`, `unix`, followed by `://` and something), `fleet.key`, `fleet.refresh`,
    /// `fleet.fallback_after`, `fleet.timeout`, `fleet.ttl` (each > 0; `refresh` and `timeout`
    /// at least 1 ms; `fallback_after` at least `refresh + timeout`; `ttl` at least
    /// `fallback_after`).
    pub fn validate(&self) -> Result<(), ConfigError> {
        let rest = ["memory://", "redis://", "rediss://", "unix://"]
            .iter()
            .find_map(|s| self.url.strip_prefix(s));
        match rest {
            None => {
                return Err(ConfigError::new(
                    "fleet.url",
                    "scheme must be memory://, redis://, rediss:// or unix://",
                ))
            }
            Some("") => return Err(ConfigError::new("fleet.url", "names no store after the scheme")),
            Some(_) => {}
        }
        if self.key.is_empty() || self.key.len() > MAX_KEY_LEN {
            return Err(ConfigError::new("fleet.key", "must be 1 to 200 bytes"));
        }
        if self.key.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(ConfigError::new(
                "fleet.key",
                "must not contain whitespace or control characters",
            ));
        }
        for (field, d) in [
            ("fleet.refresh", self.refresh),
            ("fleet.fallback_after", self.fallback_after),
            ("fleet.timeout", self.timeout),
            ("fleet.ttl", self.ttl),
        ] {
            if d.is_zero() {
                return Err(ConfigError::new(field, "must be greater than 0"));
            }
        }
        // A sub-millisecond period is a unit mistake (seconds or ms given as the other) and
        // would run the store's script thousands of times a second per worker.
        for (field, d) in [("fleet.refresh", self.refresh), ("fleet.timeout", self.timeout)] {
            if d < MIN_PERIOD {
                return Err(ConfigError::new(field, "must be at least 1 ms"));
            }
        }
        // One slow exchange (a sync waits `refresh`, then up to `timeout`) must not detach.
        if self.fallback_after < self.refresh.saturating_add(self.timeout) {
            return Err(ConfigError::new(
                "fleet.fallback_after",
                "must be at least refresh + timeout",
            ));
        }
        // A record must outlive a worker's own fallback: a fleet still syncing never loses it.
        if self.ttl < self.fallback_after {
            return Err(ConfigError::new("fleet.ttl", "must be at least fallback_after"));
        }
        Ok(())
    }
}

/// Why a fleet could not be attached or synced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FleetError {
    /// The fleet configuration is invalid (the field is named).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The breaker already has a fleet attached.
    #[error("this breaker already has a fleet attached")]
    AlreadyAttached,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_each_field() {
        let ok = FleetConfig::new("redis://127.0.0.1:6379/0", "payments-api");
        assert!(ok.validate().is_ok());
        let field = |f: fn(&mut FleetConfig)| {
            let mut c = ok.clone();
            f(&mut c);
            c.validate().unwrap_err().field
        };
        assert_eq!(field(|c| c.url = "http://x".into()), "fleet.url");
        assert_eq!(field(|c| c.url = "memory://".into()), "fleet.url");
        assert_eq!(field(|c| c.key = String::new()), "fleet.key");
        assert_eq!(field(|c| c.key = "a b".into()), "fleet.key");
        assert_eq!(field(|c| c.key = "k".repeat(201)), "fleet.key");
        assert_eq!(field(|c| c.refresh = Duration::ZERO), "fleet.refresh");
        assert_eq!(
            field(|c| c.fallback_after = Duration::ZERO),
            "fleet.fallback_after"
        );
        assert_eq!(field(|c| c.timeout = Duration::ZERO), "fleet.timeout");
        assert_eq!(field(|c| c.ttl = Duration::ZERO), "fleet.ttl");
        let mut max = ok.clone();
        max.key = "k".repeat(200);
        assert!(max.validate().is_ok());
        let ms = Duration::from_millis;
        assert_eq!(field(|c| c.refresh = Duration::from_micros(50)), "fleet.refresh");
        assert_eq!(field(|c| c.timeout = Duration::from_micros(999)), "fleet.timeout");
        assert_eq!(
            field(|c| c.fallback_after = Duration::from_millis(99)),
            "fleet.fallback_after"
        );
        assert_eq!(field(|c| c.ttl = Duration::from_millis(999)), "fleet.ttl");
        let mut edge = ok.clone();
        (edge.refresh, edge.timeout, edge.fallback_after, edge.ttl) = (ms(1), ms(1), ms(2), ms(2));
        assert!(edge.validate().is_ok(), "every bound is inclusive");
    }
}
