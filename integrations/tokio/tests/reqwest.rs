//! The reqwest middleware against a hyper server on 127.0.0.1, under tokio's paused clock:
//! the Retry-After waits are virtual, the HTTP exchanges are real.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use holdoff::{
    Breaker, BreakerConfig, BreakerGroup, BudgetConfig, Classifier, Decision, Policy, RetryBudget, State,
};
use holdoff_tokio::reqwest::{HoldoffMiddleware, MiddlewareError};
use holdoff_tokio::{Event, PolicyGroup, TokioClock};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::time::Instant;

type Script = Arc<Mutex<VecDeque<(u16, Option<&'static str>)>>>;

/// A server answering the scripted (status, Retry-After) pairs, then 200; counts requests.
async fn serve(script: &[(u16, Option<&'static str>)]) -> (String, Arc<Mutex<u32>>) {
    let script: Script = Arc::new(Mutex::new(script.iter().copied().collect()));
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
                    let (status, ra) = script.lock().unwrap().pop_front().unwrap_or((200, None));
                    let mut resp = hyper::Response::builder().status(status);
                    if let Some(ra) = ra {
                        resp = resp.header("Retry-After", ra);
                    }
                    std::future::ready(Ok::<_, Infallible>(resp.body(Full::new(&b"x"[..])).unwrap()))
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

fn client(m: HoldoffMiddleware) -> reqwest_middleware::ClientWithMiddleware {
    reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(m)
        .build()
}

#[tokio::test(start_paused = true)]
async fn waits_exactly_the_servers_retry_after() {
    let (url, seen) = serve(&[(503, Some("2")), (429, Some("3"))]).await;
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
async fn a_retry_after_beyond_the_budget_hands_back_the_response_at_once() {
    // A 100 s episode budget: 30 s fits at 0, 30 and 60 s; at 90 s only 10 s are left and the
    // wait is never shortened to fit: give up at once, hand back the last 503.
    let (url, seen) = serve(&[(503, Some("30")); 9]).await;
    let p = policy(BudgetConfig {
        retry_after_cap: Duration::from_secs(40),
        max_rate_limit_duration: Duration::from_secs(100),
        ..BudgetConfig::default()
    });
    let reasons = Arc::new(Mutex::new(Vec::new()));
    let r = reasons.clone();
    let m = HoldoffMiddleware::new(p).on_event(move |e| {
        if let Event::Decided {
            decision: Decision::GiveUp { reason, .. },
            ..
        } = e
        {
            r.lock().unwrap().push(reason.name());
        }
    });
    let start = Instant::now();
    let resp = client(m).get(&url).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 503, "the last answer is handed back");
    assert_eq!(*seen.lock().unwrap(), 4);
    assert_eq!(start.elapsed(), Duration::from_secs(90));
    assert_eq!(*reasons.lock().unwrap(), vec!["retry_after_exceeds_remaining"]);
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
    let reqwest_middleware::Error::Middleware(e) = err else {
        panic!("expected a middleware error, got {err:?}")
    };
    let h = e.downcast_ref::<MiddlewareError>().expect("a holdoff error");
    assert!(matches!(h, MiddlewareError::BreakerOpen { retry_after: None }));
    assert_eq!(*seen.lock().unwrap(), 0);
}

#[tokio::test(start_paused = true)]
async fn per_host_policies_are_keyed_by_host_and_port() {
    let (url, _) = serve(&[(503, Some("1"))]).await;
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
    // A server that accepts and never answers.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    let p = policy(BudgetConfig::default());
    for _ in 0..5 {
        let permit = p.breaker().allow().unwrap();
        p.breaker().record(permit, holdoff::Outcome::Failure).unwrap();
    }
    tokio::time::advance(Duration::from_secs(30)).await;
    let c = client(HoldoffMiddleware::new(p.clone()));
    let r = tokio::time::timeout(Duration::from_secs(1), c.get(&url).send()).await;
    assert!(r.is_err(), "the server never answers");
    // Its slot is free at once; its window stays spent (the request may have reached the server).
    let s = p.breaker().snapshot();
    assert_eq!((s.probes, s.probes_in_flight, s.probe_ready), (1, 0, false));
    assert_eq!(s.retry_after, Some(Duration::from_secs(29)));
}
