//! One shared, immutable copy of each breaker configuration in use, and of each pairing of a
//! configuration with a clock.
//!
//! A process usually holds many breakers (one per upstream host, tenant or provider) built from
//! one or a few configurations and one clock. A [`BreakerConfig`] is larger than the breaker's
//! own state (136 bytes against the 56-byte breaker), so a copy per breaker would more than
//! double the size of each. [`Breaker::new`](super::Breaker::new) therefore looks its
//! configuration up here and shares the copy that live breakers built from an equal
//! configuration already hold; every binding builds its breakers through it and shares too.
//! A breaker then holds one pointer for its configuration and its clock together: the
//! [`Profile`] of every live breaker built from that shared configuration on that same clock
//! (the same `Arc`, by address), found in a second table.
//!
//! * **Equal means bit for bit**: every field, floats by their bits (`0.0` and `-0.0` are not
//!   merged), so a breaker's [`config`](super::Breaker::config) is exactly what it was built
//!   with. The table is keyed by a hash of those bits (a per-process random key, so crafted
//!   configurations cannot force collisions); an entry is used only when its bits are equal, and
//!   a collision merely costs the newcomer its sharing. A profile is keyed by the addresses of
//!   its configuration and its clock, which it holds: neither address can be reused while the
//!   profile lives.
//! * **Never keeps a configuration alive**: the tables hold `Weak` references, so a
//!   configuration or profile no breaker uses any more is dropped with its last breaker, which
//!   also removes its entry (`release`, `release_profile`).
//! * **Bounded**: a dead entry still holds its block (a `Weak` keeps the allocation), so a table
//!   is swept of dead entries whenever it reaches twice the entries alive at the last sweep (and
//!   at least [`SWEEP_FLOOR`]). Its size stays within twice the distinct live configurations (or
//!   profiles) plus the floor, however many distinct seeds or clocks a process makes and drops.
//! * **Off the call path**: the locks are taken only while a breaker (or a group's breaker) is
//!   built or dropped, for a lookup and at most one insertion; `allow` and `record` never see
//!   them.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};
// Statics: std's locks even under loom (whose locks are not const), held for no loom operation.
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use super::BreakerConfig;
use crate::backoff::Backoff;
use crate::clock::Clock;
use crate::trip::TripPolicy;

/// Entries below which a table is never swept.
pub(crate) const SWEEP_FLOOR: usize = 64;

/// A configuration's value as plain words: the key, compared exactly.
type Bits = [u64; 19];

/// Weak entries by key, swept of dead ones as they accumulate.
struct Entries<K, V> {
    map: HashMap<K, Weak<V>>,
    // The size at which the next insertion sweeps dead entries first.
    sweep_at: usize,
}

impl<K: Hash + Eq, V> Entries<K, V> {
    fn new() -> Self {
        Entries {
            map: HashMap::new(),
            sweep_at: SWEEP_FLOOR,
        }
    }

    fn sweep(&mut self) {
        self.map.retain(|_, w| w.strong_count() > 0);
        self.sweep_at = (2 * self.map.len()).max(SWEEP_FLOOR);
        // Give back the room a burst of distinct entries left behind.
        if self.map.capacity() > 4 * self.sweep_at {
            self.map.shrink_to(self.sweep_at);
        }
    }

    /// The live value under `key` for which `same` holds.
    fn find(&self, key: &K, same: impl FnOnce(&V) -> bool) -> Option<Arc<V>> {
        self.map.get(key).and_then(Weak::upgrade).filter(|v| same(v))
    }

    fn insert(&mut self, key: K, value: &Arc<V>) {
        if self.map.len() >= self.sweep_at {
            self.sweep();
        }
        self.map.insert(key, Arc::downgrade(value));
    }

    /// Removes `key`'s entry if it is `value`'s.
    fn remove(&mut self, key: &K, value: &Arc<V>) {
        if self
            .map
            .get(key)
            .is_some_and(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(value)))
        {
            self.map.remove(key);
            // Give back the room many entries alive at once left behind.
            let room = (2 * self.map.len()).max(SWEEP_FLOOR);
            if self.map.capacity() > 4 * room {
                self.map.shrink_to(room);
            }
        }
    }
}

