//! holdoff's reqwest middleware against a local hyper server on 127.0.0.1 that answers 503 and
//! 429 with `Retry-After: 1` for a while, then fails without a hint, then recovers. Prints what
//! the policy did at each step. Runs in about 6 s (every wait is a real 1 s or shorter).
//!
//! ```text
//! cargo run -p holdoff-tokio --example local_server --features reqwest
//! ```

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use holdoff::interop::{Coded, OutcomeKind};
use holdoff::{Backoff, Breaker, BreakerConfig, BudgetConfig, Classifier, Policy, RetryBudget, TripPolicy};
use holdoff_tokio::reqwest::{middleware_error, HoldoffMiddleware, MiddlewareError};
use holdoff_tokio::{Last, Options, TokioClock};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// What the server answers next: (status, Retry-After); 200 once the script is empty.
type Script = Arc<Mutex<VecDeque<(u16, Option<&'static str>)>>>;

async fn serve(script: Script) -> std::io::Result<std::net::SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let script = script.clone();
            tokio::spawn(async move {
                let answer = service_fn(move |_req: Request<hyper::body::Incoming>| {
                    let next = script.lock().unwrap().pop_front();
                    let (status, retry_after) = next.unwrap_or((200, None));
                    let mut resp = Response::builder().status(status);
                    if let Some(ra) = retry_after {
                        resp = resp.header("retry-after", ra);
                    }
                    let body = if status == 200 { &b"ok"[..] } else { &b"busy"[..] };
                    std::future::ready(Ok::<_, Infallible>(resp.body(Full::new(body)).unwrap()))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), answer)
                    .await;
            });
        }
    });
    Ok(addr)
}

/// Hooks that print each attempt and each wait, with the time since `start`.
fn printing(start: Instant) -> Options {
    let t = move || start.elapsed().as_secs_f64();
    Options::new()
        .after_attempt(move |a| {
            let probe = if a.probe { " (breaker probe)" } else { "" };
            println!(
                "  [{:5.2}s] attempt {}{probe}: {}",
                t(),
                a.number,
                OutcomeKind::of(&a.outcome).name()
            );
        })
        .before_wait(move |w| {
            let server = match w.server_delay {
                Some(d) => format!("; the server asked {} ms", d.as_millis()),
                None => String::new(),
            };
            println!(
                "  [{:5.2}s]   waiting {} ms ({}{server})",
                t(),
                w.delay.as_millis(),
                w.source.name()
            );
        })
}

async fn get(client: &reqwest_middleware::ClientWithMiddleware, url: &str) {
    match client.get(url).send().await {
        Ok(resp) => println!("  => HTTP {}", resp.status().as_u16()),
        Err(e) => match middleware_error(&e) {
            Some(MiddlewareError::GiveUp {
                reason,
                attempts,
                last: Last::Value(resp),
                ..
            }) => println!(
                "  => gave up ({}) after {attempts} attempt(s); the last answer: HTTP {}",
                reason.name(),
                resp.status().as_u16()
            ),
            Some(h) => println!("  => refused by holdoff ({}): {h}", h.name()),
            None => println!("  => transport error: {e}"),
        },
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let script: Script = Arc::default();
    let addr = serve(script.clone()).await?;
    let url = format!("http://{addr}/");

    // Short intervals so the example finishes in seconds: trip after 3 failures, probe every
    // second, close on the first good probe answer, at most 2 counted retries.
    let clock = TokioClock::shared();
    let breaker = Breaker::new(
        BreakerConfig {
            trip: TripPolicy::ConsecutiveFailures { threshold: 3 },
            open_interval: Backoff::constant(Duration::from_secs(1)),
            recoveries: 1,
            ..BreakerConfig::default()
        },
        clock.clone(),
    )?;
    let budget = RetryBudget::new(
        BudgetConfig {
            max_retries: 2,
            ..BudgetConfig::default()
        },
        clock,
    )?;
    let policy = Arc::new(Policy::new(
        Arc::new(breaker),
        Arc::new(budget),
        None,
        Classifier::default(),
    )?);

    let start = Instant::now();
    let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(HoldoffMiddleware::new(policy.clone()).options(printing(start)))
        .build();

    let run = async {
        println!("1. 503 and 429 with Retry-After: 1, then 200: waits exactly what the server asked");
        script
            .lock()
            .unwrap()
            .extend([(503, Some("1")), (429, Some("1")), (503, Some("1"))]);
        get(&client, &url).await;

        println!("2. 503 without Retry-After: counted backoff, 3 failures trip the breaker, give up");
        script.lock().unwrap().extend([(503, None); 3]);
        get(&client, &url).await;

        println!("3. the breaker is open: the next call fails fast, nothing is sent");
        get(&client, &url).await;

        println!("4. one second later the breaker lets one probe through; the server is back");
        tokio::time::sleep(Duration::from_secs(1)).await;
        get(&client, &url).await;
        println!("   breaker: {}", policy.breaker().snapshot().state.name());
    };
    // Bounded run time, whatever happens.
    tokio::time::timeout(Duration::from_secs(30), run).await?;
    println!("finished in {:.1} s", start.elapsed().as_secs_f64());
    Ok(())
}
