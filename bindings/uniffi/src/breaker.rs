//! The circuit breaker, its permits, snapshots, events, and breaker groups.

use std::sync::{Arc, Mutex};

use holdoff::interop::config::GroupSpec;
use holdoff::interop::{Coded, OutcomeKind, PermitSlot, RawPermit};
use holdoff::{FAST_PATH_COUNTING, FAST_PATH_STATE_MASK, FAST_PATH_VERSION};

use crate::fleet::{attach, FleetConfig, FleetSync};
use crate::{clock_of, count, lock, BreakerConfig, Duration, HoldoffError, ManualClock};

/// A breaker's state; `stableName()` is the core's name for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, uniffi::Enum)]
pub enum State {
    /// Calls pass; outcomes are counted by the trip policy.
    Closed,
    /// Calls are refused until the next probe is due.
    Open,
    /// A probe was admitted in this episode and recovery is under way.
    HalfOpen,
    /// Opened by an operator; refuses everything until `reset`.
    ForcedOpen,
    /// Admits everything and never trips; outcomes are still counted.
    Disabled,
}

mirror!(State: Closed, Open, HalfOpen, ForcedOpen, Disabled);

#[uniffi::export]
impl State {
    /// The conformance suite's stable name, the core's: `closed`, `open`, `half_open`,
    /// `forced_open`, `disabled`.
    pub fn stable_name(&self) -> String {
        holdoff::State::from(*self).name().to_owned()
    }
}

/// What happened to a call.
#[derive(Debug, Clone, Copy, PartialEq, uniffi::Enum)]
pub enum Outcome {
    /// The call succeeded.
    Success,
    /// The upstream answered, not with a success, and retrying would not help (a 404): proves
    /// it is reachable; counts toward recovery like a success but cannot close alone.
    Answer,
    /// A transient failure (5xx, refused connection, a blocking 403 configured as failure).
    Failure,
    /// The call timed out: a failure that costs more retry quota.
    Timeout,
    /// The upstream asked to be left alone for `delay` (429/503 with Retry-After): opens the
    /// breaker at once for that delay (bounded by `max_retry_later`); zero is a plain failure.
    RetryLater { delay: Duration },
    /// The caller gave up on the call: counts for nothing, frees a probe.
    Cancelled,
}

impl Outcome {
    pub(crate) fn to_core(self) -> Result<holdoff::Outcome, HoldoffError> {
        Ok(match self {
            Outcome::Success => holdoff::Outcome::Success,
            Outcome::Answer => holdoff::Outcome::Answer,
            Outcome::Failure => holdoff::Outcome::Failure,
            Outcome::Timeout => holdoff::Outcome::Timeout,
            Outcome::RetryLater { delay } => {
                holdoff::Outcome::RetryLater(delay.input("outcome.retry_later")?)
            }
            Outcome::Cancelled => holdoff::Outcome::Cancelled,
        })
    }
}

#[uniffi::export]
impl Outcome {
    /// The conformance suite's stable name, the core's: `success`, `answer`, `failure`,
    /// `timeout`, `retry_later`, `cancelled`.
    pub fn stable_name(&self) -> String {
        // Only the variant matters for the name, so a delay the core would refuse still has
        // one; `to_core` refuses nothing else.
        let core = match self {
            Outcome::RetryLater { .. } => holdoff::Outcome::RetryLater(std::time::Duration::ZERO),
            other => other.to_core().unwrap_or(holdoff::Outcome::Cancelled),
        };
        OutcomeKind::of(&core).name().to_owned()
    }
}

impl From<holdoff::Outcome> for Outcome {
    fn from(o: holdoff::Outcome) -> Self {
        match o {
            holdoff::Outcome::Success => Outcome::Success,
            holdoff::Outcome::Answer => Outcome::Answer,
            holdoff::Outcome::Failure => Outcome::Failure,
            holdoff::Outcome::Timeout => Outcome::Timeout,
            holdoff::Outcome::RetryLater(d) => Outcome::RetryLater {
                delay: Duration::from_std(d),
            },
            holdoff::Outcome::Cancelled => Outcome::Cancelled,
        }
    }
}

