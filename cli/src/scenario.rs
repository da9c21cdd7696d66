//! Scenario files (JSON or TOML; schema in `scenarios/scenario.schema.json`).
//!
//! A scenario holds the holdoff configuration (the neutral format of `holdoff::config`, the same
//! one the conformance suite uses), the callers (when calls arrive) and the upstream (what it
//! answers when). Files are parsed strictly: unknown keys, wrong types and out-of-range values
//! are refused with the file, line and dotted field path, before anything runs.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use holdoff::interop::config::HoldoffConfig;
use holdoff::ConfigError;
use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::error::{line_of, locate, CliError};

// ---------------------------------------------------------------------------------------------
// The file format (serde). Every struct refuses unknown keys.
// ---------------------------------------------------------------------------------------------

/// A scenario file as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    /// JSON Schema reference, ignored.
    #[serde(rename = "$schema")]
    pub schema: Option<String>,
    /// Short name; default: the file name without extension.
    pub name: Option<String>,
    /// What the scenario shows.
    pub description: Option<String>,
    /// Where its figures come from.
    pub source: Option<String>,
    /// Stop the virtual clock here (ms); events after it are not run. Default: run until no
    /// call is left.
    pub end_ms: Option<f64>,
    /// Wall-clock time of virtual time 0, RFC 3339 (for Retry-After HTTP-dates). Default: the
    /// first record of an absolute-time trace, else the Unix epoch.
    pub wall_origin: Option<String>,
    /// Simulated workers (processes calling the same upstream), each with its own breaker,
    /// budget and policy; calls go to them in turn. Default 1.
    pub workers: Option<i64>,
    /// The breaker / budget / quota / classifier configuration.
    #[serde(default)]
    pub config: HoldoffConfig,
    /// Who calls, when.
    pub callers: CallersSpec,
    /// What the upstream answers.
    pub upstream: UpstreamSpec,
}

/// The callers.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallersSpec {
    /// Arrival processes, merged in time order.
    #[serde(default)]
    pub arrivals: Vec<ArrivalSpec>,
    /// One call per record of the upstream trace, at its time, answered with that record.
    #[serde(default)]
    pub from_trace: bool,
    /// Calls in progress at once at each worker (including those waiting to retry); later
    /// arrivals queue. Default: unlimited.
    pub concurrency: Option<i64>,
    /// A caller abandons an attempt after this long (ms): the attempt is a timeout.
    pub timeout_ms: Option<f64>,
}

/// Kinds of arrival process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArrivalKind {
    /// Calls at the given times (`at_ms`); repeat a time for simultaneous calls.
    List,
    /// Evenly spaced calls (`per_second` or `every_ms`) from `from_ms` to `to_ms` inclusive.
    Rate,
    /// A Poisson process (`per_second` on average, exponential gaps) with a `seed`.
    Poisson,
}

impl ArrivalKind {
    /// The name used in files.
    pub fn name(self) -> &'static str {
        match self {
            ArrivalKind::List => "list",
            ArrivalKind::Rate => "rate",
            ArrivalKind::Poisson => "poisson",
        }
    }
}

/// One arrival process. A flat struct (not a tagged enum) so that an error inside it names the
/// exact field.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArrivalSpec {
    /// The kind.
    pub kind: ArrivalKind,
    /// `list`: times, ms.
    pub at_ms: Option<Vec<f64>>,
    /// `rate`, `poisson`: calls per second.
    pub per_second: Option<f64>,
    /// `rate`: time between calls, ms.
    pub every_ms: Option<f64>,
    /// `rate`, `poisson`: start, ms (default 0).
    pub from_ms: Option<f64>,
    /// `rate`, `poisson`: end, ms.
    pub to_ms: Option<f64>,
    /// `poisson`: PRNG seed (default 0).
    pub seed: Option<u64>,
}

/// A Retry-After header value: a string as the server sent it, or a number of seconds.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum HeaderValue {
    /// Delta-seconds.
    Seconds(f64),
    /// The raw field value (delta-seconds or an HTTP-date).
    Text(String),
}

