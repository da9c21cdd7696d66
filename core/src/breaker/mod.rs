//! The circuit breaker: closed, open, half-open, plus forced-open and disabled.
//!
//! # Contract (docs/contract.md §3; docs/incidents.md, incidents 1 and 2)
//! * **Trip**: a closed breaker opens when its [`TripPolicy`] says so, or at once on
//!   [`Outcome::RetryLater`] with a non-zero delay (the provider's own delay, bounded by
//!   [`BreakerConfig::max_retry_later`]). Each trip from closed starts a new **episode**.
//! * **Open**: calls are refused with the time until the next probe. The open interval follows
//!   [`BreakerConfig::open_interval`] and never gives up: one probe per interval for as long as
//!   the process lives (incident 2: a backoff that stopped after 15 minutes latched a breaker
//!   open for good).
//! * **Admission is the only act**: [`Breaker::allow`] both decides and admits. A probe is
//!   admitted when `now >= eligible_at` (inclusive: incident 1's fake-clock test admits at
//!   exactly 60 s), and admitting the last allowed probe re-arms the window
//!   (`eligible_at = now + interval`), so a second caller is refused and a probe that is never
//!   answered cannot wedge the breaker. [`Breaker::snapshot`] has no side effects, so no
//!   "ready?" pre-check can spend a probe (incident 2).
//! * **Recovery is a ramp**: closing needs [`BreakerConfig::recoveries`] consecutive answers to
//!   current-episode probes, one probe per interval (incident 1: closing on one stray answer
//!   caused a burst and a re-open seconds later). A success and an *answer* (reachable but not
//!   a success, such as a 404) count alike; neither closes alone when `recoveries > 1`.
//! * **Episodes**: every [`Permit`] carries the episode it was admitted under. While open or
//!   half-open, only the answer to an in-flight probe of the current episode moves recovery.
//!   Any other failure (a call admitted while closed, a probe of an earlier episode, a probe
//!   already given up as lost) discards recovery progress; any other success is ignored.
//!   Asymmetric on purpose (incident 1): stale failures are still evidence the upstream fails,
//!   stale successes prove nothing about now. While closed, only answers to permits admitted
//!   since the last trip or reset count.
//! * **The ramp's pace**: the grown backoff (or a provider's delay) decides when the first probe
//!   after a failure may go; once a probe is answered, the next probe may go one ramp step after
//!   that probe's admission: the open interval's first step, or the interval in force if that is
//!   shorter (a long outage must not cost minutes of refusals after the upstream is back, and a
//!   short Retry-After keeps its own pace). A failed ramp probe re-opens with the next step of
//!   the backoff, which grows only while probes fail.
//! * **Lost probes**: a probe unanswered after `probe_timeout` (by default the interval in
//!   force when it was admitted) is lost at that deadline, whoever observes it: its slot is free,
//!   and its later answer or cancellation is stale and moves nothing.
//! * **A probe spends its interval**: a cancelled probe frees its slot at once, but the window
//!   it was admitted in stays spent. However callers cancel, the upstream sees at most
//!   `max_probes_in_flight` probes per open interval.
//! * **Probes belong to their ramp**: once the breaker has closed, a probe's answer is stale.
//!
//! # Cost
//! While closed under [`TripPolicy::ConsecutiveFailures`], [`Breaker::allow`] and recording a
//! success are one atomic load each: no lock, no clock reading, no allocation. A refusal while
//! forced open reads the word alone; a refusal while open, before the next probe is due, reads
//! the word, the published refusal deadline and the clock once (`refusal.rs`). Everything else
//! takes a mutex and at most one clock reading.
//!
//! # Memory
//! A breaker holds inline only what the lock-free paths read (the refusal block: the word, the
//! refusal deadline, the refusal count, the sequence counter and the id), one pointer to the
//! profile it shares with every breaker built from an equal configuration on the same clock
//! (`intern.rs`), and its jitter seed: 56 bytes. The lock, the state the locked paths keep
//! (probe windows and probes, the trip window, events, the listener, the fleet link, counters)
//! and the metric counters' slot are one block allocated the first time the lock is taken for a
//! change (a failure, a trip, an operator's act, a listener, a first metrics read): an idle
//! closed breaker never allocates it, and neither does a snapshot of one.
//!
//! # Layout
//! This file holds the contract and the public types. The breaker's parts, one concept a file:
//! `config.rs`, the configuration and its rules; `intern.rs`, the one shared copy of each
//! configuration in use and of each profile (a configuration with a clock); `word.rs`, the
//! packed state word and the lock-free closed path; `probes.rs`, opening an episode, admission
//! while open, probe windows and the ramp;
//! `permit.rs`, the permits; `events.rs`, state changes, their queue and the listener;
//! `fleet.rs`, the link to a fleet (docs/fleet.md), consulted only under the lock; `refusal.rs`,
//! the lock guard that publishes what a refusal needs, and the lock-free refusal; `snapshot.rs`,
//! the side-effect-free view.

