//! The C ABI of holdoff: `include/holdoff.h` is generated from this crate by cbindgen.
//!
//! Conventions (`docs/ffi.md`, after rustls-ffi): every symbol is prefixed `holdoff_`;
//! objects are opaque, `Arc`-backed, thread-safe handles with `_new`/`_free` pairs; fallible
//! functions return a `holdoff_status` and write their out-parameters only on success; every
//! pointer is checked for NULL; enums from C are taken as integers and checked; no panic crosses
//! the boundary (`status::boundary`); durations are `uint64_t` nanoseconds. All of holdoff's
//! `unsafe` code lives in this crate, each block with its safety argument.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs, clippy::undocumented_unsafe_blocks, clippy::missing_safety_doc)]
#![allow(non_camel_case_types)]

pub mod breaker;
pub mod budget;
pub mod clock;
pub mod config;
pub mod execution;
pub mod fast_path;
pub mod fleet;
pub(crate) mod handle;
pub mod http;
pub mod metrics;
pub mod policy;
pub mod quota;
pub mod status;
pub mod types;
pub mod version;

#[cfg(test)]
mod abi_tests;

pub use handle::{holdoff_debug_checks_handles, holdoff_debug_live_handles};
