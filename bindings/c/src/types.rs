//! The enums of the C ABI and their stable names.
//!
//! Enums cross the boundary as `uint32_t` (cbindgen emits `typedef uint32_t holdoff_x;`).
//! Values coming **from** C are taken as `u32` and checked, never transmuted: an unknown value is
//! `HOLDOFF_STATUS_INVALID_INPUT`, not undefined behaviour.

use std::ffi::{c_char, CStr};
use std::time::Duration;

use hcore::{Effect, GiveUpReason, HintSource, Outcome, Reason, State, Unusable, WaitSource};

use crate::status::Fail;

/// A breaker's state.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum holdoff_state {
    /// Calls pass; outcomes are counted by the trip policy.
    Closed = 0,
    /// Calls are refused until the next probe is due.
    Open = 1,
    /// A probe was admitted in this episode and recovery is under way.
    HalfOpen = 2,
    /// Opened by an operator; refuses everything until `holdoff_breaker_reset`.
    ForcedOpen = 3,
    /// Admits everything and never trips; outcomes are still counted.
    Disabled = 4,
}

/// What happened to a call (`holdoff_breaker_record`, `holdoff_budget_decide`,
/// `holdoff_policy_after`).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum holdoff_outcome {
    /// The call succeeded.
    Success = 0,
    /// The upstream answered, but not with a success, and retrying would not help (a 404).
    /// Proves the upstream reachable: counts toward recovery like a success.
    Answer = 1,
    /// A transient failure (a 5xx, a refused connection).
    Failure = 2,
    /// The call timed out: a failure that costs more retry quota.
    Timeout = 3,
    /// The upstream asked to be left alone for `retry_later_ns` (a 429/503 with Retry-After).
    /// Opens the breaker at once for that delay; a zero delay is a plain failure.
    RetryLater = 4,
    /// The caller gave up on the call: counts for nothing, frees a probe slot.
    Cancelled = 5,
}

/// What recording an outcome did.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum holdoff_effect {
    /// The outcome was counted and may have moved the breaker.
    Counted = 0,
    /// A stale answer (an earlier episode, a lost probe): kept in metrics only; a stale failure
    /// still discards recovery progress.
    Stale = 1,
    /// Nothing to count (a cancelled call).
    Ignored = 2,
}

/// Why a breaker's state changed.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum holdoff_reason {
    /// The trip policy opened a closed breaker.
    Tripped = 0,
    /// A retry-later outcome opened the breaker for the provider's delay.
    RetryLater = 1,
    /// A probe was admitted.
    ProbeAdmitted = 2,
    /// The current probe failed; the breaker waits the next, longer interval.
    ProbeFailed = 3,
    /// Enough consecutive probe answers: closed.
    Recovered = 4,
    /// An operator forced the breaker open.
    ForcedOpen = 5,
    /// An operator disabled the breaker.
    Disabled = 6,
    /// An operator reset the breaker to closed.
    Reset = 7,
}

/// A breaker's trip policy (`holdoff_breaker_options.trip_policy`).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum holdoff_trip_policy {
    /// `trip_threshold` consecutive failures (the default, 5).
    Consecutive = 0,
    /// `trip_threshold` failures inside a rolling window of `trip_window_ns`.
    Window = 1,
    /// Failure rate >= `trip_rate` over a rolling `trip_window_ns` of `trip_buckets` buckets,
    /// once `trip_min_calls` calls were seen in it.
    Rate = 2,
}

/// The kind of a retry decision.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum holdoff_decision_kind {
    /// The call succeeded: nothing to retry.
    Done = 0,
    /// Retry after `delay_ns`.
    Retry = 1,
    /// Stop retrying, for `reason`.
    GiveUp = 2,
}

/// Where a retry's delay came from.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum holdoff_wait_source {
    /// The server's Retry-After (possibly capped).
    RetryAfter = 0,
    /// The counted path's backoff.
    Backoff = 1,
    /// The breaker's time until its next probe (longer than the budget's wait).
    Breaker = 2,
}

/// Why a caller should stop retrying.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum holdoff_give_up_reason {
    /// Nothing is left of the budget.
    BudgetSpent = 0,
    /// The server's wait (after the cap) does not fit what is left of the episode.
    RetryAfterExceedsRemaining = 1,
    /// The next backoff does not fit what is left of the counted budget.
    BackoffExceedsRemaining = 2,
    /// The counted path used all its retries.
    AttemptsExhausted = 3,
    /// The answer is final (a 4xx answer): retrying cannot help.
    NotRetryable = 4,
    /// The shared retry quota cannot pay for another retry.
    QuotaEmpty = 5,
    /// The breaker stays open beyond what is left of the budget.
    BreakerOpen = 6,
    /// The call was cancelled.
    Cancelled = 7,
}