struct Table {
    hasher: RandomState,
    entries: Entries<u64, BreakerConfig>,
}

static TABLE: Mutex<Option<Table>> = Mutex::new(None);

fn table() -> MutexGuard<'static, Option<Table>> {
    // Nothing under the lock can panic halfway through a change; a poisoned lock is still sound.
    TABLE.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the breakers built from one shared configuration on one clock share, behind one
/// pointer: the configuration (itself shared with breakers of an equal one on other clocks)
/// and the clock.
pub(crate) struct Profile {
    pub(crate) config: Arc<BreakerConfig>,
    pub(crate) clock: Arc<dyn Clock>,
}

impl Drop for Profile {
    fn drop(&mut self) {
        release(&self.config);
    }
}

/// A profile's key: the addresses of its configuration and of its clock's data.
type ProfileKey = (usize, usize);

static PROFILES: Mutex<Option<Entries<ProfileKey, Profile>>> = Mutex::new(None);

fn profiles() -> MutexGuard<'static, Option<Entries<ProfileKey, Profile>>> {
    PROFILES.lock().unwrap_or_else(|e| e.into_inner())
}

fn profile_key(config: &Arc<BreakerConfig>, clock: &Arc<dyn Clock>) -> ProfileKey {
    (
        Arc::as_ptr(config) as usize,
        Arc::as_ptr(clock).cast::<()>() as usize,
    )
}

/// The profile of `config` on `clock`: the one live breakers built from the same configuration
/// (by address) on the same clock (by address) hold, or a new one. Takes the profile table's
/// lock once.
pub(crate) fn profile(config: Arc<BreakerConfig>, clock: Arc<dyn Clock>) -> Arc<Profile> {
    let key = profile_key(&config, &clock);
    let mut guard = profiles();
    let entries = guard.get_or_insert_with(Entries::new);
    // A live profile under this key holds that very configuration and clock, so their addresses
    // are theirs; the check only guards against a reading of that argument being wrong.
    if let Some(shared) = entries.find(&key, |p| profile_key(&p.config, &p.clock) == key) {
        return shared;
    }
    let shared = Arc::new(Profile { config, clock });
    entries.insert(key, &shared);
    shared
}

/// Called as a breaker lets go of its profile: when it holds the last reference, the entry goes
/// too (as in [`release`]). The profile itself is dropped by the caller, after the lock, and
/// releases its configuration then.
pub(crate) fn release_profile(profile: &Arc<Profile>) {
    if Arc::strong_count(profile) != 1 {
        return;
    }
    let mut guard = profiles();
    let Some(entries) = guard.as_mut() else {
        return;
    };
    if Arc::strong_count(profile) != 1 {
        return;
    }
    entries.remove(&profile_key(&profile.config, &profile.clock), profile);
}

fn duration(d: Duration) -> [u64; 2] {
    [d.as_secs(), u64::from(d.subsec_nanos())]
}