/// What recording did; `stableName()` is the core's name for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum Effect {
    /// Counted: it may have moved the breaker.
    Counted,
    /// A stale answer (an earlier episode, a call admitted before the open, a lost probe):
    /// kept in metrics; a stale failure still discards recovery progress.
    Stale,
    /// Nothing to count (a cancelled call).
    Ignored,
}

mirror!(Effect: Counted, Stale, Ignored);

#[uniffi::export]
impl Effect {
    /// The conformance suite's stable name, the core's: `counted`, `stale`, `ignored`.
    pub fn stable_name(&self) -> String {
        holdoff::Effect::from(*self).name().to_owned()
    }
}

/// Why the state changed; `stableName()` is the core's name for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum Reason {
    /// The trip policy opened a closed breaker.
    Tripped,
    /// A retry-later outcome opened the breaker for the provider's delay.
    RetryLater,
    /// A probe was admitted.
    ProbeAdmitted,
    /// The current probe failed; the breaker waits the next step of its backoff.
    ProbeFailed,
    /// Enough consecutive probe answers: closed.
    Recovered,
    /// An operator forced the breaker open.
    ForcedOpen,
    /// An operator disabled the breaker.
    Disabled,
    /// An operator reset the breaker to closed.
    Reset,
    /// The fleet's shared record is open: this worker's breaker opened with it.
    FleetOpened,
}

mirror!(
    Reason:
    Tripped, RetryLater, ProbeAdmitted, ProbeFailed, Recovered, ForcedOpen, Disabled, Reset,
    FleetOpened,
);

#[uniffi::export]
impl Reason {
    /// The conformance suite's stable name, the core's: `tripped`, `retry_later`,
    /// `probe_admitted`, `probe_failed`, `recovered`, `forced_open`, `disabled`, `reset`,
    /// `fleet_opened`.
    pub fn stable_name(&self) -> String {
        holdoff::Reason::from(*self).name().to_owned()
    }
}

/// One state change, stamped with the time (since the clock's origin) of the reading that
/// caused it.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct StateChange {
    pub at: Duration,
    pub from: State,
    pub to: State,
    /// The episode number after the change (0 before the first trip).
    pub episode: i64,
    pub reason: Reason,
    /// For a retry-later opening: the delay the provider asked for, before the guard.
    pub requested_delay: Option<Duration>,
    /// For openings: how long until the first probe may be admitted.
    pub open_for: Option<Duration>,
}

impl From<&holdoff::StateChange> for StateChange {
    fn from(e: &holdoff::StateChange) -> Self {
        StateChange {
            at: Duration::from_std(std::time::Duration::from_nanos(e.at.as_nanos())),
            from: e.from.into(),
            to: e.to.into(),
            episode: i64::from(e.episode),
            reason: e.reason.into(),
            requested_delay: Duration::opt(e.requested_delay),
            open_for: Duration::opt(e.open_for),
        }
    }
}

/// A side-effect-free view of a breaker (taking it spends no probe).
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct Snapshot {
    pub state: State,
    /// Number of the current (or last) open episode; 0 before the first trip.
    pub episode: i64,
    /// Failures counted by the trip policy now.
    pub failures: i64,
    /// Consecutive current-episode probe answers so far.
    pub recoveries: i64,
    /// Probes admitted and not yet answered, cancelled or timed out.
    pub probes_in_flight: i64,
    /// While open or half-open: time until the next probe may go (zero when one may go now).
    pub retry_after: Option<Duration>,
    /// Whether `allow` would admit a probe now.
    pub probe_ready: bool,
    /// The open interval in force, while open or half-open.
    pub interval: Option<Duration>,
    pub opens: i64,
    pub closes: i64,
    pub probes: i64,
    pub refusals: i64,
    pub stale_answers: i64,
    /// Events dropped because nobody drained the queue.
    pub events_dropped: i64,
}