/// Latency, fixed or uniform in a range.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LatencyRange {
    /// Lower bound, ms.
    pub min_ms: f64,
    /// Upper bound, ms.
    pub max_ms: f64,
}

/// One answer.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnswerSpec {
    /// HTTP status.
    pub status: i64,
    /// Retry-After header value.
    pub retry_after: Option<HeaderValue>,
    /// Latency, ms.
    pub latency_ms: Option<f64>,
}

/// One status of a mix.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MixSpec {
    /// HTTP status.
    pub status: i64,
    /// Relative weight (> 0).
    pub weight: f64,
    /// Retry-After header value.
    pub retry_after: Option<HeaderValue>,
}

/// A phase of the upstream model.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseSpec {
    /// Start, ms (inclusive).
    pub from_ms: f64,
    /// End, ms (exclusive); default: the next phase's start, or forever.
    pub to_ms: Option<f64>,
    /// The one status of this phase (or give `mix`).
    pub status: Option<i64>,
    /// Retry-After header value with `status`.
    pub retry_after: Option<HeaderValue>,
    /// Statuses drawn by weight.
    pub mix: Option<Vec<MixSpec>>,
    /// Fixed latency, ms.
    pub latency_ms: Option<f64>,
    /// Uniform latency range.
    pub latency: Option<LatencyRange>,
}

/// A one-shot answer.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventSpec {
    /// The first request at or after this time (ms) gets this answer.
    pub at_ms: f64,
    /// HTTP status.
    pub status: i64,
    /// Retry-After header value.
    pub retry_after: Option<HeaderValue>,
    /// Latency, ms.
    pub latency_ms: Option<f64>,
}

/// Trace file formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceFormat {
    /// CSV with a header row.
    Csv,
    /// JSON Lines, one object a line.
    Jsonl,
    /// NCSA common log format (nginx/Apache).
    Common,
    /// NCSA combined log format (nginx/Apache default).
    Combined,
}

impl TraceFormat {
    /// The name used in files and messages.
    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::Csv => "csv",
            TraceFormat::Jsonl => "jsonl",
            TraceFormat::Common => "common",
            TraceFormat::Combined => "combined",
        }
    }
}

/// How trace records answer requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum MatchMode {
    /// A request at `t` gets the latest record at or before `t` (the upstream kept answering
    /// that way until the next record).
    #[default]
    Hold,
    /// Each record answers once: the first request at or after its time. When several are due,
    /// the newest answers and older ones are dropped. Other requests get `upstream.default`.
    Once,
}

/// A trace of recorded answers.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceSpec {
    /// The file, relative to the scenario file.
    pub file: String,
    /// Its format; default from the extension (`.csv`, `.jsonl`/`.ndjson`; logs need it).
    pub format: Option<TraceFormat>,
    /// How records answer requests.
    #[serde(rename = "match", default)]
    pub mode: MatchMode,
    /// Virtual time 0 for absolute timestamps, RFC 3339; default: the first record's time.
    pub origin: Option<String>,
    /// Latency of records that carry none, ms (default 0).
    pub latency_ms: Option<f64>,
}

/// The upstream.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamSpec {
    /// The answer outside every phase, before the first trace record, and in `once` mode when
    /// no record is due. Default: 200 after 0 ms.
    pub default: Option<AnswerSpec>,
    /// A model in phases.
    #[serde(default)]
    pub phases: Vec<PhaseSpec>,
    /// One-shot answers over the model or trace.
    #[serde(default)]
    pub events: Vec<EventSpec>,
    /// Recorded answers.
    pub trace: Option<TraceSpec>,
    /// Seed for mixes and latency ranges (default 0).
    #[serde(default)]
    pub seed: u64,
}

// ---------------------------------------------------------------------------------------------
// The compiled scenario: validated, times in nanoseconds of virtual time.
// ---------------------------------------------------------------------------------------------

/// One answer of the upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// HTTP status (100..=599).
    pub status: u16,
    /// Retry-After header value as sent.
    pub retry_after: Option<std::rc::Rc<str>>,
    /// Nanoseconds until the answer arrives.
    pub latency: u64,
}

