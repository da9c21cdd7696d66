//! Retry quota: a token bucket shared by every caller of one upstream.
//!
//! A retry costs tokens, a retry after a timeout costs more, and a success refunds what its call
//! spent (or adds a small refill when it needed no retry). When the bucket cannot pay for a
//! retry, the caller gives up with its own reason (`quota_empty`) instead of joining a retry
//! storm. Defaults are the AWS SDKs' standard retry mode: 500 tokens, 5 a retry, 10 a retry
//! after a timeout, 1 back per success without retries.
//!
//! A retry's tokens travel in a [`QuotaLease`] issued by the quota: it carries the quota's
//! identity and is consumed when given back, so a lease is given back at most once and only to
//! the quota that issued it ([`PermitError::Foreign`] otherwise). Bindings whose leases are
//! shared objects hold them in a `LeaseSlot` (`crate::interop`), which reports a second give-back as
//! [`PermitError::AlreadyRecorded`].
//!
//! Lock-free (one compare-and-swap per change) and clock-free.

// The quota id counter is a static, so it stays std's under loom (loom atomics are not const).
use std::sync::atomic::{AtomicU32, Ordering};

use crate::error::{ConfigError, PermitError};
use crate::sync::AtomicU64;

/// Configuration of a [`RetryQuota`]. All figures are whole tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

/// Tokens taken for one retry, issued by [`RetryQuota::acquire`]; give it back with
/// [`RetryQuota::on_success`]. Not `Clone`: giving it back consumes it.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a lease holds tokens until it is given back with on_success"]
pub struct QuotaLease {
    quota: u32,
    cost: u64,
}

impl QuotaLease {
    /// Tokens taken.
    pub fn cost(&self) -> u64 {
        self.cost
    }

    /// The raw fields, for carrying the lease across FFI.
    pub(crate) fn into_raw(self) -> RawLease {
        RawLease {
            quota: self.quota,
            cost: self.cost,
        }
    }

    /// Rebuilds a lease from its raw fields; a lease of another quota is refused when given
    /// back.
    pub(crate) fn from_raw(raw: RawLease) -> QuotaLease {
        QuotaLease {
            quota: raw.quota,
            cost: raw.cost,
        }
    }
}

use lease::RawLease;

/// Leases as raw values and shared slots, for bindings (re-exported by [`crate::interop`]).
pub(crate) mod lease {
    use std::sync::atomic::Ordering;

    use super::{QuotaLease, RetryQuota};
    use crate::error::PermitError;
    use crate::sync::AtomicBool;

    /// The raw fields of a [`QuotaLease`], for bindings that carry leases across FFI as values.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    #[repr(C)]
    pub struct RawLease {
        /// The issuing quota's id.
        pub quota: u32,
        /// Tokens taken.
        pub cost: u64,
    }

    /// A lease held as a shared object and given back at most once: for bindings whose leases are
    /// objects user code may give back twice. Lock-free.
    #[derive(Debug)]
    pub struct LeaseSlot {
        raw: RawLease,
        taken: AtomicBool,
    }

    impl LeaseSlot {
        /// Wraps a lease.
        pub fn new(lease: QuotaLease) -> LeaseSlot {
            LeaseSlot {
                raw: lease.into_raw(),
                taken: AtomicBool::new(false),
            }
        }

        /// Tokens the lease holds.
        pub fn cost(&self) -> u64 {
            self.raw.cost
        }

        /// Whether the lease was given back.
        pub fn is_taken(&self) -> bool {
            self.taken.load(Ordering::Acquire)
        }

        /// Takes the lease to give it back to `quota`: [`PermitError::Foreign`] if another quota
        /// issued it (the slot stays usable), [`PermitError::AlreadyRecorded`] the second time.
        pub fn take(&self, quota: &RetryQuota) -> Result<QuotaLease, PermitError> {
            take_raw(self.raw, quota, || self.taken.swap(true, Ordering::AcqRel))
        }
    }

    /// The give-back rule for a lease carried as raw fields with a taken flag of the caller's (the C
    /// ABI's lease struct): foreign first (the flag is left alone), then the flag, set once.
    /// `mark_taken` sets the flag and returns whether it was already set.
    pub fn take_raw(
        raw: RawLease,
        quota: &RetryQuota,
        mark_taken: impl FnOnce() -> bool,
    ) -> Result<QuotaLease, PermitError> {
        if raw.quota != quota.id {
            return Err(PermitError::Foreign);
        }
        if mark_taken() {
            return Err(PermitError::AlreadyRecorded);
        }
        Ok(QuotaLease::from_raw(raw))
    }
}

static NEXT_ID: AtomicU32 = AtomicU32::new(1);

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
    id: u32,
    config: QuotaConfig,
    tokens: AtomicU64,
    // Allocated on the first read of this quota's metrics (metrics/quota.rs).
    pub(crate) counts: crate::metrics::quota::QuotaCounts,
}

impl RetryQuota {
    /// A full bucket.
    pub fn new(config: QuotaConfig) -> Result<RetryQuota, ConfigError> {
        config.validate()?;
        Ok(RetryQuota {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed).max(1),
            tokens: AtomicU64::new(config.capacity),
            config,
            counts: Default::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &QuotaConfig {
        &self.config
    }

    /// This quota's process-unique id (carried by its leases).
    pub fn id(&self) -> u32 {
        self.id
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
            .map(|_| QuotaLease { quota: self.id, cost })
            .map_err(|available| {
                self.count_refused();
                QuotaEmpty { available, cost }
            })
    }

    /// A call succeeded: refunds its lease, or adds `success_refill` if it needed no retry.
    /// Never fills past capacity. Errors: [`PermitError::Foreign`] for a lease of another quota
    /// (nothing changes).
    pub fn on_success(&self, lease: Option<QuotaLease>) -> Result<(), PermitError> {
        let add = match lease {
            Some(l) if l.quota != self.id => return Err(PermitError::Foreign),
            Some(l) => l.cost,
            None => self.config.success_refill,
        };
        let cap = self.config.capacity;
        // A full bucket stays full: skip the write, which every success to a healthy upstream
        // would otherwise make on one shared cache line.
        if add == 0 || self.tokens.load(Ordering::Acquire) >= cap {
            return Ok(());
        }
        let _ = self
            .tokens
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
                Some(t.saturating_add(add).min(cap))
            });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interop::LeaseSlot;

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
        q.on_success(Some(a)).unwrap();
        assert_eq!(q.available(), 12);
        q.on_success(None).unwrap();
        assert_eq!(q.available(), 12);
    }

    #[test]
    fn a_lease_goes_back_once_and_only_to_its_quota() {
        let q = RetryQuota::new(QuotaConfig::default()).unwrap();
        let other = RetryQuota::new(QuotaConfig::default()).unwrap();
        let slot = LeaseSlot::new(q.acquire(false).unwrap());
        assert_eq!(slot.take(&other), Err(PermitError::Foreign));
        assert!(!slot.is_taken());
        q.on_success(Some(slot.take(&q).unwrap())).unwrap();
        assert_eq!(slot.take(&q), Err(PermitError::AlreadyRecorded));
        assert_eq!(q.available(), 500);
        let lease = q.acquire(true).unwrap();
        assert_eq!(other.on_success(Some(lease)), Err(PermitError::Foreign));
        assert_eq!((q.available(), other.available()), (490, 500));
    }
}
