//! The circuit breaker: closed, open, half-open, plus forced-open and disabled.
//!
//! # Contract (DESIGN §3, incidents 1 and 2)
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
//! success are one atomic load each: no lock, no clock reading, no allocation. Everything else
//! takes a mutex and at most one clock reading.

use std::collections::VecDeque;
// The breaker id counter is a static, so it stays std's under loom (loom atomics are not const).
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::backoff::{Backoff, Prng};
use crate::clock::{Clock, Instant, LazyNow};
use crate::error::{ConfigError, PermitError};
use crate::sync::{AtomicBool, AtomicU64, Mutex, MutexGuard};
use crate::trip::{TripPolicy, TripWindow};

/// How many state changes a breaker keeps for [`Breaker::drain_events`] before dropping the
/// oldest.
pub const EVENT_QUEUE_CAPACITY: usize = 1024;

/// Upper bound on [`BreakerConfig::recoveries`] and [`BreakerConfig::max_probes_in_flight`].
pub const MAX_PROBES: u32 = 1000;

/// Configuration of one breaker.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct BreakerConfig {
    /// When the breaker trips. Default: 5 consecutive failures.
    pub trip: TripPolicy,
    /// Interval between probes while open: constant or exponential with a cap, optional
    /// jitter, never giving up. Default: 30 s doubling to 5 min, no jitter (incident 2).
    pub open_interval: Backoff,
    /// Consecutive current-episode probe answers needed to close (1..=1000). Default 3
    /// (incident 1).
    pub recoveries: u32,
    /// Probes admitted per interval (1..=1000). Default 1.
    pub max_probes_in_flight: u32,
    /// How long an unanswered probe holds its slot; `None` (default) means the open interval in
    /// force when it was admitted.
    pub probe_timeout: Option<Duration>,
    /// Guard on a provider's retry-later delay: longer delays open the breaker for this long
    /// instead (the event says so). Default 300 s. Must be > 0.
    pub max_retry_later: Duration,
    /// Seed of the jitter PRNG.
    pub seed: u64,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig {
            trip: TripPolicy::default(),
            open_interval: Backoff::exponential(Duration::from_secs(30), 2.0, Duration::from_secs(300)),
            recoveries: 3,
            max_probes_in_flight: 1,
            probe_timeout: None,
            max_retry_later: Duration::from_secs(300),
            seed: 0,
        }
    }
}

impl BreakerConfig {
    /// Checks every field; the error names the field and the rule.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.trip.validate()?;
        self.open_interval.validate("breaker.open_interval")?;
        if self.recoveries == 0 || self.recoveries > MAX_PROBES {
            return Err(ConfigError::new(
                "breaker.recoveries",
                "must be between 1 and 1000",
            ));
        }
        if self.max_probes_in_flight == 0 || self.max_probes_in_flight > MAX_PROBES {
            return Err(ConfigError::new(
                "breaker.max_probes_in_flight",
                "must be between 1 and 1000",
            ));
        }
        if self.probe_timeout.is_some_and(|d| d.is_zero()) {
            return Err(ConfigError::new(
                "breaker.probe_timeout",
                "must be greater than 0",
            ));
        }
        if self.max_retry_later.is_zero() {
            return Err(ConfigError::new(
                "breaker.max_retry_later",
                "must be greater than 0",
            ));
        }
        Ok(())
    }
}

/// A breaker's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
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

impl State {
    /// The stable name used by the conformance suite: `closed`, `open`, `half_open`,
    /// `forced_open`, `disabled`.
    pub fn name(self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::Open => "open",
            State::HalfOpen => "half_open",
            State::ForcedOpen => "forced_open",
            State::Disabled => "disabled",
        }
    }

    fn from_bits(b: u64) -> State {
        match b & STATE_MASK {
            0 => State::Closed,
            1 => State::Open,
            2 => State::HalfOpen,
            3 => State::ForcedOpen,
            _ => State::Disabled,
        }
    }
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
    /// The stable name used by the conformance suite.
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Answer => "answer",
            Outcome::Failure => "failure",
            Outcome::Timeout => "timeout",
            Outcome::RetryLater(_) => "retry_later",
            Outcome::Cancelled => "cancelled",
        }
    }

    fn is_failure(&self) -> bool {
        matches!(self, Outcome::Failure | Outcome::Timeout)
            || matches!(self, Outcome::RetryLater(d) if d.is_zero())
    }
}

