//! # holdoff-otel: OpenTelemetry metrics for holdoff
//!
//! Exports the metric model of the [`holdoff`] core ([`holdoff::metrics::METRICS`], the table of
//! docs/metrics.md) through the [`opentelemetry`] crate's observable instruments: one instrument
//! per table row, whose callback reads the observed objects' counters when the SDK collects. A
//! call through a breaker or a policy pays nothing for the exporter: it only adds the core's own
//! thread-striped counts, which start when [`observe`] first reads the object.
//!
//! ```
//! use std::sync::Arc;
//! use holdoff::{Breaker, BreakerConfig, SystemClock};
//!
//! # fn main() -> Result<(), holdoff::InputError> {
//! # let meter = opentelemetry::global::meter("my-service");
//! let payments = Arc::new(Breaker::new(BreakerConfig::default(), SystemClock::shared()).unwrap());
//! // Every collection now reports `holdoff.breaker.*{upstream="payments"}`.
//! let observation = holdoff_otel::observe(&meter, &payments, Some("payments"))?;
//! // ... until the observation is dropped or stopped.
//! observation.stop();
//! # Ok(())
//! # }
//! ```
//!
//! * Targets ([`Target`]): an `Arc` of a [`Breaker`], a [`Policy`] (its retry series, its
//!   breaker's and its quota's), a [`RetryQuota`] or a [`BreakerGroup`] (its own series, and each
//!   kept breaker's with `upstream` = the key).
//! * Values are in the table's units: counts as `u64`, durations (`holdoff.retry.wait.duration`,
//!   unit `s`) as `f64` seconds, gauges as `u64`. Counters are cumulative and monotonic from the
//!   moment counting started (the first read of the object, done by [`observe`]).
//! * Attributes: the metric's own (`state`, `outcome`, `reason`, `source`) and `upstream` when
//!   given or when the series is a group's breaker.
//! * [`Instruments`] creates the instruments once on a meter and observes any number of
//!   targets through them; [`observe`] is the one-target shortcut.
//!
//! ## Why not the `metrics` facade
//! The `metrics` crate is push-based: a library calls `counter!(..).increment(1)` as things
//! happen and the installed recorder keeps the totals. It has no observable (callback)
//! instruments, so exporting holdoff through it would mean either a call into the recorder on
//! every allow and record (the hot path this crate keeps free) or a thread of ours copying
//! totals into absolute counters on a timer of ours, not the scraper's. OpenTelemetry's
//! observable instruments read at the collector's own pace, which is what the model is built
//! for. A user of the facade can read [`holdoff::Breaker::metrics`] and its siblings in their
//! own scrape handler.

#![deny(missing_docs)]

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use holdoff::metrics::{Kind, Metric, Sample, METRICS};
use holdoff::{Breaker, BreakerGroup, InputError, Policy, RetryQuota};
use opentelemetry::metrics::{AsyncInstrument, Meter};
use opentelemetry::{KeyValue, Value};

/// What [`observe`] reports: an object of the core, shared with the code that uses it.
#[derive(Clone)]
pub enum Target {
    /// A breaker's series (`holdoff.breaker.*`).
    Breaker(Arc<Breaker>),
    /// A policy's retry series (`holdoff.retry.*`), its breaker's and its quota's, all with the
    /// same `upstream`.
    Policy(Arc<Policy>),
    /// A retry quota's series (`holdoff.quota.*`).
    Quota(Arc<RetryQuota>),
    /// A group's own series (`holdoff.group.*`, no `upstream`) and each kept breaker's, with
    /// `upstream` = its key. Breakers the group makes later are reported from their creation.
    Group(Arc<BreakerGroup>),
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Target::Breaker(_) => "Target::Breaker",
            Target::Policy(_) => "Target::Policy",
            Target::Quota(_) => "Target::Quota",
            Target::Group(_) => "Target::Group",
        })
    }
}

macro_rules! target_from {
    ($variant:ident, $ty:ty) => {
        impl From<Arc<$ty>> for Target {
            fn from(v: Arc<$ty>) -> Target {
                Target::$variant(v)
            }
        }
        impl From<&Arc<$ty>> for Target {
            fn from(v: &Arc<$ty>) -> Target {
                Target::$variant(Arc::clone(v))
            }
        }
    };
}

