//! The retry loop over [`Policy::before_attempt`] / [`Policy::after_attempt`], sleeping with
//! [`tokio::time::sleep`], and the breaker-only [`call`].

use std::future::Future;
use std::time::Duration;

use holdoff::{Before, Breaker, Call, Decision, GiveUpReason, Outcome, Permit, Policy};

use crate::Error;

/// What [`execute_observed`] (and the tower and reqwest integrations) tell an observer, in order.
/// For logs and metrics; the policy has already decided when an event is reported.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// The breaker admitted attempt number `attempt` (1-based); it is about to run.
    Attempt {
        /// 1 for the first attempt.
        attempt: u32,
        /// Whether the attempt is a probe of an open breaker.
        probe: bool,
    },
    /// Attempt number `attempt` ended with `outcome`, and the policy decided `decision`.
    /// A [`Decision::Retry`] is followed by a sleep of its `delay`.
    Decided {
        /// 1 for the first attempt.
        attempt: u32,
        /// The classified outcome that was recorded.
        outcome: Outcome,
        /// The policy's decision.
        decision: Decision,
    },
    /// A retry found the breaker open; the loop sleeps `delay` and asks again.
    BreakerWait {
        /// How long (the breaker's time until its next probe).
        delay: Duration,
    },
}

/// Holds a permit while its attempt runs. If the attempt's future is dropped (cancellation,
/// `tokio::time::timeout`, `select!`) or panics, the permit is recorded as
/// [`Outcome::Cancelled`]: it counts for nothing and frees a probe slot at once.
pub(crate) struct PolicyAttempt<'a> {
    policy: &'a Policy,
    call: &'a mut Call,
    permit: Option<Permit>,
}

impl<'a> PolicyAttempt<'a> {
    pub(crate) fn new(policy: &'a Policy, call: &'a mut Call, permit: Permit) -> Self {
        PolicyAttempt {
            policy,
            call,
            permit: Some(permit),
        }
    }

    /// Hands the permit to `f` (which records it); the guard then has nothing left to cancel.
    pub(crate) fn finish<R>(mut self, f: impl FnOnce(&Policy, &mut Call, Permit) -> R) -> R {
        let permit = self.permit.take().expect("a guard is finished once");
        f(self.policy, self.call, permit)
    }
}

impl Drop for PolicyAttempt<'_> {
    fn drop(&mut self) {
        if let Some(permit) = self.permit.take() {
            // A permit of this policy's own breaker: the only possible error (foreign) cannot
            // happen, and a destructor has no one to report to.
            let _ = self.policy.after_attempt(self.call, permit, Outcome::Cancelled);
        }
    }
}

struct BreakerAttempt<'a> {
    breaker: &'a Breaker,
    permit: Option<Permit>,
}

impl Drop for BreakerAttempt<'_> {
    fn drop(&mut self) {
        if let Some(permit) = self.permit.take() {
            let _ = self.breaker.record(permit, Outcome::Cancelled);
        }
    }
}

/// How a finished loop turns the last result and the policy's verdict into the caller's result.
/// `give_up` is `None` when the answer is final (done, or not retryable).
pub(crate) fn conclude<T, E>(
    result: Result<T, E>,
    give_up: Option<GiveUpReason>,
    attempts: u32,
) -> Result<T, Error<E>> {
    match (result, give_up) {
        // An Ok the classifier called a failure (an HTTP 503 response) is still the caller's
        // last answer: return it rather than drop it.
        (Ok(v), _) => Ok(v),
        (Err(e), None) => Err(Error::Operation(e)),
        (Err(e), Some(reason)) => Err(Error::GiveUp {
            reason,
            last_error: e,
            attempts,
        }),
    }
}

/// What a decision means for the loop: `Ok(delay)` to retry, `Err(give_up)` to stop.
pub(crate) fn verdict(decision: &Decision) -> Result<Duration, Option<GiveUpReason>> {
    match *decision {
        Decision::Retry { delay, .. } => Ok(delay),
        Decision::Done
        | Decision::GiveUp {
            reason: GiveUpReason::NotRetryable,
            ..
        } => Err(None),
        Decision::GiveUp { reason, .. } => Err(Some(reason)),
    }
}

