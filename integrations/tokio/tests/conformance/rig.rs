//! The `[reqwest]` flavour's rig: a hyper server on 127.0.0.1 answering the script, and the
//! runner's own middleware under `HoldoffMiddleware` that plays the rest of the attempt.
//!
//! Each attempt goes `HoldoffMiddleware` → [`ScriptStage`] → reqwest → the server. The stage
//! notes when the attempt started, marks the request with its attempt number (the
//! `x-script-attempt` header, and `?attempt=N` so that reqwest's own errors name it), moves the
//! clock by `takes_ms`, and then:
//!
//! * `response`: the server answers the status and headers, plus `x-attempt: N`;
//! * `raises: transport`: the server drops the connection without answering (a real reqwest
//!   error);
//! * `raises: timeout`: the request gets a reqwest timeout of `takes_ms` and the server never
//!   answers (a real `reqwest::Error::is_timeout`);
//! * `hits_deadline`: the server never answers; the middleware's own time limit cuts it;
//! * `raises: answer` / `{"retry_later_ms": N}`: the stage fails with the runner's own error
//!   (an inner middleware's error), which the runner's `classify_errors` calls an answer or a
//!   retry-later;
//! * `raises: bug`: the stage panics;
//! * `cancelled`: the caller cancels: the runner drops the request's future.

use std::future::pending;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use holdoff::Clock;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use reqwest::{Request, Response};
use reqwest_middleware::{Middleware, Next};
use tokio::net::TcpListener;
use tokio::sync::Notify;

use crate::script::{Act, Bug, Item, Raised};

pub type Script = Arc<Mutex<Vec<Item>>>;

/// Serves the current script on 127.0.0.1; returns its URL.
pub async fn serve(script: Script) -> std::io::Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let script = Arc::clone(&script);
            tokio::spawn(async move {
                let answer = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let script = Arc::clone(&script);
                    async move {
                        let n: usize = req
                            .headers()
                            .get("x-script-attempt")
                            .and_then(|v| v.to_str().ok())
                            .and_then(|v| v.parse().ok())
                            .unwrap_or(0);
                        let item = n
                            .checked_sub(1)
                            .and_then(|i| script.lock().unwrap().get(i).cloned());
                        match item.map(|i| i.act) {
                            Some(Act::Response { status, headers }) => {
                                let status =
                                    u16::try_from(status).expect("the runner sends statuses hyper can");
                                let mut resp =
                                    hyper::Response::builder().status(status).header("x-attempt", n);
                                for (name, value) in headers {
                                    resp = resp.header(name, value);
                                }
                                Ok(resp.body(Full::new(&b""[..])).expect("a valid response"))
                            }
                            Some(Act::Timeout | Act::HitsDeadline) => pending().await,
                            // A service error makes hyper close the connection unanswered.
                            _ => Err(std::io::Error::other("transport")),
                        }
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), answer)
                    .await;
            });
        }
    });
    Ok(format!("http://{addr}/"))
}

/// The `[reqwest]` flavour's server and client, one per case.
pub struct Rig {
    pub script: Script,
    pub url: String,
    pub client: reqwest::Client,
}

impl Rig {
    /// Starts the server (on the current runtime) and builds the client.
    pub async fn start() -> Result<Rig, String> {
        let script: Script = Arc::default();
        let url = serve(Arc::clone(&script)).await.map_err(|e| e.to_string())?;
        // A fresh connection per attempt: an attempt's transport error stays its own.
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Rig { script, url, client })
    }
}

/// Whether the server can answer this status (hyper's statuses are 100..=999).
pub fn can_send(status: i64) -> bool {
    (100..=999).contains(&status)
}

/// The runner's inner middleware (see the module documentation).
pub struct ScriptStage {
    pub script: Script,
    pub counter: Arc<AtomicU32>,
    pub starts: Arc<Mutex<Vec<u64>>>,
    pub clock: Arc<dyn Clock>,
    pub cancel: Arc<Notify>,
}

#[async_trait::async_trait]
impl Middleware for ScriptStage {
    async fn handle(
        &self,
        mut req: Request,
        extensions: &mut http::Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let n = self.counter.fetch_add(1, Ordering::SeqCst) + 1;
        self.starts
            .lock()
            .unwrap()
            .push(self.clock.now().as_nanos() / 1_000_000);
        let item = self.script.lock().unwrap().get(n as usize - 1).cloned();
        let Some(item) = item else {
            return Err(reqwest_middleware::Error::middleware(Raised::Overrun(n)));
        };
        req.url_mut().set_query(Some(&format!("attempt={n}")));
        req.headers_mut()
            .insert("x-script-attempt", http::HeaderValue::from(n));
        match item.act {
            Act::Timeout => {
                *req.timeout_mut() = Some(item.takes);
                return next.run(req, extensions).await;
            }
            Act::HitsDeadline => return next.run(req, extensions).await,
            _ => tokio::time::sleep(item.takes).await,
        }
        match item.act {
            Act::Response { .. } | Act::Transport => next.run(req, extensions).await,
            Act::Answer => Err(reqwest_middleware::Error::middleware(Raised::Answer(n))),
            Act::RetryLater(d) => Err(reqwest_middleware::Error::middleware(Raised::RetryLater(n, d))),
            Act::Bug => std::panic::panic_any(Bug(n)),
            Act::Cancelled => {
                self.cancel.notify_one();
                pending().await
            }
            // A value is not something an HTTP attempt can return: the case was routed wrongly.
            Act::Returns(_) => Err(reqwest_middleware::Error::middleware(Raised::Overrun(n))),
            Act::Timeout | Act::HitsDeadline => unreachable!("handled above"),
        }
    }
}

/// The attempt number a response or a client error carries.
pub fn response_attempt(r: &Response) -> u32 {
    r.headers()
        .get("x-attempt")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

pub fn error_attempt(e: &reqwest_middleware::Error) -> u32 {
    match e {
        reqwest_middleware::Error::Middleware(m) => m.downcast_ref::<Raised>().map_or(0, Raised::attempt),
        reqwest_middleware::Error::Reqwest(r) => r
            .url()
            .and_then(|u| u.query_pairs().find(|(k, _)| k == "attempt"))
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0),
    }
}
