//! The primitives the core shares between threads: std's in every normal build, loom's
//! model-checked ones under `--cfg loom` (`core/loom.sh`), so the lock-free fast paths are
//! checked against every interleaving with no line of the checked code differing.
//!
//! Two things stay std's under loom too: `Arc`, because it is part of the public API
//! (`Arc<dyn Clock>`, `Listener`) and loom's cannot be coerced to a trait object; and statics
//! such as the breaker id counter, because loom's atomics are not const-constructible.

#[cfg(not(loom))]
pub(crate) use std::sync::{
    atomic::{AtomicBool, AtomicU64},
    Mutex, MutexGuard,
};

#[cfg(loom)]
pub(crate) use loom::sync::{
    atomic::{AtomicBool, AtomicU64},
    Mutex, MutexGuard,
};
