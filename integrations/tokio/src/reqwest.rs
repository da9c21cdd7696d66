//! A `reqwest-middleware` [`Middleware`] running every request through a holdoff [`Policy`]
//! (feature `reqwest`).
//!
//! Responses are classified by the policy's HTTP [`holdoff::Classifier`] through
//! [`Policy::after_response`]: a 429 or 503 with a usable Retry-After (RFC 9110 §10.2.3, delay
//! seconds or an HTTP-date) becomes a retry-later wait of exactly the server's delay (capped by
//! the budget's `retry_after_cap`, never shortened to fit: if it does not fit what is left of
//! the rate-limit episode's budget, the middleware gives up at once); other retryable statuses
//! and transport errors follow the budget's counted backoff. Sleeping uses
//! [`tokio::time::sleep`].
//!
//! # What the client sees
//! * A response, whenever the last attempt produced one, even a 503 after the policy gave up:
//!   the last answer is handed back as `reqwest` would (check its status).
//! * The last transport error, as is, when it is final.
//! * [`reqwest_middleware::Error::Middleware`] wrapping a [`MiddlewareError`] when the breaker
//!   refused the first attempt ([`crate::Error::BreakerOpen`]) or the policy gave up after
//!   transport errors ([`crate::Error::GiveUp`], with the last error). Downcast with
//!   `anyhow::Error::downcast_ref::<MiddlewareError>()`.
//!
//! A transport timeout is recorded as [`Outcome::Timeout`], any other transport error as
//! [`Outcome::Failure`], as is a status outside 100..=599 (a server breaking the protocol).
//! A request whose body cannot be cloned (a stream) is sent once: the policy's decision is
//! recorded but a retry cannot be made.
//!
//! # Cancellation
//! Dropping the request's future while an attempt is in flight records it as
//! [`Outcome::Cancelled`] (frees its probe slot at once).

use std::sync::Arc;

use holdoff::{Before, Call, Outcome, Policy};
use reqwest::{Request, Response};
use reqwest_middleware::{Middleware, Next};

use crate::execute::{verdict, PolicyAttempt};
use crate::{Event, PolicyGroup};

/// The error this middleware wraps in [`reqwest_middleware::Error::Middleware`].
pub type MiddlewareError = crate::Error<reqwest_middleware::Error>;

type Observer = Arc<dyn Fn(&Event) + Send + Sync>;

#[derive(Debug, Clone)]
enum Select {
    One(Arc<Policy>),
    PerHost(Arc<PolicyGroup>),
}

/// Retries, breaker and Retry-After for a [`reqwest_middleware::ClientWithMiddleware`].
///
/// ```no_run
/// # use std::sync::Arc;
/// # use holdoff::{Breaker, BreakerConfig, BudgetConfig, Classifier, Policy, RetryBudget};
/// # use holdoff_tokio::{reqwest::HoldoffMiddleware, TokioClock};
/// # async fn run() -> Result<(), reqwest_middleware::Error> {
/// let clock = TokioClock::shared();
/// let breaker = Arc::new(Breaker::new(BreakerConfig::default(), clock.clone()).unwrap());
/// let budget = Arc::new(RetryBudget::new(BudgetConfig::default(), clock).unwrap());
/// let policy = Arc::new(Policy::new(breaker, budget, None, Classifier::default()).unwrap());
///
/// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
///     .with(HoldoffMiddleware::new(policy))
///     .build();
/// let response = client.get("http://127.0.0.1:8080/").send().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct HoldoffMiddleware {
    select: Select,
    observer: Option<Observer>,
}

impl std::fmt::Debug for HoldoffMiddleware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HoldoffMiddleware")
            .field("select", &self.select)
            .field("observer", &self.observer.is_some())
            .finish()
    }
}

impl HoldoffMiddleware {
    /// Every request under `policy` (one upstream).
    pub fn new(policy: Arc<Policy>) -> Self {
        HoldoffMiddleware {
            select: Select::One(policy),
            observer: None,
        }
    }

    /// Each request under the policy of its URL's `host:port` (the port as written, or the
    /// scheme's default) in `group`.
    pub fn per_host(group: Arc<PolicyGroup>) -> Self {
        HoldoffMiddleware {
            select: Select::PerHost(group),
            observer: None,
        }
    }

