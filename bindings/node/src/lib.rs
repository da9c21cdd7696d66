//! holdoff for Node.js: the native layer (napi-rs).
//!
//! This crate is a thin skin over the `holdoff` core: it converts JavaScript values and units
//! (milliseconds as numbers, never BigInt) and maps errors to `RangeError`/`TypeError` with the
//! stable `code`. Every decision is the core's. The public JavaScript API (classes, permits,
//! the retry helpers, events) lives in `holdoff.js`, which calls the functions here on opaque
//! handles; `execution.rs` holds the core's retry loop of one call (`holdoff::Execution`).
//!
//! Why handles and free functions instead of `#[napi]` classes: a method call on a napi class
//! unwraps `this` through a private-property lookup, which costs about as much as the whole
//! closed-state admission; an `External` handle passed as an argument is read in a few
//! instructions. The hot path (allow and record while closed) returns plain numbers for the
//! same reason: creating an object in native code costs several times more than the decision.

#![deny(clippy::all)]

mod err;
pub mod execution;
mod opts;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use holdoff::{
    hint_from_headers, parse_retry_after, units, Before, Breaker, BreakerGroup, Call, Classifier, Clock,
    Decision, Effect, InputError, Instant, LeaseSlot, ManualClock, Outcome, Permit, PermitError, Policy,
    RawPermit, RetryAfter, RetryBudget, RetryQuota, RetryState, Snapshot, StateChange, SystemClock,
};
use napi::bindgen_prelude::*;
use napi::ValueType;
use napi_derive::napi;

use crate::err::Kind;

