//! # holdoff-fleet: one holdoff breaker shared by a fleet of workers through Redis
//!
//! The core (`holdoff::fleet`) holds the rules ([`holdoff::fleet::apply`]) and each worker's
//! side ([`FleetMember`]) without IO. This crate adds the IO:
//!
//! * [`RedisStore`]: the [`FleetStore`] on Redis: one `EVALSHA` of `fleet.lua` (a line-by-line
//!   transcription of `apply`) per sync, Redis `TIME` as the fleet's clock, `PEXPIRE ttl` and a
//!   `PUBLISH` on every change.
//! * [`attach`]: links a breaker to its fleet and, for a Redis url, starts its background
//!   threads (a sync thread woken by the breaker, by the subscriber and every `refresh`; a
//!   subscriber thread on the key's channel). No call through the breaker ever waits on Redis.
//! * [`testing::RedisServer`]: a throwaway `redis-server` for tests and benches.
//!
//! Urls: `memory://<name>` (in-process, no thread: tick with [`Fleet::sync_now`]),
//! `redis://[user:password@]host[:port][/db]`, `unix:///path/redis.sock[?db=N&user=U&pass=P]`,
//! `rediss://…` (TLS with rustls and ring, verified against the system's root certificates or
//! `SSL_CERT_FILE`; refused with [`FleetError::TlsNotBuilt`] when built without the default `tls`
//! feature).
//! Any Redis url may end with `?clock=caller`: a test hook that makes the script use the
//! caller's clock instead of Redis `TIME`, so manual-clock conformance cases run on Redis.
//!
//! ```no_run
//! use std::sync::Arc;
//! use holdoff::{Breaker, BreakerConfig, SystemClock};
//! use holdoff::fleet::FleetConfig;
//!
//! let breaker = Arc::new(Breaker::new(BreakerConfig::default(), SystemClock::shared()).unwrap());
//! let fleet = holdoff_fleet::attach(&breaker, &FleetConfig::new("redis://127.0.0.1:6379/", "payments-api"))?;
//! // ... calls go through `breaker` as usual; the fleet syncs in the background ...
//! fleet.close();
//! # Ok::<(), holdoff_fleet::FleetError>(())
//! ```

#![warn(missing_docs)]

mod conn;
mod store;
pub mod testing;
mod worker;

use std::sync::{Arc, Mutex};

use holdoff::fleet::{FleetConfig, FleetMember, FleetStore, MemoryStore, StoreError, SyncReport};
use holdoff::{Breaker, ConfigError};

pub use store::{record_key, RedisStore, BACKOFF_CAP, LIMIT, SCRIPT};

/// Why a fleet could not be attached or ticked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FleetError {
    /// The fleet configuration is invalid; `field` names it (`fleet.url`, `fleet.key`, ...).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The breaker already has a fleet attached.
    #[error("this breaker already has a fleet attached")]
    AlreadyAttached,
    /// A `rediss://` url, but this build has no TLS (holdoff-fleet built with
    /// `default-features = false`, without its `tls` feature). A configuration error on
    /// `fleet.url`: the message is the rule alone, as a [`ConfigError`]'s `rule` is, so that a
    /// binding that prints `field: rule` names the field once ([`FleetError::config_error`]).
    #[error("rediss:// needs TLS, which this build of holdoff-fleet does not include (feature `tls`)")]
    TlsNotBuilt,
    /// The store failed (only from calls that report it; background syncs never fail a call).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The fleet was closed.
    #[error("the fleet is closed")]
    Closed,
}

impl FleetError {
    /// The configuration error this is, with the field it names: [`FleetError::Config`] as
    /// is, [`FleetError::TlsNotBuilt`] on `fleet.url`; `None` for the others.
    pub fn config_error(&self) -> Option<ConfigError> {
        match self {
            FleetError::Config(c) => Some(c.clone()),
            FleetError::TlsNotBuilt => Some(ConfigError {
                field: "fleet.url".to_owned(),
                rule: self.to_string(),
            }),
            _ => None,
        }
    }
}

impl From<holdoff::fleet::FleetError> for FleetError {
    fn from(e: holdoff::fleet::FleetError) -> Self {
        match e {
            holdoff::fleet::FleetError::Config(c) => FleetError::Config(c),
            holdoff::fleet::FleetError::AlreadyAttached => FleetError::AlreadyAttached,
            holdoff::fleet::FleetError::Store(s) => FleetError::Store(s),
        }
    }
}

/// A breaker's link to its fleet. Closing it (or dropping it) stops and joins its threads,
/// closes its connections and unlinks the breaker, which is then a purely local breaker.
pub struct Fleet {
    member: Mutex<Option<Arc<FleetMember>>>,
    store: Arc<dyn FleetStore>,
    redis: Option<Arc<RedisStore>>,
    threads: Mutex<Option<worker::Threads>>,
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("member", &self.member)
            .finish_non_exhaustive()
    }
}

