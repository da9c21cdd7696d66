//! Trip policies: when a closed breaker opens.
//!
//! Three policies, one per breaker:
//! * [`TripPolicy::ConsecutiveFailures`] (the default): `threshold` failures in a row, with no
//!   success or answer between them (incident 1: 5). Needs no clock, so the closed path stays
//!   lock-free and clock-free.
//! * [`TripPolicy::FailuresInWindow`]: `threshold` failures inside a rolling window, whatever
//!   succeeded in between (incident 2: 5 in 10 s). A failure at `f` counts at time `t` iff
//!   `t - window < f <= t`. A window is rolling, never reset on a timer. Note that failures
//!   arriving slower than the window never trip it.
//! * [`TripPolicy::FailureRate`]: failures / calls >= `threshold` over a rolling window of
//!   `buckets` equal buckets, once at least `min_calls` calls were seen in it (Resilience4j's
//!   time-based sliding window). A call at `t` falls in bucket `floor(t / (window / buckets))`;
//!   the window is the current bucket and the `buckets - 1` before it.

use std::collections::VecDeque;
use std::time::Duration;

use crate::clock::{duration_nanos, Instant};
use crate::error::ConfigError;

/// Upper bound on `threshold` for count policies, so that a breaker's memory is bounded.
pub const MAX_THRESHOLD: u32 = 1_000_000;

/// When a closed breaker trips open.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TripPolicy {
    /// Trip after `threshold` consecutive failures (>= 1).
    ConsecutiveFailures {
        /// Failures in a row that trip the breaker.
        threshold: u32,
    },
    /// Trip after `threshold` failures inside a rolling `window`.
    FailuresInWindow {
        /// Failures inside the window that trip the breaker (>= 1).
        threshold: u32,
        /// Length of the rolling window (> 0).
        window: Duration,
    },
    /// Trip when the failure rate over a rolling window reaches `threshold`.
    FailureRate {
        /// Failure rate in `(0, 1]` at which the breaker trips.
        threshold: f64,
        /// Calls needed in the window before the rate is judged (>= 1).
        min_calls: u32,
        /// Length of the rolling window (> 0).
        window: Duration,
        /// Number of buckets the window is divided into (1..=1000, and window >= buckets ns).
        buckets: u32,
    },
}

impl Default for TripPolicy {
    fn default() -> Self {
        TripPolicy::ConsecutiveFailures { threshold: 5 }
    }
}

impl TripPolicy {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        let threshold = |t: u32| {
            if t == 0 || t > MAX_THRESHOLD {
                Err(ConfigError::new(
                    "breaker.trip.threshold",
                    "must be between 1 and 1000000",
                ))
            } else {
                Ok(())
            }
        };
        match *self {
            TripPolicy::ConsecutiveFailures { threshold: t } => threshold(t),
            TripPolicy::FailuresInWindow { threshold: t, window } => {
                threshold(t)?;
                if window.is_zero() {
                    return Err(ConfigError::new("breaker.trip.window", "must be greater than 0"));
                }
                Ok(())
            }
            TripPolicy::FailureRate {
                threshold: rate,
                min_calls,
                window,
                buckets,
            } => {
                if !rate.is_finite() || rate <= 0.0 || rate > 1.0 {
                    return Err(ConfigError::new(
                        "breaker.trip.threshold",
                        "must be a rate in (0, 1]",
                    ));
                }
                if min_calls == 0 || min_calls > MAX_THRESHOLD {
                    return Err(ConfigError::new(
                        "breaker.trip.min_calls",
                        "must be between 1 and 1000000",
                    ));
                }
                if window.is_zero() {
                    return Err(ConfigError::new("breaker.trip.window", "must be greater than 0"));
                }
                if buckets == 0 || buckets > 1000 || duration_nanos(window) < u64::from(buckets) {
                    return Err(ConfigError::new(
                        "breaker.trip.buckets",
                        "must be between 1 and 1000 and no more than the window in nanoseconds",
                    ));
                }
                Ok(())
            }
        }
    }

    /// Whether this policy needs the time of every outcome (and so a clock reading and the lock).
    pub(crate) fn is_timed(&self) -> bool {
        !matches!(self, TripPolicy::ConsecutiveFailures { .. })
    }
}

/// The counting state of the timed policies (kept under the breaker's lock).
#[derive(Debug)]
pub(crate) enum TripWindow {
    None,
    Failures {
        threshold: u32,
        window: u64,
        times: VecDeque<Instant>,
    },
    Rate {
        threshold: f64,
        min_calls: u64,
        width: u64,
        buckets: Vec<Bucket>,
    },
}

