//! The helpers under tokio's paused clock: `TokioClock` makes paused time drive the core, so
//! every test runs instantly and asserts exact (virtual) durations. No real sleeping.

use std::future::pending;
use std::sync::Arc;
use std::time::Duration;

use holdoff::{
    Backoff, Breaker, BreakerConfig, BudgetConfig, Classifier, Clock, Decision, GiveUpReason, Outcome,
    Policy, RetryBudget, State, TripPolicy, WaitSource,
};
use holdoff_tokio::{call, execute, execute_observed, Error, Event, TokioClock};
use tokio::time::{advance, timeout, Instant};

fn policy_with(breaker: BreakerConfig, budget: BudgetConfig) -> Policy {
    let clock = TokioClock::shared();
    let breaker = Arc::new(Breaker::new(breaker, clock.clone()).unwrap());
    let budget = Arc::new(RetryBudget::new(budget, clock).unwrap());
    Policy::new(breaker, budget, None, Classifier::default()).unwrap()
}

fn policy() -> Policy {
    policy_with(BreakerConfig::default(), BudgetConfig::default())
}

/// The operation's errors in these tests: what the classifier sees.
#[derive(Debug, Clone, PartialEq)]
enum Fail {
    Busy(Duration),
    Down,
    NotFound,
}

impl std::fmt::Display for Fail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

fn classify<T>(r: &Result<T, Fail>) -> Outcome {
    match r {
        Ok(_) => Outcome::Success,
        Err(Fail::Busy(d)) => Outcome::RetryLater(*d),
        Err(Fail::Down) => Outcome::Failure,
        Err(Fail::NotFound) => Outcome::Answer,
    }
}

/// An operation that returns the scripted results in order and counts its calls.
fn script(
    results: Vec<Result<u32, Fail>>,
) -> (
    impl FnMut() -> std::future::Ready<Result<u32, Fail>>,
    Arc<std::sync::atomic::AtomicU32>,
) {
    let calls = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let c = calls.clone();
    let op = move || {
        let n = c.fetch_add(1, std::sync::atomic::Ordering::SeqCst) as usize;
        std::future::ready(results[n.min(results.len() - 1)].clone())
    };
    (op, calls)
}

#[tokio::test(start_paused = true)]
async fn tokio_clock_reads_paused_time() {
    let clock = TokioClock::new();
    assert_eq!(clock.now().as_nanos(), 0);
    advance(Duration::from_millis(1500)).await;
    assert_eq!(clock.now().as_nanos(), 1_500_000_000);
    let wall0 = clock.wall_at(holdoff::Instant::ZERO);
    assert_eq!(
        clock.wall_at(clock.now()).duration_since(wall0).unwrap(),
        Duration::from_millis(1500)
    );
}

#[tokio::test(start_paused = true)]
async fn retries_after_the_servers_retry_after() {
    let p = policy();
    let start = Instant::now();
    let (op, calls) = script(vec![Err(Fail::Busy(Duration::from_secs(2))), Ok(7)]);
    let r = execute(&p, op, classify).await;
    assert_eq!(r.unwrap(), 7);
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 2);
    // Exactly the server's delay: the retry-later opened the breaker for 2 s and the retry is
    // its probe, admitted at exactly 2 s (inclusive).
    assert_eq!(start.elapsed(), Duration::from_secs(2));
    let s = p.breaker().snapshot();
    assert_eq!(s.state, State::HalfOpen);
    assert_eq!(s.recoveries, 1);
    assert_eq!(s.probes_in_flight, 0);
}

#[tokio::test(start_paused = true)]
async fn backs_off_then_gives_up_with_the_last_error() {
    let p = policy_with(
        BreakerConfig::default(),
        BudgetConfig {
            max_retries: 2,
            ..BudgetConfig::default()
        },
    );
    let start = Instant::now();
    let (op, calls) = script(vec![Err(Fail::Down)]);
    let r = execute(&p, op, classify).await;
    match r {
        Err(Error::GiveUp {
            reason,
            last_error,
            attempts,
        }) => {
            assert_eq!(reason, GiveUpReason::AttemptsExhausted);
            assert_eq!(last_error, Fail::Down);
            assert_eq!(attempts, 3);
        }
        other => panic!("expected a give-up, got {other:?}"),
    }
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 3);
    // 500 ms then 1 s of backoff.
    assert_eq!(start.elapsed(), Duration::from_millis(1500));
    assert_eq!(p.breaker().snapshot().failures, 3);
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_beyond_the_budget_gives_up_at_once() {
    let p = policy_with(
        BreakerConfig::default(),
        BudgetConfig {
            max_rate_limit_duration: Duration::from_secs(10),
            retry_after_cap: Duration::from_secs(5),
            ..BudgetConfig::default()
        },
    );
    let start = Instant::now();
    // 4 s fits in 10 s; at 4 s, 6 s are left and it fits again; at 8 s, 2 s are left: the wait
    // is never shortened to fit, so the policy gives up at once.
    let (op, calls) = script(vec![Err(Fail::Busy(Duration::from_secs(4)))]);
    let r = execute(&p, op, classify).await;
    let e = r.unwrap_err();
    assert_eq!(e.name(), "retry_after_exceeds_remaining", "{e}");
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 3);
    assert_eq!(start.elapsed(), Duration::from_secs(8));
}

