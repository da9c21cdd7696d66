//! The error returned by [`crate::execute`] and [`crate::call`].

use std::fmt;
use std::time::Duration;

use holdoff::GiveUpReason;

/// Why a call through holdoff failed: the breaker refused it, the policy gave up retrying, or
/// the operation failed with an error that retrying cannot help.
///
/// `E` is the operation's own error type.
#[derive(Debug)]
pub enum Error<E> {
    /// The breaker refused the first attempt; nothing was run.
    BreakerOpen {
        /// Time until the breaker admits a probe; `None` while forced open (until an operator
        /// resets it).
        retry_after: Option<Duration>,
    },
    /// The policy stopped retrying a failing operation.
    GiveUp {
        /// Why (`budget_spent`, `retry_after_exceeds_remaining`, `backoff_exceeds_remaining`,
        /// `attempts_exhausted`, `quota_empty`, `breaker_open` for a retry the breaker will not
        /// admit within the budget, `cancelled` if the classifier said so).
        reason: GiveUpReason,
        /// The error of the last attempt.
        last_error: E,
        /// Attempts made, the last one included.
        attempts: u32,
    },
    /// The operation's own error, returned as is: the classifier called it final (an answer,
    /// such as a 404, or a success), so retrying could not help.
    Operation(E),
}

impl<E> Error<E> {
    /// The stable name shared with every holdoff binding: `breaker_open`, the give-up reason's
    /// name (`budget_spent`, ...), or `operation`.
    pub fn name(&self) -> &'static str {
        match self {
            Error::BreakerOpen { .. } => "breaker_open",
            Error::GiveUp { reason, .. } => reason.name(),
            Error::Operation(_) => "operation",
        }
    }

    /// The operation's error, if an attempt was made.
    pub fn operation_error(&self) -> Option<&E> {
        match self {
            Error::BreakerOpen { .. } => None,
            Error::GiveUp { last_error, .. } => Some(last_error),
            Error::Operation(e) => Some(e),
        }
    }

    /// Consumes the error into the operation's error, if an attempt was made.
    pub fn into_operation_error(self) -> Option<E> {
        match self {
            Error::BreakerOpen { .. } => None,
            Error::GiveUp { last_error, .. } => Some(last_error),
            Error::Operation(e) => Some(e),
        }
    }
}

impl<E: fmt::Display> fmt::Display for Error<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::BreakerOpen { retry_after: Some(d) } => {
                write!(f, "circuit breaker open: next probe in {} ms", d.as_millis())
            }
            Error::BreakerOpen { retry_after: None } => {
                write!(f, "circuit breaker forced open")
            }
            Error::GiveUp {
                reason,
                last_error,
                attempts,
            } => write!(
                f,
                "gave up after {attempts} attempt(s) ({}): {last_error}",
                reason.name()
            ),
            Error::Operation(e) => e.fmt(f),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for Error<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::BreakerOpen { .. } => None,
            Error::GiveUp { last_error, .. } => Some(last_error),
            // Transparent: the operation's error is this error.
            Error::Operation(e) => e.source(),
        }
    }
}
