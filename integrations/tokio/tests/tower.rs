//! The tower layer under tokio's paused clock.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::{poll_fn, Ready};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use holdoff::{
    Breaker, BreakerConfig, BreakerGroup, BudgetConfig, Classifier, GiveUpReason, Outcome, Policy,
    RetryBudget, State, TripPolicy,
};
use holdoff_tokio::tower::HoldoffLayer;
use holdoff_tokio::{Error, Last, Options, PolicyGroup, TokioClock};
use tokio::time::{advance, Instant};
use tower_layer::Layer;
use tower_service::Service;

/// Answers each request with the next scripted status (the last one repeats) and logs the
/// requests it saw.
#[derive(Clone, Default)]
struct Upstream {
    statuses: Arc<Mutex<VecDeque<u16>>>,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Upstream {
    fn new(statuses: &[u16]) -> Self {
        Upstream {
            statuses: Arc::new(Mutex::new(statuses.iter().copied().collect())),
            seen: Arc::default(),
        }
    }
}

impl Service<String> for Upstream {
    type Response = u16;
    type Error = Infallible;
    type Future = Ready<Result<u16, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: String) -> Self::Future {
        self.seen.lock().unwrap().push(req);
        let mut q = self.statuses.lock().unwrap();
        let s = if q.len() > 1 { q.pop_front().unwrap() } else { q[0] };
        std::future::ready(Ok(s))
    }
}

fn by_status(r: &Result<u16, Infallible>) -> Outcome {
    match r {
        Ok(s) if *s < 400 => Outcome::Success,
        _ => Outcome::Failure,
    }
}

fn policy() -> Arc<Policy> {
    let clock = TokioClock::shared();
    let breaker = Arc::new(Breaker::new(BreakerConfig::default(), clock.clone()).unwrap());
    let budget = Arc::new(RetryBudget::new(BudgetConfig::default(), clock).unwrap());
    Arc::new(Policy::new(breaker, budget, None, Classifier::default()).unwrap())
}

#[tokio::test(start_paused = true)]
async fn retries_each_request_on_the_budgets_backoff() {
    let up = Upstream::new(&[500, 500, 200]);
    let mut svc = HoldoffLayer::new(policy(), by_status).layer(up.clone());
    let start = Instant::now();
    poll_fn(|cx| svc.poll_ready(cx)).await.unwrap();
    assert_eq!(svc.call("GET /".into()).await.unwrap(), 200);
    assert_eq!(start.elapsed(), Duration::from_millis(1500));
    assert_eq!(up.seen.lock().unwrap().len(), 3);
}

#[tokio::test(start_paused = true)]
async fn poll_ready_reports_an_open_breaker_without_spending_a_probe() {
    let p = policy();
    for _ in 0..5 {
        let permit = p.breaker().allow().unwrap();
        p.breaker().record(permit, Outcome::Failure).unwrap();
    }
    let up = Upstream::new(&[200]);
    let mut svc = HoldoffLayer::new(p.clone(), by_status).layer(up.clone());

    match poll_fn(|cx| svc.poll_ready(cx)).await {
        Err(Error::BreakerOpen {
            retry_after,
            attempts: 0,
            last: None,
        }) => {
            assert_eq!(retry_after, Some(Duration::from_secs(30)))
        }
        other => panic!("expected breaker_open, got {other:?}"),
    }
    advance(Duration::from_secs(30)).await;
    for _ in 0..3 {
        poll_fn(|cx| svc.poll_ready(cx)).await.unwrap();
    }
    let s = p.breaker().snapshot();
    assert_eq!((s.probes, s.refusals, s.probe_ready), (0, 0, true));

    // Admission happens in `call`: the probe is still there to spend.
    assert_eq!(svc.call("GET /".into()).await.unwrap(), 200);
    let s = p.breaker().snapshot();
    assert_eq!((s.state, s.probes, s.recoveries), (State::HalfOpen, 1, 1));
    // The next probe is a full interval away (doubled: 60 s); poll_ready says so.
    assert!(matches!(
        poll_fn(|cx| svc.poll_ready(cx)).await,
        Err(Error::BreakerOpen { retry_after: Some(d), .. }) if d == Duration::from_secs(30)
    ));
}

#[tokio::test(start_paused = true)]
async fn keyed_breakers_isolate_upstreams() {
    let clock = TokioClock::shared();
    let breakers = BreakerGroup::new(
        BreakerConfig {
            trip: TripPolicy::ConsecutiveFailures { threshold: 1 },
            ..BreakerConfig::default()
        },
        clock,
    )
    .unwrap();
    let group = Arc::new(
        PolicyGroup::new(
            breakers,
            BudgetConfig {
                max_retries: 0,
                ..BudgetConfig::default()
            },
            None,
            Classifier::default(),
        )
        .unwrap(),
    );
    let host = |req: &String| req.split('/').next().unwrap_or_default().to_owned();
    let bad = Upstream::new(&[503]);
    let mut svc = HoldoffLayer::keyed(group.clone(), host, by_status).layer(bad.clone());

    // a.example fails once: its breaker opens; with no retries the call gives up, the 503
    // attached.
    match svc.call("a.example/x".into()).await {
        Err(Error::GiveUp {
            reason: GiveUpReason::AttemptsExhausted,
            last: Last::Value(503),
            ..
        }) => {}
        other => panic!("expected a give-up with the 503, got {other:?}"),
    }
    let e = svc.call("a.example/y".into()).await.unwrap_err();
    assert_eq!(e.name(), "breaker_open");
    assert_eq!(bad.seen.lock().unwrap().len(), 1, "the refused request never ran");

    // b.example has its own breaker, still closed: its request runs.
    assert_eq!(
        svc.call("b.example/x".into()).await.unwrap_err().name(),
        "give_up"
    );
    assert_eq!(bad.seen.lock().unwrap().len(), 2);
    assert_eq!(group.breakers().keys(), vec!["a.example", "b.example"]);
    assert_eq!(
        group.breakers().peek("a.example").unwrap().snapshot().state,
        State::Open
    );
}

/// Never answers.
#[derive(Clone)]
struct Hanging;

impl Service<String> for Hanging {
    type Response = u16;
    type Error = Infallible;
    type Future = std::future::Pending<Result<u16, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: String) -> Self::Future {
        std::future::pending()
    }
}

#[tokio::test(start_paused = true)]
async fn the_layers_options_bound_each_attempt_and_report_it() {
    let outcomes = Arc::new(Mutex::new(Vec::new()));
    let o = outcomes.clone();
    let options = Options::new()
        .attempt_timeout(Duration::from_millis(100))
        .unwrap()
        .total_timeout(Duration::from_secs(1))
        .unwrap()
        .after_attempt(move |a| o.lock().unwrap().push(a.outcome));
    let mut svc = HoldoffLayer::new(policy(), by_status)
        .options(options)
        .layer(Hanging);
    let start = Instant::now();
    let e = svc.call("GET /".into()).await.unwrap_err();
    // Attempts at 0, 0.6 s (after 100 ms and a 500 ms backoff); the next backoff (1 s) would
    // end past the 1 s total timeout.
    assert!(
        matches!(
            e,
            Error::GiveUp {
                reason: GiveUpReason::TotalTimeout,
                attempts: 2,
                last: Last::TimedOut,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(*outcomes.lock().unwrap(), vec![Outcome::Timeout; 2]);
    assert_eq!(start.elapsed(), Duration::from_millis(700));
}
