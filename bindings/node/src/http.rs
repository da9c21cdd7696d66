//! HTTP: Retry-After parsing (RFC 9110 §10.2.3) and the classifier (`holdoff::Classifier`) that
//! turns a status and headers into an outcome.

use holdoff::interop::{Coded, OutcomeKind};
use holdoff::{hint_from_headers, parse_retry_after, Classifier, InputError, Outcome, RetryAfter};
use napi::bindgen_prelude::*;
use napi::ValueType;
use napi_derive::napi;

use crate::convert::{ms, wall};
use crate::{err, opts};

/// Flat `[name, value, ...]` headers as the core's name-value pairs.
pub(crate) fn headers_of(flat: &[String]) -> impl Iterator<Item = (&str, &str)> {
    flat.chunks_exact(2).map(|p| (p[0].as_str(), p[1].as_str()))
}

fn hint_set(o: &mut Object<'_>, r: RetryAfter) -> Result<()> {
    match r {
        RetryAfter::Delay(d) => o.set("delayMs", ms(d)),
        RetryAfter::Unusable(u) => o.set("unusable", u.name()),
    }
}

/// Parses one Retry-After field value (RFC 9110 §10.2.3) against the wall time `nowUnixMs`:
/// `{ delayMs }` or `{ unusable }`. Never throws for a bad value.
#[napi(catch_unwind)]
pub fn parse_retry_after_value<'e>(env: &'e Env, value: String, now_unix_ms: f64) -> Result<Object<'e>> {
    let now = wall(env, now_unix_ms)?;
    let mut o = Object::new(env)?;
    hint_set(&mut o, parse_retry_after(&value, now))?;
    Ok(o)
}

/// The retry hint of a response's headers (flat `[name, value, ...]`) by the core's precedence:
/// `{ delayMs }` or `{ unusable }`, and `source`, the core's name of the header it came from.
#[napi(catch_unwind)]
pub fn hint_from_flat_headers<'e>(
    env: &'e Env,
    headers: Vec<String>,
    now_unix_ms: f64,
) -> Result<Object<'e>> {
    let now = wall(env, now_unix_ms)?;
    let (r, src) = hint_from_headers(headers_of(&headers), now);
    let mut o = Object::new(env)?;
    hint_set(&mut o, r)?;
    o.set("source", src.name())?;
    Ok(o)
}

/// An HTTP classifier.
pub struct ClassifierBox {
    pub(crate) classifier: Classifier,
}

/// A classifier from options.
#[napi(catch_unwind)]
pub fn classifier_new(env: &Env, options: Unknown<'_>) -> Result<External<ClassifierBox>> {
    let cfg = opts::classifier(env, Some(options))?
        .to_config()
        .map_err(|e| err::config(env, &e))?;
    let classifier = Classifier::new(cfg).map_err(|e| err::config(env, &e))?;
    Ok(External::new(ClassifierBox { classifier }))
}

/// A status argument as the core checks it (`holdoff::check_status`): any whole number reaches
/// the core, which takes 0..=999 (a status outside 100..=599 is a broken upstream, a failure) and
/// refuses the rest with `invalid_input` naming `status`. A number that is not whole is refused
/// so too; a value that is not a number is a `TypeError`.
/// A JS number as the core's status integer: the core takes any integer and refuses what is
/// not a status; a number that is not whole is no status either, and `i64::MIN` is one the core
/// refuses the same way (a whole number beyond `i64` saturates, refused too).
pub(crate) fn status_int(f: f64) -> i64 {
    if f.is_finite() && f.fract() == 0.0 {
        f as i64
    } else {
        i64::MIN
    }
}

fn status_arg(env: &Env, v: &Unknown<'_>) -> Result<std::result::Result<u16, InputError>> {
    if v.get_type()? != ValueType::Number {
        return Err(err::input_type(
            env,
            "status",
            "an HTTP status number",
            &opts::describe(env, v),
        ));
    }
    let f = unsafe { v.cast::<f64>()? };
    Ok(if f.is_finite() && f.fract() == 0.0 {
        // A whole number beyond i64 saturates: still not a status, refused by the core.
        holdoff::check_status(f as i64)
    } else {
        Err(InputError {
            field: "status".into(),
            rule: format!("must be a whole number, got {f}"),
        })
    })
}

/// Sets `outcome` (the core's name) and `retryLaterMs` (or `null`) on `o`.
pub(crate) fn outcome_set(o: &mut Object<'_>, out: &Outcome) -> Result<()> {
    o.set("outcome", OutcomeKind::of(out).name())?;
    match out {
        Outcome::RetryLater(d) => o.set("retryLaterMs", ms(*d)),
        _ => o.set("retryLaterMs", Null),
    }
}

/// Classifies a response: `{ outcome, retryLaterMs, hint, source, shouldRetry }`; `RangeError`
/// `invalid_input` for a value that is not a status (outside 0..=999).
#[napi(catch_unwind)]
pub fn classifier_classify<'e>(
    env: &'e Env,
    h: &External<ClassifierBox>,
    status: Unknown<'_>,
    headers: Vec<String>,
    now_unix_ms: f64,
) -> Result<Object<'e>> {
    let s = status_arg(env, &status)?.map_err(|e| err::input(env, &e))?;
    let now = wall(env, now_unix_ms)?;
    let c = h
        .classifier
        .classify(s, headers_of(&headers), now)
        .map_err(|e| err::input(env, &e))?;
    let mut o = Object::new(env)?;
    outcome_set(&mut o, &c.outcome)?;
    let mut hint = Object::new(env)?;
    hint_set(&mut hint, c.hint)?;
    o.set("hint", hint)?;
    o.set("source", c.source.name())?;
    match c.should_retry {
        Some(v) => o.set("shouldRetry", v)?,
        None => o.set("shouldRetry", Null)?,
    }
    Ok(o)
}
