//! What one logical call's retry loop hands its helper: the call's time limits, what an attempt
//! came to, the next step and the final verdict (see `mod.rs` for the loop itself).

use std::time::Duration;

#[cfg(doc)]
use super::Execution;
use crate::breaker::Outcome;
use crate::budget::{GiveUpReason, WaitSource};
use crate::error::ConfigError;

/// The time limits of one logical call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
}