/// One clock shared by every object built without an explicit clock, so that a policy's
/// breaker and budget share it (the core requires one clock per policy).
static SYSTEM_CLOCK: LazyLock<Arc<dyn Clock>> = LazyLock::new(SystemClock::shared);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Milliseconds of a duration as a number. Whole milliseconds and the sub-millisecond rest are
/// converted apart, so that whole milliseconds stay exact past 2^53 nanoseconds (104 days), where
/// a single `nanos as f64` conversion starts rounding.
fn ms(d: Duration) -> f64 {
    nanos_ms(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn nanos_ms(n: u64) -> f64 {
    (n / 1_000_000) as f64 + (n % 1_000_000) as f64 / 1e6
}

fn instant_ms(t: Instant) -> f64 {
    nanos_ms(t.as_nanos())
}

/// A JavaScript number of milliseconds to a duration by the core's rules (`holdoff::units`): a
/// whole number goes through the integer conversion, which is exact at any size.
fn from_ms(field: &str, f: f64) -> std::result::Result<Duration, holdoff::ConfigError> {
    if f.is_finite() && f.fract() == 0.0 && f.abs() < 9.2e18 {
        units::from_millis_i64(field, f as i64)
    } else {
        units::from_millis_f64(field, f)
    }
}

fn set_ms(obj: &mut Object<'_>, key: &str, d: Option<Duration>) -> Result<()> {
    match d {
        Some(d) => obj.set(key, ms(d)),
        None => obj.set(key, Null),
    }
}

/// A duration argument of an operation: a number of milliseconds, checked by the core's units.
fn arg_ms(env: &Env, v: &Unknown<'_>, field: &str) -> Result<Duration> {
    if v.get_type()? != ValueType::Number {
        return Err(err::input_type(
            env,
            field,
            "a number of milliseconds",
            &opts::describe(env, v),
        ));
    }
    let f = unsafe { v.cast::<f64>()? };
    from_ms(field, f).map_err(|e| {
        err::input(
            env,
            &holdoff::InputError {
                field: e.field,
                rule: e.rule,
            },
        )
    })
}

fn wall(env: &Env, now_unix_ms: f64) -> Result<SystemTime> {
    let d = from_ms("now", now_unix_ms).map_err(|e| {
        err::input(
            env,
            &holdoff::InputError {
                field: e.field,
                rule: e.rule,
            },
        )
    })?;
    Ok(UNIX_EPOCH + d)
}

// ---------------------------------------------------------------------------------------------
// Clock

/// A manual clock and the one shared handle every object built on it holds.
pub struct ClockBox {
    manual: ManualClock,
    shared: Arc<dyn Clock>,
}

fn clock_of(c: Option<&External<ClockBox>>) -> Arc<dyn Clock> {
    match c {
        Some(c) => Arc::clone(&c.shared),
        None => Arc::clone(&SYSTEM_CLOCK),
    }
}

/// A manual clock at 0 whose origin is `wallOriginUnixMs` on the wall (default the Unix epoch).
#[napi(catch_unwind)]
pub fn clock_new(env: &Env, options: Unknown<'_>) -> Result<External<ClockBox>> {
    let origin = match opts::clock(env, Some(options))? {
        None => UNIX_EPOCH,
        Some(v) => UNIX_EPOCH + from_ms("clock.wall_origin_unix_ms", v).map_err(|e| err::config(env, &e))?,
    };
    let manual = ManualClock::with_wall_origin(origin);
    let shared: Arc<dyn Clock> = Arc::new(manual.clone());
    Ok(External::new(ClockBox { manual, shared }))
}

/// The clock's time in milliseconds since its origin (not counted as a reading).
#[napi]
pub fn clock_now(c: &External<ClockBox>) -> f64 {
    instant_ms(c.manual.peek())
}

/// Sets the clock; `RangeError` `clock_backwards` if earlier than now.
#[napi(catch_unwind)]
pub fn clock_set(env: &Env, c: &External<ClockBox>, to_ms: Unknown<'_>) -> Result<()> {
    let d = arg_ms(env, &to_ms, "ms")?;
    let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    c.manual
        .set(Instant::from_nanos(nanos))
        .map_err(|e| err::clock(env, &e))
}

/// Moves the clock forward; returns the new time in milliseconds.
#[napi(catch_unwind)]
pub fn clock_advance(env: &Env, c: &External<ClockBox>, by_ms: Unknown<'_>) -> Result<f64> {
    let d = arg_ms(env, &by_ms, "ms")?;
    Ok(instant_ms(c.manual.advance(d)))
}

/// How many times the core read this clock.
#[napi]
pub fn clock_reads(c: &External<ClockBox>) -> f64 {
    c.manual.reads() as f64
}

/// The wall time of the clock's origin, in Unix milliseconds.
#[napi]
pub fn clock_wall_origin_unix_ms(c: &External<ClockBox>) -> f64 {
    c.manual
        .wall_origin()
        .duration_since(UNIX_EPOCH)
        .map(ms)
        .unwrap_or(0.0)
}

/// The wall time the clock shows now, in Unix milliseconds.
#[napi]
pub fn clock_wall_now_unix_ms(c: &External<ClockBox>) -> f64 {
    c.shared
        .wall_at(c.manual.peek())
        .duration_since(UNIX_EPOCH)
        .map(ms)
        .unwrap_or(0.0)
}

// ---------------------------------------------------------------------------------------------
// Breaker

/// A breaker and the queue its listener fills for the JavaScript event emitter.
pub struct BreakerBox {
    breaker: Arc<Breaker>,
    listened: Arc<Mutex<Vec<StateChange>>>,
    /// The last refusal's wait in milliseconds as f64 bits (NaN: none), read right after
    /// `breaker_allow` returned a refusal code: building a refusal object across N-API cost
    /// about 2 µs, two numbers cost well under a tenth of that.
    refusal_wait: AtomicU64,
}

impl BreakerBox {
    fn new(breaker: Arc<Breaker>) -> BreakerBox {
        BreakerBox {
            breaker,
            listened: Arc::new(Mutex::new(Vec::new())),
            refusal_wait: AtomicU64::new(f64::NAN.to_bits()),
        }
    }
}

/// A breaker from options (see `holdoff.d.ts`); `RangeError`/`TypeError` `invalid_config`.
#[napi(catch_unwind)]
pub fn breaker_new(
    env: &Env,
    options: Unknown<'_>,
    clock: Option<&External<ClockBox>>,
) -> Result<External<BreakerBox>> {
    let cfg = opts::breaker(env, Some(options))?
        .to_config()
        .map_err(|e| err::config(env, &e))?;
    let b = Breaker::new(cfg, clock_of(clock)).map_err(|e| err::config(env, &e))?;
    Ok(External::new(BreakerBox::new(Arc::new(b))))
}

/// The breaker's id, carried by its permits.
#[napi]
pub fn breaker_id(h: &External<BreakerBox>) -> u32 {
    h.breaker.id()
}

fn permit_object<'e>(env: &'e Env, p: Permit, breaker: u32) -> Result<Object<'e>> {
    let (episode, probe) = (p.episode(), p.is_probe());
    let raw = p.into_raw();
    let mut o = Object::new(env)?;
    o.set("admitted", true)?;
    o.set("episode", episode)?;
    o.set("probe", probe)?;
    o.set("breaker", breaker)?;
    o.set("rawEpisode", raw.episode)?;
    o.set("probeId", raw.probe)?;
    Ok(o)
}

/// Admission. A permit admitted without a probe returns its raw episode as a number (the hot
/// path: no object is built); a probe or a refusal returns an object.
/// How many state codes a refusal code leaves room for (`State` has five).
const REFUSAL_STATES: f64 = 8.0;

