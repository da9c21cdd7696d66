//! Retry-After parsing (RFC 9110 §10.2.3) and the HTTP response classifier.

use std::sync::Arc;
use std::time::SystemTime;

use holdoff::interop::Coded;

use crate::{clock_of, wall_now, ClassifierConfig, Duration, HoldoffError, ManualClock, Outcome};

/// Why a delay hint is unusable; `stableName()` is the core's name for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum Unusable {
    /// No header, or only whitespace.
    Missing,
    /// Not delay-seconds and not an HTTP-date.
    Malformed,
    /// A signed number (`-5`, `+5`).
    Signed,
    /// Several values that disagree.
    Conflicting,
}

mirror!(Unusable: Missing, Malformed, Signed, Conflicting);

#[uniffi::export]
impl Unusable {
    /// The conformance suite's stable name, the core's: `missing`, `malformed`, `signed`,
    /// `conflicting`.
    pub fn stable_name(&self) -> String {
        holdoff::Unusable::from(*self).name().to_owned()
    }
}

/// A parsed delay hint. Parsing never throws: garbage is `Unusable`, and the caller falls back
/// to its default wait.
#[derive(Debug, Clone, Copy, PartialEq, uniffi::Enum)]
pub enum RetryAfter {
    /// Wait this long (zero means "now", which is not a usable rate-limit hint).
    Delay {
        delay: Duration,
    },
    Unusable {
        reason: Unusable,
    },
}

impl From<holdoff::RetryAfter> for RetryAfter {
    fn from(r: holdoff::RetryAfter) -> Self {
        match r {
            holdoff::RetryAfter::Delay(d) => RetryAfter::Delay {
                delay: Duration::from_std(d),
            },
            holdoff::RetryAfter::Unusable(u) => RetryAfter::Unusable { reason: u.into() },
        }
    }
}

/// Which header a hint came from, in the core's order of precedence; `stableName()` is the
/// core's name for it (`retry_after_ms`, `x_ms_retry_after_ms`, `retry_after`, `ratelimit`,
/// `ratelimit_reset`, `x_ratelimit_reset`, `none`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum HintSource {
    /// `retry-after-ms` (milliseconds).
    RetryAfterMs,
    /// `x-ms-retry-after-ms` (milliseconds).
    XMsRetryAfterMs,
    /// `Retry-After` (delay-seconds or an HTTP-date).
    RetryAfter,
    /// `RateLimit` (the structured field, its `t` parameter).
    RateLimit,
    /// `RateLimit-Reset` (delta seconds).
    RateLimitReset,
    /// `X-RateLimit-Reset` (Unix epoch seconds).
    XRateLimitReset,
    /// No delay header.
    None,
}

mirror!(
    HintSource:
    RetryAfterMs, XMsRetryAfterMs, RetryAfter, RateLimit, RateLimitReset, XRateLimitReset, None,
);

#[uniffi::export]
impl HintSource {
    /// The conformance suite's stable name, the core's (`retry_after_ms`, `ratelimit`, ...).
    pub fn stable_name(&self) -> String {
        holdoff::HintSource::from(*self).name().to_owned()
    }
}

/// One response header field (several fields may share a name).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct Header {
    pub name: String,
    pub value: String,
}

/// A delay hint read from response headers.
#[derive(Debug, Clone, Copy, PartialEq, uniffi::Record)]
pub struct Hint {
    pub hint: RetryAfter,
    pub source: HintSource,
}

/// A classified response.
#[derive(Debug, Clone, Copy, PartialEq, uniffi::Record)]
pub struct Classification {
    /// What the breaker and budget are told.
    pub outcome: Outcome,
    /// The delay hint as parsed (even when the status does not use it).
    pub hint: RetryAfter,
    pub source: HintSource,
    /// The provider's `x-should-retry` when it sent `true` or `false` (already applied to
    /// `outcome`: `false` makes a status from 400 up an answer, `true` makes an answer a
    /// failure); absent otherwise.
    pub should_retry: Option<bool>,
}

impl From<holdoff::Classification> for Classification {
    fn from(c: holdoff::Classification) -> Self {
        Classification {
            outcome: c.outcome.into(),
            hint: c.hint.into(),
            source: c.source.into(),
            should_retry: c.should_retry,
        }
    }
}

pub(crate) fn pairs(headers: &[Header]) -> impl Iterator<Item = (&str, &str)> {
    headers.iter().map(|h| (h.name.as_str(), h.value.as_str()))
}

/// The caller's status, checked by the core whatever its value: 0..=999 is a status (outside
/// 100..=599 a broken upstream, a failure); anything else is `InvalidInput` naming `status`.
pub(crate) fn status(s: i32) -> Result<u16, HoldoffError> {
    Ok(holdoff::check_status(i64::from(s))?)
}

/// Parses one Retry-After field value (RFC 9110 §10.2.3): delay-seconds or an HTTP-date
/// (IMF-fixdate, RFC 850, asctime), relative to `wall_now`. Decimal seconds round up to the
/// millisecond; past dates and `0` are a zero delay; huge values saturate.
#[uniffi::export]
pub fn parse_retry_after(value: String, wall_now: SystemTime) -> RetryAfter {
    holdoff::parse_retry_after(&value, wall_now).into()
}

/// Reads the delay hint from response headers (names case-insensitive), the first present of,
/// in order: `retry-after-ms`, `x-ms-retry-after-ms` (milliseconds, decimals rounded up),
/// `Retry-After`, `RateLimit` (the structured field's `t`), `RateLimit-Reset` (delta seconds),
/// `X-RateLimit-Reset` (Unix epoch seconds). A present field is the hint even when unusable;
/// several fields of one name that disagree are `Conflicting`.
#[uniffi::export]
pub fn hint_from_headers(headers: Vec<Header>, wall_now: SystemTime) -> Hint {
    let (hint, source) = holdoff::hint_from_headers(pairs(&headers), wall_now);
    Hint {
        hint: hint.into(),
        source: source.into(),
    }
}

/// Turns (status, headers) into an `Outcome`: 1xx-3xx success; 429/503 with a usable hint
/// retry-later; 408, 410, 429, 460 and 5xx (but 501, 505, 511) failure; other statuses answers;
/// the configured overrides first. A status outside 100..=599 (a 0, a 600, a 999) is a broken
/// upstream, a failure. `x-should-retry: false` makes a status from 400 up an answer, `true`
/// makes an answer a failure (never a success, a broken status or a configured one).
#[derive(Debug, uniffi::Object)]
pub struct Classifier {
    pub(crate) inner: holdoff::Classifier,
    clock: Arc<dyn holdoff::Clock>,
}

#[uniffi::export]
impl Classifier {
    /// A classifier that reads wall time from `clock` (the system clock if absent) for
    /// HTTP-dates.
    #[uniffi::constructor(default(config = None, clock = None))]
    pub fn new(
        config: Option<ClassifierConfig>,
        clock: Option<Arc<ManualClock>>,
    ) -> Result<Arc<Self>, HoldoffError> {
        Ok(Arc::new(Classifier {
            inner: holdoff::Classifier::new(config.unwrap_or_default().to_core()?)?,
            clock: clock_of(&clock),
        }))
    }

    /// Classifies a response at the clock's wall time now. `status` is any `Int`: the core
    /// checks it, and a value that is not a status (negative, above 999) is `InvalidInput`
    /// naming `status`.
    pub fn classify(&self, status: i32, headers: Vec<Header>) -> Result<Classification, HoldoffError> {
        let status = self::status(status)?;
        let wall = wall_now(&self.clock);
        Ok(self.inner.classify(status, pairs(&headers), wall)?.into())
    }
}