impl From<holdoff::Snapshot> for Snapshot {
    fn from(s: holdoff::Snapshot) -> Self {
        Snapshot {
            state: s.state.into(),
            episode: i64::from(s.episode),
            failures: count(s.failures),
            recoveries: i64::from(s.recoveries),
            probes_in_flight: i64::from(s.probes_in_flight),
            retry_after: Duration::opt(s.retry_after),
            probe_ready: s.probe_ready,
            interval: Duration::opt(s.interval),
            opens: count(s.opens),
            closes: count(s.closes),
            probes: count(s.probes),
            refusals: count(s.refusals),
            stale_answers: count(s.stale_answers),
            events_dropped: count(s.events_dropped),
        }
    }
}

/// Leave to make one call, recorded at most once (a second record is
/// `PermitAlreadyRecorded`). An unrecorded probe permit holds its slot until the probe
/// timeout: record `Cancelled` when the call is abandoned.
#[derive(Debug, uniffi::Object)]
pub struct Permit {
    pub(crate) slot: PermitSlot,
    pub(crate) breaker: Arc<holdoff::Breaker>,
}

impl Permit {
    pub(crate) fn new(permit: holdoff::Permit, breaker: &Arc<holdoff::Breaker>) -> Arc<Permit> {
        Arc::new(Permit {
            slot: PermitSlot::new(permit),
            breaker: Arc::clone(breaker),
        })
    }
}

#[uniffi::export]
impl Permit {
    /// The episode this call was admitted under: 0 while closed, else the open episode.
    pub fn episode(&self) -> i64 {
        i64::from(self.slot.episode())
    }

    /// Whether this call is a probe of an open breaker.
    pub fn is_probe(&self) -> bool {
        self.slot.is_probe()
    }

    /// Whether the permit was already recorded.
    pub fn is_recorded(&self) -> bool {
        self.slot.is_taken()
    }

    /// Records the outcome on the breaker that issued the permit.
    pub fn record(&self, outcome: Outcome) -> Result<Effect, HoldoffError> {
        let o = outcome.to_core()?;
        let p = self.slot.take(&self.breaker)?;
        Ok(self.breaker.record(p, o)?.into())
    }

    /// Records a success: the cheapest crossing (no argument, no result to convert).
    pub fn record_success(&self) -> Result<(), HoldoffError> {
        let p = self.slot.take(&self.breaker)?;
        self.breaker.record(p, holdoff::Outcome::Success)?;
        Ok(())
    }
}

/// The answer to `Breaker.allow`.
#[derive(Debug, uniffi::Enum)]
pub enum Admission {
    /// Make the call, then record it on the permit. `episode` is 0 while closed.
    Admitted {
        permit: Arc<Permit>,
        episode: i64,
        probe: bool,
    },
    /// Refused without touching the upstream. `retry_after` is the time until the next probe
    /// (`None` while forced open).
    Refused {
        retry_after: Option<Duration>,
        state: State,
        episode: i64,
    },
}

/// Receives a breaker's state changes, on the thread that caused them, after the breaker's
/// lock is released (so it may call back into the breaker). Must not throw.
#[uniffi::export(with_foreign)]
pub trait StateListener: Send + Sync {
    fn on_state_change(&self, change: StateChange);
}

/// Keeps a breaker's memory, and so its fast-path word, alive: the word's address in
/// [`FastPathLayout`] is valid for as long as this object is (the Kotlin `FastPath` holds it
/// and never destroys it before it is itself unreachable).
#[derive(Debug, uniffi::Object)]
pub struct FastPathWord {
    breaker: Arc<holdoff::Breaker>,
}