/// Latency of a phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Latency {
    /// Always this, ns.
    Fixed(u64),
    /// Uniform in [min, max], ns.
    Uniform(u64, u64),
}

/// A phase.
#[derive(Debug, Clone)]
pub struct Phase {
    /// Start, ns (inclusive).
    pub from: u64,
    /// End, ns (exclusive).
    pub to: u64,
    /// (status, retry-after, cumulative weight); one entry for a fixed status.
    pub mix: Vec<(u16, Option<std::rc::Rc<str>>, f64)>,
    /// Latency.
    pub latency: Latency,
}

/// An arrival process.
#[derive(Debug, Clone)]
pub enum Arrival {
    /// Sorted times, ns.
    List(Vec<u64>),
    /// `from + i * 1e12 / milli_per_second` for i = 0.. while <= `to`.
    Rate {
        /// Start, ns.
        from: u64,
        /// End, ns (inclusive).
        to: u64,
        /// Gap numerator/denominator: gap_ns = num / den.
        num: u128,
        /// See `num`.
        den: u128,
    },
    /// Exponential gaps.
    Poisson {
        /// Start, ns.
        from: u64,
        /// End, ns.
        to: u64,
        /// Mean gap, ns.
        mean_gap: f64,
        /// Seed.
        seed: u64,
    },
}

/// A compiled trace reference.
#[derive(Debug, Clone)]
pub struct Trace {
    /// Resolved path.
    pub path: PathBuf,
    /// Format.
    pub format: TraceFormat,
    /// Matching.
    pub mode: MatchMode,
    /// Time zero for absolute timestamps.
    pub origin: Option<chrono::DateTime<chrono::FixedOffset>>,
    /// Default latency, ns.
    pub latency: u64,
}

/// A loaded, validated scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Name.
    pub name: String,
    /// Description.
    pub description: Option<String>,
    /// The file.
    pub path: PathBuf,
    /// The configuration (replaced by `compare`).
    pub config: HoldoffConfig,
    /// Where the configuration came from (for messages).
    pub config_origin: PathBuf,
    /// Arrivals.
    pub arrivals: Vec<Arrival>,
    /// One call per trace record.
    pub from_trace: bool,
    /// Concurrency limit.
    pub concurrency: Option<u64>,
    /// Per-attempt timeout, ns.
    pub timeout: Option<u64>,
    /// Default answer.
    pub default: Answer,
    /// Phases, sorted, non-overlapping.
    pub phases: Vec<Phase>,
    /// One-shot answers, sorted by time.
    pub events: Vec<(u64, Answer)>,
    /// Trace.
    pub trace: Option<Trace>,
    /// Seed for mixes and latencies.
    pub seed: u64,
    /// End of the run, ns.
    pub end: Option<u64>,
    /// Wall time of virtual 0, if given.
    pub wall_origin: Option<SystemTime>,
    /// Simulated workers (1..=MAX_WORKERS).
    pub workers: u32,
}

/// Most workers a scenario may simulate.
pub const MAX_WORKERS: i64 = 10_000;

// ---------------------------------------------------------------------------------------------
// Loading.
// ---------------------------------------------------------------------------------------------

/// Reads a file, refusing a missing or empty one.
pub fn read_text(path: &Path) -> Result<String, CliError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        let what = match e.kind() {
            std::io::ErrorKind::NotFound => "no such file".to_string(),
            std::io::ErrorKind::InvalidData => "not UTF-8 text".to_string(),
            _ => e.to_string(),
        };
        CliError::in_file(path, what)
    })?;
    if text.trim().is_empty() {
        return Err(CliError::in_file(path, "empty file"));
    }
    Ok(text)
}

fn is_json(path: &Path, text: &str) -> bool {
    match path.extension().and_then(|e| e.to_str()) {
        Some("json") => true,
        Some("toml") => false,
        _ => text.trim_start().starts_with('{'),
    }
}

