//! # holdoff-tokio: tokio, tower and reqwest over the holdoff sans-IO core
//!
//! The [`holdoff`] core decides (breaker, retry budget, retry quota, Retry-After, and the retry
//! loop itself, [`holdoff::Execution`]); this crate runs that loop on tokio, once, for every
//! helper:
//!
//! * [`execute`] / [`execute_with`]: run an async operation under a [`holdoff::Policy`],
//!   retrying as the policy says; [`execute_http`]: the same for an operation answering HTTP
//!   responses ([`HttpResponse`]), classified by the policy's HTTP classifier.
//! * [`Options`]: `attempt_timeout` (default none), `total_timeout` (default 60 s), a
//!   before-wait hook and an after-attempt hook.
//! * Feature `tower`: `tower::HoldoffLayer`, a `tower` layer running each request through the
//!   loop. Feature `reqwest`: `reqwest::HoldoffMiddleware`, a `reqwest-middleware` middleware.
//! * Feature `opentelemetry`: every helper above adds, on the caller's current span when it is
//!   recording, an event `holdoff.retry` per wait before a retry (`holdoff.attempt`,
//!   `holdoff.outcome`, `holdoff.delay` in seconds, `holdoff.source`, `holdoff.capped`) and
//!   `holdoff.give_up` when the call gives up or is refused (`holdoff.attempts`,
//!   `holdoff.reason`). A call that succeeds at once adds nothing.
//! * [`call`]: one attempt under a [`holdoff::Breaker`] alone, no retry.
//! * [`TokioClock`]: a [`holdoff::Clock`] over tokio's clock, so that paused time
//!   (`#[tokio::test(start_paused = true)]`) drives the core, the waits and the attempt limits.
//! * [`PolicyGroup`]: one policy per upstream key (host), built lazily from templates.
//!
//! All durations are [`std::time::Duration`]s. A call returns the value, or an [`Error`]: the
//! operation's own final error ([`Error::Operation`]), a refusal ([`Error::BreakerOpen`]) or a
//! give-up ([`Error::GiveUp`], with the last error or value attached), both "upstream
//! unavailable" ([`Error::is_upstream_unavailable`]).
//!
//! ```
//! use std::{io, sync::Arc, time::Duration};
//! use holdoff::{Breaker, BreakerConfig, BudgetConfig, Classifier, Outcome, Policy, RetryBudget};
//! use holdoff_tokio::{execute_with, Options, TokioClock};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let clock = TokioClock::shared();
//! let breaker = Arc::new(Breaker::new(BreakerConfig::default(), clock.clone())?);
//! let budget = Arc::new(RetryBudget::new(BudgetConfig::default(), clock)?);
//! let policy = Policy::new(breaker, budget, None, Classifier::default())?;
//! let options = Options::new()
//!     .attempt_timeout(Duration::from_secs(2))?
//!     .before_wait(|w| eprintln!("retrying in {} ms ({:?})", w.delay.as_millis(), w.source));
//!
//! let mut calls = 0;
//! let answer = execute_with(
//!     &policy,
//!     &options,
//!     || {
//!         calls += 1;
//!         let n = calls;
//!         async move { if n < 3 { Err(io::Error::from(io::ErrorKind::ConnectionRefused)) } else { Ok(n) } }
//!     },
//!     |r: &Result<u32, io::Error>| if r.is_ok() { Outcome::Success } else { Outcome::Failure },
//! )
//! .await;
//! match answer {
//!     Ok(n) => assert_eq!(n, 3), // two retries: 500 ms, then 1 s of (paused) backoff
//!     Err(e) if e.is_upstream_unavailable() => eprintln!("try later: {e} ({:?})", e.retry_after()),
//!     Err(e) => return Err(e.into()), // the operation's own final error
//! }
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod clock;
mod error;
mod execute;
mod group;
mod options;
#[cfg(feature = "reqwest")]
pub mod reqwest;
mod response;
mod run;
#[cfg(feature = "tower")]
pub mod tower;
#[cfg(feature = "opentelemetry")]
mod trace;

pub use clock::TokioClock;
pub use error::{Error, Last};
pub use execute::{call, execute, execute_http, execute_with};
pub use group::PolicyGroup;
pub use options::{AttemptReport, Options};
pub use response::HttpResponse;
