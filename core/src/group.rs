//! Breakers keyed by upstream (host, registry, provider), made lazily from one template.

use std::collections::HashMap;
use std::sync::Arc;

use crate::breaker::{Breaker, BreakerConfig};
use crate::clock::Clock;
use crate::error::ConfigError;
use crate::sync::RwLock;

/// A lazily filled map from upstream key to its own [`Breaker`]. `Send + Sync`.
///
/// Each breaker gets the template's configuration, with its jitter seed mixed with the key so
/// that a fleet of breakers does not probe in lockstep.
#[derive(Debug)]
pub struct BreakerGroup {
    template: BreakerConfig,
    clock: Arc<dyn Clock>,
    breakers: RwLock<HashMap<String, Arc<Breaker>>>,
}

fn fnv1a(key: &str) -> u64 {
    key.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl BreakerGroup {
    /// An empty group; the template is validated now, so `get` cannot fail.
    pub fn new(template: BreakerConfig, clock: Arc<dyn Clock>) -> Result<BreakerGroup, ConfigError> {
        template.validate()?;
        Ok(BreakerGroup {
            template,
            clock,
            breakers: RwLock::new(HashMap::new()),
        })
    }

    /// The breaker for `key`, created on first use.
    pub fn get(&self, key: &str) -> Arc<Breaker> {
        if let Some(b) = self.breakers.read().unwrap_or_else(|e| e.into_inner()).get(key) {
            return Arc::clone(b);
        }
        let mut map = self.breakers.write().unwrap_or_else(|e| e.into_inner());
        let b = map.entry(key.to_owned()).or_insert_with(|| {
            let cfg = BreakerConfig {
                seed: self.template.seed ^ fnv1a(key),
                ..self.template.clone()
            };
            // The template was validated in `new` and only the seed differs.
            Arc::new(Breaker::new(cfg, Arc::clone(&self.clock)).expect("validated template"))
        });
        Arc::clone(b)
    }

    /// The breaker for `key` if it exists, without creating it.
    pub fn peek(&self, key: &str) -> Option<Arc<Breaker>> {
        self.breakers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .cloned()
    }

    /// Keys with a breaker, sorted.
    pub fn keys(&self) -> Vec<String> {
        let mut k: Vec<String> = self
            .breakers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect();
        k.sort();
        k
    }

    /// Number of breakers.
    pub fn len(&self) -> usize {
        self.breakers.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether no breaker was made yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
