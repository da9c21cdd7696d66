//! Breakers keyed by upstream (host, registry, provider, tenant), made lazily from one template
//! and bounded.
//!
//! A key often comes from request data, so a group that grew without limit would be a memory
//! exhaustion. A group holds at most `max_keys` breakers (default [`DEFAULT_MAX_KEYS`]). When a
//! new key arrives at a full group, the group evicts the least recently used **idle** breaker:
//! closed, with no failure counted by its trip policy. An open, half-open, forced-open or
//! disabled breaker, or a closed one counting failures, is never evicted: it is the protection,
//! or an operator's decision, or on its way to a trip.
//!
//! Eviction looks at up to [`EVICTION_SCAN`] entries from the least recently used end and takes
//! the first idle one; entries it passes over move to the most recently used end, so that a group
//! full of open breakers costs a bounded scan per new key, not one over every key. When none of
//! them is idle, the new key gets an **overflow** breaker that the group does not keep: the call
//! goes on (a full group never fails a call), memory stays bounded, and that key's outcomes are
//! not remembered until an entry can be evicted. [`GroupSnapshot`] counts both.
//!
//! "Recently used" means handed out by [`BreakerGroup::get`]. A breaker kept and used directly
//! may be evicted while idle; the next `get` of its key then makes a fresh breaker. Ask the group
//! for the breaker of each call (a lookup costs tens of nanoseconds) rather than keeping it.

use std::sync::Arc;

use lru::LruCache;

use crate::breaker::intern::intern;
use crate::breaker::{Breaker, BreakerConfig};
use crate::clock::Clock;
use crate::error::ConfigError;
use crate::sync::Mutex;

/// The default bound on the keys of a group.
pub const DEFAULT_MAX_KEYS: usize = 10_000;

/// The largest `max_keys` a group accepts (an entry is a few hundred bytes with its key).
pub const MAX_KEYS_LIMIT: usize = 100_000_000;

/// How many least recently used entries one eviction looks at before giving the new key an
/// overflow breaker.
pub const EVICTION_SCAN: usize = 64;

/// Counts of a group, read without side effects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupSnapshot {
    /// Breakers kept now.
    pub keys: usize,
    /// The bound on `keys`.
    pub max_keys: usize,
    /// Idle breakers evicted to make room.
    pub evictions: u64,
    /// Breakers handed out without being kept, because no entry could be evicted.
    pub overflows: u64,
}

struct Entries {
    map: LruCache<String, Arc<Breaker>>,
    evictions: u64,
    overflows: u64,
    // Set by the first read of the group's metrics: every breaker made from then on counts.
    metrics: bool,
}

/// A bounded, lazily filled map from upstream key to its own [`Breaker`]. `Send + Sync`.
///
/// Every breaker shares the template's configuration (one copy for the group, and for every
/// group and breaker built from an equal configuration), with its own jitter seed, the
/// template's mixed with the key, so that a fleet of breakers does not probe in lockstep.
pub struct BreakerGroup {
    template: Arc<BreakerConfig>,
    max_keys: usize,
    clock: Arc<dyn Clock>,
    entries: Mutex<Entries>,
}

impl std::fmt::Debug for BreakerGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BreakerGroup")
            .field("template", &self.template)
            .field("max_keys", &self.max_keys)
            .finish()
    }
}

