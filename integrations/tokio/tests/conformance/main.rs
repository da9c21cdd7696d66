//! holdoff-tokio's conformance runner: every case of `conformance/cases` with an `execute` step,
//! once per helper flavour (`conformance/README.md`, "Execute"), through the crate's public
//! helpers on tokio's paused clock (a [`holdoff_tokio::TokioClock`]: the waits are
//! `tokio::time::sleep`s that the paused runtime advances by exactly their delay, and attempt
//! limits are `tokio::time::timeout`s on the same clock). The other steps of those cases run
//! through the core's API (`steps.rs`); the core's own runner runs every case.
//!
//! Flavours: `[async]` is [`holdoff_tokio::execute_with`]; `[async http]` is
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

mod rig;
mod script;
mod steps;

use std::any::Any;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use holdoff::{Outcome, Policy};
use holdoff_tokio::reqwest::{middleware_error, transport_outcome, HoldoffMiddleware};
use holdoff_tokio::{execute_http, execute_with, Error, Last, Options};
use serde_json::{json, Value};
use tokio::sync::Notify;

use script::{Act, Bug, Item, Raised, Resp, Val};
use steps::{check, ms, opt_ms, Ctx, R};

const SUITE_VERSION: u64 = 2;

/// A wall-clock watchdog: only turns a deadlock into a failure.
const WATCHDOG: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flavour {
    Async,
    AsyncHttp,
    Reqwest,
}

impl Flavour {
    fn name(self) -> &'static str {
        match self {
            Flavour::Async => "async",
            Flavour::AsyncHttp => "async http",
            Flavour::Reqwest => "reqwest",
        }
    }
}

/// The flavours a case runs in: the HTTP flavours if a script answers a response, else
/// `[async]` if a script returns a value, else all three.
fn flavours(case: &Value) -> R<Vec<Flavour>> {
    let (mut returns, mut responds) = (false, false);
    for step in case["steps"].as_array().ok_or("case without steps")? {
        if step["op"] == "execute" {
            returns |= has(step, "returns");
            responds |= has(step, "response");
        }
    }
    Ok(match (returns, responds) {
        (_, true) => vec![Flavour::AsyncHttp, Flavour::Reqwest],
        (true, false) => vec![Flavour::Async],
        (false, false) => vec![Flavour::Async, Flavour::AsyncHttp, Flavour::Reqwest],
    })
}

/// Whether an `execute` step's script has an item with `key`.
fn has(step: &Value, key: &str) -> bool {
    step["script"]
        .as_array()
        .is_some_and(|items| items.iter().any(|i| i.get(key).is_some()))
}

/// Why a flavour cannot express a case, if it cannot.
fn inapplicable(case: &Value, flavour: Flavour) -> Option<String> {
    if flavour != Flavour::Reqwest {
        return None;
    }
    let statuses = case["steps"]
        .as_array()?
        .iter()
        .filter(|s| s["op"] == "execute")
        .flat_map(|s| s["script"].as_array().into_iter().flatten())
        .filter_map(|i| i.pointer("/response/status").and_then(Value::as_i64));
    statuses.into_iter().find(|s| !rig::can_send(*s)).map(|s| {
        format!(
            "a server cannot answer status {s} to reqwest (http::StatusCode is 100..=999; hyper \
             refuses such a status line), so it never reaches the middleware"
        )
    })
}

/// What the helper's hooks saw during one `execute` step.
#[derive(Default)]
struct Seen {
    attempts: Vec<Value>,
    waits: Vec<Value>,
    errors: Vec<String>,
}

type Shared = Arc<Mutex<Seen>>;

/// When each attempt started (manual-clock ms), noted by the operation.
type Starts = Arc<Mutex<Vec<u64>>>;

