//! Retry-After parsing (RFC 9110 §10.2.3), rate-limit hints and the HTTP classifier.

use std::borrow::Cow;
use std::ffi::c_char;

use hcore::{check_status, hint_from_headers, parse_retry_after, Classification, Classifier, RetryAfter};

use crate::clock::unix;
use crate::config::{build, holdoff_config};
use crate::handle::{handle, non_null, write, Handle};
use crate::status::{boundary, holdoff_status, Fail};
use crate::types::{holdoff_hint_source, holdoff_unusable, ns, outcome_to_c};

/// Turns an HTTP response (status, headers) into a `holdoff_outcome`. Immutable and
/// thread-safe. Free with `holdoff_classifier_free`.
pub struct holdoff_classifier {
    _private: [u8; 0],
}

handle!(holdoff_classifier => Classifier, Classifier, "classifier");

/// One HTTP header field. Names compare case-insensitively. Text need not be NUL-terminated;
/// bytes that are not UTF-8 are replaced (such a value is then malformed, as it should be).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct holdoff_header {
    /// The field name, `name_len` bytes.
    pub name: *const c_char,
    /// Length of `name` in bytes.
    pub name_len: usize,
    /// The field value, `value_len` bytes.
    pub value: *const c_char,
    /// Length of `value` in bytes.
    pub value_len: usize,
}

/// A parsed delay hint.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct holdoff_retry_after {
    /// The delay, ns (when `unusable` is `HOLDOFF_UNUSABLE_NONE`); may be 0 ("now").
    pub delay_ns: u64,
    /// `HOLDOFF_UNUSABLE_NONE` if usable, else why not (a `holdoff_unusable`).
    pub unusable: u32,
    /// The `holdoff_hint_source` it came from (`holdoff_hint_from_headers` only; `RETRY_AFTER`
    /// for `holdoff_parse_retry_after`).
    pub source: u32,
}

/// A classified response (`holdoff_classifier_classify`, `holdoff_policy_after_response`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct holdoff_classification {
    /// For `HOLDOFF_OUTCOME_RETRY_LATER`: the delay, ns.
    pub retry_later_ns: u64,
    /// The delay hint as parsed from the headers (even when the status does not use it).
    pub hint: holdoff_retry_after,
    /// The `holdoff_outcome` the breaker and budget are told.
    pub outcome: u32,
    /// The provider's `x-should-retry` (1 for `true`, 0 for `false`), when `has_should_retry`.
    /// `false` makes any status from 400 up an answer and `true` makes an answer a failure; it
    /// never changes a success, a broken status or a status the options list (`outcome` already
    /// says the result).
    pub should_retry: u8,
    /// 1 if the response carried `x-should-retry: true` or `false`.
    pub has_should_retry: u8,
}

/// Borrows `len` bytes at `ptr` (NULL allowed when `len` is 0).
///
/// # Safety
/// `ptr` must be valid for reading `len` bytes that stay unchanged during the borrow.
pub(crate) unsafe fn bytes<'a>(ptr: *const c_char, len: usize, param: &str) -> Result<&'a [u8], Fail> {
    if len == 0 {
        return Ok(&[]);
    }
    non_null(ptr, param)?;
    // SAFETY: non-NULL and valid for `len` bytes by the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) })
}

/// Reads a C header array into owned (name, value) pairs.
///
/// # Safety
/// `headers` must be valid for reading `n` headers, each valid as documented on
/// `holdoff_header`.
pub(crate) unsafe fn headers(
    headers: *const holdoff_header,
    n: usize,
) -> Result<Vec<(String, String)>, Fail> {
    if n == 0 {
        return Ok(Vec::new());
    }
    non_null(headers, "headers")?;
    // SAFETY: non-NULL and valid for `n` elements by the caller's contract.
    let list = unsafe { std::slice::from_raw_parts(headers, n) };
    list.iter()
        .map(|h| {
            // SAFETY: each header's pointers are valid for their lengths by the contract.
            let name = unsafe { bytes(h.name, h.name_len, "headers.name")? };
            // SAFETY: as above.
            let value = unsafe { bytes(h.value, h.value_len, "headers.value")? };
            Ok((lossy(name).into_owned(), lossy(value).into_owned()))
        })
        .collect()
}

fn lossy(b: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(b)
}

pub(crate) fn retry_after_to_c(r: RetryAfter, source: holdoff_hint_source) -> holdoff_retry_after {
    match r {
        RetryAfter::Delay(d) => holdoff_retry_after {
            delay_ns: ns(d),
            unusable: holdoff_unusable::None as u32,
            source: source as u32,
        },
        RetryAfter::Unusable(u) => holdoff_retry_after {
            delay_ns: 0,
            unusable: holdoff_unusable::from(u) as u32,
            source: source as u32,
        },
    }
}

pub(crate) fn classification_to_c(c: &Classification) -> holdoff_classification {
    let (outcome, retry_later_ns) = outcome_to_c(c.outcome);
    holdoff_classification {
        retry_later_ns,
        hint: retry_after_to_c(c.hint, c.source.into()),
        outcome: outcome as u32,
        should_retry: u8::from(c.should_retry == Some(true)),
        has_should_retry: u8::from(c.should_retry.is_some()),
    }
}

