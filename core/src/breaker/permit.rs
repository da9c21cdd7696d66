//! Permits: the leave to make one call, carrying the breaker that issued it and the episode and
//! probe it was admitted as, so that its answer can be judged current or stale when it comes.

use std::sync::atomic::Ordering;

use super::Breaker;
use crate::error::PermitError;
use crate::sync::AtomicBool;

/// Leave to make one call. Record it exactly once with [`Breaker::record`].
///
/// A permit is a plain value (12 bytes) and is not `Clone`: recording consumes it, so Rust code
/// cannot record twice. A dropped probe permit is a lost probe; its slot frees after the probe
/// timeout. Bindings that hand permits out as shared objects report a second record as
/// [`PermitError::AlreadyRecorded`].
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a permit must be recorded; a dropped probe permit holds its slot until it times out"]
pub struct Permit {
    pub(super) breaker: u32,
    pub(super) episode: u32,
    pub(super) probe: u32,
}

/// The raw fields of a [`Permit`], for bindings that carry permits across FFI as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct RawPermit {
    /// The issuing breaker's id.
    pub breaker: u32,
    /// The internal episode counter at admission.
    pub episode: u32,
    /// The probe's id within its episode; 0 for a call admitted while closed.
    pub probe: u32,
}

impl Permit {
    /// The episode this call was admitted under: 0 when admitted while closed (or disabled),
    /// otherwise the number of the open episode whose probe this is.
    pub fn episode(&self) -> u32 {
        if self.probe == 0 {
            0
        } else {
            self.episode
        }
    }

    /// Whether this call is a probe of an open breaker.
    pub fn is_probe(&self) -> bool {
        self.probe != 0
    }

    /// The raw fields, for carrying the permit across FFI.
    pub(crate) fn into_raw(self) -> RawPermit {
        RawPermit {
            breaker: self.breaker,
            episode: self.episode,
            probe: self.probe,
        }
    }

    /// Rebuilds a permit from its raw fields. A forged or foreign permit is caught by
    /// [`Breaker::record`] as [`PermitError::Foreign`] or treated as a stale answer.
    pub(crate) fn from_raw(raw: RawPermit) -> Permit {
        Permit {
            breaker: raw.breaker,
            episode: raw.episode,
            probe: raw.probe,
        }
    }
}

/// A permit held as a shared object and recorded at most once: for bindings (Python, Node,
/// Kotlin, C#) whose permits are objects that user code may try to record twice. Lock-free.
#[derive(Debug)]
pub struct PermitSlot {
    raw: RawPermit,
    taken: AtomicBool,
}

impl PermitSlot {
    /// Wraps a permit.
    pub fn new(permit: Permit) -> PermitSlot {
        PermitSlot {
            raw: permit.into_raw(),
            taken: AtomicBool::new(false),
        }
    }

    /// The episode the permit was admitted under (0 while closed).
    pub fn episode(&self) -> u32 {
        if self.raw.probe == 0 {
            0
        } else {
            self.raw.episode
        }
    }

    /// Whether the permit is a probe.
    pub fn is_probe(&self) -> bool {
        self.raw.probe != 0
    }

    /// Whether the permit was already taken for recording.
    pub fn is_taken(&self) -> bool {
        self.taken.load(Ordering::Acquire)
    }

    /// Takes the permit to record it on `breaker`: [`PermitError::Foreign`] if another breaker
    /// issued it (the slot stays usable), [`PermitError::AlreadyRecorded`] the second time.
    pub fn take(&self, breaker: &Breaker) -> Result<Permit, PermitError> {
        if self.raw.breaker != breaker.id() {
            return Err(PermitError::Foreign);
        }
        if self.taken.swap(true, Ordering::AcqRel) {
            return Err(PermitError::AlreadyRecorded);
        }
        Ok(Permit::from_raw(self.raw))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::breaker::tests::{fail, incident_one};
    use crate::breaker::Outcome;
    use crate::clock::Instant;

    #[test]
    fn foreign_permit_is_refused() {
        let (a, _) = incident_one();
        let (b, _) = incident_one();
        let p = a.allow().unwrap();
        assert_eq!(b.record(p, Outcome::Success), Err(PermitError::Foreign));
    }

    #[test]
    fn permit_slot_reports_its_permit() {
        let (b, clock) = incident_one();
        let slot = PermitSlot::new(b.allow().unwrap());
        assert_eq!(
            (slot.episode(), slot.is_probe(), slot.is_taken()),
            (0, false, false)
        );
        b.record(slot.take(&b).unwrap(), Outcome::Failure).unwrap();
        assert!(slot.is_taken());
        fail(&b, 4);
        clock.set(Instant::from_millis(60_000)).unwrap();
        let probe = PermitSlot::new(b.allow().unwrap());
        assert_eq!(
            (probe.episode(), probe.is_probe(), probe.is_taken()),
            (1, true, false)
        );
    }
}