/// Leave to make one call. Record it exactly once with [`Breaker::record`].
///
/// A permit is a plain value (12 bytes) and is not `Clone`: recording consumes it, so Rust code
/// cannot record twice. A dropped probe permit is a lost probe; its slot frees after the probe
/// timeout. Bindings that hand permits out as shared objects report a second record as
/// [`PermitError::AlreadyRecorded`].
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a permit must be recorded; a dropped probe permit holds its slot until it times out"]
pub struct Permit {
    breaker: u32,
    episode: u32,
    probe: u32,
}

/// The raw fields of a [`Permit`], for bindings that carry permits across FFI as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct RawPermit {
    /// The issuing breaker's id.
    pub breaker: u32,
    /// The internal episode counter at admission.
    pub episode: u32,
    /// The probe's id within its episode; 0 for a call admitted while closed.
    pub probe: u32,
}

impl Permit {
    /// The episode this call was admitted under: 0 when admitted while closed (or disabled),
    /// otherwise the number of the open episode whose probe this is.
    pub fn episode(&self) -> u32 {
        if self.probe == 0 {
            0
        } else {
            self.episode
        }
    }

    /// Whether this call is a probe of an open breaker.
    pub fn is_probe(&self) -> bool {
        self.probe != 0
    }

    /// The raw fields, for carrying the permit across FFI.
    pub fn into_raw(self) -> RawPermit {
        RawPermit {
            breaker: self.breaker,
            episode: self.episode,
            probe: self.probe,
        }
    }

    /// Rebuilds a permit from its raw fields. A forged or foreign permit is caught by
    /// [`Breaker::record`] as [`PermitError::Foreign`] or treated as a stale answer.
    pub fn from_raw(raw: RawPermit) -> Permit {
        Permit {
            breaker: raw.breaker,
            episode: raw.episode,
            probe: raw.probe,
        }
    }
}

/// A permit held as a shared object and recorded at most once: for bindings (Python, Node,
/// Kotlin, C#) whose permits are objects that user code may try to record twice. Lock-free.
#[derive(Debug)]
pub struct PermitSlot {
    raw: RawPermit,
    taken: AtomicBool,
}

impl PermitSlot {
    /// Wraps a permit.
    pub fn new(permit: Permit) -> PermitSlot {
        PermitSlot {
            raw: permit.into_raw(),
            taken: AtomicBool::new(false),
        }
    }

    /// The episode the permit was admitted under (0 while closed).
    pub fn episode(&self) -> u32 {
        if self.raw.probe == 0 {
            0
        } else {
            self.raw.episode
        }
    }

    /// Whether the permit is a probe.
    pub fn is_probe(&self) -> bool {
        self.raw.probe != 0
    }

    /// Whether the permit was already taken for recording.
    pub fn is_taken(&self) -> bool {
        self.taken.load(Ordering::Acquire)
    }

    /// Takes the permit to record it on `breaker`: [`PermitError::Foreign`] if another breaker
    /// issued it (the slot stays usable), [`PermitError::AlreadyRecorded`] the second time.
    pub fn take(&self, breaker: &Breaker) -> Result<Permit, PermitError> {
        if self.raw.breaker != breaker.id() {
            return Err(PermitError::Foreign);
        }
        if self.taken.swap(true, Ordering::AcqRel) {
            return Err(PermitError::AlreadyRecorded);
        }
        Ok(Permit::from_raw(self.raw))
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

impl Effect {
    /// The stable name used by the conformance suite.
    pub fn name(self) -> &'static str {
        match self {
            Effect::Counted => "counted",
            Effect::Stale => "stale",
            Effect::Ignored => "ignored",
        }
    }
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
}

impl Reason {
    /// The stable name used by the conformance suite.
    pub fn name(self) -> &'static str {
        match self {
            Reason::Tripped => "tripped",
            Reason::RetryLater => "retry_later",
            Reason::ProbeAdmitted => "probe_admitted",
            Reason::ProbeFailed => "probe_failed",
            Reason::Recovered => "recovered",
            Reason::ForcedOpen => "forced_open",
            Reason::Disabled => "disabled",
            Reason::Reset => "reset",
        }
    }
}

/// One state change, with the time of the reading that caused it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateChange {
    /// When it happened on the breaker's clock.
    pub at: Instant,
    /// State before.
    pub from: State,
    /// State after.
    pub to: State,
    /// The episode number after the change (0 before the first trip).
    pub episode: u32,
    /// Why.
    pub reason: Reason,
    /// For [`Reason::RetryLater`]: the delay the provider asked for, before the guard.
    pub requested_delay: Option<Duration>,
    /// For openings: how long until the first probe may be admitted.
    pub open_for: Option<Duration>,
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

/// Callback for state changes. Called after the breaker's lock is released, so it may call back
/// into the breaker.
pub type Listener = Arc<dyn Fn(&StateChange) + Send + Sync>;

