//! One upstream's breaker, retry budget and retry quota composed (`docs/contract.md` §5).
//!
//! Every binding builds its `call` / `execute` helpers (sync, async, with cancellation) on the
//! two functions here and nothing else:
//! * [`Policy::before_attempt`]: admits the attempt ([`Before::Go`]), says how long to wait for
//!   the breaker ([`Before::Wait`]), or gives up now when the breaker stays open beyond what is
//!   left of the budget ([`Before::GiveUp`]). A first attempt never waits for an open breaker,
//!   even during a rate-limit episode: it fails fast with `breaker_open`.
//! * [`Policy::after_attempt`]: records the outcome on the breaker, asks the budget, takes the
//!   retry's cost from the quota, and returns done, retry after a delay, or give up. If the
//!   breaker will not admit the retry before the budget's delay ends, the delay is the breaker's
//!   (longer, never shorter); if that does not fit the budget, it gives up now.
//!
//! Each of these reads the clock at most once.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::breaker::{Breaker, Outcome, Permit};
use crate::budget::{Decision, GiveUpReason, RetryBudget, RetryState, WaitSource};
use crate::clock::LazyNow;
use crate::error::{ConfigError, PermitError};
use crate::http::{Classification, Classifier};
use crate::quota::{QuotaLease, RetryQuota};

/// The per-call state of a policy: one per logical call (all its attempts).
#[derive(Debug, Default)]
pub struct Call {
    retry: RetryState,
    lease: Option<QuotaLease>,
    attempts: u32,
}

impl Call {
    /// A fresh call.
    pub fn new() -> Self {
        Self::default()
    }

    /// Attempts admitted so far.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The budget's per-call state.
    pub fn retry_state(&self) -> &RetryState {
        &self.retry
    }

    /// An attempt a binding admitted itself on the breaker's fast-path word (docs/ffi.md), which
    /// the policy's own admission would have counted.
    pub(crate) fn count_admitted(&mut self) {
        self.attempts += 1;
    }
}

/// What to do before an attempt.
#[derive(Debug, PartialEq, Eq)]
pub enum Before {
    /// Make the attempt; record it with [`Policy::after_attempt`].
    Go(Permit),
    /// The breaker is open: wait this long, then ask again.
    Wait(Duration),
    /// Stop: the breaker stays open beyond what is left of the budget.
    GiveUp {
        /// Always [`GiveUpReason::BreakerOpen`].
        reason: GiveUpReason,
        /// The breaker's time until its next probe (`None` while forced open).
        retry_after: Option<Duration>,
    },
}

/// One upstream's breaker, budget and optional quota. `Send + Sync`.
#[derive(Debug)]
pub struct Policy {
    breaker: Arc<Breaker>,
    budget: Arc<RetryBudget>,
    quota: Option<Arc<RetryQuota>>,
    classifier: Classifier,
    // Allocated on the first read of this policy's metrics (metrics/policy.rs).
    pub(crate) counts: crate::metrics::policy::PolicyCounts,
}

impl Policy {
    /// Composes the parts; the breaker and the budget must share one clock (so that one reading
    /// serves a whole decision).
    pub fn new(
        breaker: Arc<Breaker>,
        budget: Arc<RetryBudget>,
        quota: Option<Arc<RetryQuota>>,
        classifier: Classifier,
    ) -> Result<Policy, ConfigError> {
        if !Arc::ptr_eq(breaker.clock(), budget.clock()) {
            return Err(ConfigError::new(
                "policy.clock",
                "the breaker and the budget must share one clock",
            ));
        }
        Ok(Policy {
            breaker,
            budget,
            quota,
            classifier,
            counts: Default::default(),
        })
    }

    /// The breaker.
    pub fn breaker(&self) -> &Arc<Breaker> {
        &self.breaker
    }

    /// The budget.
    pub fn budget(&self) -> &Arc<RetryBudget> {
        &self.budget
    }

    /// The quota, if any.
    pub fn quota(&self) -> Option<&Arc<RetryQuota>> {
        self.quota.as_ref()
    }

    /// The HTTP classifier.
    pub fn classifier(&self) -> &Classifier {
        &self.classifier
    }

    /// Before an attempt: go, wait for the breaker, or give up.
    pub fn before_attempt(&self, call: &mut Call) -> Before {
        let now = LazyNow::new(&**self.breaker.clock());
        self.before_within(call, &now, None)
    }

    /// [`Policy::before_attempt`] at the caller's reading, within `limit` (what is left of a
    /// call's total time, if it has one): a wait for the breaker must also be shorter than it.
    pub(crate) fn before_within(
        &self,
        call: &mut Call,
        now: &LazyNow<'_>,
        limit: Option<Duration>,
    ) -> Before {
        let before = self.admit_within(call, now, limit);
        self.count_before(call, &before);
        before
    }

    fn admit_within(&self, call: &mut Call, now: &LazyNow<'_>, limit: Option<Duration>) -> Before {
        match self.breaker.allow_at(now) {
            Ok(p) => {
                call.attempts += 1;
                Before::Go(p)
            }
            Err(refusal) => match refusal.retry_after {
                // A first attempt fails fast (the breaker's point, and no herd of parked callers
                // waking together); a retry waits if the breaker opens within its budget.
                Some(wait)
                    if call.attempts > 0
                        && wait <= self.budget.remaining_at(&call.retry, now.get())
                        && limit.map_or(true, |l| wait < l) =>
                {
                    Before::Wait(wait)
                }
                retry_after => Before::GiveUp {
                    reason: GiveUpReason::BreakerOpen,
                    retry_after,
                },
            },
        }
    }

