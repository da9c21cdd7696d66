//! The one stable name and numeric code of every enum a binding exchanges, in one table per
//! enum. Names are the conformance suite's spelling; codes are the C ABI's published numbers
//! (never renumbered: a new variant takes the next free code).

use std::time::Duration;

use crate::breaker::{Effect, Outcome, Reason, State};
use crate::budget::{Decision, GiveUpReason, WaitSource};
use crate::error::{ClockError, HoldoffError, PermitError};
use crate::execution::{Attempted, Step, Verdict};
use crate::policy::Before;
use crate::retry_after::{HintSource, Unusable};

/// An enum with one stable name and one numeric code per variant.
pub trait Coded: Copy + Eq + Sized + 'static {
    /// Every variant, in code order.
    const ALL: &'static [Self];
    /// The variant's numeric code (the C ABI's value).
    fn code(self) -> u32;
    /// The variant's stable name (`half_open`, `retry_after_exceeds_remaining`).
    fn name(self) -> &'static str;
    /// The variant with this code, if any.
    fn from_code(code: u32) -> Option<Self> {
        Self::ALL.iter().copied().find(|v| v.code() == code)
    }
    /// The variant with this name, if any.
    fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|v| v.name() == name)
    }
}

/// One table per enum: `Variant = code "name"`, in code order.
macro_rules! coded {
    ($t:ident { $($v:ident = $code:literal $name:literal),+ $(,)? }) => {
        impl Coded for $t {
            const ALL: &'static [Self] = &[$($t::$v),+];
            fn code(self) -> u32 {
                match self { $($t::$v => $code),+ }
            }
            fn name(self) -> &'static str {
                match self { $($t::$v => $name),+ }
            }
        }
    };
}

coded!(State {
    Closed = 0 "closed",
    Open = 1 "open",
    HalfOpen = 2 "half_open",
    ForcedOpen = 3 "forced_open",
    Disabled = 4 "disabled",
});

coded!(Effect {
    Counted = 0 "counted",
    Stale = 1 "stale",
    Ignored = 2 "ignored",
});

coded!(Reason {
    Tripped = 0 "tripped",
    RetryLater = 1 "retry_later",
    ProbeAdmitted = 2 "probe_admitted",
    ProbeFailed = 3 "probe_failed",
    Recovered = 4 "recovered",
    ForcedOpen = 5 "forced_open",
    Disabled = 6 "disabled",
    Reset = 7 "reset",
    FleetOpened = 8 "fleet_opened",
});

coded!(WaitSource {
    RetryAfter = 0 "retry_after",
    Backoff = 1 "backoff",
    Breaker = 2 "breaker",
});

coded!(GiveUpReason {
    BudgetSpent = 0 "budget_spent",
    RetryAfterExceedsRemaining = 1 "retry_after_exceeds_remaining",
    BackoffExceedsRemaining = 2 "backoff_exceeds_remaining",
    AttemptsExhausted = 3 "attempts_exhausted",
    NotRetryable = 4 "not_retryable",
    QuotaEmpty = 5 "quota_empty",
    BreakerOpen = 6 "breaker_open",
    Cancelled = 7 "cancelled",
    RetryAfterAboveCap = 8 "retry_after_above_cap",
    TotalTimeout = 9 "total_timeout",
});

// Code 0 is the C ABI's "usable" (`HOLDOFF_UNUSABLE_NONE`), which is not a reason.
coded!(Unusable {
    Missing = 1 "missing",
    Malformed = 2 "malformed",
    Signed = 3 "signed",
    Conflicting = 4 "conflicting",
});

coded!(HintSource {
    RetryAfter = 0 "retry_after",
    RateLimitReset = 1 "ratelimit_reset",
    XRateLimitReset = 2 "x_ratelimit_reset",
    None = 3 "none",
    RetryAfterMs = 4 "retry_after_ms",
    XMsRetryAfterMs = 5 "x_ms_retry_after_ms",
    RateLimit = 6 "ratelimit",
});

