//! For language bindings, not for applications: what a binding needs that a Rust caller does not.
//!
//! * [`Coded`]: the one stable name and the one numeric code of every enum a binding exchanges
//!   ([`State`](crate::State), outcomes, reasons, give-up reasons, wait and hint sources, the
//!   kinds of steps, verdicts, decisions and errors). The names are the conformance suite's;
//!   the codes are the C ABI's (`bindings/c/include/holdoff.h`), which every other binding takes
//!   as well. Data-carrying enums are coded through their kind ([`OutcomeKind::of`]).
//! * `config` (feature `serde`): the neutral configuration format (durations in float milliseconds), the only
//!   serialised shape of a configuration: every binding that takes a configuration as data
//!   parses it here, and the core's constructors validate it.
//! * [`units`]: the one set of rules for turning another language's numbers into durations and
//!   counts (NaN, infinities, negatives and overflow refused, naming the field).
//! * Permits and quota leases as raw values and shared slots ([`RawPermit`], [`PermitSlot`],
//!   [`RawLease`], [`LeaseSlot`]), for bindings whose permits are shared objects or C structs.
//! * [`memory_store_control`]: the conformance runners' control of a `memory://` fleet store
//!   (`"down"`, `"up"`, `"flush"`), and [`memory_store_reset`] between cases.
//! * [`drain_events_up_to`]: draining a breaker's events into a caller's fixed-size buffer.
//! * [`DecisionParts`]: a budget's or policy's decision as flat fields, for bindings that carry
//!   it as a C struct or a dictionary.
//!
//! Nothing here changes what the core decides; it only carries values across a boundary.

mod codes;
#[cfg(feature = "serde")]
pub mod config;
pub mod units;

pub use crate::breaker::permit::{PermitSlot, RawPermit};
pub use crate::fleet::{memory_store_control, memory_store_reset};
pub use crate::quota::lease::{take_raw as take_lease, LeaseSlot, RawLease};
pub use codes::{
    AttemptedKind, BeforeAction, Coded, DecisionKind, ErrorKind, OutcomeKind, StepKind, VerdictKind,
};

use std::time::Duration;

use crate::breaker::{Breaker, Permit, StateChange};
use crate::budget::{Decision, GiveUpReason, WaitSource};
use crate::quota::QuotaLease;

/// Takes at most `max` of the oldest queued state changes of `breaker`, leaving the rest
/// queued: for bindings that drain into a caller's fixed-size buffer (the C ABI).
pub fn drain_events_up_to(breaker: &Breaker, max: usize) -> Vec<StateChange> {
    breaker.drain_events_up_to(max)
}

/// A [`Decision`] as flat fields, for bindings that carry it as a C struct or a dictionary
/// rather than as a tagged union. Each field that does not apply to `kind` is zero, `None` or
/// `false`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecisionParts {
    /// Done, retry or give up.
    pub kind: DecisionKind,
    /// A retry's wait before the next attempt ([`Duration::ZERO`] otherwise).
    pub delay: Duration,
    /// Where a retry's wait came from (`None` unless a retry).
    pub source: Option<WaitSource>,
    /// The server's own delay before the cap, for a retry or a give-up whose answer carried one.
    pub server_delay: Option<Duration>,
    /// Whether the cap shortened the server's delay (`false` unless a retry).
    pub capped: bool,
    /// Why the caller should stop (`None` unless a give-up).
    pub reason: Option<GiveUpReason>,
}

impl From<Decision> for DecisionParts {
    fn from(d: Decision) -> DecisionParts {
        let (server_delay, reason) = match d {
            Decision::Done => (None, None),
            Decision::Retry { server_delay, .. } => (server_delay, None),
            Decision::GiveUp { reason, server_delay } => (server_delay, Some(reason)),
        };
        let (delay, source, capped) = match d {
            Decision::Retry {
                delay,
                source,
                capped,
                ..
            } => (delay, Some(source), capped),
            _ => (Duration::ZERO, None, false),
        };
        DecisionParts {
            kind: DecisionKind::of(&d),
            delay,
            source,
            server_delay,
            capped,
            reason,
        }
    }
}

impl From<Permit> for RawPermit {
    /// The raw fields, for carrying the permit across FFI.
    fn from(p: Permit) -> RawPermit {
        p.into_raw()
    }
}

impl From<RawPermit> for Permit {
    /// Rebuilds a permit from its raw fields. A forged or foreign permit is caught by
    /// [`Breaker::record`] as [`PermitError::Foreign`](crate::PermitError::Foreign) or treated
    /// as a stale answer.
    fn from(raw: RawPermit) -> Permit {
        Permit::from_raw(raw)
    }
}

impl From<QuotaLease> for RawLease {
    /// The raw fields, for carrying the lease across FFI.
    fn from(l: QuotaLease) -> RawLease {
        l.into_raw()
    }
}

impl From<RawLease> for QuotaLease {
    /// Rebuilds a lease from its raw fields; a lease of another quota is refused when given
    /// back.
    fn from(raw: RawLease) -> QuotaLease {
        QuotaLease::from_raw(raw)
    }
}
