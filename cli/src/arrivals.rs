//! When calls arrive: lists, fixed rates, seeded Poisson processes, or the records of a trace,
//! merged into one time-ordered stream (ties go to the source listed first). Generated lazily:
//! ten million arrivals cost no memory.

use holdoff::Prng;

use crate::error::CliError;
use crate::scenario::{Arrival, Scenario};
use crate::trace::{Record, TraceReader};

enum Source {
    List {
        times: Vec<u64>,
        i: usize,
    },
    Rate {
        from: u64,
        to: u64,
        num: u128,
        den: u128,
        i: u128,
        next: Option<u64>,
    },
    Poisson {
        next: f64,
        to: u64,
        mean_gap: f64,
        rng: Prng,
    },
    Trace {
        rdr: Box<TraceReader>,
        ahead: Option<Record>,
    },
}

impl Source {
    fn peek(&self) -> Option<u64> {
        match self {
            Source::List { times, i } => times.get(*i).copied(),
            Source::Rate { next, .. } => *next,
            Source::Poisson { next, to, .. } => {
                let t = *next as u64;
                (t <= *to).then_some(t)
            }
            Source::Trace { ahead, .. } => ahead.as_ref().map(|r| r.t),
        }
    }

    fn pop(&mut self) -> Result<Option<Record>, CliError> {
        match self {
            Source::List { i, .. } => *i += 1,
            Source::Rate {
                from,
                to,
                num,
                den,
                i,
                next,
            } => {
                *i += 1;
                let off = *i * *num / *den;
                *next = u64::try_from(off)
                    .ok()
                    .and_then(|o| from.checked_add(o))
                    .filter(|t| t <= to);
            }
            Source::Poisson {
                next, mean_gap, rng, ..
            } => {
                *next += exp_gap(rng, *mean_gap);
            }
            Source::Trace { rdr, ahead } => {
                let next = rdr.next_record()?;
                if next.is_none() {
                    rdr.finish();
                }
                return Ok(std::mem::replace(ahead, next));
            }
        }
        Ok(None)
    }
}

fn exp_gap(rng: &mut Prng, mean: f64) -> f64 {
    // Inverse transform of the exponential distribution; 1 - u is in (0, 1], so ln is finite.
    -(1.0 - rng.next_f64()).ln() * mean
}

/// All arrival sources of a scenario, merged.
pub struct Arrivals {
    sources: Vec<Source>,
}

impl Arrivals {
    /// Builds the sources; a trace source opens its own reader over the trace file.
    pub fn new(s: &Scenario, skip_malformed: bool) -> Result<Arrivals, CliError> {
        let mut sources = Vec::new();
        if s.from_trace {
            if let Some(t) = &s.trace {
                // The trace callers' reader reports malformed lines; the upstream does not read
                // the file in this mode.
                let mut rdr = Box::new(TraceReader::open(t, skip_malformed, true)?);
                let ahead = rdr.next_record()?;
                sources.push(Source::Trace { rdr, ahead });
            }
        }
        for a in &s.arrivals {
            sources.push(match a {
                Arrival::List(v) => Source::List {
                    times: v.clone(),
                    i: 0,
                },
                Arrival::Rate { from, to, num, den } => Source::Rate {
                    from: *from,
                    to: *to,
                    num: *num,
                    den: *den,
                    i: 0,
                    next: Some(*from),
                },
                Arrival::Poisson {
                    from,
                    to,
                    mean_gap,
                    seed,
                } => {
                    let mut rng = Prng::new(*seed);
                    let first = *from as f64 + exp_gap(&mut rng, *mean_gap);
                    Source::Poisson {
                        next: first,
                        to: *to,
                        mean_gap: *mean_gap,
                        rng,
                    }
                }
            });
        }
        Ok(Arrivals { sources })
    }

    /// The time of the next arrival.
    #[inline]
    pub fn peek(&self) -> Option<u64> {
        if self.sources.len() == 1 {
            return self.sources[0].peek();
        }
        self.sources.iter().filter_map(Source::peek).min()
    }

    /// Malformed trace lines skipped by a trace source.
    pub fn skipped(&self) -> u64 {
        self.sources
            .iter()
            .map(|s| match s {
                Source::Trace { rdr, .. } => rdr.skipped,
                _ => 0,
            })
            .sum()
    }

    /// Takes the next arrival: its time and, for a trace caller, its record.
    pub fn pop(&mut self) -> Result<Option<(u64, Option<Record>)>, CliError> {
        let mut best: Option<(usize, u64)> = None;
        for (i, s) in self.sources.iter().enumerate() {
            if let Some(t) = s.peek() {
                let better = match best {
                    None => true,
                    Some((_, b)) => t < b,
                };
                if better {
                    best = Some((i, t));
                }
            }
        }
        let Some((i, t)) = best else {
            return Ok(None);
        };
        let rec = self.sources[i].pop()?;
        Ok(Some((t, rec)))
    }
}
