//! Errors. Every error has a stable name ([`ErrorKind`](crate::interop::ErrorKind)) that the
//! conformance suite asserts and that every binding maps to its own typed error (Python
//! exception class, Node `code`, C status, Go sentinel, C# exception).

/// A configuration value that holdoff refuses at construction.
///
/// `field` is the dotted path of the offending field as the conformance suite spells it
/// (`breaker.trip.threshold`, `budget.retry_after_cap_ms`), `rule` says what it must satisfy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid configuration: {field}: {rule}")]
pub struct ConfigError {
    /// The field, e.g. `breaker.open_interval.multiplier`.
    pub field: String,
    /// The rule the value broke, in words.
    pub rule: String,
}

impl ConfigError {
    pub(crate) fn new(field: impl Into<String>, rule: impl Into<String>) -> Self {
        ConfigError {
            field: field.into(),
            rule: rule.into(),
        }
    }
}

/// An argument of an operation that is out of range (an HTTP status outside 100..=599).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid input: {field}: {rule}")]
pub struct InputError {
    /// The argument, e.g. `status`.
    pub field: String,
    /// The rule it broke.
    pub rule: String,
}

/// Refused clock movements.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClockError {
    /// A manual clock was set to an earlier time than it shows.
    #[error("a monotonic clock cannot go backwards (now {now_nanos} ns, requested {requested_nanos} ns)")]
    Backwards {
        /// The time the clock shows, in nanoseconds since its origin.
        now_nanos: u64,
        /// The refused time, in nanoseconds since its origin.
        requested_nanos: u64,
    },
}

/// Misuse of a permit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PermitError {
    /// The permit was issued by another breaker.
    #[error("this permit was issued by another breaker")]
    Foreign,
    /// The permit was already recorded (or cancelled). Rust's move semantics prevent this;
    /// bindings whose permits are shared objects report it.
    #[error("this permit was already recorded")]
    AlreadyRecorded,
}

/// Every error holdoff returns; its stable cross-language name is its
/// [`ErrorKind`](crate::interop::ErrorKind).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HoldoffError {
    /// See [`ConfigError`].
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// See [`InputError`].
    #[error(transparent)]
    Input(#[from] InputError),
    /// See [`ClockError`].
    #[error(transparent)]
    Clock(#[from] ClockError),
    /// See [`PermitError`].
    #[error(transparent)]
    Permit(#[from] PermitError),
}