/// The kind of an [`Outcome`] (its delay aside).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutcomeKind {
    /// [`Outcome::Success`].
    Success,
    /// [`Outcome::Answer`].
    Answer,
    /// [`Outcome::Failure`].
    Failure,
    /// [`Outcome::Timeout`].
    Timeout,
    /// [`Outcome::RetryLater`].
    RetryLater,
    /// [`Outcome::Cancelled`].
    Cancelled,
}

coded!(OutcomeKind {
    Success = 0 "success",
    Answer = 1 "answer",
    Failure = 2 "failure",
    Timeout = 3 "timeout",
    RetryLater = 4 "retry_later",
    Cancelled = 5 "cancelled",
});

impl OutcomeKind {
    /// The kind of `o`.
    pub fn of(o: &Outcome) -> OutcomeKind {
        match o {
            Outcome::Success => OutcomeKind::Success,
            Outcome::Answer => OutcomeKind::Answer,
            Outcome::Failure => OutcomeKind::Failure,
            Outcome::Timeout => OutcomeKind::Timeout,
            Outcome::RetryLater(_) => OutcomeKind::RetryLater,
            Outcome::Cancelled => OutcomeKind::Cancelled,
        }
    }

    /// The outcome of this kind; `delay` is the retry-later delay (ignored by other kinds).
    pub fn outcome(self, delay: Duration) -> Outcome {
        match self {
            OutcomeKind::Success => Outcome::Success,
            OutcomeKind::Answer => Outcome::Answer,
            OutcomeKind::Failure => Outcome::Failure,
            OutcomeKind::Timeout => Outcome::Timeout,
            OutcomeKind::RetryLater => Outcome::RetryLater(delay),
            OutcomeKind::Cancelled => Outcome::Cancelled,
        }
    }
}

/// The kind of a [`Decision`] of the retry budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DecisionKind {
    /// [`Decision::Done`].
    Done,
    /// [`Decision::Retry`].
    Retry,
    /// [`Decision::GiveUp`].
    GiveUp,
}

coded!(DecisionKind {
    Done = 0 "done",
    Retry = 1 "retry",
    GiveUp = 2 "give_up",
});

impl DecisionKind {
    /// The kind of `d`.
    pub fn of(d: &Decision) -> DecisionKind {
        match d {
            Decision::Done => DecisionKind::Done,
            Decision::Retry { .. } => DecisionKind::Retry,
            Decision::GiveUp { .. } => DecisionKind::GiveUp,
        }
    }
}

/// What a policy says before an attempt: the kind of a [`Before`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BeforeAction {
    /// [`Before::Go`].
    Go,
    /// [`Before::Wait`].
    Wait,
    /// [`Before::GiveUp`].
    GiveUp,
}

coded!(BeforeAction {
    Go = 0 "go",
    Wait = 1 "wait",
    GiveUp = 2 "give_up",
});

impl BeforeAction {
    /// The kind of `b`.
    pub fn of(b: &Before) -> BeforeAction {
        match b {
            Before::Go(_) => BeforeAction::Go,
            Before::Wait(_) => BeforeAction::Wait,
            Before::GiveUp { .. } => BeforeAction::GiveUp,
        }
    }
}

/// The kind of an execution's [`Step`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StepKind {
    /// [`Step::Attempt`].
    Attempt,
    /// [`Step::Wait`].
    Wait,
    /// [`Step::Finish`].
    Finish,
}

coded!(StepKind {
    Attempt = 0 "attempt",
    Wait = 1 "wait",
    Finish = 2 "finish",
});

impl StepKind {
    /// The kind of `s`.
    pub fn of(s: &Step) -> StepKind {
        match s {
            Step::Attempt(_) => StepKind::Attempt,
            Step::Wait(_) => StepKind::Wait,
            Step::Finish(_) => StepKind::Finish,
        }
    }
}

/// The kind of what an attempt came to ([`Attempted`], its outcome aside).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttemptedKind {
    /// [`Attempted::Returned`].
    Returned,
    /// [`Attempted::Raised`].
    Raised,
    /// [`Attempted::Cancelled`].
    Cancelled,
    /// [`Attempted::Bug`].
    Bug,
}

coded!(AttemptedKind {
    Returned = 0 "returned",
    Raised = 1 "raised",
    Cancelled = 2 "cancelled",
    Bug = 3 "bug",
});

