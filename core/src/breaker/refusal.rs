//! The lock and the lock-free refusal.
//!
//! Every change to a breaker's state is made under its mutex, through [`Locked`], which makes the
//! locked state on first use and, when released, publishes what a refusal needs: the instant
//! before which an open or half-open breaker refuses every call (`refuse_until`). A refusal then
//! reads the word, that instant and the clock once, and counts itself in an atomic: no lock.
//!
//! The word and `refuse_until` are read as a pair with a sequence counter (a seqlock): the lock
//! holder makes `seq` odd before it writes either (a change of state, a new deadline) and even
//! again, after publishing, when it releases the lock; a section that changes neither leaves it
//! alone. A reader trusts the pair only when it read the same even value before and after it.
//! Every write to the word or to `refuse_until` is a release and every read here an acquire (or
//! stronger), so a reader that saw any of a lock holder's writes sees its odd `seq` afterwards.
//! `seq` and `refuse_until` are accessed `SeqCst`, more than that argument needs: on x86 and
//! ARMv8 the loads cost what acquire loads cost and the stores happen only on a change, and loom
//! then explores only the orders that matter (with acquire/release it tries every stale value of
//! both on every read, about a thousand times as many executions).
//! A reader that cannot trust the pair, or whose reading is at or past the instant (a probe may
//! be due), takes the lock as before.

use std::collections::VecDeque;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::Ordering;
use std::time::Duration;

#[cfg(not(loom))]
pub(super) use std::sync::atomic::AtomicU32 as SeqCounter;

#[cfg(loom)]
pub(super) use loom::sync::atomic::AtomicU32 as SeqCounter;

use super::metrics::BreakerCounts;
use super::word::{word_episode, FAST_PATH_COUNTING};
use super::{Breaker, BreakerConfig, Inner, Refusal, Slow, State};
use crate::backoff::Prng;
use crate::clock::{Instant, LazyNow};
use crate::sync::{AtomicU64, Mutex, MutexGuard};
use crate::trip::TripWindow;

/// Version of the refusal block's layout and of the refusal protocol below (docs/ffi.md "The
/// refusal block"); bumped whenever either changes.
pub const REFUSAL_PATH_VERSION: u32 = 1;
/// Byte offset, from the fast-path word's address, of the refusal deadline (`u64`, nanoseconds
/// on the breaker's clock; 0: a refusal needs the library).
pub const REFUSAL_BLOCK_REFUSE_UNTIL: usize = 8;
/// Byte offset, from the word's address, of the refusal count (`u64`, added to atomically by
/// every refusal, the library's and a binding's).
pub const REFUSAL_BLOCK_REFUSALS: usize = 16;
/// Byte offset, from the word's address, of the sequence counter (`u32`, odd while the library
/// changes the word's state or the deadline).
pub const REFUSAL_BLOCK_SEQ: usize = 24;

/// The cells of a breaker's refusal block besides the word ([`Breaker::fast_path_word`]), at
/// the offsets `REFUSAL_BLOCK_*` give from it; their addresses are fixed for the breaker's life.
pub struct RefusalCells<'a> {
    /// The refusal deadline: read only.
    pub refuse_until: &'a AtomicU64,
    /// The refusal count: a binding's refusal adds 1 (relaxed is enough: it orders nothing).
    pub refusals: &'a AtomicU64,
    /// The sequence counter: read only.
    pub seq: &'a SeqCounter,
}

/// A refusal decided on the refusal block alone, already counted in its refusal count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockRefusal {
    /// Open, half-open or forced open.
    pub state: State,
    /// The episode the word carried.
    pub episode: u32,
    /// The time until the deadline (`None` while forced open): never longer than the library
    /// would have said at the same instant, when `now` is never earlier than the clock.
    pub retry_after: Option<Duration>,
}

