//! The retry loop of one logical call, as a sans-IO state machine (DESIGN §5a).
//!
//! Every language's helpers (`@policy.retrying`, `execute`, `Do`, `ExecuteAsync`, ...) are this
//! loop: they run the operation, sleep cancellably and turn the [`Verdict`] into their language's
//! return value or error. Everything else, what is retried, when to stop, how long each attempt
//! may take and what the caller finally gets, is decided here, once:
//!
//! ```text
//!          next_step                 complete / complete_response
//!  start ─────────────► Attempt ──────────────────────────────────► Wait ──┐
//!    ▲  ▲                  │                                          │     │
//!    │  └─────────────────────────── next_step (after sleeping) ──────┘     │
//!    │                     └──────────────► Finish(verdict) ◄── cancel ──────┘
//! ```
//!
//! * [`Execution::next_step`] admits an attempt ([`Step::Attempt`], holding the permit), says how
//!   long to wait for an open breaker ([`Step::Wait`]), or finishes ([`Step::Finish`]: a first
//!   attempt is refused at once, a retry that would wait past the budget gives up).
//! * [`Execution::complete`] / [`Execution::complete_response`] take what the attempt came to
//!   ([`Attempted`], or an HTTP status and headers), record it on the breaker, ask the budget and
//!   the quota, and return [`Step::Wait`] (then `next_step` again) or [`Step::Finish`].
//! * [`Execution::cancel`] ends the call when the caller cancels outside an attempt (during a
//!   wait); a cancellation during an attempt is reported through `complete`. Either way the call
//!   ends: the caller's own cancellation is never retried, and a retry already paid for gives
//!   its tokens back.
//!
//! Each call reads the injected clock at most once. With no total timeout, a call whose first
//! attempt succeeds while the breaker is closed reads no clock at all.
//!
//! # What the caller gets ([`Verdict`])
//! | the call ended with | verdict | the helper |
//! |---|---|---|
//! | a success (a value, a 1xx-3xx response) | [`Verdict::Return`] | returns the last attempt's value |
//! | a final answer returned (a 404 response, a value classified `answer`) | [`Verdict::Return`] | returns it |
//! | a final answer raised (an error classified `answer`) | [`Verdict::Rethrow`] | re-raises that error, unchanged |
//! | a programming error ([`Attempted::Bug`]) | [`Verdict::Rethrow`] | re-raises it at once; the attempt moved nothing |
//! | the breaker refusing (first attempt, or a retry it would keep waiting past the budget) | [`Verdict::BreakerOpen`] | raises its breaker-open error (an "upstream unavailable") |
//! | any other give-up (retries, budget, quota, total timeout, Retry-After above the cap) | [`Verdict::GiveUp`] | raises its give-up error (an "upstream unavailable"), the last attempt's error or result attached |
//! | the caller's own cancellation | [`Verdict::Cancelled`] | propagates the language's cancellation |
//! | a value that is not an HTTP status | [`Verdict::InvalidInput`] | raises its invalid-input error naming `status` |
//!
//! # Time limits
//! [`ExecutionConfig::total_timeout`] bounds the logical call (default 60 s, so that a call to an
//! unreachable upstream ends in a minute, not after the budget's patient defaults);
//! [`ExecutionConfig::attempt_timeout`] bounds each attempt (default none). Each
//! [`Step::Attempt`] carries the attempt's own limit, the smaller of the two that remain; the
//! helper enforces it with its language's timer and reports an expiry as a timeout
//! ([`Attempted::Raised`]`(`[`Outcome::Timeout`]`)`): **a deadline that expires is a timeout,
//! never a cancellation**. The caller's own cancellation ends the call; if it comes at or after
//! the attempt's limit, the breaker records that attempt as the timeout it was.
//! A retry whose wait would not end before the total timeout gives up now
//! ([`GiveUpReason::TotalTimeout`]), as the budget's own rules do: the wait is never shortened.

use std::ops::Deref;
use std::time::Duration;

use crate::breaker::{Outcome, Permit};
use crate::budget::{Decision, GiveUpReason, WaitSource};
use crate::clock::{Instant, LazyNow};
use crate::error::{ConfigError, HoldoffError, InputError};
use crate::policy::{Before, Call, Policy};

/// The time limits of one logical call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ExecutionConfig {
    /// Longest one attempt may take; `None` (default): only the total timeout bounds it.
    pub attempt_timeout: Option<Duration>,
    /// Longest the whole call may take, waits included; `None`: only the budget bounds it.
    /// Default 60 s.
    pub total_timeout: Option<Duration>,
}

