//! Streaming trace readers: CSV, JSON Lines, and the nginx/Apache common and combined access-log
//! formats. One record at a time from a buffered reader, so memory stays flat however long the
//! trace is.
//!
//! * CSV: a header row naming the columns `t_ms` (milliseconds from the start) or `time`
//!   (RFC 3339), `status`, and optionally `retry_after` (the header value as sent) and
//!   `latency_ms`. Unknown columns are refused.
//! * JSON Lines: one object a line with the same keys; `retry_after` may be a string or a
//!   number of seconds. Blank lines are skipped; unknown keys are refused.
//! * Access logs (parsed by the `access_log_parser` crate): the time and status of each line.
//!
//! Absolute times are made relative to the trace's origin (default: its first record). Times
//! must not go backwards; statuses must be 100..=599; latencies must not be negative. A bad line
//! is a one-line error naming the file, line and field, or, with `skip_malformed`, a warning on
//! stderr and the line is skipped.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::rc::Rc;

use chrono::{DateTime, FixedOffset};
use serde::Deserialize;

use crate::error::CliError;
use crate::scenario::{parse_rfc3339, Answer, HeaderValue, Trace, TraceFormat};

/// One recorded answer at a virtual time (ns from the origin).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Virtual time, ns.
    pub t: u64,
    /// The answer.
    pub answer: Answer,
}

/// How many malformed-line warnings are printed before they are only counted.
const MAX_WARNINGS: u64 = 20;

enum Inner {
    Csv {
        rdr: csv::Reader<BufReader<File>>,
        rec: csv::StringRecord,
        time: usize,
        absolute: bool,
        status: usize,
        retry_after: Option<usize>,
        latency: Option<usize>,
    },
    Lines {
        rdr: BufReader<File>,
        buf: Vec<u8>,
        format: LineFormat,
    },
}

/// A streaming reader over one trace file.
pub struct TraceReader {
    path: PathBuf,
    inner: Inner,
    line: u64,
    origin: Option<DateTime<FixedOffset>>,
    last: Option<u64>,
    default_latency: u64,
    skip_malformed: bool,
    warn: bool,
    records: u64,
    finished: bool,
    /// Lines skipped as malformed.
    pub skipped: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonRecord {
    t_ms: Option<f64>,
    time: Option<String>,
    status: i64,
    retry_after: Option<HeaderValue>,
    latency_ms: Option<f64>,
}

/// A bad line: its field and message.
struct Bad(Option<String>, String);

impl Bad {
    fn new(field: &str, msg: impl Into<String>) -> Bad {
        Bad(Some(field.to_string()), msg.into())
    }
}

impl TraceReader {
    /// Opens a trace. `warn` controls whether skipped lines are reported on stderr (a second
    /// reader over the same file keeps quiet).
    pub fn open(trace: &Trace, skip_malformed: bool, warn: bool) -> Result<TraceReader, CliError> {
        let path = &trace.path;
        let file = File::open(path).map_err(|e| {
            let msg = if e.kind() == std::io::ErrorKind::NotFound {
                "no such file".to_string()
            } else {
                e.to_string()
            };
            CliError::in_file(path, msg)
        })?;
        if file.metadata().map(|m| m.len() == 0).unwrap_or(false) {
            return Err(CliError::in_file(path, "empty trace file"));
        }
        let inner = match trace.format {
            TraceFormat::Csv => {
                let mut rdr = csv::ReaderBuilder::new()
                    .has_headers(true)
                    .flexible(false)
                    .from_reader(BufReader::with_capacity(1 << 16, file));
                let headers = rdr
                    .headers()
                    .map_err(|e| CliError::in_file(path, format!("cannot read the CSV header: {e}")).line(1))?
                    .clone();
                let mut time = None;
                let mut absolute = false;
                let mut status = None;
                let mut retry_after = None;
                let mut latency = None;
                for (i, h) in headers.iter().enumerate() {
                    match h.trim() {
                        "t_ms" | "time" if time.is_some() => {
                            return Err(CliError::in_file(path, "give one time column, t_ms or time")
                                .line(1)
                                .field(h));
                        }
                        "t_ms" => time = Some(i),
                        "time" => {
                            time = Some(i);
                            absolute = true;
                        }
                        "status" => status = Some(i),
                        "retry_after" => retry_after = Some(i),
                        "latency_ms" => latency = Some(i),
                        other => {
                            return Err(CliError::in_file(
                                path,
                                "unknown column (expected t_ms or time, status, retry_after, latency_ms)",
                            )
                            .line(1)
                            .field(other));
                        }
                    }
                }
                let time = time.ok_or_else(|| {
                    CliError::in_file(path, "missing time column (t_ms or time)")
                        .line(1)
                        .field("t_ms")
                })?;
                let status = status.ok_or_else(|| {
                    CliError::in_file(path, "missing status column")
                        .line(1)
                        .field("status")
                })?;
                Inner::Csv {
                    rdr,
                    rec: csv::StringRecord::new(),
                    time,
                    absolute,
                    status,
                    retry_after,
                    latency,
                }
            }
            f => Inner::Lines {
                rdr: BufReader::with_capacity(1 << 16, file),
                buf: Vec::with_capacity(256),
                format: match f {
                    TraceFormat::Jsonl => LineFormat::Jsonl,
                    TraceFormat::Common => LineFormat::Log(access_log_parser::LogType::CommonLog, "common"),
                    _ => LineFormat::Log(access_log_parser::LogType::CombinedLog, "combined"),
                },
            },
        };
        Ok(TraceReader {
            path: path.clone(),
            inner,
            line: if trace.format == TraceFormat::Csv { 1 } else { 0 },
            origin: trace.origin,
            last: None,
            default_latency: trace.latency,
            skip_malformed,
            warn,
            records: 0,
            finished: false,
            skipped: 0,
        })
    }

