//! A [`holdoff::Clock`] over tokio's clock.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use holdoff::{Clock, Instant};

/// A [`Clock`] that reads [`tokio::time::Instant`], so that the core's decisions and
/// [`tokio::time::sleep`] share one time axis.
///
/// Under `tokio::time::pause()` (or `#[tokio::test(start_paused = true)]`) time moves only when
/// the runtime auto-advances it to the next sleep: tests then run instantly and
/// deterministically, with no manual clock to keep in step. Outside a paused runtime this is the
/// process's monotonic clock.
///
/// Readings are whole nanoseconds since construction (saturating after about 584 years). Wall
/// time, used only to turn a Retry-After HTTP-date into a delay (RFC 9110 §10.2.3), is the wall
/// reading taken at construction plus the monotonic reading, so a decision never needs a second
/// reading.
///
/// Cloning gives another handle on the same axis (same origin).
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    origin: tokio::time::Instant,
    wall_origin: SystemTime,
}

impl TokioClock {
    /// A clock whose origin is now, on tokio's clock and on the wall.
    pub fn new() -> Self {
        Self::with_wall_origin(SystemTime::now())
    }

    /// A clock whose origin is now on tokio's clock and `wall_origin` on the wall: tests use it
    /// to check Retry-After HTTP-dates against a fixed "now".
    pub fn with_wall_origin(wall_origin: SystemTime) -> Self {
        TokioClock {
            origin: tokio::time::Instant::now(),
            wall_origin,
        }
    }

    /// A shared handle, ready to pass to the core's constructors.
    pub fn shared() -> Arc<dyn Clock> {
        Arc::new(Self::new())
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Instant {
        let d = tokio::time::Instant::now().saturating_duration_since(self.origin);
        Instant::from_nanos(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }

    fn wall_at(&self, t: Instant) -> SystemTime {
        self.wall_origin + Duration::from_nanos(t.as_nanos())
    }
}
