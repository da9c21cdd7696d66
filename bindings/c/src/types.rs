//! The enums of the C ABI and their stable names.
//!
//! Enums cross the boundary as `uint32_t` (cbindgen emits `typedef uint32_t holdoff_x;`).
//! Values coming **from** C are taken as `u32` and checked, never transmuted: an unknown value is
//! `HOLDOFF_STATUS_INVALID_INPUT`, not undefined behaviour.

use std::ffi::{c_char, CStr, CString};
use std::sync::OnceLock;
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
    /// The server asked for longer than the Retry-After cap and the budget gives up then
    /// (`holdoff_budget_options.give_up_above_cap`); the decision carries the server's delay.
    RetryAfterAboveCap = 8,
    /// The call's total time ran out, or the next wait would not leave time for another attempt
    /// within it.
    TotalTimeout = 9,
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

/// Which header a delay hint came from. The values are stable codes, not the order of
/// precedence (`holdoff_hint_from_headers` gives that).
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
    /// `retry-after-ms` (milliseconds).
    RetryAfterMs = 4,
    /// `x-ms-retry-after-ms` (milliseconds).
    XMsRetryAfterMs = 5,
    /// `RateLimit`, the structured field of the IETF rate-limit draft (its `t` parameter,
    /// seconds).
    Ratelimit = 6,
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

/// A C enum: its values in code order, so that a `u32` from C is checked against them and each
/// code finds its core variant (and so its name).
pub(crate) trait CEnum: Copy + Sized + 'static {
    /// Every value, in code order.
    const ALL: &'static [Self];
    /// The value's `uint32_t` code.
    fn code(self) -> u32;
    /// The value with that code, if any.
    fn from_code(v: u32) -> Option<Self> {
        Self::ALL.iter().copied().find(|c| c.code() == v)
    }
}

macro_rules! c_enum {
    ($t:ident: $($v:ident),+ $(,)?) => {
        impl CEnum for $t {
            const ALL: &'static [Self] = &[$($t::$v),+];
            fn code(self) -> u32 {
                self as u32
            }
        }
    };
}
pub(crate) use c_enum;

c_enum!(holdoff_state: Closed, Open, HalfOpen, ForcedOpen, Disabled);
c_enum!(holdoff_outcome: Success, Answer, Failure, Timeout, RetryLater, Cancelled);
c_enum!(holdoff_effect: Counted, Stale, Ignored);
c_enum!(
    holdoff_reason: Tripped,
    RetryLater,
    ProbeAdmitted,
    ProbeFailed,
    Recovered,
    ForcedOpen,
    Disabled,
    Reset,
);
c_enum!(holdoff_decision_kind: Done, Retry, GiveUp);
c_enum!(holdoff_wait_source: RetryAfter, Backoff, Breaker);
c_enum!(
    holdoff_give_up_reason: BudgetSpent,
    RetryAfterExceedsRemaining,
    BackoffExceedsRemaining,
    AttemptsExhausted,
    NotRetryable,
    QuotaEmpty,
    BreakerOpen,
    Cancelled,
    RetryAfterAboveCap,
    TotalTimeout,
);
c_enum!(holdoff_unusable: None, Missing, Malformed, Signed, Conflicting);
c_enum!(
    holdoff_hint_source: RetryAfter,
    RatelimitReset,
    XRatelimitReset,
    None,
    RetryAfterMs,
    XMsRetryAfterMs,
    Ratelimit,
);
c_enum!(holdoff_before_action: Go, Wait, GiveUp);

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

// Each C enum maps to its core enum both ways, by exhaustive matches: a variant added to the
// core does not compile here until it has a C code.

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

