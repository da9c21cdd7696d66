//! The retry loop of one logical call: the core's `holdoff::Execution` (`docs/contract.md`
//! §5a) as an object. The Kotlin helpers `execute` and `executeHttp` drive it; it decides what
//! is retried, how long to wait, how long each attempt may take and what the caller finally
//! gets.

use std::sync::{Arc, Mutex};

use holdoff::interop::{Coded, VerdictKind};

use crate::http::pairs;
use crate::{lock, Duration, GiveUpReason, Header, HoldoffError, Outcome, Policy, WaitSource};

/// The time limits of one logical call. `None` is no limit; the helpers' defaults are the
/// core's ([`default_execution_config`]: no attempt limit, 60 s in total).
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Record)]
pub struct ExecutionConfig {
    /// Longest one attempt may take; > 0.
    pub attempt_timeout: Option<Duration>,
    /// Longest the whole call may take, waits included; > 0.
    pub total_timeout: Option<Duration>,
}

impl ExecutionConfig {
    fn to_core(self) -> Result<holdoff::ExecutionConfig, HoldoffError> {
        let check = |d: Option<Duration>, field| d.map(|d| d.checked(field)).transpose();
        let c = holdoff::ExecutionConfig {
            attempt_timeout: check(self.attempt_timeout, "execute.attempt_timeout")?,
            total_timeout: check(self.total_timeout, "execute.total_timeout")?,
        };
        c.validate()?;
        Ok(c)
    }
}

/// The core's default limits: no attempt timeout, a total timeout of 60 s.
#[uniffi::export]
pub fn default_execution_config() -> ExecutionConfig {
    let c = holdoff::ExecutionConfig::default();
    ExecutionConfig {
        attempt_timeout: Duration::opt(c.attempt_timeout),
        total_timeout: Duration::opt(c.total_timeout),
    }
}

/// What one attempt came to, as the helper's classifier saw it.
#[derive(Debug, Clone, Copy, PartialEq, uniffi::Enum)]
pub enum Attempted {
    /// The operation returned a value that means `outcome` (`Success` unless a result
    /// classifier says otherwise).
    Returned { outcome: Outcome },
    /// The operation threw an error classified as `outcome` (an expired attempt limit is
    /// `Timeout`).
    Raised { outcome: Outcome },
    /// The caller cancelled the attempt (its own cancellation, not a deadline).
    Cancelled,
    /// A programming error: re-thrown at once, unretried; the attempt moves nothing.
    Bug,
}

impl Attempted {
    fn to_core(self) -> Result<holdoff::Attempted, HoldoffError> {
        Ok(match self {
            Attempted::Returned { outcome } => holdoff::Attempted::Returned(outcome.to_core()?),
            Attempted::Raised { outcome } => holdoff::Attempted::Raised(outcome.to_core()?),
            Attempted::Cancelled => holdoff::Attempted::Cancelled,
            Attempted::Bug => holdoff::Attempted::Bug,
        })
    }
}

/// An admitted attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Record)]
pub struct AttemptPlan {
    /// 1 for the first attempt.
    pub number: i64,
    /// Whether the attempt is a probe of an open breaker.
    pub probe: bool,
    /// How long the attempt may take (the smaller of the attempt timeout and what is left of
    /// the total timeout); `None`: no limit. An expiry is reported as a timeout.
    pub time_limit: Option<Duration>,
}

/// A wait before the next attempt: what a before-wait hook is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Record)]
pub struct WaitPlan {
    /// Attempts made so far.
    pub attempts: i64,
    /// How long to wait (never negative, never shorter than the server asked, up to the cap).
    pub delay: Duration,
    /// Where the delay came from.
    pub source: WaitSource,
    /// Whether the budget's cap shortened the server's delay.
    pub capped: bool,
    /// The server's own delay, before the cap.
    pub server_delay: Option<Duration>,
}

