//! HTTP response → [`Outcome`] classifier.
//!
//! Default mapping (incident 3's retryable statuses, `docs/contract.md` §4):
//! * 1xx, 2xx, 3xx: [`Outcome::Success`].
//! * A status in `retry_after_statuses` (default 429 and 503) with a usable, non-zero delay hint
//!   (Retry-After, else RateLimit-Reset / X-RateLimit-Reset): [`Outcome::RetryLater`] with the
//!   server's delay. A 429 without one waits `rate_limit_default_wait` if configured, else is a
//!   [`Outcome::Failure`] (the budget's counted backoff).
//! * 408, 410, 429, 460 and 5xx except 501, 505 and 511: [`Outcome::Failure`] (retryable).
//! * Every other status (4xx, 501, 505, 511): [`Outcome::Answer`]: the upstream is reachable
//!   and retrying will not help.
//! * A status outside 100..=599 is a **broken upstream**: [`Outcome::Failure`] for breaker,
//!   budget and quota alike (RFC 9110 §15 defines only 100..599; a 600 or a 999 is not an
//!   answer). Where the line to a programmer's error is: a status is three digits on the wire
//!   (`status-code = 3DIGIT`), so any value 0..=999 is something an upstream (or a client
//!   reporting "no response" as 0) can hand over, and classifies; a value above 999 is not a
//!   status at all and is refused with an [`InputError`] naming `status` (bindings also refuse
//!   negative and non-integer values so).
//! * `x-should-retry: true|false`, a provider's explicit word (sent by several API providers
//!   and honoured by their SDKs): `false` makes any status from 400 up an
//!   [`Outcome::Answer`] (do not retry, not a failure); `true` makes an answer (a 4xx the default
//!   would not retry) a [`Outcome::Failure`]. It never changes a success, a broken status, or a
//!   status the configuration lists.
//! * `failure_statuses` and `answer_statuses` override the above for one provider (incident 1:
//!   a provider that blocks with 403 must count it as a failure).

use std::time::{Duration, SystemTime};

use crate::breaker::Outcome;
use crate::error::{ConfigError, InputError};
use crate::retry_after::{scan_headers, HintSource, RetryAfter};

/// Configuration of a [`Classifier`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassifierConfig {
    /// Statuses that count as transient failures, overriding the default.
    pub failure_statuses: Vec<u16>,
    /// Statuses that count as answers (reachable, not retryable), overriding the default.
    pub answer_statuses: Vec<u16>,
    /// Statuses whose delay hint opens a retry-later wait. Default 429 and 503.
    pub retry_after_statuses: Vec<u16>,
    /// Wait for a 429 that carries no usable hint; `None` (default) uses the counted backoff.
    pub rate_limit_default_wait: Option<Duration>,
}

impl Default for ClassifierConfig {
    fn default() -> Self {
        ClassifierConfig {
            failure_statuses: Vec::new(),
            answer_statuses: Vec::new(),
            retry_after_statuses: vec![429, 503],
            rate_limit_default_wait: None,
        }
    }
}

/// A classified response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Classification {
    /// What the breaker and budget are told.
    pub outcome: Outcome,
    /// The delay hint as parsed (even when the status does not use it).
    pub hint: RetryAfter,
    /// Which header the hint came from.
    pub source: HintSource,
    /// The provider's `x-should-retry`, if it sent `true` or `false`.
    pub should_retry: Option<bool>,
}

/// Turns (status, headers) into an [`Outcome`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Classifier {
    config: ClassifierConfig,
}

fn valid_status(s: u16) -> bool {
    (100..=599).contains(&s)
}

/// The highest value that is a status at all: three digits (RFC 9110 §15, `3DIGIT`).
pub const MAX_STATUS: u16 = 999;

/// Checks that `status` is a status at all: an integer 0..=999 (three digits on the wire). A
/// status outside 100..=599 is still a status (a broken upstream, classified as a failure);
/// bindings call this on the integer they were given, so negative, huge and out-of-range values
/// are refused with the same error everywhere.
pub fn check_status(status: i64) -> Result<u16, InputError> {
    match u16::try_from(status) {
        Ok(s) if s <= MAX_STATUS => Ok(s),
        _ => Err(InputError {
            field: "status".into(),
            rule: "must be an HTTP status code, an integer between 0 and 999".into(),
        }),
    }
}

impl Classifier {
    /// A classifier; statuses must be 100..=599 and the default wait > 0.
    pub fn new(config: ClassifierConfig) -> Result<Classifier, ConfigError> {
        for (field, list) in [
            ("classifier.failure_statuses", &config.failure_statuses),
            ("classifier.answer_statuses", &config.answer_statuses),
            ("classifier.retry_after_statuses", &config.retry_after_statuses),
        ] {
            if list.iter().any(|s| !valid_status(*s)) {
                return Err(ConfigError::new(
                    field,
                    "every status must be between 100 and 599",
                ));
            }
        }
        if config.rate_limit_default_wait.is_some_and(|d| d.is_zero()) {
            return Err(ConfigError::new(
                "classifier.rate_limit_default_wait",
                "must be greater than 0",
            ));
        }
        Ok(Classifier { config })
    }

    /// The configuration.
    pub fn config(&self) -> &ClassifierConfig {
        &self.config
    }

    /// Classifies a response. `wall_now` is the wall time of the decision's clock reading (for
    /// HTTP-dates). A status above 999 is an error naming `status`; one outside 100..=599 is a
    /// broken upstream, a failure.
    pub fn classify<'a, I>(
        &self,
        status: u16,
        headers: I,
        wall_now: SystemTime,
    ) -> Result<Classification, InputError>
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
    {
        check_status(i64::from(status))?;
        let h = scan_headers(headers, wall_now);
        let hint = h.hint;
        // A broken status is a failure whatever else is said; a listed status is the caller's
        // explicit word about this provider.
        let outcome = if !valid_status(status) || self.config.failure_statuses.contains(&status) {
            Outcome::Failure
        } else if self.config.answer_statuses.contains(&status) {
            Outcome::Answer
        } else {
            let o = if self.config.retry_after_statuses.contains(&status) {
                match hint {
                    RetryAfter::Delay(d) if !d.is_zero() => Outcome::RetryLater(d),
                    _ if status == 429 => match self.config.rate_limit_default_wait {
                        Some(d) => Outcome::RetryLater(d),
                        None => Outcome::Failure,
                    },
                    _ => default_outcome(status),
                }
            } else {
                default_outcome(status)
            };
            match (h.should_retry, o) {
                (_, Outcome::Success) => o,
                (Some(false), _) => Outcome::Answer,
                (Some(true), Outcome::Answer) => Outcome::Failure,
                _ => o,
            }
        };
        Ok(Classification {
            outcome,
            hint,
            source: h.source,
            should_retry: h.should_retry,
        })
    }
}

fn default_outcome(status: u16) -> Outcome {
    match status {
        100..=399 => Outcome::Success,
        408 | 410 | 429 | 460 => Outcome::Failure,
        501 | 505 | 511 => Outcome::Answer,
        500..=599 => Outcome::Failure,
        _ => Outcome::Answer,
    }
}