impl AttemptedKind {
    /// The kind of `a`.
    pub fn of(a: &Attempted) -> AttemptedKind {
        match a {
            Attempted::Returned(_) => AttemptedKind::Returned,
            Attempted::Raised(_) => AttemptedKind::Raised,
            Attempted::Cancelled => AttemptedKind::Cancelled,
            Attempted::Bug => AttemptedKind::Bug,
        }
    }

    /// What the attempt came to; `outcome` is used by `Returned` and `Raised` only.
    pub fn attempted(self, outcome: Outcome) -> Attempted {
        match self {
            AttemptedKind::Returned => Attempted::Returned(outcome),
            AttemptedKind::Raised => Attempted::Raised(outcome),
            AttemptedKind::Cancelled => Attempted::Cancelled,
            AttemptedKind::Bug => Attempted::Bug,
        }
    }
}

/// The kind of an execution's [`Verdict`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VerdictKind {
    /// [`Verdict::Return`].
    Return,
    /// [`Verdict::Rethrow`].
    Rethrow,
    /// [`Verdict::BreakerOpen`].
    BreakerOpen,
    /// [`Verdict::GiveUp`].
    GiveUp,
    /// [`Verdict::Cancelled`].
    Cancelled,
    /// [`Verdict::InvalidInput`].
    InvalidInput,
}

coded!(VerdictKind {
    Return = 0 "return",
    Rethrow = 1 "rethrow",
    BreakerOpen = 2 "breaker_open",
    GiveUp = 3 "give_up",
    Cancelled = 4 "cancelled",
    InvalidInput = 5 "invalid_input",
});

impl VerdictKind {
    /// The kind of `v`.
    pub fn of(v: &Verdict) -> VerdictKind {
        match v {
            Verdict::Return { .. } => VerdictKind::Return,
            Verdict::Rethrow { .. } => VerdictKind::Rethrow,
            Verdict::BreakerOpen { .. } => VerdictKind::BreakerOpen,
            Verdict::GiveUp(_) => VerdictKind::GiveUp,
            Verdict::Cancelled { .. } => VerdictKind::Cancelled,
            Verdict::InvalidInput { .. } => VerdictKind::InvalidInput,
        }
    }
}

/// The kind of a [`HoldoffError`]: the name every binding maps to its typed error. The codes
/// are the C ABI's status codes for these errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// [`HoldoffError::Config`].
    InvalidConfig,
    /// [`HoldoffError::Input`].
    InvalidInput,
    /// [`ClockError::Backwards`].
    ClockBackwards,
    /// [`PermitError::AlreadyRecorded`].
    PermitAlreadyRecorded,
    /// [`PermitError::Foreign`].
    ForeignPermit,
}

coded!(ErrorKind {
    InvalidConfig = 200 "invalid_config",
    InvalidInput = 201 "invalid_input",
    ClockBackwards = 202 "clock_backwards",
    PermitAlreadyRecorded = 203 "permit_already_recorded",
    ForeignPermit = 204 "foreign_permit",
});