#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Bucket {
    index: u64,
    calls: u64,
    failures: u64,
}

impl TripWindow {
    pub(crate) fn new(policy: &TripPolicy) -> Self {
        match *policy {
            TripPolicy::ConsecutiveFailures { .. } => TripWindow::None,
            TripPolicy::FailuresInWindow { threshold, window } => TripWindow::Failures {
                threshold,
                window: duration_nanos(window),
                times: VecDeque::with_capacity(threshold as usize),
            },
            TripPolicy::FailureRate {
                threshold,
                min_calls,
                window,
                buckets,
            } => TripWindow::Rate {
                threshold,
                min_calls: u64::from(min_calls),
                width: duration_nanos(window) / u64::from(buckets),
                buckets: vec![
                    Bucket {
                        index: u64::MAX,
                        ..Bucket::default()
                    };
                    buckets as usize
                ],
            },
        }
    }

    pub(crate) fn clear(&mut self) {
        match self {
            TripWindow::None => {}
            TripWindow::Failures { times, .. } => times.clear(),
            TripWindow::Rate { buckets, .. } => {
                for b in buckets.iter_mut() {
                    *b = Bucket {
                        index: u64::MAX,
                        ..Bucket::default()
                    };
                }
            }
        }
    }

    /// Records one outcome at `now`; returns true when the policy says trip.
    pub(crate) fn record(&mut self, now: Instant, failure: bool) -> bool {
        match self {
            TripWindow::None => false,
            TripWindow::Failures {
                threshold,
                window,
                times,
            } => {
                if !failure {
                    return false;
                }
                let t = now.as_nanos();
                // A failure at f counts iff t - window < f <= t.
                while let Some(f) = times.front() {
                    if t.saturating_sub(f.as_nanos()) >= *window {
                        times.pop_front();
                    } else {
                        break;
                    }
                }
                if times.len() == *threshold as usize {
                    times.pop_front();
                }
                times.push_back(now);
                times.len() >= *threshold as usize
            }
            TripWindow::Rate {
                threshold,
                min_calls,
                width,
                buckets,
            } => {
                let index = now.as_nanos() / *width;
                let n = buckets.len() as u64;
                let slot = &mut buckets[(index % n) as usize];
                if slot.index != index {
                    *slot = Bucket {
                        index,
                        calls: 0,
                        failures: 0,
                    };
                }
                slot.calls += 1;
                slot.failures += u64::from(failure);
                if !failure {
                    return false;
                }
                let (mut calls, mut failures) = (0u64, 0u64);
                for b in buckets.iter() {
                    if b.index != u64::MAX && b.index <= index && index - b.index < n {
                        calls += b.calls;
                        failures += b.failures;
                    }
                }
                calls >= *min_calls && failures as f64 / calls as f64 >= *threshold
            }
        }
    }

    /// Failures currently counted by the window (for snapshots).
    pub(crate) fn failures(&self, now: Option<Instant>) -> u64 {
        match self {
            TripWindow::None => 0,
            TripWindow::Failures { window, times, .. } => match now {
                Some(t) => times
                    .iter()
                    .filter(|f| t.as_nanos().saturating_sub(f.as_nanos()) < *window)
                    .count() as u64,
                None => times.len() as u64,
            },
            TripWindow::Rate { buckets, .. } => {
                let Some(t) = now else { return 0 };
                let width = match self {
                    TripWindow::Rate { width, .. } => *width,
                    _ => unreachable!(),
                };
                let index = t.as_nanos() / width;
                let n = buckets.len() as u64;
                buckets
                    .iter()
                    .filter(|b| b.index != u64::MAX && b.index <= index && index - b.index < n)
                    .map(|b| b.failures)
                    .sum()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Instant {
        Instant::from_millis(v)
    }

    #[test]
    fn window_membership_is_half_open() {
        let p = TripPolicy::FailuresInWindow {
            threshold: 2,
            window: Duration::from_millis(10),
        };
        let mut w = TripWindow::new(&p);
        assert!(!w.record(ms(0), true));
        assert!(
            !w.record(ms(10), true),
            "the failure at 0 left the window at exactly 10"
        );
        assert!(w.record(ms(19), true));
    }

    #[test]
    fn rate_needs_min_calls() {
        let p = TripPolicy::FailureRate {
            threshold: 0.5,
            min_calls: 4,
            window: Duration::from_secs(10),
            buckets: 10,
        };
        let mut w = TripWindow::new(&p);
        assert!(!w.record(ms(0), true));
        assert!(!w.record(ms(1), true));
        assert!(!w.record(ms(2), false));
        assert!(!w.record(ms(3), false));
        assert!(w.record(ms(4), true));
    }
}
