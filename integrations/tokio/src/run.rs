//! The one retry loop of this crate: [`holdoff::Execution`] driven on tokio. Every helper
//! ([`crate::execute`], [`crate::execute_with`], [`crate::execute_http`], the tower layer, the
//! reqwest middleware) is this function with its own way of starting an attempt ([`Attempts`])
//! and of reporting what the attempt came to ([`Judge`]).
//!
//! The loop decides nothing: the `Execution` says attempt, wait or finish; the loop runs the
//! attempt under `tokio::time::timeout` for the attempt's time limit, sleeps the waits with
//! `tokio::time::sleep`, calls the hooks, and turns the verdict into [`Error`] (see
//! [`surface`]).

use std::any::Any;
use std::future::Future;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::pin::{pin, Pin};
use std::task::{Context, Poll};
use std::time::Duration;

use holdoff::{Attempted, Execution, HoldoffError, Outcome, Policy, Step, Verdict};

use crate::{AttemptReport, Error, HttpResponse, Last, Options};

/// How a helper starts one attempt.
pub(crate) trait Attempts<T, E> {
    type Fut: Future<Output = Result<T, E>>;

    fn start(&mut self) -> Self::Fut;

    /// Whether another attempt can be started (a request whose body cannot be cloned is sent
    /// once).
    fn can_retry(&self) -> bool {
        true
    }
}

/// An `FnMut() -> impl Future` as an attempt source.
pub(crate) struct FnAttempts<F>(pub F);

impl<T, E, F, Fut> Attempts<T, E> for FnAttempts<F>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    type Fut = Fut;

    fn start(&mut self) -> Fut {
        (self.0)()
    }
}

/// How a helper reports an attempt's result to the [`Execution`].
pub(crate) trait Judge<T, E> {
    fn judge(&mut self, exec: &mut Execution<&Policy>, result: &Result<T, E>) -> Step;
}

/// The caller's classifier says what a result means: `Ok` is a returned value, `Err` a raised
/// error.
pub(crate) struct ByOutcome<C>(pub C);

impl<T, E, C: FnMut(&Result<T, E>) -> Outcome> Judge<T, E> for ByOutcome<C> {
    fn judge(&mut self, exec: &mut Execution<&Policy>, result: &Result<T, E>) -> Step {
        let outcome = (self.0)(result);
        let attempted = match result {
            Ok(_) => Attempted::Returned(outcome),
            Err(_) => Attempted::Raised(outcome),
        };
        in_order(exec.complete(attempted))
    }
}

/// A response is classified by the policy's HTTP classifier (status and headers, Retry-After
/// included); an error by the caller's classifier.
pub(crate) struct ByResponse<C>(pub C);

impl<T: HttpResponse, E, C: FnMut(&E) -> Outcome> Judge<T, E> for ByResponse<C> {
    fn judge(&mut self, exec: &mut Execution<&Policy>, result: &Result<T, E>) -> Step {
        match result {
            Ok(r) => in_order(exec.complete_response(r.status(), r.headers())),
            Err(e) => in_order(exec.complete(Attempted::Raised((self.0)(e)))),
        }
    }
}

// The loop drives its own Execution step by step, with permits of the policy's own breaker and
// statuses the Execution checks itself: the only errors `Execution` can return cannot happen.
fn in_order(step: Result<Step, HoldoffError>) -> Step {
    step.expect("the loop drives its own Execution in order")
}

/// The Execution and the attempt in flight: dropped during an attempt (the caller dropped the
/// future), it records the attempt as cancelled (a timeout at or past its limit) and tells the
/// after-attempt hook.
struct Driver<'o> {
    exec: Execution<&'o Policy>,
    options: &'o Options,
    in_flight: Option<(u32, bool)>,
}

impl Driver<'_> {
    fn attempt_ended(&mut self) {
        if let Some((number, probe)) = self.in_flight.take() {
            self.options.report_attempt(&AttemptReport {
                number,
                probe,
                outcome: self.exec.last_outcome().unwrap_or(Outcome::Cancelled),
            });
        }
    }
}

impl Drop for Driver<'_> {
    fn drop(&mut self) {
        // While the thread unwinds (a panicking classifier or hook), the Execution's own Drop
        // records the attempt as cancelled, and no hook runs: one that panicked now would abort
        // the process.
        if self.in_flight.is_some() && !std::thread::panicking() {
            let _ = self.exec.cancel();
            self.attempt_ended();
        }
    }
}

enum Ran<T, E> {
    Done(Result<T, E>),
    TimedOut,
    Panicked(Box<dyn Any + Send>),
}

/// Polls an attempt's future, catching a panic.
struct Guarded<'p, F>(Pin<&'p mut F>);