#[uniffi::export]
impl FastPathWord {
    /// Records `outcome` for a call of this word's breaker admitted under the raw `episode` and
    /// `probe` (0: not a probe) without a permit object: what a permit of the Kotlin `FastPath`
    /// does when its outcome needs the library. It works after the `Breaker` object is closed,
    /// as a library permit's record does (this object keeps the breaker alive). The caller keeps
    /// such a permit from being recorded twice. `InvalidInput` for a negative retry-later delay
    /// (`outcome.retry_later`).
    pub fn record(&self, episode: u32, probe: u32, outcome: Outcome) -> Result<Effect, HoldoffError> {
        let o = outcome.to_core()?;
        let permit = holdoff::Permit::from(RawPermit {
            breaker: self.breaker.id(),
            episode,
            probe,
        });
        Ok(self.breaker.record(permit, o)?.into())
    }
}

/// Where a breaker's fast-path word is and how to read it (docs/ffi.md "The fast-path word").
///
/// The word is 64 bits, read atomically with acquire ordering, never written by the caller.
/// Admission: `(word & admit_mask) == 0` admits the call as a closed, non-probe permit of
/// breaker `breaker_id` in episode `word >> 32` (record it with `FastPathWord.record`).
/// Success: such a permit needs no record when `word == episode << 32`. Anything else goes
/// through the breaker's methods. Read the word only when `version` is 1.
#[derive(Debug, uniffi::Record)]
pub struct FastPathLayout {
    /// Holds the breaker (and the word) alive; the address is valid while this object lives.
    pub word: Arc<FastPathWord>,
    /// The word's address in this process, 8-byte aligned.
    pub address: u64,
    /// The core breaker's address, for `holdoff_uniffi_direct_allow` (src/direct.rs): valid
    /// while `word` lives.
    pub breaker_address: u64,
    /// The bits that must all be 0 for an admission on the word: the state and the counting
    /// flag.
    pub admit_mask: u64,
    /// The breaker's process-unique id, carried by its permits.
    pub breaker_id: u32,
    /// The layout's version (1).
    pub version: u32,
}

/// A circuit breaker for one upstream; share it between every thread that calls it.
#[derive(Debug, uniffi::Object)]
pub struct Breaker {
    pub(crate) inner: Arc<holdoff::Breaker>,
    // The breaker's link to its fleet, owned here: dropped (threads joined, connections closed)
    // when the last reference to this object goes, a policy's included.
    fleet: Mutex<Option<holdoff_fleet::Fleet>>,
}

impl Breaker {
    /// A breaker object with no fleet (a group's member).
    pub(crate) fn local(inner: Arc<holdoff::Breaker>) -> Arc<Breaker> {
        Arc::new(Breaker {
            inner,
            fleet: Mutex::new(None),
        })
    }
}

#[uniffi::export]
impl Breaker {
    /// A closed breaker on `clock` (the system clock if absent). `InvalidConfig` names the
    /// first invalid field (`fleet.url`, `fleet.refresh`, ... for the fleet).
    ///
    /// With `fleet`, the breaker shares its open episodes, probe grants and recovery with every
    /// breaker of the same `fleet.key` on that store (`docs/fleet.md`). For a Redis url,
    /// background threads (started here, never connecting on this thread) keep it in sync; they
    /// stop when the breaker is closed or collected. Allowing and recording while closed never
    /// touch the network.
    #[uniffi::constructor(default(clock = None, fleet = None))]
    pub fn new(
        config: BreakerConfig,
        clock: Option<Arc<ManualClock>>,
        fleet: Option<FleetConfig>,
    ) -> Result<Arc<Self>, HoldoffError> {
        let core = config.to_core()?;
        let fleet = FleetConfig::to_core(fleet.as_ref(), false)?;
        let inner = Arc::new(holdoff::Breaker::new(core, clock_of(&clock))?);
        let fleet = fleet.map(|f| attach(&inner, &f)).transpose()?;
        Ok(Arc::new(Breaker {
            inner,
            fleet: Mutex::new(fleet),
        }))
    }

