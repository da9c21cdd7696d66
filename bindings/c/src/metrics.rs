//! The metric model (`docs/metrics.md`): the core's table, described through
//! `holdoff_metric_describe` and `holdoff_metric_attribute_value`, and each object's readings
//! copied into an opaque `holdoff_metric_list`.
//!
//! The table is read from `hcore::metrics::METRICS`, never restated: a metric's code is its
//! index there. Counting starts at an object's first read, so an exporter reads each object
//! once when it attaches.

use std::ffi::{c_char, CString};
use std::sync::{Arc, OnceLock};

use hcore::metrics::{Kind, Sample, METRICS};

use crate::breaker::{holdoff_breaker, holdoff_breaker_group};
use crate::handle::{handle, non_null, write, Handle};
use crate::policy::holdoff_policy;
use crate::quota::holdoff_retry_quota;
use crate::status::{boundary, holdoff_status, Fail};

/// Whether a metric is a cumulative count or a value read as it is
/// (`holdoff_metric_info.kind`).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum holdoff_metric_kind {
    /// Monotonic, cumulative since counting started (an OpenTelemetry observable counter).
    Counter = 0,
    /// The current value (an OpenTelemetry observable gauge).
    Gauge = 1,
}

/// `holdoff_metric_sample.attribute` of a metric that has no attribute of its own.
pub const HOLDOFF_METRIC_NO_ATTRIBUTE: u32 = u32::MAX;

/// One row of the metric table (`holdoff_metric_describe`). Every string is static: do not
/// free it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct holdoff_metric_info {
    /// OpenTelemetry name, `holdoff.<object>.<what>` (e.g. `holdoff.breaker.refused`).
    pub name: *const c_char,
    /// UCUM unit: `s` (seconds), `1`, or an annotation such as `{call}`.
    pub unit: *const c_char,
    /// What it counts, one sentence.
    pub description: *const c_char,
    /// The metric's own attribute key (`state`, `outcome`, `reason`, `source`); NULL when it
    /// has none.
    pub attribute: *const c_char,
    /// A `holdoff_metric_kind`.
    pub kind: u32,
    /// Number of the attribute's values (`holdoff_metric_attribute_value` indexes them); 0
    /// when the metric has no attribute.
    pub value_count: u32,
}

/// One reading of a `holdoff_metric_list` (`holdoff_metric_list_get`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct holdoff_metric_sample {
    /// The metric's code: its index in the table (`holdoff_metric_describe`).
    pub metric: u32,
    /// Index of the attribute's value (`holdoff_metric_attribute_value(metric, attribute)`);
    /// `HOLDOFF_METRIC_NO_ATTRIBUTE` when the metric has none.
    pub attribute: u32,
    /// The value in the metric's unit: a count, seconds for durations, 0 or 1 for a state.
    pub value: f64,
    /// NULL, or (in a group's list) the key of the breaker this reading belongs to, the
    /// `upstream` attribute; NUL-terminated UTF-8, valid until the list is freed.
    pub upstream: *const c_char,
}

/// An object's readings, copied at one moment (`holdoff_breaker_metrics` and the others).
/// Immutable and thread-safe. Free with `holdoff_metric_list_free`.
pub struct holdoff_metric_list {
    _private: [u8; 0],
}

/// The samples and, for a group, the keys they belong to (each followed by a NUL).
pub(crate) struct MetricList {
    samples: Vec<(Sample, Option<usize>)>,
    keys: Vec<Box<[u8]>>,
}

handle!(holdoff_metric_list => MetricList, MetricList, "list");

/// The table's strings, NUL-terminated, made once (the core's are Rust strings).
struct Row {
    name: CString,
    unit: CString,
    description: CString,
    attribute: Option<CString>,
    values: Vec<CString>,
}

fn table() -> &'static [Row] {
    static ROWS: OnceLock<Vec<Row>> = OnceLock::new();
    // The table's texts hold no NUL, so nothing is lost to `unwrap_or_default`.
    let c = |s: &str| CString::new(s).unwrap_or_default();
    ROWS.get_or_init(|| {
        METRICS
            .iter()
            .map(|d| Row {
                name: c(d.name),
                unit: c(d.unit),
                description: c(d.description),
                attribute: d.attribute.map(c),
                values: d.values.iter().map(|v| c(v)).collect(),
            })
            .collect()
    })
}

