//! # holdoff-tokio: tokio, tower and reqwest over the holdoff sans-IO core
//!
//! The [`holdoff`] core decides (breaker, retry budget, retry quota, Retry-After); this crate
//! sleeps what it decides with [`tokio::time::sleep`] and offers the usual async shapes:
//!
//! * [`execute`] / [`execute_observed`]: run an async operation under a [`holdoff::Policy`],
//!   retrying as the policy says; [`call`]: one attempt under a [`holdoff::Breaker`] alone.
//! * [`TokioClock`]: a [`holdoff::Clock`] over tokio's clock, so that paused time
//!   (`#[tokio::test(start_paused = true)]`) drives the core in tests.
//! * [`PolicyGroup`]: one policy per upstream key (host), built lazily from templates.
//! * Feature `tower`: `tower::HoldoffLayer`, a `tower` layer applying a policy per request.
//! * Feature `reqwest`: `reqwest::HoldoffMiddleware`, a `reqwest-middleware` middleware that
//!   classifies responses with the core's HTTP classifier and honours Retry-After.
//!
//! All durations are [`std::time::Duration`]s. Errors are [`Error`]: `BreakerOpen`, `GiveUp`,
//! or the operation's own error.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use holdoff::{Breaker, BreakerConfig, BudgetConfig, Classifier, Outcome, Policy, RetryBudget};
//! use holdoff_tokio::{execute, TokioClock};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let clock = TokioClock::shared();
//! let breaker = Arc::new(Breaker::new(BreakerConfig::default(), clock.clone()).unwrap());
//! let budget = Arc::new(RetryBudget::new(BudgetConfig::default(), clock).unwrap());
//! let policy = Policy::new(breaker, budget, None, Classifier::default()).unwrap();
//!
//! let mut calls = 0;
//! let answer = execute(
//!     &policy,
//!     || {
//!         calls += 1;
//!         let n = calls;
//!         async move { if n < 3 { Err("busy") } else { Ok(n) } }
//!     },
//!     |r: &Result<u32, &str>| if r.is_ok() { Outcome::Success } else { Outcome::Failure },
//! )
//! .await;
//! assert_eq!(answer.unwrap(), 3); // two retries: 500 ms, then 1 s of (paused) backoff
//! # }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod clock;
mod error;
mod execute;
mod group;
#[cfg(feature = "reqwest")]
pub mod reqwest;
#[cfg(feature = "tower")]
pub mod tower;

pub use clock::TokioClock;
pub use error::Error;
pub use execute::{call, execute, execute_observed, Event};
pub use group::PolicyGroup;
