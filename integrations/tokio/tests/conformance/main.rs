//! holdoff-tokio's conformance runner: every case of `conformance/cases` with an `execute` step,
//! once per helper flavour (`conformance/README.md`, "Execute"), through the crate's public
//! helpers on tokio's paused clock (a [`holdoff_tokio::TokioClock`]: the waits are
//! `tokio::time::sleep`s that the paused runtime advances by exactly their delay, and attempt
//! limits are `tokio::time::timeout`s on the same clock). The other steps of those cases run
//! through the core's API in `holdoff-conformance` (shared with the core's runner, which runs
//! every case), on the same clock (`paused.rs`).
//!
//! Flavours (`flavour.rs`): `[async]` is [`holdoff_tokio::execute_with`]; `[async http]` is
//! [`holdoff_tokio::execute_http`] with the runner's own response type; `[reqwest]` is
//! `HoldoffMiddleware` in a reqwest client against a server on 127.0.0.1 (`rig.rs`).
//! A case with a `response` item runs in the HTTP flavours, else one with a `returns` item in
//! `[async]`, any other in all three; a `returns` script in a case that also has a `response`
//! script runs through `[async]` within the HTTP flavours' runs.
//!
//! The caller's cancellation: during a wait (`cancel_in_wait`), and during a `[reqwest]` attempt,
//! the runner drops the call's future (the Rust caller's cancellation; nothing is returned). In
//! `[async]` and `[async http]`, a `cancelled` attempt is an operation that sees its caller's
//! cancellation and fails with an error the runner's classifier calls `Outcome::Cancelled`: the
//! helper then reports `Error::Cancelled`, or a timeout at or after the attempt's limit.
//!
//! Prints one line per (case, flavour) and ends with `N passed, N failed, N skipped`; exits
//! non-zero on any failure. `HOLDOFF_CASES=substring` runs only the cases whose id contains it.

mod execute;
mod flavour;
mod paused;
mod rig;
mod script;

use std::sync::mpsc;
use std::time::Duration;

use holdoff_conformance::{run_case, Ctx, Execute, Tally, R};
use serde_json::Value;

use flavour::Flavour;
use paused::Paused;
use rig::Rig;
use script::Bug;

/// A wall-clock watchdog: only turns a deadlock into a failure.
const WATCHDOG: Duration = Duration::from_secs(60);

/// Runs a case's `execute` steps in one flavour.
struct Helpers {
    flavour: Flavour,
    rig: Option<Rig>,
}

impl Execute<Paused> for Helpers {
    async fn execute(&mut self, ctx: &Ctx<Paused>, step: &Value) -> R<Value> {
        execute::execute_step(ctx, step, self.flavour, self.rig.as_ref()).await
    }
}

/// Runs one (case, flavour) on its own paused runtime and thread, under the watchdog.
fn run_flavour(case: &Value, flavour: Flavour) -> R<()> {
    let (tx, rx) = mpsc::channel();
    let case = case.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("a runtime");
        let _ = tx.send(rt.block_on(async {
            let rig = match flavour {
                Flavour::Reqwest => Some(Rig::start().await?),
                Flavour::Async | Flavour::AsyncHttp => None,
            };
            run_case::<Paused>(&case, &mut Helpers { flavour, rig }).await
        }));
    });
    match rx.recv_timeout(WATCHDOG) {
        Ok(r) => r,
        Err(mpsc::RecvTimeoutError::Timeout) => Err(format!("no result after {WATCHDOG:?} of wall time")),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err("the runner panicked (see above)".into()),
    }
}

fn main() {
    // A scripted programming error is a panic the runner expects: keep it off stderr.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.payload().downcast_ref::<Bug>().is_none() {
            default_hook(info);
        }
    }));
    let mut tally = Tally::default();
    for (id, case) in holdoff_conformance::cases() {
        let executes = case["steps"]
            .as_array()
            .is_some_and(|s| s.iter().any(|s| s["op"] == "execute"));
        if !executes {
            continue;
        }
        let flavours = match flavour::flavours(&case) {
            Ok(f) => f,
            Err(e) => {
                tally.note(&id, Err(e));
                continue;
            }
        };
        for flavour in flavours {
            let label = format!("{id} [{}]", flavour.name());
            // Not applicable is neither passed nor skipped (the runner contract): another
            // flavour runs the case.
            if let Some(why) = flavour::inapplicable(&case, flavour) {
                println!("n/a  {label}: {why}");
                continue;
            }
            tally.note(&label, run_flavour(&case, flavour));
        }
    }
    tally.finish();
}