fn options(
    ctx: &Ctx,
    seen: &Shared,
    starts: &Starts,
    cancel: &Arc<Notify>,
    cancel_in_wait: Option<u64>,
) -> R<Options> {
    let (s1, s2) = (Arc::clone(seen), Arc::clone(seen));
    let starts = Arc::clone(starts);
    let cancel = Arc::clone(cancel);
    Ok(Options::new()
        .limits(ctx.execution_config()?)
        .map_err(|e| e.to_string())?
        .after_attempt(move |a| {
            let mut s = s1.lock().unwrap();
            if a.number as usize != s.attempts.len() + 1 {
                let e = format!(
                    "the after-attempt hook saw attempt {} after {}",
                    a.number,
                    s.attempts.len()
                );
                s.errors.push(e);
            }
            let at = starts.lock().unwrap().get(a.number as usize - 1).copied();
            s.attempts
                .push(json!({"at": at, "probe": a.probe, "outcome": a.outcome.name()}));
        })
        .before_wait(move |w| {
            let mut s = s2.lock().unwrap();
            s.waits.push(json!({
                "delay_ms": ms(w.delay),
                "source": w.source.name(),
                "capped": w.capped,
                "server_delay_ms": opt_ms(w.server_delay),
            }));
            if cancel_in_wait == Some(s.waits.len() as u64) {
                cancel.notify_one();
            }
        }))
}

/// Polls `fut`, catching a panic (a scripted programming error comes out of the helper so).
async fn catching<F: Future>(fut: F) -> Result<F::Output, Box<dyn Any + Send>> {
    let mut fut = Box::pin(fut);
    std::future::poll_fn(
        move |cx| match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(payload) => Poll::Ready(Err(payload)),
        },
    )
    .await
}

/// Races the call against the caller's cancellation (dropping the call's future).
async fn cancellable<F: Future>(call: F, cancel: &Notify) -> Option<F::Output> {
    tokio::select! {
        biased;
        r = call => Some(r),
        () = cancel.notified() => None,
    }
}

/// The `result` of a call that ended with one of the helper's errors.
fn error_json<E, T>(
    e: &Error<E, T>,
    value_attempt: impl Fn(&T) -> u32,
    error_attempt: impl Fn(&E) -> u32,
) -> R<Value> {
    let cause = |last: Option<&Last<T, E>>, attempts: u32| match last {
        Some(Last::Value(v)) => json!(value_attempt(v)),
        Some(Last::Error(e)) => json!(error_attempt(e)),
        Some(Last::TimedOut) => json!(attempts),
        None => Value::Null,
    };
    let v = match e {
        Error::Operation(e) => json!({"raises": "original", "attempt": error_attempt(e)}),
        Error::BreakerOpen {
            retry_after,
            attempts,
            last,
        } => json!({
            "raises": "breaker_open", "attempts": attempts, "retry_after_ms": opt_ms(*retry_after),
            "cause": cause(last.as_ref(), *attempts),
        }),
        Error::GiveUp {
            reason,
            attempts,
            retry_after,
            server_delay,
            capped,
            last,
        } => json!({
            "raises": "give_up", "reason": reason.name(), "attempts": attempts,
            "retry_after_ms": opt_ms(*retry_after), "server_delay_ms": opt_ms(*server_delay),
            "capped": capped, "cause": cause(Some(last), *attempts),
        }),
        Error::Cancelled { attempts, last } => json!({
            "raises": "cancelled", "attempts": attempts, "cause": cause(Some(last), *attempts),
        }),
        Error::InvalidInput {
            field,
            attempts,
            value,
        } => {
            if *field != "status" {
                return Err(format!("invalid_input names {field:?}, not status"));
            }
            json!({"raises": "invalid_input", "attempts": attempts, "cause": value_attempt(value)})
        }
    };
    let kind = v["raises"].as_str().expect("a kind");
    let unavailable = matches!(kind, "breaker_open" | "give_up");
    if e.is_upstream_unavailable() != unavailable {
        return Err(format!("{kind}: is_upstream_unavailable() is {}", !unavailable));
    }
    if kind != "original" && e.name() != kind {
        return Err(format!("{kind}: Error::name() is {:?}", e.name()));
    }
    Ok(v)
}