/// The default total timeout of a call.
pub const DEFAULT_TOTAL_TIMEOUT: Duration = Duration::from_secs(60);

impl Default for ExecutionConfig {
    fn default() -> Self {
        ExecutionConfig {
            attempt_timeout: None,
            total_timeout: Some(DEFAULT_TOTAL_TIMEOUT),
        }
    }
}

impl ExecutionConfig {
    /// Checks every field; a limit must be greater than zero (`None` is no limit).
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (field, v) in [
            ("execute.attempt_timeout", self.attempt_timeout),
            ("execute.total_timeout", self.total_timeout),
        ] {
            if v.is_some_and(|d| d.is_zero()) {
                return Err(ConfigError::new(field, "must be greater than 0"));
            }
        }
        Ok(())
    }
}

/// What one attempt came to, as the helper saw it. The helper's classifier (its language's
/// default, or the caller's) decides between these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempted {
    /// The operation returned a value, which means `outcome` (`Success` unless a result
    /// classifier says otherwise). Its value is what [`Verdict::Return`] returns.
    Returned(Outcome),
    /// The operation raised an error classified as `outcome`: a transport error (`Failure`), a
    /// timeout or an expired attempt limit (`Timeout`), an explicit retry-later
    /// (`RetryLater`), a final answer (`Answer`), or the caller's cancellation (`Cancelled`).
    Raised(Outcome),
    /// The caller cancelled the attempt (its own cancellation, not a deadline).
    Cancelled,
    /// A programming error: not an answer of the upstream. Propagated at once, unretried; the
    /// attempt is recorded as cancelled, so it moves nothing in breaker, budget or quota.
    Bug,
}

/// The next thing a helper does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Make the attempt now; report it with [`Execution::complete`] or
    /// [`Execution::complete_response`].
    Attempt(AttemptPlan),
    /// Sleep this long (cancellably), then call [`Execution::next_step`].
    Wait(WaitPlan),
    /// The call is over.
    Finish(Verdict),
}

/// An admitted attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttemptPlan {
    /// 1 for the first attempt.
    pub number: u32,
    /// Whether the attempt is a probe of an open breaker.
    pub probe: bool,
    /// How long the attempt may take (the smaller of the attempt timeout and what is left of
    /// the total timeout); `None`: no limit. The helper enforces it and reports an expiry as a
    /// timeout.
    pub time_limit: Option<Duration>,
}

/// A wait before the next attempt: what a `before_sleep` / `on_retry` hook is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitPlan {
    /// Attempts made so far.
    pub attempts: u32,
    /// How long to wait (never negative, never shorter than the server asked, up to the cap).
    pub delay: Duration,
    /// Where the delay came from.
    pub source: WaitSource,
    /// Whether the budget's cap shortened the server's delay.
    pub capped: bool,
    /// The server's own delay, before the cap.
    pub server_delay: Option<Duration>,
}

/// How a call ended, and what the helper surfaces. See the module documentation's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Return the last attempt's value (a success, or a final answer that was returned).
    Return {
        /// Attempts made.
        attempts: u32,
    },
    /// Re-raise the last attempt's own error unchanged: a final answer raised as an error, a
    /// programming error, or an error the caller's classifier called a success.
    Rethrow {
        /// Attempts made.
        attempts: u32,
        /// `Some(NotRetryable)` for a final answer; `None` otherwise.
        reason: Option<GiveUpReason>,
    },
    /// Raise the language's breaker-open error: the breaker refused, or stays open past what is
    /// left of the budget or the total timeout.
    BreakerOpen {
        /// Attempts made (0 when the first attempt was refused).
        attempts: u32,
        /// Time until the breaker admits a probe; `None` while forced open.
        retry_after: Option<Duration>,
    },
    /// Raise the language's give-up error, with the last attempt's error (or result) attached.
    GiveUp(GaveUp),
    /// Propagate the caller's cancellation.
    Cancelled {
        /// Attempts made.
        attempts: u32,
    },
    /// Raise the language's invalid-input error: the operation handed over a value that is not
    /// an HTTP status (above 999). The attempt was recorded as cancelled.
    InvalidInput {
        /// Attempts made.
        attempts: u32,
    },
}

