//! The enums of the C ABI and their stable names.
//!
//! Enums cross the boundary as `uint32_t` (cbindgen emits `typedef uint32_t holdoff_x;`).
//! Values coming **from** C are taken as `u32` and checked, never transmuted: an unknown value is
//! `HOLDOFF_STATUS_INVALID_INPUT`, not undefined behaviour.

use std::ffi::{c_char, CString};
use std::sync::OnceLock;
use std::time::Duration;

use hcore::interop::{units, BeforeAction, Coded, DecisionKind, OutcomeKind};
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

/// What happened to a call (`holdoff_breaker_record`, `holdoff_retry_budget_decide`,
/// `holdoff_policy_after_attempt`).
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
    /// The breaker's fleet record is open (another worker tripped or saw a retry-later): this
    /// breaker opened with it, until the fleet's next probe.
    FleetOpened = 8,
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
    /// (the configuration's `budget.give_up_above_cap`); the decision carries the server's delay.
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

/// A C enum: its values in code order, so that a `u32` from C is checked against them.
pub(crate) trait CEnum: Copy + Sized + std::fmt::Debug + 'static {
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

/// Ties a C enum to the core's coded enum whose codes its values are (`hcore::interop::Coded`):
/// each converts to the other by its code. The tests (`every_c_value_is_the_cores_code`) check
/// that every C value is a core code of the same name and the other way round, so the
/// `expect`s cannot fire.
macro_rules! core_coded {
    ($($c:ident => $core:ty),+ $(,)?) => {$(
        impl From<$core> for $c {
            fn from(v: $core) -> Self {
                <$c as CEnum>::from_code(Coded::code(v)).expect("every core code is a C value")
            }
        }
        impl From<$c> for $core {
            fn from(v: $c) -> Self {
                <$core as Coded>::from_code(v.code()).expect("every C value is a core code")
            }
        }
    )+};
}
pub(crate) use core_coded;

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
    FleetOpened,
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

core_coded!(
    holdoff_state => State,
    holdoff_outcome => OutcomeKind,
    holdoff_effect => Effect,
    holdoff_reason => Reason,
    holdoff_decision_kind => DecisionKind,
    holdoff_wait_source => WaitSource,
    holdoff_give_up_reason => GiveUpReason,
    holdoff_hint_source => HintSource,
    holdoff_before_action => BeforeAction,
);

impl From<Unusable> for holdoff_unusable {
    fn from(u: Unusable) -> Self {
        holdoff_unusable::from_code(u.code()).expect("every core code is a C value")
    }
}