target_from!(Breaker, Breaker);
target_from!(Policy, Policy);
target_from!(Quota, RetryQuota);
target_from!(Group, BreakerGroup);

impl Target {
    /// Reads the target once: the first read starts the core's counting.
    fn start_counting(&self) {
        let mut scratch = Vec::new();
        match self {
            Target::Breaker(b) => b.metrics(&mut scratch),
            Target::Policy(p) => {
                p.metrics(&mut scratch);
                p.breaker().metrics(&mut scratch);
                if let Some(q) = p.quota() {
                    q.metrics(&mut scratch);
                }
            }
            Target::Quota(q) => q.metrics(&mut scratch),
            Target::Group(g) => {
                g.metrics();
            }
        }
    }
}

/// One observed point of a collection: a value and its attributes.
struct Point {
    value: f64,
    attributes: Vec<KeyValue>,
}

struct Entry {
    id: u64,
    target: Target,
    upstream: Option<Value>,
}

const ALL_CONSUMED: u32 = (1 << METRICS.len()) - 1;

/// The targets of one meter's instruments and the readings of the current collection.
struct State {
    entries: Vec<Entry>,
    next_id: u64,
    /// Per metric (table order), the points of the last reading.
    points: Vec<Vec<Point>>,
    /// Bit i: instrument i has reported the last reading. An instrument that finds its own bit
    /// set is in a new collection, so it reads again: every instrument of one collection
    /// reports from one reading of each target (the state gauge agrees with the counters).
    consumed: u32,
    scratch: Vec<Sample>,
}

struct Shared {
    state: Mutex<State>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while reading leaves at worst a stale reading: keep exporting.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Instrument `index`'s callback: reports its points of the current reading.
    fn report(&self, index: usize, mut observe: impl FnMut(f64, &[KeyValue])) {
        let mut s = self.lock();
        let bit = 1u32 << index;
        if s.consumed & bit != 0 {
            s.read();
        }
        s.consumed |= bit;
        for p in &s.points[index] {
            observe(p.value, &p.attributes);
        }
    }

    fn remove(&self, id: u64) {
        let mut s = self.lock();
        s.entries.retain(|e| e.id != id);
        // Whatever is collected next no longer shows the target.
        s.consumed = ALL_CONSUMED;
        s.points.iter_mut().for_each(Vec::clear);
    }
}

impl State {
    fn read(&mut self) {
        self.points.iter_mut().for_each(Vec::clear);
        self.consumed = 0;
        let State {
            entries,
            points,
            scratch,
            ..
        } = self;
        for e in entries.iter() {
            let upstream = e.upstream.as_ref();
            scratch.clear();
            match &e.target {
                Target::Breaker(b) => b.metrics(scratch),
                Target::Policy(p) => {
                    p.metrics(scratch);
                    p.breaker().metrics(scratch);
                    if let Some(q) = p.quota() {
                        q.metrics(scratch);
                    }
                }
                Target::Quota(q) => q.metrics(scratch),
                Target::Group(g) => {
                    let m = g.metrics();
                    push(points, &m.group, None);
                    for (key, samples) in m.breakers {
                        push(points, &samples, Some(&Value::from(key)));
                    }
                }
            }
            push(points, scratch, upstream);
        }
    }
}

fn push(points: &mut [Vec<Point>], samples: &[Sample], upstream: Option<&Value>) {
    for s in samples {
        let mut attributes = Vec::with_capacity(2);
        if let Some((k, v)) = s.attribute_pair() {
            attributes.push(KeyValue::new(k, v));
        }
        if let Some(u) = upstream {
            attributes.push(KeyValue::new("upstream", u.clone()));
        }
        points[s.metric as usize].push(Point {
            value: s.value,
            attributes,
        });
    }
}

/// The holdoff instruments of one meter: one observable instrument per row of
/// [`holdoff::metrics::METRICS`], created once by [`Instruments::new`], reporting every target
/// observed through [`Instruments::observe`].
///
/// Cheap to clone (the clones share the instruments). The SDK keeps the instruments' callbacks
/// for the meter provider's life; once every [`Observation`] is gone they report nothing and
/// hold no target.
#[derive(Clone)]
pub struct Instruments {
    shared: Arc<Shared>,
}

