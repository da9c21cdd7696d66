//! The simulated upstream: what it answers a request at virtual time `t`.
//!
//! Precedence for one request: a due one-shot answer (`upstream.events`, or a record of a
//! `once` trace), else the trace record in force (`hold`), else the phase covering `t`, else
//! `upstream.default`. Time only moves forward, so every lookup is a cursor step: O(1)
//! amortised, and a trace is read lazily, one record ahead.
//!
//! The upstream also reports when it **recovers**: its base behaviour (phase, held record or
//! default; one-shot answers do not count) switches from failing to answering. A phase with a
//! mix counts as answering when at least half its weight answers.

use std::time::SystemTime;

use holdoff::{Classifier, Outcome, Prng};

use crate::error::CliError;
use crate::scenario::{Answer, Latency, MatchMode, Phase, Scenario};
use crate::trace::{Record, TraceReader};

struct Segment {
    to: u64,
    phase: Option<usize>,
    healthy: bool,
    from: u64,
}

enum TraceState {
    None,
    Hold {
        rdr: TraceReader,
        ahead: Option<Record>,
        current: Option<Answer>,
    },
    Once {
        rdr: TraceReader,
        ahead: Option<Record>,
        pending: Option<Answer>,
    },
    /// The callers read the trace; each arrival feeds the record in force.
    Fed {
        current: Option<Answer>,
    },
}

/// The upstream model of one scenario.
pub struct Upstream {
    default: Answer,
    phases: Vec<Phase>,
    segs: Vec<Segment>,
    seg: usize,
    events: Vec<(u64, Answer)>,
    ev_next: usize,
    ev_pending: Option<Answer>,
    trace: TraceState,
    rng: Prng,
    classifier: Classifier,
    wall: SystemTime,
    healthy: bool,
    health_cache: HealthCache,
    recovered: Option<u64>,
    last_recovery: Option<u64>,
}

/// Health of the last answer classified, keyed by status and Retry-After: consecutive trace
/// records mostly repeat, and classifying is the costly part.
#[derive(Default)]
struct HealthCache(Option<(u16, Option<std::rc::Rc<str>>, bool)>);

impl HealthCache {
    fn get(&mut self, c: &Classifier, wall: SystemTime, a: &Answer) -> bool {
        if let Some((s, ra, h)) = &self.0 {
            if *s == a.status && *ra == a.retry_after {
                return *h;
            }
        }
        let h = is_healthy(c, wall, a);
        self.0 = Some((a.status, a.retry_after.clone(), h));
        h
    }
}

fn is_healthy(c: &Classifier, wall: SystemTime, a: &Answer) -> bool {
    let headers = a.retry_after.as_deref().map(|v| ("retry-after", v));
    match c.classify(a.status, headers, wall) {
        Ok(cl) => matches!(cl.outcome, Outcome::Success | Outcome::Answer),
        Err(_) => false,
    }
}

impl Upstream {
    /// Builds the model; opens the trace unless the callers read it (`from_trace`).
    pub fn new(
        s: &Scenario,
        classifier: Classifier,
        wall: SystemTime,
        skip_malformed: bool,
    ) -> Result<Upstream, CliError> {
        let default_healthy = is_healthy(&classifier, wall, &s.default);
        let mut segs = Vec::new();
        let mut at = 0u64;
        for (i, p) in s.phases.iter().enumerate() {
            if p.from > at {
                segs.push(Segment {
                    from: at,
                    to: p.from,
                    phase: None,
                    healthy: default_healthy,
                });
            }
            let answering: f64 = {
                let mut prev = 0.0;
                let mut share = 0.0;
                for (status, ra, cum) in &p.mix {
                    let a = Answer {
                        status: *status,
                        retry_after: ra.clone(),
                        latency: 0,
                    };
                    if is_healthy(&classifier, wall, &a) {
                        share += cum - prev;
                    }
                    prev = *cum;
                }
                share
            };
            segs.push(Segment {
                from: p.from,
                to: p.to,
                phase: Some(i),
                healthy: answering >= 0.5,
            });
            at = p.to;
        }
        if at < u64::MAX {
            segs.push(Segment {
                from: at,
                to: u64::MAX,
                phase: None,
                healthy: default_healthy,
            });
        }
        let trace = match &s.trace {
            None => TraceState::None,
            Some(_) if s.from_trace => TraceState::Fed { current: None },
            Some(t) => {
                let mut rdr = TraceReader::open(t, skip_malformed, true)?;
                let ahead = rdr.next_record()?;
                match t.mode {
                    MatchMode::Hold => TraceState::Hold {
                        rdr,
                        ahead,
                        current: None,
                    },
                    MatchMode::Once => TraceState::Once {
                        rdr,
                        ahead,
                        pending: None,
                    },
                }
            }
        };
        let healthy = match &trace {
            TraceState::None => segs.first().map(|s| s.healthy).unwrap_or(default_healthy),
            _ => default_healthy,
        };
        Ok(Upstream {
            default: s.default.clone(),
            phases: s.phases.clone(),
            segs,
            seg: 0,
            events: s.events.clone(),
            ev_next: 0,
            ev_pending: None,
            trace,
            rng: Prng::new(s.seed),
            classifier,
            wall,
            healthy,
            health_cache: HealthCache::default(),
            recovered: None,
            last_recovery: None,
        })
    }

