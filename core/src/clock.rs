//! Injected clocks.
//!
//! holdoff is sans-IO: it never reads the time behind the caller's back. Every breaker, budget and
//! policy is built with one [`Clock`], and every public operation reads it **at most once**,
//! deriving every figure of that decision from that one reading. A delay computed from two
//! readings can go negative (incident 3 in the conformance suite), and sleeping a negative
//! interval raises in several languages.
//!
//! Time is an [`Instant`]: whole nanoseconds on a monotonic axis whose zero is the clock's own
//! origin. Wall time is only needed to turn a Retry-After HTTP-date into a delay; it is derived
//! from the same monotonic reading ([`Clock::wall_at`]) so that no decision needs a second reading.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::ClockError;
use crate::sync::AtomicU64;

/// A point on a clock's monotonic axis: nanoseconds since that clock's origin.
///
/// Arithmetic saturates: an `Instant` never wraps and a difference is never negative.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

impl Instant {
    /// The clock's origin.
    pub const ZERO: Instant = Instant(0);

    /// An instant `nanos` nanoseconds after the origin.
    pub const fn from_nanos(nanos: u64) -> Instant {
        Instant(nanos)
    }

    /// An instant `millis` milliseconds after the origin (saturating).
    pub const fn from_millis(millis: u64) -> Instant {
        Instant(millis.saturating_mul(1_000_000))
    }

    /// Nanoseconds since the origin.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Time from `earlier` to `self`, or zero if `earlier` is later (never negative).
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// `self + d`, saturating at the end of the axis.
    pub fn saturating_add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(duration_nanos(d)))
    }
}

/// A duration as whole nanoseconds, saturating at `u64::MAX` (about 584 years).
pub(crate) fn duration_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The source of time for a breaker, budget or policy.
///
/// Implementations must be monotonic: `now` never goes backwards.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// One reading of the monotonic clock.
    fn now(&self) -> Instant;

    /// The wall-clock time that corresponds to the monotonic reading `t`. Used only to turn a
    /// Retry-After HTTP-date (RFC 9110 §10.2.3) into a delay; it must not read the clock again.
    fn wall_at(&self, t: Instant) -> SystemTime;
}

/// The process's monotonic clock (`std::time::Instant`), with wall time derived from one wall
/// reading taken at construction.
#[derive(Debug, Clone)]
pub struct SystemClock {
    origin: std::time::Instant,
    wall_origin: SystemTime,
}

impl SystemClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        SystemClock {
            origin: std::time::Instant::now(),
            wall_origin: SystemTime::now(),
        }
    }

    /// A shared handle, ready to pass to constructors.
    pub fn shared() -> Arc<dyn Clock> {
        Arc::new(Self::new())
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant(duration_nanos(self.origin.elapsed()))
    }

    fn wall_at(&self, t: Instant) -> SystemTime {
        self.wall_origin + Duration::from_nanos(t.0)
    }
}

/// A clock that moves only when told to: for tests, the conformance suite and the simulator.
///
/// Cloning gives another handle to the same clock, so a test can keep one handle and give
/// another to a breaker.
#[derive(Debug, Clone)]
pub struct ManualClock {
    inner: Arc<ManualInner>,
}

#[derive(Debug)]
struct ManualInner {
    nanos: AtomicU64,
    reads: AtomicU64,
    wall_origin: SystemTime,
}

impl ManualClock {
    /// A clock at [`Instant::ZERO`] whose origin corresponds to the Unix epoch on the wall.
    pub fn new() -> Self {
        Self::with_wall_origin(UNIX_EPOCH)
    }

    /// A clock at [`Instant::ZERO`] whose origin corresponds to `wall_origin` on the wall, so
    /// that HTTP-dates can be tested against a fixed "now".
    pub fn with_wall_origin(wall_origin: SystemTime) -> Self {
        ManualClock {
            inner: Arc::new(ManualInner {
                nanos: AtomicU64::new(0),
                reads: AtomicU64::new(0),
                wall_origin,
            }),
        }
    }

    /// Moves the clock to `t`. Setting it backwards is refused with [`ClockError::Backwards`]:
    /// a monotonic clock never goes back, and a breaker would compute nonsense if it did.
    pub fn set(&self, t: Instant) -> Result<(), ClockError> {
        let mut cur = self.inner.nanos.load(Ordering::Acquire);
        loop {
            if t.0 < cur {
                return Err(ClockError::Backwards {
                    now_nanos: cur,
                    requested_nanos: t.0,
                });
            }
            match self
                .inner
                .nanos
                .compare_exchange_weak(cur, t.0, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Ok(()),
                Err(actual) => cur = actual,
            }
        }
    }

    /// Moves the clock forward by `d` (saturating at the end of the axis) and returns the new time.
    pub fn advance(&self, d: Duration) -> Instant {
        let add = duration_nanos(d);
        let prev = self
            .inner
            .nanos
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                Some(n.saturating_add(add))
            })
            .unwrap_or(0);
        Instant(prev.saturating_add(add))
    }

    /// The current time, without counting as a reading (for assertions).
    pub fn peek(&self) -> Instant {
        Instant(self.inner.nanos.load(Ordering::Acquire))
    }

    /// How many times [`Clock::now`] was called: tests use it to check that an operation read
    /// the clock at most once, and not at all on the closed fast path.
    pub fn reads(&self) -> u64 {
        self.inner.reads.load(Ordering::Relaxed)
    }

    /// The wall-clock time that corresponds to [`Instant::ZERO`].
    pub fn wall_origin(&self) -> SystemTime {
        self.inner.wall_origin
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        self.inner.reads.fetch_add(1, Ordering::Relaxed);
        Instant(self.inner.nanos.load(Ordering::Acquire))
    }

    fn wall_at(&self, t: Instant) -> SystemTime {
        self.inner.wall_origin + Duration::from_nanos(t.0)
    }
}

/// At most one reading of a clock, taken only if a decision needs it.
pub(crate) struct LazyNow<'a> {
    clock: &'a dyn Clock,
    at: std::cell::Cell<Option<Instant>>,
}

impl<'a> LazyNow<'a> {
    pub(crate) fn new(clock: &'a dyn Clock) -> Self {
        LazyNow {
            clock,
            at: std::cell::Cell::new(None),
        }
    }

    pub(crate) fn get(&self) -> Instant {
        if let Some(t) = self.at.get() {
            return t;
        }
        let t = self.clock.now();
        self.at.set(Some(t));
        t
    }

    pub(crate) fn wall(&self) -> SystemTime {
        self.clock.wall_at(self.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_refuses_to_go_backwards() {
        let c = ManualClock::new();
        c.set(Instant::from_millis(10)).unwrap();
        assert!(matches!(
            c.set(Instant::from_millis(9)),
            Err(ClockError::Backwards { .. })
        ));
        assert_eq!(c.peek(), Instant::from_millis(10));
    }

    #[test]
    fn advance_saturates() {
        let c = ManualClock::new();
        c.advance(Duration::MAX);
        assert_eq!(c.peek().as_nanos(), u64::MAX);
        assert_eq!(c.advance(Duration::from_secs(1)).as_nanos(), u64::MAX);
    }

    #[test]
    fn lazy_now_reads_once() {
        let c = ManualClock::new();
        let n = LazyNow::new(&c);
        assert_eq!(c.reads(), 0);
        n.get();
        n.get();
        n.wall();
        assert_eq!(c.reads(), 1);
    }
}