    /// The next record, `Ok(None)` at the end. A trace with no record at all is an error.
    pub fn next_record(&mut self) -> Result<Option<Record>, CliError> {
        loop {
            let parsed = match self.read_one() {
                Ok(None) => {
                    if self.records == 0 {
                        return Err(CliError::in_file(&self.path, "the trace has no records"));
                    }
                    return Ok(None);
                }
                Ok(Some(r)) => r,
                Err(e) => return Err(e),
            };
            match parsed {
                Ok(rec) => {
                    self.records += 1;
                    return Ok(Some(rec));
                }
                Err(Bad(field, msg)) => {
                    let mut e = CliError::in_file(&self.path, msg).line(self.line);
                    if let Some(f) = field {
                        e = e.field(f);
                    }
                    if !self.skip_malformed {
                        return Err(e);
                    }
                    self.skipped += 1;
                    if self.warn && self.skipped <= MAX_WARNINGS {
                        eprintln!("warning: {e} (line skipped)");
                    }
                }
            }
        }
    }

    /// Prints (once) how many warnings were not shown.
    pub fn finish(&mut self) {
        if std::mem::replace(&mut self.finished, true) {
            return;
        }
        if self.warn && self.skipped > MAX_WARNINGS {
            eprintln!(
                "warning: {}: {} more malformed lines skipped",
                self.path.display(),
                self.skipped - MAX_WARNINGS
            );
        }
    }

