//! One worker's link for one breaker: [`FleetMember::sync`] is one tick of the fleet.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::{FleetConfig, FleetError, FleetRecord, FleetStore, Reply, StoreError, Waker};
use crate::breaker::Breaker;
use crate::clock::Instant;

/// What one [`FleetMember::sync`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncReport {
    /// Whether the exchange succeeded (and the view was applied).
    pub ok: bool,
    /// Whether the worker is attached after this sync.
    pub attached: bool,
    /// Whether this sync detached the worker (`fallback_after` without a successful sync).
    pub detached: bool,
    /// Whether this sync re-attached a detached worker.
    pub reattached: bool,
    /// Whether a probe grant was claimed and granted.
    pub granted: bool,
    /// Ops sent (including a claim and a re-publish).
    pub sent: usize,
    /// The record as of this sync (`None` when the exchange failed).
    pub record: Option<FleetRecord>,
    /// Why the exchange failed.
    pub error: Option<StoreError>,
}

struct MemberState {
    last_ok: Instant,
    record: Option<FleetRecord>,
    /// The last exchange found the record corrupt: the next one carries this worker's open, if
    /// its breaker is open, so that it replaces the record.
    corrupt: bool,
}

/// One worker's link between its breaker and a fleet's shared record. `Send + Sync`: a
/// background thread syncs it while calls go through the breaker. Dropping it unlinks the
/// breaker, which is then purely local.
pub struct FleetMember {
    breaker: Arc<Breaker>,
    config: FleetConfig,
    worker: String,
    state: Mutex<MemberState>,
}

impl std::fmt::Debug for FleetMember {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetMember")
            .field("worker", &self.worker)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

fn worker_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    // Unique across processes and machines without reading a clock: the process's randomly
    // seeded hasher, the pid and a counter.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    format!(
        "{:016x}-{}-{}",
        h.finish(),
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

impl FleetMember {
    /// Attaches `breaker` to the fleet `config` names, with a fresh worker id. Nothing is
    /// exchanged until the first [`FleetMember::connect`] or [`FleetMember::sync`]; until then
    /// the breaker acts on its local view (while open it admits probes only against a grant).
    /// Errors:
    /// [`FleetError::Config`] naming the invalid field, [`FleetError::AlreadyAttached`].
    pub fn attach(breaker: &Arc<Breaker>, config: FleetConfig) -> Result<FleetMember, FleetError> {
        Self::attach_as(breaker, config, worker_id())
    }

    /// [`FleetMember::attach`] with a chosen worker id (1..=128 bytes, unique in the fleet).
    pub fn attach_as(
        breaker: &Arc<Breaker>,
        config: FleetConfig,
        worker: String,
    ) -> Result<FleetMember, FleetError> {
        config.validate()?;
        if worker.is_empty() || worker.len() > super::MAX_WORKER_LEN {
            return Err(crate::ConfigError::new("fleet.worker", "must be 1 to 128 bytes").into());
        }
        if !breaker.fleet_link(config.refresh) {
            return Err(FleetError::AlreadyAttached);
        }
        let now = breaker.clock().now();
        Ok(FleetMember {
            breaker: Arc::clone(breaker),
            config,
            worker,
            state: Mutex::new(MemberState {
                last_ok: now,
                record: None,
                corrupt: false,
            }),
        })
    }

    /// This worker's id (carried by its claims and answers).
    pub fn worker(&self) -> &str {
        &self.worker
    }

    /// The fleet configuration.
    pub fn config(&self) -> &FleetConfig {
        &self.config
    }

    /// The breaker this member links.
    pub fn breaker(&self) -> &Arc<Breaker> {
        &self.breaker
    }

    /// Whether the worker is attached: its breaker follows the record. False after a failed
    /// [`FleetMember::connect`] or `fallback_after` of failed syncs, until a sync succeeds.
    pub fn is_attached(&self) -> bool {
        self.breaker.fleet_attached()
    }

    /// The record as of the last successful sync.
    pub fn last_record(&self) -> Option<FleetRecord> {
        self.lock().record.clone()
    }

