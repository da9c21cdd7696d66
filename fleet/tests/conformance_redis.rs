//! Every fleet case of `conformance/cases` on a real redis-server, through the
//! `holdoff-conformance` runner's [`FleetBackend`] hook: the workers' url becomes this server's
//! with `?clock=caller` (the script then reads the case's manual clock), the database is flushed
//! before each case, and `fleet_store` steps act on the server:
//!
//! * `flush`: `FLUSHALL` on the server.
//! * `down` / `up`: a client-side kill switch: while down every exchange fails at once with
//!   `Unavailable` and the connections are dropped (so `up` reconnects). Stopping the process
//!   would lose the record, which the memory store's `down` keeps; the real kill is in
//!   `tests/live.rs`.
//!
//! Run on a unix socket and on a 127.0.0.1 port. One line per case, then the failures.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use holdoff::fleet::{Exchanged, FleetConfig, FleetOp, FleetStore, StoreError};
use holdoff::ManualClock;
use holdoff_conformance::{complete, fleet_cases, run_case_on, Ctx, Execute, FleetBackend, R};
use holdoff_fleet::testing::RedisServer;
use holdoff_fleet::RedisStore;
use serde_json::Value;

struct Backend {
    server: RedisServer,
    down: Arc<AtomicBool>,
    stores: Mutex<Vec<Arc<RedisStore>>>,
}

/// A RedisStore behind the kill switch.
struct Switched {
    inner: Arc<RedisStore>,
    down: Arc<AtomicBool>,
}

impl FleetStore for Switched {
    fn exchange(&self, key: &str, ops: &[FleetOp], caller_now_ms: u64) -> Result<Exchanged, StoreError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(StoreError::Unavailable("kill switch: down".into()));
        }
        self.inner.exchange(key, ops, caller_now_ms)
    }
}

impl Backend {
    fn flush(&self) -> R<()> {
        let reply = self.server.command(&["FLUSHALL"]).map_err(|e| e.to_string())?;
        if reply != "+OK\r\n" {
            return Err(format!("FLUSHALL: {reply}"));
        }
        Ok(())
    }
}

impl FleetBackend for Backend {
    fn url(&self, _case_id: &str, _memory_url: &str) -> String {
        let base = self.server.url();
        format!("{base}?clock=caller")
    }

    fn store(&self, config: &FleetConfig) -> R<Arc<dyn FleetStore>> {
        let inner =
            Arc::new(RedisStore::new(&config.url, config.timeout, config.ttl).map_err(|e| e.to_string())?);
        self.stores.lock().unwrap().push(Arc::clone(&inner));
        Ok(Arc::new(Switched {
            inner,
            down: Arc::clone(&self.down),
        }))
    }

    fn control(&self, _url: &str, action: &str) -> R<()> {
        match action {
            "down" => {
                self.down.store(true, Ordering::SeqCst);
                for s in self.stores.lock().unwrap().iter() {
                    s.disconnect();
                }
                Ok(())
            }
            "up" => {
                self.down.store(false, Ordering::SeqCst);
                Ok(())
            }
            "flush" => self.flush(),
            other => Err(format!("unknown fleet_store action {other:?}")),
        }
    }

    fn reset(&self, _url: &str) -> R<()> {
        self.down.store(false, Ordering::SeqCst);
        self.stores.lock().unwrap().clear();
        self.flush()
    }
}

/// Fleet cases have no `execute` steps; one would be a runner gap, reported as such.
struct NoExecute;

impl Execute<ManualClock> for NoExecute {
    async fn execute(&mut self, _ctx: &Ctx<ManualClock>, _step: &Value) -> R<Value> {
        Err("execute steps are run by core/tests/conformance.rs, not on Redis".into())
    }
}

fn run_all(server: RedisServer) {
    let label = server.url();
    let backend = Arc::new(Backend {
        server,
        down: Arc::default(),
        stores: Mutex::default(),
    });
    let cases = fleet_cases();
    assert!(!cases.is_empty(), "no fleet cases found");
    let mut failed = Vec::new();
    for (id, case) in &cases {
        let result = complete(run_case_on::<ManualClock>(case, &mut NoExecute, backend.clone()));
        println!("{} {id} ({label})", if result.is_ok() { "ok  " } else { "FAIL" });
        if let Err(e) = result {
            failed.push(format!("{id}: {e}"));
        }
    }
    println!(
        "{} fleet cases on {label}: {} passed, {} failed",
        cases.len(),
        cases.len() - failed.len(),
        failed.len()
    );
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn every_fleet_case_passes_on_redis_over_a_unix_socket() {
    run_all(RedisServer::unix().unwrap());
}

#[test]
fn every_fleet_case_passes_on_redis_over_tcp() {
    run_all(RedisServer::tcp().unwrap());
}
