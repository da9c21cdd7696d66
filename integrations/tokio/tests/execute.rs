//! The helpers under tokio's paused clock: `TokioClock` makes paused time drive the core, so
//! every test runs instantly and asserts exact (virtual) durations. No real sleeping.

use std::future::pending;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use holdoff::{
    Backoff, Breaker, BreakerConfig, BudgetConfig, Classifier, Clock, GiveUpReason, Outcome, Policy,
    RetryBudget, State, TripPolicy, WaitPlan, WaitSource,
};
use holdoff_tokio::{
    call, execute, execute_http, execute_with, AttemptReport, Error, HttpResponse, Last, Options, TokioClock,
};
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

/// Trips after one failure and probes every `interval` (no probe timeout in these tests).
fn fragile(interval: Duration) -> BreakerConfig {
    BreakerConfig {
        trip: TripPolicy::ConsecutiveFailures { threshold: 1 },
        open_interval: Backoff::constant(interval),
        probe_timeout: Some(Duration::from_secs(3600)),
        ..BreakerConfig::default()
    }
}

/// The operation's errors in these tests: what the classifier sees.
#[derive(Debug, Clone, PartialEq)]
enum Fail {
    Busy(Duration),
    Down,
    NotFound,
    Cancelled,
}

impl std::fmt::Display for Fail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

impl std::error::Error for Fail {}

fn classify<T>(r: &Result<T, Fail>) -> Outcome {
    match r {
        Ok(_) => Outcome::Success,
        Err(Fail::Busy(d)) => Outcome::RetryLater(*d),
        Err(Fail::Down) => Outcome::Failure,
        Err(Fail::NotFound) => Outcome::Answer,
        Err(Fail::Cancelled) => Outcome::Cancelled,
    }
}

/// An operation that returns the scripted results in order (the last one repeats) and counts
/// its calls.
fn script(
    results: Vec<Result<u32, Fail>>,
) -> (
    impl FnMut() -> std::future::Ready<Result<u32, Fail>>,
    Arc<AtomicU32>,
) {
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    let op = move || {
        let n = c.fetch_add(1, Ordering::SeqCst) as usize;
        std::future::ready(results[n.min(results.len() - 1)].clone())
    };
    (op, calls)
}

/// What an execution's `after_attempt` hook saw, in order.
type Attempts = Arc<Mutex<Vec<AttemptReport>>>;

/// An execution run in a task of its own.
type Task = tokio::task::JoinHandle<Result<u32, Error<Fail, u32>>>;

/// Options whose hooks record every attempt and wait.
fn recorded(options: Options) -> (Options, Attempts, Arc<Mutex<Vec<WaitPlan>>>) {
    let attempts = Arc::new(Mutex::new(Vec::new()));
    let waits = Arc::new(Mutex::new(Vec::new()));
    let (a, w) = (attempts.clone(), waits.clone());
    let options = options
        .after_attempt(move |r| a.lock().unwrap().push(*r))
        .before_wait(move |p| w.lock().unwrap().push(*p));
    (options, attempts, waits)
}