/// Parses one Retry-After field value (RFC 9110 §10.2.3): delay-seconds (decimals rounded up
/// to the millisecond), or an HTTP-date compared with `wall_now_unix_ns` (ns since the Unix
/// epoch: the wall time of your decision's clock reading; a past date is a zero delay).
/// Never fails on the text: garbage is `unusable`. `value` need not be NUL-terminated.
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER` (`value` may be NULL only if `value_len` is 0).
///
/// # Safety
/// `value` must be valid for reading `value_len` bytes; `out` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn holdoff_parse_retry_after(
    value: *const c_char,
    value_len: usize,
    wall_now_unix_ns: u64,
    out: *mut holdoff_retry_after,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let v = unsafe { bytes(value, value_len, "value")? };
        non_null(out, "out")?;
        let r = parse_retry_after(&lossy(v), unix(wall_now_unix_ns));
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out, retry_after_to_c(r, holdoff_hint_source::RetryAfter)) };
        Ok(holdoff_status::Ok)
    })
}

/// Reads the delay hint from response headers: the first present of, in this order,
/// `retry-after-ms` and `x-ms-retry-after-ms` (milliseconds, decimals rounded up), `Retry-After`
/// (every field: agreeing values give their value, disagreeing ones are `CONFLICTING`),
/// `RateLimit` (the structured field's `t`, seconds), `RateLimit-Reset` (delta seconds) and
/// `X-RateLimit-Reset` (epoch seconds). A present field is the hint even when unusable;
/// `source` says which one it was (`HOLDOFF_HINT_SOURCE_NONE` without any). Every delay
/// saturates at 2^32-1 seconds. `wall_now_unix_ns` as for `holdoff_parse_retry_after`.
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER` (`headers` may be NULL only if `n_headers` is 0).
///
/// # Safety
/// `headers` must be valid for reading `n_headers` headers; `out` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn holdoff_hint_from_headers(
    headers: *const holdoff_header,
    n_headers: usize,
    wall_now_unix_ns: u64,
    out: *mut holdoff_retry_after,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let hs = unsafe { self::headers(headers, n_headers)? };
        non_null(out, "out")?;
        let (r, src) = hint_from_headers(
            hs.iter().map(|(n, v)| (n.as_str(), v.as_str())),
            unix(wall_now_unix_ns),
        );
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out, retry_after_to_c(r, src.into())) };
        Ok(holdoff_status::Ok)
    })
}

/// Creates a classifier from `config`'s `classifier` part (the default classifier if it has
/// none, or if `config` is NULL). Default mapping: 1xx-3xx success; 429/503 with a usable
/// non-zero hint retry-later; 408, 410, 429, 460 and 5xx except 501, 505, 511 failure; every
/// other status an answer; a status outside 100..=599 (a 0, a 600, a 999) a failure, whatever
/// else the response says. The configuration's status lists win over the default, failures
/// first; then `x-should-retry: false` makes any status from 400 up an answer and
/// `x-should-retry: true` makes an answer a failure.
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER` (`out`).
///
/// # Safety
/// `config` must be NULL or a live configuration handle; `out` NULL or valid for writing a
/// pointer. On success the caller owns `*out` and frees it once with `holdoff_classifier_free`.
#[no_mangle]
pub unsafe extern "C" fn holdoff_classifier_new(
    config: *const holdoff_config,
    out: *mut *mut holdoff_classifier,
) -> holdoff_status {
    // SAFETY: forwarded contract.
    unsafe { build(config, out, |c| Ok(Classifier::new(c.classifier())?)) }
}

/// Releases a classifier handle. NULL does nothing. A policy using it keeps its own copy.
///
/// # Safety
/// `classifier` must be NULL or a live classifier handle, not used again afterwards and not in
/// use by another thread.
#[no_mangle]
pub unsafe extern "C" fn holdoff_classifier_free(classifier: *mut holdoff_classifier) -> holdoff_status {
    // SAFETY: forwarded contract.
    unsafe { holdoff_classifier::free(classifier) }
}

/// Classifies a response: `status` and `n_headers` headers, with HTTP-dates compared with
/// `wall_now_unix_ns` (ns since the Unix epoch). `status` is whatever integer the HTTP client
/// gave: 0..=999 is a status (one outside 100..=599 is a broken upstream, a failure); any other
/// value is refused by the core's check.
///
/// Errors: `HOLDOFF_STATUS_INVALID_INPUT` for a value outside 0..=999 (negative, 1000, 70000;
/// field `status`); `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `classifier` must be NULL or a live classifier handle; `headers` valid for reading
/// `n_headers` headers; `out` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn holdoff_classifier_classify(
    classifier: *const holdoff_classifier,
    status: i64,
    headers: *const holdoff_header,
    n_headers: usize,
    wall_now_unix_ns: u64,
    out: *mut holdoff_classification,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { holdoff_classifier::borrow(classifier)? };
        // SAFETY: forwarded contract.
        let hs = unsafe { self::headers(headers, n_headers)? };
        non_null(out, "out")?;
        let status = check_status(status)?;
        let cls = c.classify(
            status,
            hs.iter().map(|(n, v)| (n.as_str(), v.as_str())),
            unix(wall_now_unix_ns),
        )?;
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out, classification_to_c(&cls)) };
        Ok(holdoff_status::Ok)
    })
}

// The x-should-retry bytes went into what was tail padding: the struct kept its size.
const _: () = assert!(std::mem::size_of::<holdoff_classification>() == 32);
