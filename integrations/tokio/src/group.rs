//! One [`Policy`] per upstream key, made lazily from templates.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use holdoff::{
    BreakerGroup, BudgetConfig, Classifier, ConfigError, Policy, QuotaConfig, RetryBudget, RetryQuota,
};

/// A lazily filled map from upstream key (a host, a provider) to its own [`Policy`]: the
/// breaker comes from a [`BreakerGroup`] (so each key's breaker has its own jitter seed), and
/// each key gets its own [`RetryBudget`] (rate-limit episodes are per upstream) and, if
/// configured, its own [`RetryQuota`]. `Send + Sync`.
///
/// Used by the keyed `tower::HoldoffLayer` (feature `tower`) and the per-host
/// `reqwest::HoldoffMiddleware` (feature `reqwest`).
#[derive(Debug)]
pub struct PolicyGroup {
    breakers: BreakerGroup,
    budget: BudgetConfig,
    quota: Option<QuotaConfig>,
    classifier: Classifier,
    policies: RwLock<HashMap<String, Arc<Policy>>>,
}

impl PolicyGroup {
    /// An empty group. The budget and quota templates are validated now, so [`PolicyGroup::get`]
    /// cannot fail.
    ///
    /// # Errors
    /// [`ConfigError`] naming the offending budget or quota field.
    pub fn new(
        breakers: BreakerGroup,
        budget: BudgetConfig,
        quota: Option<QuotaConfig>,
        classifier: Classifier,
    ) -> Result<PolicyGroup, ConfigError> {
        budget.validate()?;
        if let Some(q) = &quota {
            q.validate()?;
        }
        Ok(PolicyGroup {
            breakers,
            budget,
            quota,
            classifier,
            policies: RwLock::new(HashMap::new()),
        })
    }

    /// The policy for `key`, created on first use.
    pub fn get(&self, key: &str) -> Arc<Policy> {
        if let Some(p) = self.policies.read().unwrap_or_else(|e| e.into_inner()).get(key) {
            return Arc::clone(p);
        }
        let mut map = self.policies.write().unwrap_or_else(|e| e.into_inner());
        let p = map.entry(key.to_owned()).or_insert_with(|| {
            let breaker = self.breakers.get(key);
            // The budget must read the breaker's own clock (one reading per decision).
            let clock = Arc::clone(breaker.clock());
            let budget = RetryBudget::new(self.budget.clone(), clock).expect("validated template");
            let quota = self
                .quota
                .map(|q| Arc::new(RetryQuota::new(q).expect("validated template")));
            Arc::new(
                Policy::new(breaker, Arc::new(budget), quota, self.classifier.clone())
                    .expect("the budget shares the breaker's clock"),
            )
        });
        Arc::clone(p)
    }

    /// The policy for `key` if it exists, without creating it.
    pub fn peek(&self, key: &str) -> Option<Arc<Policy>> {
        self.policies
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .cloned()
    }

    /// The breakers, keyed like the policies.
    pub fn breakers(&self) -> &BreakerGroup {
        &self.breakers
    }
}