fn admission_result<'e>(
    env: &'e Env,
    h: &BreakerBox,
    r: std::result::Result<Permit, holdoff::Refusal>,
) -> Result<Either<f64, Object<'e>>> {
    match r {
        Ok(p) if !p.is_probe() => Ok(Either::A(f64::from(p.into_raw().episode))),
        Ok(p) => Ok(Either::B(permit_object(env, p, h.breaker.id())?)),
        Err(r) => {
            let wait = r.retry_after.map(ms).unwrap_or(f64::NAN);
            h.refusal_wait.store(wait.to_bits(), Ordering::Relaxed);
            Ok(Either::A(
                -1.0 - (f64::from(r.state as u8) + REFUSAL_STATES * f64::from(r.episode)),
            ))
        }
    }
}

/// Admission, answered without building an object on the two frequent paths: a permit
/// admitted without a probe returns its raw episode (a number >= 0); a refusal returns
/// `-1 - (state + 8 * episode)`, its wait then read by `breaker_refusal_wait`; a probe
/// returns an object.
#[napi(catch_unwind)]
pub fn breaker_allow<'e>(env: &'e Env, h: &External<BreakerBox>) -> Result<Either<f64, Object<'e>>> {
    admission_result(env, h, h.breaker.allow())
}

/// The core's state names indexed by their code (`State as u8`), which refusal codes carry.
#[napi]
pub fn state_names() -> Vec<&'static str> {
    use holdoff::State;
    let mut states = [
        State::Closed,
        State::Open,
        State::HalfOpen,
        State::ForcedOpen,
        State::Disabled,
    ];
    states.sort_by_key(|s| *s as u8);
    states.iter().map(|s| s.name()).collect()
}

/// The wait of the refusal `breaker_allow` just returned, in milliseconds; NaN when the
/// breaker was forced open (no wait is known).
#[napi]
pub fn breaker_refusal_wait(h: &External<BreakerBox>) -> f64 {
    f64::from_bits(h.refusal_wait.load(Ordering::Relaxed))
}

const OUTCOME_RETRY_LATER: u32 = 5;

fn outcome(env: &Env, code: u32, retry_later_ms: f64) -> Result<Outcome> {
    Ok(match code {
        0 => Outcome::Success,
        1 => Outcome::Answer,
        2 => Outcome::Failure,
        3 => Outcome::Timeout,
        4 => Outcome::Cancelled,
        OUTCOME_RETRY_LATER => {
            Outcome::RetryLater(from_ms("outcome.retryLaterMs", retry_later_ms).map_err(|e| {
                err::input(
                    env,
                    &holdoff::InputError {
                        field: e.field,
                        rule: e.rule,
                    },
                )
            })?)
        }
        _ => {
            return Err(err::throw(
                env,
                Kind::Range,
                "invalid_input",
                format!("invalid input: unknown outcome code {code}"),
                Some("outcome"),
            ))
        }
    })
}

fn effect_code(r: std::result::Result<Effect, PermitError>) -> i32 {
    match r {
        Ok(Effect::Counted) => 0,
        Ok(Effect::Stale) => 1,
        Ok(Effect::Ignored) => 2,
        Err(PermitError::Foreign) => -1,
        Err(PermitError::AlreadyRecorded) => -2,
    }
}

/// Records an outcome (code: 0 success, 1 answer, 2 failure, 3 timeout, 4 cancelled,
/// 5 retry later after `retryLaterMs`) for the raw permit. Returns 0 counted, 1 stale,
/// 2 ignored, -1 foreign permit.
#[napi(catch_unwind)]
pub fn breaker_record(
    env: &Env,
    h: &External<BreakerBox>,
    breaker: u32,
    episode: u32,
    probe: u32,
    outcome_code: u32,
    retry_later_ms: f64,
) -> Result<i32> {
    let o = if outcome_code < OUTCOME_RETRY_LATER {
        // The hot path skips the duration conversion.
        match outcome_code {
            0 => Outcome::Success,
            1 => Outcome::Answer,
            2 => Outcome::Failure,
            3 => Outcome::Timeout,
            _ => Outcome::Cancelled,
        }
    } else {
        outcome(env, outcome_code, retry_later_ms)?
    };
    let permit = Permit::from_raw(RawPermit {
        breaker,
        episode,
        probe,
    });
    Ok(effect_code(h.breaker.record(permit, o)))
}