/// Runs `op` under `policy`: breaker admission, retries with the budget's delays (Retry-After or
/// backoff), the quota's cost, sleeping with [`tokio::time::sleep`].
///
/// * `op` makes one attempt; it is called again for each retry.
/// * `classify` turns an attempt's result into the [`Outcome`] the breaker and the budget are
///   told: typically `Ok` → [`Outcome::Success`], a timeout → [`Outcome::Timeout`], a
///   rate-limit error carrying the server's delay → [`Outcome::RetryLater`], a final error
///   (not found, invalid) → [`Outcome::Answer`], anything else → [`Outcome::Failure`].
///
/// Every decision comes from [`Policy::before_attempt`] and [`Policy::after_attempt`]; this
/// function only sleeps what they say. Delays are [`Duration`]s on the policy's clock: build
/// the policy with a [`crate::TokioClock`] so that sleeping and deciding share one time axis.
///
/// # Returns and errors
/// * `Ok(value)` when an attempt returns `Ok`, including an `Ok` that `classify` called a
///   failure once the policy stops retrying (the last answer is handed back, not dropped).
/// * [`Error::BreakerOpen`] when the breaker refuses the first attempt (nothing ran: a first
///   attempt never waits for an open breaker).
/// * [`Error::GiveUp`] when the policy stops retrying a failing `Err` (budget spent, attempts
///   exhausted, quota empty, a Retry-After beyond the budget, the breaker staying open beyond
///   the budget), with the last error.
/// * [`Error::Operation`] when the last `Err` is final: classified as [`Outcome::Answer`] or
///   [`Outcome::Success`].
///
/// # Cancellation
/// Dropping the returned future while an attempt runs records that attempt as
/// [`Outcome::Cancelled`] (it counts for nothing and frees its probe slot at once, so an
/// abandoned probe cannot keep the breaker from probing again); dropping it while sleeping
/// records nothing, as no permit is held. A panic inside `op` is recorded the same way.
pub async fn execute<T, E, F, Fut, C>(policy: &Policy, op: F, classify: C) -> Result<T, Error<E>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    C: FnMut(&Result<T, E>) -> Outcome,
{
    execute_observed(policy, op, classify, |_| {}).await
}

/// [`execute`], reporting each step to `observe` (for logs and metrics).
pub async fn execute_observed<T, E, F, Fut, C, O>(
    policy: &Policy,
    mut op: F,
    mut classify: C,
    mut observe: O,
) -> Result<T, Error<E>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    C: FnMut(&Result<T, E>) -> Outcome,
    O: FnMut(&Event),
{
    let mut call = Call::new();
    let mut last: Option<Result<T, E>> = None;
    loop {
        match policy.before_attempt(&mut call) {
            Before::Go(permit) => {
                let attempt = call.attempts();
                observe(&Event::Attempt {
                    attempt,
                    probe: permit.is_probe(),
                });
                let guard = PolicyAttempt::new(policy, &mut call, permit);
                let result = op().await;
                let outcome = classify(&result);
                let decision = guard.finish(|p, c, permit| {
                    p.after_attempt(c, permit, outcome)
                        .expect("the permit was issued by this policy's breaker")
                });
                observe(&Event::Decided {
                    attempt,
                    outcome,
                    decision,
                });
                match verdict(&decision) {
                    Ok(delay) => {
                        last = Some(result);
                        tokio::time::sleep(delay).await;
                    }
                    Err(give_up) => return conclude(result, give_up, attempt),
                }
            }
            Before::Wait(delay) => {
                observe(&Event::BreakerWait { delay });
                tokio::time::sleep(delay).await;
            }
            Before::GiveUp { reason, retry_after } => {
                return match last.take() {
                    None => Err(Error::BreakerOpen { retry_after }),
                    Some(result) => conclude(result, Some(reason), call.attempts()),
                };
            }
        }
    }
}

/// One attempt under `breaker` alone, with no retry: admission, run, record.
///
/// `classify` is as for [`execute`]. Returns `Ok` for an `Ok` result,
/// [`Error::BreakerOpen`] when the breaker refuses (nothing ran), or [`Error::Operation`] with
/// the operation's error. Dropping the future while `op` runs records [`Outcome::Cancelled`]
/// (frees a probe slot at once).
pub async fn call<T, E, Fut, C>(breaker: &Breaker, op: Fut, classify: C) -> Result<T, Error<E>>
where
    Fut: Future<Output = Result<T, E>>,
    C: FnOnce(&Result<T, E>) -> Outcome,
{
    let permit = breaker.allow().map_err(|refusal| Error::BreakerOpen {
        retry_after: refusal.retry_after,
    })?;
    let mut guard = BreakerAttempt {
        breaker,
        permit: Some(permit),
    };
    let result = op.await;
    let outcome = classify(&result);
    if let Some(permit) = guard.permit.take() {
        breaker
            .record(permit, outcome)
            .expect("the permit was issued by this breaker");
    }
    result.map_err(Error::Operation)
}
