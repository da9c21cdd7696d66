//! holdoff over [uniffi](https://mozilla.github.io/uniffi-rs): the native library behind the
//! Kotlin (JVM, JNA) and Swift bindings.
//!
//! Proc-macros only (no UDL). This crate converts types and units and maps errors; every
//! decision is the core's (`holdoff`). Rules of the crossing:
//!
//! * **Durations** cross as [`Duration`], a custom type carried as [`DurationParts`] (whole
//!   milliseconds plus nanoseconds, exact both ways): Kotlin sees `kotlin.time.Duration` (see
//!   `uniffi.toml`), Swift the parts. Input durations go through `holdoff::units` (the one set
//!   of checks every binding shares), so a negative, infinite or too large value is refused
//!   with a typed error naming the field, never clamped. Configuration values are converted by the core's neutral configuration
//!   format (`holdoff::config`), so defaults, field names and rules are the core's.
//! * **Counts** in configurations are `i64` (Kotlin `Long`), checked by the core; outputs are
//!   `i64`. Wall times are `SystemTime` (Kotlin `java.time.Instant`).
//! * **Errors** are one enum, [`HoldoffError`] (Kotlin `HoldoffException`), whose
//!   [`HoldoffError::code`] is the conformance suite's stable name. No panic crosses the FFI:
//!   uniffi catches any and reports it as an internal error.
//! * **Names**: enums mirror the core's; their `stable_name` (Kotlin `stableName()`) and the
//!   errors' `code` are the core's stable names, not a list kept here.
//! * **HTTP statuses** are `i32` (Kotlin `Int`, what JVM HTTP clients hand over), every value
//!   passed to `holdoff::check_status`.
//! * **Permits and leases** are objects holding the core's `PermitSlot` and `LeaseSlot`: they
//!   cannot be forged, and the core refuses them twice or on another breaker or quota.
//! * **Objects** are `Send + Sync` (uniffi requires it): the core's objects are, and per-call
//!   state sits behind a mutex.
//! * **The retry loop** is the core's `Execution`, an object here ([`Execution`]): the Kotlin
//!   helpers (`execute`, `executeHttp`) run attempts, sleep and call hooks; it decides the rest.
//! * **Fleets**: a [`Breaker`] built with a [`FleetConfig`] owns its `holdoff_fleet::Fleet`
//!   (background threads for a Redis url), closed when the last reference to the breaker goes
//!   (its Kotlin `close()`, a policy's, or the garbage collector's cleaner).
//! * **Metrics**: the core's table ([`metric_table`]) and each object's readings (`metrics()`),
//!   values in the table's units (seconds for durations, as OpenTelemetry has them).
//! * **Clocks**: every constructor takes an optional [`ManualClock`]; without one, a
//!   process-wide monotonic system clock is shared, so a breaker and a budget built apart can
//!   still be composed into a [`Policy`] (which needs one clock for one reading per decision).

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration as StdDuration, SystemTime};

use holdoff::interop::config::{
    BackoffSpec, BreakerSpec, BudgetSpec, ClassifierSpec, Num, QuotaSpec, TripSpec,
};
use holdoff::interop::{units, Coded, ErrorKind};

/// Both conversions between a uniffi enum and the core enum of the same name that it mirrors,
/// variant for variant (the matches are exhaustive, so a variant on one side only fails to
/// compile).
macro_rules! mirror {
    ($t:ident: $($v:ident),+ $(,)?) => {
        impl From<holdoff::$t> for $t {
            fn from(v: holdoff::$t) -> Self {
                match v {
                    $(holdoff::$t::$v => $t::$v,)+
                }
            }
        }

        impl From<$t> for holdoff::$t {
            fn from(v: $t) -> Self {
                match v {
                    $($t::$v => holdoff::$t::$v,)+
                }
            }
        }
    };
}

mod breaker;
mod budget;
mod direct;
mod execution;
mod fleet;
mod http;
mod metrics;
mod policy;
mod terms;

pub use breaker::*;
pub use budget::*;
pub use execution::*;
pub use fleet::*;
pub use http::*;
pub use metrics::*;
pub use policy::*;

uniffi::setup_scaffolding!("holdoff");

// ---------------------------------------------------------------------------------------------
// Units
// ---------------------------------------------------------------------------------------------

