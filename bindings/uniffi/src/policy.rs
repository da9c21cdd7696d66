//! One upstream's breaker, budget, quota and classifier composed (`docs/contract.md` §5), with
//! the pieces of a hand-written retry loop (`before_attempt`, `after_attempt`). The Kotlin
//! helpers are the core's loop instead: [`crate::Execution`].

use std::sync::{Arc, Mutex};

use holdoff::interop::{BeforeAction, Coded};

use crate::http::pairs;
use crate::{
    lock, Breaker, Classification, Classifier, Decision, Duration, GiveUpReason, Header, HoldoffError,
    Outcome, Permit, RetryBudget, RetryQuota,
};

/// The per-call state of a policy (the core's `policy::Call`): one per logical call (all its
/// attempts).
#[derive(Debug, Default, uniffi::Object)]
pub struct PolicyCall {
    inner: Mutex<holdoff::Call>,
}

#[uniffi::export]
impl PolicyCall {
    #[uniffi::constructor]
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Attempts admitted so far.
    pub fn attempts(&self) -> i64 {
        i64::from(lock(&self.inner).attempts())
    }

    /// Retries taken on the budget's counted path.
    pub fn retries(&self) -> i64 {
        i64::from(lock(&self.inner).retry_state().retries())
    }
}

/// What to do before an attempt.
#[derive(Debug, uniffi::Enum)]
pub enum Before {
    /// Make the attempt; then `after_attempt` with the permit.
    Go {
        permit: Arc<Permit>,
        episode: i64,
        probe: bool,
    },
    /// The breaker is open: wait this long, then ask again.
    Wait { delay: Duration },
    /// Give up: the breaker stays open beyond what is left of the budget (`retry_after` is the
    /// time until its next probe, absent while forced open).
    GiveUp {
        reason: GiveUpReason,
        retry_after: Option<Duration>,
    },
}

#[uniffi::export]
impl Before {
    /// The conformance suite's stable name of the action, the core's: `go`, `wait`,
    /// `give_up`.
    pub fn stable_name(&self) -> String {
        match self {
            Before::Go { .. } => BeforeAction::Go,
            Before::Wait { .. } => BeforeAction::Wait,
            Before::GiveUp { .. } => BeforeAction::GiveUp,
        }
        .name()
        .to_owned()
    }
}

/// The decision after an HTTP response, with how the response was classified.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct ResponseDecision {
    pub decision: Decision,
    pub classification: Classification,
}

/// One upstream's breaker, budget, optional quota and classifier. Each operation reads the
/// clock at most once.
#[derive(Debug, uniffi::Object)]
pub struct Policy {
    pub(crate) inner: Arc<holdoff::Policy>,
    breaker: Arc<Breaker>,
    budget: Arc<RetryBudget>,
    quota: Option<Arc<RetryQuota>>,
}

#[uniffi::export]
impl Policy {
    /// Composes the parts. The breaker and the budget must share one clock (`InvalidConfig`
    /// naming `policy.clock` otherwise). Without a classifier, the default one.
    #[uniffi::constructor(default(quota = None, classifier = None))]
    pub fn new(
        breaker: Arc<Breaker>,
        budget: Arc<RetryBudget>,
        quota: Option<Arc<RetryQuota>>,
        classifier: Option<Arc<Classifier>>,
    ) -> Result<Arc<Self>, HoldoffError> {
        let classifier = classifier.map(|c| c.inner.clone()).unwrap_or_default();
        let inner = Arc::new(holdoff::Policy::new(
            Arc::clone(&breaker.inner),
            Arc::clone(&budget.inner),
            quota.as_ref().map(|q| Arc::clone(&q.inner)),
            classifier,
        )?);
        Ok(Arc::new(Policy {
            inner,
            breaker,
            budget,
            quota,
        }))
    }

    pub fn breaker(&self) -> Arc<Breaker> {
        Arc::clone(&self.breaker)
    }

    pub fn budget(&self) -> Arc<RetryBudget> {
        Arc::clone(&self.budget)
    }

    pub fn quota(&self) -> Option<Arc<RetryQuota>> {
        self.quota.clone()
    }

    /// Before an attempt: go, wait for the breaker, or give up. A first attempt does not wait
    /// for an open breaker (`breaker_open`).
    pub fn before_attempt(&self, call: Arc<PolicyCall>) -> Before {
        match self.inner.before_attempt(&mut lock(&call.inner)) {
            holdoff::Before::Go(p) => Before::Go {
                episode: i64::from(p.episode()),
                probe: p.is_probe(),
                permit: Permit::new(p, self.inner.breaker()),
            },
            holdoff::Before::Wait(d) => Before::Wait {
                delay: Duration::from_std(d),
            },
            holdoff::Before::GiveUp { reason, retry_after } => Before::GiveUp {
                reason: reason.into(),
                retry_after: Duration::opt(retry_after),
            },
        }
    }

    /// After an attempt: records the outcome, then done, retry after a delay, or give up.
    pub fn after_attempt(
        &self,
        call: Arc<PolicyCall>,
        permit: Arc<Permit>,
        outcome: Outcome,
    ) -> Result<Decision, HoldoffError> {
        let o = outcome.to_core()?;
        let p = permit.slot.take(self.inner.breaker())?;
        Ok(self.inner.after_attempt(&mut lock(&call.inner), p, o)?.into())
    }

    /// `after_attempt` for an HTTP response, classified by the policy's classifier at the
    /// decision's one clock reading. `status` is any `Int`, checked by the core: outside
    /// 100..=599 it is a broken upstream (a failure); a value that is not a status at all
    /// (negative, above 999) is `InvalidInput` naming `status`, and the permit is then recorded
    /// as cancelled (a probe frees its slot at once; its window stays spent).
    pub fn after_response(
        &self,
        call: Arc<PolicyCall>,
        permit: Arc<Permit>,
        status: i32,
        headers: Vec<Header>,
    ) -> Result<ResponseDecision, HoldoffError> {
        let p = permit.slot.take(self.inner.breaker())?;
        let (d, c) =
            self.inner
                .after_response(&mut lock(&call.inner), p, i64::from(status), pairs(&headers))?;
        Ok(ResponseDecision {
            decision: d.into(),
            classification: c.into(),
        })
    }
}