/// Every field of `c` as words. Destructured without `..`, so a new field cannot be forgotten.
fn bits(c: &BreakerConfig) -> Bits {
    let BreakerConfig {
        trip,
        open_interval,
        recoveries,
        max_probes_in_flight,
        probe_timeout,
        max_retry_later,
        seed,
    } = c;
    let Backoff {
        initial,
        multiplier,
        max,
        jitter,
    } = open_interval;
    // The policy's kind, then its fields in a fixed order (unused ones 0).
    let trip: [u64; 6] = match *trip {
        TripPolicy::ConsecutiveFailures { threshold } => [0, u64::from(threshold), 0, 0, 0, 0],
        TripPolicy::FailuresInWindow { threshold, window } => {
            let [s, n] = duration(window);
            [1, u64::from(threshold), s, n, 0, 0]
        }
        TripPolicy::FailureRate {
            threshold,
            min_calls,
            window,
            buckets,
        } => {
            let [s, n] = duration(window);
            [
                2,
                threshold.to_bits(),
                s,
                n,
                u64::from(min_calls),
                u64::from(buckets),
            ]
        }
    };
    let [is, in_] = duration(*initial);
    let [ms, mn] = duration(*max);
    let [pt, ps, pn] = match probe_timeout {
        Some(d) => {
            let [s, n] = duration(*d);
            [1, s, n]
        }
        None => [0, 0, 0],
    };
    let [rs, rn] = duration(*max_retry_later);
    [
        trip[0],
        trip[1],
        trip[2],
        trip[3],
        trip[4],
        trip[5],
        is,
        in_,
        multiplier.to_bits(),
        ms,
        mn,
        jitter.to_bits(),
        (u64::from(*recoveries) << 32) | u64::from(*max_probes_in_flight),
        pt,
        ps,
        pn,
        rs,
        rn,
        *seed,
    ]
}

/// The shared copy of `config`: the one a live breaker built from an equal configuration holds,
/// or `config` itself, newly shared. Takes the table's lock once.
pub(crate) fn intern(config: BreakerConfig) -> Arc<BreakerConfig> {
    let key = bits(&config);
    let mut guard = table();
    let table = guard.get_or_insert_with(|| Table {
        hasher: RandomState::new(),
        entries: Entries::new(),
    });
    let hash = table.hasher.hash_one(key);
    if let Some(shared) = table.entries.find(&hash, |c| bits(c) == key) {
        return shared;
    }
    let shared = Arc::new(config);
    table.entries.insert(hash, &shared);
    shared
}

/// Called as a profile lets go of its configuration: when it holds the last reference, the
/// table's entry goes too, so the block a dead entry's `Weak` would keep is freed with the last
/// breaker rather than at a sweep that only a later insertion would make. The count is checked
/// again under the lock, where no other breaker can take a new reference. Two last holders of
/// one configuration dropped at the same moment may both see the other's reference and leave
/// the entry to the next sweep.
pub(crate) fn release(config: &Arc<BreakerConfig>) {
    if Arc::strong_count(config) != 1 {
        return;
    }
    let mut guard = table();
    let Some(table) = guard.as_mut() else {
        return;
    };
    if Arc::strong_count(config) != 1 {
        return;
    }
    let hash = table.hasher.hash_one(bits(config));
    table.entries.remove(&hash, config);
}

/// Entries in the configuration table now, dead ones included (for tests).
#[cfg(test)]
pub(crate) fn entries() -> usize {
    table().as_ref().map_or(0, |t| t.entries.map.len())
}