impl From<holdoff_state> for State {
    fn from(s: holdoff_state) -> Self {
        match s {
            holdoff_state::Closed => State::Closed,
            holdoff_state::Open => State::Open,
            holdoff_state::HalfOpen => State::HalfOpen,
            holdoff_state::ForcedOpen => State::ForcedOpen,
            holdoff_state::Disabled => State::Disabled,
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

impl From<holdoff_effect> for Effect {
    fn from(e: holdoff_effect) -> Self {
        match e {
            holdoff_effect::Counted => Effect::Counted,
            holdoff_effect::Stale => Effect::Stale,
            holdoff_effect::Ignored => Effect::Ignored,
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

impl From<holdoff_reason> for Reason {
    fn from(r: holdoff_reason) -> Self {
        match r {
            holdoff_reason::Tripped => Reason::Tripped,
            holdoff_reason::RetryLater => Reason::RetryLater,
            holdoff_reason::ProbeAdmitted => Reason::ProbeAdmitted,
            holdoff_reason::ProbeFailed => Reason::ProbeFailed,
            holdoff_reason::Recovered => Reason::Recovered,
            holdoff_reason::ForcedOpen => Reason::ForcedOpen,
            holdoff_reason::Disabled => Reason::Disabled,
            holdoff_reason::Reset => Reason::Reset,
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

impl From<holdoff_wait_source> for WaitSource {
    fn from(w: holdoff_wait_source) -> Self {
        match w {
            holdoff_wait_source::RetryAfter => WaitSource::RetryAfter,
            holdoff_wait_source::Backoff => WaitSource::Backoff,
            holdoff_wait_source::Breaker => WaitSource::Breaker,
        }
    }
}

impl From<GiveUpReason> for holdoff_give_up_reason {
    fn from(r: GiveUpReason) -> Self {
        use holdoff_give_up_reason as G;
        match r {
            GiveUpReason::BudgetSpent => G::BudgetSpent,
            GiveUpReason::RetryAfterExceedsRemaining => G::RetryAfterExceedsRemaining,
            GiveUpReason::RetryAfterAboveCap => G::RetryAfterAboveCap,
            GiveUpReason::BackoffExceedsRemaining => G::BackoffExceedsRemaining,
            GiveUpReason::AttemptsExhausted => G::AttemptsExhausted,
            GiveUpReason::NotRetryable => G::NotRetryable,
            GiveUpReason::QuotaEmpty => G::QuotaEmpty,
            GiveUpReason::BreakerOpen => G::BreakerOpen,
            GiveUpReason::Cancelled => G::Cancelled,
            GiveUpReason::TotalTimeout => G::TotalTimeout,
        }
    }
}

impl From<holdoff_give_up_reason> for GiveUpReason {
    fn from(r: holdoff_give_up_reason) -> Self {
        use holdoff_give_up_reason as G;
        match r {
            G::BudgetSpent => GiveUpReason::BudgetSpent,
            G::RetryAfterExceedsRemaining => GiveUpReason::RetryAfterExceedsRemaining,
            G::RetryAfterAboveCap => GiveUpReason::RetryAfterAboveCap,
            G::BackoffExceedsRemaining => GiveUpReason::BackoffExceedsRemaining,
            G::AttemptsExhausted => GiveUpReason::AttemptsExhausted,
            G::NotRetryable => GiveUpReason::NotRetryable,
            G::QuotaEmpty => GiveUpReason::QuotaEmpty,
            G::BreakerOpen => GiveUpReason::BreakerOpen,
            G::Cancelled => GiveUpReason::Cancelled,
            G::TotalTimeout => GiveUpReason::TotalTimeout,
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

impl From<holdoff_unusable> for Option<Unusable> {
    fn from(u: holdoff_unusable) -> Self {
        match u {
            holdoff_unusable::None => None,
            holdoff_unusable::Missing => Some(Unusable::Missing),
            holdoff_unusable::Malformed => Some(Unusable::Malformed),
            holdoff_unusable::Signed => Some(Unusable::Signed),
            holdoff_unusable::Conflicting => Some(Unusable::Conflicting),
        }
    }
}

impl From<HintSource> for holdoff_hint_source {
    fn from(s: HintSource) -> Self {
        use holdoff_hint_source as H;
        match s {
            HintSource::RetryAfterMs => H::RetryAfterMs,
            HintSource::XMsRetryAfterMs => H::XMsRetryAfterMs,
            HintSource::RetryAfter => H::RetryAfter,
            HintSource::RateLimit => H::Ratelimit,
            HintSource::RateLimitReset => H::RatelimitReset,
            HintSource::XRateLimitReset => H::XRatelimitReset,
            HintSource::None => H::None,
        }
    }
}

impl From<holdoff_hint_source> for HintSource {
    fn from(s: holdoff_hint_source) -> Self {
        use holdoff_hint_source as H;
        match s {
            H::RetryAfterMs => HintSource::RetryAfterMs,
            H::XMsRetryAfterMs => HintSource::XMsRetryAfterMs,
            H::RetryAfter => HintSource::RetryAfter,
            H::Ratelimit => HintSource::RateLimit,
            H::RatelimitReset => HintSource::RateLimitReset,
            H::XRatelimitReset => HintSource::XRateLimitReset,
            H::None => HintSource::None,
        }
    }
}

/// The outcome given by C as (kind, delay), checked.
pub(crate) fn outcome_from_c(kind: u32, retry_later_ns: u64) -> Result<Outcome, Fail> {
    let k = holdoff_outcome::from_code(kind)
        .ok_or_else(|| Fail::input("outcome", format!("{kind} is not a holdoff_outcome (0..=5)")))?;
    Ok(match k {
        holdoff_outcome::Success => Outcome::Success,
        holdoff_outcome::Answer => Outcome::Answer,
        holdoff_outcome::Failure => Outcome::Failure,
        holdoff_outcome::Timeout => Outcome::Timeout,
        holdoff_outcome::RetryLater => Outcome::RetryLater(hcore::units::from_nanos_u64(retry_later_ns)),
        holdoff_outcome::Cancelled => Outcome::Cancelled,
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

/// The core's stable name of the C code `v`, as a static C string; NULL for an unknown code.
/// The NUL-terminated copies are made once per enum (the core's names are Rust strings) and
/// live as long as the process.
pub(crate) fn core_name<C: CEnum>(
    cache: &'static OnceLock<Vec<CString>>,
    v: u32,
    name: fn(C) -> &'static str,
) -> *const c_char {
    let names = cache.get_or_init(|| {
        // The core's names are identifiers: they hold no NUL, so nothing is lost here.
        C::ALL
            .iter()
            .map(|&c| CString::new(name(c)).unwrap_or_default())
            .collect()
    });
    C::ALL
        .iter()
        .position(|c| c.code() == v)
        .map_or(std::ptr::null(), |i| names[i].as_ptr())
}

/// The name of the C code `v` from a list of this binding's own (for enums the core does not
/// name: its decisions and policy actions are data-carrying Rust enums).
pub(crate) fn local_name<C: CEnum>(names: &[&'static CStr], v: u32) -> *const c_char {
    C::ALL
        .iter()
        .position(|c| c.code() == v)
        .and_then(|i| names.get(i))
        .map_or(std::ptr::null(), |n| n.as_ptr())
}

/// The stable name of a `holdoff_state` (`closed`, `open`, `half_open`, `forced_open`,
/// `disabled`; the core's names); NULL for an unknown value. Static string.
#[no_mangle]
pub extern "C" fn holdoff_state_name(state: u32) -> *const c_char {
    static NAMES: OnceLock<Vec<CString>> = OnceLock::new();
    core_name(&NAMES, state, |c: holdoff_state| State::from(c).name())
}

/// The stable name of a `holdoff_outcome` (`success`, `answer`, `failure`, `timeout`,
/// `retry_later`, `cancelled`; the core's names); NULL for an unknown value. Static string.
#[no_mangle]
pub extern "C" fn holdoff_outcome_name(outcome: u32) -> *const c_char {
    static NAMES: OnceLock<Vec<CString>> = OnceLock::new();
    core_name(&NAMES, outcome, |c: holdoff_outcome| {
        outcome_from_c(c as u32, 0).map_or("", |o| o.name())
    })
}

/// The stable name of a `holdoff_effect` (`counted`, `stale`, `ignored`; the core's names);
/// NULL for an unknown value. Static string.
#[no_mangle]
pub extern "C" fn holdoff_effect_name(effect: u32) -> *const c_char {
    static NAMES: OnceLock<Vec<CString>> = OnceLock::new();
    core_name(&NAMES, effect, |c: holdoff_effect| Effect::from(c).name())
}

/// The stable name of a `holdoff_reason` (`tripped`, `retry_later`, `probe_admitted`,
/// `probe_failed`, `recovered`, `forced_open`, `disabled`, `reset`; the core's names); NULL
/// for an unknown value. Static string.
#[no_mangle]
pub extern "C" fn holdoff_reason_name(reason: u32) -> *const c_char {
    static NAMES: OnceLock<Vec<CString>> = OnceLock::new();
    core_name(&NAMES, reason, |c: holdoff_reason| Reason::from(c).name())
}

/// The stable name of a `holdoff_decision_kind` (`done`, `retry`, `give_up`, as the conformance
/// suite spells them); NULL for an unknown value. Static string.
#[no_mangle]
pub extern "C" fn holdoff_decision_kind_name(kind: u32) -> *const c_char {
    local_name::<holdoff_decision_kind>(&[c"done", c"retry", c"give_up"], kind)
}

/// The stable name of a `holdoff_wait_source` (`retry_after`, `backoff`, `breaker`; the core's
/// names); NULL for an unknown value. Static string.
#[no_mangle]
pub extern "C" fn holdoff_wait_source_name(source: u32) -> *const c_char {
    static NAMES: OnceLock<Vec<CString>> = OnceLock::new();
    core_name(&NAMES, source, |c: holdoff_wait_source| {
        WaitSource::from(c).name()
    })
}

/// The stable name of a `holdoff_give_up_reason` (`budget_spent`,
/// `retry_after_exceeds_remaining`, `backoff_exceeds_remaining`, `attempts_exhausted`,
/// `not_retryable`, `quota_empty`, `breaker_open`, `cancelled`, `retry_after_above_cap`,
/// `total_timeout`; the core's names); NULL for an unknown value. Static string.
#[no_mangle]
pub extern "C" fn holdoff_give_up_reason_name(reason: u32) -> *const c_char {
    static NAMES: OnceLock<Vec<CString>> = OnceLock::new();
    core_name(&NAMES, reason, |c: holdoff_give_up_reason| {
        GiveUpReason::from(c).name()
    })
}

/// The stable name of a `holdoff_unusable` (`none` for a usable hint, else the core's
/// `missing`, `malformed`, `signed`, `conflicting`); NULL for an unknown value. Static string.
#[no_mangle]
pub extern "C" fn holdoff_unusable_name(unusable: u32) -> *const c_char {
    static NAMES: OnceLock<Vec<CString>> = OnceLock::new();
    core_name(&NAMES, unusable, |c: holdoff_unusable| {
        Option::<Unusable>::from(c).map_or("none", Unusable::name)
    })
}

/// The stable name of a `holdoff_hint_source` (`retry_after`, `ratelimit_reset`,
/// `x_ratelimit_reset`, `none`, `retry_after_ms`, `x_ms_retry_after_ms`, `ratelimit`, in code
/// order; the core's names); NULL for an unknown value. Static string.
#[no_mangle]
pub extern "C" fn holdoff_hint_source_name(source: u32) -> *const c_char {
    static NAMES: OnceLock<Vec<CString>> = OnceLock::new();
    core_name(&NAMES, source, |c: holdoff_hint_source| {
        HintSource::from(c).name()
    })
}

/// The stable name of a `holdoff_before_action` (`go`, `wait`, `give_up`, as the conformance
/// suite spells them); NULL for an unknown value. Static string.
#[no_mangle]
pub extern "C" fn holdoff_before_action_name(action: u32) -> *const c_char {
    local_name::<holdoff_before_action>(&[c"go", c"wait", c"give_up"], action)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(p: *const c_char) -> &'static str {
        assert!(!p.is_null());
        // SAFETY: every name is a static C string.
        unsafe { CStr::from_ptr(p) }.to_str().unwrap()
    }

    /// Every code of `C` has a name, the names are distinct, and the code after the last has
    /// none.
    fn named<C: CEnum>(name: extern "C" fn(u32) -> *const c_char) -> Vec<&'static str> {
        let names: Vec<&str> = C::ALL.iter().map(|c| s(name(c.code()))).collect();
        for (i, c) in C::ALL.iter().enumerate() {
            // Codes are dense from 0: existing ones never move, new ones are appended.
            assert_eq!(c.code(), i as u32);
            assert!(!names[i].is_empty());
            assert!(!names[..i].contains(&names[i]), "{} twice", names[i]);
        }
        assert!(name(C::ALL.len() as u32).is_null());
        assert!(name(u32::MAX).is_null());
        names
    }

    #[test]
    fn names_come_from_the_core() {
        for c in holdoff_state::ALL {
            assert_eq!(s(holdoff_state_name(c.code())), State::from(*c).name());
            assert_eq!(holdoff_state::from(State::from(*c)), *c);
        }
        for c in holdoff_reason::ALL {
            assert_eq!(s(holdoff_reason_name(c.code())), Reason::from(*c).name());
            assert_eq!(holdoff_reason::from(Reason::from(*c)), *c);
        }
        for c in holdoff_give_up_reason::ALL {
            let g = GiveUpReason::from(*c);
            assert_eq!(s(holdoff_give_up_reason_name(c.code())), g.name());
            assert_eq!(holdoff_give_up_reason::from(g), *c);
        }
        for c in holdoff_hint_source::ALL {
            let h = HintSource::from(*c);
            assert_eq!(s(holdoff_hint_source_name(c.code())), h.name());
            assert_eq!(holdoff_hint_source::from(h), *c);
        }
        for c in holdoff_effect::ALL {
            assert_eq!(s(holdoff_effect_name(c.code())), Effect::from(*c).name());
            assert_eq!(holdoff_effect::from(Effect::from(*c)), *c);
        }
        for c in holdoff_wait_source::ALL {
            assert_eq!(s(holdoff_wait_source_name(c.code())), WaitSource::from(*c).name());
            assert_eq!(holdoff_wait_source::from(WaitSource::from(*c)), *c);
        }
        for c in holdoff_unusable::ALL {
            match Option::<Unusable>::from(*c) {
                Some(u) => {
                    assert_eq!(s(holdoff_unusable_name(c.code())), u.name());
                    assert_eq!(holdoff_unusable::from(u), *c);
                }
                None => assert_eq!(s(holdoff_unusable_name(c.code())), "none"),
            }
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
        assert!(outcome_from_c(6, 0).is_err());
    }

    #[test]
    fn codes_are_dense_and_appended() {
        named::<holdoff_state>(holdoff_state_name);
        named::<holdoff_outcome>(holdoff_outcome_name);
        named::<holdoff_effect>(holdoff_effect_name);
        named::<holdoff_reason>(holdoff_reason_name);
        named::<holdoff_decision_kind>(holdoff_decision_kind_name);
        named::<holdoff_wait_source>(holdoff_wait_source_name);
        named::<holdoff_unusable>(holdoff_unusable_name);
        named::<holdoff_before_action>(holdoff_before_action_name);
        // Codes published in an earlier header keep their numbers.
        assert_eq!(
            named::<holdoff_give_up_reason>(holdoff_give_up_reason_name)[7..],
            ["cancelled", "retry_after_above_cap", "total_timeout"]
        );
        assert_eq!(
            named::<holdoff_hint_source>(holdoff_hint_source_name),
            [
                "retry_after",
                "ratelimit_reset",
                "x_ratelimit_reset",
                "none",
                "retry_after_ms",
                "x_ms_retry_after_ms",
                "ratelimit"
            ]
        );
    }
}
