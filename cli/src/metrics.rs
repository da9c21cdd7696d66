//! `holdoff simulate --metrics FILE`: the core's metric series ([`holdoff::metrics`], the table
//! of docs/metrics.md) sampled over virtual time, so that a replay can be set beside a dashboard.
//!
//! Every simulated object (each worker's breaker, and with a budget its policy, with a quota its
//! quota) is read once as soon as it is built: that read starts its counting, as an exporter's
//! first read does, and is written as the rows at `t_s` 0. Then the objects are read every
//! `interval` of virtual time (a sample at `T` counts everything that happened at or before `T`)
//! and once more at the end of the run. A row is written only when its series' value differs
//! from that series' previous row, except at 0 and at the end, where every series has a row; so
//! the value of a series at a time is its latest row at or before that time.
//!
//! Names, attributes and values are the core's own (`Sample::name`, `Sample::attribute_pair`);
//! with several workers each series also has the attribute `worker` (the worker's index, from 0),
//! and the fleet's figure is the sum over `worker` (the gauges: one per worker).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use holdoff::metrics::Sample;
use holdoff::{Breaker, Policy, RetryQuota};

use crate::error::CliError;

const FLAG: &str = "--metrics";

/// The file's format, from its extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One JSON document: `{"scenario", "interval_s", "workers", "rows": [...], "end_s"}`.
    Json,
    /// A header `t_s,name,attributes,value`, then one row a line.
    Csv,
}

impl Format {
    /// The format of `path` (`.json` or `.csv`, any case). Errors: any other extension, naming
    /// `--metrics`.
    pub fn of(path: &Path) -> Result<Format, CliError> {
        match path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("json") => Ok(Format::Json),
            Some("csv") => Ok(Format::Csv),
            _ => Err(CliError::in_file(path, "the metrics file must be a .json or .csv file").field(FLAG)),
        }
    }
}

/// Parses `--metrics-interval`: seconds, a whole number of milliseconds, at least 0.001.
/// Returns nanoseconds. Errors name `--metrics-interval`.
pub fn parse_interval(text: &str) -> Result<u64, CliError> {
    let bad = || {
        CliError::msg(format!(
            "`{text}` is not a number of seconds of at least 0.001 (a whole number of milliseconds)"
        ))
        .field("--metrics-interval")
    };
    let s: f64 = text.trim().parse().map_err(|_| bad())?;
    let ms = s * 1e3;
    // One day of virtual time in ms is far below 2^53: whole-ms checks are exact here.
    if !s.is_finite() || ms < 1.0 || ms.fract() != 0.0 || ms > 1e15 {
        return Err(bad());
    }
    Ok(ms as u64 * 1_000_000)
}

/// The objects of one simulated worker whose metrics are read.
pub struct Objects<'a> {
    /// Its breaker (with no breaker configured, the disabled one its policy runs with).
    pub breaker: &'a Breaker,
    /// Its policy, with a budget configured: the retry series.
    pub policy: Option<&'a Policy>,
    /// Its retry quota, if configured.
    pub quota: Option<&'a RetryQuota>,
}

/// One series: what is written before its value, once per format.
struct Series {
    /// `"series":...,"name":...,"attributes":{...}` for a JSON row.
    json: String,
    /// The name, and the attributes as `k=v,...` (sorted by key; empty when none).
    name: &'static str,
    attributes: String,
}

fn series_of(sample: &Sample, worker: Option<usize>) -> Series {
    let mut attrs: Vec<(&str, String)> = sample
        .attribute_pair()
        .map(|(k, v)| (k, v.to_string()))
        .into_iter()
        .collect();
    if let Some(w) = worker {
        attrs.push(("worker", w.to_string()));
    }
    attrs.sort();
    let attributes = attrs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let series = if attributes.is_empty() {
        sample.name().to_string()
    } else {
        format!("{}{{{attributes}}}", sample.name())
    };
    let object: serde_json::Map<String, serde_json::Value> = attrs
        .into_iter()
        .map(|(k, v)| (k.to_string(), serde_json::Value::String(v)))
        .collect();
    let json = format!(
        "\"series\":{},\"name\":{},\"attributes\":{}",
        serde_json::Value::String(series),
        serde_json::Value::String(sample.name().to_string()),
        serde_json::Value::Object(object)
    );
    Series {
        json,
        name: sample.name(),
        attributes,
    }
}