/// Entries in the profile table now, dead ones included (for tests).
#[cfg(test)]
pub(crate) fn profile_entries() -> usize {
    profiles().as_ref().map_or(0, |t| t.map.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::breaker::Breaker;
    use crate::clock::ManualClock;

    fn clock() -> Arc<dyn crate::Clock> {
        Arc::new(ManualClock::new())
    }

    #[test]
    fn equal_configurations_share_one_allocation() {
        let cfg = BreakerConfig {
            seed: 0x5eed_0001,
            ..BreakerConfig::default()
        };
        let a = Breaker::new(cfg.clone(), clock()).unwrap();
        let b = Breaker::new(cfg.clone(), clock()).unwrap();
        assert!(std::ptr::eq(a.config(), b.config()));
        let other = Breaker::new(
            BreakerConfig {
                recoveries: 2,
                ..cfg.clone()
            },
            clock(),
        )
        .unwrap();
        assert!(!std::ptr::eq(a.config(), other.config()));
        assert_eq!(other.config().recoveries, 2);
        assert_eq!(*a.config(), cfg);
    }

    #[test]
    fn floats_are_compared_by_their_bits() {
        let mut cfg = BreakerConfig {
            seed: 0x5eed_0002,
            ..BreakerConfig::default()
        };
        cfg.open_interval.jitter = 0.0;
        let plus = Breaker::new(cfg.clone(), clock()).unwrap();
        cfg.open_interval.jitter = -0.0;
        let minus = Breaker::new(cfg, clock()).unwrap();
        assert!(!std::ptr::eq(plus.config(), minus.config()));
        assert!(minus.config().open_interval.jitter.is_sign_negative());
        assert!(plus.config().open_interval.jitter.is_sign_positive());
    }

    #[test]
    fn every_field_is_part_of_the_key() {
        let base = BreakerConfig::default();
        let variants: Vec<BreakerConfig> = vec![
            BreakerConfig {
                trip: TripPolicy::ConsecutiveFailures { threshold: 6 },
                ..base.clone()
            },
            BreakerConfig {
                trip: TripPolicy::FailuresInWindow {
                    threshold: 5,
                    window: Duration::from_secs(10),
                },
                ..base.clone()
            },
            BreakerConfig {
                trip: TripPolicy::FailuresInWindow {
                    threshold: 5,
                    window: Duration::from_nanos(10_000_000_001),
                },
                ..base.clone()
            },
            BreakerConfig {
                trip: TripPolicy::FailureRate {
                    threshold: 0.5,
                    min_calls: 10,
                    window: Duration::from_secs(10),
                    buckets: 10,
                },
                ..base.clone()
            },
            BreakerConfig {
                trip: TripPolicy::FailureRate {
                    threshold: 0.5,
                    min_calls: 11,
                    window: Duration::from_secs(10),
                    buckets: 10,
                },
                ..base.clone()
            },
            BreakerConfig {
                trip: TripPolicy::FailureRate {
                    threshold: 0.5,
                    min_calls: 10,
                    window: Duration::from_secs(10),
                    buckets: 5,
                },
                ..base.clone()
            },
            BreakerConfig {
                open_interval: Backoff::constant(Duration::from_secs(30)),
                ..base.clone()
            },
            BreakerConfig {
                open_interval: Backoff::exponential(Duration::from_secs(30), 3.0, Duration::from_secs(300)),
                ..base.clone()
            },
            BreakerConfig {
                open_interval: Backoff::exponential(Duration::from_secs(30), 2.0, Duration::from_secs(301)),
                ..base.clone()
            },
            BreakerConfig {
                open_interval: Backoff {
                    jitter: 0.25,
                    ..base.open_interval
                },
                ..base.clone()
            },
            BreakerConfig {
                recoveries: 1,
                ..base.clone()
            },
            BreakerConfig {
                max_probes_in_flight: 2,
                ..base.clone()
            },
            BreakerConfig {
                probe_timeout: Some(Duration::from_secs(1)),
                ..base.clone()
            },
            BreakerConfig {
                probe_timeout: Some(Duration::from_secs(2)),
                ..base.clone()
            },
            BreakerConfig {
                max_retry_later: Duration::from_secs(60),
                ..base.clone()
            },
            BreakerConfig {
                seed: 1,
                ..base.clone()
            },
        ];
        let mut keys = vec![bits(&base)];
        for v in &variants {
            v.validate().unwrap();
            assert!(!keys.contains(&bits(v)), "{v:?} has the key of another");
            keys.push(bits(v));
            assert_eq!(bits(&v.clone()), bits(v), "equal values, equal keys");
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "a million breakers take hours under Miri")]
    fn the_table_stays_bounded_over_a_million_distinct_seeds() {
        let clock = clock();
        let mut largest = 0;
        for seed in 0..1_000_000u64 {
            let cfg = BreakerConfig {
                seed: seed ^ 0xb0_0000_0000,
                ..BreakerConfig::default()
            };
            drop(Breaker::new(cfg, Arc::clone(&clock)).unwrap());
            if seed % 4096 == 0 {
                largest = largest.max(entries()).max(profile_entries());
            }
        }
        largest = largest.max(entries()).max(profile_entries());
        // Twice the configurations alive (those of the tests running alongside, a few dozen at
        // most) or the floor: far below the million made.
        assert!(largest <= 4 * SWEEP_FLOOR, "table grew to {largest} entries");
        let cap = table().as_ref().unwrap().entries.map.capacity();
        assert!(cap <= 16 * SWEEP_FLOOR, "table kept room for {cap} entries");
        let cap = profiles().as_ref().unwrap().map.capacity();
        assert!(
            cap <= 16 * SWEEP_FLOOR,
            "profile table kept room for {cap} entries"
        );
    }

    #[test]
    fn breakers_on_one_clock_share_one_profile_and_other_clocks_only_the_configuration() {
        let cfg = BreakerConfig {
            seed: 0x5eed_0004,
            ..BreakerConfig::default()
        };
        let one = clock();
        let a = Breaker::new(cfg.clone(), Arc::clone(&one)).unwrap();
        let b = Breaker::new(cfg.clone(), Arc::clone(&one)).unwrap();
        let c = Breaker::new(cfg.clone(), clock()).unwrap();
        assert!(
            Arc::ptr_eq(&a.profile, &b.profile),
            "one configuration, one clock: one profile"
        );
        assert!(
            !Arc::ptr_eq(&a.profile, &c.profile),
            "another clock, another profile"
        );
        assert!(
            std::ptr::eq(a.config(), c.config()),
            "the configuration is still shared"
        );
        assert!(Arc::ptr_eq(a.clock(), &one));
        assert!(!Arc::ptr_eq(c.clock(), &one));
        let weak = Arc::downgrade(&a.profile);
        let key = profile_key(&a.profile.config, &one);
        let present = || profiles().as_ref().unwrap().map.contains_key(&key);
        assert!(present());
        drop(a);
        assert!(present(), "still used by another breaker");
        assert_eq!(weak.strong_count(), 1);
        drop(b);
        assert_eq!(weak.strong_count(), 0, "the table does not keep it alive");
        assert!(!present(), "the last breaker of a profile takes its entry along");
        assert_eq!(
            *c.config(),
            cfg,
            "its configuration lives on with the other profile"
        );
    }

    #[test]
    fn a_group_shares_its_template_and_clock_as_one_profile() {
        let cfg = BreakerConfig {
            seed: 0x5eed_0005,
            ..BreakerConfig::default()
        };
        let group = crate::BreakerGroup::new(cfg, clock()).unwrap();
        let (a, b) = (group.get("a"), group.get("b"));
        assert!(Arc::ptr_eq(&a.profile, &b.profile));
        assert_ne!(a.seed, b.seed, "each breaker keeps its own jitter seed");
    }

    #[test]
    fn the_last_breaker_of_a_configuration_takes_its_entry_along() {
        // Many distinct configurations alive at once, then none: their blocks (which a dead
        // entry's `Weak` would keep) are given back with their last breakers, not at a sweep that
        // only a later insertion would make.
        let clock = clock();
        let cfgs: Vec<BreakerConfig> = (0..100u64)
            .map(|i| BreakerConfig {
                seed: i ^ 0xc0_0000_0000,
                ..BreakerConfig::default()
            })
            .collect();
        let breakers: Vec<Breaker> = cfgs
            .iter()
            .map(|c| Breaker::new(c.clone(), Arc::clone(&clock)).unwrap())
            .collect();
        let shared = Breaker::new(cfgs[0].clone(), Arc::clone(&clock)).unwrap();
        let present = |c: &BreakerConfig| {
            let t = table();
            let t = t.as_ref().unwrap();
            t.entries.map.contains_key(&t.hasher.hash_one(bits(c)))
        };
        assert!(cfgs.iter().all(present));
        drop(breakers);
        assert!(present(&cfgs[0]), "still used by another breaker");
        assert_eq!(cfgs[1..].iter().filter(|c| present(c)).count(), 0);
        drop(shared);
        assert!(!present(&cfgs[0]));
    }

    #[test]
    fn a_stale_entry_under_a_reused_clock_address_is_never_returned() {
        // A profile's entry outlives it when its last two holders let go at once (each sees the
        // other's reference): the entry is dead, and the clock the profile held is freed. A new
        // clock made at that same address gives the same key; the dead entry must not answer
        // for it, and the breaker reads the new clock, not a stale one.
        let config = intern(BreakerConfig {
            seed: 0x5eed_0006,
            ..BreakerConfig::default()
        });
        let old: Arc<dyn crate::Clock> = Arc::new(ManualClock::new());
        let old_addr = Arc::as_ptr(&old).cast::<()>() as usize;
        let b = Breaker::with_shared_config(Arc::clone(&config), 1, old).unwrap();
        let extra = Arc::clone(&b.profile);
        let key = profile_key(&config, b.clock());
        drop(b);
        drop(extra);
        let dead = profiles().as_ref().unwrap().map.get(&key).cloned();
        assert!(
            dead.is_some_and(|w| w.strong_count() == 0),
            "the entry is left dead"
        );
        let mut made = Vec::new();
        let reused = loop {
            let clock = ManualClock::new();
            clock.set(crate::Instant::from_millis(7_000)).unwrap();
            let c: Arc<dyn crate::Clock> = Arc::new(clock);
            if Arc::as_ptr(&c).cast::<()>() as usize == old_addr {
                break Some(c);
            }
            made.push(c);
            if made.len() == 1000 {
                break None;
            }
        };
        let Some(new) = reused else {
            // The allocator never gave the address back: no stale key to test.
            return;
        };
        let b = Breaker::with_shared_config(Arc::clone(&config), 2, Arc::clone(&new)).unwrap();
        assert!(Arc::ptr_eq(b.clock(), &new));
        assert_eq!(b.clock().now(), crate::Instant::from_millis(7_000));
        assert_eq!(profile_key(&b.profile.config, b.clock()), key);
    }

    #[test]
    fn breakers_made_and_dropped_on_many_threads_share_the_live_profile() {
        // Threads make and drop breakers on one configuration and clock while one breaker holds
        // the profile throughout: each new breaker finds that profile. Then, with none held, every
        // breaker gets a live profile of exactly its configuration and clock, and once all are
        // gone the table keeps no live profile for the key.
        let cfg = BreakerConfig {
            seed: 0x5eed_0007,
            ..BreakerConfig::default()
        };
        let clock = clock();
        let held = Breaker::new(cfg.clone(), Arc::clone(&clock)).unwrap();
        let key = profile_key(&held.profile.config, &clock);
        // Miri runs each breaker thousands of times slower: a few rounds still interleave.
        let rounds = if cfg!(miri) { 20 } else { 2_000 };
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..rounds {
                        let b = Breaker::new(cfg.clone(), Arc::clone(&clock)).unwrap();
                        assert!(Arc::ptr_eq(&b.profile, &held.profile));
                    }
                });
            }
        });
        drop(held);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..rounds {
                        let b = Breaker::new(cfg.clone(), Arc::clone(&clock)).unwrap();
                        assert!(Arc::ptr_eq(b.clock(), &clock));
                        assert_eq!(*b.config(), cfg);
                    }
                });
            }
        });
        let left = profiles().as_ref().unwrap().map.get(&key).cloned();
        assert!(
            left.map_or(true, |w| w.strong_count() == 0),
            "no profile kept alive"
        );
    }

    #[test]
    fn an_unused_configuration_is_freed() {
        let cfg = BreakerConfig {
            seed: 0x5eed_0003,
            ..BreakerConfig::default()
        };
        let b = Breaker::new(cfg.clone(), clock()).unwrap();
        let weak = {
            let t = table();
            let t = t.as_ref().unwrap();
            let hash = t.hasher.hash_one(bits(&cfg));
            t.entries.map[&hash].clone()
        };
        assert_eq!(weak.strong_count(), 1, "held by the breaker alone");
        drop(b);
        assert_eq!(weak.strong_count(), 0, "the table does not keep it alive");
        assert!(weak.upgrade().is_none());
    }
}
