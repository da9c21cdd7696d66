//! One shared, immutable copy of each breaker configuration in use.
//!
//! A process usually holds many breakers (one per upstream host, tenant or provider) built from
//! one or a few configurations. A [`BreakerConfig`] is larger than the breaker's own state (136
//! bytes against the 96-byte breaker), so a copy per breaker would more than double the size of
//! each. [`Breaker::new`](super::Breaker::new) therefore looks its configuration up here and
//! shares the copy that live breakers built from an equal configuration already hold; every
//! binding builds its breakers through it and shares too.
//!
//! * **Equal means bit for bit**: every field, floats by their bits (`0.0` and `-0.0` are not
//!   merged), so a breaker's [`config`](super::Breaker::config) is exactly what it was built
//!   with. The table is keyed by a hash of those bits (a per-process random key, so crafted
//!   configurations cannot force collisions); an entry is used only when its bits are equal, and
//!   a collision merely costs the newcomer its sharing.
//! * **Never keeps a configuration alive**: the table holds `Weak` references, so a configuration
//!   no breaker uses any more is dropped with its last breaker, which also removes its entry
//!   (`release`).
//! * **Bounded**: a dead entry still holds its block (a `Weak` keeps the allocation), so the
//!   table is swept of dead entries whenever it reaches twice the entries alive at the last
//!   sweep (and at least [`SWEEP_FLOOR`]). Its size stays within twice the distinct live
//!   configurations plus the floor, however many distinct seeds a process makes and drops.
//! * **Off the call path**: the lock is taken only while a breaker (or a group) is built, for a
//!   hash lookup and at most one insertion; `allow` and `record` never see it.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;
// A static: std's lock even under loom (whose locks are not const), held for no loom operation.
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use super::BreakerConfig;
use crate::backoff::Backoff;
use crate::trip::TripPolicy;

/// Entries below which the table is never swept.
pub(crate) const SWEEP_FLOOR: usize = 64;

/// A configuration's value as plain words: the key, compared exactly.
type Bits = [u64; 19];

struct Table {
    hasher: RandomState,
    entries: HashMap<u64, Weak<BreakerConfig>>,
    // The size at which the next insertion sweeps dead entries first.
    sweep_at: usize,
}

impl Table {
    fn sweep(&mut self) {
        self.entries.retain(|_, w| w.strong_count() > 0);
        self.sweep_at = (2 * self.entries.len()).max(SWEEP_FLOOR);
        // Give back the room a burst of distinct configurations left behind.
        if self.entries.capacity() > 4 * self.sweep_at {
            self.entries.shrink_to(self.sweep_at);
        }
    }
}

static TABLE: Mutex<Option<Table>> = Mutex::new(None);

fn table() -> MutexGuard<'static, Option<Table>> {
    // Nothing under the lock can panic halfway through a change; a poisoned lock is still sound.
    TABLE.lock().unwrap_or_else(|e| e.into_inner())
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
        entries: HashMap::new(),
        sweep_at: SWEEP_FLOOR,
    });
    let hash = table.hasher.hash_one(key);
    if let Some(shared) = table.entries.get(&hash).and_then(Weak::upgrade) {
        if bits(&shared) == key {
            return shared;
        }
    }
    let shared = Arc::new(config);
    if table.entries.len() >= table.sweep_at {
        table.sweep();
    }
    table.entries.insert(hash, Arc::downgrade(&shared));
    shared
}

/// Called as a breaker lets go of its configuration: when it holds the last reference, the
/// table's entry goes too, so the block a dead entry's `Weak` would keep is freed with the last
/// breaker rather than at a sweep that only a later insertion would make. The count is checked
/// again under the lock, where no other breaker can take a new reference. Two last breakers of
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
    if table
        .entries
        .get(&hash)
        .is_some_and(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(config)))
    {
        table.entries.remove(&hash);
        // Give back the room many configurations alive at once left behind.
        let room = (2 * table.entries.len()).max(SWEEP_FLOOR);
        if table.entries.capacity() > 4 * room {
            table.entries.shrink_to(room);
        }
    }
}

/// Entries in the table now, dead ones included (for tests).
#[cfg(test)]
pub(crate) fn entries() -> usize {
    table().as_ref().map_or(0, |t| t.entries.len())
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
                largest = largest.max(entries());
            }
        }
        largest = largest.max(entries());
        // Twice the configurations alive (those of the tests running alongside, a few dozen at
        // most) or the floor: far below the million made.
        assert!(largest <= 4 * SWEEP_FLOOR, "table grew to {largest} entries");
        let cap = table().as_ref().unwrap().entries.capacity();
        assert!(cap <= 16 * SWEEP_FLOOR, "table kept room for {cap} entries");
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
            t.entries.contains_key(&t.hasher.hash_one(bits(c)))
        };
        assert!(cfgs.iter().all(present));
        drop(breakers);
        assert!(present(&cfgs[0]), "still used by another breaker");
        assert_eq!(cfgs[1..].iter().filter(|c| present(c)).count(), 0);
        drop(shared);
        assert!(!present(&cfgs[0]));
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
            t.entries[&hash].clone()
        };
        assert_eq!(weak.strong_count(), 1, "held by the breaker alone");
        drop(b);
        assert_eq!(weak.strong_count(), 0, "the table does not keep it alive");
        assert!(weak.upgrade().is_none());
    }
}
