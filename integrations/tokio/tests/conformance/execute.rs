//! One `execute` step through the crate's helpers in one flavour: the operation follows the
//! script, the hooks note what a user sees, and the caller's cancellation drops the call.

use std::any::Any;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;

use holdoff::interop::{Coded, OutcomeKind};
use holdoff::{Outcome, Policy};
use holdoff_conformance::{ms, opt_ms, Ctx, R};
use holdoff_tokio::reqwest::{middleware_error, transport_outcome, HoldoffMiddleware};
use holdoff_tokio::{execute_http, execute_with, Error, Last, Options};
use serde_json::{json, Value};
use tokio::sync::Notify;

use crate::flavour::{self, Flavour};
use crate::paused::Paused;
use crate::rig::{self, Rig};
use crate::script::{self, Act, Bug, Item, Raised, Resp, Val};

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
    ctx: &Ctx<Paused>,
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
                .push(json!({"at": at, "probe": a.probe, "outcome": OutcomeKind::of(&a.outcome).name()}));
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
pub async fn execute_step(ctx: &Ctx<Paused>, step: &Value, flavour: Flavour, rig: Option<&Rig>) -> R<Value> {
    let flavour = if flavour::has(step, "returns") {
        Flavour::Async
    } else {
        flavour
    };
    let policy: Arc<Policy> = Arc::clone(ctx.policy()?);
    let items = Arc::new(script::parse(&step["script"])?);
    let cancel_in_wait = step.get("cancel_in_wait").and_then(Value::as_u64);
    let seen: Shared = Arc::default();
    let starts: Starts = Arc::default();
    let cancel = Arc::new(Notify::new());
    let counter = Arc::new(AtomicU32::new(0));
    let opts = options(ctx, &seen, &starts, &cancel, cancel_in_wait)?;
    let ended = match flavour {
        Flavour::Async => {
            let op = operation(&items, &counter, &starts, ctx.clock(), |n, act| match *act {
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
            let op = operation(&items, &counter, &starts, ctx.clock(), |n, act| match act {
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
                clock: Arc::clone(ctx.clock()),
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
