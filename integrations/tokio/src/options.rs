//! The options every helper takes: the time limits and the two hooks.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use holdoff::{ConfigError, ExecutionConfig, Outcome, WaitPlan};

/// One finished attempt, as the after-attempt hook sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct AttemptReport {
    /// 1 for the first attempt.
    pub number: u32,
    /// Whether the attempt was a probe of an open breaker.
    pub probe: bool,
    /// What the attempt was recorded as: [`Outcome::Timeout`] when it ran out of its time limit,
    /// [`Outcome::Cancelled`] when it panicked or its future was dropped.
    pub outcome: Outcome,
}

type BeforeWait = Arc<dyn Fn(&WaitPlan) + Send + Sync>;
type AfterAttempt = Arc<dyn Fn(&AttemptReport) + Send + Sync>;

/// The time limits and hooks of the helpers ([`crate::execute_with`], [`crate::execute_http`],
/// the tower layer and the reqwest middleware). Cheap to clone (the hooks are shared).
///
/// ```
/// use std::time::Duration;
/// use holdoff_tokio::Options;
///
/// let options = Options::new()
///     .attempt_timeout(Duration::from_secs(2))? // each attempt: 2 s at most
///     .total_timeout(None)?                      // no bound but the budget's
///     .before_wait(|w| println!("retrying in {:?} ({:?})", w.delay, w.source))
///     .after_attempt(|a| println!("attempt {}: {:?}", a.number, a.outcome));
/// # Ok::<(), holdoff::ConfigError>(())
/// ```
#[derive(Clone, Default)]
pub struct Options {
    limits: ExecutionConfig,
    before_wait: Option<BeforeWait>,
    after_attempt: Option<AfterAttempt>,
}

impl Options {
    /// The defaults: no attempt timeout, a 60 s total timeout, no hooks.
    pub fn new() -> Self {
        Self::default()
    }

    /// Bounds each attempt (`None`, the default: only the total timeout does). An attempt that
    /// runs out of time is dropped and recorded as [`Outcome::Timeout`], never as a
    /// cancellation. Errors with [`ConfigError`] naming `execute.attempt_timeout` for zero.
    pub fn attempt_timeout(mut self, limit: impl Into<Option<Duration>>) -> Result<Self, ConfigError> {
        self.limits.attempt_timeout = limit.into();
        self.limits.validate()?;
        Ok(self)
    }

    /// Bounds the whole call, waits included (default 60 s; `None`: only the budget bounds it).
    /// A retry whose wait would end past it gives up now (`total_timeout`); the last attempt
    /// gets what is left. Errors with [`ConfigError`] naming `execute.total_timeout` for zero.
    pub fn total_timeout(mut self, limit: impl Into<Option<Duration>>) -> Result<Self, ConfigError> {
        self.limits.total_timeout = limit.into();
        self.limits.validate()?;
        Ok(self)
    }

    /// Both limits at once, checked as [`Options::attempt_timeout`] and
    /// [`Options::total_timeout`] are.
    pub fn limits(mut self, limits: ExecutionConfig) -> Result<Self, ConfigError> {
        limits.validate()?;
        self.limits = limits;
        Ok(self)
    }

    /// Calls `hook` before each wait between attempts, with the attempts made so far, the delay,
    /// where it came from (`backoff`, `retry_after`, `breaker`), whether the budget's cap
    /// shortened the server's delay, and the server's own delay.
    pub fn before_wait(mut self, hook: impl Fn(&WaitPlan) + Send + Sync + 'static) -> Self {
        self.before_wait = Some(Arc::new(hook));
        self
    }

    /// Calls `hook` after each attempt with what it was recorded as, including an attempt that
    /// panicked or whose future was dropped (both [`Outcome::Cancelled`]; not while the thread
    /// is already panicking for another reason).
    pub fn after_attempt(mut self, hook: impl Fn(&AttemptReport) + Send + Sync + 'static) -> Self {
        self.after_attempt = Some(Arc::new(hook));
        self
    }

    /// The time limits.
    pub fn execution_config(&self) -> ExecutionConfig {
        self.limits
    }

    pub(crate) fn report_wait(&self, w: &WaitPlan) {
        if let Some(hook) = &self.before_wait {
            hook(w);
        }
    }

    pub(crate) fn report_attempt(&self, a: &AttemptReport) {
        if let Some(hook) = &self.after_attempt {
            hook(a);
        }
    }
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Options")
            .field("attempt_timeout", &self.limits.attempt_timeout)
            .field("total_timeout", &self.limits.total_timeout)
            .field("before_wait", &self.before_wait.is_some())
            .field("after_attempt", &self.after_attempt.is_some())
            .finish()
    }
}