mod config;
mod events;
pub(crate) mod fleet;
pub(crate) mod intern;
mod metrics;
pub(crate) mod permit;
mod probes;
mod refusal;
mod snapshot;
mod word;

use std::collections::VecDeque;
// The breaker id counter is a static, so it stays std's under loom (loom atomics are not const).
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub use config::{BreakerConfig, MAX_PROBES};
pub use events::{Listener, StateChange, EVENT_QUEUE_CAPACITY};
pub use permit::Permit;
pub use refusal::{
    refuse_on_block, BlockRefusal, RefusalCells, REFUSAL_BLOCK_REFUSALS, REFUSAL_BLOCK_REFUSE_UNTIL,
    REFUSAL_BLOCK_SEQ, REFUSAL_PATH_VERSION,
};
pub use word::{
    fast_admit, fast_success, FAST_PATH_COUNTING, FAST_PATH_STATE_MASK, FAST_PATH_TIMED, FAST_PATH_VERSION,
};

use crate::backoff::Prng;
use crate::clock::{Clock, Instant, LazyNow};
use crate::error::{ConfigError, PermitError};
use crate::sync::{AtomicU64, Mutex};
use crate::trip::{TripPolicy, TripWindow};
use events::Transition;
use once_cell::race::OnceBox;
use probes::InFlight;
use refusal::SeqCounter;
use word::word_failures;

/// A breaker's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum State {
    /// Calls pass; outcomes are counted by the trip policy.
    Closed = 0,
    /// Calls are refused until the next probe is due.
    Open = 1,
    /// A probe was admitted in this episode and recovery is under way.
    HalfOpen = 2,
    /// Opened by an operator; refuses everything until [`Breaker::reset`].
    ForcedOpen = 3,
    /// Admits everything and never trips; outcomes are still counted.
    Disabled = 4,
}

/// What happened to a call, as the breaker needs to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The call succeeded.
    Success,
    /// The upstream answered, but not with a success, and retrying would not help (a 404, a
    /// validation error). Proves the upstream is reachable: it resets the consecutive-failure
    /// count while closed and counts toward recovery like a success.
    Answer,
    /// A transient failure: a 5xx, a refused connection, a "blocked" 403 for a provider
    /// configured that way.
    Failure,
    /// The call timed out: a failure for the breaker; it costs more retry quota.
    Timeout,
    /// The upstream asked to be left alone for this long (a 429/503 with Retry-After, an
    /// explicit retry-later error). Opens the breaker at once for that delay (bounded by
    /// [`BreakerConfig::max_retry_later`]); a zero delay counts as a plain failure.
    RetryLater(Duration),
    /// The caller gave up on the call (cancellation, drop): counts for nothing, frees a probe.
    Cancelled,
}

impl Outcome {
    fn is_failure(&self) -> bool {
        matches!(self, Outcome::Failure | Outcome::Timeout)
            || matches!(self, Outcome::RetryLater(d) if d.is_zero())
    }
}

/// A refused admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    /// Time until a call could be admitted; `None` while forced open (until an operator resets).
    pub retry_after: Option<Duration>,
    /// The breaker's state when it refused.
    pub state: State,
    /// The open episode's number.
    pub episode: u32,
}

/// What recording did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// The outcome was counted: it may have moved the breaker.
    Counted,
    /// A stale answer (an earlier episode, a call admitted before the open, a lost probe): kept
    /// in metrics; a stale failure still discards recovery progress.
    Stale,
    /// Nothing to count (a cancelled call).
    Ignored,
}

