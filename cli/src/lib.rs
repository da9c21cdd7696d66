//! `holdoff` command line: replay an outage, recorded or modelled, against a breaker and retry
//! budget configuration on a virtual clock, and show what every caller, probe and wait did.
//!
//! The library half exists so that tests and benchmarks drive the same code as the binary.
//! Everything goes through the core's public API (`holdoff::Breaker`, `Policy`, `ManualClock`, ...).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod arrivals;
pub mod chart;
pub mod cli;
pub mod error;
pub mod fleet;
pub mod metrics;
pub mod plot;
pub mod report;
pub mod scenario;
pub mod sim;
pub mod trace;
pub mod upstream;

pub use error::CliError;
