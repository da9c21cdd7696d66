//! The trace importer of `holdoff simulate` (`holdoff_cli::trace::TraceReader`): CSV, JSON Lines
//! and the nginx/Apache common and combined access-log formats.
//!
//! Input: byte 0 picks the mode (bits 0-1: csv, jsonl, common, combined; bit 3: a fixed trace
//! origin; bits 4-7: the default latency in ms; so the ASCII digits `0`-`3` and `8`-`;` are
//! readable modes), an optional newline, then the trace file's bytes. Every trace is read twice,
//! strictly and skipping malformed lines.
//!
//! Checks: no panic; the reader ends (every call consumes at least one line); records are in
//! time order with statuses in 100..=599; reading past the end stays at the end; with
//! skip-malformed the only error is "no records"; the strict reader returns a prefix of the
//! lenient reader's records (and all of them when it does not fail); every error message is one
//! line; every recorded Retry-After value parses without panic.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use holdoff_cli::scenario::{parse_rfc3339, MatchMode, Trace, TraceFormat};
use holdoff_cli::trace::{Record, TraceReader};
use libfuzzer_sys::fuzz_target;

fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("holdoff-fuzz-trace-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    })
}

/// Reads the whole trace: the records, and the error that stopped it, if any.
fn read_all(trace: &Trace, skip: bool, max_calls: usize) -> (Vec<Record>, Option<String>) {
    let mut reader = match TraceReader::open(trace, skip, false) {
        Ok(r) => r,
        Err(e) => return (Vec::new(), Some(rendered(e))),
    };
    let mut out = Vec::new();
    for _ in 0..max_calls {
        match reader.next_record() {
            Ok(Some(r)) => {
                if let Some(prev) = out.last() {
                    let prev: &Record = prev;
                    assert!(
                        r.t >= prev.t,
                        "records out of time order: {} after {}",
                        r.t,
                        prev.t
                    );
                }
                assert!(
                    (100..=599).contains(&r.answer.status),
                    "status {}",
                    r.answer.status
                );
                if let Some(v) = &r.answer.retry_after {
                    let _ = holdoff::parse_retry_after(v, std::time::UNIX_EPOCH);
                }
                out.push(r);
            }
            Ok(None) => {
                assert!(
                    matches!(reader.next_record(), Ok(None)),
                    "reading past the end moved"
                );
                reader.finish();
                return (out, None);
            }
            Err(e) => return (out, Some(rendered(e))),
        }
    }
    panic!("the reader did not end after {max_calls} calls");
}

/// Renders an error, which must be one line: the field too, though it can carry a CSV column
/// name as written (fuzz/regressions/trace_import/csv_column_name_with_newline).
fn rendered(e: holdoff_cli::CliError) -> String {
    let text = e.to_string();
    assert!(!text.contains(['\n', '\r']), "error on several lines: {e:?}");
    text
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let body = rest.strip_prefix(b"\n").unwrap_or(rest);
    let format = [
        TraceFormat::Csv,
        TraceFormat::Jsonl,
        TraceFormat::Common,
        TraceFormat::Combined,
    ][usize::from(mode & 3)];
    let path = dir().join("trace");
    std::fs::write(&path, body).unwrap();
    let trace = Trace {
        path,
        format,
        mode: MatchMode::Hold,
        origin: if mode & 8 != 0 {
            parse_rfc3339("2019-06-03T11:00:00Z")
        } else {
            None
        },
        latency: u64::from(mode >> 4) * 1_000_000,
    };
    // Each call consumes at least one line (a CSV record may span several).
    let lines = body.iter().filter(|b| **b == b'\n' || **b == b'\r').count() + 3;

    let (lenient, lenient_err) = read_all(&trace, true, lines);
    let (strict, strict_err) = read_all(&trace, false, lines);
    // Skipping malformed lines, only a trace with no record at all fails; a line that is not
    // UTF-8 is one of them (fuzz/regressions/trace_import/jsonl_invalid_utf8_not_skippable).
    if let Some(e) = &lenient_err {
        assert!(lenient.is_empty(), "skip-malformed failed after records: {e}");
    }
    assert!(strict.len() <= lenient.len(), "strict read more than lenient");
    assert_eq!(
        strict[..],
        lenient[..strict.len()],
        "strict records are not a prefix of lenient ones"
    );
    if strict_err.is_none() {
        assert_eq!(strict, lenient);
    }
    if lenient.is_empty() {
        assert!(lenient_err.is_some(), "a trace with no records must be an error");
    }
});