/// Seconds from nanoseconds, as the shortest decimal (`1`, `1.5`, `0.001`): never an exponent,
/// so valid in JSON and CSV alike.
fn seconds(ns: u64) -> String {
    if ns % 1_000_000_000 == 0 {
        return (ns / 1_000_000_000).to_string();
    }
    format!("{}", ns as f64 / 1e9)
}

/// A value as the shortest decimal that reads back the same (`3`, `180.5`).
fn number(v: f64) -> String {
    format!("{v}")
}

enum Out {
    Json { w: BufWriter<File>, first: bool },
    // Boxed: the CSV writer carries its own buffers.
    Csv(Box<csv::Writer<BufWriter<File>>>),
}

/// Reads the simulated objects' metrics over virtual time and writes the rows to the file.
pub struct Sampler {
    path: PathBuf,
    out: Out,
    interval: u64,
    /// The next periodic sample time, ns.
    next: u64,
    /// Whether anything happened since the last read.
    dirty: bool,
    workers: usize,
    series: Vec<Series>,
    last: Vec<f64>,
    /// The first read's values, written as the rows at 0 unless the run ends at 0.
    initial: Option<Vec<f64>>,
    buf: Vec<Sample>,
    /// Which worker each sample of `buf` belongs to.
    owner: Vec<usize>,
    /// Whether the end was written; a run that stopped on an error leaves no partial file.
    finished: bool,
}

