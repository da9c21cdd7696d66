//! Retry quota: a token bucket shared by every caller of one upstream.
//!
//! A retry costs tokens, a retry after a timeout costs more, and a success refunds what its call
//! spent (or adds a small refill when it needed no retry). When the bucket cannot pay for a
//! retry, the caller gives up with its own reason (`quota_empty`) instead of joining a retry
//! storm. Defaults are the AWS SDKs' standard retry mode: 500 tokens, 5 a retry, 10 a retry
//! after a timeout, 1 back per success without retries.
//!
//! Lock-free (one compare-and-swap per change) and clock-free.

use std::sync::atomic::Ordering;

use crate::error::ConfigError;
use crate::sync::AtomicU64;

/// Configuration of a [`RetryQuota`]. All figures are whole tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct QuotaConfig {
    /// Tokens in a full bucket (1..=10^9). Default 500.
    pub capacity: u64,
    /// Cost of a retry (1..=capacity). Default 5.
    pub retry_cost: u64,
    /// Cost of a retry after a timeout (1..=capacity). Default 10.
    pub timeout_cost: u64,
    /// Tokens added by a success that needed no retry (0..=capacity). Default 1.
    pub success_refill: u64,
}

impl Default for QuotaConfig {
    fn default() -> Self {
        QuotaConfig {
            capacity: 500,
            retry_cost: 5,
            timeout_cost: 10,
            success_refill: 1,
        }
    }
}

impl QuotaConfig {
    /// Checks every field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.capacity == 0 || self.capacity > 1_000_000_000 {
            return Err(ConfigError::new(
                "quota.capacity",
                "must be between 1 and 1000000000",
            ));
        }
        for (name, v) in [
            ("quota.retry_cost", self.retry_cost),
            ("quota.timeout_cost", self.timeout_cost),
        ] {
            if v == 0 || v > self.capacity {
                return Err(ConfigError::new(name, "must be between 1 and capacity"));
            }
        }
        if self.success_refill > self.capacity {
            return Err(ConfigError::new(
                "quota.success_refill",
                "must be between 0 and capacity",
            ));
        }
        Ok(())
    }
}

/// Tokens taken for one retry; give it back with [`RetryQuota::on_success`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaLease {
    /// Tokens taken.
    pub cost: u64,
}

/// The bucket could not pay for the retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaEmpty {
    /// Tokens left.
    pub available: u64,
    /// Tokens the retry would have cost.
    pub cost: u64,
}

/// A retry quota shared by every caller of one upstream. `Send + Sync`.
#[derive(Debug)]
pub struct RetryQuota {
    config: QuotaConfig,
    tokens: AtomicU64,
}

impl RetryQuota {
    /// A full bucket.
    pub fn new(config: QuotaConfig) -> Result<RetryQuota, ConfigError> {
        config.validate()?;
        Ok(RetryQuota {
            tokens: AtomicU64::new(config.capacity),
            config,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &QuotaConfig {
        &self.config
    }

    /// Tokens left.
    pub fn available(&self) -> u64 {
        self.tokens.load(Ordering::Acquire)
    }

    /// Takes the cost of one retry (`after_timeout` selects the timeout cost).
    pub fn acquire(&self, after_timeout: bool) -> Result<QuotaLease, QuotaEmpty> {
        let cost = if after_timeout {
            self.config.timeout_cost
        } else {
            self.config.retry_cost
        };
        self.tokens
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| t.checked_sub(cost))
            .map(|_| QuotaLease { cost })
            .map_err(|available| QuotaEmpty { available, cost })
    }

    /// A call succeeded: refunds its lease, or adds `success_refill` if it needed no retry.
    /// Never fills past capacity.
    pub fn on_success(&self, lease: Option<QuotaLease>) {
        let add = lease.map_or(self.config.success_refill, |l| l.cost);
        let cap = self.config.capacity;
        // A full bucket stays full: skip the write, which every success to a healthy upstream
        // would otherwise make on one shared cache line.
        if add == 0 || self.tokens.load(Ordering::Acquire) >= cap {
            return;
        }
        let _ = self
            .tokens
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
                Some(t.saturating_add(add).min(cap))
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_bound_is_inclusive() {
        let cfg = |capacity| QuotaConfig {
            capacity,
            ..QuotaConfig::default()
        };
        assert!(cfg(1_000_000_000).validate().is_ok());
        assert_eq!(cfg(1_000_000_001).validate().unwrap_err().field, "quota.capacity");
    }

    #[test]
    fn spends_and_refunds_exactly() {
        let q = RetryQuota::new(QuotaConfig {
            capacity: 12,
            ..QuotaConfig::default()
        })
        .unwrap();
        let a = q.acquire(false).unwrap();
        assert_eq!(q.available(), 7);
        assert_eq!(
            q.acquire(true),
            Err(QuotaEmpty {
                available: 7,
                cost: 10
            })
        );
        q.on_success(Some(a));
        assert_eq!(q.available(), 12);
        q.on_success(None);
        assert_eq!(q.available(), 12);
    }
}