fn snapshot_object<'e>(env: &'e Env, s: &Snapshot) -> Result<Object<'e>> {
    let mut o = Object::new(env)?;
    o.set("state", s.state.name())?;
    o.set("episode", s.episode)?;
    o.set("failures", s.failures as f64)?;
    o.set("recoveries", s.recoveries)?;
    o.set("probesInFlight", s.probes_in_flight)?;
    set_ms(&mut o, "retryAfterMs", s.retry_after)?;
    o.set("probeReady", s.probe_ready)?;
    set_ms(&mut o, "intervalMs", s.interval)?;
    o.set("opens", s.opens as f64)?;
    o.set("closes", s.closes as f64)?;
    o.set("probes", s.probes as f64)?;
    o.set("refusals", s.refusals as f64)?;
    o.set("staleAnswers", s.stale_answers as f64)?;
    o.set("eventsDropped", s.events_dropped as f64)?;
    Ok(o)
}

/// A side-effect-free view of the breaker as a plain object.
#[napi(catch_unwind)]
pub fn breaker_snapshot<'e>(env: &'e Env, h: &External<BreakerBox>) -> Result<Object<'e>> {
    snapshot_object(env, &h.breaker.snapshot())
}

fn event_object<'e>(env: &'e Env, e: &StateChange) -> Result<Object<'e>> {
    let mut o = Object::new(env)?;
    o.set("atMs", instant_ms(e.at))?;
    o.set("from", e.from.name())?;
    o.set("to", e.to.name())?;
    o.set("episode", e.episode)?;
    o.set("reason", e.reason.name())?;
    set_ms(&mut o, "requestedDelayMs", e.requested_delay)?;
    set_ms(&mut o, "openForMs", e.open_for)?;
    Ok(o)
}

fn events_array<'e>(env: &'e Env, evs: &[StateChange]) -> Result<Array<'e>> {
    let mut arr = env.create_array(evs.len() as u32)?;
    for (i, e) in evs.iter().enumerate() {
        arr.set(i as u32, event_object(env, e)?)?;
    }
    Ok(arr)
}

/// The state changes queued since the last drain (the core's queue).
#[napi(catch_unwind)]
pub fn breaker_drain_events<'e>(env: &'e Env, h: &External<BreakerBox>) -> Result<Array<'e>> {
    events_array(env, &h.breaker.drain_events())
}

/// Starts (`true`) or stops feeding the listener queue read by `breakerTakeListened`. The core
/// calls the listener after releasing its lock; the queue is emptied from JavaScript after the
/// native call returned, so a JavaScript listener may call back into the breaker.
#[napi(catch_unwind)]
pub fn breaker_listen(h: &External<BreakerBox>, on: bool) {
    if on {
        let q = Arc::clone(&h.listened);
        h.breaker
            .set_listener(Some(Arc::new(move |ev: &StateChange| lock(&q).push(*ev))));
    } else {
        h.breaker.set_listener(None);
        lock(&h.listened).clear();
    }
}

/// Takes the state changes the listener queued, or `null` if there are none.
#[napi(catch_unwind)]
pub fn breaker_take_listened<'e>(env: &'e Env, h: &External<BreakerBox>) -> Result<Option<Array<'e>>> {
    let evs = std::mem::take(&mut *lock(&h.listened));
    if evs.is_empty() {
        return Ok(None);
    }
    events_array(env, &evs).map(Some)
}

/// Opens the breaker until reset.
#[napi(catch_unwind)]
pub fn breaker_force_open(h: &External<BreakerBox>) {
    h.breaker.force_open();
}

/// Admits everything and never trips until reset.
#[napi(catch_unwind)]
pub fn breaker_disable(h: &External<BreakerBox>) {
    h.breaker.disable();
}

/// Back to closed with fresh counts.
#[napi(catch_unwind)]
pub fn breaker_reset(h: &External<BreakerBox>) {
    h.breaker.reset();
}

// ---------------------------------------------------------------------------------------------
// Group

/// A breaker group.
pub struct GroupBox {
    group: BreakerGroup,
}

/// A bounded group of breakers keyed by upstream, made lazily from one template (breaker
/// options); `group` holds `{ maxKeys }` (default 10 000; `invalid_config` naming
/// `group.max_keys` outside 1..=100 000 000).
#[napi(catch_unwind)]
pub fn group_new(
    env: &Env,
    options: Unknown<'_>,
    group: Unknown<'_>,
    clock: Option<&External<ClockBox>>,
) -> Result<External<GroupBox>> {
    let cfg = opts::breaker(env, Some(options))?
        .to_config()
        .map_err(|e| err::config(env, &e))?;
    let max_keys = opts::group(env, Some(group))?
        .max_keys()
        .map_err(|e| err::config(env, &e))?;
    let group =
        BreakerGroup::with_max_keys(cfg, max_keys, clock_of(clock)).map_err(|e| err::config(env, &e))?;
    Ok(External::new(GroupBox { group }))
}