/// What a give-up carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GaveUp {
    /// Why.
    pub reason: GiveUpReason,
    /// Attempts made.
    pub attempts: u32,
    /// When trying again could help: the server's delay for a rate-limit give-up; for a total
    /// timeout, the open breaker's time to its next probe, else the server's (capped) delay;
    /// `None` otherwise.
    pub retry_after: Option<Duration>,
    /// The server's own delay, if the last answer carried one.
    pub server_delay: Option<Duration>,
    /// Whether the server's delay was above the budget's cap.
    pub capped: bool,
}

impl Verdict {
    /// Attempts made.
    pub fn attempts(&self) -> u32 {
        match *self {
            Verdict::Return { attempts }
            | Verdict::Rethrow { attempts, .. }
            | Verdict::BreakerOpen { attempts, .. }
            | Verdict::Cancelled { attempts }
            | Verdict::InvalidInput { attempts } => attempts,
            Verdict::GiveUp(g) => g.attempts,
        }
    }

    /// The stable name of the verdict's kind: `return`, `rethrow`, `breaker_open`, `give_up`,
    /// `cancelled`, `invalid_input`.
    pub fn name(&self) -> &'static str {
        match self {
            Verdict::Return { .. } => "return",
            Verdict::Rethrow { .. } => "rethrow",
            Verdict::BreakerOpen { .. } => "breaker_open",
            Verdict::GiveUp(_) => "give_up",
            Verdict::Cancelled { .. } => "cancelled",
            Verdict::InvalidInput { .. } => "invalid_input",
        }
    }
}

#[derive(Debug)]
enum State {
    Ready,
    Attempting {
        permit: Permit,
        deadline: Option<Instant>,
    },
    Finished(Verdict),
}

/// One logical call's retry loop over a [`Policy`] (`P` is `&Policy`, `Arc<Policy>`, ...).
///
/// Not `Sync`: one caller drives it. Dropping it during an attempt records the attempt as
/// cancelled, so a probe is never lost to a dropped future.
#[derive(Debug)]
pub struct Execution<P: Deref<Target = Policy>> {
    policy: P,
    config: ExecutionConfig,
    run: Run,
}

// The call's own state, apart from the policy so that a decision can borrow both.
#[derive(Debug)]
struct Run {
    call: Call,
    state: State,
    // When the total timeout ends, from the first reading; None without one.
    deadline: Option<Instant>,
    started: bool,
    last_outcome: Option<Outcome>,
    // The wait last handed out, for `stop`.
    last_wait: Option<WaitPlan>,
}

fn out_of_order(rule: &str) -> HoldoffError {
    InputError {
        field: "execution".into(),
        rule: rule.into(),
    }
    .into()
}

impl<P: Deref<Target = Policy>> Execution<P> {
    /// A call not started yet. Fails with [`ConfigError`] naming an invalid limit.
    pub fn new(policy: P, config: ExecutionConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Execution {
            policy,
            config,
            run: Run {
                call: Call::new(),
                state: State::Ready,
                deadline: None,
                started: false,
                last_outcome: None,
                last_wait: None,
            },
        })
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The limits.
    pub fn config(&self) -> &ExecutionConfig {
        &self.config
    }

    /// Attempts admitted so far.
    pub fn attempts(&self) -> u32 {
        self.run.call.attempts()
    }

    /// The outcome the last completed attempt was recorded as (for an "after attempt" hook).
    pub fn last_outcome(&self) -> Option<Outcome> {
        self.run.last_outcome
    }

    /// The verdict, once finished.
    pub fn verdict(&self) -> Option<Verdict> {
        match self.run.state {
            State::Finished(v) => Some(v),
            _ => None,
        }
    }

