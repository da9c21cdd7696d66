//! What a call through the helpers fails with: [`Error`], and what its last attempt left,
//! [`Last`].

use std::fmt;
use std::time::Duration;

use holdoff::interop::Coded;
use holdoff::GiveUpReason;

/// What the last attempt of a call left behind, attached to a give-up.
///
/// `T` is the operation's value type (a response, for the HTTP helpers), `E` its error type.
#[derive(Debug)]
pub enum Last<T, E> {
    /// The attempt returned this value, and it was classified as a failure (an HTTP 500
    /// response, an `Ok` the classifier called [`holdoff::Outcome::Failure`]).
    Value(T),
    /// The attempt failed with this error.
    Error(E),
    /// The attempt ran out of its time limit (the attempt timeout, or what was left of the total
    /// timeout) and was dropped: it left neither a value nor an error.
    TimedOut,
}

impl<T, E> Last<T, E> {
    /// The error, if the attempt failed with one.
    pub fn error(&self) -> Option<&E> {
        match self {
            Last::Error(e) => Some(e),
            _ => None,
        }
    }

    /// The value, if the attempt returned one.
    pub fn value(&self) -> Option<&T> {
        match self {
            Last::Value(v) => Some(v),
            _ => None,
        }
    }
}

/// Why a call through holdoff did not return a value. `E` is the operation's error type, `T` its
/// value type (a give-up carries the last value when the last attempt returned one).
///
/// [`Error::BreakerOpen`] and [`Error::GiveUp`] both mean "the upstream is unavailable"
/// ([`Error::is_upstream_unavailable`]); [`Error::Operation`] is the operation's own final error,
/// unchanged.
#[derive(Debug)]
pub enum Error<E, T = ()> {
    /// The operation's own error, returned as is: the classifier called it final (an answer such
    /// as a 404, or a success), so retrying could not help.
    Operation(E),
    /// The breaker refused: the first attempt (nothing ran, `attempts` is 0), or a retry the
    /// breaker would keep waiting for past what is left of the budget or the total timeout.
    BreakerOpen {
        /// Time until the breaker admits a probe; `None` while forced open (until an operator
        /// resets it).
        retry_after: Option<Duration>,
        /// Attempts made.
        attempts: u32,
        /// What the last attempt left, when there was one.
        last: Option<Last<T, E>>,
    },
    /// The policy stopped retrying: retries or budget spent, quota empty, total timeout, a
    /// Retry-After above the cap or beyond the budget.
    GiveUp {
        /// Why (`budget_spent`, `retry_after_exceeds_remaining`, `retry_after_above_cap`,
        /// `backoff_exceeds_remaining`, `attempts_exhausted`, `quota_empty`, `total_timeout`).
        reason: GiveUpReason,
        /// Attempts made, the last one included.
        attempts: u32,
        /// When trying again could help: the server's delay for a rate-limit give-up; for a
        /// total timeout, the open breaker's time to its next probe, else the server's (capped)
        /// delay; `None` otherwise.
        retry_after: Option<Duration>,
        /// The server's own delay, if the last answer carried one.
        server_delay: Option<Duration>,
        /// Whether the server's delay was above the budget's cap.
        capped: bool,
        /// What the last attempt left: its error, its value (the last 500 response), or a
        /// timeout.
        last: Last<T, E>,
    },
    /// The classifier called the last attempt's result [`holdoff::Outcome::Cancelled`] before
    /// the attempt's time limit: the operation saw its caller's own cancellation (a
    /// `CancellationToken`, say). At or after the limit that is a timeout instead. A caller that
    /// cancels by dropping the future gets nothing, as for any future.
    Cancelled {
        /// Attempts made, the cancelled one included.
        attempts: u32,
        /// What the cancelled attempt left.
        last: Last<T, E>,
    },
    /// An HTTP helper got a response whose status is not a status (above 999, or negative): the
    /// attempt was recorded as cancelled and the call stopped.
    InvalidInput {
        /// The offending field: `status`.
        field: &'static str,
        /// Attempts made, the offending one included.
        attempts: u32,
        /// The response.
        value: T,
    },
}