fn plain_classify(r: &Result<Val, Raised>) -> Outcome {
    match r {
        Ok(v) => v.outcome,
        Err(e) => e.outcome(),
    }
}

/// The operation of the `[async]` and `[async http]` flavours: attempt `n` does item `n`.
fn operation<T: Send + 'static>(
    items: &Arc<Vec<Item>>,
    counter: &Arc<AtomicU32>,
    starts: &Starts,
    clock: &Arc<dyn holdoff::Clock>,
    make: fn(u32, &Act) -> Option<T>,
) -> impl FnMut() -> std::pin::Pin<Box<dyn Future<Output = Result<T, Raised>> + Send>> {
    let (items, counter, starts, clock) = (
        Arc::clone(items),
        Arc::clone(counter),
        Arc::clone(starts),
        Arc::clone(clock),
    );
    move || {
        let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
        starts.lock().unwrap().push(clock.now().as_nanos() / 1_000_000);
        let item = items.get(n as usize - 1).cloned();
        Box::pin(async move {
            let item = item.ok_or(Raised::Overrun(n))?;
            match script::perform(n, &item).await {
                Some(e) => Err(e),
                None => make(n, &item.act).ok_or(Raised::Overrun(n)),
            }
        })
    }
}

/// Runs one `execute` step in `flavour`; returns what the hooks and the caller saw. A script
/// that returns values runs through `[async]` whatever the case's flavour: an HTTP helper's
/// attempts answer responses.
async fn execute_step(ctx: &Ctx, step: &Value, flavour: Flavour, rig: Option<&Rig>) -> R<Value> {
    let flavour = if has(step, "returns") {
        Flavour::Async
    } else {
        flavour
    };
    let policy: Arc<Policy> = ctx.policy.clone().ok_or("the case has no policy")?;
    let items = Arc::new(script::parse(&step["script"])?);
    let cancel_in_wait = step.get("cancel_in_wait").and_then(Value::as_u64);
    let seen: Shared = Arc::default();
    let starts: Starts = Arc::default();
    let cancel = Arc::new(Notify::new());
    let counter = Arc::new(AtomicU32::new(0));
    let opts = options(ctx, &seen, &starts, &cancel, cancel_in_wait)?;
    let ended = match flavour {
        Flavour::Async => {
            let op = operation(&items, &counter, &starts, &ctx.clock, |n, act| match *act {
                Act::Returns(outcome) => Some(Val { attempt: n, outcome }),
                _ => None,
            });
            let call = execute_with(&policy, &opts, op, plain_classify);
            match catching(cancellable(call, &cancel)).await {
                Ok(Some(Ok(v))) => Ok(json!({"returns": v.attempt})),
                Ok(Some(Err(e))) => error_json(&e, |v| v.attempt, Raised::attempt).map(Ok)?,
                Ok(None) => Err(None),
                Err(payload) => Err(Some(payload)),
            }
        }
        Flavour::AsyncHttp => {
            let op = operation(&items, &counter, &starts, &ctx.clock, |n, act| match act {
                Act::Response { status, headers } => Some(Resp {
                    attempt: n,
                    status: *status,
                    headers: headers.clone(),
                }),
                _ => None,
            });
            let call = execute_http(&policy, &opts, op, Raised::outcome);
            match catching(cancellable(call, &cancel)).await {
                Ok(Some(Ok(r))) => Ok(json!({"returns": r.attempt})),
                Ok(Some(Err(e))) => error_json(&e, |r| r.attempt, Raised::attempt).map(Ok)?,
                Ok(None) => Err(None),
                Err(payload) => Err(Some(payload)),
            }
        }
        Flavour::Reqwest => {
            let rig = rig.ok_or("no HTTP rig")?;
            *rig.script.lock().unwrap() = items.to_vec();
            let stage = rig::ScriptStage {
                script: Arc::clone(&rig.script),
                counter: Arc::clone(&counter),
                starts: Arc::clone(&starts),
                clock: Arc::clone(&ctx.clock),
                cancel: Arc::clone(&cancel),
            };
            let client = reqwest_middleware::ClientBuilder::new(rig.client.clone())
                .with(
                    HoldoffMiddleware::new(Arc::clone(&policy))
                        .options(opts)
                        .classify_errors(|e| match e {
                            reqwest_middleware::Error::Middleware(m) => m
                                .downcast_ref::<Raised>()
                                .map_or(Outcome::Failure, Raised::outcome),
                            e => transport_outcome(e),
                        }),
                )
                .with(stage)
                .build();
            let call = client.get(&rig.url).send();
            match catching(cancellable(call, &cancel)).await {
                Ok(Some(Ok(r))) => Ok(json!({"returns": rig::response_attempt(&r)})),
                Ok(Some(Err(e))) => match middleware_error(&e) {
                    Some(h) => error_json(h, rig::response_attempt, rig::error_attempt).map(Ok)?,
                    None => Ok(json!({"raises": "original", "attempt": rig::error_attempt(&e)})),
                },
                Ok(None) => Err(None),
                Err(payload) => Err(Some(payload)),
            }
        }
    };
    let seen = seen.lock().unwrap();
    let result = match ended {
        Ok(v) => v,
        // The caller dropped the call: what it made is what the hooks saw.
        Err(None) => json!({"raises": "cancelled", "attempts": seen.attempts.len()}),
        Err(Some(payload)) => match payload.downcast::<Bug>() {
            Ok(bug) => json!({"raises": "original", "attempt": bug.0}),
            Err(other) => std::panic::resume_unwind(other),
        },
    };
    if let Some(e) = seen.errors.first() {
        return Err(e.clone());
    }
    let made = counter.load(Ordering::SeqCst) as usize;
    if made > items.len() {
        return Err(format!("attempt {made} is not in the script"));
    }
    Ok(json!({"attempts": seen.attempts, "waits": seen.waits, "result": result}))
}