/// The breaker the core hands out for `key` (`BreakerGroup::get`: marks it most recently used,
/// may evict an idle breaker or hand out an overflow one). `null` when that is the breaker of
/// `cached` (the JavaScript wrapper already made for the key), else a new handle.
#[napi(catch_unwind)]
pub fn group_get(
    h: &External<GroupBox>,
    key: String,
    cached: Option<&External<BreakerBox>>,
) -> Option<External<BreakerBox>> {
    let b = h.group.get(&key);
    match cached {
        Some(c) if Arc::ptr_eq(&c.breaker, &b) => None,
        _ => Some(External::new(BreakerBox::new(b))),
    }
}

/// Whether the group keeps `breaker` for `key` now (`BreakerGroup::peek`, which marks nothing):
/// false for an evicted breaker and for an overflow breaker the group never kept.
#[napi(catch_unwind)]
pub fn group_keeps(h: &External<GroupBox>, key: String, breaker: &External<BreakerBox>) -> bool {
    h.group
        .peek(&key)
        .is_some_and(|b| Arc::ptr_eq(&b, &breaker.breaker))
}

/// The breaker the group keeps for `key`, without making it or marking it used; `null` if none.
#[napi(catch_unwind)]
pub fn group_peek(h: &External<GroupBox>, key: String) -> Option<External<BreakerBox>> {
    h.group.peek(&key).map(|b| External::new(BreakerBox::new(b)))
}

/// Keys with a breaker, sorted.
#[napi(catch_unwind)]
pub fn group_keys(h: &External<GroupBox>) -> Vec<String> {
    h.group.keys()
}

/// The group's counts (`BreakerGroup::snapshot`): `{ size, maxKeys, evictions, overflows }`.
#[napi(catch_unwind)]
pub fn group_snapshot<'e>(env: &'e Env, h: &External<GroupBox>) -> Result<Object<'e>> {
    let s = h.group.snapshot();
    let mut o = Object::new(env)?;
    o.set("size", s.keys as f64)?;
    o.set("maxKeys", s.max_keys as f64)?;
    o.set("evictions", s.evictions as f64)?;
    o.set("overflows", s.overflows as f64)?;
    Ok(o)
}

// ---------------------------------------------------------------------------------------------
// Budget

/// A retry budget.
pub struct BudgetBox {
    budget: Arc<RetryBudget>,
}

/// The per-call state of a budget.
pub struct RetryCallBox {
    state: Mutex<RetryState>,
}

/// A retry budget from options; `RangeError`/`TypeError` `invalid_config`.
#[napi(catch_unwind)]
pub fn budget_new(
    env: &Env,
    options: Unknown<'_>,
    clock: Option<&External<ClockBox>>,
) -> Result<External<BudgetBox>> {
    let cfg = opts::budget(env, Some(options))?
        .to_config()
        .map_err(|e| err::config(env, &e))?;
    let budget = RetryBudget::new(cfg, clock_of(clock)).map_err(|e| err::config(env, &e))?;
    Ok(External::new(BudgetBox {
        budget: Arc::new(budget),
    }))
}

/// A fresh logical call for `budgetDecide`.
#[napi(catch_unwind)]
pub fn budget_new_call() -> External<RetryCallBox> {
    External::new(RetryCallBox {
        state: Mutex::new(RetryState::new()),
    })
}

fn decision_object<'e>(env: &'e Env, d: &Decision) -> Result<Object<'e>> {
    let mut o = Object::new(env)?;
    match *d {
        Decision::Done => {
            o.set("decision", "done")?;
        }
        Decision::Retry {
            delay,
            source,
            server_delay,
            capped,
        } => {
            o.set("decision", "retry")?;
            o.set("delayMs", ms(delay))?;
            o.set("source", source.name())?;
            set_ms(&mut o, "serverDelayMs", server_delay)?;
            o.set("capped", capped)?;
        }
        Decision::GiveUp { reason, server_delay } => {
            o.set("decision", "give_up")?;
            o.set("reason", reason.name())?;
            set_ms(&mut o, "serverDelayMs", server_delay)?;
        }
    }
    Ok(o)
}

/// Decides what to do after an answer (outcome codes as in `breakerRecord`).
#[napi(catch_unwind)]
pub fn budget_decide<'e>(
    env: &'e Env,
    h: &External<BudgetBox>,
    call: &External<RetryCallBox>,
    outcome_code: u32,
    retry_later_ms: f64,
) -> Result<Object<'e>> {
    let o = outcome(env, outcome_code, retry_later_ms)?;
    let d = h.budget.decide(&mut lock(&call.state), o);
    decision_object(env, &d)
}

/// When the current rate-limit episode started (ms on the budget's clock), or `null`.
#[napi(catch_unwind)]
pub fn budget_episode_start_ms(h: &External<BudgetBox>) -> Either<f64, Null> {
    match h.budget.episode_start() {
        Some(t) => Either::A(instant_ms(t)),
        None => Either::B(Null),
    }
}