/// A length of time. Kotlin: `kotlin.time.Duration` (see `uniffi.toml`); Swift: a
/// [`DurationParts`].
///
/// It crosses as whole milliseconds plus the nanoseconds below them, so that values of any
/// size are exact both ways (a float of milliseconds or nanoseconds is not, past about 104
/// days), and a negative or infinite Kotlin duration still arrives as such: inputs are checked
/// by `holdoff::units` and refused with an error naming the field, never clamped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Duration(pub DurationParts);

/// The wire form of a [`Duration`]: `millis` whole milliseconds plus `nanos` nanoseconds (same
/// sign, |nanos| < 1 000 000). An infinite Kotlin duration is `millis = Long.MAX_VALUE` (or
/// `MIN_VALUE`), which every input check refuses as too large (or negative).
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Record)]
pub struct DurationParts {
    pub millis: i64,
    pub nanos: i32,
}

uniffi::custom_type!(Duration, DurationParts, {
    lower: |d| d.0,
    try_lift: |v| Ok(Duration(v)),
});

impl Duration {
    /// An output duration (the core's, never negative), exact up to `i64::MAX` milliseconds.
    pub(crate) fn from_std(d: StdDuration) -> Duration {
        let millis = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        Duration(DurationParts {
            millis,
            nanos: (d.subsec_nanos() % 1_000_000) as i32,
        })
    }

    pub(crate) fn opt(d: Option<StdDuration>) -> Option<Duration> {
        d.map(Duration::from_std)
    }

    fn as_f64_millis(self) -> f64 {
        self.0.millis as f64 + f64::from(self.0.nanos) / 1e6
    }

    /// As Kotlin's `Duration.toString()` prints it, for messages.
    fn kotlin(self) -> String {
        let ns = i128::from(self.0.millis) * 1_000_000 + i128::from(self.0.nanos);
        let abs = u64::try_from(ns.unsigned_abs()).unwrap_or(u64::MAX);
        terms::kotlin_duration(StdDuration::from_nanos(abs), ns < 0)
    }

    /// Checked by the core's `units` rules (negative, too large: refused naming `field`), then
    /// converted exactly.
    pub(crate) fn checked(self, field: &str) -> Result<StdDuration, holdoff::ConfigError> {
        units::from_millis_f64(field, self.as_f64_millis())?;
        // Exact from the parts; the check above refused anything negative or too large.
        let total = i128::from(self.0.millis) * 1_000_000 + i128::from(self.0.nanos);
        let total = u128::try_from(total).unwrap_or(0);
        Ok(StdDuration::new(
            u64::try_from(total / 1_000_000_000).unwrap_or(u64::MAX),
            (total % 1_000_000_000) as u32,
        ))
    }

    /// A configuration duration in the neutral format's unit, checked by `holdoff::config`.
    /// Values beyond 2^53 ms are refused there; below it, only sub-millisecond parts of values
    /// above ~104 days can lose precision in the float, which that format accepts.
    pub(crate) fn num(self) -> Num {
        Num(self.as_f64_millis())
    }

    /// An operation's duration argument: refusals are [`HoldoffError::InvalidInput`] naming
    /// `field`.
    pub(crate) fn input(self, field: &str) -> Result<StdDuration, HoldoffError> {
        self.checked(field).map_err(HoldoffError::input)
    }
}

