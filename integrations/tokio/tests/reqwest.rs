//! The reqwest middleware against a hyper server on 127.0.0.1, under tokio's paused clock:
//! the Retry-After waits and attempt limits are virtual, the HTTP exchanges are real.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use holdoff::{
    Breaker, BreakerConfig, BreakerGroup, BudgetConfig, Classifier, GiveUpReason, Outcome, Policy,
    RetryBudget, State,
};
use holdoff_tokio::reqwest::{middleware_error, HoldoffMiddleware, MiddlewareError};
use holdoff_tokio::{Last, Options, PolicyGroup, TokioClock};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::time::Instant;

/// What the server answers: a status and an optional Retry-After, or nothing at all.
#[derive(Debug, Clone, Copy)]
enum Answer {
    Status(u16, Option<&'static str>),
    Hang,
}

use Answer::{Hang, Status};

/// A server answering the scripted answers in order, then 200; counts requests.
async fn serve(script: &[Answer]) -> (String, Arc<Mutex<u32>>) {
    let script = Arc::new(Mutex::new(script.iter().copied().collect::<VecDeque<_>>()));
    let seen = Arc::new(Mutex::new(0));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let counter = seen.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (script, counter) = (script.clone(), counter.clone());
            tokio::spawn(async move {
                let answer = service_fn(move |_req| {
                    *counter.lock().unwrap() += 1;
                    let next = script.lock().unwrap().pop_front().unwrap_or(Status(200, None));
                    async move {
                        let (status, ra) = match next {
                            Status(s, ra) => (s, ra),
                            Hang => std::future::pending().await,
                        };
                        let mut resp = hyper::Response::builder().status(status);
                        if let Some(ra) = ra {
                            resp = resp.header("Retry-After", ra);
                        }
                        Ok::<_, Infallible>(resp.body(Full::new(&b"x"[..])).unwrap())
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), answer)
                    .await;
            });
        }
    });
    (format!("http://{addr}/"), seen)
}

fn policy(budget: BudgetConfig) -> Arc<Policy> {
    let clock = TokioClock::shared();
    let breaker = Arc::new(Breaker::new(BreakerConfig::default(), clock.clone()).unwrap());
    let budget = Arc::new(RetryBudget::new(budget, clock).unwrap());
    Arc::new(Policy::new(breaker, budget, None, Classifier::default()).unwrap())
}

fn retries(n: u32) -> BudgetConfig {
    BudgetConfig {
        max_retries: n,
        ..BudgetConfig::default()
    }
}

fn client(m: HoldoffMiddleware) -> reqwest_middleware::ClientWithMiddleware {
    reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(m)
        .build()
}

/// Options whose after-attempt hook records each attempt's outcome.
fn recording() -> (Options, Arc<Mutex<Vec<Outcome>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let options = Options::new().after_attempt(move |a| s.lock().unwrap().push(a.outcome));
    (options, seen)
}

fn holdoff_error(e: &reqwest_middleware::Error) -> &MiddlewareError {
    middleware_error(e).unwrap_or_else(|| panic!("expected a holdoff error, got {e:?}"))
}

#[tokio::test(start_paused = true)]
async fn waits_exactly_the_servers_retry_after() {
    let (url, seen) = serve(&[Status(503, Some("2")), Status(429, Some("3"))]).await;
    let p = policy(BudgetConfig::default());
    let start = Instant::now();
    let resp = client(HoldoffMiddleware::new(p.clone()))
        .get(&url)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(*seen.lock().unwrap(), 3);
    assert_eq!(start.elapsed(), Duration::from_secs(5));
    assert_eq!(p.breaker().snapshot().state, State::HalfOpen);
}

#[tokio::test(start_paused = true)]
async fn a_final_404_is_returned_as_the_response() {
    let (url, seen) = serve(&[Status(503, None), Status(404, None)]).await;
    let p = policy(BudgetConfig::default());
    let resp = client(HoldoffMiddleware::new(p.clone()))
        .get(&url)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 404);
    assert_eq!(*seen.lock().unwrap(), 2);
    assert_eq!(p.breaker().snapshot().failures, 0, "a 404 is an answer");
}