/// Retries this call took on the counted path.
#[napi(catch_unwind)]
pub fn retry_call_retries(call: &External<RetryCallBox>) -> u32 {
    lock(&call.state).retries()
}

/// When this call first failed (ms on the budget's clock), or `null`.
#[napi(catch_unwind)]
pub fn retry_call_first_failure_ms(call: &External<RetryCallBox>) -> Either<f64, Null> {
    match lock(&call.state).first_failure() {
        Some(t) => Either::A(instant_ms(t)),
        None => Either::B(Null),
    }
}

// ---------------------------------------------------------------------------------------------
// Quota

/// A retry quota.
pub struct QuotaBox {
    quota: Arc<RetryQuota>,
}

/// A retry quota (token bucket) from options.
#[napi(catch_unwind)]
pub fn quota_new(env: &Env, options: Unknown<'_>) -> Result<External<QuotaBox>> {
    let cfg = opts::quota(env, Some(options))?
        .to_config()
        .map_err(|e| err::config(env, &e))?;
    let quota = RetryQuota::new(cfg).map_err(|e| err::config(env, &e))?;
    Ok(External::new(QuotaBox {
        quota: Arc::new(quota),
    }))
}

/// A lease the quota issued, held as one native object: the core's `LeaseSlot` gives it back at
/// most once and only to its own quota.
pub struct LeaseBox {
    slot: LeaseSlot,
}

/// Takes the cost of one retry: `{ acquired: true, cost, available, lease }` (`lease` the handle
/// to give back with `quotaGiveBack`) or `{ acquired: false, cost, available }`.
#[napi(catch_unwind)]
pub fn quota_acquire<'e>(env: &'e Env, h: &External<QuotaBox>, after_timeout: bool) -> Result<Object<'e>> {
    let mut o = Object::new(env)?;
    match h.quota.acquire(after_timeout) {
        Ok(lease) => {
            o.set("acquired", true)?;
            o.set("cost", lease.cost() as f64)?;
            o.set(
                "lease",
                External::new(LeaseBox {
                    slot: LeaseSlot::new(lease),
                }),
            )?;
        }
        Err(e) => {
            o.set("acquired", false)?;
            o.set("cost", e.cost as f64)?;
        }
    }
    o.set("available", h.quota.available() as f64)?;
    Ok(o)
}

/// A call succeeded without a retry: adds the success refill. Returns the tokens left.
#[napi(catch_unwind)]
pub fn quota_on_success(h: &External<QuotaBox>) -> f64 {
    // Without a lease there is nothing foreign to refuse.
    let _ = h.quota.on_success(None);
    h.quota.available() as f64
}

/// A call succeeded after a retry: gives `lease` back to the quota (the core's `LeaseSlot::take`
/// and `RetryQuota::on_success`). Returns the tokens left, or -1 when another quota issued the
/// lease, -2 when it was already given back (the bucket is then unchanged).
#[napi(catch_unwind)]
pub fn quota_give_back(h: &External<QuotaBox>, lease: &External<LeaseBox>) -> f64 {
    match lease
        .slot
        .take(&h.quota)
        .and_then(|l| h.quota.on_success(Some(l)))
    {
        Ok(()) => h.quota.available() as f64,
        Err(PermitError::Foreign) => -1.0,
        Err(PermitError::AlreadyRecorded) => -2.0,
    }
}

/// Whether the lease was given back.
#[napi(catch_unwind)]
pub fn lease_given_back(lease: &External<LeaseBox>) -> bool {
    lease.slot.is_taken()
}

/// Tokens left.
#[napi(catch_unwind)]
pub fn quota_available(h: &External<QuotaBox>) -> f64 {
    h.quota.available() as f64
}

// ---------------------------------------------------------------------------------------------
// Retry-After and classification

fn headers_of(flat: &[String]) -> impl Iterator<Item = (&str, &str)> {
    flat.chunks_exact(2).map(|p| (p[0].as_str(), p[1].as_str()))
}

fn hint_set(o: &mut Object<'_>, r: RetryAfter) -> Result<()> {
    match r {
        RetryAfter::Delay(d) => o.set("delayMs", ms(d)),
        RetryAfter::Unusable(u) => o.set("unusable", u.name()),
    }
}

/// Parses one Retry-After field value (RFC 9110 §10.2.3) against the wall time `nowUnixMs`:
/// `{ delayMs }` or `{ unusable }`. Never throws for a bad value.
#[napi(catch_unwind)]
pub fn parse_retry_after_value<'e>(env: &'e Env, value: String, now_unix_ms: f64) -> Result<Object<'e>> {
    let now = wall(env, now_unix_ms)?;
    let mut o = Object::new(env)?;
    hint_set(&mut o, parse_retry_after(&value, now))?;
    Ok(o)
}