// The fast-path word: state in bits 0..3, consecutive failures in bits 3..32, episode in 32..64.
const STATE_MASK: u64 = 0b111;
const FAIL_SHIFT: u32 = 3;
const FAIL_MASK: u64 = (1 << 29) - 1;

fn pack(state: State, failures: u64, episode: u32) -> u64 {
    (state as u64) | ((failures & FAIL_MASK) << FAIL_SHIFT) | ((episode as u64) << 32)
}
fn word_failures(w: u64) -> u64 {
    (w >> FAIL_SHIFT) & FAIL_MASK
}
fn word_episode(w: u64) -> u32 {
    (w >> 32) as u32
}

static NEXT_ID: AtomicU32 = AtomicU32::new(1);

#[derive(Debug, Clone, Copy)]
struct InFlight {
    id: u32,
    admitted: Instant,
    timeout: Duration,
}

impl InFlight {
    // Judged by age, not by a saturating deadline: at the end of the clock axis a deadline would
    // equal "now" and every probe would be lost the moment it was admitted.
    fn alive(&self, t: Instant) -> bool {
        t.saturating_since(self.admitted) < self.timeout
    }

    fn deadline(&self) -> Instant {
        self.admitted.saturating_add(self.timeout)
    }
}

struct Inner {
    window: TripWindow,
    eligible_at: Instant,
    // Each new probe window (a re-arm, a trip, a failed probe) gets a new number; an interval
    // admits at most `max_probes_in_flight` probes, however fast they are answered, so that
    // recovery ramps one interval at a time instead of bursting (DESIGN §3, incident 1).
    probe_window: u64,
    window_admitted: u32,
    // When the admission that re-armed the current window happened; `None` when a trip or a
    // failed probe opened it. An answered probe pulls the window in to this instant plus the
    // open interval's first step (the ramp's pace).
    armed_at: Option<Instant>,
    interval: Duration,
    step: u32,
    recoveries: u32,
    probes: Vec<InFlight>,
    next_probe: u32,
    rng: Prng,
    opens: u64,
    closes: u64,
    probes_admitted: u64,
    refusals: u64,
    stale: u64,
    events: VecDeque<StateChange>,
    events_dropped: u64,
    listener: Option<Listener>,
    pending: Vec<StateChange>,
}

/// A circuit breaker for one upstream. `Send + Sync`: share it (behind an `Arc`) between every
/// thread that calls that upstream.
pub struct Breaker {
    id: u32,
    word: AtomicU64,
    config: BreakerConfig,
    timed: bool,
    threshold: u64,
    clock: Arc<dyn Clock>,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for Breaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Breaker")
            .field("id", &self.id)
            .field("config", &self.config)
            .finish()
    }
}

