//! # holdoff: one sans-IO circuit breaker and retry budget for every language
//!
//! SDK teams keep reimplementing resilience timers and keep shipping the same bugs: a breaker
//! that latches open for good after a long outage, a half-open breaker that closes on one stray
//! answer and bursts, late answers from a previous episode that move the state, a probe spent by
//! a redundant pre-check, a retry delay computed from two clock readings that goes negative, a
//! Retry-After shortened to fit a budget. holdoff fixes each once, here, and every binding
//! (Python, Node, C, Go, C#, Kotlin) runs this same code and the same conformance suite.
//!
//! * [`Breaker`] (`breaker/`) with [`TripPolicy`] (`trip.rs`) and [`Backoff`] (`backoff.rs`);
//!   [`BreakerGroup`] for breakers keyed by upstream.
//! * [`RetryBudget`] (`budget.rs`): rate-limit episodes, Retry-After cap, counted backoff.
//! * [`RetryQuota`] (`quota.rs`): a token bucket shared by all callers of an upstream.
//! * [`parse_retry_after`] (`retry_after.rs`) and the HTTP [`Classifier`] (`http.rs`).
//! * [`Policy`] (`policy.rs`): breaker + budget + quota for one upstream.
//! * [`Execution`] (`execution/`): the retry loop of one logical call over a policy, as a
//!   state machine; every language's retry helpers are this loop.
//! * [`fleet`]: one breaker shared by a fleet of workers through a store ([`FleetMember`],
//!   [`FleetStore`], the in-process [`MemoryStore`]; the Redis store is the `holdoff-fleet`
//!   crate).
//! * [`interop`]: for language bindings, not for applications: stable names and codes, the
//!   neutral configuration format, unit conversions, raw permits and leases.
//!
//! **Sans-IO**: nothing here sleeps, spawns or reads a clock behind the caller's back. Every
//! object is built with a [`Clock`]; every public operation reads it at most once, and the
//! closed fast path ([`Breaker::allow`] and recording a success) reads none and takes no lock.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use holdoff::{Breaker, BreakerConfig, ManualClock, Outcome, State};
//!
//! let clock = ManualClock::new();
//! let breaker = Breaker::new(BreakerConfig::default(), Arc::new(clock.clone())).unwrap();
//! for _ in 0..5 {
//!     let permit = breaker.allow().unwrap();
//!     breaker.record(permit, Outcome::Failure).unwrap();
//! }
//! let refused = breaker.allow().unwrap_err();
//! assert_eq!(refused.retry_after, Some(Duration::from_secs(30)));
//! clock.advance(Duration::from_secs(30));
//! let probe = breaker.allow().unwrap(); // exactly one probe per interval
//! assert!(probe.is_probe() && breaker.allow().is_err());
//! breaker.record(probe, Outcome::Success).unwrap();
//! assert_eq!(breaker.snapshot().state, State::HalfOpen); // 3 answers close it, one per interval
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod backoff;
pub mod breaker;
pub mod budget;
pub mod clock;
pub mod error;
pub mod execution;
pub mod fleet;
pub mod group;
pub mod http;
pub mod interop;
pub mod metrics;
pub mod policy;
pub mod quota;
pub mod retry_after;
mod sync;
pub mod trip;

pub use backoff::{Backoff, Prng};
pub use breaker::{
    fast_admit, fast_success, Breaker, BreakerConfig, Effect, Listener, Outcome, Permit, Reason, Refusal,
    Snapshot, State, StateChange, FAST_PATH_COUNTING, FAST_PATH_STATE_MASK, FAST_PATH_TIMED,
    FAST_PATH_VERSION,
};
pub use budget::{BudgetConfig, Decision, GiveUpReason, RetryBudget, RetryState, WaitSource};
pub use clock::{Clock, Instant, ManualClock, SystemClock};
pub use error::{ClockError, ConfigError, HoldoffError, InputError, PermitError};
pub use execution::{AttemptPlan, Attempted, Execution, ExecutionConfig, GaveUp, Step, Verdict, WaitPlan};
pub use fleet::{FleetConfig, FleetError, FleetMember, FleetStore, MemoryStore};
pub use group::{BreakerGroup, GroupSnapshot};
pub use http::{check_status, Classification, Classifier, ClassifierConfig};
pub use policy::{Before, Call, Policy};
pub use quota::{QuotaConfig, QuotaEmpty, QuotaLease, RetryQuota};
pub use retry_after::{hint_from_headers, parse_retry_after, HintSource, RetryAfter, Unusable};
pub use trip::TripPolicy;

#[cfg(test)]
mod tests {
    // One breaker, budget, quota or policy is shared by many threads: they must stay Send + Sync.
    fn shared<T: Send + Sync>() {}

    #[test]
    fn public_objects_are_send_and_sync() {
        shared::<crate::Breaker>();
        shared::<crate::RetryBudget>();
        shared::<crate::RetryQuota>();
        shared::<crate::Policy>();
        shared::<crate::BreakerGroup>();
        shared::<crate::interop::PermitSlot>();
        shared::<crate::ManualClock>();
        shared::<crate::FleetMember>();
        shared::<crate::MemoryStore>();
    }
}