    fn set_health(&mut self, at: u64, healthy: bool) {
        if healthy && !self.healthy {
            self.recovered = Some(at);
            self.last_recovery = Some(at);
        }
        self.healthy = healthy;
    }

    /// Moves the model to `t` (never backwards): due one-shot answers become pending, trace
    /// records are read up to `t`, phases are stepped.
    pub fn advance_to(&mut self, t: u64) -> Result<(), CliError> {
        while let Some((at, a)) = self.events.get(self.ev_next) {
            if *at > t {
                break;
            }
            self.ev_pending = Some(a.clone());
            self.ev_next += 1;
        }
        let mut health: Vec<(u64, bool)> = Vec::new();
        match &mut self.trace {
            TraceState::None => {
                while self.seg + 1 < self.segs.len() && self.segs[self.seg].to <= t {
                    self.seg += 1;
                    let s = &self.segs[self.seg];
                    health.push((s.from, s.healthy));
                }
            }
            TraceState::Hold { rdr, ahead, current } => {
                let mut cur = self.healthy;
                while ahead.as_ref().is_some_and(|r| r.t <= t) {
                    let next = rdr.next_record()?;
                    if let Some(r) = std::mem::replace(ahead, next) {
                        let h = self.health_cache.get(&self.classifier, self.wall, &r.answer);
                        if h != cur {
                            health.push((r.t, h));
                            cur = h;
                        }
                        *current = Some(r.answer);
                    }
                }
                if ahead.is_none() {
                    rdr.finish();
                }
            }
            TraceState::Once { rdr, ahead, pending } => {
                while ahead.as_ref().is_some_and(|r| r.t <= t) {
                    let next = rdr.next_record()?;
                    if let Some(r) = std::mem::replace(ahead, next) {
                        *pending = Some(r.answer);
                    }
                }
                if ahead.is_none() {
                    rdr.finish();
                }
            }
            TraceState::Fed { .. } => {}
        }
        for (at, h) in health {
            self.set_health(at, h);
        }
        Ok(())
    }

    /// Feeds the record a trace caller arrived with (`callers.from_trace`): it is in force from
    /// its time on, for retries.
    pub fn feed(&mut self, r: &Record) {
        if let TraceState::Fed { current } = &mut self.trace {
            *current = Some(r.answer.clone());
            let h = self.health_cache.get(&self.classifier, self.wall, &r.answer);
            self.set_health(r.t, h);
        }
    }

    /// The answer to a request at `t`. `own` is the record a trace caller arrived with (its
    /// first attempt is answered with it, unless a one-shot answer is due).
    pub fn answer(&mut self, t: u64, own: Option<Answer>) -> Result<Answer, CliError> {
        self.advance_to(t)?;
        if let Some(a) = self.ev_pending.take() {
            return Ok(a);
        }
        if let Some(a) = own {
            return Ok(a);
        }
        match &mut self.trace {
            TraceState::Once { pending, .. } => {
                return Ok(pending.take().unwrap_or_else(|| self.default.clone()))
            }
            TraceState::Hold { current, .. } | TraceState::Fed { current } => {
                return Ok(current.clone().unwrap_or_else(|| self.default.clone()));
            }
            TraceState::None => {}
        }
        let seg = &self.segs[self.seg];
        let Some(i) = seg.phase.filter(|_| seg.from <= t) else {
            return Ok(self.default.clone());
        };
        let p = &self.phases[i];
        let pick = if p.mix.len() == 1 {
            0
        } else {
            let u = self.rng.next_f64();
            p.mix.iter().position(|m| u < m.2).unwrap_or(p.mix.len() - 1)
        };
        let (status, ra, _) = &p.mix[pick];
        let latency = match p.latency {
            Latency::Fixed(l) => l,
            Latency::Uniform(lo, hi) => lo + ((hi - lo) as f64 * self.rng.next_f64()) as u64,
        };
        Ok(Answer {
            status: *status,
            retry_after: ra.clone(),
            latency,
        })
    }

    /// A recovery seen since the last call (the time the upstream started answering again).
    pub fn take_recovery(&mut self) -> Option<u64> {
        self.recovered.take()
    }

    /// The last recovery seen, if any.
    pub fn last_recovery(&self) -> Option<u64> {
        self.last_recovery
    }

    /// Whether the base behaviour currently answers.
    pub fn healthy(&self) -> bool {
        self.healthy
    }

    /// Malformed trace lines skipped so far.
    pub fn skipped(&self) -> u64 {
        match &self.trace {
            TraceState::Hold { rdr, .. } | TraceState::Once { rdr, .. } => rdr.skipped,
            _ => 0,
        }
    }
}