    /// Reads one line: `Ok(None)` at the end, `Ok(Some(Err))` for a bad line, `Err` for an I/O
    /// error (fatal).
    fn read_one(&mut self) -> Result<Option<Result<Record, Bad>>, CliError> {
        let raw = match &mut self.inner {
            Inner::Csv {
                rdr,
                rec,
                time,
                absolute,
                status,
                retry_after,
                latency,
            } => {
                match rdr.read_record(rec) {
                    Ok(false) => return Ok(None),
                    Ok(true) => {}
                    Err(e) => {
                        let line = e.position().map(|p| p.line()).unwrap_or(self.line + 1);
                        self.line = line;
                        if let csv::ErrorKind::Io(io) = e.kind() {
                            return Err(CliError::in_file(&self.path, io.to_string()).line(line));
                        }
                        let msg = match e.kind() {
                            csv::ErrorKind::UnequalLengths {
                                expected_len, len, ..
                            } => format!("{len} fields where the header has {expected_len}"),
                            csv::ErrorKind::Utf8 { .. } => "not UTF-8 text".to_string(),
                            _ => e.to_string(),
                        };
                        return Ok(Some(Err(Bad(None, msg))));
                    }
                }
                self.line = rec.position().map(|p| p.line()).unwrap_or(self.line + 1);
                // Fields are trimmed here rather than by the reader (which copies every record).
                let t = rec.get(*time).unwrap_or("").trim();
                let time_field = if *absolute { "time" } else { "t_ms" };
                let when = if *absolute {
                    match parse_rfc3339(t) {
                        Some(dt) => When::Abs(dt),
                        None => return Ok(Some(Err(Bad::new(time_field, "must be an RFC 3339 timestamp")))),
                    }
                } else {
                    match parse_ms(time_field, t) {
                        Ok(v) => When::Rel(v),
                        Err(b) => return Ok(Some(Err(b))),
                    }
                };
                let status = match rec.get(*status).unwrap_or("").trim().parse::<i64>() {
                    Ok(s) => s,
                    Err(_) => return Ok(Some(Err(Bad::new("status", "must be an integer HTTP status")))),
                };
                let ra = retry_after
                    .and_then(|i| rec.get(i))
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(Rc::<str>::from);
                let lat = match latency
                    .and_then(|i| rec.get(i))
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                {
                    None => None,
                    Some(s) => match parse_ms("latency_ms", s) {
                        Ok(v) => Some(v),
                        Err(b) => return Ok(Some(Err(b))),
                    },
                };
                (when, status, ra, lat)
            }
            Inner::Lines { rdr, buf, format } => {
                let format = *format;
                // Bytes, not read_line: a line that is not UTF-8 is one bad line (skippable with
                // --skip-malformed, as in CSV), not the end of the trace.
                let line = loop {
                    buf.clear();
                    let n = rdr
                        .read_until(b'\n', buf)
                        .map_err(|e| CliError::in_file(&self.path, e.to_string()).line(self.line + 1))?;
                    if n == 0 {
                        return Ok(None);
                    }
                    self.line += 1;
                    match std::str::from_utf8(buf) {
                        Err(_) => return Ok(Some(Err(Bad(None, "not UTF-8 text".to_string())))),
                        Ok(text) if !text.trim().is_empty() => break text.trim_end_matches(['\n', '\r']),
                        Ok(_) => {}
                    }
                };
                match format {
                    LineFormat::Jsonl => match parse_json_line(line) {
                        Ok(r) => r,
                        Err(b) => return Ok(Some(Err(b))),
                    },
                    LineFormat::Log(kind, name) => match access_log_parser::parse(kind, line) {
                        Ok(access_log_parser::LogEntry::CommonLog(e)) => {
                            (When::Abs(e.timestamp), e.status_code.as_u16() as i64, None, None)
                        }
                        Ok(access_log_parser::LogEntry::CombinedLog(e)) => {
                            (When::Abs(e.timestamp), e.status_code.as_u16() as i64, None, None)
                        }
                        Ok(_) | Err(_) => {
                            return Ok(Some(Err(Bad(
                                None,
                                format!("not a line of the {name} log format"),
                            ))))
                        }
                    },
                }
            }
        };
        Ok(Some(self.finish_record(raw)))
    }