impl fmt::Debug for Instruments {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Instruments")
            .field("targets", &self.shared.lock().entries.len())
            .finish()
    }
}

impl Instruments {
    /// Creates the 17 instruments on `meter` (names, units and descriptions from the table):
    /// observable counters for the counters (`f64` for the duration in seconds, `u64`
    /// otherwise) and `u64` observable gauges for the gauges.
    pub fn new(meter: &Meter) -> Instruments {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                entries: Vec::new(),
                next_id: 0,
                points: (0..METRICS.len()).map(|_| Vec::new()).collect(),
                consumed: ALL_CONSUMED,
                scratch: Vec::with_capacity(32),
            }),
        });
        for m in Metric::ALL {
            let d = m.def();
            let i = m as usize;
            let sh = Arc::clone(&shared);
            // Counts and gauges are whole numbers; only the wait duration (seconds) is not.
            macro_rules! instrument {
                ($make:ident, $ty:ty) => {{
                    meter
                        .$make(d.name)
                        .with_unit(d.unit)
                        .with_description(d.description)
                        .with_callback(move |o: &dyn AsyncInstrument<$ty>| {
                            sh.report(i, |v, a| o.observe(v as $ty, a))
                        })
                        .build();
                }};
            }
            match (d.kind, d.unit) {
                (Kind::Counter, "s") => instrument!(f64_observable_counter, f64),
                (Kind::Counter, _) => instrument!(u64_observable_counter, u64),
                (Kind::Gauge, _) => instrument!(u64_observable_gauge, u64),
            }
        }
        Instruments { shared }
    }

    /// Reports `target` at every collection until the returned [`Observation`] is dropped or
    /// stopped. Reads the target once now, which starts the core's counting (calls made before
    /// are not counted).
    ///
    /// `upstream` (a name such as `"payments"`) becomes the `upstream` attribute of every
    /// series of a breaker, policy or quota. Observe each object once per meter: the same
    /// series reported twice would collide.
    ///
    /// # Errors
    /// [`InputError`] with `field` `"upstream"`: an empty name, or a name given with a group
    /// (its breakers carry their keys as `upstream`).
    pub fn observe(
        &self,
        target: impl Into<Target>,
        upstream: Option<&str>,
    ) -> Result<Observation, InputError> {
        let target = target.into();
        let invalid = |rule: &str| {
            Err(InputError {
                field: "upstream".into(),
                rule: rule.into(),
            })
        };
        match (upstream, &target) {
            (Some(""), _) => return invalid("must not be empty"),
            (Some(_), Target::Group(_)) => {
                return invalid("a group's breakers carry their keys as upstream: pass None")
            }
            _ => {}
        }
        target.start_counting();
        let mut s = self.shared.lock();
        let id = s.next_id;
        s.next_id += 1;
        s.entries.push(Entry {
            id,
            target,
            upstream: upstream.map(|u| Value::from(Arc::<str>::from(u))),
        });
        s.consumed = ALL_CONSUMED;
        Ok(Observation {
            shared: Arc::clone(&self.shared),
            id,
        })
    }
}

/// Creates the holdoff instruments on `meter` and observes `target` through them: the
/// one-target form of [`Instruments::new`] + [`Instruments::observe`] (same `upstream` rules
/// and errors).
///
/// Each call creates the instruments again; the SDK merges identical instruments into one
/// stream, but keeps every call's callbacks for the provider's life. To observe many objects,
/// or to attach and detach repeatedly, create one [`Instruments`] per meter.
pub fn observe(
    meter: &Meter,
    target: impl Into<Target>,
    upstream: Option<&str>,
) -> Result<Observation, InputError> {
    Instruments::new(meter).observe(target, upstream)
}

/// One target being observed: reported at every collection until this is dropped or
/// [`Observation::stop`]ped.
#[must_use = "the target is observed only while the Observation is kept"]
pub struct Observation {
    shared: Arc<Shared>,
    id: u64,
}

impl fmt::Debug for Observation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Observation").field("id", &self.id).finish()
    }
}

impl Observation {
    /// Stops observing: the next collection no longer reports the target, and the instruments
    /// no longer hold it. The same as dropping the observation.
    pub fn stop(self) {}
}

impl Drop for Observation {
    fn drop(&mut self) {
        self.shared.remove(self.id);
    }
}
