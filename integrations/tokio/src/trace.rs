//! Feature `opentelemetry`: the retry loop's decisions as events on the caller's current span.
//!
//! Events (the same names in every holdoff language):
//! * `holdoff.retry`, once per wait decided before a retry: `holdoff.attempt` (int, the attempt
//!   that just ended, 1-based), `holdoff.outcome` (that attempt's outcome: `success`, `answer`,
//!   `failure`, `timeout`, `retry_later`, `cancelled`), `holdoff.delay` (double, seconds),
//!   `holdoff.source` (`retry_after`, `backoff`, `breaker`), `holdoff.capped` (bool).
//! * `holdoff.give_up`, when the call ends "upstream unavailable" ([`crate::Error::GiveUp`] or
//!   [`crate::Error::BreakerOpen`]): `holdoff.attempts` (int) and `holdoff.reason` (the
//!   give-up reason, as in the `holdoff.retry.give_ups` metric; `breaker_open` for a refusal).
//!
//! The span is [`opentelemetry::Context::current`]'s, that is the one the caller attached to
//! the future (`FutureExt::with_context`) or made current on the polling thread; nothing is
//! added unless it is recording. A call that succeeds at its first attempt adds nothing and reads
//! no context.

use holdoff::interop::{Coded, OutcomeKind};
use holdoff::{GiveUpReason, Outcome, Verdict, WaitPlan};
use opentelemetry::trace::TraceContextExt;
use opentelemetry::{Context, KeyValue};

/// A wait was decided after attempt `wait.attempts`, whose outcome was `outcome`.
pub(crate) fn retry(wait: &WaitPlan, outcome: Option<Outcome>) {
    let cx = Context::current();
    let span = cx.span();
    if !span.is_recording() {
        return;
    }
    // An attempt has always ended before a wait; cancelled is what the loop records otherwise.
    let outcome = OutcomeKind::of(&outcome.unwrap_or(Outcome::Cancelled));
    span.add_event(
        "holdoff.retry",
        vec![
            KeyValue::new("holdoff.attempt", i64::from(wait.attempts)),
            KeyValue::new("holdoff.outcome", outcome.name()),
            KeyValue::new("holdoff.delay", wait.delay.as_secs_f64()),
            KeyValue::new("holdoff.source", wait.source.name()),
            KeyValue::new("holdoff.capped", wait.capped),
        ],
    );
}

/// The call ended with `verdict`: a give-up or a refusal adds `holdoff.give_up`.
pub(crate) fn finished(verdict: &Verdict) {
    let (attempts, reason) = match *verdict {
        Verdict::GiveUp(g) => (g.attempts, g.reason),
        Verdict::BreakerOpen { attempts, .. } => (attempts, GiveUpReason::BreakerOpen),
        _ => return,
    };
    let cx = Context::current();
    let span = cx.span();
    if !span.is_recording() {
        return;
    }
    span.add_event(
        "holdoff.give_up",
        vec![
            KeyValue::new("holdoff.attempts", i64::from(attempts)),
            KeyValue::new("holdoff.reason", reason.name()),
        ],
    );
}