    /// Starts the call, or the next attempt after a wait: admits an attempt, says how long to
    /// wait for the breaker, or finishes. Errors (`invalid_input` naming `execution`) while an
    /// attempt is in progress; once finished it returns the verdict again.
    pub fn next_step(&mut self) -> Result<Step, HoldoffError> {
        match self.run.state {
            State::Ready => {}
            State::Attempting { .. } => {
                return Err(out_of_order("an attempt is in progress: complete it first"))
            }
            State::Finished(v) => return Ok(Step::Finish(v)),
        }
        let policy = &*self.policy;
        let now = LazyNow::new(&**policy.breaker().clock());
        if !self.run.started {
            self.run.started = true;
            if let Some(total) = self.config.total_timeout {
                self.run.deadline = Some(now.get().saturating_add(total));
            }
        }
        let remaining = self.run.remaining(&now);
        if remaining.is_some_and(|r| r.is_zero()) {
            // A sleeper that overslept into the limit: the retry is forgone, and trying again
            // could help once the breaker admits a probe.
            policy.forgo_retry(&mut self.run.call);
            let attempts = self.run.call.attempts();
            let breaker = policy.breaker().wait_at(&now).filter(|w| !w.is_zero());
            return Ok(self.run.finish(Verdict::GiveUp(GaveUp {
                reason: GiveUpReason::TotalTimeout,
                attempts,
                retry_after: breaker,
                server_delay: None,
                capped: false,
            })));
        }
        let step = match policy.before_within(&mut self.run.call, &now, remaining) {
            Before::Go(permit) => {
                let limit = match (self.config.attempt_timeout, remaining) {
                    (Some(a), Some(r)) => Some(a.min(r)),
                    (a, r) => a.or(r),
                };
                let deadline = match (self.config.attempt_timeout, self.run.deadline) {
                    (None, d) => d,
                    // Only an attempt timeout reads the clock for its own deadline.
                    (Some(a), d) => {
                        let own = now.get().saturating_add(a);
                        Some(d.map_or(own, |d| d.min(own)))
                    }
                };
                let plan = AttemptPlan {
                    number: self.run.call.attempts(),
                    probe: permit.is_probe(),
                    time_limit: limit,
                };
                self.run.state = State::Attempting { permit, deadline };
                self.run.last_wait = None;
                Step::Attempt(plan)
            }
            Before::Wait(delay) => {
                let w = WaitPlan {
                    attempts: self.run.call.attempts(),
                    delay,
                    source: WaitSource::Breaker,
                    capped: false,
                    server_delay: None,
                };
                self.run.last_wait = Some(w);
                Step::Wait(w)
            }
            Before::GiveUp { retry_after, .. } => {
                // A retry the breaker will not admit in time: its tokens go back.
                policy.forgo_retry(&mut self.run.call);
                let attempts = self.run.call.attempts();
                self.run.finish(Verdict::BreakerOpen {
                    attempts,
                    retry_after,
                })
            }
        };
        Ok(step)
    }

    /// Reports what the attempt came to; returns the wait before the next attempt, or the
    /// verdict. Errors (`invalid_input` naming `execution`) when no attempt is in progress.
    pub fn complete(&mut self, attempted: Attempted) -> Result<Step, HoldoffError> {
        let (permit, deadline) = self.run.take_attempt()?;
        let policy = &*self.policy;
        let now = LazyNow::new(&**policy.breaker().clock());
        let (outcome, raised) = match attempted {
            Attempted::Bug => {
                // Not an answer of the upstream: the probe's slot is freed and nothing counts.
                let _ = policy.breaker().record_at(permit, Outcome::Cancelled, &now);
                self.run.last_outcome = Some(Outcome::Cancelled);
                let attempts = self.run.call.attempts();
                return Ok(self.run.finish(Verdict::Rethrow {
                    attempts,
                    reason: None,
                }));
            }
            Attempted::Cancelled
            | Attempted::Returned(Outcome::Cancelled)
            | Attempted::Raised(Outcome::Cancelled) => {
                // The caller's own cancellation ends the call: no budget decision, no retry
                // bought. For the breaker, an attempt that had already run to its limit timed
                // out (a deadline that expires is a timeout, never a cancellation).
                let recorded = match deadline {
                    Some(d) if now.get() >= d => Outcome::Timeout,
                    _ => Outcome::Cancelled,
                };
                let _ = policy.breaker().record_at(permit, recorded, &now);
                self.run.last_outcome = Some(recorded);
                let attempts = self.run.call.attempts();
                return Ok(self.run.finish(Verdict::Cancelled { attempts }));
            }
            Attempted::Returned(o) => (o, false),
            Attempted::Raised(o) => (o, true),
        };
        let remaining = self.run.remaining(&now);
        let decision = policy
            .after_within(&mut self.run.call, permit, outcome, &now, remaining)
            .map_err(HoldoffError::from)?;
        Ok(self.run.decided(policy, outcome, raised, decision, &now))
    }

