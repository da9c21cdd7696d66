//! Feature `opentelemetry`: the retry loop's events on the caller's span, exported by the
//! official SDK's in-memory span exporter, under tokio's paused clock (exact virtual delays).
#![cfg(feature = "opentelemetry")]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use holdoff::{Breaker, BreakerConfig, BudgetConfig, Classifier, Outcome, Policy, RetryBudget, TripPolicy};
use holdoff_tokio::{execute, Error, TokioClock};
use opentelemetry::context::FutureExt as _;
use opentelemetry::trace::{TraceContextExt as _, Tracer as _, TracerProvider as _};
use opentelemetry::{Context, Value};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};

fn policy(max_retries: u32) -> Policy {
    let clock = TokioClock::shared();
    // Failures never trip it: only the server's Retry-After opens it, for at most the cap.
    let breaker = BreakerConfig {
        trip: TripPolicy::ConsecutiveFailures { threshold: 100 },
        max_retry_later: Duration::from_secs(20),
        ..BreakerConfig::default()
    };
    let breaker = Arc::new(Breaker::new(breaker, clock.clone()).unwrap());
    let budget = BudgetConfig {
        max_retries,
        retry_after_cap: Duration::from_secs(20),
        ..BudgetConfig::default()
    };
    let budget = Arc::new(RetryBudget::new(budget, clock).unwrap());
    Policy::new(breaker, budget, None, Classifier::default()).unwrap()
}

#[derive(Debug)]
enum Fail {
    Busy(Duration),
    Down,
}

fn classify(r: &Result<u32, Fail>) -> Outcome {
    match r {
        Ok(_) => Outcome::Success,
        Err(Fail::Busy(d)) => Outcome::RetryLater(*d),
        Err(Fail::Down) => Outcome::Failure,
    }
}

/// (event name, [(attribute, value as text)]) of one span.
type Events = Vec<(String, Vec<(String, String)>)>;

/// Runs one `execute` of `answers` (one per attempt, in order) inside a recording span and
/// returns the call's result and the span's events.
async fn traced(policy: &Policy, answers: Vec<Result<u32, Fail>>) -> (Result<u32, Error<Fail, u32>>, Events) {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let cx = Context::current_with_span(provider.tracer("test").start("call"));
    let answers = std::sync::Mutex::new(answers.into_iter());
    let result = execute(
        policy,
        || async { answers.lock().unwrap().next().expect("an answer per attempt") },
        classify,
    )
    .with_context(cx.clone())
    .await;
    cx.span().end();
    let spans = exporter.get_finished_spans().unwrap();
    assert_eq!(spans.len(), 1);
    let events = spans[0]
        .events
        .iter()
        .map(|e| {
            let attrs = e
                .attributes
                .iter()
                .map(|kv| {
                    let v = match &kv.value {
                        // Types are part of the contract: ints, doubles, bools, strings.
                        Value::I64(i) => format!("i{i}"),
                        Value::F64(f) => format!("f{f}"),
                        Value::Bool(b) => format!("b{b}"),
                        Value::String(s) => s.to_string(),
                        other => panic!("unexpected value {other:?}"),
                    };
                    (kv.key.to_string(), v)
                })
                .collect();
            (e.name.to_string(), attrs)
        })
        .collect();
    (result, events)
}

fn event(name: &str, attrs: &[(&str, &str)]) -> (String, Vec<(String, String)>) {
    (
        name.to_string(),
        attrs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

#[tokio::test(start_paused = true)]
async fn each_wait_and_the_give_up_are_events_on_the_callers_span() {
    let policy = policy(1);
    let answers = vec![
        // 600 s asked, capped to 20 s: the breaker stays open until then.
        Err(Fail::Busy(Duration::from_secs(600))),
        // The probe fails: the breaker opens for its 30 s open interval, longer than the 500 ms
        // backoff of the one counted retry, so the wait is the breaker's.
        Err(Fail::Down),
        // No retries left.
        Err(Fail::Down),
    ];
    let (result, events) = traced(&policy, answers).await;
    assert!(
        matches!(result, Err(Error::GiveUp { attempts: 3, .. })),
        "{result:?}"
    );
    assert_eq!(
        events,
        vec![
            event(
                "holdoff.retry",
                &[
                    ("holdoff.attempt", "i1"),
                    ("holdoff.outcome", "retry_later"),
                    ("holdoff.delay", "f20"),
                    ("holdoff.source", "retry_after"),
                    ("holdoff.capped", "btrue"),
                ]
            ),
            event(
                "holdoff.retry",
                &[
                    ("holdoff.attempt", "i2"),
                    ("holdoff.outcome", "failure"),
                    ("holdoff.delay", "f30"),
                    ("holdoff.source", "breaker"),
                    ("holdoff.capped", "bfalse"),
                ]
            ),
            event(
                "holdoff.give_up",
                &[
                    ("holdoff.attempts", "i3"),
                    ("holdoff.reason", "attempts_exhausted")
                ]
            ),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_first_time_success_adds_nothing_a_retried_one_its_wait_and_a_refusal_a_give_up() {
    let policy = policy(1);
    let (result, events) = traced(&policy, vec![Ok(7)]).await;
    assert_eq!(result.unwrap(), 7);
    assert_eq!(events, Events::new());

    // A success after a retry: its wait, no give-up.
    let (result, events) = traced(&policy, vec![Err(Fail::Down), Ok(8)]).await;
    assert_eq!(result.unwrap(), 8);
    assert_eq!(
        events,
        vec![event(
            "holdoff.retry",
            &[
                ("holdoff.attempt", "i1"),
                ("holdoff.outcome", "failure"),
                ("holdoff.delay", "f0.5"),
                ("holdoff.source", "backoff"),
                ("holdoff.capped", "bfalse"),
            ]
        )]
    );

    policy.breaker().force_open();
    let (result, events) = traced(&policy, vec![]).await;
    assert!(
        matches!(result, Err(Error::BreakerOpen { attempts: 0, .. })),
        "{result:?}"
    );
    assert_eq!(
        events,
        vec![event(
            "holdoff.give_up",
            &[("holdoff.attempts", "i0"), ("holdoff.reason", "breaker_open")]
        )]
    );
}

#[tokio::test(start_paused = true)]
async fn without_a_recording_span_the_call_runs_as_before() {
    let policy = policy(1);
    let calls = AtomicU32::new(0);
    let result = execute(
        &policy,
        || async {
            match calls.fetch_add(1, Ordering::Relaxed) {
                0 => Err(Fail::Down),
                _ => Ok(1),
            }
        },
        classify,
    )
    .await;
    assert_eq!(result.unwrap(), 1);
    assert_eq!(calls.load(Ordering::Relaxed), 2);
}
