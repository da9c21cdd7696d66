//! The case's time on tokio's paused clock: the case's objects read a [`TokioClock`] whose origin
//! is the case's monotonic 0, and `at`, `clock_set` and `clock_advance` move it with
//! `tokio::time::advance`.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use holdoff::{Clock, ClockError, Instant};
use holdoff_conformance::Time;
use holdoff_tokio::TokioClock;

/// A case's [`TokioClock`]; make it inside the paused runtime, so that its origin is that
/// runtime's now.
pub struct Paused(TokioClock);

impl Time for Paused {
    fn starting(wall_origin: SystemTime) -> Self {
        Paused(TokioClock::with_wall_origin(wall_origin))
    }

    fn clock(&self) -> Arc<dyn Clock> {
        Arc::new(self.0)
    }

    fn current(&self) -> Instant {
        self.0.now()
    }

    async fn move_to(&self, to: Instant) -> Result<(), ClockError> {
        let now = self.0.now();
        if to < now {
            return Err(ClockError::Backwards {
                now_nanos: now.as_nanos(),
                requested_nanos: to.as_nanos(),
            });
        }
        tokio::time::advance(to.saturating_since(now)).await;
        Ok(())
    }

    async fn move_by(&self, by: Duration) {
        tokio::time::advance(by).await;
    }
}