impl<E, T> Error<E, T> {
    /// The stable name shared with every holdoff binding: `operation`, `breaker_open`,
    /// `give_up` (the reason's own name is [`GiveUpReason::name`]), `cancelled`,
    /// `invalid_input`.
    pub fn name(&self) -> &'static str {
        match self {
            Error::Operation(_) => "operation",
            Error::BreakerOpen { .. } => "breaker_open",
            Error::GiveUp { .. } => "give_up",
            Error::Cancelled { .. } => "cancelled",
            Error::InvalidInput { .. } => "invalid_input",
        }
    }

    /// Whether this says "the upstream is unavailable": a breaker refusal or a give-up.
    pub fn is_upstream_unavailable(&self) -> bool {
        matches!(self, Error::BreakerOpen { .. } | Error::GiveUp { .. })
    }

    /// Attempts made; `None` for [`Error::Operation`], which does not know.
    pub fn attempts(&self) -> Option<u32> {
        match self {
            Error::Operation(_) => None,
            Error::BreakerOpen { attempts, .. }
            | Error::GiveUp { attempts, .. }
            | Error::Cancelled { attempts, .. }
            | Error::InvalidInput { attempts, .. } => Some(*attempts),
        }
    }

    /// When trying again could help, for an upstream-unavailable error (see the variants).
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::BreakerOpen { retry_after, .. } | Error::GiveUp { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// What the last attempt left, if the error carries it.
    pub fn last(&self) -> Option<&Last<T, E>> {
        match self {
            Error::BreakerOpen { last, .. } => last.as_ref(),
            Error::GiveUp { last, .. } | Error::Cancelled { last, .. } => Some(last),
            Error::Operation(_) | Error::InvalidInput { .. } => None,
        }
    }

    /// The operation's error: its own final error, or the last attempt's error attached to a
    /// refusal, give-up or cancellation.
    pub fn operation_error(&self) -> Option<&E> {
        match self {
            Error::Operation(e) => Some(e),
            _ => self.last().and_then(Last::error),
        }
    }

    /// Consumes the error into the operation's error, as [`Error::operation_error`].
    pub fn into_operation_error(self) -> Option<E> {
        match self {
            Error::Operation(e)
            | Error::BreakerOpen {
                last: Some(Last::Error(e)),
                ..
            }
            | Error::GiveUp {
                last: Last::Error(e), ..
            }
            | Error::Cancelled {
                last: Last::Error(e), ..
            } => Some(e),
            _ => None,
        }
    }
}

impl<E: fmt::Display, T> fmt::Display for Error<E, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let last = |f: &mut fmt::Formatter<'_>, last: Option<&Last<T, E>>| match last {
            Some(Last::Error(e)) => write!(f, ": {e}"),
            Some(Last::Value(_)) => write!(f, ": the last attempt's value (a failure) is attached"),
            Some(Last::TimedOut) => write!(f, ": the last attempt timed out"),
            None => Ok(()),
        };
        match self {
            Error::Operation(e) => e.fmt(f),
            Error::BreakerOpen {
                retry_after,
                attempts,
                last: l,
            } => {
                match retry_after {
                    Some(d) => write!(f, "circuit breaker open: next probe in {} ms", d.as_millis())?,
                    None => write!(f, "circuit breaker forced open")?,
                }
                if *attempts > 0 {
                    write!(f, " (after {attempts} attempt(s))")?;
                }
                last(f, l.as_ref())
            }
            Error::GiveUp {
                reason,
                attempts,
                last: l,
                ..
            } => {
                write!(f, "gave up after {attempts} attempt(s) ({})", reason.name())?;
                last(f, Some(l))
            }
            Error::Cancelled { attempts, last: l } => {
                write!(f, "cancelled during attempt {attempts}")?;
                last(f, Some(l))
            }
            Error::InvalidInput { field, attempts, .. } => write!(
                f,
                "invalid input: {field}: attempt {attempts} answered a value that is not an HTTP status (0..=999)"
            ),
        }
    }
}

impl<E: std::error::Error + 'static, T: fmt::Debug> std::error::Error for Error<E, T> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            // Transparent: the operation's error is this error.
            Error::Operation(e) => e.source(),
            _ => self.last().and_then(Last::error).map(|e| e as _),
        }
    }
}