impl Breaker {
    /// A closed breaker. Fails with [`ConfigError`] naming the first invalid field.
    pub fn new(config: BreakerConfig, clock: Arc<dyn Clock>) -> Result<Breaker, ConfigError> {
        config.validate()?;
        let threshold = match config.trip {
            TripPolicy::ConsecutiveFailures { threshold } => u64::from(threshold),
            _ => u64::MAX,
        };
        Ok(Breaker {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed).max(1),
            word: AtomicU64::new(pack(State::Closed, 0, 0)),
            timed: config.trip.is_timed(),
            threshold,
            inner: Mutex::new(Inner {
                window: TripWindow::new(&config.trip),
                eligible_at: Instant::ZERO,
                probe_window: 0,
                window_admitted: 0,
                armed_at: None,
                interval: config.open_interval.initial,
                step: 0,
                recoveries: 0,
                probes: Vec::with_capacity(config.max_probes_in_flight as usize),
                next_probe: 1,
                rng: Prng::new(config.seed),
                opens: 0,
                closes: 0,
                probes_admitted: 0,
                refusals: 0,
                stale: 0,
                events: VecDeque::new(),
                events_dropped: 0,
                listener: None,
                pending: Vec::new(),
            }),
            config,
            clock,
        })
    }

    /// The configuration this breaker was built with.
    pub fn config(&self) -> &BreakerConfig {
        &self.config
    }

    /// The clock this breaker reads.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
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
        if self.timed {
            self.lock().window.failures(None) == 0
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
        let w = self.word.load(Ordering::Acquire);
        match State::from_bits(w) {
            State::Closed | State::Disabled => Ok(Permit {
                breaker: self.id,
                episode: word_episode(w),
                probe: 0,
            }),
            _ => self.allow_slow(&LazyNow::new(&*self.clock)),
        }
    }

    /// [`Breaker::allow`] sharing the caller's one clock reading.
    pub(crate) fn allow_at(&self, now: &LazyNow<'_>) -> Result<Permit, Refusal> {
        let w = self.word.load(Ordering::Acquire);
        match State::from_bits(w) {
            State::Closed | State::Disabled => Ok(Permit {
                breaker: self.id,
                episode: word_episode(w),
                probe: 0,
            }),
            _ => self.allow_slow(now),
        }
    }

    /// [`Breaker::record`] sharing the caller's one clock reading.
    pub(crate) fn record_at(
        &self,
        permit: Permit,
        outcome: Outcome,
        now: &LazyNow<'_>,
    ) -> Result<Effect, PermitError> {
        if permit.breaker != self.id {
            return Err(PermitError::Foreign);
        }
        if self.record_fast(&permit, outcome) {
            return Ok(Effect::Counted);
        }
        let mut inner = self.lock();
        let effect = self.record_locked(&mut inner, now, permit, outcome);
        self.finish(inner);
        Ok(effect)
    }

    /// Time until a call could be admitted at the caller's reading: zero while closed or
    /// disabled, `None` while forced open.
    pub(crate) fn wait_at(&self, now: &LazyNow<'_>) -> Option<Duration> {
        let inner = self.lock();
        let w = self.word.load(Ordering::Acquire);
        match State::from_bits(w) {
            State::Closed | State::Disabled => Some(Duration::ZERO),
            State::ForcedOpen => None,
            _ => {
                let t = now.get();
                let max = self.config.max_probes_in_flight as usize;
                let mut until = inner.eligible_at;
                let live: Vec<Instant> = inner
                    .probes
                    .iter()
                    .filter(|p| p.alive(t))
                    .map(InFlight::deadline)
                    .collect();
                if live.len() >= max {
                    if let Some(first) = live.iter().min() {
                        until = until.max(*first);
                    }
                }
                Some(until.saturating_since(t))
            }
        }
    }

    /// Reports the outcome of a call admitted by [`Breaker::allow`].
    ///
    /// Errors: [`PermitError::Foreign`] if another breaker issued the permit. A success while
    /// closed under the consecutive policy reads no clock and takes no lock.
    #[inline]
    pub fn record(&self, permit: Permit, outcome: Outcome) -> Result<Effect, PermitError> {
        if permit.breaker != self.id {
            return Err(PermitError::Foreign);
        }
        if self.record_fast(&permit, outcome) {
            return Ok(Effect::Counted);
        }
        Ok(self.record_slow(permit, outcome))
    }

    /// The closed path of a success or an answer under the consecutive policy: one atomic load
    /// (and a compare-and-swap only when there were failures to forget). True when done.
    #[inline]
    fn record_fast(&self, permit: &Permit, outcome: Outcome) -> bool {
        if matches!(outcome, Outcome::Success | Outcome::Answer) && !self.timed {
            let w = self.word.load(Ordering::Acquire);
            if State::from_bits(w) == State::Closed && word_episode(w) == permit.episode && permit.probe == 0
            {
                return word_failures(w) == 0 || self.reset_failures(w, permit.episode);
            }
        }
        false
    }

    #[cold]
    fn reset_failures(&self, mut w: u64, episode: u32) -> bool {
        loop {
            if State::from_bits(w) != State::Closed || word_episode(w) != episode {
                return false;
            }
            let new = pack(State::Closed, 0, episode);
            match self
                .word
                .compare_exchange_weak(w, new, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return true,
                Err(actual) => w = actual,
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave Inner half-updated in a way that breaks
        // an invariant worse than the panic itself; keep serving rather than poisoning every
        // caller of a shared breaker.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn finish(&self, mut inner: MutexGuard<'_, Inner>) {
        if inner.pending.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut inner.pending);
        let listener = inner.listener.clone();
        drop(inner);
        if let Some(l) = listener {
            for ev in &pending {
                l(ev);
            }
        }
    }

    #[cold]
    fn allow_slow(&self, now: &LazyNow<'_>) -> Result<Permit, Refusal> {
        let mut inner = self.lock();
        let w = self.word.load(Ordering::Acquire);
        let state = State::from_bits(w);
        let episode = word_episode(w);
        let result = match state {
            State::Closed | State::Disabled => Ok(Permit {
                breaker: self.id,
                episode,
                probe: 0,
            }),
            State::ForcedOpen => {
                inner.refusals += 1;
                Err(Refusal {
                    retry_after: None,
                    state,
                    episode,
                })
            }
            State::Open | State::HalfOpen => {
                let t = now.get();
                inner.probes.retain(|p| p.alive(t));
                let max = self.config.max_probes_in_flight as usize;
                if t >= inner.eligible_at
                    && (inner.window_admitted as usize) < max
                    && inner.probes.len() < max
                {
                    let id = inner.next_probe;
                    inner.next_probe = inner.next_probe.wrapping_add(1).max(1);
                    let timeout = self.config.probe_timeout.unwrap_or(inner.interval);
                    inner.window_admitted += 1;
                    if inner.window_admitted as usize == max {
                        let next = t.saturating_add(inner.interval);
                        Self::new_window(&mut inner, next);
                        inner.armed_at = Some(t);
                    }
                    inner.probes.push(InFlight {
                        id,
                        admitted: t,
                        timeout,
                    });
                    inner.probes_admitted += 1;
                    if state == State::Open {
                        self.transition(
                            &mut inner,
                            w,
                            State::HalfOpen,
                            t,
                            Reason::ProbeAdmitted,
                            None,
                            None,
                        );
                    }
                    Ok(Permit {
                        breaker: self.id,
                        episode,
                        probe: id,
                    })
                } else {
                    inner.refusals += 1;
                    Err(Refusal {
                        retry_after: Some(Self::wait_from(&inner, t, max)),
                        state,
                        episode,
                    })
                }
            }
        };
        self.finish(inner);
        result
    }

    fn new_window(inner: &mut Inner, eligible_at: Instant) {
        inner.eligible_at = eligible_at;
        inner.probe_window = inner.probe_window.wrapping_add(1);
        inner.window_admitted = 0;
        inner.armed_at = None;
    }

    fn wait_from(inner: &Inner, t: Instant, max: usize) -> Duration {
        let mut until = inner.eligible_at;
        if inner.probes.len() >= max {
            if let Some(first) = inner.probes.iter().map(InFlight::deadline).min() {
                until = until.max(first);
            }
        }
        until.saturating_since(t)
    }

    #[cold]
    fn record_slow(&self, permit: Permit, outcome: Outcome) -> Effect {
        let now = LazyNow::new(&*self.clock);
        let mut inner = self.lock();
        let effect = self.record_locked(&mut inner, &now, permit, outcome);
        self.finish(inner);
        effect
    }

    fn record_locked(
        &self,
        inner: &mut Inner,
        now: &LazyNow<'_>,
        permit: Permit,
        outcome: Outcome,
    ) -> Effect {
        let w = self.word.load(Ordering::Acquire);
        let state = State::from_bits(w);
        let episode = word_episode(w);
        if outcome == Outcome::Cancelled {
            // A cancelled probe frees its slot, but the window it was admitted in stays spent:
            // it may already have reached the upstream, and callers cancelling on short
            // deadlines must not turn one probe per interval into a stream. A probe already
            // lost at its deadline has no slot left to free.
            if matches!(state, State::Open | State::HalfOpen)
                && permit.probe != 0
                && permit.episode == episode
            {
                inner.probes.retain(|p| p.id != permit.probe);
            }
            return Effect::Ignored;
        }
        match state {
            State::Disabled => {
                // Counted like closed, so the snapshot shows what a disabled breaker would have
                // seen, but never tripped.
                if permit.episode != episode {
                    inner.stale += 1;
                    return Effect::Stale;
                }
                let failure = outcome.is_failure();
                if self.timed {
                    inner.window.record(now.get(), failure);
                } else {
                    let _ = self.word.fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                        let f = if failure {
                            (word_failures(w) + 1).min(FAIL_MASK)
                        } else {
                            0
                        };
                        Some(pack(State::from_bits(w), f, word_episode(w)))
                    });
                }
                Effect::Counted
            }
            State::ForcedOpen => {
                inner.stale += 1;
                Effect::Stale
            }
            State::Closed => {
                // A probe's answer after the close belongs to the ramp that is over (a probe lost
                // at its deadline and answering late, a sibling of the closing probe): stale.
                if permit.episode != episode || permit.probe != 0 {
                    inner.stale += 1;
                    return Effect::Stale;
                }
                if let Outcome::RetryLater(d) = outcome {
                    if !d.is_zero() {
                        self.trip(inner, w, now.get(), Some(d));
                        return Effect::Counted;
                    }
                }
                let failure = outcome.is_failure();
                if self.timed {
                    let t = now.get();
                    if inner.window.record(t, failure) {
                        self.trip(inner, w, t, None);
                    }
                    return Effect::Counted;
                }
                // Consecutive policy: count under the lock; the fast path may concurrently
                // reset the count on a success, hence the CAS loop.
                let mut w = w;
                loop {
                    if State::from_bits(w) != State::Closed || word_episode(w) != episode {
                        inner.stale += 1;
                        return Effect::Stale;
                    }
                    let failures = if failure {
                        (word_failures(w) + 1).min(self.threshold)
                    } else {
                        0
                    };
                    let new = pack(State::Closed, failures, episode);
                    match self
                        .word
                        .compare_exchange_weak(w, new, Ordering::AcqRel, Ordering::Acquire)
                    {
                        Ok(_) => {
                            if failure && failures >= self.threshold {
                                self.trip(inner, new, now.get(), None);
                            }
                            return Effect::Counted;
                        }
                        Err(actual) => w = actual,
                    }
                }
            }
            State::Open | State::HalfOpen => {
                let t = now.get();
                let current = permit.probe != 0
                    && permit.episode == episode
                    && inner.probes.iter().any(|p| p.id == permit.probe && p.alive(t));
                if !current {
                    inner.stale += 1;
                    if permit.probe != 0 && permit.episode == episode {
                        // A probe of this episode no longer in flight: lost at its deadline, or
                        // discarded when a sibling failed. Its loss took effect then; its answer
                        // moves nothing, whoever observed the loss first.
                        return Effect::Stale;
                    }
                    match outcome {
                        Outcome::RetryLater(d) if !d.is_zero() => {
                            inner.recoveries = 0;
                            let until = t.saturating_add(d.min(self.config.max_retry_later));
                            if until > inner.eligible_at {
                                Self::new_window(inner, until);
                            }
                        }
                        o if o.is_failure() => inner.recoveries = 0,
                        _ => {}
                    }
                    return Effect::Stale;
                }
                inner.probes.retain(|p| p.id != permit.probe);
                match outcome {
                    Outcome::Success | Outcome::Answer => {
                        inner.recoveries += 1;
                        if inner.recoveries >= self.config.recoveries {
                            self.close(inner, w, t, Reason::Recovered);
                        } else {
                            // The upstream answers: the ramp runs at the first step of the open
                            // interval, not at the backoff grown during the outage or at a long
                            // provider's delay (those only said when the first probe may go);
                            // never slower than the interval in force, so a short Retry-After
                            // keeps its own pace. Chosen once per ramp (one jitter draw).
                            if inner.recoveries == 1 {
                                let first = self.config.open_interval.interval(0, &mut inner.rng);
                                inner.interval = first.min(inner.interval);
                            }
                            let ramp = inner.interval;
                            if let Some(armed) = inner.armed_at {
                                let due = armed.saturating_add(ramp);
                                if due < inner.eligible_at {
                                    inner.eligible_at = due;
                                }
                            }
                        }
                    }
                    Outcome::RetryLater(d) if !d.is_zero() => {
                        inner.recoveries = 0;
                        // The ramp is over: probes still in flight beside this one belong to
                        // it, so their answers are stale (DESIGN §3: any failure discards the
                        // count), as gobreaker's generation makes them.
                        inner.probes.clear();
                        let wait = d.min(self.config.max_retry_later);
                        inner.interval = wait;
                        Self::new_window(inner, t.saturating_add(wait));
                        self.transition(inner, w, State::Open, t, Reason::RetryLater, Some(d), Some(wait));
                    }
                    _ => {
                        inner.recoveries = 0;
                        inner.probes.clear();
                        let step = inner.step;
                        inner.interval = self.config.open_interval.interval(step, &mut inner.rng);
                        inner.step = step.saturating_add(1);
                        let next = t.saturating_add(inner.interval);
                        Self::new_window(inner, next);
                        let open_for = inner.interval;
                        self.transition(
                            inner,
                            w,
                            State::Open,
                            t,
                            Reason::ProbeFailed,
                            None,
                            Some(open_for),
                        );
                    }
                }
                Effect::Counted
            }
        }
    }

    fn trip(&self, inner: &mut Inner, w: u64, t: Instant, retry_later: Option<Duration>) {
        let episode = word_episode(w).wrapping_add(1);
        let (wait, reason) = match retry_later {
            Some(d) => {
                inner.step = 0;
                (d.min(self.config.max_retry_later), Reason::RetryLater)
            }
            None => {
                let d = self.config.open_interval.interval(0, &mut inner.rng);
                inner.step = 1;
                (d, Reason::Tripped)
            }
        };
        inner.interval = wait;
        Self::new_window(inner, t.saturating_add(wait));
        inner.recoveries = 0;
        inner.probes.clear();
        inner.window.clear();
        inner.opens += 1;
        let new = pack(State::Open, 0, episode);
        self.store(inner, w, new, t, reason, retry_later, Some(wait));
    }

    fn close(&self, inner: &mut Inner, w: u64, t: Instant, reason: Reason) {
        inner.recoveries = 0;
        inner.probes.clear();
        inner.window.clear();
        inner.step = 0;
        if reason == Reason::Recovered {
            inner.closes += 1;
        }
        let new = pack(State::Closed, 0, word_episode(w));
        self.store(inner, w, new, t, reason, None, None);
    }

    #[allow(clippy::too_many_arguments)]
    fn transition(
        &self,
        inner: &mut Inner,
        w: u64,
        to: State,
        t: Instant,
        reason: Reason,
        requested: Option<Duration>,
        open_for: Option<Duration>,
    ) {
        let new = pack(to, 0, word_episode(w));
        self.store(inner, w, new, t, reason, requested, open_for);
    }

    #[allow(clippy::too_many_arguments)]
    fn store(
        &self,
        inner: &mut Inner,
        old: u64,
        new: u64,
        t: Instant,
        reason: Reason,
        requested: Option<Duration>,
        open_for: Option<Duration>,
    ) {
        // Only the lock holder changes state; the fast path only clears the failure count of a
        // closed word, which every store here overwrites on purpose. A swap rather than a plain
        // store: every write to the word is then a read-modify-write, so the fast path's CAS and
        // this write are ordered for loom as they are for the hardware (loom models a plain
        // store racing a CAS as unordered and would report a trip undone by a stale reset: see
        // tests/loom.rs). Off the fast path, so the cost does not matter.
        let prev = self.word.swap(new, Ordering::AcqRel);
        debug_assert_eq!(
            prev & !(FAIL_MASK << FAIL_SHIFT),
            old & !(FAIL_MASK << FAIL_SHIFT),
            "the breaker word changed state under the lock"
        );
        let ev = StateChange {
            at: t,
            from: State::from_bits(old),
            to: State::from_bits(new),
            episode: word_episode(new),
            reason,
            requested_delay: requested,
            open_for,
        };
        if inner.events.len() == EVENT_QUEUE_CAPACITY {
            inner.events.pop_front();
            inner.events_dropped += 1;
        }
        inner.events.push_back(ev);
        if inner.listener.is_some() {
            inner.pending.push(ev);
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
    /// the reset are stale and move nothing.
    pub fn reset(&self) {
        self.operator(State::Closed, Reason::Reset);
    }

    fn operator(&self, to: State, reason: Reason) {
        let now = LazyNow::new(&*self.clock);
        let mut inner = self.lock();
        let w = self.word.load(Ordering::Acquire);
        let t = now.get();
        inner.recoveries = 0;
        inner.probes.clear();
        inner.window.clear();
        inner.step = 0;
        let new = pack(to, 0, word_episode(w).wrapping_add(1));
        self.store(&mut inner, w, new, t, reason, None, None);
        self.finish(inner);
    }

    /// A view of the breaker. Side-effect free: it never admits, expires or advances anything.
    /// Reads the clock once.
    pub fn snapshot(&self) -> Snapshot {
        let now = LazyNow::new(&*self.clock);
        let inner = self.lock();
        let w = self.word.load(Ordering::Acquire);
        let state = State::from_bits(w);
        let t = now.get();
        let max = self.config.max_probes_in_flight as usize;
        let live: Vec<InFlight> = inner.probes.iter().copied().filter(|p| p.alive(t)).collect();
        let open = matches!(state, State::Open | State::HalfOpen);
        let (retry_after, ready) = if open {
            let mut until = inner.eligible_at;
            if live.len() >= max {
                if let Some(first) = live.iter().map(InFlight::deadline).min() {
                    until = until.max(first);
                }
            }
            let wait = until.saturating_since(t);
            (Some(wait), wait.is_zero())
        } else {
            (None, false)
        };
        let failures = if self.timed {
            inner.window.failures(Some(t))
        } else {
            word_failures(w)
        };
        Snapshot {
            state,
            episode: word_episode(w),
            failures: if state == State::Closed || state == State::Disabled {
                failures
            } else {
                0
            },
            recoveries: inner.recoveries,
            probes_in_flight: if open { live.len() as u32 } else { 0 },
            retry_after,
            probe_ready: ready,
            interval: open.then_some(inner.interval),
            opens: inner.opens,
            closes: inner.closes,
            probes: inner.probes_admitted,
            refusals: inner.refusals,
            stale_answers: inner.stale,
            events_dropped: inner.events_dropped,
        }
    }

    /// Takes the state changes queued since the last call (at most [`EVENT_QUEUE_CAPACITY`]; the
    /// snapshot counts any dropped). Bindings that cannot be called back from Rust poll this.
    pub fn drain_events(&self) -> Vec<StateChange> {
        self.lock().events.drain(..).collect()
    }

    /// Takes at most `max` of the oldest queued state changes, leaving the rest queued: for
    /// bindings that drain into a caller's fixed-size buffer (the C ABI).
    pub fn drain_events_up_to(&self, max: usize) -> Vec<StateChange> {
        let mut inner = self.lock();
        let n = max.min(inner.events.len());
        inner.events.drain(..n).collect()
    }

    /// Calls `listener` after every state change, outside the breaker's lock (so it may call
    /// back into the breaker without deadlock). `None` removes it. A listener that calls back
    /// should hold a `Weak` of the breaker: an `Arc` would be a reference cycle, never freed.
    pub fn set_listener(&self, listener: Option<Listener>) {
        self.lock().listener = listener;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    fn incident_one() -> (Breaker, ManualClock) {
        let clock = ManualClock::new();
        let cfg = BreakerConfig {
            open_interval: Backoff::constant(Duration::from_secs(60)),
            ..BreakerConfig::default()
        };
        (Breaker::new(cfg, Arc::new(clock.clone())).unwrap(), clock)
    }

    fn fail(b: &Breaker, n: usize) {
        for _ in 0..n {
            let p = b.allow().unwrap();
            b.record(p, Outcome::Failure).unwrap();
        }
    }

    #[test]
    fn closed_fast_path_reads_no_clock() {
        let (b, clock) = incident_one();
        for _ in 0..10 {
            let p = b.allow().unwrap();
            b.record(p, Outcome::Success).unwrap();
        }
        assert_eq!(clock.reads(), 0);
    }

    #[test]
    fn ramp_needs_three_answers() {
        let (b, clock) = incident_one();
        fail(&b, 5);
        assert_eq!(b.snapshot().state, State::Open);
        for k in 1..=3u64 {
            clock.set(Instant::from_millis(60_000 * k)).unwrap();
            let p = b.allow().unwrap();
            assert_eq!(p.episode(), 1);
            assert!(b.allow().is_err());
            b.record(p, Outcome::Success).unwrap();
        }
        assert_eq!(b.snapshot().state, State::Closed);
    }

    #[test]
    fn foreign_permit_is_refused() {
        let (a, _) = incident_one();
        let (b, _) = incident_one();
        let p = a.allow().unwrap();
        assert_eq!(b.record(p, Outcome::Success), Err(PermitError::Foreign));
    }

    #[test]
    fn permit_slot_reports_its_permit() {
        let (b, clock) = incident_one();
        let slot = PermitSlot::new(b.allow().unwrap());
        assert_eq!(
            (slot.episode(), slot.is_probe(), slot.is_taken()),
            (0, false, false)
        );
        b.record(slot.take(&b).unwrap(), Outcome::Failure).unwrap();
        assert!(slot.is_taken());
        fail(&b, 4);
        clock.set(Instant::from_millis(60_000)).unwrap();
        let probe = PermitSlot::new(b.allow().unwrap());
        assert_eq!(
            (probe.episode(), probe.is_probe(), probe.is_taken()),
            (1, true, false)
        );
    }

    #[test]
    fn validation_bounds_are_inclusive() {
        let ok = |f: fn(&mut BreakerConfig)| {
            let mut c = BreakerConfig::default();
            f(&mut c);
            c.validate()
        };
        assert!(ok(|c| c.recoveries = MAX_PROBES).is_ok());
        assert_eq!(
            ok(|c| c.recoveries = MAX_PROBES + 1).unwrap_err().field,
            "breaker.recoveries"
        );
        assert!(ok(|c| c.max_probes_in_flight = MAX_PROBES).is_ok());
        assert_eq!(
            ok(|c| c.max_probes_in_flight = MAX_PROBES + 1).unwrap_err().field,
            "breaker.max_probes_in_flight"
        );
    }

    #[test]
    fn undrained_events_are_dropped_and_counted() {
        let (b, _) = incident_one();
        for _ in 0..EVENT_QUEUE_CAPACITY + 4 {
            b.force_open();
        }
        assert_eq!(b.snapshot().events_dropped, 4);
        assert_eq!(b.drain_events_up_to(3).len(), 3);
        assert_eq!(b.drain_events().len(), EVENT_QUEUE_CAPACITY - 3);
    }

    #[test]
    fn listener_may_reenter() {
        let (b, _) = incident_one();
        let b = Arc::new(b);
        let seen = Arc::new(Mutex::new(Vec::new()));
        // A Weak handle: a listener owning an Arc of its own breaker would be a cycle (Miri
        // reports it as a leak).
        let (b2, seen2) = (Arc::downgrade(&b), Arc::clone(&seen));
        b.set_listener(Some(Arc::new(move |ev: &StateChange| {
            let state = b2.upgrade().map(|b| b.snapshot().state);
            seen2.lock().unwrap().push((ev.to, state));
        })));
        fail(&b, 5);
        assert_eq!(*seen.lock().unwrap(), vec![(State::Open, Some(State::Open))]);
    }
}