impl<T, E, F: Future<Output = Result<T, E>>> Future for Guarded<'_, F> {
    type Output = Ran<T, E>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Ran<T, E>> {
        match catch_unwind(AssertUnwindSafe(|| self.0.as_mut().poll(cx))) {
            Ok(Poll::Ready(r)) => Poll::Ready(Ran::Done(r)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(payload) => Poll::Ready(Ran::Panicked(payload)),
        }
    }
}

/// Runs one attempt within `limit`, catching a panic so that the loop can record the attempt
/// before the panic goes on.
async fn attempt<T, E, A: Attempts<T, E>>(source: &mut A, limit: Option<Duration>) -> Ran<T, E> {
    let fut = match catch_unwind(AssertUnwindSafe(|| source.start())) {
        Ok(fut) => fut,
        Err(payload) => return Ran::Panicked(payload),
    };
    let guarded = Guarded(pin!(fut));
    match limit {
        // Dropping the attempt's future is its own cancellation; the limit expiring is a timeout.
        Some(limit) => tokio::time::timeout(limit, guarded)
            .await
            .unwrap_or(Ran::TimedOut),
        None => guarded.await,
    }
}

/// The loop. `options` holds validated limits.
pub(crate) async fn run<T, E, A, J>(
    policy: &Policy,
    options: &Options,
    mut source: A,
    mut judge: J,
) -> Result<T, Error<E, T>>
where
    A: Attempts<T, E>,
    J: Judge<T, E>,
{
    let exec = Execution::new(policy, options.execution_config()).expect("Options validates its limits");
    let mut d = Driver {
        exec,
        options,
        in_flight: None,
    };
    let mut last: Option<Last<T, E>> = None;
    let mut step = in_order(d.exec.next_step());
    let verdict = loop {
        match step {
            Step::Attempt(plan) => {
                d.in_flight = Some((plan.number, plan.probe));
                let (next, left) = match attempt(&mut source, plan.time_limit).await {
                    Ran::Done(result) => {
                        let next = judge.judge(&mut d.exec, &result);
                        let left = match result {
                            Ok(v) => Last::Value(v),
                            Err(e) => Last::Error(e),
                        };
                        (next, left)
                    }
                    Ran::TimedOut => (
                        in_order(d.exec.complete(Attempted::Raised(Outcome::Timeout))),
                        Last::TimedOut,
                    ),
                    Ran::Panicked(payload) => {
                        // A programming error: recorded as cancelled (it moves nothing), then
                        // the panic goes on, unretried.
                        in_order(d.exec.complete(Attempted::Bug));
                        d.attempt_ended();
                        resume_unwind(payload);
                    }
                };
                d.attempt_ended();
                last = Some(left);
                step = next;
            }
            Step::Wait(w) => {
                if !source.can_retry() {
                    // No further attempt can be made: the core ends the call (retries
                    // exhausted, the forgone wait as retry_after).
                    break d.exec.stop().expect("the loop stops right after a wait");
                }
                #[cfg(feature = "opentelemetry")]
                crate::trace::retry(&w, d.exec.last_outcome());
                options.report_wait(&w);
                tokio::time::sleep(w.delay).await;
                step = in_order(d.exec.next_step());
            }
            Step::Finish(v) => break v,
        }
    };
    #[cfg(feature = "opentelemetry")]
    crate::trace::finished(&verdict);
    surface(verdict, last)
}

/// The verdict as the caller's result (the contract's table: `conformance/README.md`,
/// "Execute").
fn surface<T, E>(verdict: Verdict, last: Option<Last<T, E>>) -> Result<T, Error<E, T>> {
    const AFTER_AN_ATTEMPT: &str = "this verdict follows an attempt";
    match verdict {
        // A returned value is returned, a raised error re-raised unchanged.
        Verdict::Return { .. } | Verdict::Rethrow { .. } => match last {
            Some(Last::Value(v)) => Ok(v),
            Some(Last::Error(e)) => Err(Error::Operation(e)),
            // A timeout is always retried or given up, never final.
            _ => unreachable!("a call returns or rethrows what its last attempt left"),
        },
        Verdict::BreakerOpen {
            attempts,
            retry_after,
        } => Err(Error::BreakerOpen {
            retry_after,
            attempts,
            last,
        }),
        Verdict::GiveUp(g) => Err(Error::GiveUp {
            reason: g.reason,
            attempts: g.attempts,
            retry_after: g.retry_after,
            server_delay: g.server_delay,
            capped: g.capped,
            last: last.expect(AFTER_AN_ATTEMPT),
        }),
        Verdict::Cancelled { attempts } => Err(Error::Cancelled {
            attempts,
            last: last.expect(AFTER_AN_ATTEMPT),
        }),
        Verdict::InvalidInput { attempts } => match last {
            Some(Last::Value(value)) => Err(Error::InvalidInput {
                field: "status",
                attempts,
                value,
            }),
            _ => unreachable!("only a response can carry a status"),
        },
    }
}
