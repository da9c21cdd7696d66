//! Retry budget: when to retry, how long to wait, and when to give up.
//!
//! Two paths (incident 3, Segment's analytics SDKs):
//! * **Rate-limit path**: an answer with a usable Retry-After ([`Outcome::RetryLater`]). A
//!   rate-limit **episode** starts at the first such answer and ends at the next answer that is
//!   not one. The episode has a total budget (`max_rate_limit_duration`, default 30 min) and one
//!   wait has a cap (`retry_after_cap`, default 300 s), a guard against an absurd header, not a
//!   second budget. The decision reads the clock once: `remaining = budget - (now - start)`;
//!   `remaining <= 0` gives up (`budget_spent`); `wait = min(retry_after, cap)`; if
//!   `wait > remaining` it gives up (`retry_after_exceeds_remaining`). The wait is **never
//!   shortened** to fit the budget: a request before the time the server named is already
//!   refused. Above the cap, the wait is the cap and the decision says `capped` (the cap guards
//!   against an absurd header), or, with `give_up_above_cap`, the call gives up at once
//!   (`retry_after_above_cap`) with the server's delay attached.
//! * **Counted path**: transient failures and rate limits without a usable hint. Exponential
//!   backoff (500 ms doubling to 60 s), at most `max_retries` retries (10), inside
//!   `max_backoff_duration` (12 h) from the call's first failure, by the same give-up rule
//!   (`attempts_exhausted`, `budget_spent`, `backoff_exceeds_remaining`).
//!
//! The budget (and its episode) is shared by every caller of an upstream; the per-call part
//! (retries made, first failure) lives in a [`RetryState`] that each logical call owns.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::backoff::{Backoff, Prng};
use crate::breaker::Outcome;
use crate::clock::{Clock, Instant, LazyNow};
use crate::error::ConfigError;
use crate::sync::{AtomicBool, Mutex};

/// Upper bound on [`BudgetConfig::max_retries`].
pub const MAX_RETRIES: u32 = 1_000_000;

/// Configuration of a [`RetryBudget`].
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetConfig {
    /// Total time one rate-limit episode may take. Default 30 min. Must leave room for two
    /// capped waits (>= 2 × `retry_after_cap`).
    pub max_rate_limit_duration: Duration,
    /// Cap on one Retry-After wait. Default 300 s. Must be > 0.
    pub retry_after_cap: Duration,
    /// Retries allowed on the counted path (0..=1000000; 0 disables it). Default 10.
    pub max_retries: u32,
    /// Backoff of the counted path. Default 500 ms doubling to 60 s, no jitter.
    pub backoff: Backoff,
    /// Total time of the counted path from a call's first failure. Default 12 h.
    pub max_backoff_duration: Duration,
    /// What to do when a server asks for longer than `retry_after_cap`: `false` (default) waits
    /// the cap and says `capped` (the guard against an absurd header); `true` gives up at once
    /// with [`GiveUpReason::RetryAfterAboveCap`] and the server's delay, for callers who would
    /// rather reschedule than ask before the time the server named.
    pub give_up_above_cap: bool,
    /// Seed of the jitter PRNG.
    pub seed: u64,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        BudgetConfig {
            max_rate_limit_duration: Duration::from_secs(1800),
            retry_after_cap: Duration::from_secs(300),
            max_retries: 10,
            backoff: Backoff::exponential(Duration::from_millis(500), 2.0, Duration::from_secs(60)),
            max_backoff_duration: Duration::from_secs(12 * 3600),
            give_up_above_cap: false,
            seed: 0,
        }
    }
}

fn secs(d: Duration) -> String {
    let ms = d.as_millis();
    if ms % 1000 == 0 {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

impl BudgetConfig {
    /// Checks every field; the error names the field and the rule.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.retry_after_cap.is_zero() {
            return Err(ConfigError::new(
                "budget.retry_after_cap",
                "must be greater than 0",
            ));
        }
        if self.max_rate_limit_duration.is_zero() {
            return Err(ConfigError::new(
                "budget.max_rate_limit_duration",
                "must be greater than 0",
            ));
        }
        if self.max_rate_limit_duration < self.retry_after_cap.saturating_mul(2) {
            return Err(ConfigError::new(
                "budget.max_rate_limit_duration",
                format!(
                    "budget {} against a {} cap leaves no room to retry: it must be at least twice \
                     retry_after_cap (room for two capped waits)",
                    secs(self.max_rate_limit_duration),
                    secs(self.retry_after_cap)
                ),
            ));
        }
        if self.max_retries > MAX_RETRIES {
            return Err(ConfigError::new(
                "budget.max_retries",
                "must be between 0 and 1000000",
            ));
        }
        self.backoff.validate("budget.backoff")?;
        if self.max_backoff_duration.is_zero() {
            return Err(ConfigError::new(
                "budget.max_backoff_duration",
                "must be greater than 0",
            ));
        }
        Ok(())
    }
}