#[tokio::test(start_paused = true)]
async fn server_errors_until_the_retries_run_out_give_up_with_the_last_response() {
    let (url, seen) = serve(&[Status(500, None), Status(500, None), Status(502, None)]).await;
    let (options, outcomes) = recording();
    let m = HoldoffMiddleware::new(policy(retries(2))).options(options);
    let start = Instant::now();
    let err = client(m).get(&url).send().await.unwrap_err();
    let h = holdoff_error(&err);
    assert!(h.is_upstream_unavailable());
    match h {
        MiddlewareError::GiveUp {
            reason: GiveUpReason::AttemptsExhausted,
            attempts: 3,
            last: Last::Value(resp),
            ..
        } => assert_eq!(resp.status().as_u16(), 502, "the last response is attached"),
        other => panic!("expected a give-up with the last response, got {other:?}"),
    }
    assert_eq!(*seen.lock().unwrap(), 3);
    assert_eq!(*outcomes.lock().unwrap(), vec![Outcome::Failure; 3]);
    assert_eq!(start.elapsed(), Duration::from_millis(1500));
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_beyond_the_budget_gives_up_at_once_with_the_response() {
    // A 100 s episode budget: 30 s fits at 0, 30 and 60 s; at 90 s only 10 s are left and the
    // wait is never shortened to fit: give up at once, the last 503 attached.
    let (url, seen) = serve(&[Status(503, Some("30")); 9]).await;
    let p = policy(BudgetConfig {
        retry_after_cap: Duration::from_secs(40),
        max_rate_limit_duration: Duration::from_secs(100),
        ..BudgetConfig::default()
    });
    let m = HoldoffMiddleware::new(p).options(Options::new().total_timeout(None).unwrap());
    let start = Instant::now();
    let err = client(m).get(&url).send().await.unwrap_err();
    match holdoff_error(&err) {
        MiddlewareError::GiveUp {
            reason: GiveUpReason::RetryAfterExceedsRemaining,
            attempts: 4,
            retry_after: Some(ra),
            server_delay: Some(sd),
            capped: false,
            last: Last::Value(resp),
        } => {
            assert_eq!((*ra, *sd), (Duration::from_secs(30), Duration::from_secs(30)));
            assert_eq!(resp.status().as_u16(), 503);
        }
        other => panic!("expected retry_after_exceeds_remaining, got {other:?}"),
    }
    assert_eq!(*seen.lock().unwrap(), 4);
    assert_eq!(start.elapsed(), Duration::from_secs(90));
}

#[tokio::test(start_paused = true)]
async fn a_transport_timeout_is_recorded_as_a_timeout() {
    let (url, seen) = serve(&[Hang, Hang]).await;
    let (options, outcomes) = recording();
    let m = HoldoffMiddleware::new(policy(retries(1))).options(options);
    let c = reqwest_middleware::ClientBuilder::new(
        reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()
            .unwrap(),
    )
    .with(m)
    .build();
    let start = Instant::now();
    let err = c.get(&url).send().await.unwrap_err();
    match holdoff_error(&err) {
        MiddlewareError::GiveUp {
            reason: GiveUpReason::AttemptsExhausted,
            last: Last::Error(reqwest_middleware::Error::Reqwest(e)),
            ..
        } => assert!(e.is_timeout(), "{e:?}"),
        other => panic!("expected a give-up after timeouts, got {other:?}"),
    }
    assert_eq!(*outcomes.lock().unwrap(), vec![Outcome::Timeout; 2]);
    assert_eq!(*seen.lock().unwrap(), 2);
    // Two 2 s timeouts and a 500 ms backoff between them.
    assert_eq!(start.elapsed(), Duration::from_millis(4500));
}

#[tokio::test(start_paused = true)]
async fn the_attempt_timeout_cuts_a_hanging_request() {
    let (url, seen) = serve(&[Hang]).await;
    let (options, outcomes) = recording();
    let options = options.attempt_timeout(Duration::from_millis(250)).unwrap();
    let m = HoldoffMiddleware::new(policy(retries(1))).options(options);
    let start = Instant::now();
    // The first attempt is cut at 250 ms; the retry (after 500 ms) gets the 200.
    let resp = client(m).get(&url).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(
        *outcomes.lock().unwrap(),
        vec![Outcome::Timeout, Outcome::Success]
    );
    assert_eq!(*seen.lock().unwrap(), 2);
    assert_eq!(start.elapsed(), Duration::from_millis(750));
}

#[tokio::test(start_paused = true)]
async fn a_body_that_cannot_be_cloned_is_sent_once() {
    let (url, seen) = serve(&[Status(503, None)]).await;
    let err = client(HoldoffMiddleware::new(policy(BudgetConfig::default())))
        .post(&url)
        .body(reqwest::Body::wrap(String::from("a stream")))
        .send()
        .await
        .unwrap_err();
    match holdoff_error(&err) {
        MiddlewareError::GiveUp {
            reason: GiveUpReason::AttemptsExhausted,
            attempts: 1,
            retry_after: Some(d),
            last: Last::Value(resp),
            ..
        } => {
            assert_eq!(*d, Duration::from_millis(500), "the retry it could not make");
            assert_eq!(resp.status().as_u16(), 503);
        }
        other => panic!("expected a give-up, got {other:?}"),
    }
    assert_eq!(*seen.lock().unwrap(), 1);
}

#[tokio::test(start_paused = true)]
async fn an_open_breaker_fails_fast_with_a_typed_error() {
    let (url, seen) = serve(&[]).await;
    let p = policy(BudgetConfig::default());
    p.breaker().force_open();
    let err = client(HoldoffMiddleware::new(p))
        .get(&url)
        .send()
        .await
        .unwrap_err();
    let reqwest_middleware::Error::Middleware(e) = &err else {
        panic!("expected a middleware error, got {err:?}")
    };
    let h = e.downcast_ref::<MiddlewareError>().expect("a holdoff error");
    assert!(matches!(
        h,
        MiddlewareError::BreakerOpen {
            retry_after: None,
            attempts: 0,
            last: None
        }
    ));
    assert!(h.is_upstream_unavailable());
    assert_eq!(*seen.lock().unwrap(), 0);
}

#[tokio::test(start_paused = true)]
async fn per_host_policies_are_keyed_by_host_and_port() {
    let (url, _) = serve(&[Status(503, Some("1"))]).await;
    let clock = TokioClock::shared();
    let group = Arc::new(
        PolicyGroup::new(
            BreakerGroup::new(BreakerConfig::default(), clock).unwrap(),
            BudgetConfig::default(),
            None,
            Classifier::default(),
        )
        .unwrap(),
    );
    let resp = client(HoldoffMiddleware::per_host(group.clone()))
        .get(&url)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let key = url.trim_start_matches("http://").trim_end_matches('/');
    assert_eq!(group.breakers().keys(), vec![key.to_owned()]);
    assert_eq!(
        group.peek(key).unwrap().breaker().snapshot().state,
        State::HalfOpen
    );
}

#[tokio::test(start_paused = true)]
async fn a_request_dropped_in_flight_frees_its_probe() {
    let (url, _) = serve(&[Hang]).await;
    let p = policy(BudgetConfig::default());
    for _ in 0..5 {
        let permit = p.breaker().allow().unwrap();
        p.breaker().record(permit, Outcome::Failure).unwrap();
    }
    tokio::time::advance(Duration::from_secs(30)).await;
    let (options, outcomes) = recording();
    let c = client(HoldoffMiddleware::new(p.clone()).options(options));
    let r = tokio::time::timeout(Duration::from_secs(1), c.get(&url).send()).await;
    assert!(r.is_err(), "the server never answers");
    assert_eq!(*outcomes.lock().unwrap(), vec![Outcome::Cancelled]);
    // Its slot is free at once; its window stays spent (the request may have reached the server).
    let s = p.breaker().snapshot();
    assert_eq!((s.probes, s.probes_in_flight, s.probe_ready), (1, 0, false));
    assert_eq!(s.retry_after, Some(Duration::from_secs(29)));
}