    /// Reports an HTTP response: the policy's classifier reads (status, headers) at this one
    /// clock reading, Retry-After and the other delay headers included. A status outside
    /// 0..=999 finishes with [`Verdict::InvalidInput`] (the attempt recorded as cancelled).
    pub fn complete_response<'a, I>(&mut self, status: i64, headers: I) -> Result<Step, HoldoffError>
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
    {
        let (permit, _) = self.run.take_attempt()?;
        let policy = &*self.policy;
        let now = LazyNow::new(&**policy.breaker().clock());
        let status = match crate::http::check_status(status) {
            Ok(s) => s,
            Err(_) => {
                let _ = policy.breaker().record_at(permit, Outcome::Cancelled, &now);
                self.run.last_outcome = Some(Outcome::Cancelled);
                let attempts = self.run.call.attempts();
                return Ok(self.run.finish(Verdict::InvalidInput { attempts }));
            }
        };
        let c = policy.classifier().classify(status, headers, now.wall())?;
        let remaining = self.run.remaining(&now);
        let decision = policy
            .after_within(&mut self.run.call, permit, c.outcome, &now, remaining)
            .map_err(HoldoffError::from)?;
        Ok(self.run.decided(policy, c.outcome, false, decision, &now))
    }

    /// The helper cannot make the attempt a [`Step::Wait`] leads to (a request whose body it
    /// cannot send twice): finishes now with [`Verdict::GiveUp`] `attempts_exhausted`, carrying
    /// the wait it would have made as `retry_after` and its server delay and `capped`. Allowed
    /// only right after a wait; once finished, it returns the verdict unchanged. Errors
    /// (`invalid_input` naming `execution`) otherwise.
    pub fn stop(&mut self) -> Result<Verdict, HoldoffError> {
        if let State::Finished(v) = self.run.state {
            return Ok(v);
        }
        match (&self.run.state, self.run.last_wait) {
            (State::Ready, Some(w)) if self.run.started => {
                self.policy.forgo_retry(&mut self.run.call);
                let v = Verdict::GiveUp(GaveUp {
                    reason: GiveUpReason::AttemptsExhausted,
                    attempts: self.run.call.attempts(),
                    retry_after: Some(w.delay),
                    server_delay: w.server_delay,
                    capped: w.capped,
                });
                self.run.finish(v);
                Ok(v)
            }
            _ => Err(out_of_order("stop follows a wait: there is no attempt to forgo")),
        }
    }

    /// The caller cancelled outside an attempt (during a wait, or before starting): finishes
    /// with [`Verdict::Cancelled`]. During an attempt it records the attempt as cancelled, as
    /// [`Execution::complete`] with [`Attempted::Cancelled`] would. Once finished, it returns
    /// the verdict unchanged.
    pub fn cancel(&mut self) -> Verdict {
        if let State::Finished(v) = self.run.state {
            return v;
        }
        if let State::Attempting { .. } = self.run.state {
            if let Ok(Step::Finish(v)) = self.complete(Attempted::Cancelled) {
                return v;
            }
        }
        // Cancelled during a wait: the retry it waited for is forgone.
        self.policy.forgo_retry(&mut self.run.call);
        let attempts = self.run.call.attempts();
        self.run.state = State::Finished(Verdict::Cancelled { attempts });
        Verdict::Cancelled { attempts }
    }
}

impl Run {
    fn finish(&mut self, v: Verdict) -> Step {
        self.state = State::Finished(v);
        Step::Finish(v)
    }

    fn remaining(&self, now: &LazyNow<'_>) -> Option<Duration> {
        self.deadline.map(|d| d.saturating_since(now.get()))
    }

    fn take_attempt(&mut self) -> Result<(Permit, Option<Instant>), HoldoffError> {
        match std::mem::replace(&mut self.state, State::Ready) {
            State::Attempting { permit, deadline } => Ok((permit, deadline)),
            other => {
                self.state = other;
                Err(out_of_order("no attempt is in progress: call next_step first"))
            }
        }
    }