    /// One tick of the fleet now, on this thread: sends what the breaker has to tell, makes one
    /// exchange with the store (bounded by `fleet.timeout`) and applies the shared record. Null
    /// when the breaker has no fleet (or it was closed). A store failure is in the result
    /// (`ok = false`, `error`), never thrown. For a `memory://` fleet this is the only tick; for a
    /// Redis one the background thread ticks too (serialised with this).
    pub fn sync_fleet(&self) -> Option<FleetSync> {
        let fleet = lock(&self.fleet);
        let report = fleet.as_ref()?.sync_now().ok()?;
        Some(report.into())
    }

    /// Whether the breaker follows its fleet now: false without a fleet, after `closeFleet`,
    /// and while detached (no successful sync for `fleet.fallbackAfter`).
    pub fn fleet_attached(&self) -> bool {
        lock(&self.fleet)
            .as_ref()
            .is_some_and(holdoff_fleet::Fleet::is_attached)
    }

    /// Unlinks the breaker from its fleet now (threads stopped and joined, connections
    /// closed); it goes on as a local breaker. Closing or collecting the breaker does the same.
    /// Idempotent.
    pub fn close_fleet(&self) {
        let fleet = lock(&self.fleet).take();
        drop(fleet);
    }

    /// Asks to make a call: admits it (closed, disabled, or as a probe when one is due) or
    /// refuses it with the time until the next probe. This is the only act of admission.
    pub fn allow(&self) -> Admission {
        match self.inner.allow() {
            Ok(p) => Admission::Admitted {
                episode: i64::from(p.episode()),
                probe: p.is_probe(),
                permit: Permit::new(p, &self.inner),
            },
            Err(r) => Admission::Refused {
                retry_after: Duration::opt(r.retry_after),
                state: r.state.into(),
                episode: i64::from(r.episode),
            },
        }
    }

    /// `allow` that throws `BreakerOpen` when refused: one crossing, a bare handle back.
    pub fn acquire(&self) -> Result<Arc<Permit>, HoldoffError> {
        match self.inner.allow() {
            Ok(p) => Ok(Permit::new(p, &self.inner)),
            Err(r) => Err(HoldoffError::BreakerOpen {
                retry_after: Duration::opt(r.retry_after),
            }),
        }
    }

    /// Records `outcome` for `permit` on this breaker: `ForeignPermit` if another breaker
    /// issued it, `PermitAlreadyRecorded` the second time.
    pub fn record(&self, permit: Arc<Permit>, outcome: Outcome) -> Result<Effect, HoldoffError> {
        let o = outcome.to_core()?;
        let p = permit.slot.take(&self.inner)?;
        Ok(self.inner.record(p, o)?.into())
    }

    /// The fast-path word's layout: what the Kotlin `FastPath` needs to admit a call and to
    /// recognise a clean success without calling into the library.
    pub fn fast_path_layout(&self) -> FastPathLayout {
        FastPathLayout {
            word: Arc::new(FastPathWord {
                breaker: Arc::clone(&self.inner),
            }),
            address: self.inner.fast_path_word().as_ptr() as u64,
            breaker_address: Arc::as_ptr(&self.inner) as u64,
            admit_mask: FAST_PATH_STATE_MASK | FAST_PATH_COUNTING,
            breaker_id: self.inner.id(),
            version: FAST_PATH_VERSION,
        }
    }

    /// Opens the breaker until `reset` (starts a new episode).
    pub fn force_open(&self) {
        self.inner.force_open();
    }

    /// Admits everything and never trips until `reset`; outcomes are still counted.
    pub fn disable(&self) {
        self.inner.disable();
    }

    /// Back to closed with empty counts (starts a new episode: older permits are stale).
    pub fn reset(&self) {
        self.inner.reset();
    }

    /// A side-effect-free view.
    pub fn snapshot(&self) -> Snapshot {
        self.inner.snapshot().into()
    }

    /// The state changes since the last drain, oldest first (at most 1024 are kept).
    pub fn drain_events(&self) -> Vec<StateChange> {
        self.inner.drain_events().iter().map(StateChange::from).collect()
    }