#[tokio::test(start_paused = true)]
async fn a_final_answer_is_the_operations_own_error() {
    let p = policy();
    let (op, calls) = script(vec![Err(Fail::NotFound)]);
    let r = execute(&p, op, classify).await;
    assert!(matches!(r, Err(Error::Operation(Fail::NotFound))), "{r:?}");
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn an_ok_called_a_failure_is_handed_back_when_the_policy_stops() {
    let p = policy_with(
        BreakerConfig::default(),
        BudgetConfig {
            max_retries: 1,
            ..BudgetConfig::default()
        },
    );
    let (op, calls) = script(vec![Ok(503)]);
    let r = execute(&p, op, |_: &Result<u32, Fail>| Outcome::Failure).await;
    assert_eq!(r.unwrap(), 503);
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 2);
}

fn trip(p: &Policy) {
    for _ in 0..5 {
        let permit = p.breaker().allow().unwrap();
        p.breaker().record(permit, Outcome::Failure).unwrap();
    }
    assert_eq!(p.breaker().snapshot().state, State::Open);
}

#[tokio::test(start_paused = true)]
async fn an_open_breaker_refuses_the_first_attempt_without_running_it() {
    let p = policy();
    trip(&p);
    let (op, calls) = script(vec![Ok(1)]);
    let r = execute(&p, op, classify).await;
    match r {
        Err(Error::BreakerOpen { retry_after }) => {
            assert_eq!(retry_after, Some(Duration::from_secs(30)))
        }
        other => panic!("expected breaker_open, got {other:?}"),
    }
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 0);

    p.breaker().force_open();
    let (op, _) = script(vec![Ok(1)]);
    let e = execute(&p, op, classify).await.unwrap_err();
    assert!(matches!(e, Error::BreakerOpen { retry_after: None }));
    assert_eq!(e.to_string(), "circuit breaker forced open");
}

#[tokio::test(start_paused = true)]
async fn a_dropped_probe_is_recorded_as_cancelled_and_frees_its_slot_not_its_window() {
    let p = policy();
    trip(&p);
    advance(Duration::from_secs(30)).await;
    assert!(p.breaker().snapshot().probe_ready);

    // The probe hangs; the caller's timeout drops the future while it holds the permit.
    let r = timeout(
        Duration::from_secs(1),
        execute(&p, pending::<Result<u32, Fail>>, classify),
    )
    .await;
    assert!(r.is_err(), "the attempt never finishes");
    let s = p.breaker().snapshot();
    assert_eq!(s.probes, 1);
    assert_eq!(s.probes_in_flight, 0, "the cancelled probe freed its slot");
    assert!(!s.probe_ready, "but its window stays spent: it may have reached the upstream");
    assert_eq!(s.retry_after, Some(Duration::from_secs(29)));
    assert_eq!(s.recoveries, 0, "a cancellation counts for nothing");

    // The next caller probes when the interval ends, not after the probe timeout.
    advance(Duration::from_secs(29)).await;
    let (op, _) = script(vec![Ok(9)]);
    assert_eq!(execute(&p, op, classify).await.unwrap(), 9);
    assert_eq!(p.breaker().snapshot().recoveries, 1);
}

#[tokio::test(start_paused = true)]
async fn a_retry_waits_for_the_breaker_within_the_budget() {
    // One failure trips; the breaker's 30 s interval is longer than the 500 ms backoff, so the
    // retry's delay is the breaker's (never shorter).
    let p = policy_with(
        BreakerConfig {
            trip: TripPolicy::ConsecutiveFailures { threshold: 1 },
            open_interval: Backoff::constant(Duration::from_secs(30)),
            ..BreakerConfig::default()
        },
        BudgetConfig::default(),
    );
    let start = Instant::now();
    let mut events = Vec::new();
    let (op, _) = script(vec![Err(Fail::Down), Ok(4)]);
    let r = execute_observed(&p, op, classify, |e| events.push(e.clone())).await;
    assert_eq!(r.unwrap(), 4);
    assert_eq!(start.elapsed(), Duration::from_secs(30));
    assert_eq!(events.len(), 4, "{events:?}");
    assert_eq!(
        events[0],
        Event::Attempt {
            attempt: 1,
            probe: false
        }
    );
    match &events[1] {
        Event::Decided {
            attempt: 1,
            outcome: Outcome::Failure,
            decision: Decision::Retry { delay, source, .. },
        } => {
            assert_eq!(*delay, Duration::from_secs(30));
            assert_eq!(*source, WaitSource::Breaker);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(
        events[2],
        Event::Attempt {
            attempt: 2,
            probe: true
        }
    );
    assert!(matches!(
        events[3],
        Event::Decided {
            attempt: 2,
            outcome: Outcome::Success,
            decision: Decision::Done
        }
    ));
}

#[tokio::test(start_paused = true)]
async fn breaker_only_call_admits_records_and_refuses() {
    let clock = TokioClock::shared();
    let b = Breaker::new(BreakerConfig::default(), clock).unwrap();
    for _ in 0..5 {
        let r = call(&b, async { Err::<u32, _>(Fail::Down) }, classify).await;
        assert!(matches!(r, Err(Error::Operation(Fail::Down))));
    }
    let r = call(&b, async { Ok::<u32, Fail>(1) }, classify).await;
    assert!(matches!(
        r,
        Err(Error::BreakerOpen {
            retry_after: Some(d)
        }) if d == Duration::from_secs(30)
    ));
    advance(Duration::from_secs(30)).await;
    // A dropped probe frees its slot at once; its window stays spent.
    let r = timeout(
        Duration::from_millis(10),
        call(&b, pending::<Result<u32, Fail>>(), classify),
    )
    .await;
    assert!(r.is_err());
    let s = b.snapshot();
    assert_eq!((s.probes, s.probes_in_flight, s.probe_ready), (1, 0, false));
    advance(Duration::from_secs(30)).await;
    let r = call(&b, async { Ok::<u32, Fail>(2) }, classify).await;
    assert_eq!(r.unwrap(), 2);
    assert_eq!(b.snapshot().state, State::HalfOpen);
}