    fn decided(
        &mut self,
        policy: &Policy,
        outcome: Outcome,
        raised: bool,
        decision: Decision,
        now: &LazyNow<'_>,
    ) -> Step {
        self.last_outcome = Some(outcome);
        let attempts = self.call.attempts();
        let cap = policy.budget().config().retry_after_cap;
        let give_up = |reason, server_delay: Option<Duration>, retry_after| {
            Verdict::GiveUp(GaveUp {
                reason,
                attempts,
                retry_after,
                server_delay,
                capped: server_delay.is_some_and(|s| s > cap),
            })
        };
        let verdict = match decision {
            Decision::Done if raised => Verdict::Rethrow {
                attempts,
                reason: None,
            },
            Decision::Done => Verdict::Return { attempts },
            Decision::Retry {
                delay,
                source,
                server_delay,
                capped,
            } => {
                // The policy already gave up if the wait would not end within the total timeout.
                let w = WaitPlan {
                    attempts,
                    delay,
                    source,
                    capped,
                    server_delay,
                };
                self.last_wait = Some(w);
                return Step::Wait(w);
            }
            Decision::GiveUp { reason, server_delay } => match reason {
                GiveUpReason::NotRetryable if raised => Verdict::Rethrow {
                    attempts,
                    reason: Some(reason),
                },
                GiveUpReason::NotRetryable => Verdict::Return { attempts },
                GiveUpReason::Cancelled => Verdict::Cancelled { attempts },
                GiveUpReason::BreakerOpen => Verdict::BreakerOpen {
                    attempts,
                    retry_after: policy.breaker().wait_at(now),
                },
                GiveUpReason::RetryAfterExceedsRemaining
                | GiveUpReason::RetryAfterAboveCap
                | GiveUpReason::BudgetSpent => give_up(reason, server_delay, server_delay),
                GiveUpReason::TotalTimeout => {
                    // When trying again could help: after the open breaker's next probe, else
                    // after the server's (capped) delay.
                    let breaker = policy.breaker().wait_at(now).filter(|w| !w.is_zero());
                    give_up(reason, server_delay, breaker.or(server_delay.map(|s| s.min(cap))))
                }
                _ => give_up(reason, server_delay, None),
            },
        };
        self.finish(verdict)
    }
}

