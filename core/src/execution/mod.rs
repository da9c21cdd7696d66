//! The retry loop of one logical call, as a sans-IO state machine (`docs/contract.md` §5a).
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

mod steps;
#[cfg(test)]
mod tests;

pub use steps::{
    AttemptPlan, Attempted, ExecutionConfig, GaveUp, Step, Verdict, WaitPlan, DEFAULT_TOTAL_TIMEOUT,
};

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

    /// A call whose first attempt a binding admitted itself, `elapsed` ago, on the breaker's
    /// fast-path word (docs/ffi.md "The fast-path word"), with `permit` (closed, not a probe),
    /// and did not finish there: the execution is as [`Execution::next_step`] would have left it
    /// after admitting that attempt, its limits counted from `elapsed` before the clock's reading
    /// now (one reading; none without limits). Report the attempt with [`Execution::complete`] or
    /// [`Execution::complete_response`]. The attempt is not counted in the policy's metrics: a
    /// binding admits on the word only while they are not counting. Fails with [`ConfigError`]
    /// naming an invalid limit.
    pub fn admitted(
        policy: P,
        config: ExecutionConfig,
        permit: Permit,
        elapsed: Duration,
    ) -> Result<Self, ConfigError> {
        let mut e = Self::new(policy, config)?;
        let now = LazyNow::new(&**e.policy.breaker().clock());
        let elapsed = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        // Read only for a limit, as `next_step` does.
        let start = || Instant::from_nanos(now.get().as_nanos().saturating_sub(elapsed));
        e.run.started = true;
        e.run.deadline = e.config.total_timeout.map(|t| start().saturating_add(t));
        let deadline = match (e.config.attempt_timeout, e.run.deadline) {
            (None, d) => d,
            (Some(a), d) => {
                let own = start().saturating_add(a);
                Some(d.map_or(own, |d| d.min(own)))
            }
        };
        e.run.call.count_admitted();
        e.run.state = State::Attempting { permit, deadline };
        Ok(e)
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
            policy.count_give_up(GiveUpReason::TotalTimeout);
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
                self.policy.count_give_up(GiveUpReason::AttemptsExhausted);
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
        // Cancelled during a wait: the retry it waited for is forgone. A call never started
        // (an execution dropped unused) ends without having been a call: nothing to count.
        self.policy.forgo_retry(&mut self.run.call);
        if self.run.started {
            self.policy.count_give_up(GiveUpReason::Cancelled);
        }
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
