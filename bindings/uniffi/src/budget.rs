//! The retry budget (rate-limit episodes, Retry-After cap, counted backoff) and the retry quota.

use std::sync::{Arc, Mutex};

use holdoff::interop::{Coded, DecisionKind, LeaseSlot};

use crate::{clock_of, count, lock, BudgetConfig, Duration, HoldoffError, ManualClock, Outcome, QuotaConfig};

/// Why a caller should stop retrying; `stableName()` is the core's name for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, uniffi::Enum)]
pub enum GiveUpReason {
    /// Nothing is left of the budget.
    BudgetSpent,
    /// The server's wait (after the cap) does not fit what is left of the episode; it is never
    /// shortened to fit.
    RetryAfterExceedsRemaining,
    /// The server asked for longer than the cap and the budget gives up then
    /// (`BudgetConfig.giveUpAboveCap`).
    RetryAfterAboveCap,
    /// The next backoff does not fit what is left of the counted budget.
    BackoffExceedsRemaining,
    /// The counted path used all its retries.
    AttemptsExhausted,
    /// The answer is final (a 4xx answer).
    NotRetryable,
    /// The shared retry quota cannot pay for another retry.
    QuotaEmpty,
    /// The breaker stays open beyond what is left of the budget.
    BreakerOpen,
    /// The call was cancelled.
    Cancelled,
    /// The call's total time ran out, or the next wait would not leave time for another
    /// attempt within it.
    TotalTimeout,
}

mirror!(
    GiveUpReason:
    BudgetSpent, RetryAfterExceedsRemaining, RetryAfterAboveCap, BackoffExceedsRemaining,
    AttemptsExhausted, NotRetryable, QuotaEmpty, BreakerOpen, Cancelled, TotalTimeout,
);

#[uniffi::export]
impl GiveUpReason {
    /// The conformance suite's stable name, the core's (`budget_spent`,
    /// `retry_after_above_cap`, ...).
    pub fn stable_name(&self) -> String {
        holdoff::GiveUpReason::from(*self).name().to_owned()
    }
}

/// Where a retry's delay came from; `stableName()` is the core's name for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, uniffi::Enum)]
pub enum WaitSource {
    /// The server's Retry-After (possibly capped).
    RetryAfter,
    /// The counted path's backoff.
    Backoff,
    /// The breaker's time until its next probe (longer than the budget's wait).
    Breaker,
}

mirror!(WaitSource: RetryAfter, Backoff, Breaker);

#[uniffi::export]
impl WaitSource {
    /// The conformance suite's stable name, the core's: `retry_after`, `backoff`, `breaker`.
    pub fn stable_name(&self) -> String {
        holdoff::WaitSource::from(*self).name().to_owned()
    }
}

/// A decision for one answer.
#[derive(Debug, Clone, PartialEq, uniffi::Enum)]
pub enum Decision {
    /// The call succeeded: nothing to retry.
    Done,
    /// Retry after `delay` (never negative; never shorter than the server asked, up to the
    /// cap). `server_delay` is the server's own Retry-After; `capped` whether the cap applied.
    Retry {
        delay: Duration,
        source: WaitSource,
        server_delay: Option<Duration>,
        capped: bool,
    },
    /// Stop retrying. `server_delay` is the server's delay when it decided (a Retry-After that
    /// does not fit, or exceeds the cap under `giveUpAboveCap`).
    GiveUp {
        reason: GiveUpReason,
        server_delay: Option<Duration>,
    },
}

impl From<holdoff::Decision> for Decision {
    fn from(d: holdoff::Decision) -> Self {
        match d {
            holdoff::Decision::Done => Decision::Done,
            holdoff::Decision::Retry {
                delay,
                source,
                server_delay,
                capped,
            } => Decision::Retry {
                delay: Duration::from_std(delay),
                source: source.into(),
                server_delay: Duration::opt(server_delay),
                capped,
            },
            holdoff::Decision::GiveUp { reason, server_delay } => Decision::GiveUp {
                reason: reason.into(),
                server_delay: Duration::opt(server_delay),
            },
        }
    }
}

#[uniffi::export]
impl Decision {
    /// The conformance suite's stable name of the decision's kind, the core's: `done`,
    /// `retry`, `give_up`.
    pub fn stable_name(&self) -> String {
        match self {
            Decision::Done => DecisionKind::Done,
            Decision::Retry { .. } => DecisionKind::Retry,
            Decision::GiveUp { .. } => DecisionKind::GiveUp,
        }
        .name()
        .to_owned()
    }
}

/// The per-call part of retrying: one per logical call (all its attempts).
#[derive(Debug, Default, uniffi::Object)]
pub struct RetryState {
    pub(crate) inner: Mutex<holdoff::RetryState>,
}