impl Drop for Sampler {
    fn drop(&mut self) {
        if !self.finished {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Sampler {
    /// Creates `path` (truncating it) for a run of `workers` workers of scenario `scenario`,
    /// sampled every `interval` ns. Errors: the extension is not `.json`/`.csv`, or the file
    /// cannot be created (both name `--metrics`).
    pub fn create(path: &Path, interval: u64, scenario: &str, workers: usize) -> Result<Sampler, CliError> {
        let format = Format::of(path)?;
        let file = File::create(path)
            .map_err(|e| CliError::in_file(path, format!("cannot create the file: {e}")).field(FLAG))?;
        let w = BufWriter::new(file);
        let mut s = Sampler {
            path: path.to_path_buf(),
            out: match format {
                Format::Json => Out::Json { w, first: true },
                Format::Csv => Out::Csv(Box::new(csv::Writer::from_writer(w))),
            },
            interval: interval.max(1),
            next: interval.max(1),
            dirty: false,
            workers,
            series: Vec::new(),
            last: Vec::new(),
            initial: None,
            buf: Vec::with_capacity(64 * workers),
            owner: Vec::with_capacity(64 * workers),
            finished: false,
        };
        match &mut s.out {
            Out::Json { w, .. } => {
                let head = format!(
                    "{{\"scenario\":{},\"interval_s\":{},\"workers\":{},\"rows\":[",
                    serde_json::Value::String(scenario.to_string()),
                    seconds(s.interval),
                    workers
                );
                w.write_all(head.as_bytes())
                    .map_err(|e| write_error(&s.path, e))?;
            }
            Out::Csv(w) => w
                .write_record(["t_s", "name", "attributes", "value"])
                .map_err(|e| csv_error(&s.path, e))?,
        }
        Ok(s)
    }

    fn read(&mut self, objects: &[Objects<'_>]) {
        self.buf.clear();
        self.owner.clear();
        for (i, o) in objects.iter().enumerate() {
            o.breaker.metrics(&mut self.buf);
            if let Some(p) = o.policy {
                p.metrics(&mut self.buf);
            }
            if let Some(q) = o.quota {
                q.metrics(&mut self.buf);
            }
            self.owner.resize(self.buf.len(), i);
        }
    }

    /// The first read, right after the objects are built: it starts their counting.
    pub fn begin(&mut self, objects: &[Objects<'_>]) {
        self.read(objects);
        let several = self.workers > 1;
        self.series = self
            .buf
            .iter()
            .zip(&self.owner)
            .map(|(s, &w)| series_of(s, several.then_some(w)))
            .collect();
        let values: Vec<f64> = self.buf.iter().map(|s| s.value).collect();
        self.last = values.clone();
        self.initial = Some(values);
    }

    /// Whether a periodic sample is due before an event at `t` ns.
    pub fn due(&self, t: u64) -> bool {
        self.next < t
    }

    /// Before an event at `t`: writes the periodic samples due before `t` (only the first
    /// after something happened: later ones would repeat it), then notes that something
    /// happens at `t`.
    pub fn catch_up(&mut self, t: u64, objects: &[Objects<'_>]) -> Result<(), CliError> {
        self.flush_initial()?;
        while self.next < t {
            if self.dirty {
                self.sample(self.next, objects, false)?;
                self.dirty = false;
                self.next += self.interval;
            } else {
                // Nothing happened since the last read: the values have not changed.
                self.next = t.div_ceil(self.interval) * self.interval;
            }
        }
        self.dirty = true;
        Ok(())
    }

    /// Notes that an event is processed at a time when no sample is due.
    pub fn touch(&mut self) {
        self.dirty = true;
    }

    /// The end of the run at `end` ns: the samples due before it, then every series at `end`.
    pub fn finish(&mut self, end: u64, objects: &[Objects<'_>]) -> Result<(), CliError> {
        if end == 0 {
            // A run that ends at 0: its one set of rows is the end's.
            self.initial = None;
        }
        self.catch_up(end, objects)?;
        self.sample(end, objects, true)?;
        let path = &self.path;
        match &mut self.out {
            Out::Json { w, .. } => {
                let tail = format!("\n],\"end_s\":{}}}\n", seconds(end));
                w.write_all(tail.as_bytes()).map_err(|e| write_error(path, e))?;
                w.flush().map_err(|e| write_error(path, e))?;
            }
            Out::Csv(w) => w.flush().map_err(|e| write_error(path, e))?,
        }
        self.finished = true;
        Ok(())
    }

    fn flush_initial(&mut self) -> Result<(), CliError> {
        if let Some(values) = self.initial.take() {
            for (i, v) in values.iter().enumerate() {
                self.row(0, i, *v)?;
            }
        }
        Ok(())
    }

    fn sample(&mut self, t: u64, objects: &[Objects<'_>], all: bool) -> Result<(), CliError> {
        self.read(objects);
        if self.buf.len() != self.series.len() {
            return Err(CliError::msg(
                "internal error: the number of metric series changed during the run",
            ));
        }
        for i in 0..self.buf.len() {
            let v = self.buf[i].value;
            if all || v.to_bits() != self.last[i].to_bits() {
                self.last[i] = v;
                self.row(t, i, v)?;
            }
        }
        Ok(())
    }

    fn row(&mut self, t: u64, i: usize, v: f64) -> Result<(), CliError> {
        let s = &self.series[i];
        match &mut self.out {
            Out::Json { w, first } => {
                let sep = if *first { "\n" } else { ",\n" };
                *first = false;
                write!(
                    w,
                    "{sep}{{\"t_s\":{},{},\"value\":{}}}",
                    seconds(t),
                    s.json,
                    number(v)
                )
                .map_err(|e| write_error(&self.path, e))
            }
            Out::Csv(w) => w
                .write_record([
                    seconds(t).as_str(),
                    s.name,
                    s.attributes.as_str(),
                    number(v).as_str(),
                ])
                .map_err(|e| csv_error(&self.path, e)),
        }
    }
}

fn write_error(path: &Path, e: std::io::Error) -> CliError {
    CliError::in_file(path, format!("cannot write the file: {e}")).field(FLAG)
}

fn csv_error(path: &Path, e: csv::Error) -> CliError {
    CliError::in_file(path, format!("cannot write the file: {e}")).field(FLAG)
}