/// Why the state changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The trip policy opened a closed breaker.
    Tripped,
    /// A retry-later outcome opened the breaker for the provider's delay.
    RetryLater,
    /// A probe was admitted.
    ProbeAdmitted,
    /// The current probe failed; the breaker waits the next, longer interval.
    ProbeFailed,
    /// Enough consecutive probe answers: closed.
    Recovered,
    /// An operator forced the breaker open.
    ForcedOpen,
    /// An operator disabled the breaker.
    Disabled,
    /// An operator reset the breaker to closed.
    Reset,
    /// The fleet's shared record is open (another worker tripped or saw a retry-later): this
    /// breaker opened with it, its first probe time converted from the store's clock.
    FleetOpened,
}

/// A side-effect-free view of a breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Snapshot {
    /// Current state.
    pub state: State,
    /// Number of the current (or last) open episode; 0 before the first trip.
    pub episode: u32,
    /// Failures counted by the trip policy now (consecutive, or inside the window).
    pub failures: u64,
    /// Consecutive current-episode probe answers so far.
    pub recoveries: u32,
    /// Probes admitted and not yet answered, cancelled or timed out.
    pub probes_in_flight: u32,
    /// While open or half-open: time until the next probe may be admitted (zero when one may
    /// go now). `None` while closed, disabled or forced open.
    pub retry_after: Option<Duration>,
    /// Whether [`Breaker::allow`] would admit a probe now.
    pub probe_ready: bool,
    /// The open interval in force, if open or half-open.
    pub interval: Option<Duration>,
    /// Times the breaker opened from closed.
    pub opens: u64,
    /// Times the breaker closed by recovering.
    pub closes: u64,
    /// Probes admitted.
    pub probes: u64,
    /// Admissions refused.
    pub refusals: u64,
    /// Stale answers received.
    pub stale_answers: u64,
    /// Events dropped because nobody drained the queue.
    pub events_dropped: u64,
}

static NEXT_ID: AtomicU32 = AtomicU32::new(1);

struct Inner {
    window: TripWindow,
    eligible_at: Instant,
    // Each new probe window (a re-arm, a trip, a failed probe) gets a new number; an interval
    // admits at most `max_probes_in_flight` probes, however fast they are answered, so that
    // recovery ramps one interval at a time instead of bursting (docs/contract.md §3;
    // docs/incidents.md, incident 1).
    probe_window: u64,
    window_admitted: u32,
    // When the admission that re-armed the current window happened; `None` when a trip or a
    // failed probe opened it. An answered probe pulls the window in to this instant plus the
    // open interval's first step (the ramp's pace).
    armed_at: Option<Instant>,
    interval: Duration,
    // The latest provider's deadline (a retry-later) of this episode; `Instant::ZERO` when none.
    // A failed probe re-opens with the backoff's next step but never before it: a known
    // Retry-After is not brought forward (docs/contract.md §3).
    hold_until: Instant,
    step: u32,
    recoveries: u32,
    probes: Vec<InFlight>,
    next_probe: u32,
    rng: Prng,
    opens: u64,
    closes: u64,
    probes_admitted: u64,
    stale: u64,
    events: VecDeque<StateChange>,
    events_dropped: u64,
    listener: Option<Listener>,
    pending: Vec<StateChange>,
    // The link to a fleet, when one is attached (breaker/fleet.rs); consulted only under the
    // lock, never by the closed fast path.
    fleet: Option<Box<fleet::FleetLink>>,
    // The lock holder's copies of what it publishes (refusal.rs): whether the word is open or
    // half-open, the last refusal deadline stored and the sequence counter's last value.
    open: bool,
    published: u64,
    seq: u32,
    // The latest reading used under the lock (see `Inner::at`).
    latest: Instant,
}

impl Inner {
    /// The instant a locked decision works at: the caller's one reading, or the latest reading
    /// this breaker has already used under the lock if that is later. A reading is taken before
    /// the lock (by the lock-free refusal, or by a policy sharing its one reading), and another
    /// caller may decide at a later one in between; since this decision follows that one, its
    /// time is at least the later reading. Without this an older reading would measure a wait
    /// from before the window it reports was armed (longer than the interval) or record into a
    /// window out of order.
    fn at(&mut self, now: &LazyNow<'_>) -> Instant {
        self.latest = self.latest.max(now.get());
        self.latest
    }

    /// Forgets what belongs to one episode or one closed stretch: recovery progress, the probes
    /// in flight (their answers are stale from now on) and the trip policy's counts.
    fn start_afresh(&mut self) {
        self.recoveries = 0;
        self.hold_until = Instant::ZERO;
        self.probes.clear();
        self.window.clear();
    }
}

