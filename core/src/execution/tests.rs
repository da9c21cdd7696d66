//! The retry loop on a manual clock: each verdict, each limit, each out-of-order call.

use std::sync::Arc;

use super::*;
use crate::backoff::Backoff;
use crate::breaker::{Breaker, BreakerConfig};
use crate::budget::{BudgetConfig, RetryBudget};
use crate::clock::ManualClock;
use crate::http::Classifier;
use crate::interop::{Coded, ErrorKind};
use crate::trip::TripPolicy;

fn policy(clock: &ManualClock) -> Policy {
    let c: Arc<dyn crate::clock::Clock> = Arc::new(clock.clone());
    let breaker = BreakerConfig {
        trip: TripPolicy::ConsecutiveFailures { threshold: 1 },
        open_interval: Backoff::constant(Duration::from_secs(10)),
        probe_timeout: Some(Duration::from_secs(3600)),
        ..BreakerConfig::default()
    };
    Policy::new(
        Arc::new(Breaker::new(breaker, Arc::clone(&c)).unwrap()),
        Arc::new(RetryBudget::new(BudgetConfig::default(), c).unwrap()),
        None,
        Classifier::default(),
    )
    .unwrap()
}

const NO_LIMITS: ExecutionConfig = ExecutionConfig {
    attempt_timeout: None,
    total_timeout: None,
};

#[test]
fn a_healthy_call_without_a_total_timeout_reads_no_clock() {
    let clock = ManualClock::new();
    let p = policy(&clock);
    let mut e = Execution::new(&p, NO_LIMITS).unwrap();
    assert!(matches!(e.next_step().unwrap(), Step::Attempt(a) if a.number == 1 && a.time_limit.is_none()));
    let done = e.complete(Attempted::Returned(Outcome::Success)).unwrap();
    assert_eq!(done, Step::Finish(Verdict::Return { attempts: 1 }));
    assert_eq!(clock.reads(), 0);
}

#[test]
fn dropping_a_call_during_a_probe_frees_the_probe() {
    let clock = ManualClock::new();
    let p = policy(&clock);
    let b = p.breaker().allow().unwrap();
    p.breaker().record(b, Outcome::Failure).unwrap();
    clock.advance(Duration::from_secs(10));
    let mut e = Execution::new(&p, NO_LIMITS).unwrap();
    assert!(matches!(e.next_step().unwrap(), Step::Attempt(a) if a.probe));
    assert_eq!(p.breaker().snapshot().probes_in_flight, 1);
    drop(e);
    assert_eq!(p.breaker().snapshot().probes_in_flight, 0);
}

#[test]
fn stop_after_a_wait_gives_up_with_that_wait() {
    let clock = ManualClock::new();
    let p = policy(&clock);
    let mut e = Execution::new(&p, NO_LIMITS).unwrap();
    assert_eq!(ErrorKind::of(&e.stop().unwrap_err()).name(), "invalid_input");
    e.next_step().unwrap();
    let wait = e.complete(Attempted::Raised(Outcome::Failure)).unwrap();
    let Step::Wait(w) = wait else { panic!("{wait:?}") };
    let v = e.stop().unwrap();
    assert_eq!(
        v,
        Verdict::GiveUp(GaveUp {
            reason: GiveUpReason::AttemptsExhausted,
            attempts: 1,
            retry_after: Some(w.delay),
            server_delay: None,
            capped: false,
        })
    );
    assert_eq!(e.next_step().unwrap(), Step::Finish(v));
}

fn policy_with_quota(clock: &ManualClock) -> Policy {
    let p = policy(clock);
    Policy::new(
        Arc::clone(p.breaker()),
        Arc::clone(p.budget()),
        Some(Arc::new(
            crate::quota::RetryQuota::new(crate::quota::QuotaConfig::default()).unwrap(),
        )),
        Classifier::default(),
    )
    .unwrap()
}

#[test]
fn a_cancellation_at_the_limit_ends_the_call_as_a_recorded_timeout() {
    let clock = ManualClock::new();
    let p = policy_with_quota(&clock);
    let limits = ExecutionConfig {
        attempt_timeout: Some(Duration::from_millis(100)),
        total_timeout: None,
    };
    let mut e = Execution::new(&p, limits).unwrap();
    e.next_step().unwrap();
    clock.advance(Duration::from_millis(100));
    let v = e.complete(Attempted::Cancelled).unwrap();
    assert_eq!(v, Step::Finish(Verdict::Cancelled { attempts: 1 }));
    assert_eq!(e.last_outcome(), Some(Outcome::Timeout));
    // The breaker counted the timeout (threshold 1: open); no retry was bought.
    assert_eq!(p.breaker().snapshot().opens, 1);
    assert_eq!(p.quota().unwrap().available(), 500);
    // The same through cancel() and through a drop past the limit.
    p.breaker().reset();
    let mut e = Execution::new(&p, limits).unwrap();
    e.next_step().unwrap();
    clock.advance(Duration::from_millis(150));
    assert_eq!(e.cancel(), Verdict::Cancelled { attempts: 1 });
    assert_eq!(p.quota().unwrap().available(), 500);
    p.breaker().reset();
    let mut e = Execution::new(&p, limits).unwrap();
    e.next_step().unwrap();
    clock.advance(Duration::from_millis(150));
    drop(e);
    assert_eq!(p.quota().unwrap().available(), 500);
    assert_eq!(p.breaker().snapshot().opens, 3);
}

