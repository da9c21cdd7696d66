//! What the Rust conformance runners share (the runner contract is `conformance/README.md`): the
//! suite's cases ([`cases`]), the JSON the steps speak, the comparison of expectations
//! ([`check`], [`check_execute`]), and a case's build and every step but `execute` through
//! holdoff's public API ([`Ctx`], [`run_case`]).
//!
//! A runner brings how the case's time moves ([`Time`]; the core's runner uses the
//! [`holdoff::ManualClock`] implementation here, holdoff-tokio's moves tokio's paused clock) and
//! how it runs `execute` steps ([`Execute`]), and reports each case with a [`Tally`]. Fleet
//! cases run on the in-process store unless a runner brings another ([`FleetBackend`],
//! [`run_case_on`]).

mod case;
mod check;
mod ctx;
mod fleet;
mod json;
mod ops;
mod ready;
mod report;
mod suite;
mod time;

pub use case::{run_case, run_case_on, Execute};
pub use check::{check, check_execute};
pub use ctx::Ctx;
pub use fleet::{fleet_cases, is_fleet_case, FleetBackend, MemoryBackend};
pub use json::{decision_json, event_json, headers, ms, opt_ms, outcome};
pub use ready::complete;
pub use report::Tally;
pub use suite::cases;
pub use time::Time;

/// A step's or a case's result: a failure is the message the runner prints.
pub type R<T> = Result<T, String>;