/// What a give-up carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Record)]
pub struct GaveUp {
    pub reason: GiveUpReason,
    /// Attempts made.
    pub attempts: i64,
    /// When trying again could help: the server's delay for a rate-limit give-up; for a total
    /// timeout, the open breaker's time to its next probe, else the server's (capped) delay.
    pub retry_after: Option<Duration>,
    /// The server's own delay, if the last answer carried one.
    pub server_delay: Option<Duration>,
    /// Whether the server's delay was above the budget's cap.
    pub capped: bool,
}

/// How a call ended, and what the helper surfaces.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum Verdict {
    /// Return the last attempt's value (a success, or a final answer that was returned).
    Return { attempts: i64 },
    /// Re-throw the last attempt's own error unchanged (a final answer thrown, a programming
    /// error); `reason` is `NotRetryable` for a final answer.
    Rethrow {
        attempts: i64,
        reason: Option<GiveUpReason>,
    },
    /// Throw the breaker-open error: the breaker refused, or stays open past what is left of
    /// the budget or the total timeout. `retry_after` is absent while forced open.
    BreakerOpen {
        attempts: i64,
        retry_after: Option<Duration>,
    },
    /// Throw the give-up error, with the last attempt's error or result attached.
    GiveUp { gave_up: GaveUp },
    /// Propagate the caller's cancellation.
    Cancelled { attempts: i64 },
    /// The operation handed over a value that is not an HTTP status: throw `InvalidInput` with
    /// this `field` and `rule` (the core's). The attempt was recorded as cancelled.
    InvalidInput {
        attempts: i64,
        field: String,
        rule: String,
    },
}

#[uniffi::export]
impl Verdict {
    /// The core's stable name of the verdict's kind: `return`, `rethrow`, `breaker_open`,
    /// `give_up`, `cancelled`, `invalid_input`.
    pub fn stable_name(&self) -> String {
        let kind = match self {
            Verdict::Return { .. } => VerdictKind::Return,
            Verdict::Rethrow { .. } => VerdictKind::Rethrow,
            Verdict::BreakerOpen { .. } => VerdictKind::BreakerOpen,
            Verdict::GiveUp { .. } => VerdictKind::GiveUp,
            Verdict::Cancelled { .. } => VerdictKind::Cancelled,
            Verdict::InvalidInput { .. } => VerdictKind::InvalidInput,
        };
        kind.name().to_owned()
    }
}

/// The next thing a helper does.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum Step {
    /// Make the attempt now, within `plan.time_limit`; report it with `complete` or
    /// `completeResponse`.
    Attempt { plan: AttemptPlan },
    /// Sleep `plan.delay` (cancellably), then call `nextStep`.
    Wait { plan: WaitPlan },
    /// The call is over.
    Finish { verdict: Verdict },
}

fn attempts(n: u32) -> i64 {
    i64::from(n)
}

struct Run {
    exec: holdoff::Execution<Arc<holdoff::Policy>>,
    // Why the status of an `InvalidInput` verdict was refused: the core's error, kept for
    // every later report of the verdict.
    invalid: Option<holdoff::InputError>,
}

impl Run {
    fn verdict(&self, v: holdoff::Verdict) -> Verdict {
        match v {
            holdoff::Verdict::Return { attempts: n } => Verdict::Return {
                attempts: attempts(n),
            },
            holdoff::Verdict::Rethrow { attempts: n, reason } => Verdict::Rethrow {
                attempts: attempts(n),
                reason: reason.map(Into::into),
            },
            holdoff::Verdict::BreakerOpen {
                attempts: n,
                retry_after,
            } => Verdict::BreakerOpen {
                attempts: attempts(n),
                retry_after: Duration::opt(retry_after),
            },
            holdoff::Verdict::GiveUp(g) => Verdict::GiveUp {
                gave_up: GaveUp {
                    reason: g.reason.into(),
                    attempts: attempts(g.attempts),
                    retry_after: Duration::opt(g.retry_after),
                    server_delay: Duration::opt(g.server_delay),
                    capped: g.capped,
                },
            },
            holdoff::Verdict::Cancelled { attempts: n } => Verdict::Cancelled {
                attempts: attempts(n),
            },
            holdoff::Verdict::InvalidInput { attempts: n } => {
                // Only `complete_response` finishes so, and it keeps the core's error; the
                // fallback is the core's error for any value that is not a status.
                let e = self.invalid.clone().or_else(|| holdoff::check_status(-1).err());
                let (field, rule) =
                    e.map_or_else(|| ("status".to_owned(), String::new()), |e| (e.field, e.rule));
                Verdict::InvalidInput {
                    attempts: attempts(n),
                    field,
                    rule,
                }
            }
        }
    }