/// Why a delay hint is unusable (`HOLDOFF_UNUSABLE_NONE` when it is usable).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum holdoff_unusable {
    /// The hint is usable: see its delay.
    None = 0,
    /// No header, or only whitespace.
    Missing = 1,
    /// Not delay-seconds and not an HTTP-date.
    Malformed = 2,
    /// A signed number (`-5`, `+5`).
    Signed = 3,
    /// Several values that disagree.
    Conflicting = 4,
}

/// Which header a delay hint came from.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum holdoff_hint_source {
    /// `Retry-After` (RFC 9110 §10.2.3).
    RetryAfter = 0,
    /// `RateLimit-Reset` (delta seconds).
    RatelimitReset = 1,
    /// `X-RateLimit-Reset` (Unix epoch seconds).
    XRatelimitReset = 2,
    /// No header carried a hint.
    None = 3,
}

/// What a policy says before an attempt.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum holdoff_before_action {
    /// Make the attempt with the permit written to `out_permit`.
    Go = 0,
    /// The breaker is open: wait `delay_ns`, then ask again.
    Wait = 1,
    /// Stop: the breaker stays open beyond what is left of the budget.
    GiveUp = 2,
}

pub(crate) fn ns(d: Duration) -> u64 {
    // Saturates past u64::MAX ns (about 584 years): no holdoff figure gets near it in practice.
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

pub(crate) fn opt_ns(d: Option<Duration>) -> (u8, u64) {
    match d {
        Some(d) => (1, ns(d)),
        None => (0, 0),
    }
}

impl From<State> for holdoff_state {
    fn from(s: State) -> Self {
        match s {
            State::Closed => holdoff_state::Closed,
            State::Open => holdoff_state::Open,
            State::HalfOpen => holdoff_state::HalfOpen,
            State::ForcedOpen => holdoff_state::ForcedOpen,
            State::Disabled => holdoff_state::Disabled,
        }
    }
}

impl From<Effect> for holdoff_effect {
    fn from(e: Effect) -> Self {
        match e {
            Effect::Counted => holdoff_effect::Counted,
            Effect::Stale => holdoff_effect::Stale,
            Effect::Ignored => holdoff_effect::Ignored,
        }
    }
}

impl From<Reason> for holdoff_reason {
    fn from(r: Reason) -> Self {
        match r {
            Reason::Tripped => holdoff_reason::Tripped,
            Reason::RetryLater => holdoff_reason::RetryLater,
            Reason::ProbeAdmitted => holdoff_reason::ProbeAdmitted,
            Reason::ProbeFailed => holdoff_reason::ProbeFailed,
            Reason::Recovered => holdoff_reason::Recovered,
            Reason::ForcedOpen => holdoff_reason::ForcedOpen,
            Reason::Disabled => holdoff_reason::Disabled,
            Reason::Reset => holdoff_reason::Reset,
        }
    }
}

impl From<WaitSource> for holdoff_wait_source {
    fn from(w: WaitSource) -> Self {
        match w {
            WaitSource::RetryAfter => holdoff_wait_source::RetryAfter,
            WaitSource::Backoff => holdoff_wait_source::Backoff,
            WaitSource::Breaker => holdoff_wait_source::Breaker,
        }
    }
}

impl From<GiveUpReason> for holdoff_give_up_reason {
    fn from(r: GiveUpReason) -> Self {
        use holdoff_give_up_reason as G;
        match r {
            GiveUpReason::BudgetSpent => G::BudgetSpent,
            GiveUpReason::RetryAfterExceedsRemaining => G::RetryAfterExceedsRemaining,
            GiveUpReason::BackoffExceedsRemaining => G::BackoffExceedsRemaining,
            GiveUpReason::AttemptsExhausted => G::AttemptsExhausted,
            GiveUpReason::NotRetryable => G::NotRetryable,
            GiveUpReason::QuotaEmpty => G::QuotaEmpty,
            GiveUpReason::BreakerOpen => G::BreakerOpen,
            GiveUpReason::Cancelled => G::Cancelled,
        }
    }
}

impl From<Unusable> for holdoff_unusable {
    fn from(u: Unusable) -> Self {
        match u {
            Unusable::Missing => holdoff_unusable::Missing,
            Unusable::Malformed => holdoff_unusable::Malformed,
            Unusable::Signed => holdoff_unusable::Signed,
            Unusable::Conflicting => holdoff_unusable::Conflicting,
        }
    }
}

impl From<HintSource> for holdoff_hint_source {
    fn from(s: HintSource) -> Self {
        match s {
            HintSource::RetryAfter => holdoff_hint_source::RetryAfter,
            HintSource::RateLimitReset => holdoff_hint_source::RatelimitReset,
            HintSource::XRateLimitReset => holdoff_hint_source::XRatelimitReset,
            HintSource::None => holdoff_hint_source::None,
        }
    }
}

/// The outcome given by C as (kind, delay), checked.
pub(crate) fn outcome_from_c(kind: u32, retry_later_ns: u64) -> Result<Outcome, Fail> {
    Ok(match kind {
        0 => Outcome::Success,
        1 => Outcome::Answer,
        2 => Outcome::Failure,
        3 => Outcome::Timeout,
        4 => Outcome::RetryLater(hcore::units::from_nanos_u64(retry_later_ns)),
        5 => Outcome::Cancelled,
        _ => {
            return Err(Fail::input(
                "outcome",
                format!("{kind} is not a holdoff_outcome (0..=5)"),
            ))
        }
    })
}

/// An outcome as (kind, retry-later delay in ns) for C.
pub(crate) fn outcome_to_c(o: Outcome) -> (holdoff_outcome, u64) {
    match o {
        Outcome::Success => (holdoff_outcome::Success, 0),
        Outcome::Answer => (holdoff_outcome::Answer, 0),
        Outcome::Failure => (holdoff_outcome::Failure, 0),
        Outcome::Timeout => (holdoff_outcome::Timeout, 0),
        Outcome::RetryLater(d) => (holdoff_outcome::RetryLater, ns(d)),
        Outcome::Cancelled => (holdoff_outcome::Cancelled, 0),
    }
}

fn name_of(names: &[&'static CStr], v: u32) -> *const c_char {
    names.get(v as usize).map_or(std::ptr::null(), |n| n.as_ptr())
}

/// The stable name of a `holdoff_state` (`closed`, `open`, `half_open`, `forced_open`,
/// `disabled`); NULL for an unknown value. Static string.
#[no_mangle]
pub extern "C" fn holdoff_state_name(state: u32) -> *const c_char {
    name_of(
        &[c"closed", c"open", c"half_open", c"forced_open", c"disabled"],
        state,
    )
}

/// The stable name of a `holdoff_outcome` (`success`, `answer`, `failure`, `timeout`,
/// `retry_later`, `cancelled`); NULL for an unknown value. Static string.
#[no_mangle]
pub extern "C" fn holdoff_outcome_name(outcome: u32) -> *const c_char {
    name_of(
        &[
            c"success",
            c"answer",
            c"failure",
            c"timeout",
            c"retry_later",
            c"cancelled",
        ],
        outcome,
    )
}

/// The stable name of a `holdoff_effect` (`counted`, `stale`, `ignored`); NULL for an unknown
/// value. Static string.
#[no_mangle]
pub extern "C" fn holdoff_effect_name(effect: u32) -> *const c_char {
    name_of(&[c"counted", c"stale", c"ignored"], effect)
}

/// The stable name of a `holdoff_reason` (`tripped`, `retry_later`, `probe_admitted`,
/// `probe_failed`, `recovered`, `forced_open`, `disabled`, `reset`); NULL for an unknown value.
/// Static string.
#[no_mangle]
pub extern "C" fn holdoff_reason_name(reason: u32) -> *const c_char {
    name_of(
        &[
            c"tripped",
            c"retry_later",
            c"probe_admitted",
            c"probe_failed",
            c"recovered",
            c"forced_open",
            c"disabled",
            c"reset",
        ],
        reason,
    )
}

/// The stable name of a `holdoff_decision_kind` (`done`, `retry`, `give_up`); NULL for an
/// unknown value. Static string.
#[no_mangle]
pub extern "C" fn holdoff_decision_kind_name(kind: u32) -> *const c_char {
    name_of(&[c"done", c"retry", c"give_up"], kind)
}

/// The stable name of a `holdoff_wait_source` (`retry_after`, `backoff`, `breaker`); NULL for
/// an unknown value. Static string.
#[no_mangle]
pub extern "C" fn holdoff_wait_source_name(source: u32) -> *const c_char {
    name_of(&[c"retry_after", c"backoff", c"breaker"], source)
}

/// The stable name of a `holdoff_give_up_reason` (`budget_spent`,
/// `retry_after_exceeds_remaining`, `backoff_exceeds_remaining`, `attempts_exhausted`,
/// `not_retryable`, `quota_empty`, `breaker_open`, `cancelled`); NULL for an unknown value.
/// Static string.
#[no_mangle]
pub extern "C" fn holdoff_give_up_reason_name(reason: u32) -> *const c_char {
    name_of(
        &[
            c"budget_spent",
            c"retry_after_exceeds_remaining",
            c"backoff_exceeds_remaining",
            c"attempts_exhausted",
            c"not_retryable",
            c"quota_empty",
            c"breaker_open",
            c"cancelled",
        ],
        reason,
    )
}

/// The stable name of a `holdoff_unusable` (`none`, `missing`, `malformed`, `signed`,
/// `conflicting`); NULL for an unknown value. Static string.
#[no_mangle]
pub extern "C" fn holdoff_unusable_name(unusable: u32) -> *const c_char {
    name_of(
        &[c"none", c"missing", c"malformed", c"signed", c"conflicting"],
        unusable,
    )
}

/// The stable name of a `holdoff_hint_source` (`retry_after`, `ratelimit_reset`,
/// `x_ratelimit_reset`, `none`); NULL for an unknown value. Static string.
#[no_mangle]
pub extern "C" fn holdoff_hint_source_name(source: u32) -> *const c_char {
    name_of(
        &[c"retry_after", c"ratelimit_reset", c"x_ratelimit_reset", c"none"],
        source,
    )
}

/// The stable name of a `holdoff_before_action` (`go`, `wait`, `give_up`); NULL for an
/// unknown value. Static string.
#[no_mangle]
pub extern "C" fn holdoff_before_action_name(action: u32) -> *const c_char {
    name_of(&[c"go", c"wait", c"give_up"], action)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(p: *const c_char) -> &'static str {
        assert!(!p.is_null());
        // SAFETY: every name is a static C string literal.
        unsafe { CStr::from_ptr(p) }.to_str().unwrap()
    }

    #[test]
    fn names_match_the_core() {
        for st in [
            State::Closed,
            State::Open,
            State::HalfOpen,
            State::ForcedOpen,
            State::Disabled,
        ] {
            assert_eq!(s(holdoff_state_name(holdoff_state::from(st) as u32)), st.name());
        }
        for r in [
            Reason::Tripped,
            Reason::RetryLater,
            Reason::ProbeAdmitted,
            Reason::ProbeFailed,
            Reason::Recovered,
            Reason::ForcedOpen,
            Reason::Disabled,
            Reason::Reset,
        ] {
            assert_eq!(s(holdoff_reason_name(holdoff_reason::from(r) as u32)), r.name());
        }
        for g in [
            GiveUpReason::BudgetSpent,
            GiveUpReason::RetryAfterExceedsRemaining,
            GiveUpReason::BackoffExceedsRemaining,
            GiveUpReason::AttemptsExhausted,
            GiveUpReason::NotRetryable,
            GiveUpReason::QuotaEmpty,
            GiveUpReason::BreakerOpen,
            GiveUpReason::Cancelled,
        ] {
            assert_eq!(
                s(holdoff_give_up_reason_name(holdoff_give_up_reason::from(g) as u32)),
                g.name()
            );
        }
        for o in [
            Outcome::Success,
            Outcome::Answer,
            Outcome::Failure,
            Outcome::Timeout,
            Outcome::RetryLater(Duration::from_secs(1)),
            Outcome::Cancelled,
        ] {
            let (k, d) = outcome_to_c(o);
            assert_eq!(s(holdoff_outcome_name(k as u32)), o.name());
            assert_eq!(outcome_from_c(k as u32, d).unwrap(), o);
        }
        for e in [Effect::Counted, Effect::Stale, Effect::Ignored] {
            assert_eq!(s(holdoff_effect_name(holdoff_effect::from(e) as u32)), e.name());
        }
        for w in [WaitSource::RetryAfter, WaitSource::Backoff, WaitSource::Breaker] {
            assert_eq!(
                s(holdoff_wait_source_name(holdoff_wait_source::from(w) as u32)),
                w.name()
            );
        }
        for u in [
            Unusable::Missing,
            Unusable::Malformed,
            Unusable::Signed,
            Unusable::Conflicting,
        ] {
            assert_eq!(
                s(holdoff_unusable_name(holdoff_unusable::from(u) as u32)),
                u.name()
            );
        }
        assert!(holdoff_state_name(5).is_null());
        assert!(outcome_from_c(6, 0).is_err());
    }
}
