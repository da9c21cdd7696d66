//! A breaker's configuration and its rules. Immutable once a breaker is built: breakers built
//! from equal configurations share one copy (`intern.rs`).

use std::time::Duration;

use crate::backoff::Backoff;
use crate::error::ConfigError;
use crate::trip::TripPolicy;

/// Upper bound on [`BreakerConfig::recoveries`] and [`BreakerConfig::max_probes_in_flight`].
pub const MAX_PROBES: u32 = 1000;

/// Configuration of one breaker.
#[derive(Debug, Clone, PartialEq)]
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
