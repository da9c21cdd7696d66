//! holdoff for Node.js: the native layer (napi-rs).
//!
//! This crate is a thin skin over the `holdoff` core: it converts JavaScript values and units
//! (milliseconds as numbers, never BigInt) and maps errors to `RangeError`/`TypeError` with the
//! stable `code`. Every decision is the core's. The public JavaScript API (classes, permits,
//! the retry helpers, events) lives in `holdoff.js`, which calls the functions here on opaque
//! handles.
//!
//! Why handles and free functions instead of `#[napi]` classes: a method call on a napi class
//! unwraps `this` through a private-property lookup, which costs about as much as the whole
//! closed-state admission; an `External` handle passed as an argument is read in a few
//! instructions. The hot path (allow and record while closed) returns plain numbers for the
//! same reason: creating an object in native code costs several times more than the decision.
//!
//! One module per concept, each with its handle type and the functions on it:
//!
//! | module | holds |
//! |---|---|
//! | `clock` | the manual clock and the shared system clock |
//! | `breaker` | breakers: admission, recording, snapshots, state-change events |
//! | `fleet` | a breaker's fleet (`holdoff_fleet`): attach, tick, close; the in-memory store's test control |
//! | `group` | breaker groups keyed by upstream |
//! | `budget` | retry budgets and their per-call `RetryState` |
//! | `quota` | retry quotas and their leases |
//! | `http` | Retry-After parsing and the HTTP classifier |
//! | `policy` | policies and their per-call `PolicyCall` (the manual API) |
//! | `execution` | the core's retry loop of one call of the retry helpers |
//! | `metrics` | the metric table and each object's readings (`holdoff::metrics`) |
//! | `codes` | every numeric code that crosses N-API for a core enum (outcomes, effects, states, verdicts, attempts) |
//! | `convert` | milliseconds to and from durations, by the core's unit rules |
//! | `opts` | JavaScript option objects to the core's neutral configuration |
//! | `err` | JavaScript errors with the stable `code` and `field` |

#![deny(clippy::all)]

// The modules holding `#[napi]` entry points are public: they are the crate's exports, also in
// test builds, where napi registers nothing and private entry points would be dead code.
pub mod breaker;
pub mod budget;
pub mod clock;
pub mod codes;
mod convert;
mod err;
pub mod execution;
mod external;
pub mod fleet;
pub mod group;
pub mod http;
pub mod metrics;
mod opts;
pub mod policy;
pub mod quota;

use std::sync::{Mutex, MutexGuard};

/// Locks a mutex even if a thread panicked while holding it: the state behind every lock here
/// stays consistent between operations, so a poisoned lock carries nothing to refuse.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