/// Compares an `execute` step's expectation: `attempts` and `waits` are exact lists (each item
/// asserting the keys it lists), `result` asserts the keys it lists.
fn check_execute(expect: Option<&Value>, got: &Value) -> R<()> {
    let Some(expect) = expect.and_then(Value::as_object) else {
        return Ok(());
    };
    for (k, v) in expect {
        match k.as_str() {
            "attempts" | "waits" => {
                let want = v.as_array().ok_or("attempts and waits are arrays")?;
                let have = got[k].as_array().expect("array");
                if want.len() != have.len() {
                    return Err(format!(
                        "{k}: expected {}, got {}: {}",
                        want.len(),
                        have.len(),
                        got[k]
                    ));
                }
                let keys: &[&str] = if k == "attempts" {
                    &["at", "probe", "outcome"]
                } else {
                    &["delay_ms", "source", "capped", "server_delay_ms"]
                };
                for (i, (w, h)) in want.iter().zip(have).enumerate() {
                    check(Some(w), h.as_object().expect("object"), keys)
                        .map_err(|e| format!("{k}[{i}]: {e}"))?;
                }
            }
            "result" => check(
                Some(v),
                got["result"].as_object().expect("object"),
                &[
                    "returns",
                    "raises",
                    "reason",
                    "attempts",
                    "attempt",
                    "retry_after_ms",
                    "server_delay_ms",
                    "capped",
                    "cause",
                ],
            )
            .map_err(|e| format!("result: {e}"))?,
            other => return Err(format!("unknown expect key {other:?}")),
        }
    }
    Ok(())
}

/// The `[reqwest]` flavour's server and client, one per case.
struct Rig {
    script: rig::Script,
    url: String,
    client: reqwest::Client,
}