/// Parses a JSON or TOML document into `T`, with file, line and field path on error.
pub fn parse_doc<T: DeserializeOwned>(path: &Path, text: &str) -> Result<T, CliError> {
    if is_json(path, text) {
        let mut de = serde_json::Deserializer::from_str(text);
        let v: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let field = e.path().to_string();
            let inner = e.into_inner();
            let line = inner.line() as u64;
            let mut msg = inner.to_string();
            if let Some(i) = msg.rfind(" at line ") {
                msg.truncate(i);
            }
            CliError::in_file(path, msg)
                .maybe_line((line > 0).then_some(line))
                .field(clean_path(&field))
        })?;
        de.end().map_err(|e| {
            CliError::in_file(path, "trailing characters after the JSON document").line(e.line() as u64)
        })?;
        Ok(v)
    } else {
        let de = toml::de::Deserializer::parse(text).map_err(|e| toml_error(path, text, &e, ""))?;
        serde_path_to_error::deserialize(de).map_err(|e| {
            let field = clean_path(&e.path().to_string());
            toml_error(path, text, e.inner(), &field)
        })
    }
}

fn toml_error(path: &Path, text: &str, e: &toml::de::Error, field: &str) -> CliError {
    let line = e.span().map(|s| line_of(text, s.start));
    CliError::in_file(path, e.message().to_string())
        .maybe_line(line)
        .field(field)
}

fn clean_path(p: &str) -> String {
    if p == "." {
        String::new()
    } else {
        p.to_string()
    }
}

/// A configuration error found after parsing: prefixed with `prefix` and located in the text.
pub fn config_error(path: &Path, text: &str, prefix: &str, e: ConfigError) -> CliError {
    let field = format!("{prefix}{}", e.field);
    CliError::in_file(path, e.rule)
        .maybe_line(locate(text, &field))
        .field(field)
}

/// Checks every part of a configuration by building it, so that errors surface at load time.
pub fn check_config(path: &Path, text: &str, prefix: &str, c: &HoldoffConfig) -> Result<(), CliError> {
    let err = |e| config_error(path, text, prefix, e);
    if let Some(b) = &c.breaker {
        b.to_config().map_err(err)?;
    }
    if let Some(b) = &c.budget {
        b.to_config().map_err(err)?;
    }
    if let Some(q) = &c.quota {
        q.to_config().map_err(err)?;
    }
    if let Some(cl) = &c.classifier {
        cl.to_config().map_err(err)?;
    }
    c.fleet_config(c.group.is_some()).map_err(err)?;
    Ok(())
}

/// Loads a configuration file (the neutral format at top level), as `compare` takes.
pub fn load_config(path: &Path) -> Result<HoldoffConfig, CliError> {
    let text = read_text(path)?;
    let c: HoldoffConfig = parse_doc(path, &text)?;
    check_config(path, &text, "", &c)?;
    Ok(c)
}

struct Ctx<'a> {
    path: &'a Path,
    text: &'a str,
}

impl Ctx<'_> {
    fn err(&self, field: &str, msg: impl Into<String>) -> CliError {
        CliError::in_file(self.path, msg)
            .maybe_line(locate(self.text, field))
            .field(field)
    }

    /// Milliseconds (finite, >= 0) to nanoseconds.
    fn ms(&self, field: &str, v: f64) -> Result<u64, CliError> {
        let d: Duration =
            holdoff::interop::units::from_millis_f64(field, v).map_err(|e| self.err(field, e.rule))?;
        Ok(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }

    fn status(&self, field: &str, v: i64) -> Result<u16, CliError> {
        if (100..=599).contains(&v) {
            Ok(v as u16)
        } else {
            Err(self.err(
                field,
                format!("must be an HTTP status between 100 and 599, got {v}"),
            ))
        }
    }

    fn header(&self, field: &str, v: &Option<HeaderValue>) -> Result<Option<std::rc::Rc<str>>, CliError> {
        Ok(match v {
            None => None,
            Some(HeaderValue::Text(s)) => Some(s.as_str().into()),
            Some(HeaderValue::Seconds(s)) => {
                if !s.is_finite() || *s < 0.0 {
                    return Err(self.err(field, "a number of seconds must be finite and not negative"));
                }
                Some(format_seconds(*s).into())
            }
        })
    }

    fn answer(&self, prefix: &str, a: &AnswerSpec) -> Result<Answer, CliError> {
        Ok(Answer {
            status: self.status(&format!("{prefix}.status"), a.status)?,
            retry_after: self.header(&format!("{prefix}.retry_after"), &a.retry_after)?,
            latency: match a.latency_ms {
                Some(v) => self.ms(&format!("{prefix}.latency_ms"), v)?,
                None => 0,
            },
        })
    }
}