fn outcomes(a: &Mutex<Vec<AttemptReport>>) -> Vec<Outcome> {
    a.lock().unwrap().iter().map(|r| r.outcome).collect()
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
    assert_eq!(calls.load(Ordering::SeqCst), 2);
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
    let (options, attempts, waits) = recorded(Options::new());
    let (op, calls) = script(vec![Err(Fail::Down)]);
    let e = execute_with(&p, &options, op, classify).await.unwrap_err();
    assert!(e.is_upstream_unavailable());
    assert_eq!(e.name(), "give_up");
    match &e {
        Error::GiveUp {
            reason,
            attempts,
            retry_after,
            server_delay,
            capped,
            last: Last::Error(last),
        } => {
            assert_eq!(*reason, GiveUpReason::AttemptsExhausted);
            assert_eq!(*attempts, 3);
            assert_eq!((*retry_after, *server_delay, *capped), (None, None, false));
            assert_eq!(*last, Fail::Down);
        }
        other => panic!("expected a give-up with the last error, got {other:?}"),
    }
    assert_eq!(
        e.to_string(),
        "gave up after 3 attempt(s) (attempts_exhausted): Down"
    );
    assert_eq!(
        std::error::Error::source(&e).map(|s| s.to_string()).as_deref(),
        Some("Down")
    );
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    // 500 ms then 1 s of backoff, each announced to the before-wait hook.
    assert_eq!(start.elapsed(), Duration::from_millis(1500));
    let w = waits.lock().unwrap().clone();
    assert_eq!(
        w.iter()
            .map(|w| (w.attempts, w.delay, w.source))
            .collect::<Vec<_>>(),
        vec![
            (1, Duration::from_millis(500), WaitSource::Backoff),
            (2, Duration::from_secs(1), WaitSource::Backoff)
        ]
    );
    assert_eq!(outcomes(&attempts), vec![Outcome::Failure; 3]);
    assert_eq!(p.breaker().snapshot().failures, 3);
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_beyond_the_budget_gives_up_at_once_with_the_servers_delay() {
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
    let e = execute(&p, op, classify).await.unwrap_err();
    assert!(
        matches!(
            e,
            Error::GiveUp {
                reason: GiveUpReason::RetryAfterExceedsRemaining,
                retry_after: Some(d),
                server_delay: Some(s),
                ..
            } if d == Duration::from_secs(4) && s == d
        ),
        "{e:?}"
    );
    assert_eq!(e.retry_after(), Some(Duration::from_secs(4)));
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(start.elapsed(), Duration::from_secs(8));
}

#[tokio::test(start_paused = true)]
async fn a_final_answer_is_the_operations_own_error() {
    let p = policy();
    let (op, calls) = script(vec![Err(Fail::NotFound)]);
    let e = execute(&p, op, classify).await.unwrap_err();
    assert!(matches!(e, Error::Operation(Fail::NotFound)), "{e:?}");
    assert!(!e.is_upstream_unavailable());
    assert_eq!(e.to_string(), "NotFound");
    assert_eq!(e.into_operation_error(), Some(Fail::NotFound));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(p.breaker().snapshot().failures, 0);
}

#[tokio::test(start_paused = true)]
async fn an_ok_called_a_failure_is_attached_to_the_give_up_not_returned() {
    let p = policy_with(
        BreakerConfig::default(),
        BudgetConfig {
            max_retries: 1,
            ..BudgetConfig::default()
        },
    );
    let (op, calls) = script(vec![Ok(500), Ok(503)]);
    let e = execute(&p, op, |_: &Result<u32, Fail>| Outcome::Failure)
        .await
        .unwrap_err();
    match e {
        Error::GiveUp {
            reason: GiveUpReason::AttemptsExhausted,
            attempts: 2,
            last: Last::Value(v),
            ..
        } => assert_eq!(v, 503, "the last attempt's value"),
        other => panic!("expected a give-up with the last value, got {other:?}"),
    }
    assert_eq!(calls.load(Ordering::SeqCst), 2);
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
    let e = execute(&p, op, classify).await.unwrap_err();
    assert!(e.is_upstream_unavailable());
    match e {
        Error::BreakerOpen {
            retry_after,
            attempts: 0,
            last: None,
        } => assert_eq!(retry_after, Some(Duration::from_secs(30))),
        other => panic!("expected breaker_open, got {other:?}"),
    }
    assert_eq!(calls.load(Ordering::SeqCst), 0);

    p.breaker().force_open();
    let (op, _) = script(vec![Ok(1)]);
    let e = execute(&p, op, classify).await.unwrap_err();
    assert!(matches!(
        e,
        Error::BreakerOpen {
            retry_after: None,
            ..
        }
    ));
    assert_eq!(e.to_string(), "circuit breaker forced open");
}

#[tokio::test(start_paused = true)]
async fn a_retry_waits_for_the_breaker_within_the_budget() {
    // One failure trips; the breaker's 30 s interval is longer than the 500 ms backoff, so the
    // retry's delay is the breaker's (never shorter), and the retry is the probe.
    let p = policy_with(fragile(Duration::from_secs(30)), BudgetConfig::default());
    let start = Instant::now();
    let (options, attempts, waits) = recorded(Options::new());
    let (op, _) = script(vec![Err(Fail::Down), Ok(4)]);
    assert_eq!(execute_with(&p, &options, op, classify).await.unwrap(), 4);
    assert_eq!(start.elapsed(), Duration::from_secs(30));
    let w = waits.lock().unwrap().clone();
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!(
        (w[0].delay, w[0].source),
        (Duration::from_secs(30), WaitSource::Breaker)
    );
    let a = attempts.lock().unwrap().clone();
    assert_eq!(
        a.iter()
            .map(|a| (a.number, a.probe, a.outcome))
            .collect::<Vec<_>>(),
        vec![(1, false, Outcome::Failure), (2, true, Outcome::Success)]
    );
}

#[tokio::test(start_paused = true)]
async fn an_attempt_past_its_timeout_is_a_timeout_and_trips_the_breaker() {
    // A hanging upstream: each attempt is cut at 100 ms of paused time and recorded as a
    // timeout (a failure for the breaker), never as a cancellation, so the breaker opens.
    let p = policy_with(fragile(Duration::from_secs(10)), BudgetConfig::default());
    let (options, attempts, _) = recorded(
        Options::new()
            .attempt_timeout(Duration::from_millis(100))
            .unwrap(),
    );
    let start = Instant::now();
    let e = execute_with(&p, &options, pending::<Result<u32, Fail>>, classify)
        .await
        .unwrap_err();
    // Attempt 1 times out at 0.1 s and opens the breaker for 10 s; each retry waits for the
    // breaker, probes, times out 100 ms later and re-opens it: attempts at 0, 10.1, 20.2, 30.3,
    // 40.4 and 50.5 s. The next wait would end at 60.6 s, past the default total timeout.
    assert!(
        matches!(
            e,
            Error::GiveUp {
                reason: GiveUpReason::TotalTimeout,
                attempts: 6,
                last: Last::TimedOut,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().ends_with(": the last attempt timed out"), "{e}");
    assert_eq!(outcomes(&attempts), vec![Outcome::Timeout; 6]);
    assert_eq!(start.elapsed(), Duration::from_millis(50_600));
    let s = p.breaker().snapshot();
    assert_eq!((s.state, s.probes, s.probes_in_flight), (State::Open, 5, 0));
}

#[tokio::test(start_paused = true)]
async fn the_total_timeout_bounds_waits_and_attempts() {
    let patient = BreakerConfig {
        trip: TripPolicy::ConsecutiveFailures { threshold: 100 },
        ..BreakerConfig::default()
    };
    let p = policy_with(patient.clone(), BudgetConfig::default());
    // Transport errors for ever: the counted backoff (0.5, 1, 2, 4, 8, 16, 32 s) would run past
    // a minute; the default total timeout ends the call at the first wait that would.
    let start = Instant::now();
    let (op, calls) = script(vec![Err(Fail::Down)]);
    let e = execute(&p, op, classify).await.unwrap_err();
    assert!(
        matches!(
            e,
            Error::GiveUp {
                reason: GiveUpReason::TotalTimeout,
                ..
            }
        ),
        "{e:?}"
    );
    // Attempts at 0, 0.5, 1.5, 3.5, 7.5, 15.5, 31.5 s; the next wait (32 s) ends past 60 s.
    assert_eq!(calls.load(Ordering::SeqCst), 7);
    assert_eq!(start.elapsed(), Duration::from_millis(31_500));

    // Without a total timeout, only the budget bounds the call.
    let p = policy_with(
        patient,
        BudgetConfig {
            max_retries: 8,
            ..BudgetConfig::default()
        },
    );
    let options = Options::new().total_timeout(None).unwrap();
    let (op, calls) = script(vec![Err(Fail::Down)]);
    let e = execute_with(&p, &options, op, classify).await.unwrap_err();
    assert!(
        matches!(
            e,
            Error::GiveUp {
                reason: GiveUpReason::AttemptsExhausted,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 9);
}

#[test]
fn zero_limits_are_refused_naming_the_field() {
    let e = Options::new().attempt_timeout(Duration::ZERO).unwrap_err();
    assert_eq!(e.field, "execute.attempt_timeout");
    let e = Options::new().total_timeout(Duration::ZERO).unwrap_err();
    assert_eq!(e.field, "execute.total_timeout");
    let o = Options::new().attempt_timeout(Duration::from_secs(1)).unwrap();
    assert_eq!(o.execution_config().attempt_timeout, Some(Duration::from_secs(1)));
    assert_eq!(o.execution_config().total_timeout, Some(Duration::from_secs(60)));
}

#[tokio::test(start_paused = true)]
async fn a_cancellation_seen_by_the_operation_is_error_cancelled() {
    let p = policy_with(fragile(Duration::from_secs(10)), BudgetConfig::default());
    let (options, attempts, _) = recorded(Options::new());
    let (op, calls) = script(vec![Err(Fail::Cancelled)]);
    let e = execute_with(&p, &options, op, classify).await.unwrap_err();
    assert!(
        matches!(
            e,
            Error::Cancelled {
                attempts: 1,
                last: Last::Error(Fail::Cancelled)
            }
        ),
        "{e:?}"
    );
    assert!(!e.is_upstream_unavailable());
    assert_eq!(e.name(), "cancelled");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(outcomes(&attempts), vec![Outcome::Cancelled]);
    // It counted for nothing.
    assert_eq!(p.breaker().snapshot().state, State::Closed);
}

/// A policy whose breaker tripped on one failure and whose 10 s interval has passed, so that the
/// next attempt is a probe.
async fn at_probe() -> Arc<Policy> {
    let p = Arc::new(policy_with(
        fragile(Duration::from_secs(10)),
        BudgetConfig::default(),
    ));
    let permit = p.breaker().allow().unwrap();
    p.breaker().record(permit, Outcome::Failure).unwrap();
    advance(Duration::from_secs(10)).await;
    assert!(p.breaker().snapshot().probe_ready);
    p
}

/// Runs `op` under `p`, classified by `classify`, in a task of its own (so that a panic in either
/// unwinds out of the helper into the task's result), recording the attempts its hook sees.
fn spawn_recorded<F, Fut, C>(p: &Arc<Policy>, op: F, classify: C) -> (Task, Attempts)
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<u32, Fail>> + Send + 'static,
    C: FnMut(&Result<u32, Fail>) -> Outcome + Send + 'static,
{
    let (options, attempts, _) = recorded(Options::new());
    let p = p.clone();
    let task = tokio::spawn(async move { execute_with(&p, &options, op, classify).await });
    (task, attempts)
}

#[tokio::test(start_paused = true)]
async fn a_panicking_operation_unwinds_and_frees_its_probe() {
    let p = at_probe().await;
    let (task, attempts) = spawn_recorded(&p, || async { panic!("a bug in the operation") }, classify::<u32>);
    let err = task.await.unwrap_err();
    assert!(err.is_panic(), "the panic unwound out of the helper");
    let msg = err
        .into_panic()
        .downcast::<&str>()
        .map(|s| *s)
        .unwrap_or_default();
    assert_eq!(msg, "a bug in the operation");
    // Recorded as cancelled: the slot is free at once, its window stays spent, nothing counted.
    assert_eq!(outcomes(&attempts), vec![Outcome::Cancelled]);
    let s = p.breaker().snapshot();
    assert_eq!((s.state, s.probes, s.probes_in_flight), (State::HalfOpen, 1, 0));
    assert!(!s.probe_ready);
    assert_eq!(s.recoveries, 0);
}

#[tokio::test(start_paused = true)]
async fn a_panicking_classifier_leaves_the_attempt_to_the_executions_drop() {
    let p = at_probe().await;
    let (task, attempts) = spawn_recorded(
        &p,
        || async { Ok::<u32, Fail>(1) },
        |_: &Result<u32, Fail>| -> Outcome { panic!("a bug in the classifier") },
    );
    assert!(task.await.unwrap_err().is_panic());
    // No hook while unwinding; the probe is freed all the same.
    assert_eq!(outcomes(&attempts), vec![]);
    let s = p.breaker().snapshot();
    assert_eq!((s.probes, s.probes_in_flight, s.recoveries), (1, 0, 0));
}

#[tokio::test(start_paused = true)]
async fn a_dropped_probe_is_recorded_as_cancelled_and_frees_its_slot_not_its_window() {
    let p = policy();
    trip(&p);
    advance(Duration::from_secs(30)).await;
    assert!(p.breaker().snapshot().probe_ready);

    // The probe hangs; the caller's timeout drops the future while it holds the permit.
    let (options, attempts, _) = recorded(Options::new());
    let r = timeout(
        Duration::from_secs(1),
        execute_with(&p, &options, pending::<Result<u32, Fail>>, classify),
    )
    .await;
    assert!(r.is_err(), "the attempt never finishes");
    assert_eq!(
        outcomes(&attempts),
        vec![Outcome::Cancelled],
        "the hook saw it end"
    );
    let s = p.breaker().snapshot();
    assert_eq!(s.probes, 1);
    assert_eq!(s.probes_in_flight, 0, "the cancelled probe freed its slot");
    assert!(
        !s.probe_ready,
        "but its window stays spent: it may have reached the upstream"
    );
    assert_eq!(s.retry_after, Some(Duration::from_secs(29)));
    assert_eq!(s.recoveries, 0, "a cancellation counts for nothing");

    // The next caller probes when the interval ends, not after the probe timeout.
    advance(Duration::from_secs(29)).await;
    let (op, _) = script(vec![Ok(9)]);
    assert_eq!(execute(&p, op, classify).await.unwrap(), 9);
    assert_eq!(p.breaker().snapshot().recoveries, 1);
}

/// A response of some HTTP client, as `execute_http` reads it.
#[derive(Debug, Clone, PartialEq)]
struct Answer {
    status: i64,
    retry_after: Option<&'static str>,
}

impl HttpResponse for Answer {
    fn status(&self) -> i64 {
        self.status
    }

    fn headers(&self) -> impl Iterator<Item = (&str, &str)> {
        self.retry_after.map(|v| ("Retry-After", v)).into_iter()
    }
}

fn answers(
    script: Vec<Answer>,
) -> (
    impl FnMut() -> std::future::Ready<Result<Answer, Fail>>,
    Arc<AtomicU32>,
) {
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    let op = move || {
        let n = c.fetch_add(1, Ordering::SeqCst) as usize;
        std::future::ready(Ok(script[n.min(script.len() - 1)].clone()))
    };
    (op, calls)
}

fn status(status: i64) -> Answer {
    Answer {
        status,
        retry_after: None,
    }
}

fn transport(e: &Fail) -> Outcome {
    classify::<()>(&Err(e.clone()))
}

#[tokio::test(start_paused = true)]
async fn http_responses_are_classified_by_the_policy() {
    let p = policy_with(
        BreakerConfig::default(),
        BudgetConfig {
            max_retries: 2,
            ..BudgetConfig::default()
        },
    );
    let o = Options::new();
    let start = Instant::now();
    // A 503 with Retry-After waits exactly the server's delay; the 404 after it is returned.
    let busy = Answer {
        status: 503,
        retry_after: Some("3"),
    };
    let (op, calls) = answers(vec![busy, status(404)]);
    assert_eq!(execute_http(&p, &o, op, transport).await.unwrap(), status(404));
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(start.elapsed(), Duration::from_secs(3));

    // 500s until the retries run out: a give-up with the last response attached.
    let p = policy_with(
        BreakerConfig::default(),
        BudgetConfig {
            max_retries: 2,
            ..BudgetConfig::default()
        },
    );
    let (op, calls) = answers(vec![status(500), status(500), status(502)]);
    let e = execute_http(&p, &o, op, transport).await.unwrap_err();
    assert!(
        matches!(
            &e,
            Error::GiveUp {
                reason: GiveUpReason::AttemptsExhausted,
                attempts: 3,
                last: Last::Value(Answer { status: 502, .. }),
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(e.last().and_then(Last::value), Some(&status(502)));
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn a_value_that_is_not_a_status_is_invalid_input_and_frees_the_probe() {
    let p = at_probe().await;
    let (op, calls) = answers(vec![status(1000)]);
    let e = execute_http(&p, &Options::new(), op, transport)
        .await
        .unwrap_err();
    match &e {
        Error::InvalidInput {
            field,
            attempts,
            value,
        } => assert_eq!((*field, *attempts, value.status), ("status", 1, 1000)),
        other => panic!("expected invalid_input, got {other:?}"),
    }
    assert_eq!(e.name(), "invalid_input");
    assert!(!e.is_upstream_unavailable());
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let s = p.breaker().snapshot();
    assert_eq!((s.probes, s.probes_in_flight, s.recoveries), (1, 0, 0));
}

#[tokio::test(start_paused = true)]
async fn breaker_only_call_records_what_classify_says() {
    let b = Breaker::new(fragile(Duration::from_secs(30)), TokioClock::shared()).unwrap();
    // A final answer is returned as the operation's error and counts as no failure.
    let r = call(&b, async { Err::<u32, _>(Fail::NotFound) }, classify).await;
    assert!(matches!(r, Err(Error::Operation(Fail::NotFound))));
    let s = b.snapshot();
    assert_eq!((s.state, s.failures), (State::Closed, 0));
    // An Ok the classifier calls a failure is still returned, and trips it (threshold 1).
    let r = call(&b, async { Ok::<u32, Fail>(7) }, |_: &Result<u32, Fail>| {
        Outcome::Failure
    })
    .await;
    assert_eq!(r.unwrap(), 7);
    let s = b.snapshot();
    assert_eq!((s.state, s.opens), (State::Open, 1));
    // Refused: the operation is never polled.
    let polled = AtomicU32::new(0);
    let r = call(
        &b,
        async {
            polled.fetch_add(1, Ordering::SeqCst);
            Ok::<u32, Fail>(1)
        },
        classify,
    )
    .await;
    assert_eq!(r.unwrap_err().name(), "breaker_open");
    assert_eq!(polled.load(Ordering::SeqCst), 0);
    assert_eq!(b.snapshot().refusals, 1);
    // A retry-later answer opens a closed breaker for the server's delay.
    let b = Breaker::new(BreakerConfig::default(), TokioClock::shared()).unwrap();
    let r = call(
        &b,
        async { Err::<u32, _>(Fail::Busy(Duration::from_secs(90))) },
        classify,
    )
    .await;
    assert!(matches!(r, Err(Error::Operation(Fail::Busy(_)))));
    let r = call(&b, async { Ok::<u32, Fail>(1) }, classify).await;
    assert_eq!(r.unwrap_err().retry_after(), Some(Duration::from_secs(90)));
}

#[tokio::test(start_paused = true)]
async fn breaker_only_call_records_a_panic_as_cancelled() {
    let b = Arc::new(Breaker::new(fragile(Duration::from_secs(30)), TokioClock::shared()).unwrap());
    let r = call(&b, async { Err::<u32, _>(Fail::Down) }, classify).await;
    assert!(matches!(r, Err(Error::Operation(Fail::Down))));
    advance(Duration::from_secs(30)).await;
    let probe = Arc::clone(&b);
    let joined = tokio::spawn(async move {
        call(
            &probe,
            async {
                if probe.snapshot().state == State::HalfOpen {
                    panic!("the operation panics");
                }
                Ok::<u32, Fail>(1)
            },
            classify,
        )
        .await
    })
    .await;
    assert!(joined.unwrap_err().is_panic());
    // The probe was recorded as cancelled: its slot is free at once (the probe timeout is an
    // hour), and nothing was counted against the upstream (no new open).
    let s = b.snapshot();
    assert_eq!(
        (s.state, s.probes, s.probes_in_flight, s.opens),
        (State::HalfOpen, 1, 0, 1)
    );
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
            retry_after: Some(d),
            attempts: 0,
            last: None,
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