    /// After an attempt: record, then done, retry after a delay, or give up.
    /// Errors only for a permit of another breaker.
    pub fn after_attempt(
        &self,
        call: &mut Call,
        permit: Permit,
        outcome: Outcome,
    ) -> Result<Decision, PermitError> {
        let now = LazyNow::new(&**self.breaker.clock());
        self.after_within(call, permit, outcome, &now, None)
    }

    /// [`Policy::after_attempt`] for an HTTP response: classifies (status, headers) with the
    /// policy's classifier at the decision's one clock reading, then decides. `status` is the
    /// caller's integer as given: a status outside 100..=599 is a broken upstream (a failure); a
    /// value outside 0..=999 is not a status at all, an [`crate::InputError`] naming `status`,
    /// and the permit is then recorded as cancelled (a probe frees its slot at once; its window
    /// stays spent).
    pub fn after_response<'a, I>(
        &self,
        call: &mut Call,
        permit: Permit,
        status: i64,
        headers: I,
    ) -> Result<(Decision, Classification), crate::HoldoffError>
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
    {
        let now = LazyNow::new(&**self.breaker.clock());
        // A value that is not a status is the caller's error, not an answer: the permit is
        // recorded as cancelled, so a probe frees its slot at once instead of holding it until it
        // times out.
        let status = match crate::http::check_status(status) {
            Ok(s) => s,
            Err(e) => {
                self.breaker.record_at(permit, Outcome::Cancelled, &now)?;
                return Err(e.into());
            }
        };
        let wall: SystemTime = now.wall();
        let c = self.classifier.classify(status, headers, wall)?;
        let d = self.after_within(call, permit, c.outcome, &now, None)?;
        Ok((d, c))
    }

    /// A retry this policy decided (and the quota paid for) will not be made (the caller
    /// cancelled during its wait, the breaker will not admit it in time, the request cannot be
    /// sent again): its tokens go back to the quota. Nothing else moves.
    pub fn forgo_retry(&self, call: &mut Call) {
        if let (Some(q), Some(lease)) = (&self.quota, call.lease.take()) {
            // The call's own lease, issued by this quota: never foreign.
            let _ = q.on_success(Some(lease));
        }
    }

    /// [`Policy::after_attempt`] at the caller's reading, within `limit` (what is left of a
    /// call's total time, if it has one): a retry whose wait is not shorter than the limit gives
    /// up with [`GiveUpReason::TotalTimeout`] before the quota pays for it.
    pub(crate) fn after_within(
        &self,
        call: &mut Call,
        permit: Permit,
        outcome: Outcome,
        now: &LazyNow<'_>,
        limit: Option<Duration>,
    ) -> Result<Decision, PermitError> {
        let decision = self.decide_within(call, permit, outcome, now, limit)?;
        self.count_decision(&decision);
        Ok(decision)
    }

    fn decide_within(
        &self,
        call: &mut Call,
        permit: Permit,
        outcome: Outcome,
        now: &LazyNow<'_>,
        limit: Option<Duration>,
    ) -> Result<Decision, PermitError> {
        self.breaker.record_at(permit, outcome, now)?;
        let decision = self.budget.decide_with(&mut call.retry, outcome, now);
        Ok(match decision {
            Decision::Done => {
                if let Some(q) = &self.quota {
                    // The call's own lease, issued by this quota: never foreign.
                    let _ = q.on_success(call.lease.take());
                }
                Decision::Done
            }
            Decision::GiveUp { .. } => decision,
            Decision::Retry {
                delay,
                source,
                server_delay,
                capped,
            } => {
                let (delay, source) = match self.breaker.wait_at(now) {
                    None => {
                        return Ok(Decision::GiveUp {
                            reason: GiveUpReason::BreakerOpen,
                            server_delay,
                        });
                    }
                    Some(b) if b > delay => {
                        if b > self.budget.remaining_at(&call.retry, now.get()) {
                            return Ok(Decision::GiveUp {
                                reason: GiveUpReason::BreakerOpen,
                                server_delay,
                            });
                        }
                        (b, WaitSource::Breaker)
                    }
                    Some(_) => (delay, source),
                };
                // The call's total time is a budget like the others: a wait that leaves no time
                // for the attempt after it gives up now rather than sleeping into the limit.
                if limit.is_some_and(|l| delay >= l) {
                    return Ok(Decision::GiveUp {
                        reason: GiveUpReason::TotalTimeout,
                        server_delay,
                    });
                }
                if let Some(q) = &self.quota {
                    match q.acquire(outcome == Outcome::Timeout) {
                        Ok(lease) => call.lease = Some(lease),
                        Err(_) => {
                            return Ok(Decision::GiveUp {
                                reason: GiveUpReason::QuotaEmpty,
                                server_delay,
                            })
                        }
                    }
                }
                Decision::Retry {
                    delay,
                    source,
                    server_delay,
                    capped,
                }
            }
        })
    }
}