fn format_seconds(s: f64) -> String {
    if s.fract() == 0.0 && s < 1e15 {
        format!("{}", s as u64)
    } else {
        format!("{s}")
    }
}

/// Parses an RFC 3339 timestamp.
pub fn parse_rfc3339(s: &str) -> Option<chrono::DateTime<chrono::FixedOffset>> {
    chrono::DateTime::parse_from_rfc3339(s.trim()).ok()
}

/// Loads and validates a scenario file.
pub fn load(path: &Path) -> Result<Scenario, CliError> {
    let text = read_text(path)?;
    let file: ScenarioFile = parse_doc(path, &text)?;
    check_config(path, &text, "config.", &file.config)?;
    let cx = Ctx { path, text: &text };

    let name = file.name.clone().unwrap_or_else(|| {
        path.file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("scenario")
            .to_string()
    });

    // Callers.
    let c = &file.callers;
    let mut arrivals = Vec::new();
    for (i, a) in c.arrivals.iter().enumerate() {
        let p = format!("callers.arrivals[{i}]");
        let only = |allowed: &[&str]| -> Result<(), CliError> {
            let given = [
                ("at_ms", a.at_ms.is_some()),
                ("per_second", a.per_second.is_some()),
                ("every_ms", a.every_ms.is_some()),
                ("from_ms", a.from_ms.is_some()),
                ("to_ms", a.to_ms.is_some()),
                ("seed", a.seed.is_some()),
            ];
            for (name, set) in given {
                if set && !allowed.contains(&name) {
                    return Err(cx.err(
                        &format!("{p}.{name}"),
                        format!("not a field of kind {}", a.kind.name()),
                    ));
                }
            }
            Ok(())
        };
        let need = |v: Option<f64>, name: &str| -> Result<f64, CliError> {
            v.ok_or_else(|| cx.err(&p, format!("missing field `{name}`")))
        };
        let from_to = || -> Result<(u64, u64), CliError> {
            let from = cx.ms(&format!("{p}.from_ms"), a.from_ms.unwrap_or(0.0))?;
            let to = cx.ms(&format!("{p}.to_ms"), need(a.to_ms, "to_ms")?)?;
            if to < from {
                return Err(cx.err(&format!("{p}.to_ms"), "must not be before from_ms"));
            }
            Ok((from, to))
        };
        let rate = |r: f64| -> Result<f64, CliError> {
            if !r.is_finite() || r <= 0.0 || r > 1e9 {
                return Err(cx.err(
                    &format!("{p}.per_second"),
                    "must be a number greater than 0 and at most 1e9",
                ));
            }
            Ok(r)
        };
        arrivals.push(match a.kind {
            ArrivalKind::List => {
                only(&["at_ms"])?;
                let at_ms = a
                    .at_ms
                    .as_ref()
                    .ok_or_else(|| cx.err(&p, "missing field `at_ms`"))?;
                let mut v = Vec::with_capacity(at_ms.len());
                for t in at_ms {
                    v.push(cx.ms(&format!("{p}.at_ms"), *t)?);
                }
                v.sort_unstable();
                Arrival::List(v)
            }
            ArrivalKind::Rate => {
                only(&["per_second", "every_ms", "from_ms", "to_ms"])?;
                let (from, to) = from_to()?;
                let (num, den) = match (a.per_second, a.every_ms) {
                    (Some(r), None) => {
                        let r = rate(r)?;
                        // Milli-calls per second keeps the schedule exact for rates with up to
                        // three decimals, with no drift over millions of calls.
                        let milli = (r * 1000.0).round().max(1.0) as u128;
                        (1_000_000_000_000u128, milli)
                    }
                    (None, Some(e)) => {
                        let gap = cx.ms(&format!("{p}.every_ms"), e)?;
                        if gap == 0 {
                            return Err(cx.err(&format!("{p}.every_ms"), "must be greater than 0"));
                        }
                        (gap as u128, 1)
                    }
                    _ => return Err(cx.err(&p, "give exactly one of per_second and every_ms")),
                };
                Arrival::Rate { from, to, num, den }
            }
            ArrivalKind::Poisson => {
                only(&["per_second", "from_ms", "to_ms", "seed"])?;
                let (from, to) = from_to()?;
                let r = rate(need(a.per_second, "per_second")?)?;
                Arrival::Poisson {
                    from,
                    to,
                    mean_gap: 1e9 / r,
                    seed: a.seed.unwrap_or(0),
                }
            }
        });
    }
    let concurrency = match c.concurrency {
        None => None,
        Some(n) if n >= 1 => Some(n as u64),
        Some(_) => return Err(cx.err("callers.concurrency", "must be at least 1")),
    };
    let timeout = match c.timeout_ms {
        None => None,
        Some(v) => {
            let t = cx.ms("callers.timeout_ms", v)?;
            if t == 0 {
                return Err(cx.err("callers.timeout_ms", "must be greater than 0"));
            }
            Some(t)
        }
    };

    // Upstream.
    let u = &file.upstream;
    let default = match &u.default {
        Some(a) => cx.answer("upstream.default", a)?,
        None => Answer {
            status: 200,
            retry_after: None,
            latency: 0,
        },
    };
    if !u.phases.is_empty() && u.trace.is_some() {
        return Err(cx.err("upstream", "give either phases or a trace, not both"));
    }
    let mut phases = Vec::with_capacity(u.phases.len());
    for (i, ph) in u.phases.iter().enumerate() {
        let p = format!("upstream.phases[{i}]");
        let from = cx.ms(&format!("{p}.from_ms"), ph.from_ms)?;
        let to = match ph.to_ms {
            Some(v) => cx.ms(&format!("{p}.to_ms"), v)?,
            None => match u.phases.get(i + 1) {
                Some(next) => cx.ms(&format!("upstream.phases[{}].from_ms", i + 1), next.from_ms)?,
                None => u64::MAX,
            },
        };
        if to <= from {
            return Err(cx.err(&format!("{p}.to_ms"), "must be after from_ms"));
        }
        let mix = match (&ph.status, &ph.mix) {
            (Some(s), None) => vec![(
                cx.status(&format!("{p}.status"), *s)?,
                cx.header(&format!("{p}.retry_after"), &ph.retry_after)?,
                1.0,
            )],
            (None, Some(m)) if !m.is_empty() => {
                if ph.retry_after.is_some() {
                    return Err(cx.err(
                        &format!("{p}.retry_after"),
                        "with a mix, give retry_after on each mix entry",
                    ));
                }
                let mut out = Vec::with_capacity(m.len());
                let mut total = 0.0;
                for (j, e) in m.iter().enumerate() {
                    let q = format!("{p}.mix[{j}]");
                    if !e.weight.is_finite() || e.weight <= 0.0 {
                        return Err(cx.err(&format!("{q}.weight"), "must be a number greater than 0"));
                    }
                    total += e.weight;
                    out.push((
                        cx.status(&format!("{q}.status"), e.status)?,
                        cx.header(&format!("{q}.retry_after"), &e.retry_after)?,
                        total,
                    ));
                }
                for e in &mut out {
                    e.2 /= total;
                }
                out
            }
            _ => return Err(cx.err(&p, "give exactly one of status and a non-empty mix")),
        };
        let latency = match (ph.latency_ms, &ph.latency) {
            (None, None) => Latency::Fixed(0),
            (Some(v), None) => Latency::Fixed(cx.ms(&format!("{p}.latency_ms"), v)?),
            (None, Some(r)) => {
                let lo = cx.ms(&format!("{p}.latency.min_ms"), r.min_ms)?;
                let hi = cx.ms(&format!("{p}.latency.max_ms"), r.max_ms)?;
                if hi < lo {
                    return Err(cx.err(&format!("{p}.latency.max_ms"), "must not be below min_ms"));
                }
                Latency::Uniform(lo, hi)
            }
            (Some(_), Some(_)) => {
                return Err(cx.err(&p, "give either latency_ms or latency, not both"));
            }
        };
        if let Some(prev) = phases.last() {
            let prev: &Phase = prev;
            if from < prev.to {
                return Err(cx.err(
                    &format!("{p}.from_ms"),
                    "phases must be in time order and must not overlap",
                ));
            }
        }
        phases.push(Phase {
            from,
            to,
            mix,
            latency,
        });
    }
    let mut events = Vec::with_capacity(u.events.len());
    for (i, e) in u.events.iter().enumerate() {
        let p = format!("upstream.events[{i}]");
        let at = cx.ms(&format!("{p}.at_ms"), e.at_ms)?;
        let a = cx.answer(
            &p,
            &AnswerSpec {
                status: e.status,
                retry_after: e.retry_after.clone(),
                latency_ms: e.latency_ms,
            },
        )?;
        events.push((at, a));
    }
    events.sort_by_key(|e| e.0);

    let trace = match &u.trace {
        None => None,
        Some(t) => {
            let base = path.parent().unwrap_or(Path::new("."));
            let tpath = base.join(&t.file);
            let format = match t.format {
                Some(f) => f,
                None => match tpath.extension().and_then(|e| e.to_str()) {
                    Some("csv") => TraceFormat::Csv,
                    Some("jsonl") | Some("ndjson") => TraceFormat::Jsonl,
                    _ => {
                        return Err(cx.err(
                            "upstream.trace.format",
                            "cannot tell the format from the file name: give format \
                             (csv, jsonl, common or combined)",
                        ))
                    }
                },
            };
            let origin = match &t.origin {
                None => None,
                Some(s) => Some(
                    parse_rfc3339(s)
                        .ok_or_else(|| cx.err("upstream.trace.origin", "must be an RFC 3339 timestamp"))?,
                ),
            };
            let latency = match t.latency_ms {
                Some(v) => cx.ms("upstream.trace.latency_ms", v)?,
                None => 0,
            };
            Some(Trace {
                path: tpath,
                format,
                mode: t.mode,
                origin,
                latency,
            })
        }
    };
    if c.from_trace && trace.is_none() {
        return Err(cx.err("callers.from_trace", "needs upstream.trace"));
    }
    if arrivals.is_empty() && !c.from_trace {
        return Err(cx.err(
            "callers",
            "no calls: give callers.arrivals or callers.from_trace = true",
        ));
    }
    let end = match file.end_ms {
        Some(v) => Some(cx.ms("end_ms", v)?),
        None => None,
    };
    let wall_origin = match &file.wall_origin {
        None => None,
        Some(s) => {
            let dt =
                parse_rfc3339(s).ok_or_else(|| cx.err("wall_origin", "must be an RFC 3339 timestamp"))?;
            Some(to_system_time(&dt))
        }
    };

    let workers = match file.workers {
        None => 1,
        Some(n) if (1..=MAX_WORKERS).contains(&n) => n as u32,
        Some(_) => return Err(cx.err("workers", format!("must be between 1 and {MAX_WORKERS}"))),
    };

    Ok(Scenario {
        name,
        description: file.description.clone(),
        path: path.to_path_buf(),
        config: file.config.clone(),
        config_origin: path.to_path_buf(),
        arrivals,
        from_trace: c.from_trace,
        concurrency,
        timeout,
        default,
        phases,
        events,
        trace,
        seed: u.seed,
        end,
        wall_origin,
        workers,
    })
}

/// A chrono time as `SystemTime` (times before 1970 clamp to the epoch).
pub fn to_system_time(dt: &chrono::DateTime<chrono::FixedOffset>) -> SystemTime {
    let ns = dt.timestamp_nanos_opt().unwrap_or(0).max(0) as u64;
    UNIX_EPOCH + Duration::from_nanos(ns)
}