/// Why a caller should stop retrying.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GiveUpReason {
    /// Nothing is left of the budget (`remaining <= 0`).
    BudgetSpent,
    /// The server's wait (after the cap) does not fit what is left of the episode.
    RetryAfterExceedsRemaining,
    /// The server asked for longer than the cap and the budget is set to give up then
    /// ([`BudgetConfig::give_up_above_cap`]).
    RetryAfterAboveCap,
    /// The next backoff does not fit what is left of the counted budget.
    BackoffExceedsRemaining,
    /// The counted path used all its retries.
    AttemptsExhausted,
    /// The answer is final (a 4xx answer): retrying cannot help.
    NotRetryable,
    /// The shared retry quota cannot pay for another retry.
    QuotaEmpty,
    /// The breaker stays open beyond what is left of the budget.
    BreakerOpen,
    /// The call was cancelled.
    Cancelled,
    /// The call's total time ran out, or the next wait would not leave time for another
    /// attempt within it (an execution's `total_timeout`).
    TotalTimeout,
}

/// Where a retry's delay came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WaitSource {
    /// The server's Retry-After (possibly capped).
    RetryAfter,
    /// The counted path's backoff.
    Backoff,
    /// The breaker's time until its next probe (it was longer than the budget's wait).
    Breaker,
}

/// A budget decision for one answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The call succeeded: nothing to retry.
    Done,
    /// Retry after `delay`.
    Retry {
        /// How long to wait before the next attempt (never negative; never shorter than the
        /// server asked, up to the cap).
        delay: Duration,
        /// Where the delay came from.
        source: WaitSource,
        /// The server's own Retry-After, before the cap.
        server_delay: Option<Duration>,
        /// Whether the cap shortened the server's value (never silent).
        capped: bool,
    },
    /// Stop retrying.
    GiveUp {
        /// Why.
        reason: GiveUpReason,
        /// The server's own Retry-After, if the answer carried one.
        server_delay: Option<Duration>,
    },
}

/// The per-call part of retrying: one per logical call, owned by its caller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetryState {
    retries: u32,
    first_failure: Option<Instant>,
}

impl RetryState {
    /// A fresh call.
    pub fn new() -> Self {
        Self::default()
    }

    /// Retries taken on the counted path.
    pub fn retries(&self) -> u32 {
        self.retries
    }

    /// When the counted path started for this call.
    pub fn first_failure(&self) -> Option<Instant> {
        self.first_failure
    }
}

#[derive(Debug)]
struct Inner {
    episode_start: Option<Instant>,
    rng: Prng,
}

/// The retry budget of one upstream. `Send + Sync`; share it between the upstream's callers.
#[derive(Debug)]
pub struct RetryBudget {
    config: BudgetConfig,
    clock: Arc<dyn Clock>,
    inner: Mutex<Inner>,
    // Mirrors `inner.episode_start.is_some()` so that a success with no episode under way (every
    // call to a healthy upstream) ends without taking the lock.
    episode_active: AtomicBool,
}