fn fnv1a(key: &str) -> u64 {
    key.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The rule on a group's bound: `group.max_keys` in 1..=[`MAX_KEYS_LIMIT`].
pub(crate) fn validate_max_keys(max_keys: usize) -> Result<(), ConfigError> {
    if max_keys == 0 || max_keys > MAX_KEYS_LIMIT {
        return Err(ConfigError::new(
            "group.max_keys",
            "must be between 1 and 100000000",
        ));
    }
    Ok(())
}

impl BreakerGroup {
    /// An empty group of at most [`DEFAULT_MAX_KEYS`] breakers; the template is validated now, so
    /// `get` cannot fail.
    pub fn new(template: BreakerConfig, clock: Arc<dyn Clock>) -> Result<BreakerGroup, ConfigError> {
        Self::with_max_keys(template, DEFAULT_MAX_KEYS, clock)
    }

    /// An empty group of at most `max_keys` breakers (1..=[`MAX_KEYS_LIMIT`]; the error names
    /// `group.max_keys`).
    pub fn with_max_keys(
        template: BreakerConfig,
        max_keys: usize,
        clock: Arc<dyn Clock>,
    ) -> Result<BreakerGroup, ConfigError> {
        template.validate()?;
        validate_max_keys(max_keys)?;
        Ok(BreakerGroup {
            template: intern(template),
            max_keys,
            clock,
            entries: Mutex::new(Entries {
                map: LruCache::unbounded(),
                evictions: 0,
                overflows: 0,
                metrics: false,
            }),
        })
    }

    fn lock(&self) -> crate::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn make(&self, key: &str) -> Arc<Breaker> {
        let seed = self.template.seed ^ fnv1a(key);
        // The template was validated in `with_max_keys`.
        Arc::new(
            Breaker::with_shared_config(Arc::clone(&self.template), seed, Arc::clone(&self.clock))
                .expect("validated template"),
        )
    }

    /// The breaker for `key`, created on first use; marks it most recently used. Never fails: a
    /// full group with nothing idle to evict hands out an overflow breaker it does not keep.
    pub fn get(&self, key: &str) -> Arc<Breaker> {
        let mut e = self.lock();
        if let Some(b) = e.map.get(key) {
            return Arc::clone(b);
        }
        if e.map.len() >= self.max_keys && !Self::evict_one(&mut e) {
            e.overflows += 1;
            let metrics = e.metrics;
            drop(e);
            let b = self.make(key);
            if metrics {
                b.enable_metrics();
            }
            return b;
        }
        let b = self.make(key);
        if e.metrics {
            b.enable_metrics();
        }
        e.map.put(key.to_owned(), Arc::clone(&b));
        b
    }

    /// Starts counting on every kept breaker and every later one; returns the counts and the
    /// kept breakers by key, sorted (for [`BreakerGroup::metrics`]).
    pub(crate) fn start_metrics(&self) -> (GroupSnapshot, Vec<(String, Arc<Breaker>)>) {
        let mut e = self.lock();
        e.metrics = true;
        let mut kept: Vec<(String, Arc<Breaker>)> =
            e.map.iter().map(|(k, b)| (k.clone(), Arc::clone(b))).collect();
        let snapshot = GroupSnapshot {
            keys: e.map.len(),
            max_keys: self.max_keys,
            evictions: e.evictions,
            overflows: e.overflows,
        };
        drop(e);
        kept.sort_by(|a, b| a.0.cmp(&b.0));
        (snapshot, kept)
    }

    // Evicts the least recently used idle breaker among the first EVICTION_SCAN; entries passed
    // over become most recently used. True if one was evicted.
    fn evict_one(e: &mut Entries) -> bool {
        let mut passed = Vec::new();
        let mut victim = None;
        for (k, b) in e.map.iter().rev().take(EVICTION_SCAN) {
            if b.is_idle() {
                victim = Some(k.clone());
                break;
            }
            passed.push(k.clone());
        }
        for k in &passed {
            e.map.promote(k);
        }
        match victim {
            Some(k) => {
                e.map.pop(&k);
                e.evictions += 1;
                true
            }
            None => false,
        }
    }

    /// The breaker for `key` if the group keeps one, without creating it or marking it used.
    pub fn peek(&self, key: &str) -> Option<Arc<Breaker>> {
        self.lock().map.peek(key).cloned()
    }

    /// Keys with a breaker, sorted.
    pub fn keys(&self) -> Vec<String> {
        let mut k: Vec<String> = self.lock().map.iter().map(|(k, _)| k.clone()).collect();
        k.sort();
        k
    }

    /// Number of breakers kept.
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    /// Whether no breaker is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bound on the number of breakers.
    pub fn max_keys(&self) -> usize {
        self.max_keys
    }

    /// Counts: breakers kept, the bound, evictions and overflows so far.
    pub fn snapshot(&self) -> GroupSnapshot {
        let e = self.lock();
        GroupSnapshot {
            keys: e.map.len(),
            max_keys: self.max_keys,
            evictions: e.evictions,
            overflows: e.overflows,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::breaker::Outcome;
    use crate::clock::ManualClock;

    fn group(max: usize) -> BreakerGroup {
        BreakerGroup::with_max_keys(BreakerConfig::default(), max, Arc::new(ManualClock::new())).unwrap()
    }

    fn fail(b: &Breaker) {
        let p = b.allow().unwrap();
        b.record(p, Outcome::Failure).unwrap();
    }

    #[test]
    fn evicts_the_least_recently_used_idle_breaker() {
        let g = group(2);
        let a = g.get("a");
        g.get("b");
        g.get("a");
        g.get("c");
        assert_eq!(g.keys(), ["a", "c"]);
        assert!(Arc::ptr_eq(&a, &g.get("a")));
        assert_eq!(g.snapshot().evictions, 1);
    }

    #[test]
    fn a_breaker_counting_failures_is_not_idle() {
        let g = group(2);
        fail(&g.get("a"));
        g.get("b");
        g.get("c");
        assert_eq!(g.keys(), ["a", "c"]);
    }

    #[test]
    fn a_full_group_of_busy_breakers_overflows() {
        let g = group(1);
        fail(&g.get("a"));
        let x = g.get("x");
        assert!(!Arc::ptr_eq(&x, &g.get("x")));
        assert_eq!(g.keys(), ["a"]);
        let s = g.snapshot();
        assert_eq!((s.keys, s.evictions, s.overflows), (1, 0, 2));
    }

    #[test]
    fn max_keys_is_checked() {
        let bad = BreakerGroup::with_max_keys(BreakerConfig::default(), 0, Arc::new(ManualClock::new()));
        assert_eq!(bad.unwrap_err().field, "group.max_keys");
    }
}
