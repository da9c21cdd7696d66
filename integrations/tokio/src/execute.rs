//! The retry helpers over a [`Policy`] ([`execute`], [`execute_with`], [`execute_http`]) and the
//! breaker-only [`call`].

use std::future::Future;

use holdoff::{Breaker, Outcome, Permit, Policy, Refusal};

use crate::run::{run, ByOutcome, ByResponse, FnAttempts};
use crate::{Error, HttpResponse, Options};

/// Runs `op` under `policy` with the default [`Options`] (no attempt timeout, a 60 s total
/// timeout, no hooks): [`execute_with`].
pub async fn execute<T, E, F, Fut, C>(policy: &Policy, op: F, classify: C) -> Result<T, Error<E, T>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    C: FnMut(&Result<T, E>) -> Outcome,
{
    execute_with(policy, &Options::default(), op, classify).await
}

/// Runs `op` under `policy`: breaker admission, retries on the budget's delays (Retry-After or
/// backoff) and the quota's cost, each attempt bounded by the options' time limits, sleeping
/// with [`tokio::time::sleep`]. Every decision is the core's ([`holdoff::Execution`]).
///
/// * `op` makes one attempt; it is called again for each retry, so each attempt has its own
///   future (dropping it is that attempt's own cancellation).
/// * `classify` says what an attempt's result means: typically `Ok` → [`Outcome::Success`], a
///   timeout → [`Outcome::Timeout`], a rate-limit error carrying the server's delay →
///   [`Outcome::RetryLater`], a final error (not found, invalid) → [`Outcome::Answer`], a
///   transport error → [`Outcome::Failure`], the caller's own cancellation seen by the
///   operation → [`Outcome::Cancelled`]. An `Ok` may be called a failure too (a 500 response).
///
/// Delays are [`Duration`](std::time::Duration)s on the policy's clock: build the policy with a
/// [`crate::TokioClock`] so that deciding and sleeping share one time axis.
///
/// # Returns and errors
/// * `Ok(value)`: a success, or a final answer returned (an `Ok` classified as an answer).
/// * [`Error::Operation`]: the last error, unchanged, when it is final (classified as an answer
///   or a success).
/// * [`Error::BreakerOpen`]: the breaker refused the first attempt (nothing ran), or a retry it
///   would keep waiting for past the budget or the total timeout.
/// * [`Error::GiveUp`]: the policy stopped retrying (retries, budget, quota, total timeout,
///   Retry-After above the cap), with the last attempt's error, its value (an `Ok` classified
///   as a failure), or [`crate::Last::TimedOut`].
/// * [`Error::Cancelled`]: the classifier called a result [`Outcome::Cancelled`] before the
///   attempt's time limit (at or after it, it is a timeout).
///
/// # Timeouts, panics, cancellation
/// An attempt past its limit ([`Options::attempt_timeout`], or what is left of
/// [`Options::total_timeout`]) is dropped and recorded as [`Outcome::Timeout`]: a deadline is a
/// timeout, never a cancellation. A panic in `op` is a programming error: the attempt is
/// recorded as cancelled (it moves nothing: no failure counted, no budget, no quota) and the
/// panic goes on unwinding, unretried. Dropping the returned future during an attempt records
/// that attempt as cancelled (its probe slot freed at once; its probe window stays spent); during
/// a wait it records nothing, as no permit is held.
pub async fn execute_with<T, E, F, Fut, C>(
    policy: &Policy,
    options: &Options,
    op: F,
    classify: C,
) -> Result<T, Error<E, T>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    C: FnMut(&Result<T, E>) -> Outcome,
{
    run(policy, options, FnAttempts(op), ByOutcome(classify)).await
}

/// [`execute_with`] for an operation answering HTTP responses: each response is classified by
/// the policy's [`holdoff::Classifier`] from its status and headers (a 429 or 503 with a usable
/// Retry-After waits exactly the server's delay, capped, never shortened; a 404 is a final
/// answer; a 500 is retried), each error by `classify_error`.
///
/// * `Ok(response)`: a success or a final answer (a 404 is returned, not raised).
/// * [`Error::GiveUp`] with [`crate::Last::Value`]`(response)`: 500s (or 503s, 429s) until the
///   policy gave up; the last response is attached, never returned as if it were an answer.
/// * [`Error::InvalidInput`] (`field` = `status`): a response whose [`HttpResponse::status`] is
///   not a status (above 999); the attempt is recorded as cancelled.
/// * The rest as for [`execute_with`].
pub async fn execute_http<R, E, F, Fut, C>(
    policy: &Policy,
    options: &Options,
    op: F,
    classify_error: C,
) -> Result<R, Error<E, R>>
where
    R: HttpResponse,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<R, E>>,
    C: FnMut(&E) -> Outcome,
{
    run(policy, options, FnAttempts(op), ByResponse(classify_error)).await
}

/// The permit of one [`call`] while its operation runs: recorded as the classifier says when the
/// operation returns ([`BreakerAttempt::finish`]), as [`Outcome::Cancelled`] if it is dropped
/// first (the future dropped, or a panic in the operation or the classifier).
struct BreakerAttempt<'a> {
    breaker: &'a Breaker,
    permit: Option<Permit>,
}

impl BreakerAttempt<'_> {
    /// Records the operation's outcome. The permit was issued by this breaker, so recording it
    /// cannot fail.
    #[inline]
    fn finish(mut self, outcome: Outcome) {
        if let Some(permit) = self.permit.take() {
            let _ = self.breaker.record(permit, outcome);
        }
    }

    #[cold]
    #[inline(never)]
    fn cancel(breaker: &Breaker, permit: Permit) {
        let _ = breaker.record(permit, Outcome::Cancelled);
    }
}

impl Drop for BreakerAttempt<'_> {
    // Inline, so that after `finish` (the permit taken) the drop folds away instead of being a
    // call into this crate on every attempt.
    #[inline]
    fn drop(&mut self) {
        if let Some(permit) = self.permit.take() {
            Self::cancel(self.breaker, permit);
        }
    }
}

/// The error of a refused [`call`]: nothing ran. Out of line, off the admitted path.
#[cold]
#[inline(never)]
fn refused<E, T>(refusal: Refusal) -> Error<E, T> {
    Error::BreakerOpen {
        retry_after: refusal.retry_after,
        attempts: 0,
        last: None,
    }
}

/// One attempt under `breaker` alone, with no retry and no time limit: admission, run, record.
///
/// `classify` is as for [`execute_with`]. Returns `Ok` for an `Ok` result, [`Error::Operation`]
/// with the operation's error, or [`Error::BreakerOpen`] (`attempts` 0) when the breaker
/// refuses (nothing ran). Dropping the future while `op` runs, or a panic in `op`, records
/// [`Outcome::Cancelled`] (frees a probe slot at once).
pub async fn call<T, E, Fut, C>(breaker: &Breaker, op: Fut, classify: C) -> Result<T, Error<E, T>>
where
    Fut: Future<Output = Result<T, E>>,
    C: FnOnce(&Result<T, E>) -> Outcome,
{
    let attempt = match breaker.allow() {
        Ok(permit) => BreakerAttempt {
            breaker,
            permit: Some(permit),
        },
        Err(refusal) => return Err(refused(refusal)),
    };
    let result = op.await;
    attempt.finish(classify(&result));
    result.map_err(Error::Operation)
}