/// The number of metrics in the table; codes run from 0 to this minus 1.
#[no_mangle]
pub extern "C" fn holdoff_metric_count() -> u32 {
    METRICS.len() as u32
}

/// Describes metric `metric` (its code, 0 to `holdoff_metric_count() - 1`) in `*out`.
///
/// Errors: `HOLDOFF_STATUS_INVALID_INPUT` for a code out of range (field `metric`);
/// `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `out` must be NULL or valid for writing a `holdoff_metric_info`.
#[no_mangle]
pub unsafe extern "C" fn holdoff_metric_describe(
    metric: u32,
    out: *mut holdoff_metric_info,
) -> holdoff_status {
    boundary(|| {
        non_null(out, "out")?;
        let i = metric as usize;
        let (d, row) = METRICS.get(i).zip(table().get(i)).ok_or_else(|| {
            Fail::input(
                "metric",
                format!("{metric} is not a metric code (there are {})", METRICS.len()),
            )
        })?;
        let info = holdoff_metric_info {
            name: row.name.as_ptr(),
            unit: row.unit.as_ptr(),
            description: row.description.as_ptr(),
            attribute: row.attribute.as_ref().map_or(std::ptr::null(), |a| a.as_ptr()),
            kind: match d.kind {
                Kind::Counter => holdoff_metric_kind::Counter,
                Kind::Gauge => holdoff_metric_kind::Gauge,
            } as u32,
            value_count: row.values.len() as u32,
        };
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out, info) };
        Ok(holdoff_status::Ok)
    })
}

/// Value `index` of metric `metric`'s attribute (e.g. metric 3, `holdoff.breaker.outcomes`,
/// index 2: `failure`). Static string; NULL when the metric or the index is out of range.
#[no_mangle]
pub extern "C" fn holdoff_metric_attribute_value(metric: u32, index: u32) -> *const c_char {
    table()
        .get(metric as usize)
        .and_then(|r| r.values.get(index as usize))
        .map_or(std::ptr::null(), |v| v.as_ptr())
}

/// Borrows the object behind `handle`, reads it with `read` into a new list and writes the list
/// to `*out`: the body of every `holdoff_<object>_metrics`.
///
/// # Safety
/// `handle` must be NULL or a live handle of type `H`; `out` NULL or valid for writing a pointer.
unsafe fn read_into<H: Handle>(
    handle: *const H,
    out: *mut *mut holdoff_metric_list,
    read: impl FnOnce(&H::Target) -> MetricList,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let target = unsafe { H::borrow(handle)? };
        non_null(out, "out")?;
        let list = read(target);
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out, holdoff_metric_list::into_ptr(Arc::new(list))) };
        Ok(holdoff_status::Ok)
    })
}

/// A list of one object's samples, none with an upstream.
fn plain(fill: impl FnOnce(&mut Vec<Sample>)) -> MetricList {
    let mut v = Vec::with_capacity(32);
    fill(&mut v);
    MetricList {
        samples: v.into_iter().map(|s| (s, None)).collect(),
        keys: Vec::new(),
    }
}

/// Reads a breaker's series into a new list written to `*out`: its state (a gauge, one
/// reading per state, 1 for the current one), calls admitted and refused, outcomes by kind,
/// stale answers, probes, transitions by reason, zeros included. The first read starts
/// counting. Free the list with `holdoff_metric_list_free`.
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `breaker` must be NULL or a live breaker handle; `out` NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn holdoff_breaker_metrics(
    breaker: *const holdoff_breaker,
    out: *mut *mut holdoff_metric_list,
) -> holdoff_status {
    // SAFETY: forwarded contract.
    unsafe { read_into(breaker, out, |o| plain(|v| o.metrics(v))) }
}

/// Reads a policy's retry series into a new list written to `*out`: attempts, retries, waits
/// and their total duration (seconds) by source, capped waits, give-ups by reason, zeros
/// included. Its breaker's and quota's series are read from them. The first read starts
/// counting. Free the list with `holdoff_metric_list_free`.
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `policy` must be NULL or a live policy handle; `out` NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn holdoff_policy_metrics(
    policy: *const holdoff_policy,
    out: *mut *mut holdoff_metric_list,
) -> holdoff_status {
    // SAFETY: forwarded contract.
    unsafe { read_into(policy, out, |o| plain(|v| o.metrics(v))) }
}