impl From<holdoff_unusable> for Option<Unusable> {
    /// `None` for `HOLDOFF_UNUSABLE_NONE` (a usable hint), which is not a core code.
    fn from(u: holdoff_unusable) -> Self {
        Unusable::from_code(u.code())
    }
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

/// The outcome given by C as (kind, delay), checked.
pub(crate) fn outcome_from_c(kind: u32, retry_later_ns: u64) -> Result<Outcome, Fail> {
    let k = OutcomeKind::from_code(kind)
        .ok_or_else(|| Fail::input("outcome", format!("{kind} is not a holdoff_outcome (0..=5)")))?;
    Ok(k.outcome(units::from_nanos_u64(retry_later_ns)))
}

/// An outcome as (kind, retry-later delay in ns) for C.
pub(crate) fn outcome_to_c(o: Outcome) -> (holdoff_outcome, u64) {
    let later = match o {
        Outcome::RetryLater(d) => ns(d),
        _ => 0,
    };
    (OutcomeKind::of(&o).into(), later)
}

/// The core's stable name of code `v` of `K`, as a static C string; NULL for an unknown code.
/// The NUL-terminated copies are made once per enum (the core's names are Rust strings) and
/// live as long as the process.
pub(crate) fn core_name<K: Coded>(cache: &'static OnceLock<Vec<(u32, CString)>>, v: u32) -> *const c_char {
    let names = cache.get_or_init(|| {
        // The core's names are identifiers: they hold no NUL, so nothing is lost here.
        K::ALL
            .iter()
            .map(|k| (k.code(), CString::new(k.name()).unwrap_or_default()))
            .collect()
    });
    names
        .iter()
        .find(|(c, _)| *c == v)
        .map_or(std::ptr::null(), |(_, n)| n.as_ptr())
}

// Each name function is written out: cbindgen reads no macro expansions.

/// The stable name of a `holdoff_state` (`closed`, `open`, `half_open`, `forced_open`,
/// `disabled`); NULL for an unknown value. Static string.
#[no_mangle]
pub extern "C" fn holdoff_state_name(state: u32) -> *const c_char {
    static NAMES: OnceLock<Vec<(u32, CString)>> = OnceLock::new();
    core_name::<State>(&NAMES, state)
}

/// The stable name of a `holdoff_outcome` (`success`, `answer`, `failure`, `timeout`,
/// `retry_later`, `cancelled`); NULL for an unknown value. Static string.
#[no_mangle]
pub extern "C" fn holdoff_outcome_name(outcome: u32) -> *const c_char {
    static NAMES: OnceLock<Vec<(u32, CString)>> = OnceLock::new();
    core_name::<OutcomeKind>(&NAMES, outcome)
}

/// The stable name of a `holdoff_effect` (`counted`, `stale`, `ignored`); NULL for an
/// unknown value. Static string.
#[no_mangle]
pub extern "C" fn holdoff_effect_name(effect: u32) -> *const c_char {
    static NAMES: OnceLock<Vec<(u32, CString)>> = OnceLock::new();
    core_name::<Effect>(&NAMES, effect)
}

/// The stable name of a `holdoff_reason` (`tripped`, `retry_later`, `probe_admitted`,
/// `probe_failed`, `recovered`, `forced_open`, `disabled`, `reset`, `fleet_opened`); NULL for an unknown
/// value. Static string.
#[no_mangle]
pub extern "C" fn holdoff_reason_name(reason: u32) -> *const c_char {
    static NAMES: OnceLock<Vec<(u32, CString)>> = OnceLock::new();
    core_name::<Reason>(&NAMES, reason)
}

/// The stable name of a `holdoff_decision_kind` (`done`, `retry`, `give_up`); NULL for an
/// unknown value. Static string.
#[no_mangle]
pub extern "C" fn holdoff_decision_kind_name(kind: u32) -> *const c_char {
    static NAMES: OnceLock<Vec<(u32, CString)>> = OnceLock::new();
    core_name::<DecisionKind>(&NAMES, kind)
}

/// The stable name of a `holdoff_wait_source` (`retry_after`, `backoff`, `breaker`); NULL
/// for an unknown value. Static string.
#[no_mangle]
pub extern "C" fn holdoff_wait_source_name(source: u32) -> *const c_char {
    static NAMES: OnceLock<Vec<(u32, CString)>> = OnceLock::new();
    core_name::<WaitSource>(&NAMES, source)
}

/// The stable name of a `holdoff_give_up_reason` (`budget_spent`,
/// `retry_after_exceeds_remaining`, `backoff_exceeds_remaining`, `attempts_exhausted`,
/// `not_retryable`, `quota_empty`, `breaker_open`, `cancelled`, `retry_after_above_cap`,
/// `total_timeout`); NULL for an unknown value. Static string.
#[no_mangle]
pub extern "C" fn holdoff_give_up_reason_name(reason: u32) -> *const c_char {
    static NAMES: OnceLock<Vec<(u32, CString)>> = OnceLock::new();
    core_name::<GiveUpReason>(&NAMES, reason)
}

/// The stable name of a `holdoff_hint_source` (`retry_after`, `ratelimit_reset`,
/// `x_ratelimit_reset`, `none`, `retry_after_ms`, `x_ms_retry_after_ms`, `ratelimit`, in
/// code order); NULL for an unknown value. Static string.
#[no_mangle]
pub extern "C" fn holdoff_hint_source_name(source: u32) -> *const c_char {
    static NAMES: OnceLock<Vec<(u32, CString)>> = OnceLock::new();
    core_name::<HintSource>(&NAMES, source)
}

/// The stable name of a `holdoff_before_action` (`go`, `wait`, `give_up`); NULL for an
/// unknown value. Static string.
#[no_mangle]
pub extern "C" fn holdoff_before_action_name(action: u32) -> *const c_char {
    static NAMES: OnceLock<Vec<(u32, CString)>> = OnceLock::new();
    core_name::<BeforeAction>(&NAMES, action)
}

/// The stable name of a `holdoff_unusable` (`none` for a usable hint, else `missing`,
/// `malformed`, `signed`, `conflicting`); NULL for an unknown value. Static string.
#[no_mangle]
pub extern "C" fn holdoff_unusable_name(unusable: u32) -> *const c_char {
    static NAMES: OnceLock<Vec<(u32, CString)>> = OnceLock::new();
    if unusable == holdoff_unusable::None as u32 {
        return c"none".as_ptr();
    }
    core_name::<Unusable>(&NAMES, unusable)
}

#[cfg(test)]
pub(crate) mod tests {
    use std::ffi::CStr;