/// Links `breaker` to the fleet `config` names.
///
/// * `memory://<name>`: the process's in-memory store; no thread: call [`Fleet::sync_now`].
/// * `redis://`, `rediss://`, `unix://`: the first exchange runs here, before this returns
///   (bounded by the fleet's `timeout` to connect and `timeout` for the round trip), so a
///   worker attached while the fleet is open starts open and [`Fleet::is_attached`] is true
///   at once when the store answered. A store that does not answer is not an error: the
///   breaker starts local (detached, `is_attached` false) and the background threads (a sync
///   thread and a subscriber thread, stopped by [`Fleet::close`]) keep trying; the first
///   successful sync attaches it.
///
/// # Errors
/// [`FleetError::Config`] naming the invalid field, [`FleetError::TlsNotBuilt`],
/// [`FleetError::AlreadyAttached`], [`FleetError::Store`] with
/// [`StoreError::Unavailable`] when the system cannot start a thread (the breaker is then left
/// unlinked, purely local).
pub fn attach(breaker: &Arc<Breaker>, config: &FleetConfig) -> Result<Fleet, FleetError> {
    build(breaker, config, None, true)
}

/// [`attach`] without background threads whatever the url, and with a chosen worker id when
/// `worker` is `Some` (1..=128 bytes): the fleet moves only on [`Fleet::sync_now`]. For tests and
/// conformance runners that drive every tick themselves on a manual clock.
///
/// # Errors
/// As [`attach`], plus [`FleetError::Config`] on `fleet.worker` for a bad worker id.
pub fn attach_manual(
    breaker: &Arc<Breaker>,
    config: &FleetConfig,
    worker: Option<&str>,
) -> Result<Fleet, FleetError> {
    build(breaker, config, worker, false)
}

fn build(
    breaker: &Arc<Breaker>,
    config: &FleetConfig,
    worker: Option<&str>,
    threads: bool,
) -> Result<Fleet, FleetError> {
    config.validate()?;
    let (store, redis): (Arc<dyn FleetStore>, Option<Arc<RedisStore>>) =
        match MemoryStore::for_url(&config.url) {
            Some(memory) => (Arc::new(memory), None),
            None => {
                let redis = Arc::new(RedisStore::new(&config.url, config.timeout, config.ttl)?);
                (redis.clone(), Some(redis))
            }
        };
    let member = match worker {
        Some(w) => FleetMember::attach_as(breaker, config.clone(), w.to_owned())?,
        None => FleetMember::attach(breaker, config.clone())?,
    };
    let member = Arc::new(member);
    let threads = match &redis {
        Some(redis) if threads => {
            member.connect(redis.as_ref());
            Some(worker::Threads::start(Arc::clone(&member), Arc::clone(redis))?)
        }
        _ => None,
    };
    Ok(Fleet {
        member: Mutex::new(Some(member)),
        store,
        redis,
        threads: Mutex::new(threads),
    })
}

impl Fleet {
    fn member(&self) -> Option<Arc<FleetMember>> {
        self.member.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// One tick now (the background thread's work, serialised with it): drain the breaker's
    /// outbox, one exchange with the store (bounded by `timeout`), apply the view. A store
    /// failure is in the report (`ok: false`, `error`), not an error.
    ///
    /// # Errors
    /// [`FleetError::Closed`] after [`Fleet::close`].
    pub fn sync_now(&self) -> Result<SyncReport, FleetError> {
        let member = self.member().ok_or(FleetError::Closed)?;
        Ok(member.sync(self.store.as_ref()))
    }

    /// Whether the breaker follows the fleet: a sync succeeded and the worker has not detached
    /// since. False after a threaded [`attach`] whose first exchange failed (until a sync
    /// succeeds), while detached after `fallback_after` without a successful sync, and after
    /// close.
    pub fn is_attached(&self) -> bool {
        self.member().is_some_and(|m| m.is_attached())
    }

    /// The worker id this breaker's claims and answers carry.
    pub fn worker(&self) -> Option<String> {
        self.member().map(|m| m.worker().to_owned())
    }

    /// Whether the fleet runs background threads (a Redis url attached with [`attach`]).
    pub fn is_threaded(&self) -> bool {
        self.threads.lock().unwrap_or_else(|e| e.into_inner()).is_some()
    }

    /// Stops and joins the background threads (a few ms; at most about 2 `timeout` + 0.5 s
    /// against a Redis that hangs), closes their
    /// connections and unlinks the breaker, which goes on as a local breaker. Idempotent.
    pub fn close(&self) {
        let threads = self.threads.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(threads) = threads {
            threads.stop();
        }
        // The last reference: the member's drop unlinks the breaker.
        let member = self.member.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(member) = member {
            member.set_waker(None);
            drop(member);
        }
        if let Some(redis) = &self.redis {
            redis.disconnect();
        }
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    // A fleet is closed from any thread and shared between callers.
    fn shared<T: Send + Sync>() {}

    #[test]
    fn fleet_and_store_are_send_and_sync() {
        shared::<super::Fleet>();
        shared::<super::RedisStore>();
    }
}