    /// Sets (or clears) the listener for state changes.
    pub fn set_listener(&self, listener: Option<Arc<dyn StateListener>>) {
        self.inner.set_listener(listener.map(|l| {
            let f: holdoff::Listener = Arc::new(move |c: &holdoff::StateChange| l.on_state_change(c.into()));
            f
        }));
    }
}

/// Counts of a breaker group, read without side effects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Record)]
pub struct GroupSnapshot {
    /// Breakers the group keeps now (at most `maxKeys`).
    pub keys: i64,
    /// The bound on `keys`.
    pub max_keys: i64,
    /// Idle breakers evicted to make room for new keys.
    pub evictions: i64,
    /// Breakers handed out without being kept, because the group was full and nothing in it
    /// was idle.
    pub overflows: i64,
}

impl From<holdoff::GroupSnapshot> for GroupSnapshot {
    fn from(s: holdoff::GroupSnapshot) -> Self {
        GroupSnapshot {
            keys: count(s.keys as u64),
            max_keys: count(s.max_keys as u64),
            evictions: count(s.evictions),
            overflows: count(s.overflows),
        }
    }
}

/// Breakers keyed by upstream (host, registry, provider, tenant), made lazily from one
/// template and bounded; each gets the template with its jitter seed mixed with the key.
///
/// The group keeps at most `maxKeys` breakers. A new key at a full group evicts the least
/// recently used idle breaker (closed, no failure counted); when none is idle, `get` hands out
/// an overflow breaker the group does not keep, so a full group never fails a call. Ask the
/// group for the breaker of each call rather than keeping it: a kept breaker may have been
/// evicted, and the group would then make a fresh one for its key.
#[derive(Debug, uniffi::Object)]
pub struct BreakerGroup {
    pub(crate) inner: holdoff::BreakerGroup,
}

#[uniffi::export]
impl BreakerGroup {
    /// An empty group on `clock` (the system clock if absent), holding at most `maxKeys`
    /// breakers (1..=100 000 000; absent: the core's default, 10 000). The template and the
    /// bound are validated now: `InvalidConfig` names the field (`group.max_keys` for the
    /// bound). Breakers in a group stay local: any `fleet` is refused (`InvalidConfig` naming
    /// `fleet`); give a shared upstream a breaker of its own.
    #[uniffi::constructor(default(clock = None, max_keys = None, fleet = None))]
    pub fn new(
        template: BreakerConfig,
        clock: Option<Arc<ManualClock>>,
        max_keys: Option<i64>,
        fleet: Option<FleetConfig>,
    ) -> Result<Arc<Self>, HoldoffError> {
        let max_keys = GroupSpec { max_keys }.max_keys()?;
        FleetConfig::to_core(fleet.as_ref(), true)?;
        Ok(Arc::new(BreakerGroup {
            inner: holdoff::BreakerGroup::with_max_keys(template.to_core()?, max_keys, clock_of(&clock))?,
        }))
    }

    /// The breaker the group holds for `key` now, created on first use; marks it most
    /// recently used. Never fails: at a full group with nothing idle to evict, an overflow
    /// breaker that the group does not keep.
    pub fn get(&self, key: String) -> Arc<Breaker> {
        Breaker::local(self.inner.get(&key))
    }

    /// The breaker the group keeps for `key`, if any, without creating it or marking it used.
    pub fn peek(&self, key: String) -> Option<Arc<Breaker>> {
        self.inner.peek(&key).map(Breaker::local)
    }

    /// Keys with a breaker kept, sorted.
    pub fn keys(&self) -> Vec<String> {
        self.inner.keys()
    }

    /// Number of breakers kept.
    pub fn size(&self) -> i64 {
        count(self.inner.len() as u64)
    }

    /// The bound on the number of breakers kept.
    pub fn max_keys(&self) -> i64 {
        count(self.inner.max_keys() as u64)
    }

    /// Counts: breakers kept, the bound, evictions and overflows so far.
    pub fn snapshot(&self) -> GroupSnapshot {
        self.inner.snapshot().into()
    }
}