    fn step(&self, s: holdoff::Step) -> Step {
        match s {
            holdoff::Step::Attempt(p) => Step::Attempt {
                plan: AttemptPlan {
                    number: attempts(p.number),
                    probe: p.probe,
                    time_limit: Duration::opt(p.time_limit),
                },
            },
            holdoff::Step::Wait(w) => Step::Wait {
                plan: WaitPlan {
                    attempts: attempts(w.attempts),
                    delay: Duration::from_std(w.delay),
                    source: w.source.into(),
                    capped: w.capped,
                    server_delay: Duration::opt(w.server_delay),
                },
            },
            holdoff::Step::Finish(v) => Step::Finish {
                verdict: self.verdict(v),
            },
        }
    }
}

/// One logical call's retry loop over a policy. Drive it with `next_step`, then `complete` /
/// `complete_response` after each attempt and `next_step` after each wait, until a
/// `Step::Finish`; `cancel` when the caller cancels during a wait. Steps out of order are
/// `InvalidInput` naming `execution`. Closing it during an attempt records the attempt as
/// cancelled, so an abandoned call never holds a probe.
#[derive(uniffi::Object)]
pub struct Execution {
    run: Mutex<Run>,
}

impl std::fmt::Debug for Execution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Execution").finish_non_exhaustive()
    }
}

#[uniffi::export]
impl Execution {
    /// A call not started yet under `policy`. A limit that is zero, negative or too large is
    /// `InvalidConfig` naming `execute.attempt_timeout` or `execute.total_timeout`.
    #[uniffi::constructor]
    pub fn new(policy: Arc<Policy>, config: ExecutionConfig) -> Result<Arc<Self>, HoldoffError> {
        let exec = holdoff::Execution::new(Arc::clone(&policy.inner), config.to_core()?)?;
        Ok(Arc::new(Execution {
            run: Mutex::new(Run { exec, invalid: None }),
        }))
    }

    /// Starts the call, or the next attempt after a wait: an attempt, a wait for the breaker,
    /// or the verdict. Reads the clock at most once.
    pub fn next_step(&self) -> Result<Step, HoldoffError> {
        let mut run = lock(&self.run);
        let s = run.exec.next_step()?;
        Ok(run.step(s))
    }

    /// Reports what the attempt came to; returns the wait before the next attempt, or the
    /// verdict.
    pub fn complete(&self, attempted: Attempted) -> Result<Step, HoldoffError> {
        let a = attempted.to_core()?;
        let mut run = lock(&self.run);
        let s = run.exec.complete(a)?;
        Ok(run.step(s))
    }

    /// Reports an HTTP response, classified by the policy's classifier at this one clock
    /// reading (Retry-After and the other delay headers included). `status` is any `Int`: a
    /// value that is not a status (negative, above 999) finishes with `Verdict.InvalidInput`
    /// naming `status`, the attempt recorded as cancelled.
    pub fn complete_response(&self, status: i32, headers: Vec<Header>) -> Result<Step, HoldoffError> {
        let status = i64::from(status);
        let mut run = lock(&self.run);
        let s = run.exec.complete_response(status, pairs(&headers))?;
        if let holdoff::Step::Finish(holdoff::Verdict::InvalidInput { .. }) = s {
            run.invalid = holdoff::check_status(status).err();
        }
        Ok(run.step(s))
    }

    /// The caller cannot make the attempt a `Step::Wait` leads to (a request whose body it
    /// cannot send twice): finishes now with a give-up (`attempts_exhausted`) carrying the wait
    /// it forgoes as `retry_after`. Only right after a wait (else `InvalidInput` naming
    /// `execution`); once finished, the verdict unchanged.
    pub fn stop(&self) -> Result<Verdict, HoldoffError> {
        let mut run = lock(&self.run);
        let v = run.exec.stop()?;
        Ok(run.verdict(v))
    }

