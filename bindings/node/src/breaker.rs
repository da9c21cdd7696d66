//! The breaker (`holdoff::Breaker`): admission and recording on raw numbers for the hot path,
//! snapshots, and the state changes fed to the JavaScript event emitter.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use holdoff::interop::{Coded, RawPermit};
use holdoff::{
    Breaker, Permit, Snapshot, StateChange, FAST_PATH_COUNTING, FAST_PATH_STATE_MASK, FAST_PATH_VERSION,
};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::clock::{clock_of, ClockBox};
use crate::convert::{instant_ms, ms, set_ms};
use crate::{codes, err, external, fleet, lock, opts};

/// A breaker, the fleet it shares (owned: dropped, and so closed, with the handle) and the
/// queue its listener fills for the JavaScript event emitter.
pub struct BreakerBox {
    pub(crate) breaker: Arc<Breaker>,
    pub(crate) fleet: Option<Arc<holdoff_fleet::Fleet>>,
    /// Made when JavaScript first listens: most breakers never are.
    listened: OnceLock<Arc<Mutex<Vec<StateChange>>>>,
    /// The last refusal's wait in milliseconds as f64 bits (NaN: none), read right after
    /// `breaker_allow` returned a refusal code: building a refusal object across N-API cost
    /// about 2 µs, two numbers cost well under a tenth of that.
    refusal_wait: AtomicU64,
}

impl BreakerBox {
    pub(crate) fn new(breaker: Arc<Breaker>) -> BreakerBox {
        BreakerBox {
            breaker,
            fleet: None,
            listened: OnceLock::new(),
            refusal_wait: AtomicU64::new(f64::NAN.to_bits()),
        }
    }
}

/// A breaker from options (see `holdoff.d.ts`), attached to its `fleet` if the options name
/// one; `RangeError`/`TypeError` `invalid_config`.
#[napi(catch_unwind)]
pub fn breaker_new(
    env: &Env,
    options: Unknown<'_>,
    clock: Option<&External<ClockBox>>,
) -> Result<External<BreakerBox>> {
    let (spec, neutral) = opts::breaker(env, Some(options))?;
    let cfg = spec.to_config().map_err(|e| err::config(env, &e))?;
    let fleet_cfg = neutral.fleet_config(false).map_err(|e| err::config(env, &e))?;
    let b = Arc::new(Breaker::new(cfg, clock_of(clock)).map_err(|e| err::config(env, &e))?);
    let fleet = fleet::attach(env, &b, fleet_cfg)?;
    Ok(External::new(BreakerBox {
        fleet,
        ..BreakerBox::new(b)
    }))
}

/// The breaker's id, carried by its permits.
#[napi]
pub fn breaker_id(h: &External<BreakerBox>) -> u32 {
    h.breaker.id()
}

/// The permit JavaScript holds as three numbers (`permit._breaker`, `_rawEpisode`, `_probeId`).
pub(crate) fn permit_from_raw(breaker: u32, episode: u32, probe: u32) -> Permit {
    Permit::from(RawPermit {
        breaker,
        episode,
        probe,
    })
}

/// A permit as the object `breaker_allow` returns for a probe (and `policy_before` for `go`).
pub(crate) fn permit_object<'e>(env: &'e Env, p: Permit, breaker: u32) -> Result<Object<'e>> {
    let (episode, probe) = (p.episode(), p.is_probe());
    let raw = RawPermit::from(p);
    let mut o = Object::new(env)?;
    o.set("admitted", true)?;
    o.set("episode", episode)?;
    o.set("probe", probe)?;
    o.set("breaker", breaker)?;
    o.set("rawEpisode", raw.episode)?;
    o.set("probeId", raw.probe)?;
    Ok(o)
}

fn admission_result<'e>(
    env: &'e Env,
    h: &BreakerBox,
    r: std::result::Result<Permit, holdoff::Refusal>,
) -> Result<Either<f64, Object<'e>>> {
    match r {
        Ok(p) if !p.is_probe() => Ok(Either::A(f64::from(RawPermit::from(p).episode))),
        Ok(p) => Ok(Either::B(permit_object(env, p, h.breaker.id())?)),
        Err(r) => {
            let wait = r.retry_after.map(ms).unwrap_or(f64::NAN);
            h.refusal_wait.store(wait.to_bits(), Ordering::Relaxed);
            Ok(Either::A(codes::refusal_code(&r)))
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

/// The fast-path word's layout as `[version, admitMask]` (docs/ffi.md "The fast-path word"):
/// `holdoff.js` admits a call and recognises a clean success on the word only when `version`
/// is the one it was written for, and admits only when `word & admitMask` is 0 (the mask lies
/// in the word's low 32 bits).
#[napi]
pub fn fast_path_layout() -> Vec<u32> {
    const MASK: u64 = FAST_PATH_STATE_MASK | FAST_PATH_COUNTING;
    const _: () = assert!(MASK <= u32::MAX as u64, "the admit mask must fit in the low half");
    vec![FAST_PATH_VERSION, MASK as u32]
}

/// The breaker's fast-path word as an 8-byte external `ArrayBuffer` over the core's `AtomicU64`
/// (read it with `Atomics.load` on a `Uint32Array`: little-endian, low half first), or `null`
/// when the word cannot be shared in place: a big-endian platform, or a runtime that refuses
/// external buffers (it would copy the word, and a copy goes stale). The buffer's finalizer holds
/// a clone of the breaker, so the word outlives every JavaScript view of it. Call once per
/// breaker object.
#[napi(catch_unwind)]
pub fn breaker_fast_path_word<'e>(env: &'e Env, h: &External<BreakerBox>) -> Result<Option<Unknown<'e>>> {
    if cfg!(target_endian = "big") {
        return Ok(None);
    }
    let word = h.breaker.fast_path_word().as_ptr();
    // SAFETY: `word` points at 8 bytes that live as long as the breaker, which the kept clone
    // holds until the finalizer runs; JavaScript only reads them with atomic loads.
    unsafe {
        external::view(
            env,
            word.cast(),
            std::mem::size_of::<u64>(),
            Arc::clone(&h.breaker),
        )
    }
}

/// The wait of the refusal `breaker_allow` just returned, in milliseconds; NaN when the
/// breaker was forced open (no wait is known).
#[napi]
pub fn breaker_refusal_wait(h: &External<BreakerBox>) -> f64 {
    f64::from_bits(h.refusal_wait.load(Ordering::Relaxed))
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
    let o = codes::outcome(env, outcome_code, retry_later_ms)?;
    let permit = permit_from_raw(breaker, episode, probe);
    Ok(codes::effect_code(h.breaker.record(permit, o)))
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
        let q = Arc::clone(h.listened.get_or_init(Default::default));
        h.breaker
            .set_listener(Some(Arc::new(move |ev: &StateChange| lock(&q).push(*ev))));
    } else {
        h.breaker.set_listener(None);
        if let Some(q) = h.listened.get() {
            lock(q).clear();
        }
    }
}

/// Takes the state changes the listener queued, or `null` if there are none.
#[napi(catch_unwind)]
pub fn breaker_take_listened<'e>(env: &'e Env, h: &External<BreakerBox>) -> Result<Option<Array<'e>>> {
    let Some(q) = h.listened.get() else {
        return Ok(None);
    };
    let evs = std::mem::take(&mut *lock(q));
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