    /// Reports each step (attempt, decision, breaker wait) to `observer`, for logs and metrics.
    pub fn on_event(mut self, observer: impl Fn(&Event) + Send + Sync + 'static) -> Self {
        self.observer = Some(Arc::new(observer));
        self
    }

    fn policy_for(&self, req: &Request) -> Arc<Policy> {
        match &self.select {
            Select::One(p) => Arc::clone(p),
            Select::PerHost(g) => {
                let url = req.url();
                let key = format!(
                    "{}:{}",
                    url.host_str().unwrap_or_default(),
                    url.port_or_known_default().unwrap_or_default()
                );
                g.get(&key)
            }
        }
    }

    fn observe(&self, e: &Event) {
        if let Some(f) = &self.observer {
            f(e);
        }
    }
}

fn transport_outcome(e: &reqwest_middleware::Error) -> Outcome {
    match e {
        reqwest_middleware::Error::Reqwest(e) if e.is_timeout() => Outcome::Timeout,
        _ => Outcome::Failure,
    }
}

fn conclude(
    result: reqwest_middleware::Result<Response>,
    give_up: Option<holdoff::GiveUpReason>,
    attempts: u32,
) -> reqwest_middleware::Result<Response> {
    crate::execute::conclude(result, give_up, attempts).map_err(|e| match e {
        crate::Error::Operation(e) => e,
        other => reqwest_middleware::Error::middleware(other),
    })
}

#[async_trait::async_trait]
impl Middleware for HoldoffMiddleware {
    async fn handle(
        &self,
        req: Request,
        extensions: &mut http::Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let policy = self.policy_for(&req);
        let mut call = Call::new();
        let mut original = Some(req);
        let mut last = None;
        loop {
            match policy.before_attempt(&mut call) {
                Before::Go(permit) => {
                    let attempt = call.attempts();
                    self.observe(&Event::Attempt {
                        attempt,
                        probe: permit.is_probe(),
                    });
                    // A clone while another attempt may follow; the original if it cannot be
                    // cloned (then this is the only attempt).
                    let cloned = original.as_ref().and_then(Request::try_clone);
                    let can_retry = cloned.is_some();
                    let Some(this) = cloned.or_else(|| original.take()) else {
                        unreachable!("a request that cannot be cloned is sent once")
                    };
                    let guard = PolicyAttempt::new(&policy, &mut call, permit);
                    let result = next.clone().run(this, extensions).await;
                    let (outcome, decision) = guard.finish(|p, c, permit| match &result {
                        Ok(resp) if holdoff::check_status(i64::from(resp.status().as_u16())).is_ok() => {
                            let headers = resp
                                .headers()
                                .iter()
                                .filter_map(|(k, v)| v.to_str().ok().map(|v| (k.as_str(), v)));
                            let (d, cl) = p
                                .after_response(c, permit, resp.status().as_u16(), headers)
                                .expect("a checked status and this policy's own permit");
                            (cl.outcome, d)
                        }
                        other => {
                            let o = match other {
                                Err(e) => transport_outcome(e),
                                Ok(_) => Outcome::Failure,
                            };
                            let d = p.after_attempt(c, permit, o).expect("this policy's own permit");
                            (o, d)
                        }
                    });
                    self.observe(&Event::Decided {
                        attempt,
                        outcome,
                        decision,
                    });
                    match verdict(&decision) {
                        Ok(delay) if can_retry => {
                            last = Some(result);
                            tokio::time::sleep(delay).await;
                        }
                        Ok(_) => return result,
                        Err(give_up) => return conclude(result, give_up, attempt),
                    }
                }
                Before::Wait(delay) => {
                    self.observe(&Event::BreakerWait { delay });
                    tokio::time::sleep(delay).await;
                }
                Before::GiveUp { reason, retry_after } => {
                    return match last.take() {
                        None => Err(reqwest_middleware::Error::middleware(
                            MiddlewareError::BreakerOpen { retry_after },
                        )),
                        Some(result) => conclude(result, Some(reason), call.attempts()),
                    };
                }
            }
        }
    }
}