    use super::*;

    pub(crate) fn s(p: *const c_char) -> &'static str {
        assert!(!p.is_null());
        // SAFETY: every name is a static C string.
        unsafe { CStr::from_ptr(p) }.to_str().unwrap()
    }

    /// `HalfOpen` → `half_open`, `XMsRetryAfterMs` → `x_ms_retry_after_ms`.
    fn snake(ident: &str) -> String {
        let mut out = String::new();
        for (i, ch) in ident.chars().enumerate() {
            if ch.is_ascii_uppercase() && i > 0 {
                out.push('_');
            }
            out.push(ch.to_ascii_lowercase());
        }
        out
    }

    /// Every value of the C enum `C` is the core's code of the variant of the same name, the
    /// core has no code C lacks, codes are dense from 0 (published ones never move, new ones are
    /// appended), and the name function gives the core's names, NULL past the last code.
    pub(crate) fn tied<C, K>(name: extern "C" fn(u32) -> *const c_char) -> Vec<&'static str>
    where
        C: CEnum + Into<K>,
        K: Coded + Into<C>,
    {
        for (i, c) in C::ALL.iter().enumerate() {
            assert_eq!(c.code(), i as u32, "{c:?}");
            let k: K = (*c).into();
            assert_eq!(k.code(), c.code(), "{c:?}");
            assert_eq!(
                snake(&format!("{c:?}")),
                k.name(),
                "{c:?} is not the core's {}",
                k.name()
            );
            assert_eq!(s(name(c.code())), k.name());
        }
        assert_eq!(K::ALL.len(), C::ALL.len());
        assert!(name(C::ALL.len() as u32).is_null());
        assert!(name(u32::MAX).is_null());
        C::ALL.iter().map(|c| s(name(c.code()))).collect()
    }

    #[test]
    fn every_c_value_is_the_cores_code() {
        tied::<holdoff_state, State>(holdoff_state_name);
        tied::<holdoff_outcome, OutcomeKind>(holdoff_outcome_name);
        tied::<holdoff_effect, Effect>(holdoff_effect_name);
        tied::<holdoff_reason, Reason>(holdoff_reason_name);
        tied::<holdoff_decision_kind, DecisionKind>(holdoff_decision_kind_name);
        tied::<holdoff_wait_source, WaitSource>(holdoff_wait_source_name);
        tied::<holdoff_before_action, BeforeAction>(holdoff_before_action_name);
        assert_eq!(
            tied::<holdoff_give_up_reason, GiveUpReason>(holdoff_give_up_reason_name)[7..],
            ["cancelled", "retry_after_above_cap", "total_timeout"]
        );
        assert_eq!(
            tied::<holdoff_hint_source, HintSource>(holdoff_hint_source_name),
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
        assert_eq!(s(holdoff_unusable_name(0)), "none");
        for c in &holdoff_unusable::ALL[1..] {
            let u = Option::<Unusable>::from(*c).unwrap();
            assert_eq!(
                (u.code(), u.name()),
                (c.code(), s(holdoff_unusable_name(c.code())))
            );
            assert_eq!(snake(&format!("{c:?}")), u.name());
        }
        assert!(holdoff_unusable_name(5).is_null());
        let later = Outcome::RetryLater(Duration::from_secs(1));
        assert_eq!(outcome_to_c(later), (holdoff_outcome::RetryLater, 1_000_000_000));
        assert_eq!(outcome_from_c(4, 1_000_000_000).unwrap(), later);
        assert_eq!(outcome_from_c(5, 0).unwrap(), Outcome::Cancelled);
        assert!(outcome_from_c(6, 0).is_err());
        // Every core error is a status of the same code, named by the core.
        for k in hcore::interop::ErrorKind::ALL {
            let status = crate::status::holdoff_status::from_u32(k.code()).unwrap();
            assert_eq!(status as u32, k.code());
            assert_eq!(s(crate::status::holdoff_status_name(k.code())), k.name());
        }
        assert_eq!(s(crate::status::holdoff_status_name(0)), "ok");
        assert_eq!(s(crate::status::holdoff_status_name(102)), "abi_mismatch");
        assert!(crate::status::holdoff_status_name(205).is_null());
    }
}