fn count(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Converts a number of milliseconds to a [`Duration`] with the core's checks (NaN, infinities,
/// negative values and values above 2^53-1 ms are refused with
/// [`HoldoffError::InvalidConfig`] naming `field`). For numbers read from files or user input;
/// Kotlin's own `Duration` cannot hold NaN, so this is where such a value is refused.
#[uniffi::export]
pub fn duration_from_millis(field: String, millis: f64) -> Result<Duration, HoldoffError> {
    // The caller's unit here is milliseconds: the core's words stand.
    units::from_millis_f64(&field, millis)
        .map(Duration::from_std)
        .map_err(|e| HoldoffError::InvalidConfig {
            field: e.field,
            rule: e.rule,
        })
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// Every error holdoff reports. Kotlin: `HoldoffException` and its subclasses; `code()` gives
/// the conformance suite's stable name.
#[derive(Debug, Clone, PartialEq, thiserror::Error, uniffi::Error)]
#[uniffi::export(Display)]
pub enum HoldoffError {
    /// A configuration value breaks a rule (`invalid_config`). `field` is the dotted path the
    /// conformance suite uses (`budget.max_rate_limit_duration`); `rule` says what it must be
    /// in the caller's terms: the Kotlin property (`BudgetConfig.maxRateLimitDuration must be
    /// greater than 0`), durations as `kotlin.time.Duration` prints them.
    #[error("invalid configuration: {field}: {rule}")]
    InvalidConfig { field: String, rule: String },
    /// An argument of an operation is out of range (`invalid_input`): a value that is not an
    /// HTTP status (outside 0..=999), a negative duration.
    #[error("invalid input: {field}: {rule}")]
    InvalidInput { field: String, rule: String },
    /// A manual clock was set earlier than it shows (`clock_backwards`).
    #[error(
        "a monotonic clock cannot go backwards (now {}, requested {})",
        now.kotlin(),
        requested.kotlin()
    )]
    ClockBackwards { now: Duration, requested: Duration },
    /// A permit was recorded twice, or a quota lease given back twice
    /// (`permit_already_recorded`).
    #[error("this permit or lease was already recorded")]
    PermitAlreadyRecorded,
    /// A permit was recorded on a breaker that did not issue it, or a lease given back to a
    /// quota that did not issue it (`foreign_permit`).
    #[error("this permit or lease was issued by another breaker or quota")]
    ForeignPermit,
    /// The breaker refused the call (`breaker_open`): the one error callers branch on whether
    /// the upstream failed or the breaker refused. `retry_after` is the time until the next
    /// probe, `None` while forced open (until an operator resets it).
    #[error("the breaker is open ({})", match retry_after {
        Some(d) => format!("next probe in {}", d.kotlin()),
        None => "forced open".to_owned(),
    })]
    BreakerOpen { retry_after: Option<Duration> },
}

#[uniffi::export]
impl HoldoffError {
    /// The stable cross-language name, the core's: `invalid_config`, `invalid_input`,
    /// `clock_backwards`, `permit_already_recorded`, `foreign_permit`, or `breaker_open` (the
    /// core's give-up reason of that name).
    pub fn code(&self) -> String {
        use holdoff::{ClockError, HoldoffError as Core, PermitError};
        let core = match self {
            HoldoffError::InvalidConfig { field, rule } => Core::Config(holdoff::ConfigError {
                field: field.clone(),
                rule: rule.clone(),
            }),
            HoldoffError::InvalidInput { field, rule } => Core::Input(holdoff::InputError {
                field: field.clone(),
                rule: rule.clone(),
            }),
            HoldoffError::ClockBackwards { .. } => Core::Clock(ClockError::Backwards {
                now_nanos: 0,
                requested_nanos: 0,
            }),
            HoldoffError::PermitAlreadyRecorded => Core::Permit(PermitError::AlreadyRecorded),
            HoldoffError::ForeignPermit => Core::Permit(PermitError::Foreign),
            HoldoffError::BreakerOpen { .. } => return holdoff::GiveUpReason::BreakerOpen.name().to_owned(),
        };
        ErrorKind::of(&core).name().to_owned()
    }
}

impl HoldoffError {
    fn input(e: holdoff::ConfigError) -> HoldoffError {
        HoldoffError::InvalidInput {
            rule: terms::kotlin_rule(&e.field, &e.rule),
            field: e.field,
        }
    }
}

impl From<holdoff::ConfigError> for HoldoffError {
    fn from(e: holdoff::ConfigError) -> Self {
        HoldoffError::InvalidConfig {
            rule: terms::kotlin_rule(&e.field, &e.rule),
            field: e.field,
        }
    }
}

impl From<holdoff::InputError> for HoldoffError {
    fn from(e: holdoff::InputError) -> Self {
        HoldoffError::InvalidInput {
            rule: terms::kotlin_rule(&e.field, &e.rule),
            field: e.field,
        }
    }
}

impl From<holdoff::ClockError> for HoldoffError {
    fn from(e: holdoff::ClockError) -> Self {
        match e {
            holdoff::ClockError::Backwards {
                now_nanos,
                requested_nanos,
            } => HoldoffError::ClockBackwards {
                now: Duration::from_std(StdDuration::from_nanos(now_nanos)),
                requested: Duration::from_std(StdDuration::from_nanos(requested_nanos)),
            },
        }
    }
}