    /// Sets (or clears) the callback the breaker calls when it pushes an op.
    pub fn set_waker(&self, waker: Option<Waker>) {
        self.breaker.fleet_set_waker(waker);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MemberState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The first exchange, made by an attach that runs the fleet itself before it returns: a
    /// [`FleetMember::sync`] whose failure detaches the worker at once (it never followed the
    /// record, so its breaker is the plain local breaker until a sync succeeds). A worker
    /// attached while the fleet is open thus starts open.
    pub fn connect(&self, store: &dyn FleetStore) -> SyncReport {
        let mut report = self.sync(store);
        if !report.ok && report.attached {
            self.breaker.fleet_set_attached(false);
            report.attached = false;
            report.detached = true;
        }
        report
    }

    /// One tick: reads the breaker's clock once, drains the outbox (with a claim when callers
    /// were refused and the fleet's probe is due here), makes one exchange with `store`, and
    /// applies the record to the breaker (a second exchange only to re-publish an open the
    /// record lost). A failed exchange keeps the ops for the next sync; after `fallback_after`
    /// without a successful sync the worker detaches; the first successful sync re-attaches it.
    /// Never fails: the report says what happened. Serialise calls (one thread per member).
    pub fn sync(&self, store: &dyn FleetStore) -> SyncReport {
        let mut st = self.lock();
        let t = self.breaker.clock().now();
        let now_ms = t.as_nanos() / 1_000_000;
        let was_attached = self.breaker.fleet_attached();
        let prepared = self.breaker.fleet_prepare(&self.worker, t, st.corrupt);
        let mut sent = prepared.ops.len();
        let mut result = store
            .exchange(&self.config.key, &prepared.ops, now_ms)
            .and_then(|x| valid(x, prepared.ops.len()));
        let mut report = SyncReport {
            ok: false,
            attached: was_attached,
            detached: false,
            reattached: false,
            granted: false,
            sent,
            record: None,
            error: None,
        };
        // Kept through failures in between (a store backing off answers without reading).
        match &result {
            Ok(_) => st.corrupt = false,
            Err(StoreError::Corrupt(_)) => st.corrupt = true,
            Err(_) => {}
        }
        match result {
            Err(e) => {
                self.breaker.fleet_restore(prepared);
                if was_attached && t.saturating_since(st.last_ok) >= self.config.fallback_after {
                    self.breaker.fleet_set_attached(false);
                    report.attached = false;
                    report.detached = true;
                }
                report.error = Some(e);
                return report;
            }
            Ok(ref x) => {
                st.last_ok = t;
                if !was_attached {
                    self.breaker.fleet_set_attached(true);
                    report.reattached = true;
                    report.attached = true;
                }
                report.granted =
                    prepared.claimed && x.replies.iter().any(|r| matches!(r, Reply::Granted { .. }));
            }
        }
        let x = result.as_ref().expect("checked above");
        let mut record = x.record.clone();
        if let Some(op) = self.breaker.fleet_view(x, t, &prepared) {
            sent += 1;
            result = store
                .exchange(&self.config.key, std::slice::from_ref(&op), now_ms)
                .and_then(|x| valid(x, 1));
            if let Ok(x) = &result {
                let republished = self.breaker.fleet_prepare_republish();
                self.breaker.fleet_view(x, t, &republished);
                record = x.record.clone();
            }
        }
        report.ok = true;
        report.sent = sent;
        st.record = Some(record.clone());
        report.record = Some(record);
        report
    }
}

/// Refuses an exchange whose record is invalid or whose replies do not match the ops.
fn valid(x: super::Exchanged, ops: usize) -> Result<super::Exchanged, StoreError> {
    x.record.validate().map_err(StoreError::Corrupt)?;
    if x.replies.len() != ops {
        return Err(StoreError::Corrupt(format!(
            "replies: {} for {ops} ops",
            x.replies.len()
        )));
    }
    Ok(x)
}

impl Drop for FleetMember {
    fn drop(&mut self) {
        self.breaker.fleet_unlink();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::fleet::{memory_store_control, memory_store_reset, FleetOp, FleetState, MemoryStore};
    use crate::{Backoff, BreakerConfig, ManualClock, Outcome, State, TripPolicy};

    fn fleet(name: &str, n: usize) -> (ManualClock, Vec<FleetMember>, MemoryStore) {
        memory_store_reset(name);
        let clock = ManualClock::new();
        let cfg = BreakerConfig {
            trip: TripPolicy::ConsecutiveFailures { threshold: 1 },
            open_interval: Backoff::constant(Duration::from_secs(10)),
            recoveries: 2,
            ..BreakerConfig::default()
        };
        let members = (0..n)
            .map(|i| {
                let b = Arc::new(Breaker::new(cfg.clone(), Arc::new(clock.clone())).unwrap());
                FleetMember::attach_as(
                    &b,
                    FleetConfig::new(format!("memory://{name}"), "k"),
                    format!("w{i}"),
                )
                .unwrap()
            })
            .collect();
        (clock, members, MemoryStore::named(name))
    }

    fn trip(m: &FleetMember) {
        let p = m.breaker().allow().unwrap();
        m.breaker().record(p, Outcome::Failure).unwrap();
    }

    #[test]
    fn a_trip_opens_every_worker_and_one_probe_goes_per_window() {
        let (clock, ms, store) = fleet("member-trip", 3);
        trip(&ms[0]);
        clock.set(Instant::from_millis(100)).unwrap();
        assert!(
            ms[1].breaker().allow().is_ok(),
            "not synced yet: still closed locally"
        );
        for m in &ms {
            let r = m.sync(&store);
            assert_eq!(r.record.unwrap().state, FleetState::Open);
        }
        let refused = ms[1].breaker().allow().unwrap_err();
        assert_eq!(refused.retry_after, Some(Duration::from_millis(9900)));
        clock.set(Instant::from_millis(10_000)).unwrap();
        for m in &ms {
            assert!(m.breaker().allow().is_err(), "no grant yet");
        }
        let granted: Vec<bool> = ms.iter().map(|m| m.sync(&store).granted).collect();
        assert_eq!(granted, [true, false, false]);
        let probe = ms[0].breaker().allow().unwrap();
        assert!(probe.is_probe());
        assert!(ms[0].breaker().allow().is_err());
        ms[0].breaker().record(probe, Outcome::Success).unwrap();
        assert_eq!(ms[0].sync(&store).record.unwrap().recoveries, 1);
        assert_eq!(ms[0].breaker().snapshot().state, State::HalfOpen);
    }

    #[test]
    fn a_worker_detaches_after_fallback_and_reattaches() {
        let (clock, ms, store) = fleet("member-down", 1);
        memory_store_control("member-down", "down").unwrap();
        trip(&ms[0]);
        clock.set(Instant::from_millis(500)).unwrap();
        assert!(ms[0].sync(&store).attached);
        clock.set(Instant::from_millis(1000)).unwrap();
        let r = ms[0].sync(&store);
        assert!(r.detached && !r.attached && !r.ok);
        clock.set(Instant::from_millis(10_000)).unwrap();
        let p = ms[0].breaker().allow().unwrap();
        assert!(p.is_probe(), "detached: a local probe without a grant");
        memory_store_control("member-down", "up").unwrap();
        let r = ms[0].sync(&store);
        assert!(r.reattached && r.ok);
        assert_eq!(r.record.unwrap().state, FleetState::Open, "its open re-published");
        drop(p);
    }

    #[test]
    fn a_reset_closes_the_fleet_and_a_later_trip_opens_a_new_episode() {
        let (clock, ms, store) = fleet("member-reset", 2);
        trip(&ms[0]);
        ms.iter().for_each(|m| drop(m.sync(&store)));
        assert_eq!(ms[1].breaker().snapshot().state, State::Open);
        // A reset made while an exchange is in flight: the view it returns shows the record
        // open, and does not re-open the breaker the operator just closed.
        let b0 = Arc::clone(ms[0].breaker());
        let during = Hooked(store.clone(), move |_: &[FleetOp]| {
            b0.reset();
            Ok(())
        });
        let r = ms[0].sync(&during);
        assert_eq!(r.record.unwrap().state, FleetState::Open);
        assert_eq!(ms[0].breaker().snapshot().state, State::Closed);
        clock.set(Instant::from_millis(10)).unwrap();
        let r = ms[0].sync(&store);
        assert_eq!((r.sent, r.record.unwrap().state), (1, FleetState::Closed));
        assert_eq!(ms[0].breaker().snapshot().state, State::Closed);
        ms[1].sync(&store);
        assert_eq!(ms[1].breaker().snapshot().state, State::Closed);
        trip(&ms[1]);
        let r = ms[1].sync(&store).record.unwrap();
        assert_eq!((r.state, r.episode), (FleetState::Open, 2));
        ms[0].sync(&store);
        assert_eq!(ms[0].breaker().snapshot().state, State::Open);
    }

    #[test]
    fn a_failed_connect_detaches_at_once_and_a_connect_during_an_open_starts_open() {
        let (_clock, ms, store) = fleet("member-connect", 2);
        trip(&ms[0]);
        ms[0].sync(&store);
        memory_store_control("member-connect", "down").unwrap();
        let r = ms[1].connect(&store);
        assert!(!r.ok && !r.attached && !ms[1].is_attached());
        memory_store_control("member-connect", "up").unwrap();
        let r = ms[1].connect(&store);
        assert!(r.ok && r.attached && r.reattached && ms[1].is_attached());
        assert_eq!(ms[1].breaker().snapshot().state, State::Open);
    }

    #[test]
    fn a_deadline_beyond_the_workers_longest_wait_is_capped_and_does_not_slide() {
        let (clock, ms, store) = fleet("member-far", 1);
        // A hostile open: its first probe 10^12 ms away (the workers' longest wait is 300 s).
        let far = FleetOp::Open {
            seen_episode: 1,
            delay_ms: 1_000_000_000_000,
            retry_later: false,
        };
        store.exchange("k", &[far], 0).unwrap();
        ms[0].sync(&store);
        let wait = |m: &FleetMember| m.breaker().allow().unwrap_err().retry_after.unwrap();
        assert_eq!(wait(&ms[0]), Duration::from_secs(300));
        clock.set(Instant::from_millis(100_000)).unwrap();
        ms[0].sync(&store);
        assert_eq!(
            wait(&ms[0]),
            Duration::from_secs(200),
            "capped once, not from each sync"
        );
        clock.set(Instant::from_millis(300_000)).unwrap();
        assert!(ms[0].sync(&store).granted, "the store treats the deadline as due");
        assert!(ms[0].breaker().allow().unwrap().is_probe());
    }

    /// A [`MemoryStore`] that first runs a hook on each exchange's ops; the hook may fail it.
    struct Hooked<F>(MemoryStore, F);

    impl<F: Fn(&[FleetOp]) -> Result<(), StoreError> + Send + Sync> FleetStore for Hooked<F> {
        fn exchange(
            &self,
            key: &str,
            ops: &[FleetOp],
            now: u64,
        ) -> Result<super::super::Exchanged, StoreError> {
            (self.1)(ops)?;
            self.0.exchange(key, ops, now)
        }
    }

    #[test]
    fn after_a_corrupt_record_an_open_worker_sends_its_open_which_replaces_it() {
        let (clock, ms, memory) = fleet("member-corrupt", 2);
        trip(&ms[0]);
        ms.iter().for_each(|m| drop(m.sync(&memory)));
        memory_store_control("member-corrupt", "flush").unwrap();
        // Corrupt until an exchange carries an open (as the Redis script).
        let corrupt = std::sync::atomic::AtomicBool::new(true);
        let store = Hooked(memory, |ops: &[FleetOp]| {
            let open = ops.iter().any(|op| matches!(op, FleetOp::Open { .. }));
            if corrupt.load(Ordering::SeqCst) && !open {
                return Err(StoreError::Corrupt("state: not closed or open".into()));
            }
            corrupt.store(false, Ordering::SeqCst);
            Ok(())
        });
        clock.set(Instant::from_millis(100)).unwrap();
        let r = ms[1].sync(&store);
        assert!(matches!(r.error, Some(StoreError::Corrupt(_))) && r.sent == 0);
        let r = ms[1].sync(&store);
        assert!(r.ok && r.sent == 1, "{r:?}");
        let rec = r.record.unwrap();
        assert_eq!(
            (rec.state, rec.episode, rec.next_probe_at),
            (FleetState::Open, 1, 10_000)
        );
        assert_eq!(
            ms[1].breaker().snapshot().retry_after,
            Some(Duration::from_millis(9900))
        );
    }
}
