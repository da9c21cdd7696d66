//! A `reqwest-middleware` [`Middleware`] running every request through a holdoff [`Policy`]
//! (feature `reqwest`): the same loop as [`crate::execute_http`].
//!
//! Responses are classified by the policy's HTTP [`holdoff::Classifier`]: a 429 or 503 with a
//! usable Retry-After (RFC 9110 §10.2.3, delay seconds or an HTTP-date; also `retry-after-ms`,
//! `RateLimit`, `X-RateLimit-Reset`) waits exactly the server's delay, capped by the budget's
//! `retry_after_cap`, never shortened to fit (if it does not fit, the middleware gives up at
//! once); other retryable statuses and transport errors follow the budget's counted backoff.
//! Transport errors are classified by [`transport_outcome`] unless
//! [`HoldoffMiddleware::classify_errors`] says otherwise.
//!
//! # What the client sees
//! * `Ok(response)` for a success or a final answer: a 404 is returned, not raised.
//! * The last transport (or inner middleware) error, unchanged, when it is final.
//! * [`reqwest_middleware::Error::Middleware`] wrapping a [`MiddlewareError`] otherwise: the
//!   breaker refused ([`crate::Error::BreakerOpen`]), the policy gave up
//!   ([`crate::Error::GiveUp`]: 500s or 503s until the budget, the quota or the total timeout
//!   ran out, with the last `reqwest::Response` attached as [`crate::Last::Value`], or the last
//!   transport error as [`crate::Last::Error`]), or an error classified as the caller's
//!   cancellation ([`crate::Error::Cancelled`]). Downcast with
//!   `anyhow::Error::downcast_ref::<MiddlewareError>()`, or take it with
//!   [`middleware_error`].
//!
//! A request whose body cannot be cloned (a stream) is sent once: if the policy would retry
//! it, the call gives up (`attempts_exhausted`) with that attempt's response or error attached.
//!
//! # Cancellation
//! Dropping the request's future while an attempt is in flight records that attempt as
//! [`Outcome::Cancelled`] (its probe slot freed at once).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};

use holdoff::{Outcome, Policy};
use reqwest::{Request, Response};
use reqwest_middleware::{Middleware, Next};

use crate::run::{run, Attempts, ByResponse};
use crate::{Options, PolicyGroup};

/// The error this middleware wraps in [`reqwest_middleware::Error::Middleware`]; a give-up
/// carries the last `reqwest::Response` or the last transport error.
pub type MiddlewareError = crate::Error<reqwest_middleware::Error, Response>;

/// The default classification of a transport error: [`Outcome::Timeout`] for
/// `reqwest::Error::is_timeout`, [`Outcome::Failure`] for anything else (connection refused or
/// reset, a response that does not parse, an error of an inner middleware).
pub fn transport_outcome(e: &reqwest_middleware::Error) -> Outcome {
    match e {
        reqwest_middleware::Error::Reqwest(e) if e.is_timeout() => Outcome::Timeout,
        _ => Outcome::Failure,
    }
}

/// The [`MiddlewareError`] inside a client error, if there is one.
pub fn middleware_error(e: &reqwest_middleware::Error) -> Option<&MiddlewareError> {
    match e {
        reqwest_middleware::Error::Middleware(e) => e.downcast_ref(),
        reqwest_middleware::Error::Reqwest(_) => None,
    }
}

type ClassifyErrors = Arc<dyn Fn(&reqwest_middleware::Error) -> Outcome + Send + Sync>;

#[derive(Debug, Clone)]
enum Select {
    One(Arc<Policy>),
    PerHost(Arc<PolicyGroup>),
}