/// A circuit breaker for one upstream. `Send + Sync`: share it (behind an `Arc`) between every
/// thread that calls that upstream.
//
// `repr(C)` for the refusal block (docs/ffi.md "The refusal block"): the first five fields are
// the block a binding reads in place, at the offsets `REFUSAL_BLOCK_*` name (word 0,
// refuse_until 8, refusals 16, seq 24, id 28); the fields after it are the core's own: the
// shared profile (32), the seed (40) and the slot of the lazily made lock and state (48), 56
// bytes in all (tests/footprint.rs).
#[repr(C)]
pub struct Breaker {
    word: AtomicU64,
    // Nanoseconds on this breaker's clock before which an open or half-open breaker refuses
    // every call with the time left until then; 0 when a refusal needs the lock. Written when
    // the lock is released (refusal.rs), read by the lock-free refusal.
    refuse_until: AtomicU64,
    // Admissions refused, counted without the lock.
    refusals: AtomicU64,
    // Odd while a lock holder may be changing the word or the refusal deadline: the lock-free
    // refusal trusts the pair only when it read the same even value before and after them.
    seq: SeqCounter,
    id: u32,
    // The configuration and the clock, shared by every breaker built from an equal
    // configuration on the same clock (every breaker of a group shares its template's): one
    // pointer, and one more hop to the clock for a refusal.
    profile: Arc<intern::Profile>,
    // This breaker's own jitter seed (a group's breakers mix the key into the template's).
    seed: u64,
    // The lock, the locked state and the metrics slot: made the first time the lock is taken
    // for a change, absent (one null pointer) while the breaker has only been closed.
    slow: OnceBox<Slow>,
}

/// What a breaker makes the first time it leaves the lock-free closed path.
struct Slow {
    inner: Mutex<Inner>,
    // Allocated on the first read of this breaker's metrics; one pointer until then.
    counts: metrics::BreakerCounts,
}

impl Drop for Breaker {
    fn drop(&mut self) {
        intern::release_profile(&self.profile);
    }
}

impl std::fmt::Debug for Breaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Breaker")
            .field("id", &self.id)
            .field("config", &self.profile.config)
            .finish()
    }
}

impl Breaker {
    /// A closed breaker. Fails with [`ConfigError`] naming the first invalid field.
    ///
    /// Breakers built from equal configurations (every field equal, floats bit for bit) share
    /// one immutable copy of it: a process usually holds many breakers, one per upstream host,
    /// tenant or provider, made from one or a few configurations, and a copy each would cost
    /// more than the breaker itself. Breakers that also share their clock (the same `Arc`)
    /// share one profile of the two, so that a breaker holds one pointer for both. Both are
    /// found in process-wide tables under short locks taken here and when a breaker is dropped,
    /// never by a call; the tables hold nothing alive and stay bounded by the distinct
    /// configurations and pairings in use (`intern.rs`). A breaker alone on its configuration
    /// and clock allocates its profile (40 bytes).
    pub fn new(config: BreakerConfig, clock: Arc<dyn Clock>) -> Result<Breaker, ConfigError> {
        config.validate()?;
        let seed = config.seed;
        Ok(Breaker::build(
            intern::profile(intern::intern(config), clock),
            seed,
        ))
    }

    /// A closed breaker on a configuration shared with other breakers (a group shares its
    /// template), seeding its jitter with `seed` instead of `config.seed`; breakers given the
    /// same `config` (by address) and `clock` share one profile of the two. Fails with
    /// [`ConfigError`] naming the first invalid field.
    pub fn with_shared_config(
        config: Arc<BreakerConfig>,
        seed: u64,
        clock: Arc<dyn Clock>,
    ) -> Result<Breaker, ConfigError> {
        config.validate()?;
        Ok(Breaker::build(intern::profile(config, clock), seed))
    }

