//! How a runner moves a case's time.

use std::future::{ready, Future};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use holdoff::{Clock, ClockError, Instant, ManualClock};

/// The case's time: the clock its objects read and the moves of `at`, `clock_set` and
/// `clock_advance`. The moves are futures so that a runner on an async runtime's clock (tokio's
/// paused clock) can let the runtime advance; a manual clock's are ready at once.
pub trait Time {
    /// A time at the case's monotonic 0 whose wall time is `wall_origin`.
    fn starting(wall_origin: SystemTime) -> Self
    where
        Self: Sized;

    /// The clock handed to the case's breakers and budgets.
    fn clock(&self) -> Arc<dyn Clock>;

    /// The time now, since the case's origin, without counting as a reading of the clock.
    fn current(&self) -> Instant;

    /// Moves to `to`; an earlier time than now is refused with [`ClockError::Backwards`] and
    /// moves nothing.
    fn move_to(&self, to: Instant) -> impl Future<Output = Result<(), ClockError>>;

    /// Moves forward by `by`.
    fn move_by(&self, by: Duration) -> impl Future<Output = ()>;
}

/// The contract's manual clock, moved by its own `set` and `advance`.
impl Time for ManualClock {
    fn starting(wall_origin: SystemTime) -> Self {
        ManualClock::with_wall_origin(wall_origin)
    }

    fn clock(&self) -> Arc<dyn Clock> {
        Arc::new(self.clone())
    }

    fn current(&self) -> Instant {
        self.peek()
    }

    fn move_to(&self, to: Instant) -> impl Future<Output = Result<(), ClockError>> {
        ready(self.set(to))
    }

    fn move_by(&self, by: Duration) -> impl Future<Output = ()> {
        self.advance(by);
        ready(())
    }
}