/// The retry hint of a response's headers (flat `[name, value, ...]`) by the core's precedence:
/// `{ delayMs }` or `{ unusable }`, and `source`, the core's name of the header it came from.
#[napi(catch_unwind)]
pub fn retry_after_hint<'e>(env: &'e Env, headers: Vec<String>, now_unix_ms: f64) -> Result<Object<'e>> {
    let now = wall(env, now_unix_ms)?;
    let (r, src) = hint_from_headers(headers_of(&headers), now);
    let mut o = Object::new(env)?;
    hint_set(&mut o, r)?;
    o.set("source", src.name())?;
    Ok(o)
}

/// An HTTP classifier.
pub struct ClassifierBox {
    classifier: Classifier,
}

/// A classifier from options.
#[napi(catch_unwind)]
pub fn classifier_new(env: &Env, options: Unknown<'_>) -> Result<External<ClassifierBox>> {
    let cfg = opts::classifier(env, Some(options))?
        .to_config()
        .map_err(|e| err::config(env, &e))?;
    let classifier = Classifier::new(cfg).map_err(|e| err::config(env, &e))?;
    Ok(External::new(ClassifierBox { classifier }))
}

/// A status argument as the core checks it (`holdoff::check_status`): any whole number reaches
/// the core, which takes 0..=999 (a status outside 100..=599 is a broken upstream, a failure) and
/// refuses the rest with `invalid_input` naming `status`. A number that is not whole is refused
/// so too; a value that is not a number is a `TypeError`.
/// A JS number as the core's status integer: the core takes any integer and refuses what is
/// not a status; a number that is not whole is no status either, and `i64::MIN` is one the core
/// refuses the same way (a whole number beyond `i64` saturates, refused too).
pub(crate) fn status_int(f: f64) -> i64 {
    if f.is_finite() && f.fract() == 0.0 {
        f as i64
    } else {
        i64::MIN
    }
}

fn status_arg(env: &Env, v: &Unknown<'_>) -> Result<std::result::Result<u16, InputError>> {
    if v.get_type()? != ValueType::Number {
        return Err(err::input_type(
            env,
            "status",
            "an HTTP status number",
            &opts::describe(env, v),
        ));
    }
    let f = unsafe { v.cast::<f64>()? };
    Ok(if f.is_finite() && f.fract() == 0.0 {
        // A whole number beyond i64 saturates: still not a status, refused by the core.
        holdoff::check_status(f as i64)
    } else {
        Err(InputError {
            field: "status".into(),
            rule: format!("must be a whole number, got {f}"),
        })
    })
}

fn outcome_set(o: &mut Object<'_>, out: &Outcome) -> Result<()> {
    o.set("outcome", out.name())?;
    match out {
        Outcome::RetryLater(d) => o.set("retryLaterMs", ms(*d)),
        _ => o.set("retryLaterMs", Null),
    }
}

/// Classifies a response: `{ outcome, retryLaterMs, hint, source, shouldRetry }`; `RangeError`
/// `invalid_input` for a value that is not a status (outside 0..=999).
#[napi(catch_unwind)]
pub fn classifier_classify<'e>(
    env: &'e Env,
    h: &External<ClassifierBox>,
    status: Unknown<'_>,
    headers: Vec<String>,
    now_unix_ms: f64,
) -> Result<Object<'e>> {
    let s = status_arg(env, &status)?.map_err(|e| err::input(env, &e))?;
    let now = wall(env, now_unix_ms)?;
    let c = h
        .classifier
        .classify(s, headers_of(&headers), now)
        .map_err(|e| err::input(env, &e))?;
    let mut o = Object::new(env)?;
    outcome_set(&mut o, &c.outcome)?;
    let mut hint = Object::new(env)?;
    hint_set(&mut hint, c.hint)?;
    o.set("hint", hint)?;
    o.set("source", c.source.name())?;
    match c.should_retry {
        Some(v) => o.set("shouldRetry", v)?,
        None => o.set("shouldRetry", Null)?,
    }
    Ok(o)
}

// ---------------------------------------------------------------------------------------------
// Policy

/// A policy, shared with the executions of its retry helpers (`execution.rs`).
pub struct PolicyBox {
    policy: Arc<Policy>,
}

/// The per-call state of the manual policy API (`policy.newCall()`).
pub struct PolicyCallBox {
    call: Mutex<Call>,
}

