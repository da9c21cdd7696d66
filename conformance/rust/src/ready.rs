//! Running a case whose time never waits.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

/// A waker nothing calls: a future polled by [`complete`] never waits.
struct Unused;

impl Wake for Unused {
    fn wake(self: Arc<Self>) {}
}

/// The output of `fut`, polled once. For a runner on a manual clock, whose time moves only when
/// told and whose `execute` driver is synchronous: its [`run_case`](crate::run_case) future is
/// ready at the first poll, so it needs no runtime.
///
/// Panics if `fut` is not ready at once.
pub fn complete<F: Future>(fut: F) -> F::Output {
    let waker = Waker::from(Arc::new(Unused));
    match pin!(fut).poll(&mut Context::from_waker(&waker)) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("a future run by complete() waited"),
    }
}