/// The refusal protocol a binding runs on a breaker's block (docs/ffi.md "The refusal block"),
/// written once here for the model checker and as the reference for each binding's copy.
///
/// `now` is called at most once, only for an open or half-open breaker, and must give
/// nanoseconds on the breaker's own clock, never earlier than that clock's reading at the call
/// (a later one only makes a refusal fall back to the library sooner, or its wait shorter).
/// `None`: call the library's allow, which decides (and counts) as it always does.
pub fn refuse_on_block(
    word: &AtomicU64,
    cells: &RefusalCells<'_>,
    now: impl FnOnce() -> u64,
) -> Option<BlockRefusal> {
    refuse(word, cells, true, now)
}

/// [`refuse_on_block`], and the core's own refusal without the lock when `counting_crosses` is
/// false: the core counts a refusal in its metrics itself, so counting need not send it to
/// the lock.
#[inline]
fn refuse(
    word: &AtomicU64,
    cells: &RefusalCells<'_>,
    counting_crosses: bool,
    now: impl FnOnce() -> u64,
) -> Option<BlockRefusal> {
    let s = cells.seq.load(Ordering::SeqCst);
    let w = word.load(Ordering::Acquire);
    // Counting metrics: the library counts every refusal in them too.
    if counting_crosses && w & FAST_PATH_COUNTING != 0 {
        return None;
    }
    let state = State::from_bits(w);
    let retry_after = match state {
        State::ForcedOpen => None,
        State::Open | State::HalfOpen => {
            let until = cells.refuse_until.load(Ordering::SeqCst);
            if s & 1 != 0 || until == 0 || cells.seq.load(Ordering::SeqCst) != s {
                return None;
            }
            let t = now();
            if t >= until {
                return None;
            }
            Some(Duration::from_nanos(until - t))
        }
        State::Closed | State::Disabled => return None,
    };
    cells.refusals.fetch_add(1, Ordering::Relaxed);
    Some(BlockRefusal {
        state,
        episode: word_episode(w),
        retry_after,
    })
}

/// The breaker's lock, held for a change: derefs to the locked state, made on first use.
/// Dropping it publishes the refusal deadline and ends the sequence counter's odd stretch.
pub(super) struct Locked<'a> {
    breaker: &'a Breaker,
    guard: MutexGuard<'a, Inner>,
}

impl Deref for Locked<'_> {
    type Target = Inner;

    fn deref(&self) -> &Inner {
        &self.guard
    }
}

impl DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut Inner {
        &mut self.guard
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        let b = self.breaker;
        let inner = &mut *self.guard;
        let until = refusal_deadline(inner);
        if until != inner.published {
            b.seq_begin(inner);
            inner.published = until;
            b.refuse_until.store(until, Ordering::SeqCst);
        }
        // Even again, if this section made it odd.
        if inner.seq & 1 != 0 {
            inner.seq = inner.seq.wrapping_add(1);
            b.seq.store(inner.seq, Ordering::SeqCst);
        }
    }
}

/// The instant (nanoseconds) before which `allow` refuses with the time left until it, or 0 when
/// a refusal needs the lock. Computed under the lock from the state it leaves.
///
/// Before `eligible_at` no probe is admitted, and the wait `next_probe_in` reports is the time
/// until `eligible_at` unless a probe in flight holds its slot past it: so the deadline is
/// `eligible_at` when no probe's deadline is later, else 0. An attached fleet link marks demand
/// on every refusal, which needs the lock: 0.
fn refusal_deadline(inner: &Inner) -> u64 {
    let eligible = inner.eligible_at;
    if !inner.open
        || inner.fleet.as_deref().is_some_and(|l| l.is_attached())
        || inner.probes.iter().any(|p| p.deadline() > eligible)
    {
        return 0;
    }
    eligible.as_nanos()
}

impl Inner {
    /// The locked state of a breaker that has only been closed so far: what `Breaker::new`
    /// would have built, made the first time the lock is taken for a change.
    pub(super) fn new(config: &BreakerConfig, seed: u64) -> Inner {
        Inner {
            window: TripWindow::new(&config.trip),
            eligible_at: Instant::ZERO,
            probe_window: 0,
            window_admitted: 0,
            armed_at: None,
            interval: config.open_interval.initial,
            hold_until: Instant::ZERO,
            step: 0,
            recoveries: 0,
            probes: Vec::new(),
            next_probe: 1,
            rng: Prng::new(seed),
            opens: 0,
            closes: 0,
            probes_admitted: 0,
            stale: 0,
            events: VecDeque::new(),
            events_dropped: 0,
            listener: None,
            pending: Vec::new(),
            fleet: None,
            open: false,
            published: 0,
            seq: 0,
            latest: Instant::ZERO,
        }
    }
}

