//! A `tower` [`Layer`] applying a holdoff [`Policy`] per request (feature `tower`).
//!
//! [`HoldoffLayer::new`] wraps a service in one policy; [`HoldoffLayer::keyed`] picks a policy
//! per request from a [`PolicyGroup`] with a key extractor (per host, per tenant);
//! [`HoldoffLayer::options`] sets the time limits and hooks.
//!
//! Each request runs [`crate::execute_with`]: the inner service must be `Clone` (one clone per
//! attempt, readied with `poll_ready` before each call) and the request must be `Clone` (one
//! clone per attempt). Errors are [`crate::Error`] over the inner service's error and response
//! (a give-up carries the last response when the classifier called it a failure).

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use holdoff::{Outcome, Policy, State};
use tower_layer::Layer;
use tower_service::Service;

use crate::{Error, Options, PolicyGroup};

/// Which policy a request runs under. Implemented by [`Single`] and [`Keyed`]; not meant to be
/// implemented elsewhere.
pub trait SelectPolicy<Req>: Clone + Send + Sync + 'static {
    /// The policy for this request.
    fn select(&self, req: &Req) -> Arc<Policy>;
    /// The one policy every request runs under, if there is one: `poll_ready` can then report
    /// an open breaker.
    fn only(&self) -> Option<&Policy>;
}

/// Every request runs under one policy.
#[derive(Debug, Clone)]
pub struct Single(Arc<Policy>);

impl<Req> SelectPolicy<Req> for Single {
    fn select(&self, _: &Req) -> Arc<Policy> {
        Arc::clone(&self.0)
    }
    fn only(&self) -> Option<&Policy> {
        Some(&self.0)
    }
}

/// Each request runs under the policy of its key in a [`PolicyGroup`].
#[derive(Debug, Clone)]
pub struct Keyed<K> {
    group: Arc<PolicyGroup>,
    key: K,
}

impl<Req, K> SelectPolicy<Req> for Keyed<K>
where
    K: Fn(&Req) -> String + Clone + Send + Sync + 'static,
{
    fn select(&self, req: &Req) -> Arc<Policy> {
        self.group.get(&(self.key)(req))
    }
    fn only(&self) -> Option<&Policy> {
        None
    }
}

/// A [`Layer`] that runs every request through a holdoff policy: breaker admission, retries on
/// the budget's delays (sleeping with `tokio::time::sleep`), the quota's cost.
///
/// `C` classifies one attempt's `Result<Response, Error>` into an [`Outcome`].
#[derive(Debug, Clone)]
pub struct HoldoffLayer<C, P = Single> {
    select: P,
    classify: C,
    options: Options,
}

impl<C> HoldoffLayer<C, Single> {
    /// Every request under `policy`.
    pub fn new(policy: Arc<Policy>, classify: C) -> Self {
        HoldoffLayer {
            select: Single(policy),
            classify,
            options: Options::default(),
        }
    }
}

impl<C, K> HoldoffLayer<C, Keyed<K>> {
    /// Each request under `group.get(key(&request))`: a breaker, budget and quota per key (per
    /// host, say). `poll_ready` cannot know the key, so it reports only the inner service's
    /// readiness; an open breaker is reported by the request's future as
    /// [`Error::BreakerOpen`].
    pub fn keyed(group: Arc<PolicyGroup>, key: K, classify: C) -> Self {
        HoldoffLayer {
            select: Keyed { group, key },
            classify,
            options: Options::default(),
        }
    }
}

impl<C, P> HoldoffLayer<C, P> {
    /// The time limits and hooks of every request (see [`Options`]; default: no attempt
    /// timeout, a 60 s total timeout).
    pub fn options(mut self, options: Options) -> Self {
        self.options = options;
        self
    }
}

impl<S, C: Clone, P: Clone> Layer<S> for HoldoffLayer<C, P> {
    type Service = HoldoffService<S, C, P>;

    fn layer(&self, inner: S) -> Self::Service {
        HoldoffService {
            inner,
            select: self.select.clone(),
            classify: self.classify.clone(),
            options: self.options.clone(),
        }
    }
}

/// The [`Service`] made by [`HoldoffLayer`].
#[derive(Debug, Clone)]
pub struct HoldoffService<S, C, P = Single> {
    inner: S,
    select: P,
    classify: C,
    options: Options,
}

impl<S, C, P> HoldoffService<S, C, P> {
    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S, C, P, Req> Service<Req> for HoldoffService<S, C, P>
where
    S: Service<Req> + Clone + Send + 'static,
    S::Future: Send,
    S::Response: Send,
    S::Error: Send,
    Req: Clone + Send + 'static,
    C: Fn(&Result<S::Response, S::Error>) -> Outcome + Clone + Send + Sync + 'static,
    P: SelectPolicy<Req>,
{
    type Response = S::Response;
    type Error = Error<S::Error, S::Response>;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, Self::Error>> + Send>>;

    /// Reports an open breaker as `Ready(Err(Error::BreakerOpen { retry_after, .. }))` when no probe
    /// is due, from [`holdoff::Breaker::snapshot`], which has no side effects: no probe is spent
    /// here (admission happens in `call`), and the service stays usable: poll again after
    /// `retry_after`. Otherwise the inner service's readiness, its error as
    /// [`Error::Operation`].
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if let Some(policy) = self.select.only() {
            let s = policy.breaker().snapshot();
            let refusing = match s.state {
                State::Open | State::HalfOpen => !s.probe_ready,
                State::ForcedOpen => true,
                State::Closed | State::Disabled => false,
            };
            if refusing {
                return Poll::Ready(Err(Error::BreakerOpen {
                    retry_after: s.retry_after,
                    attempts: 0,
                    last: None,
                }));
            }
        }
        self.inner.poll_ready(cx).map_err(Error::Operation)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let policy = self.select.select(&req);
        let svc = self.inner.clone();
        let classify = self.classify.clone();
        let options = self.options.clone();
        Box::pin(async move {
            crate::execute_with(
                &policy,
                &options,
                move || {
                    let mut svc = svc.clone();
                    let req = req.clone();
                    async move {
                        poll_fn(|cx| svc.poll_ready(cx)).await?;
                        svc.call(req).await
                    }
                },
                |r: &Result<S::Response, S::Error>| classify(r),
            )
            .await
        })
    }
}