/// Retries, breaker and Retry-After for a [`reqwest_middleware::ClientWithMiddleware`].
///
/// ```no_run
/// # use std::sync::Arc;
/// # use std::time::Duration;
/// # use holdoff::{Breaker, BreakerConfig, BudgetConfig, Classifier, Policy, RetryBudget};
/// # use holdoff_tokio::{reqwest::HoldoffMiddleware, Options, TokioClock};
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let clock = TokioClock::shared();
/// let breaker = Arc::new(Breaker::new(BreakerConfig::default(), clock.clone())?);
/// let budget = Arc::new(RetryBudget::new(BudgetConfig::default(), clock)?);
/// let policy = Arc::new(Policy::new(breaker, budget, None, Classifier::default())?);
///
/// let options = Options::new().attempt_timeout(Duration::from_secs(10))?;
/// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
///     .with(HoldoffMiddleware::new(policy).options(options))
///     .build();
/// let response = client.get("http://127.0.0.1:8080/").send().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct HoldoffMiddleware {
    select: Select,
    options: Options,
    classify_errors: ClassifyErrors,
}

impl std::fmt::Debug for HoldoffMiddleware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HoldoffMiddleware")
            .field("select", &self.select)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl HoldoffMiddleware {
    /// Every request under `policy` (one upstream), with the default [`Options`].
    pub fn new(policy: Arc<Policy>) -> Self {
        Self::with_select(Select::One(policy))
    }

    /// Each request under the policy of its URL's `host:port` (the port as written, or the
    /// scheme's default) in `group`.
    pub fn per_host(group: Arc<PolicyGroup>) -> Self {
        Self::with_select(Select::PerHost(group))
    }

    fn with_select(select: Select) -> Self {
        HoldoffMiddleware {
            select,
            options: Options::default(),
            classify_errors: Arc::new(transport_outcome),
        }
    }

    /// The time limits and hooks of every request (see [`Options`]).
    pub fn options(mut self, options: Options) -> Self {
        self.options = options;
        self
    }

    /// Classifies transport and inner-middleware errors instead of [`transport_outcome`] (an
    /// inner middleware's error that is a final answer: [`Outcome::Answer`]).
    pub fn classify_errors(
        mut self,
        classify: impl Fn(&reqwest_middleware::Error) -> Outcome + Send + Sync + 'static,
    ) -> Self {
        self.classify_errors = Arc::new(classify);
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
}

/// Each attempt sends a clone of the request down the rest of the chain, with a copy of the
/// extensions that the attempt hands back when it ends (the caller sees the last finished
/// attempt's); a request that cannot be cloned is sent itself, once.
struct Sends<'n> {
    request: Option<Request>,
    extensions: Arc<Mutex<http::Extensions>>,
    next: Next<'n>,
}

fn lock(m: &Mutex<http::Extensions>) -> MutexGuard<'_, http::Extensions> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<'n> Attempts<Response, reqwest_middleware::Error> for Sends<'n> {
    type Fut = Pin<Box<dyn Future<Output = reqwest_middleware::Result<Response>> + Send + 'n>>;

    fn start(&mut self) -> Self::Fut {
        let req = match self.request.as_ref().and_then(Request::try_clone) {
            Some(clone) => clone,
            None => self
                .request
                .take()
                .expect("the loop asks can_retry before a further attempt"),
        };
        let next = self.next.clone();
        let shared = Arc::clone(&self.extensions);
        let mut extensions = lock(&shared).clone();
        Box::pin(async move {
            let result = next.run(req, &mut extensions).await;
            *lock(&shared) = extensions;
            result
        })
    }

    fn can_retry(&self) -> bool {
        self.request.is_some()
    }
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
        let shared = Arc::new(Mutex::new(std::mem::take(extensions)));
        let sends = Sends {
            request: Some(req),
            extensions: Arc::clone(&shared),
            next,
        };
        let classify = &*self.classify_errors;
        let result = run(&policy, &self.options, sends, ByResponse(classify)).await;
        *extensions = std::mem::take(&mut *lock(&shared));
        result.map_err(|e| match e {
            crate::Error::Operation(e) => e,
            other => reqwest_middleware::Error::middleware(other),
        })
    }
}