impl ErrorKind {
    /// The kind of `e`.
    pub fn of(e: &HoldoffError) -> ErrorKind {
        match e {
            HoldoffError::Config(_) => ErrorKind::InvalidConfig,
            HoldoffError::Input(_) => ErrorKind::InvalidInput,
            HoldoffError::Clock(ClockError::Backwards { .. }) => ErrorKind::ClockBackwards,
            HoldoffError::Permit(PermitError::AlreadyRecorded) => ErrorKind::PermitAlreadyRecorded,
            HoldoffError::Permit(PermitError::Foreign) => ErrorKind::ForeignPermit,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names and codes are unique, and each finds its variant again.
    fn table<T: Coded + std::fmt::Debug>() -> Vec<(u32, &'static str)> {
        let rows: Vec<(u32, &str)> = T::ALL.iter().map(|v| (v.code(), v.name())).collect();
        for (i, v) in T::ALL.iter().enumerate() {
            let (code, name) = rows[i];
            assert!(!rows[..i].iter().any(|r| r.0 == code), "{v:?}: code {code} twice");
            assert!(!rows[..i].iter().any(|r| r.1 == name), "{v:?}: name {name} twice");
            assert!(!name.is_empty());
            assert_eq!(T::from_code(code), Some(*v));
            assert_eq!(T::from_name(name), Some(*v));
        }
        assert_eq!(T::from_name(""), None);
        assert_eq!(T::from_code(u32::MAX), None);
        rows
    }

    #[test]
    fn names_and_codes_are_unique_and_round_trip() {
        // The C header's published numbers: these pin them.
        assert_eq!(
            table::<State>(),
            [
                (0, "closed"),
                (1, "open"),
                (2, "half_open"),
                (3, "forced_open"),
                (4, "disabled")
            ]
        );
        assert_eq!(
            table::<OutcomeKind>(),
            [
                (0, "success"),
                (1, "answer"),
                (2, "failure"),
                (3, "timeout"),
                (4, "retry_later"),
                (5, "cancelled")
            ]
        );
        assert_eq!(table::<Effect>(), [(0, "counted"), (1, "stale"), (2, "ignored")]);
        assert_eq!(table::<Reason>().len(), 9);
        assert_eq!(table::<Reason>()[7], (7, "reset"));
        assert_eq!(table::<Reason>()[8], (8, "fleet_opened"));
        assert_eq!(
            table::<WaitSource>(),
            [(0, "retry_after"), (1, "backoff"), (2, "breaker")]
        );
        let reasons = table::<GiveUpReason>();
        assert_eq!(
            reasons[7..],
            [
                (7, "cancelled"),
                (8, "retry_after_above_cap"),
                (9, "total_timeout")
            ]
        );
        assert_eq!(reasons[2], (2, "backoff_exceeds_remaining"));
        assert_eq!(table::<Unusable>()[0], (1, "missing"));
        assert_eq!(
            table::<HintSource>(),
            [
                (0, "retry_after"),
                (1, "ratelimit_reset"),
                (2, "x_ratelimit_reset"),
                (3, "none"),
                (4, "retry_after_ms"),
                (5, "x_ms_retry_after_ms"),
                (6, "ratelimit")
            ]
        );
        assert_eq!(
            table::<DecisionKind>(),
            [(0, "done"), (1, "retry"), (2, "give_up")]
        );
        assert_eq!(table::<BeforeAction>(), [(0, "go"), (1, "wait"), (2, "give_up")]);
        assert_eq!(table::<StepKind>(), [(0, "attempt"), (1, "wait"), (2, "finish")]);
        assert_eq!(
            table::<AttemptedKind>(),
            [(0, "returned"), (1, "raised"), (2, "cancelled"), (3, "bug")]
        );
        assert_eq!(
            table::<VerdictKind>(),
            [
                (0, "return"),
                (1, "rethrow"),
                (2, "breaker_open"),
                (3, "give_up"),
                (4, "cancelled"),
                (5, "invalid_input")
            ]
        );
        assert_eq!(
            table::<ErrorKind>(),
            [
                (200, "invalid_config"),
                (201, "invalid_input"),
                (202, "clock_backwards"),
                (203, "permit_already_recorded"),
                (204, "foreign_permit")
            ]
        );
    }

    #[test]
    fn kinds_of_data_carrying_values() {
        let later = Outcome::RetryLater(Duration::from_secs(3));
        assert_eq!(OutcomeKind::of(&later), OutcomeKind::RetryLater);
        assert_eq!(OutcomeKind::RetryLater.outcome(Duration::from_secs(3)), later);
        for k in OutcomeKind::ALL {
            assert_eq!(OutcomeKind::of(&k.outcome(Duration::ZERO)), *k);
        }
        for k in AttemptedKind::ALL {
            assert_eq!(AttemptedKind::of(&k.attempted(Outcome::Failure)), *k);
        }
        assert_eq!(
            ErrorKind::of(&PermitError::Foreign.into()).name(),
            "foreign_permit"
        );
        assert_eq!(
            VerdictKind::of(&Verdict::Cancelled { attempts: 2 }),
            VerdictKind::Cancelled
        );
    }
}