    /// The caller cancelled outside an attempt (during a wait): finishes with
    /// `Verdict.Cancelled`. During an attempt it records the attempt as cancelled. Once
    /// finished, the verdict unchanged.
    pub fn cancel(&self) -> Verdict {
        let mut run = lock(&self.run);
        let v = run.exec.cancel();
        run.verdict(v)
    }

    /// Attempts admitted so far.
    pub fn attempts(&self) -> i64 {
        attempts(lock(&self.run).exec.attempts())
    }

    /// What the last completed attempt was recorded as (a programming error and a cancelled
    /// attempt: `Cancelled`; an expired limit: `Timeout`).
    pub fn last_outcome(&self) -> Option<Outcome> {
        lock(&self.run).exec.last_outcome().map(Into::into)
    }

    /// The verdict, once finished.
    pub fn verdict(&self) -> Option<Verdict> {
        let run = lock(&self.run);
        run.exec.verdict().map(|v| run.verdict(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Breaker, BreakerConfig, BudgetConfig, DurationParts, ManualClock, RetryBudget};

    fn policy() -> Arc<Policy> {
        let clock = ManualClock::new();
        let breaker = Breaker::new(BreakerConfig::default(), Some(Arc::clone(&clock)), None).unwrap();
        let budget = RetryBudget::new(BudgetConfig::default(), Some(clock)).unwrap();
        Policy::new(breaker, budget, None, None).unwrap()
    }

    fn ms(millis: i64) -> Duration {
        Duration(DurationParts { millis, nanos: 0 })
    }

    #[test]
    fn limits_are_checked_naming_the_field() {
        let bad = |attempt, total| {
            let c = ExecutionConfig {
                attempt_timeout: attempt,
                total_timeout: total,
            };
            match Execution::new(policy(), c).unwrap_err() {
                HoldoffError::InvalidConfig { field, .. } => field,
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(bad(Some(ms(0)), None), "execute.attempt_timeout");
        assert_eq!(bad(None, Some(ms(-1))), "execute.total_timeout");
        assert_eq!(bad(Some(ms(i64::MAX)), None), "execute.attempt_timeout");
        assert_eq!(default_execution_config().total_timeout, Some(ms(60_000)));
        assert_eq!(default_execution_config().attempt_timeout, None);
    }

    #[test]
    fn stop_after_a_wait_gives_up_with_the_forgone_wait() {
        let e = Execution::new(policy(), default_execution_config()).unwrap();
        assert!(matches!(e.stop(), Err(HoldoffError::InvalidInput { .. })));
        e.next_step().unwrap();
        let outcome = Attempted::Raised {
            outcome: Outcome::Failure,
        };
        assert!(matches!(e.complete(outcome).unwrap(), Step::Wait { plan } if plan.delay == ms(500)));
        let Verdict::GiveUp { gave_up } = e.stop().unwrap() else {
            panic!("expected a give-up")
        };
        assert_eq!(gave_up.reason, GiveUpReason::AttemptsExhausted);
        assert_eq!((gave_up.attempts, gave_up.retry_after), (1, Some(ms(500))));
    }

    #[test]
    fn a_value_that_is_not_a_status_finishes_naming_status() {
        let e = Execution::new(policy(), default_execution_config()).unwrap();
        assert!(matches!(e.next_step().unwrap(), Step::Attempt { plan } if plan.number == 1));
        let Step::Finish {
            verdict: Verdict::InvalidInput { attempts, field, .. },
        } = e.complete_response(1000, vec![]).unwrap()
        else {
            panic!("expected an invalid-input verdict")
        };
        assert_eq!((attempts, field.as_str()), (1, "status"));
        assert_eq!(e.verdict().unwrap().stable_name(), "invalid_input");
        assert_eq!(e.last_outcome(), Some(Outcome::Cancelled));
    }
}