#[uniffi::export]
impl RetryState {
    /// A fresh call.
    #[uniffi::constructor]
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Retries taken on the counted path.
    pub fn retries(&self) -> i64 {
        i64::from(lock(&self.inner).retries())
    }
}

/// The retry budget of one upstream; share it between the upstream's callers.
#[derive(Debug, uniffi::Object)]
pub struct RetryBudget {
    pub(crate) inner: Arc<holdoff::RetryBudget>,
}

#[uniffi::export]
impl RetryBudget {
    /// A budget with no episode under way, on `clock` (the system clock if absent).
    #[uniffi::constructor(default(clock = None))]
    pub fn new(config: BudgetConfig, clock: Option<Arc<ManualClock>>) -> Result<Arc<Self>, HoldoffError> {
        Ok(Arc::new(RetryBudget {
            inner: Arc::new(holdoff::RetryBudget::new(config.to_core()?, clock_of(&clock))?),
        }))
    }

    /// Decides what to do after an answer of the call `call`. Reads the clock at most once.
    pub fn decide(&self, call: Arc<RetryState>, outcome: Outcome) -> Result<Decision, HoldoffError> {
        let o = outcome.to_core()?;
        Ok(self.inner.decide(&mut lock(&call.inner), o).into())
    }

    /// When the current rate-limit episode started (time since the clock's origin), if one is
    /// under way.
    pub fn episode_start(&self) -> Option<Duration> {
        self.inner
            .episode_start()
            .map(|t| Duration::from_std(std::time::Duration::from_nanos(t.as_nanos())))
    }
}

/// Tokens taken by one retry, issued by `RetryQuota.acquire`: give it back with
/// `RetryQuota.onSuccess` when the retry succeeds. The core holds the lease (its cost and the
/// quota that issued it), so a lease cannot be forged; it is given back at most once
/// (`PermitAlreadyRecorded` the second time) and only to its own quota (`ForeignPermit`
/// otherwise, and the lease can still go back to its own). A refused give-back leaves every
/// bucket unchanged.
#[derive(Debug, uniffi::Object)]
pub struct QuotaLease {
    slot: LeaseSlot,
}

#[uniffi::export]
impl QuotaLease {
    /// Tokens the lease holds.
    pub fn cost(&self) -> i64 {
        count(self.slot.cost())
    }

    /// Whether the lease was given back.
    pub fn is_given_back(&self) -> bool {
        self.slot.is_taken()
    }
}

/// The answer to `RetryQuota.acquire`.
#[derive(Debug, uniffi::Enum)]
pub enum QuotaAcquisition {
    /// The retry may go; `available` tokens are left.
    Acquired { lease: Arc<QuotaLease>, available: i64 },
    /// Not enough tokens for a retry costing `cost`.
    Empty { cost: i64, available: i64 },
}

/// A token bucket shared by every caller of one upstream: retries cost tokens, timeouts cost
/// more, successes refund, so a fleet of callers cannot turn an outage into a retry storm.
#[derive(Debug, uniffi::Object)]
pub struct RetryQuota {
    pub(crate) inner: Arc<holdoff::RetryQuota>,
}

#[uniffi::export]
impl RetryQuota {
    #[uniffi::constructor]
    pub fn new(config: QuotaConfig) -> Result<Arc<Self>, HoldoffError> {
        Ok(Arc::new(RetryQuota {
            inner: Arc::new(holdoff::RetryQuota::new(config.to_core()?)?),
        }))
    }

    /// Tokens available now.
    pub fn available(&self) -> i64 {
        count(self.inner.available())
    }

    /// Takes the cost of one retry (the timeout cost after a timeout).
    pub fn acquire(&self, after_timeout: bool) -> QuotaAcquisition {
        match self.inner.acquire(after_timeout) {
            Ok(lease) => QuotaAcquisition::Acquired {
                lease: Arc::new(QuotaLease {
                    slot: LeaseSlot::new(lease),
                }),
                available: count(self.inner.available()),
            },
            Err(e) => QuotaAcquisition::Empty {
                cost: count(e.cost),
                available: count(e.available),
            },
        }
    }

    /// A success: refunds the lease's cost, or the success refill for a call that needed no
    /// retry (`lease` absent). Never above capacity. A lease given back a second time is
    /// `PermitAlreadyRecorded`; one issued by another quota is `ForeignPermit`; either way
    /// nothing changes.
    #[uniffi::method(default(lease = None))]
    pub fn on_success(&self, lease: Option<Arc<QuotaLease>>) -> Result<(), HoldoffError> {
        let lease = match lease {
            Some(l) => Some(l.slot.take(&self.inner)?),
            None => None,
        };
        Ok(self.inner.on_success(lease)?)
    }
}