impl From<holdoff::PermitError> for HoldoffError {
    fn from(e: holdoff::PermitError) -> Self {
        match e {
            holdoff::PermitError::Foreign => HoldoffError::ForeignPermit,
            holdoff::PermitError::AlreadyRecorded => HoldoffError::PermitAlreadyRecorded,
        }
    }
}

impl From<holdoff::HoldoffError> for HoldoffError {
    fn from(e: holdoff::HoldoffError) -> Self {
        match e {
            holdoff::HoldoffError::Config(e) => e.into(),
            holdoff::HoldoffError::Input(e) => e.into(),
            holdoff::HoldoffError::Clock(e) => e.into(),
            holdoff::HoldoffError::Permit(e) => e.into(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Clocks
// ---------------------------------------------------------------------------------------------

/// A clock that moves only when told to: for tests and simulations. Nothing in holdoff sleeps;
/// time moves through [`ManualClock::set`] and [`ManualClock::advance`] only.
#[derive(Debug, uniffi::Object)]
pub struct ManualClock {
    clock: holdoff::ManualClock,
    // One shared handle for every object built on this clock, so that a policy's breaker and
    // budget provably share it (the core checks pointer identity).
    shared: Arc<dyn holdoff::Clock>,
}

#[uniffi::export]
impl ManualClock {
    /// A clock at zero whose origin is the Unix epoch on the wall.
    #[uniffi::constructor]
    pub fn new() -> Arc<Self> {
        Self::wrap(holdoff::ManualClock::new())
    }

    /// A clock at zero whose origin corresponds to `wall_origin` on the wall (for HTTP-dates in
    /// Retry-After, RFC 9110 §10.2.3).
    #[uniffi::constructor]
    pub fn with_wall_origin(wall_origin: SystemTime) -> Arc<Self> {
        Self::wrap(holdoff::ManualClock::with_wall_origin(wall_origin))
    }

    /// Moves the clock to `at` (time since its origin). Earlier than now: `ClockBackwards`;
    /// negative, NaN or too large: `InvalidInput` naming `at`.
    pub fn set(&self, at: Duration) -> Result<(), HoldoffError> {
        let at = at.input("at")?;
        let nanos = u64::try_from(at.as_nanos()).unwrap_or(u64::MAX);
        Ok(self.clock.set(holdoff::Instant::from_nanos(nanos))?)
    }

    /// Moves the clock forward by `by` (saturating) and returns the new time since its origin.
    /// Negative, NaN or too large: `InvalidInput` naming `by`.
    pub fn advance(&self, by: Duration) -> Result<Duration, HoldoffError> {
        let by = by.input("by")?;
        Ok(Duration::from_std(StdDuration::from_nanos(
            self.clock.advance(by).as_nanos(),
        )))
    }

    /// The time since the origin (does not count as a reading).
    pub fn now(&self) -> Duration {
        Duration::from_std(StdDuration::from_nanos(self.clock.peek().as_nanos()))
    }

    /// The wall time that corresponds to now (does not count as a reading).
    pub fn wall_now(&self) -> SystemTime {
        self.clock.wall_origin() + StdDuration::from_nanos(self.clock.peek().as_nanos())
    }

    /// How many times holdoff read this clock: tests use it to check that an operation read it
    /// at most once, and not at all on the closed fast path.
    pub fn reads(&self) -> i64 {
        count(self.clock.reads())
    }
}

impl ManualClock {
    fn wrap(clock: holdoff::ManualClock) -> Arc<Self> {
        let shared: Arc<dyn holdoff::Clock> = Arc::new(clock.clone());
        Arc::new(ManualClock { clock, shared })
    }
}

fn system_clock() -> Arc<dyn holdoff::Clock> {
    static CLOCK: OnceLock<Arc<dyn holdoff::Clock>> = OnceLock::new();
    Arc::clone(CLOCK.get_or_init(holdoff::SystemClock::shared))
}

/// The clock an object reads: the manual clock given, else the shared system clock.
pub(crate) fn clock_of(clock: &Option<Arc<ManualClock>>) -> Arc<dyn holdoff::Clock> {
    match clock {
        Some(c) => Arc::clone(&c.shared),
        None => system_clock(),
    }
}

/// The wall time now on `clock` (one reading), for HTTP-dates.
pub(crate) fn wall_now(clock: &Arc<dyn holdoff::Clock>) -> SystemTime {
    clock.wall_at(clock.now())
}

// ---------------------------------------------------------------------------------------------
// Configuration records (every field optional: absent means the core's default)
// ---------------------------------------------------------------------------------------------

/// Exponential backoff with a cap and seeded jitter: `min(initial * multiplier^n, max)`, minus
/// up to `jitter` of it. Absent fields take the default of the place it is used; an absent
/// `max` keeps the default cap unless `initial` is larger (then the cap is `initial`).
#[derive(Debug, Clone, Default, PartialEq, uniffi::Record)]
pub struct BackoffConfig {
    /// First interval; > 0.
    #[uniffi(default)]
    pub initial: Option<Duration>,
    /// Growth per step; finite, >= 1 (1 is a constant interval).
    #[uniffi(default)]
    pub multiplier: Option<f64>,
    /// Cap on the un-jittered interval; >= `initial`.
    #[uniffi(default)]
    pub max: Option<Duration>,
    /// Fraction in [0, 1) of the interval that jitter may subtract; 0 disables it.
    #[uniffi(default)]
    pub jitter: Option<f64>,
}

impl BackoffConfig {
    fn spec(&self) -> BackoffSpec {
        BackoffSpec {
            initial_ms: self.initial.map(Duration::num),
            multiplier: self.multiplier.map(Num),
            max_ms: self.max.map(Duration::num),
            jitter: self.jitter.map(Num),
        }
    }
}

/// When a closed breaker trips open.
#[derive(Debug, Clone, PartialEq, uniffi::Enum)]
pub enum TripPolicy {
    /// `threshold` consecutive failures (1..=1000000). The default, with 5.
    Consecutive { threshold: i64 },
    /// `threshold` failures inside a rolling `window`.
    Window { threshold: i64, window: Duration },
    /// Failure rate >= `threshold` (in (0, 1]) over a rolling `window` of `buckets` buckets
    /// (default 10), once `min_calls` calls were seen in it.
    Rate {
        threshold: f64,
        min_calls: i64,
        window: Duration,
        #[uniffi(default)]
        buckets: Option<i64>,
    },
}

impl TripPolicy {
    fn spec(&self) -> TripSpec {
        match *self {
            TripPolicy::Consecutive { threshold } => TripSpec::Consecutive { threshold },
            TripPolicy::Window { threshold, window } => TripSpec::Window {
                threshold,
                window_ms: window.num(),
            },
            TripPolicy::Rate {
                threshold,
                min_calls,
                window,
                buckets,
            } => TripSpec::Rate {
                threshold: Num(threshold),
                min_calls,
                window_ms: window.num(),
                buckets,
            },
        }
    }
}

/// A breaker's configuration. Defaults: 5 consecutive failures; open 30 s doubling to 5 min,
/// no jitter; 3 recoveries to close; 1 probe at a time; probe timeout = the interval;
/// retry-later guard 5 min; seed 0.
#[derive(Debug, Clone, Default, PartialEq, uniffi::Record)]
pub struct BreakerConfig {
    #[uniffi(default)]
    pub trip: Option<TripPolicy>,
    /// Interval between probes while open; never gives up.
    #[uniffi(default)]
    pub open_interval: Option<BackoffConfig>,
    /// Consecutive current-episode probe answers needed to close (1..=1000).
    #[uniffi(default)]
    pub recoveries: Option<i64>,
    /// Probes admitted per interval (1..=1000).
    #[uniffi(default)]
    pub max_probes_in_flight: Option<i64>,
    /// How long an unanswered probe holds its slot.
    #[uniffi(default)]
    pub probe_timeout: Option<Duration>,
    /// Guard on a provider's retry-later delay.
    #[uniffi(default)]
    pub max_retry_later: Option<Duration>,
    /// Seed of the jitter PRNG (the bits of the `Long`).
    #[uniffi(default)]
    pub seed: Option<i64>,
}

impl BreakerConfig {
    pub(crate) fn to_core(&self) -> Result<holdoff::BreakerConfig, HoldoffError> {
        Ok(BreakerSpec {
            trip: self.trip.as_ref().map(TripPolicy::spec),
            open_interval: self.open_interval.as_ref().map(BackoffConfig::spec),
            recoveries: self.recoveries,
            max_probes_in_flight: self.max_probes_in_flight,
            probe_timeout_ms: self.probe_timeout.map(Duration::num),
            max_retry_later_ms: self.max_retry_later.map(Duration::num),
            seed: self.seed.map(|s| s as u64),
        }
        .to_config()?)
    }
}

/// A retry budget's configuration. Defaults: episode budget 30 min, Retry-After cap 300 s
/// (the budget must be at least twice the cap), 10 counted retries, backoff 500 ms doubling
/// to 60 s, counted-path total 12 h, wait the cap above it, seed 0.
#[derive(Debug, Clone, Default, PartialEq, uniffi::Record)]
pub struct BudgetConfig {
    #[uniffi(default)]
    pub max_rate_limit_duration: Option<Duration>,
    #[uniffi(default)]
    pub retry_after_cap: Option<Duration>,
    #[uniffi(default)]
    pub max_retries: Option<i64>,
    #[uniffi(default)]
    pub backoff: Option<BackoffConfig>,
    #[uniffi(default)]
    pub max_backoff_duration: Option<Duration>,
    /// When a server asks for longer than `retry_after_cap`: `false` (the default) waits the
    /// cap and the decision says `capped`; `true` gives up at once with
    /// `GiveUpReason.RETRY_AFTER_ABOVE_CAP` and the server's delay, for callers who would
    /// rather reschedule than ask before the time the server named.
    #[uniffi(default)]
    pub give_up_above_cap: Option<bool>,
    #[uniffi(default)]
    pub seed: Option<i64>,
}

impl BudgetConfig {
    pub(crate) fn to_core(&self) -> Result<holdoff::BudgetConfig, HoldoffError> {
        Ok(BudgetSpec {
            max_rate_limit_duration_ms: self.max_rate_limit_duration.map(Duration::num),
            retry_after_cap_ms: self.retry_after_cap.map(Duration::num),
            max_retries: self.max_retries,
            backoff: self.backoff.as_ref().map(BackoffConfig::spec),
            max_backoff_duration_ms: self.max_backoff_duration.map(Duration::num),
            give_up_above_cap: self.give_up_above_cap,
            seed: self.seed.map(|s| s as u64),
        }
        .to_config()?)
    }
}

/// A retry quota's configuration. Defaults: capacity 500, retry cost 5, timeout cost 10,
/// success refill 1.
#[derive(Debug, Clone, Default, PartialEq, Eq, uniffi::Record)]
pub struct QuotaConfig {
    #[uniffi(default)]
    pub capacity: Option<i64>,
    #[uniffi(default)]
    pub retry_cost: Option<i64>,
    #[uniffi(default)]
    pub timeout_cost: Option<i64>,
    #[uniffi(default)]
    pub success_refill: Option<i64>,
}

impl QuotaConfig {
    pub(crate) fn to_core(&self) -> Result<holdoff::QuotaConfig, HoldoffError> {
        Ok(QuotaSpec {
            capacity: self.capacity,
            retry_cost: self.retry_cost,
            timeout_cost: self.timeout_cost,
            success_refill: self.success_refill,
        }
        .to_config()?)
    }
}

/// The HTTP classifier's configuration. Defaults: no overrides, retry-after statuses 429 and
/// 503, no default wait for a 429 without a hint (it takes the counted backoff).
#[derive(Debug, Clone, Default, PartialEq, uniffi::Record)]
pub struct ClassifierConfig {
    /// Statuses counted as transient failures (e.g. a provider that blocks with 403).
    #[uniffi(default)]
    pub failure_statuses: Option<Vec<i32>>,
    /// Statuses counted as answers (reachable, not retryable).
    #[uniffi(default)]
    pub answer_statuses: Option<Vec<i32>>,
    /// Statuses whose delay hint opens a retry-later wait.
    #[uniffi(default)]
    pub retry_after_statuses: Option<Vec<i32>>,
    /// Wait for a 429 that carries no usable hint.
    #[uniffi(default)]
    pub rate_limit_default_wait: Option<Duration>,
}

impl ClassifierConfig {
    pub(crate) fn to_core(&self) -> Result<holdoff::ClassifierConfig, HoldoffError> {
        let wide = |v: &Option<Vec<i32>>| v.as_ref().map(|l| l.iter().map(|&s| i64::from(s)).collect());
        Ok(ClassifierSpec {
            failure_statuses: wide(&self.failure_statuses),
            answer_statuses: wide(&self.answer_statuses),
            retry_after_statuses: wide(&self.retry_after_statuses),
            rate_limit_default_wait_ms: self.rate_limit_default_wait.map(Duration::num),
        }
        .to_config()?)
    }
}

/// The first `count` intervals of `backoff` (defaults as for a budget's counted path), jittered
/// by the core's PRNG seeded with `seed`: the schedule a breaker or budget would follow.
#[uniffi::export]
pub fn backoff_intervals(
    backoff: BackoffConfig,
    count: u32,
    seed: i64,
) -> Result<Vec<Duration>, HoldoffError> {
    let b = backoff
        .spec()
        .to_backoff("backoff", holdoff::BudgetConfig::default().backoff)?;
    let mut rng = holdoff::Prng::new(seed as u64);
    Ok((0..count.min(10_000))
        .map(|n| Duration::from_std(b.interval(n, &mut rng)))
        .collect())
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(millis: i64, nanos: i32) -> Duration {
        Duration(DurationParts { millis, nanos })
    }

    fn field(e: HoldoffError) -> String {
        match e {
            HoldoffError::InvalidConfig { field, .. } | HoldoffError::InvalidInput { field, .. } => field,
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn durations_cross_exactly_both_ways() {
        let d = StdDuration::new(3_155_760_059, 999_999_999); // a century, to the nanosecond
        let wire = Duration::from_std(d);
        assert_eq!(
            wire.0,
            DurationParts {
                millis: 3_155_760_059_999,
                nanos: 999_999
            }
        );
        assert_eq!(wire.input("x").unwrap(), d);
    }

    #[test]
    fn negative_infinite_and_huge_inputs_are_refused_naming_the_field() {
        assert_eq!(field(parts(-1, 0).input("at").unwrap_err()), "at");
        assert_eq!(field(parts(0, -1).input("at").unwrap_err()), "at");
        assert_eq!(field(parts(i64::MAX, 0).input("by").unwrap_err()), "by"); // Kotlin's INFINITE
        assert_eq!(field(parts(i64::MIN, 0).input("by").unwrap_err()), "by");
        assert_eq!(parts(0, 1).input("x").unwrap(), StdDuration::from_nanos(1));
    }

    #[test]
    fn configuration_errors_are_the_cores() {
        let e = BreakerConfig {
            recoveries: Some(0),
            ..Default::default()
        }
        .to_core()
        .unwrap_err();
        assert_eq!(e.code(), "invalid_config");
        assert_eq!(field(e), "breaker.recoveries");
        let e = BudgetConfig {
            retry_after_cap: Some(parts(-300_000, 0)),
            ..Default::default()
        }
        .to_core()
        .unwrap_err();
        assert_eq!(field(e), "budget.retry_after_cap");
        assert_eq!(
            BreakerConfig::default().to_core().unwrap(),
            holdoff::BreakerConfig::default()
        );
        assert_eq!(
            BudgetConfig::default().to_core().unwrap(),
            holdoff::BudgetConfig::default()
        );
    }

    #[test]
    fn a_policy_needs_one_clock() {
        let a = ManualClock::new();
        let b = ManualClock::new();
        let breaker = Breaker::new(BreakerConfig::default(), Some(Arc::clone(&a)), None).unwrap();
        let ok = RetryBudget::new(BudgetConfig::default(), Some(a)).unwrap();
        let other = RetryBudget::new(BudgetConfig::default(), Some(b)).unwrap();
        assert!(Policy::new(Arc::clone(&breaker), ok, None, None).is_ok());
        let e = Policy::new(breaker, other, None, None).unwrap_err();
        assert_eq!(field(e), "policy.clock");
        // Without a manual clock every object shares the one system clock.
        let sys = Breaker::new(BreakerConfig::default(), None, None).unwrap();
        let budget = RetryBudget::new(BudgetConfig::default(), None).unwrap();
        assert!(Policy::new(sys, budget, None, None).is_ok());
    }
}