/// A policy over a breaker, a budget (same clock), an optional quota and a classifier.
#[napi(catch_unwind)]
pub fn policy_new(
    env: &Env,
    breaker: &External<BreakerBox>,
    budget: &External<BudgetBox>,
    quota: Option<&External<QuotaBox>>,
    classifier: Option<&External<ClassifierBox>>,
) -> Result<External<PolicyBox>> {
    let policy = Policy::new(
        Arc::clone(&breaker.breaker),
        Arc::clone(&budget.budget),
        quota.map(|q| Arc::clone(&q.quota)),
        classifier.map(|c| c.classifier.clone()).unwrap_or_default(),
    )
    .map_err(|e| err::config(env, &e))?;
    Ok(External::new(PolicyBox {
        policy: Arc::new(policy),
    }))
}

/// A fresh logical call for the manual policy API.
#[napi(catch_unwind)]
pub fn policy_new_call() -> External<PolicyCallBox> {
    External::new(PolicyCallBox {
        call: Mutex::new(Call::new()),
    })
}

/// Attempts admitted so far in this call.
#[napi(catch_unwind)]
pub fn policy_call_attempts(call: &External<PolicyCallBox>) -> u32 {
    lock(&call.call).attempts()
}

/// Retries this call took on the budget's counted path.
#[napi(catch_unwind)]
pub fn policy_call_retries(call: &External<PolicyCallBox>) -> u32 {
    lock(&call.call).retry_state().retries()
}

fn before_object<'e>(env: &'e Env, b: Before, breaker: u32) -> Result<Object<'e>> {
    match b {
        Before::Go(p) => {
            let mut o = permit_object(env, p, breaker)?;
            o.set("action", "go")?;
            Ok(o)
        }
        Before::Wait(d) => {
            let mut o = Object::new(env)?;
            o.set("action", "wait")?;
            o.set("delayMs", ms(d))?;
            Ok(o)
        }
        Before::GiveUp { reason, retry_after } => {
            let mut o = Object::new(env)?;
            o.set("action", "give_up")?;
            o.set("reason", reason.name())?;
            set_ms(&mut o, "retryAfterMs", retry_after)?;
            Ok(o)
        }
    }
}

/// Before an attempt: `{ action: 'go', ...permit }`, `{ action: 'wait', delayMs }` or
/// `{ action: 'give_up', reason, retryAfterMs }`.
#[napi(catch_unwind)]
pub fn policy_before<'e>(
    env: &'e Env,
    h: &External<PolicyBox>,
    call: &External<PolicyCallBox>,
) -> Result<Object<'e>> {
    let b = h.policy.before_attempt(&mut lock(&call.call));
    before_object(env, b, h.policy.breaker().id())
}

/// After an attempt: the decision object, or `null` if the permit belongs to another breaker.
#[napi(catch_unwind)]
#[allow(clippy::too_many_arguments)]
pub fn policy_after<'e>(
    env: &'e Env,
    h: &External<PolicyBox>,
    call: &External<PolicyCallBox>,
    breaker: u32,
    episode: u32,
    probe: u32,
    outcome_code: u32,
    retry_later_ms: f64,
) -> Result<Option<Object<'e>>> {
    let o = outcome(env, outcome_code, retry_later_ms)?;
    let permit = Permit::from_raw(RawPermit {
        breaker,
        episode,
        probe,
    });
    match h.policy.after_attempt(&mut lock(&call.call), permit, o) {
        Ok(d) => decision_object(env, &d).map(Some),
        Err(_) => Ok(None),
    }
}

/// After an attempt that got an HTTP response (flat headers): the decision object with the
/// classified `outcome`, or `null` if the permit belongs to another breaker.
#[napi(catch_unwind)]
#[allow(clippy::too_many_arguments)]
pub fn policy_after_response<'e>(
    env: &'e Env,
    h: &External<PolicyBox>,
    call: &External<PolicyCallBox>,
    breaker: u32,
    episode: u32,
    probe: u32,
    status: Unknown<'_>,
    headers: Vec<String>,
) -> Result<Option<Object<'e>>> {
    if status.get_type()? != ValueType::Number {
        return Err(err::input_type(
            env,
            "status",
            "an HTTP status number",
            &opts::describe(env, &status),
        ));
    }
    let status = status_int(unsafe { status.cast::<f64>()? });
    let permit = Permit::from_raw(RawPermit {
        breaker,
        episode,
        probe,
    });
    match h
        .policy
        .after_response(&mut lock(&call.call), permit, status, headers_of(&headers))
    {
        Ok((d, c)) => {
            let mut o = decision_object(env, &d)?;
            outcome_set(&mut o, &c.outcome)?;
            Ok(Some(o))
        }
        Err(holdoff::HoldoffError::Permit(PermitError::Foreign)) => Ok(None),
        Err(e) => Err(err::holdoff(env, &e)),
    }
}