#[test]
fn a_forgone_retry_gives_its_tokens_back() {
    let clock = ManualClock::new();
    let p = policy_with_quota(&clock);
    let forgo: [fn(&mut Execution<&Policy>); 3] = [
        |e| {
            e.cancel();
        },
        |e| {
            e.stop().unwrap();
        },
        |e| drop(std::mem::replace(e, Execution::new(e.policy, NO_LIMITS).unwrap())),
    ];
    for f in forgo {
        p.breaker().reset();
        let mut e = Execution::new(&p, NO_LIMITS).unwrap();
        e.next_step().unwrap();
        assert!(matches!(
            e.complete(Attempted::Raised(Outcome::Failure)).unwrap(),
            Step::Wait(_)
        ));
        assert_eq!(p.quota().unwrap().available(), 495, "the retry was paid for");
        f(&mut e);
        assert_eq!(p.quota().unwrap().available(), 500, "and given back when forgone");
    }
}

#[test]
fn steps_out_of_order_are_refused() {
    let clock = ManualClock::new();
    let p = policy(&clock);
    let mut e = Execution::new(&p, NO_LIMITS).unwrap();
    assert_eq!(
        ErrorKind::of(&e.complete(Attempted::Cancelled).unwrap_err()).name(),
        "invalid_input"
    );
    e.next_step().unwrap();
    assert_eq!(ErrorKind::of(&e.next_step().unwrap_err()).name(), "invalid_input");
    let zero = ExecutionConfig {
        attempt_timeout: Some(Duration::ZERO),
        total_timeout: None,
    };
    assert_eq!(
        Execution::new(&p, zero).unwrap_err().field,
        "execute.attempt_timeout"
    );
}

#[test]
fn an_execution_dropped_unused_counts_no_give_up_and_a_cancelled_wait_does() {
    let clock = ManualClock::new();
    let p = policy(&clock);
    let mut out = Vec::new();
    p.metrics(&mut out);
    drop(Execution::new(&p, ExecutionConfig::default()).unwrap());
    let mut e = Execution::new(&p, ExecutionConfig::default()).unwrap();
    assert!(matches!(e.next_step().unwrap(), Step::Attempt(_)));
    assert!(matches!(
        e.complete(Attempted::Raised(Outcome::Failure)).unwrap(),
        Step::Wait(_)
    ));
    drop(e);
    out.clear();
    p.metrics(&mut out);
    let cancelled: f64 = out
        .iter()
        .filter(|s| s.series(None) == "holdoff.retry.give_ups{reason=cancelled}")
        .map(|s| s.value)
        .sum();
    assert_eq!(cancelled, 1.0);
}

// A first attempt admitted on the breaker's word and reported later runs on as one admitted by
// `next_step` at the same instant: the same limits, the same verdicts.
#[test]
fn an_attempt_admitted_on_the_word_runs_on_as_next_step_would() {
    let config = ExecutionConfig::default();
    let run = |on_word: bool| {
        let clock = ManualClock::new();
        let p = policy(&clock);
        clock.advance(Duration::from_secs(7));
        let mut e = if on_word {
            let permit = p.breaker().allow().unwrap();
            clock.advance(Duration::from_secs(55));
            Execution::admitted(&p, config, permit, Duration::from_secs(55)).unwrap()
        } else {
            let mut e = Execution::new(&p, config).unwrap();
            let first = e.next_step().unwrap();
            assert!(
                matches!(first, Step::Attempt(a) if a.number == 1 && a.time_limit == Some(DEFAULT_TOTAL_TIMEOUT))
            );
            clock.advance(Duration::from_secs(55));
            e
        };
        assert_eq!(e.attempts(), 1);
        // The failure trips the breaker (threshold 1): its 10 s open interval does not fit in
        // the 5 s left of the total timeout.
        let step = e.complete(Attempted::Raised(Outcome::Failure)).unwrap();
        (step, p.breaker().snapshot().state)
    };
    let (slow, slow_state) = run(false);
    let (fast, fast_state) = run(true);
    assert!(
        matches!(slow, Step::Finish(Verdict::GiveUp(g)) if g.reason == GiveUpReason::TotalTimeout && g.attempts == 1)
    );
    assert_eq!(fast, slow);
    assert_eq!(fast_state, slow_state);
}

#[test]
fn an_attempt_admitted_on_the_word_without_limits_reads_no_clock() {
    let clock = ManualClock::new();
    let p = policy(&clock);
    let permit = p.breaker().allow().unwrap();
    let mut e = Execution::admitted(&p, NO_LIMITS, permit, Duration::from_secs(5)).unwrap();
    let done = e.complete(Attempted::Returned(Outcome::Success)).unwrap();
    assert_eq!(done, Step::Finish(Verdict::Return { attempts: 1 }));
    assert_eq!(clock.reads(), 0);
}