    /// A closed breaker on a validated configuration's profile.
    fn build(profile: Arc<intern::Profile>, seed: u64) -> Breaker {
        Breaker {
            word: AtomicU64::new(word::initial_word(profile.config.trip.is_timed())),
            refuse_until: AtomicU64::new(0),
            refusals: AtomicU64::new(0),
            seq: SeqCounter::new(0),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed).max(1),
            profile,
            seed,
            slow: OnceBox::new(),
        }
    }

    /// The configuration this breaker was built with. For a breaker of a
    /// [`BreakerGroup`](crate::BreakerGroup), the group's template: its jitter seed is the
    /// template's mixed with the key.
    pub fn config(&self) -> &BreakerConfig {
        &self.profile.config
    }

    /// Whether the trip policy counts over a time window (every outcome reads the clock).
    fn timed(&self) -> bool {
        self.config().trip.is_timed()
    }

    /// Consecutive failures that trip the breaker (`u64::MAX` for a timed policy).
    fn threshold(&self) -> u64 {
        match self.config().trip {
            TripPolicy::ConsecutiveFailures { threshold } => u64::from(threshold),
            _ => u64::MAX,
        }
    }

    /// The clock this breaker reads.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.profile.clock
    }

    /// This breaker's process-unique id (carried by its permits).
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Whether a group may evict this breaker: closed, with no failure counted by its trip
    /// policy (a timed policy counts every failure still held, whatever its age: no clock is
    /// read). Open, half-open, forced-open and disabled breakers are never idle.
    pub(crate) fn is_idle(&self) -> bool {
        let w = self.word.load(Ordering::Acquire);
        if State::from_bits(w) != State::Closed {
            return false;
        }
        if self.timed() {
            // Read without making the locked state: a breaker that never took the lock for a
            // change has counted nothing.
            self.peek().map_or(true, |i| i.window.failures(None) == 0)
        } else {
            word_failures(w) == 0
        }
    }

    /// Asks to make a call. Admits it (while closed or disabled, or as a probe when one is due)
    /// or refuses it with the time until the next probe.
    ///
    /// This is the only act of admission: there is no separate "ready?" check to consume a
    /// probe. While closed it reads no clock and takes no lock.
    #[inline]
    pub fn allow(&self) -> Result<Permit, Refusal> {
        self.allow_with(None)
    }

    /// [`Breaker::allow`] sharing the caller's one clock reading.
    #[inline]
    pub(crate) fn allow_at(&self, now: &LazyNow<'_>) -> Result<Permit, Refusal> {
        self.allow_with(Some(now))
    }

    /// Admission, for [`Breaker::allow`] and [`Breaker::allow_at`]. `now` is the caller's reading,
    /// or `None` to read this breaker's clock if it comes to that: building a reader before the
    /// closed path would cost it a few stores on every call, as the compiler does not move them
    /// into the cold branch.
    #[inline]
    fn allow_with(&self, now: Option<&LazyNow<'_>>) -> Result<Permit, Refusal> {
        /// The slow path, counted. Out of line so that `allow` stays small enough to inline.
        #[cold]
        #[inline(never)]
        fn slow(b: &Breaker, now: Option<&LazyNow<'_>>) -> Result<Permit, Refusal> {
            let r = b.allow_slow(now);
            b.count_allow_slow(r.is_ok());
            r
        }
        // Nothing here reads the result once the two arms meet (the fast arm counts itself in
        // `allow_fast`), so a caller's match on it is decided in each arm and the fast arm's
        // permit stays in registers; only the slow arm's answer comes back through memory.
        match self.allow_fast() {
            Some(permit) => Ok(permit),
            None => slow(self, now),
        }
    }

    /// Reports the outcome of a call admitted by [`Breaker::allow`].
    ///
    /// Errors: [`PermitError::Foreign`] if another breaker issued the permit. A success while
    /// closed under the consecutive policy reads no clock and takes no lock.
    #[inline]
    pub fn record(&self, permit: Permit, outcome: Outcome) -> Result<Effect, PermitError> {
        self.record_with(permit, outcome, None)
    }

    /// [`Breaker::record`] sharing the caller's one clock reading.
    #[inline]
    pub(crate) fn record_at(
        &self,
        permit: Permit,
        outcome: Outcome,
        now: &LazyNow<'_>,
    ) -> Result<Effect, PermitError> {
        self.record_with(permit, outcome, Some(now))
    }

    /// Recording, for [`Breaker::record`] and [`Breaker::record_at`]; `now` as in
    /// [`Breaker::allow_with`].
    #[inline]
    fn record_with(
        &self,
        permit: Permit,
        outcome: Outcome,
        now: Option<&LazyNow<'_>>,
    ) -> Result<Effect, PermitError> {
        /// The slow path, counted; out of line as in `allow_with`.
        #[cold]
        #[inline(never)]
        fn slow(b: &Breaker, permit: &Permit, outcome: Outcome, now: Option<&LazyNow<'_>>) -> Effect {
            let effect = b.record_slow(permit, outcome, now);
            b.count_record(&outcome, effect);
            effect
        }
        if permit.breaker != self.id {
            return Err(PermitError::Foreign);
        }
        if self.record_fast(&permit, outcome) {
            return Ok(Effect::Counted);
        }
        // The slow path gets a copy: lending it the permit's own place would keep the permit in
        // memory on the fast path too, built there by narrow stores and read back by wider loads
        // (a store-forwarding stall that made this call several times slower).
        let permit = Permit { ..permit };
        Ok(slow(self, &permit, outcome, now))
    }

    #[cold]
    fn record_slow(&self, permit: &Permit, outcome: Outcome, now: Option<&LazyNow<'_>>) -> Effect {
        let own = LazyNow::new(&*self.profile.clock);
        let now = now.unwrap_or(&own);
        let mut inner = self.lock();
        let w = self.word.load(Ordering::Acquire);
        let effect = match State::from_bits(w) {
            _ if outcome == Outcome::Cancelled => self.cancel(&mut inner, w, permit),
            State::Closed => self.record_closed(&mut inner, w, permit, outcome, now),
            State::Disabled => self.record_disabled(&mut inner, w, permit, outcome, now),
            State::ForcedOpen => {
                inner.stale += 1;
                Effect::Stale
            }
            State::Open | State::HalfOpen => {
                let t = inner.at(now);
                self.record_open(&mut inner, w, permit, outcome, t)
            }
        };
        self.finish(inner);
        effect
    }

    /// Time until a call could be admitted at the caller's reading: zero while closed or
    /// disabled, `None` while forced open.
    pub(crate) fn wait_at(&self, now: &LazyNow<'_>) -> Option<Duration> {
        // Closed, disabled and forced open are read on the word alone; only the lock holder
        // changes the state, so the answer is the one the lock would give at this load.
        match State::from_bits(self.word.load(Ordering::Acquire)) {
            State::Closed | State::Disabled => return Some(Duration::ZERO),
            State::ForcedOpen => return None,
            State::Open | State::HalfOpen => {}
        }
        let mut inner = self.lock();
        match State::from_bits(self.word.load(Ordering::Acquire)) {
            State::Closed | State::Disabled => Some(Duration::ZERO),
            State::ForcedOpen => None,
            State::Open | State::HalfOpen => {
                let t = inner.at(now);
                Some(self.next_probe_in(&inner, t))
            }
        }
    }

    /// Opens the breaker until [`Breaker::reset`], refusing every call with no retry time. Starts
    /// a new episode, so answers to calls admitted before it are stale.
    pub fn force_open(&self) {
        self.operator(State::ForcedOpen, Reason::ForcedOpen);
    }

    /// Admits every call and never trips until [`Breaker::reset`]. Starts a new episode.
    pub fn disable(&self) {
        self.operator(State::Disabled, Reason::Disabled);
    }

    /// Back to closed with fresh counts. Starts a new episode: answers to permits admitted before
    /// the reset are stale and move nothing. On a breaker attached to a fleet, the fleet's open
    /// record closes too (docs/fleet.md, "Operator controls").
    pub fn reset(&self) {
        self.operator(State::Closed, Reason::Reset);
    }

    fn operator(&self, to: State, reason: Reason) {
        let now = LazyNow::new(&*self.profile.clock);
        let mut inner = self.lock();
        let w = self.word.load(Ordering::Acquire);
        let t = inner.at(&now);
        inner.start_afresh();
        inner.step = 0;
        if to == State::Closed {
            inner.fleet_reset();
        }
        let change = Transition {
            new_episode: true,
            ..Transition::new(w, to, reason, t)
        };
        self.apply(&mut inner, change);
        self.finish(inner);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backoff::Backoff;
    use crate::clock::ManualClock;

    pub(super) fn incident_one() -> (Breaker, ManualClock) {
        let clock = ManualClock::new();
        let cfg = BreakerConfig {
            open_interval: Backoff::constant(Duration::from_secs(60)),
            ..BreakerConfig::default()
        };
        (Breaker::new(cfg, Arc::new(clock.clone())).unwrap(), clock)
    }

    pub(super) fn fail(b: &Breaker, n: usize) {
        for _ in 0..n {
            let p = b.allow().unwrap();
            b.record(p, Outcome::Failure).unwrap();
        }
    }
}