impl RetryBudget {
    /// A budget with no episode under way.
    pub fn new(config: BudgetConfig, clock: Arc<dyn Clock>) -> Result<RetryBudget, ConfigError> {
        config.validate()?;
        Ok(RetryBudget {
            inner: Mutex::new(Inner {
                episode_start: None,
                rng: Prng::new(config.seed),
            }),
            config,
            clock,
            episode_active: AtomicBool::new(false),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &BudgetConfig {
        &self.config
    }

    /// The clock this budget reads.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// When the current rate-limit episode started, if one is under way.
    pub fn episode_start(&self) -> Option<Instant> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).episode_start
    }

    /// Decides what to do after an answer. Reads the clock at most once (not at all for a
    /// success or a final answer).
    pub fn decide(&self, call: &mut RetryState, outcome: Outcome) -> Decision {
        self.decide_with(call, outcome, &LazyNow::new(&*self.clock))
    }

    pub(crate) fn decide_with(&self, call: &mut RetryState, outcome: Outcome, now: &LazyNow<'_>) -> Decision {
        if outcome == Outcome::Success && !self.episode_active.load(Ordering::Acquire) {
            return Decision::Done;
        }
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let decision = self.decide_locked(&mut inner, call, outcome, now);
        self.episode_active
            .store(inner.episode_start.is_some(), Ordering::Release);
        decision
    }

    fn decide_locked(
        &self,
        inner: &mut Inner,
        call: &mut RetryState,
        outcome: Outcome,
        now: &LazyNow<'_>,
    ) -> Decision {
        match outcome {
            Outcome::Success => {
                inner.episode_start = None;
                Decision::Done
            }
            Outcome::Answer => {
                inner.episode_start = None;
                Decision::GiveUp {
                    reason: GiveUpReason::NotRetryable,
                    server_delay: None,
                }
            }
            Outcome::Cancelled => Decision::GiveUp {
                reason: GiveUpReason::Cancelled,
                server_delay: None,
            },
            Outcome::RetryLater(server) if !server.is_zero() => {
                let t = now.get();
                let start = *inner.episode_start.get_or_insert(t);
                let remaining = self
                    .config
                    .max_rate_limit_duration
                    .saturating_sub(t.saturating_since(start));
                let server_delay = Some(server);
                if remaining.is_zero() {
                    return Decision::GiveUp {
                        reason: GiveUpReason::BudgetSpent,
                        server_delay,
                    };
                }
                let capped = server > self.config.retry_after_cap;
                if capped && self.config.give_up_above_cap {
                    return Decision::GiveUp {
                        reason: GiveUpReason::RetryAfterAboveCap,
                        server_delay,
                    };
                }
                let wait = server.min(self.config.retry_after_cap);
                if wait > remaining {
                    return Decision::GiveUp {
                        reason: GiveUpReason::RetryAfterExceedsRemaining,
                        server_delay,
                    };
                }
                Decision::Retry {
                    delay: wait,
                    source: WaitSource::RetryAfter,
                    server_delay,
                    capped,
                }
            }
            _ => {
                // Failure, Timeout, or a zero retry-later: not a usable hint, so not an episode.
                inner.episode_start = None;
                if call.retries >= self.config.max_retries {
                    return Decision::GiveUp {
                        reason: GiveUpReason::AttemptsExhausted,
                        server_delay: None,
                    };
                }
                let t = now.get();
                let first = *call.first_failure.get_or_insert(t);
                let remaining = self
                    .config
                    .max_backoff_duration
                    .saturating_sub(t.saturating_since(first));
                if remaining.is_zero() {
                    return Decision::GiveUp {
                        reason: GiveUpReason::BudgetSpent,
                        server_delay: None,
                    };
                }
                let delay = self.config.backoff.interval(call.retries, &mut inner.rng);
                if delay > remaining {
                    return Decision::GiveUp {
                        reason: GiveUpReason::BackoffExceedsRemaining,
                        server_delay: None,
                    };
                }
                call.retries += 1;
                Decision::Retry {
                    delay,
                    source: WaitSource::Backoff,
                    server_delay: None,
                    capped: false,
                }
            }
        }
    }

    /// What is left for `call` at `t`: of the rate-limit episode if one is under way, else of
    /// the call's counted budget if it has failed before, else nothing (a first attempt does not
    /// wait for an open breaker: failing fast is the breaker's point).
    pub(crate) fn remaining_at(&self, call: &RetryState, t: Instant) -> Duration {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(start) = inner.episode_start {
            return self
                .config
                .max_rate_limit_duration
                .saturating_sub(t.saturating_since(start));
        }
        match call.first_failure {
            Some(first) => self
                .config
                .max_backoff_duration
                .saturating_sub(t.saturating_since(first)),
            None => Duration::ZERO,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    #[test]
    fn no_room_for_two_waits_says_so() {
        let cfg = BudgetConfig {
            max_rate_limit_duration: Duration::from_secs(300),
            retry_after_cap: Duration::from_secs(300),
            ..BudgetConfig::default()
        };
        let e = cfg.validate().unwrap_err();
        assert_eq!(e.field, "budget.max_rate_limit_duration");
        assert!(
            e.rule
                .starts_with("budget 300s against a 300s cap leaves no room to retry"),
            "{}",
            e.rule
        );
        let cfg = BudgetConfig {
            max_rate_limit_duration: Duration::from_millis(1500),
            retry_after_cap: Duration::from_secs(1),
            ..cfg
        };
        assert!(cfg
            .validate()
            .unwrap_err()
            .rule
            .starts_with("budget 1500ms against a 1s cap"));
    }

    #[test]
    fn the_counted_path_starts_at_the_first_failure() {
        let clock = ManualClock::new();
        let budget = RetryBudget::new(BudgetConfig::default(), Arc::new(clock.clone())).unwrap();
        let mut call = RetryState::new();
        clock.set(Instant::from_millis(700)).unwrap();
        budget.decide(&mut call, Outcome::Failure);
        clock.set(Instant::from_millis(900)).unwrap();
        budget.decide(&mut call, Outcome::Failure);
        assert_eq!(call.first_failure(), Some(Instant::from_millis(700)));
        assert_eq!(call.retries(), 2);
    }
}