impl Breaker {
    /// The lock, the locked state and the metrics slot, made if this is the first time. Two
    /// first callers racing both build one; one is kept and the other dropped unused.
    pub(super) fn slow(&self) -> &Slow {
        self.slow.get_or_init(|| {
            Box::new(Slow {
                inner: Mutex::new(Inner::new(&self.profile.config, self.seed)),
                counts: BreakerCounts::new(),
            })
        })
    }

    /// Takes the lock for a change, making the locked state if this is the first time.
    pub(super) fn lock(&self) -> Locked<'_> {
        // A panic while holding the lock cannot leave Inner half-updated in a way that breaks
        // an invariant worse than the panic itself; keep serving rather than poisoning every
        // caller of a shared breaker.
        let guard = self.slow().inner.lock().unwrap_or_else(|e| e.into_inner());
        Locked { breaker: self, guard }
    }

    /// Makes the sequence counter odd, if this lock section has not already: called before the
    /// lock holder writes what a refusal reads (the word's state, `refuse_until`). Only the lock
    /// holder writes `seq`, so it keeps its value in `Inner`: no load, no read-modify-write.
    pub(super) fn seq_begin(&self, inner: &mut Inner) {
        if inner.seq & 1 == 0 {
            inner.seq = inner.seq.wrapping_add(1);
            self.seq.store(inner.seq, Ordering::SeqCst);
        }
    }

    /// Takes the lock to read (or to change what no refusal reads) without making the locked
    /// state: `None`, and no lock taken, while the breaker has only been closed.
    pub(super) fn peek(&self) -> Option<MutexGuard<'_, Inner>> {
        let slow = self.slow.get()?;
        Some(slow.inner.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// A refusal without the lock: forced open on the word alone; open or half-open when the
    /// word and the published deadline agree and `now` is before it. `None`: take the lock.
    #[inline]
    pub(super) fn refuse_fast(&self, now: &LazyNow<'_>) -> Option<Refusal> {
        refuse(&self.word, &self.refusal_cells(), false, || now.get().as_nanos()).map(|r| Refusal {
            retry_after: r.retry_after,
            state: r.state,
            episode: r.episode,
        })
    }

    /// The refusal block's cells besides the word, for bindings that refuse in place
    /// (docs/ffi.md "The refusal block"; [`refuse_on_block`] is the protocol).
    pub fn refusal_cells(&self) -> RefusalCells<'_> {
        RefusalCells {
            refuse_until: &self.refuse_until,
            refusals: &self.refusals,
            seq: &self.seq,
        }
    }

    /// Counts a refusal decided under the lock.
    pub(super) fn count_refusal(&self) {
        self.refusals.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use crate::breaker::tests::{fail, incident_one};
    use crate::breaker::{Breaker, BreakerConfig, Outcome, State};
    use crate::clock::{Instant, ManualClock};

    #[test]
    fn an_idle_closed_breaker_has_no_locked_state() {
        let (b, _) = incident_one();
        for _ in 0..3 {
            let p = b.allow().unwrap();
            b.record(p, Outcome::Success).unwrap();
        }
        assert!(b.peek().is_none());
        assert!(b.drain_events().is_empty());
        assert!(b.peek().is_none(), "draining an empty queue makes nothing");
        let p = b.allow().unwrap();
        b.record(p, Outcome::Failure).unwrap();
        assert!(b.peek().is_some(), "a failure takes the lock and makes the state");
    }

    // What a closed, idle breaker holds (the configuration and the clock are shared): the
    // refusal block (the word, the refusal deadline and count, the lock's sequence and the id:
    // 32 bytes, `repr(C)` at the start), its profile and seed, and the slot of the lazily made
    // lock, locked state and metrics. The block's fixed order must cost no padding:
    // tests/footprint.rs pins the exact size.
    #[cfg(all(target_os = "linux", target_pointer_width = "64", not(loom)))]
    #[test]
    fn an_idle_breaker_is_at_most_fifty_six_bytes() {
        assert!(std::mem::size_of::<Breaker>() <= 56);
    }

    #[test]
    fn a_snapshot_of_an_idle_breaker_makes_no_locked_state() {
        let (b, _) = incident_one();
        let p = b.allow().unwrap();
        b.record(p, Outcome::Success).unwrap();
        let s = b.snapshot();
        assert_eq!(
            (s.state, s.episode, s.failures, s.opens),
            (State::Closed, 0, 0, 0)
        );
        assert!(b.peek().is_none(), "read from the word and the initial state");
        b.set_listener(None);
        assert!(b.peek().is_none(), "removing no listener makes nothing");
        b.metrics(&mut Vec::new());
        assert!(b.peek().is_some(), "counting metrics makes the block");
        let p = b.allow().unwrap();
        b.record(p, Outcome::Failure).unwrap();
        let s = b.snapshot();
        assert_eq!((s.state, s.failures), (State::Closed, 1));
    }

    // The refusal block's layout is part of the C ABI (docs/ffi.md "The refusal block").
    #[cfg(not(loom))]
    #[test]
    fn the_refusal_block_is_at_its_published_offsets() {
        use crate::breaker::{REFUSAL_BLOCK_REFUSALS, REFUSAL_BLOCK_REFUSE_UNTIL, REFUSAL_BLOCK_SEQ};
        use std::mem::offset_of;
        assert_eq!(offset_of!(Breaker, word), 0);
        assert_eq!(offset_of!(Breaker, refuse_until), REFUSAL_BLOCK_REFUSE_UNTIL);
        assert_eq!(offset_of!(Breaker, refusals), REFUSAL_BLOCK_REFUSALS);
        assert_eq!(offset_of!(Breaker, seq), REFUSAL_BLOCK_SEQ);
        assert_eq!(offset_of!(Breaker, id), 28);
        let (b, _) = incident_one();
        let base = b.fast_path_word().as_ptr() as usize;
        let c = b.refusal_cells();
        assert_eq!(
            c.refuse_until.as_ptr() as usize - base,
            REFUSAL_BLOCK_REFUSE_UNTIL
        );
        assert_eq!(c.refusals.as_ptr() as usize - base, REFUSAL_BLOCK_REFUSALS);
        assert_eq!(c.seq.as_ptr() as usize - base, REFUSAL_BLOCK_SEQ);
    }

    #[test]
    fn a_refusal_on_the_block_agrees_with_the_library() {
        use crate::breaker::{refuse_on_block, BlockRefusal};
        let (b, clock) = incident_one();
        let on_block = |at: u64| {
            let mut reads = 0;
            let r = refuse_on_block(b.fast_path_word(), &b.refusal_cells(), || {
                reads += 1;
                at
            });
            assert!(reads <= 1);
            r
        };
        assert_eq!(on_block(0), None, "closed: the library admits");
        fail(&b, 5);
        let deadline = 60_000_000_000;
        assert_eq!(
            on_block(59_000_000_000),
            Some(BlockRefusal {
                state: State::Open,
                episode: 1,
                retry_after: Some(Duration::from_secs(1))
            })
        );
        assert_eq!(b.snapshot().refusals, 1, "counted where the library counts");
        assert_eq!(on_block(deadline), None, "at the deadline a probe may be due");
        clock.set(Instant::from_millis(59_500)).unwrap();
        let r = b.allow().unwrap_err();
        assert_eq!(r.retry_after, Some(Duration::from_millis(500)));
        assert_eq!(b.snapshot().refusals, 2);
        b.force_open();
        assert_eq!(
            on_block(0),
            Some(BlockRefusal {
                state: State::ForcedOpen,
                episode: 2,
                retry_after: None
            })
        );
        b.reset();
        b.metrics(&mut Vec::new());
        b.force_open();
        assert_eq!(
            on_block(0),
            None,
            "counting metrics: the library refuses and counts"
        );
        assert_eq!(b.snapshot().refusals, 3);
    }

    #[test]
    fn open_refusals_read_the_published_deadline() {
        let (b, clock) = incident_one();
        fail(&b, 5);
        assert_eq!(
            b.refuse_until.load(std::sync::atomic::Ordering::Acquire),
            60_000_000_000
        );
        clock.set(Instant::from_millis(59_000)).unwrap();
        let reads = clock.reads();
        let r = b.allow().unwrap_err();
        assert_eq!(clock.reads(), reads + 1, "one clock reading");
        assert_eq!(
            (r.retry_after, r.state, r.episode),
            (Some(Duration::from_secs(1)), State::Open, 1)
        );
        assert_eq!(b.snapshot().refusals, 1);
        // At the deadline the lock decides: a probe is due.
        clock.set(Instant::from_millis(60_000)).unwrap();
        let p = b.allow().unwrap();
        assert!(p.is_probe());
        // Half-open, its one slot spent: refused until the window it re-armed.
        assert_eq!(
            b.refuse_until.load(std::sync::atomic::Ordering::Acquire),
            120_000_000_000
        );
        let r = b.allow().unwrap_err();
        assert_eq!(
            (r.retry_after, r.state, r.episode),
            (Some(Duration::from_secs(60)), State::HalfOpen, 1)
        );
        assert_eq!(b.snapshot().refusals, 2);
        b.record(p, Outcome::Failure).unwrap();
        b.force_open();
        assert_eq!(b.refuse_until.load(std::sync::atomic::Ordering::Acquire), 0);
        let r = b.allow().unwrap_err();
        assert_eq!((r.retry_after, r.state, r.episode), (None, State::ForcedOpen, 2));
        b.reset();
        assert!(b.allow().is_ok());
        assert_eq!(b.snapshot().refusals, 3);
    }

    #[test]
    fn a_reading_older_than_the_lock_holders_is_not_a_longer_wait() {
        // A caller reads the clock (the lock-free refusal that then finds a probe due, or a
        // policy's one reading), then waits for the lock while another caller, at a later
        // reading, admits a probe and re-arms the window one interval ahead. Under the lock the
        // first reading is older than what the breaker has decided at; the wait is from the
        // latest instant, so never longer than the interval.
        let (b, clock) = incident_one();
        fail(&b, 5);
        clock.set(Instant::from_millis(59_000)).unwrap();
        let early = crate::clock::LazyNow::new(&clock);
        assert_eq!(early.get(), Instant::from_millis(59_000));
        clock.set(Instant::from_millis(60_000)).unwrap();
        let probe = b.allow().unwrap();
        assert!(probe.is_probe());
        assert_eq!(
            b.wait_at(&early),
            Some(Duration::from_secs(60)),
            "one interval from the probe's admission at 60 s, not from the older 59 s reading"
        );
        // A failure recorded at the older reading re-opens from the latest instant too.
        b.record_at(probe, Outcome::Failure, &early).unwrap();
        let s = b.snapshot();
        assert_eq!(
            (s.state, s.retry_after),
            (State::Open, Some(Duration::from_secs(60)))
        );
    }

    #[test]
    fn a_probe_holding_its_slot_past_the_window_takes_the_lock() {
        // A probe timeout longer than the interval: while the probe holds the only slot past the
        // window, the wait is until the probe is lost, which only the locked path computes.
        let clock = ManualClock::new();
        let b = Breaker::new(
            BreakerConfig {
                open_interval: crate::Backoff::constant(Duration::from_secs(60)),
                probe_timeout: Some(Duration::from_secs(100)),
                ..BreakerConfig::default()
            },
            Arc::new(clock.clone()),
        )
        .unwrap();
        fail(&b, 5);
        clock.set(Instant::from_millis(60_000)).unwrap();
        let _probe = b.allow().unwrap();
        assert_eq!(b.refuse_until.load(std::sync::atomic::Ordering::Acquire), 0);
        clock.set(Instant::from_millis(70_000)).unwrap();
        let r = b.allow().unwrap_err();
        assert_eq!(
            r.retry_after,
            Some(Duration::from_secs(90)),
            "until the probe is lost at 160 s"
        );
    }
}
