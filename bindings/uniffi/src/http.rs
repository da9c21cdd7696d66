//! Retry-After parsing (RFC 9110 §10.2.3) and the HTTP response classifier.

use std::sync::Arc;
use std::time::SystemTime;

use crate::{clock_of, wall_now, ClassifierConfig, Duration, HoldoffError, ManualClock, Outcome};

/// Why a delay hint is unusable.
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
            holdoff::RetryAfter::Unusable(u) => RetryAfter::Unusable {
                reason: match u {
                    holdoff::Unusable::Missing => Unusable::Missing,
                    holdoff::Unusable::Malformed => Unusable::Malformed,
                    holdoff::Unusable::Signed => Unusable::Signed,
                    holdoff::Unusable::Conflicting => Unusable::Conflicting,
                },
            },
        }
    }
}

/// Which header a hint came from. Lowercased constant names are the stable names
/// (`retry_after`, `ratelimit_reset`, `x_ratelimit_reset`, `none`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum HintSource {
    RetryAfter,
    RatelimitReset,
    XRatelimitReset,
    None,
}

impl From<holdoff::HintSource> for HintSource {
    fn from(s: holdoff::HintSource) -> Self {
        match s {
            holdoff::HintSource::RetryAfter => HintSource::RetryAfter,
            holdoff::HintSource::RateLimitReset => HintSource::RatelimitReset,
            holdoff::HintSource::XRateLimitReset => HintSource::XRatelimitReset,
            holdoff::HintSource::None => HintSource::None,
        }
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
}

impl From<holdoff::Classification> for Classification {
    fn from(c: holdoff::Classification) -> Self {
        Classification {
            outcome: c.outcome.into(),
            hint: c.hint.into(),
            source: c.source.into(),
        }
    }
}

pub(crate) fn pairs(headers: &[Header]) -> impl Iterator<Item = (&str, &str)> {
    headers.iter().map(|h| (h.name.as_str(), h.value.as_str()))
}

// A status outside u16 becomes 0, which the core refuses with its own rule (100..=599).
pub(crate) fn status(s: i32) -> u16 {
    u16::try_from(s).unwrap_or(0)
}

/// Parses one Retry-After field value (RFC 9110 §10.2.3): delay-seconds or an HTTP-date
/// (IMF-fixdate, RFC 850, asctime), relative to `wall_now`. Decimal seconds round up to the
/// millisecond; past dates and `0` are a zero delay; huge values saturate.
#[uniffi::export]
pub fn parse_retry_after(value: String, wall_now: SystemTime) -> RetryAfter {
    holdoff::parse_retry_after(&value, wall_now).into()
}

/// Reads the delay hint from response headers (names case-insensitive): every Retry-After
/// field (disagreeing fields are `Conflicting`), else RateLimit-Reset (delta seconds), else
/// X-RateLimit-Reset (Unix epoch seconds).
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
/// the configured overrides first.
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

    /// Classifies a response at the clock's wall time now. A status outside 100..=599 is
    /// `InvalidInput` naming `status`.
    pub fn classify(&self, status: i32, headers: Vec<Header>) -> Result<Classification, HoldoffError> {
        let wall = wall_now(&self.clock);
        Ok(self
            .inner
            .classify(self::status(status), pairs(&headers), wall)?
            .into())
    }
}