async fn run_case(case: &Value, flavour: Flavour) -> R<()> {
    let mut ctx = match (steps::build(case), case.get("expect_error")) {
        (Ok(ctx), None) => ctx,
        (_, Some(_)) => return Err("an expect_error case has no execute step".into()),
        (Err(e), None) => return Err(format!("configuration refused: {e}")),
    };
    let rig = if flavour == Flavour::Reqwest {
        let script: rig::Script = Arc::default();
        let url = rig::serve(Arc::clone(&script)).await.map_err(|e| e.to_string())?;
        // A fresh connection per attempt: an attempt's transport error stays its own.
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .map_err(|e| e.to_string())?;
        Some(Rig { script, url, client })
    } else {
        None
    };
    let steps = case["steps"].as_array().ok_or("case without steps")?;
    for (i, step) in steps.iter().enumerate() {
        let repeat = step.get("repeat").and_then(Value::as_u64).unwrap_or(1);
        let every = step.get("every_ms").and_then(Value::as_u64).unwrap_or(0);
        for r in 0..repeat {
            if let Some(at) = step.get("at").and_then(Value::as_u64) {
                let t = at + r * every;
                ctx.set_clock(t)
                    .await
                    .map_err(|e| format!("step {i}: clock cannot move to {t}: {e}"))?;
            }
            let op = step.get("op").and_then(Value::as_str).unwrap_or("?");
            let done = if op == "execute" {
                let got = execute_step(&ctx, step, flavour, rig.as_ref()).await;
                got.and_then(|got| check_execute(step.get("expect"), &got))
            } else {
                ctx.step(step).await
            };
            done.map_err(|e| format!("step {i} {op} at {}: {e}", ctx.now_ms()))?;
        }
    }
    Ok(())
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
        let _ = tx.send(rt.block_on(run_case(&case, flavour)));
    });
    match rx.recv_timeout(WATCHDOG) {
        Ok(r) => r,
        Err(mpsc::RecvTimeoutError::Timeout) => Err(format!("no result after {WATCHDOG:?} of wall time")),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err("the runner panicked (see above)".into()),
    }
}

fn case_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("cases dir")
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            case_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "json") {
            out.push(p);
        }
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
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../conformance");
    let version: u64 = std::fs::read_to_string(root.join("VERSION"))
        .expect("VERSION")
        .trim()
        .parse()
        .expect("VERSION");
    assert_eq!(
        version, SUITE_VERSION,
        "runner written for suite version {SUITE_VERSION}"
    );
    let filter = std::env::var("HOLDOFF_CASES").unwrap_or_default();
    let mut files = Vec::new();
    case_files(&root.join("cases"), &mut files);
    let (mut passed, mut failed) = (0, 0);
    let mut ids = std::collections::HashSet::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read case file");
        let doc: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for case in doc["cases"].as_array().expect("cases array") {
            let id = case["id"].as_str().expect("case id").to_owned();
            assert!(ids.insert(id.clone()), "duplicate case id {id}");
            let executes = case["steps"]
                .as_array()
                .is_some_and(|s| s.iter().any(|s| s["op"] == "execute"));
            if !executes || !id.contains(&filter) {
                continue;
            }
            let flavours = match flavours(case) {
                Ok(f) => f,
                Err(e) => {
                    failed += 1;
                    println!("FAIL {id}: {e}");
                    continue;
                }
            };
            for flavour in flavours {
                let label = format!("{id} [{}]", flavour.name());
                // Not applicable is neither passed nor skipped (the runner contract): another
                // flavour runs the case.
                if let Some(why) = inapplicable(case, flavour) {
                    println!("n/a  {label}: {why}");
                    continue;
                }
                match run_flavour(case, flavour) {
                    Ok(()) => {
                        passed += 1;
                        println!("ok   {label}");
                    }
                    Err(e) => {
                        failed += 1;
                        println!("FAIL {label}: {e}");
                    }
                }
            }
        }
    }
    println!("{passed} passed, {failed} failed, 0 skipped");
    if failed > 0 || passed == 0 {
        std::process::exit(1);
    }
}