    fn finish_record(&mut self, raw: RawRecord) -> Result<Record, Bad> {
        let (when, status, retry_after, latency) = raw;
        let time_field = match &self.inner {
            Inner::Csv { absolute: false, .. } => "t_ms",
            Inner::Csv { .. } => "time",
            Inner::Lines {
                format: LineFormat::Jsonl,
                ..
            } => match when {
                When::Rel(_) => "t_ms",
                When::Abs(_) => "time",
            },
            Inner::Lines { .. } => "time",
        };
        let t = match when {
            When::Rel(ns) => ns,
            When::Abs(dt) => {
                let origin = *self.origin.get_or_insert(dt);
                let d = dt.signed_duration_since(origin);
                match d.num_nanoseconds() {
                    Some(n) if n >= 0 => n as u64,
                    Some(_) => {
                        let what = if self.last.is_none() {
                            "is before the trace origin"
                        } else {
                            "goes backwards (before the trace origin)"
                        };
                        return Err(Bad::new(time_field, what));
                    }
                    None => return Err(Bad::new(time_field, "is too far from the trace origin")),
                }
            }
        };
        if let Some(last) = self.last {
            if t < last {
                return Err(Bad::new(
                    time_field,
                    format!(
                        "time goes backwards ({} ms after a record at {} ms); a trace must be in time order",
                        fmt_ms(t),
                        fmt_ms(last)
                    ),
                ));
            }
        }
        if !(100..=599).contains(&status) {
            return Err(Bad::new(
                "status",
                format!("must be an HTTP status between 100 and 599, got {status}"),
            ));
        }
        self.last = Some(t);
        Ok(Record {
            t,
            answer: Answer {
                status: status as u16,
                retry_after,
                latency: latency.unwrap_or(self.default_latency),
            },
        })
    }

    /// The time origin in use (the first absolute timestamp, or the configured origin).
    pub fn origin(&self) -> Option<DateTime<FixedOffset>> {
        self.origin
    }
}

#[derive(Clone, Copy)]
enum LineFormat {
    Jsonl,
    Log(access_log_parser::LogType, &'static str),
}

enum When {
    Rel(u64),
    Abs(DateTime<FixedOffset>),
}

type RawRecord = (When, i64, Option<Rc<str>>, Option<u64>);

fn fmt_ms(ns: u64) -> String {
    let ms = ns as f64 / 1e6;
    if ms.fract() == 0.0 {
        format!("{}", ns / 1_000_000)
    } else {
        format!("{ms}")
    }
}

fn parse_ms(field: &str, s: &str) -> Result<u64, Bad> {
    let v: f64 = s
        .parse()
        .map_err(|_| Bad::new(field, format!("must be a number of milliseconds, got {s:?}")))?;
    ms_to_ns(field, v)
}

fn ms_to_ns(field: &str, v: f64) -> Result<u64, Bad> {
    holdoff::interop::units::from_millis_f64(field, v)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .map_err(|e| Bad::new(field, e.rule))
}

fn parse_json_line(line: &str) -> Result<RawRecord, Bad> {
    let mut de = serde_json::Deserializer::from_str(line);
    let r: JsonRecord = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let field = e.path().to_string();
        let mut msg = e.into_inner().to_string();
        if let Some(i) = msg.rfind(" at line ") {
            msg.truncate(i);
        }
        Bad(if field == "." { None } else { Some(field) }, msg)
    })?;
    de.end()
        .map_err(|_| Bad(None, "trailing characters after the JSON object".into()))?;
    let when = match (&r.t_ms, &r.time) {
        (Some(v), None) => When::Rel(ms_to_ns("t_ms", *v)?),
        (None, Some(s)) => {
            When::Abs(parse_rfc3339(s).ok_or_else(|| Bad::new("time", "must be an RFC 3339 timestamp"))?)
        }
        _ => return Err(Bad(None, "give exactly one of t_ms and time".into())),
    };
    let ra = match r.retry_after {
        None => None,
        Some(HeaderValue::Text(s)) => Some(Rc::from(s.as_str())),
        Some(HeaderValue::Seconds(s)) => {
            if !s.is_finite() || s < 0.0 {
                return Err(Bad::new(
                    "retry_after",
                    "a number of seconds must be finite and not negative",
                ));
            }
            Some(Rc::from(format!("{s}").trim_end_matches(".0")))
        }
    };
    let lat = match r.latency_ms {
        None => None,
        Some(v) => Some(ms_to_ns("latency_ms", v)?),
    };
    Ok((when, r.status, ra, lat))
}