impl<P: Deref<Target = Policy>> Drop for Execution<P> {
    fn drop(&mut self) {
        // A dropped future or an abandoned object must not hold a probe until it times out, nor
        // keep the tokens of a retry it will not make.
        if !matches!(self.run.state, State::Finished(_)) {
            let _ = self.cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::backoff::Backoff;
    use crate::breaker::{Breaker, BreakerConfig};
    use crate::budget::{BudgetConfig, RetryBudget};
    use crate::clock::ManualClock;
    use crate::http::Classifier;
    use crate::trip::TripPolicy;

    fn policy(clock: &ManualClock) -> Policy {
        let c: Arc<dyn crate::clock::Clock> = Arc::new(clock.clone());
        let breaker = BreakerConfig {
            trip: TripPolicy::ConsecutiveFailures { threshold: 1 },
            open_interval: Backoff::constant(Duration::from_secs(10)),
            probe_timeout: Some(Duration::from_secs(3600)),
            ..BreakerConfig::default()
        };
        Policy::new(
            Arc::new(Breaker::new(breaker, Arc::clone(&c)).unwrap()),
            Arc::new(RetryBudget::new(BudgetConfig::default(), c).unwrap()),
            None,
            Classifier::default(),
        )
        .unwrap()
    }

    const NO_LIMITS: ExecutionConfig = ExecutionConfig {
        attempt_timeout: None,
        total_timeout: None,
    };

    #[test]
    fn a_healthy_call_without_a_total_timeout_reads_no_clock() {
        let clock = ManualClock::new();
        let p = policy(&clock);
        let mut e = Execution::new(&p, NO_LIMITS).unwrap();
        assert!(
            matches!(e.next_step().unwrap(), Step::Attempt(a) if a.number == 1 && a.time_limit.is_none())
        );
        let done = e.complete(Attempted::Returned(Outcome::Success)).unwrap();
        assert_eq!(done, Step::Finish(Verdict::Return { attempts: 1 }));
        assert_eq!(clock.reads(), 0);
    }

    #[test]
    fn dropping_a_call_during_a_probe_frees_the_probe() {
        let clock = ManualClock::new();
        let p = policy(&clock);
        let b = p.breaker().allow().unwrap();
        p.breaker().record(b, Outcome::Failure).unwrap();
        clock.advance(Duration::from_secs(10));
        let mut e = Execution::new(&p, NO_LIMITS).unwrap();
        assert!(matches!(e.next_step().unwrap(), Step::Attempt(a) if a.probe));
        assert_eq!(p.breaker().snapshot().probes_in_flight, 1);
        drop(e);
        assert_eq!(p.breaker().snapshot().probes_in_flight, 0);
    }

    #[test]
    fn stop_after_a_wait_gives_up_with_that_wait() {
        let clock = ManualClock::new();
        let p = policy(&clock);
        let mut e = Execution::new(&p, NO_LIMITS).unwrap();
        assert_eq!(e.stop().unwrap_err().name(), "invalid_input");
        e.next_step().unwrap();
        let wait = e.complete(Attempted::Raised(Outcome::Failure)).unwrap();
        let Step::Wait(w) = wait else { panic!("{wait:?}") };
        let v = e.stop().unwrap();
        assert_eq!(
            v,
            Verdict::GiveUp(GaveUp {
                reason: GiveUpReason::AttemptsExhausted,
                attempts: 1,
                retry_after: Some(w.delay),
                server_delay: None,
                capped: false,
            })
        );
        assert_eq!(e.next_step().unwrap(), Step::Finish(v));
    }

    fn policy_with_quota(clock: &ManualClock) -> Policy {
        let p = policy(clock);
        Policy::new(
            Arc::clone(p.breaker()),
            Arc::clone(p.budget()),
            Some(Arc::new(
                crate::quota::RetryQuota::new(crate::quota::QuotaConfig::default()).unwrap(),
            )),
            Classifier::default(),
        )
        .unwrap()
    }

    #[test]
    fn a_cancellation_at_the_limit_ends_the_call_as_a_recorded_timeout() {
        let clock = ManualClock::new();
        let p = policy_with_quota(&clock);
        let limits = ExecutionConfig {
            attempt_timeout: Some(Duration::from_millis(100)),
            total_timeout: None,
        };
        let mut e = Execution::new(&p, limits).unwrap();
        e.next_step().unwrap();
        clock.advance(Duration::from_millis(100));
        let v = e.complete(Attempted::Cancelled).unwrap();
        assert_eq!(v, Step::Finish(Verdict::Cancelled { attempts: 1 }));
        assert_eq!(e.last_outcome(), Some(Outcome::Timeout));
        // The breaker counted the timeout (threshold 1: open); no retry was bought.
        assert_eq!(p.breaker().snapshot().opens, 1);
        assert_eq!(p.quota().unwrap().available(), 500);
        // The same through cancel() and through a drop past the limit.
        p.breaker().reset();
        let mut e = Execution::new(&p, limits).unwrap();
        e.next_step().unwrap();
        clock.advance(Duration::from_millis(150));
        assert_eq!(e.cancel(), Verdict::Cancelled { attempts: 1 });
        assert_eq!(p.quota().unwrap().available(), 500);
        p.breaker().reset();
        let mut e = Execution::new(&p, limits).unwrap();
        e.next_step().unwrap();
        clock.advance(Duration::from_millis(150));
        drop(e);
        assert_eq!(p.quota().unwrap().available(), 500);
        assert_eq!(p.breaker().snapshot().opens, 3);
    }

    #[test]
    fn a_forgone_retry_gives_its_tokens_back() {
        let clock = ManualClock::new();
        let p = policy_with_quota(&clock);
        let forgo: [fn(&mut Execution<&Policy>); 3] = [
            |e| {
                e.cancel();
            },
            |e| {
                e.stop().unwrap();
            },
            |e| drop(std::mem::replace(e, Execution::new(e.policy, NO_LIMITS).unwrap())),
        ];
        for f in forgo {
            p.breaker().reset();
            let mut e = Execution::new(&p, NO_LIMITS).unwrap();
            e.next_step().unwrap();
            assert!(matches!(
                e.complete(Attempted::Raised(Outcome::Failure)).unwrap(),
                Step::Wait(_)
            ));
            assert_eq!(p.quota().unwrap().available(), 495, "the retry was paid for");
            f(&mut e);
            assert_eq!(p.quota().unwrap().available(), 500, "and given back when forgone");
        }
    }

    #[test]
    fn steps_out_of_order_are_refused() {
        let clock = ManualClock::new();
        let p = policy(&clock);
        let mut e = Execution::new(&p, NO_LIMITS).unwrap();
        assert_eq!(
            e.complete(Attempted::Cancelled).unwrap_err().name(),
            "invalid_input"
        );
        e.next_step().unwrap();
        assert_eq!(e.next_step().unwrap_err().name(), "invalid_input");
        let zero = ExecutionConfig {
            attempt_timeout: Some(Duration::ZERO),
            total_timeout: None,
        };
        assert_eq!(
            Execution::new(&p, zero).unwrap_err().field,
            "execute.attempt_timeout"
        );
    }
}