/// Reads a retry quota's series into a new list written to `*out`: tokens left (a gauge) and
/// retries refused for want of tokens. The first read starts counting refusals. Free the list
/// with `holdoff_metric_list_free`.
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `quota` must be NULL or a live quota handle; `out` NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn holdoff_retry_quota_metrics(
    quota: *const holdoff_retry_quota,
    out: *mut *mut holdoff_metric_list,
) -> holdoff_status {
    // SAFETY: forwarded contract.
    unsafe { read_into(quota, out, |o| plain(|v| o.metrics(v))) }
}

/// Reads a group's series into a new list written to `*out`: breakers kept (a gauge) and
/// evictions, with no upstream, then every kept breaker's series (as `holdoff_breaker_metrics`)
/// with `upstream` = its key, keys sorted by their bytes. The first read starts counting on
/// every breaker the group keeps or makes from then on. Free the list with
/// `holdoff_metric_list_free`.
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `group` must be NULL or a live group handle; `out` NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn holdoff_breaker_group_metrics(
    group: *const holdoff_breaker_group,
    out: *mut *mut holdoff_metric_list,
) -> holdoff_status {
    // SAFETY: forwarded contract.
    unsafe {
        read_into(group, out, |g| {
            let m = g.metrics();
            let mut samples: Vec<_> = m.group.into_iter().map(|s| (s, None)).collect();
            let mut keys = Vec::with_capacity(m.breakers.len());
            for (i, (key, series)) in m.breakers.into_iter().enumerate() {
                let mut bytes = key.into_bytes();
                bytes.push(0);
                keys.push(bytes.into_boxed_slice());
                samples.extend(series.into_iter().map(|s| (s, Some(i))));
            }
            MetricList { samples, keys }
        })
    }
}

/// The number of readings in the list; 0 for NULL (or, in debug builds, a freed handle).
///
/// # Safety
/// `list` must be NULL or a live metric-list handle.
#[no_mangle]
pub unsafe extern "C" fn holdoff_metric_list_len(list: *const holdoff_metric_list) -> usize {
    // SAFETY: forwarded contract.
    unsafe { holdoff_metric_list::borrow(list) }.map_or(0, |l| l.samples.len())
}

/// Copies reading `index` (0-based) of the list into `*out`. Its `upstream` pointer, if not
/// NULL, stays valid until the list is freed.
///
/// Errors: `HOLDOFF_STATUS_INVALID_INPUT` for an index at or past the length (field `index`);
/// `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `list` must be NULL or a live metric-list handle; `out` NULL or valid for writing a
/// `holdoff_metric_sample`.
#[no_mangle]
pub unsafe extern "C" fn holdoff_metric_list_get(
    list: *const holdoff_metric_list,
    index: usize,
    out: *mut holdoff_metric_sample,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let l = unsafe { holdoff_metric_list::borrow(list)? };
        non_null(out, "out")?;
        let (s, key) = l.samples.get(index).ok_or_else(|| {
            Fail::input(
                "index",
                format!(
                    "{index} is past the last reading (the list has {})",
                    l.samples.len()
                ),
            )
        })?;
        let sample = holdoff_metric_sample {
            metric: s.metric as u32,
            attribute: s.attribute.map_or(HOLDOFF_METRIC_NO_ATTRIBUTE, u32::from),
            value: s.value,
            // The key's bytes live in the list, which the caller keeps until it frees it.
            upstream: key
                .and_then(|k| l.keys.get(k))
                .map_or(std::ptr::null(), |k| k.as_ptr().cast()),
        };
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out, sample) };
        Ok(holdoff_status::Ok)
    })
}

/// Releases a metric list. NULL does nothing; the `upstream` pointers its readings gave become
/// invalid.
///
/// # Safety
/// `list` must be NULL or a live metric-list handle, not used again afterwards and not in use
/// by another thread.
#[no_mangle]
pub unsafe extern "C" fn holdoff_metric_list_free(list: *mut holdoff_metric_list) -> holdoff_status {
    // SAFETY: forwarded contract.
    unsafe { holdoff_metric_list::free(list) }
}
