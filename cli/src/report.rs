//! Output: the summary (text or JSON), the timeline (text or JSON, streamed), and the side by
//! side comparison.
//!
//! Runs of refusals with nothing else in between are folded into one timeline line ("refused
//! 59 calls from .. to .."), so a timeline stays readable and small however many callers there
//! are.

use holdoff::interop::Coded;
use std::io::Write;

use serde::Serialize;

use crate::error::CliError;
use crate::sim::{Event, Ms, Sink, Summary, Then, WorkerSummary};

/// `h:mm:ss.mmm` of a virtual time in ns.
pub fn clock(ns: u64) -> String {
    let ms = ns / 1_000_000;
    let (h, m, s, frac) = (ms / 3_600_000, (ms / 60_000) % 60, (ms / 1000) % 60, ms % 1000);
    format!("{h}:{m:02}:{s:02}.{frac:03}")
}

/// A duration in ns as `250 ms`, `180 s`, `30 min`, `2.5 h`.
pub fn human(ns: u64) -> String {
    let ms = ns as f64 / 1e6;
    if ms < 1000.0 {
        format!("{} ms", trim(ms))
    } else if ms < 600_000.0 {
        format!("{} s", trim(ms / 1000.0))
    } else if ms < 7_200_000.0 {
        format!("{} min", trim(ms / 60_000.0))
    } else {
        format!("{} h", trim(ms / 3_600_000.0))
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn io(e: std::io::Error) -> CliError {
    crate::error::output_error(e)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Refused,
    Sent,
}

struct Run {
    kind: Kind,
    first: u64,
    last: u64,
    count: u64,
    gave_up: u64,
    waiting: u64,
    retry_after: Option<u64>,
    /// Sent requests by outcome: ok, answer, failed, rate-limited, timed out.
    outcomes: [u64; 5],
}

/// Folds consecutive refusals, and consecutive plain requests, into runs.
#[derive(Default)]
struct Folder {
    run: Option<Run>,
}

impl Folder {
    /// Adds `ev`; returns a finished run when `ev` does not extend it (or `ev` is `None`).
    fn push(&mut self, ev: Option<&Event>) -> Option<Run> {
        let (kind, t) = match ev {
            Some(Event::Refused { t, .. }) => (Kind::Refused, *t),
            Some(Event::Sent { t, .. }) => (Kind::Sent, *t),
            _ => return self.run.take(),
        };
        let done = match &self.run {
            Some(r) if r.kind != kind => self.run.take(),
            _ => None,
        };
        let r = self.run.get_or_insert(Run {
            kind,
            first: t,
            last: t,
            count: 0,
            gave_up: 0,
            waiting: 0,
            retry_after: None,
            outcomes: [0; 5],
        });
        r.last = t;
        r.count += 1;
        match ev {
            Some(Event::Refused {
                retry_after, then, ..
            }) => {
                r.retry_after = *retry_after;
                match then {
                    Then::GaveUp => r.gave_up += 1,
                    Then::Waits => r.waiting += 1,
                    Then::Stopped => {}
                }
            }
            Some(Event::Sent { outcome, .. }) => {
                let i = match *outcome {
                    "success" => 0,
                    "answer" => 1,
                    "retry_later" => 3,
                    "timeout" => 4,
                    _ => 2,
                };
                r.outcomes[i] += 1;
            }
            _ => {}
        }
        done
    }
}

fn outcome_notes(o: &[u64; 5]) -> Vec<String> {
    ["ok", "answer", "failed", "rate-limited", "timed out"]
        .iter()
        .zip(o)
        .filter(|(_, n)| **n > 0)
        .map(|(name, n)| format!("{n} {name}"))
        .collect()
}

/// `worker 3: ` when a timeline line names its worker.
fn of_worker(w: Option<u32>) -> String {
    w.map_or_else(String::new, |w| format!("worker {w}: "))
}

/// The timeline as text lines.
pub struct TextSink<W: Write> {
    out: W,
    folder: Folder,
}

impl<W: Write> TextSink<W> {
    /// Writes to `out`.
    pub fn new(out: W) -> Self {
        TextSink {
            out,
            folder: Folder::default(),
        }
    }

    fn write_run(&mut self, r: Run) -> Result<(), CliError> {
        let (one, many) = match r.kind {
            Kind::Refused => ("refused 1 call", "refused {} calls"),
            Kind::Sent => (
                "1 request reached the upstream",
                "{} requests reached the upstream",
            ),
        };
        let what = if r.count == 1 {
            one.to_string()
        } else if r.first == r.last {
            many.replace("{}", &r.count.to_string())
        } else {
            format!(
                "{} until {}",
                many.replace("{}", &r.count.to_string()),
                clock(r.last)
            )
        };
        let mut notes = outcome_notes(&r.outcomes);
        if r.gave_up > 0 {
            notes.push(format!("{} gave up: breaker_open", r.gave_up));
        }
        if r.waiting > 0 {
            notes.push(format!("{} wait for the breaker", r.waiting));
        }
        if let (Some(d), 1) = (r.retry_after, r.count) {
            notes.push(format!("next probe in {}", human(d)));
        }
        let tail = if notes.is_empty() {
            String::new()
        } else {
            format!(" ({})", notes.join("; "))
        };
        writeln!(self.out, "{}  {what}{tail}", clock(r.first)).map_err(io)
    }

    /// Flushes a pending run of refusals.
    pub fn finish(&mut self) -> Result<(), CliError> {
        if let Some(r) = self.folder.push(None) {
            self.write_run(r)?;
        }
        self.out.flush().map_err(io)
    }
}

impl<W: Write> Sink for TextSink<W> {
    fn event(&mut self, ev: Event) -> Result<(), CliError> {
        if let Some(r) = self.folder.push(Some(&ev)) {
            self.write_run(r)?;
        }
        let line = match ev {
            Event::Refused { .. } | Event::Sent { .. } => return Ok(()),
            Event::State {
                t,
                worker,
                from,
                to,
                reason,
                episode,
                open_for,
            } => {
                let extra = match open_for {
                    Some(d) => format!(", next probe in {}", human(d)),
                    None => String::new(),
                };
                format!(
                    "{}  {}breaker {} -> {} ({}, episode {episode}{extra})",
                    clock(t),
                    of_worker(worker),
                    from.name(),
                    to.name(),
                    reason.name()
                )
            }
            Event::Probe { t, call, worker } => {
                format!("{}  {}probe: call {call} admitted", clock(t), of_worker(worker))
            }
            Event::ProbeAnswer {
                t,
                call,
                status,
                outcome,
            } => match status {
                Some(s) => format!("{}  probe answer: call {call} got {s} ({outcome})", clock(t)),
                None => format!("{}  probe answer: call {call} timed out", clock(t)),
            },
            Event::Wait {
                t,
                call,
                delay,
                source,
                status,
            } => {
                let why = match status {
                    Some(s) => format!("after {s}, "),
                    None => String::new(),
                };
                format!(
                    "{}  wait: call {call} retries in {} ({why}{source})",
                    clock(t),
                    human(delay)
                )
            }
            Event::GiveUp {
                t,
                call,
                reason,
                attempts,
            } => format!(
                "{}  give up: call {call} after {attempts} request{} ({reason})",
                clock(t),
                if attempts == 1 { "" } else { "s" }
            ),
            Event::Recovered { t } => format!("{}  upstream answering again", clock(t)),
        };
        writeln!(self.out, "{line}").map_err(io)
    }
}

/// The timeline as a JSON array written element by element.
pub struct JsonSink<W: Write> {
    out: W,
    folder: Folder,
    first: bool,
}

impl<W: Write> JsonSink<W> {
    /// Writes the elements to `out` (the caller writes the brackets around them).
    pub fn new(out: W) -> Self {
        JsonSink {
            out,
            folder: Folder::default(),
            first: true,
        }
    }

    fn write(&mut self, v: &JsonEvent) -> Result<(), CliError> {
        if !self.first {
            self.out.write_all(b",\n").map_err(io)?;
        }
        self.first = false;
        serde_json::to_writer(&mut self.out, v).map_err(|e| CliError::msg(e.to_string()))
    }

    fn write_run(&mut self, r: Run) -> Result<(), CliError> {
        if r.kind == Kind::Sent {
            let [ok, answer, failed, rate_limited, timed_out] = r.outcomes;
            let nz = |n: u64| (n > 0).then_some(n);
            return self.write(&JsonEvent {
                t_ms: Ms(r.first),
                event: "requests",
                count: Some(r.count),
                until_ms: Some(Ms(r.last)),
                ok: nz(ok),
                answer: nz(answer),
                failed: nz(failed),
                rate_limited: nz(rate_limited),
                timed_out: nz(timed_out),
                ..JsonEvent::default()
            });
        }
        self.write(&JsonEvent {
            t_ms: Ms(r.first),
            event: "refused",
            count: Some(r.count),
            until_ms: Some(Ms(r.last)),
            retry_after_ms: r.retry_after.map(Ms),
            gave_up: (r.gave_up > 0).then_some(r.gave_up),
            waiting: (r.waiting > 0).then_some(r.waiting),
            ..JsonEvent::default()
        })
    }

    /// Flushes a pending run of refusals.
    pub fn finish(&mut self) -> Result<(), CliError> {
        if let Some(r) = self.folder.push(None) {
            self.write_run(r)?;
        }
        self.out.flush().map_err(io)
    }

    /// The writer back.
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// One timeline element as JSON: `t_ms` and `event` first, then what the event has.
#[derive(Serialize, Default)]
struct JsonEvent {
    t_ms: Ms,
    event: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    call: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    worker: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    from: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    to: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    episode: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    open_for_ms: Option<Ms>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    delay_ms: Option<Ms>,
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    attempts: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    count: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    until_ms: Option<Ms>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_after_ms: Option<Ms>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gave_up: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    waiting: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ok: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    answer: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    failed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rate_limited: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timed_out: Option<u64>,
}

impl<W: Write> Sink for JsonSink<W> {
    fn event(&mut self, ev: Event) -> Result<(), CliError> {
        if let Some(r) = self.folder.push(Some(&ev)) {
            self.write_run(r)?;
        }
        let v = match ev {
            Event::Refused { .. } | Event::Sent { .. } => return Ok(()),
            Event::State {
                t,
                worker,
                from,
                to,
                reason,
                episode,
                open_for,
            } => JsonEvent {
                t_ms: Ms(t),
                event: "state",
                worker,
                from: Some(from.name()),
                to: Some(to.name()),
                reason: Some(reason.name()),
                episode: Some(episode),
                open_for_ms: open_for.map(Ms),
                ..JsonEvent::default()
            },
            Event::Probe { t, call, worker } => JsonEvent {
                t_ms: Ms(t),
                event: "probe",
                call: Some(call),
                worker,
                ..JsonEvent::default()
            },
            Event::ProbeAnswer {
                t,
                call,
                status,
                outcome,
            } => JsonEvent {
                t_ms: Ms(t),
                event: "probe_answer",
                call: Some(call),
                status,
                outcome: Some(outcome),
                ..JsonEvent::default()
            },
            Event::Wait {
                t,
                call,
                delay,
                source,
                status,
            } => JsonEvent {
                t_ms: Ms(t),
                event: "wait",
                call: Some(call),
                delay_ms: Some(Ms(delay)),
                source: Some(source),
                status,
                ..JsonEvent::default()
            },
            Event::GiveUp {
                t,
                call,
                reason,
                attempts,
            } => JsonEvent {
                t_ms: Ms(t),
                event: "give_up",
                call: Some(call),
                reason: Some(reason),
                attempts: Some(attempts),
                ..JsonEvent::default()
            },
            Event::Recovered { t } => JsonEvent {
                t_ms: Ms(t),
                event: "upstream_recovered",
                ..JsonEvent::default()
            },
        };
        self.write(&v)
    }
}

fn opt_ms(v: Option<Ms>) -> String {
    match v {
        Some(m) => human(m.0),
        None => "-".into(),
    }
}

fn reasons(m: &std::collections::BTreeMap<String, u64>) -> String {
    if m.is_empty() {
        return "-".into();
    }
    m.iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether a summary is of a fleet (several workers, or a shared store): its text then has the
/// fleet rows and the per-worker table.
pub fn is_fleet(s: &Summary) -> bool {
    s.workers > 1 || s.fleet == "shared"
}

/// Requests that reached the upstream and did not get a usable answer (failed, rate-limited,
/// timed out): the requests sent during an outage or a rate limit.
pub fn failed_requests(s: &Summary) -> u64 {
    let o = &s.upstream_outcomes;
    o.failure + o.retry_later + o.timeout
}

/// The summary as (label, value) rows, in display order; `fleet` adds the fleet rows.
pub fn rows(s: &Summary, fleet: bool) -> Vec<(&'static str, String)> {
    let o = &s.upstream_outcomes;
    let mut r = vec![
        ("calls", s.calls.to_string()),
        ("upstream requests", s.upstream_requests.to_string()),
        (
            "  by outcome",
            format!(
                "{} ok, {} answer, {} failed, {} rate-limited, {} timed out",
                o.success, o.answer, o.failure, o.retry_later, o.timeout
            ),
        ),
        ("refused by the breaker", s.refused.to_string()),
        ("opens", s.opens.to_string()),
        ("closes", s.closes.to_string()),
        ("premature closes", s.premature_closes.to_string()),
        ("probes", s.probes.to_string()),
        (
            "largest burst after a close",
            s.largest_burst_after_close.to_string(),
        ),
        (
            "upstream recovered at",
            s.upstream_recovered_at_ms.map_or("-".into(), |m| clock(m.0)),
        ),
        ("recovery to close", opt_ms(s.recovery_to_close_ms)),
        ("give-ups", s.give_ups.to_string()),
        ("  by reason", reasons(&s.give_ups_by_reason)),
        ("rate-limit give-ups", s.rate_limit_give_ups.to_string()),
        ("  by reason", reasons(&s.rate_limit_give_ups_by_reason)),
        (
            "retries (waits)",
            format!("{} ({} in all)", s.retries, human(s.wait_ms_total.0)),
        ),
        ("rate-limit episodes", s.rate_limit_episodes.to_string()),
        (
            "budget spent (most of one episode)",
            match (s.budget_spent_ms, s.budget_ms) {
                (Some(sp), Some(b)) => format!("{} of {}", human(sp.0), human(b.0)),
                (None, Some(b)) => format!("0 of {}", human(b.0)),
                _ => "-".into(),
            },
        ),
        (
            "calls ok / answered / failed",
            format!(
                "{} / {} / {}",
                s.calls_succeeded, s.calls_answered, s.calls_failed
            ),
        ),
    ];
    if let Some(q) = s.quota_low_water {
        r.push(("retry quota low water", q.to_string()));
    }
    if s.queued > 0 {
        r.push(("queued for a free caller", s.queued.to_string()));
    }
    if s.in_flight_at_end > 0 {
        r.push(("still in progress at the end", s.in_flight_at_end.to_string()));
    }
    if s.malformed_lines_skipped > 0 {
        r.push((
            "malformed trace lines skipped",
            s.malformed_lines_skipped.to_string(),
        ));
    }
    if fleet {
        let how = if s.fleet == "shared" {
            "shared fleet (one record in the store)"
        } else {
            "local breakers (one each)"
        };
        r.push(("workers", format!("{}, {how}", s.workers)));
        r.push(("upstream requests that failed", failed_requests(s).to_string()));
        r.push((
            "requests before a known Retry-After",
            s.requests_before_retry_after.to_string(),
        ));
    }
    r.push(("virtual time simulated", clock(s.end_ms.0)));
    r
}

fn worker_cells(w: Option<&WorkerSummary>) -> [String; 3] {
    match w {
        Some(w) => [
            w.upstream_requests.to_string(),
            w.probes.to_string(),
            w.requests_before_retry_after.to_string(),
        ],
        None => ["-".into(), "-".into(), "-".into()],
    }
}

/// The per-worker table: upstream requests, probes and requests before a known Retry-After of
/// each worker of each summary, then the totals.
pub fn workers_text(runs: &[&Summary]) -> String {
    let n = runs.iter().map(|s| s.per_worker.len()).max().unwrap_or(0);
    let head = ["requests", "probes", "before RA"];
    let mut out = String::from("  per worker");
    for (i, _) in runs.iter().enumerate() {
        let label = if runs.len() > 1 {
            format!("{}: ", (b'A' + i as u8) as char)
        } else {
            String::new()
        };
        out.push_str(&format!(
            "   {label}{:>9} {:>7} {:>10}",
            head[0], head[1], head[2]
        ));
    }
    out.push('\n');
    let pad = if runs.len() > 1 { 3 } else { 0 };
    let line = |name: String, cells: Vec<[String; 3]>| {
        let mut l = format!("    {name:<8}");
        for c in cells {
            l.push_str(&format!("   {:pad$}{:>9} {:>7} {:>10}", "", c[0], c[1], c[2]));
        }
        l.push('\n');
        l
    };
    for i in 0..n {
        out.push_str(&line(
            i.to_string(),
            runs.iter().map(|s| worker_cells(s.per_worker.get(i))).collect(),
        ));
    }
    out.push_str(&line(
        "total".into(),
        runs.iter()
            .map(|s| {
                [
                    s.upstream_requests.to_string(),
                    s.probes.to_string(),
                    s.requests_before_retry_after.to_string(),
                ]
            })
            .collect(),
    ));
    out
}

/// The summary as text.
pub fn summary_text(s: &Summary, description: Option<&str>) -> String {
    let mut out = format!("== {} (config: {}) ==\n", s.scenario, s.config);
    if let Some(d) = description {
        out.push_str(&format!("{d}\n"));
    }
    let fleet = is_fleet(s);
    let rows = rows(s, fleet);
    let w = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    for (k, v) in rows {
        out.push_str(&format!("  {k:<w$}  {v}\n"));
    }
    if fleet {
        out.push_str(&workers_text(&[s]));
    }
    out
}

/// One sentence comparing two fleets: the upstream requests that failed (sent during the
/// outage or rate limit) and the requests before a known Retry-After.
pub fn fleet_headline(a: &Summary, b: &Summary) -> String {
    let (fa, fb) = (failed_requests(a), failed_requests(b));
    let share = if fb == 0 {
        "none".to_string()
    } else {
        format!("1/{:.1}", fa as f64 / fb as f64)
    };
    format!(
        "  while the upstream failed, B sent {fb} requests, {share} of A's {fa}; before a known \
         Retry-After, B sent {} and A {}\n",
        b.requests_before_retry_after, a.requests_before_retry_after
    )
}

/// Two summaries side by side; rows that differ are marked.
pub fn compare_text(a: &Summary, b: &Summary, scenario: &str) -> String {
    let fleet = is_fleet(a) || is_fleet(b);
    let ra = rows(a, fleet);
    let rb = rows(b, fleet);
    let name = |p: &str| {
        std::path::Path::new(p)
            .file_name()
            .map_or_else(|| p.to_string(), |n| n.to_string_lossy().to_string())
    };
    let (na, nb) = (name(&a.config), name(&b.config));
    let w = ra.iter().map(|r| r.0.len()).max().unwrap_or(0);
    let wa = ra.iter().map(|r| r.1.len()).chain([na.len()]).max().unwrap_or(0);
    let mut out = format!(
        "== compare on {scenario}: A = {}, B = {} ==\n",
        a.config, b.config
    );
    out.push_str(&format!("    {:<w$}  {:<wa$}  {}\n", "", na, nb));
    for ((k, va), (_, vb)) in ra.iter().zip(rb.iter()) {
        let mark = if va != vb { "*" } else { " " };
        out.push_str(&format!("  {mark} {k:<w$}  {va:<wa$}  {vb}\n"));
    }
    out.push_str("  (* rows that differ)\n");
    if fleet {
        out.push_str(&workers_text(&[a, b]));
        out.push_str(&fleet_headline(a, b));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_and_human() {
        assert_eq!(clock(3_723_004_000_000), "1:02:03.004");
        assert_eq!(human(180_000_000_000), "180 s");
        assert_eq!(human(1_800_000_000_000), "30 min");
        assert_eq!(human(59_000_000_000), "59 s");
        assert_eq!(human(250_000_000), "250 ms");
    }

    #[test]
    fn refusals_fold_into_one_line() {
        let mut out = Vec::new();
        let mut s = TextSink::new(&mut out);
        for k in 1..=3u64 {
            s.event(Event::Refused {
                t: k * 1_000_000_000,
                call: k,
                retry_after: Some(1),
                then: Then::Stopped,
            })
            .unwrap();
        }
        s.event(Event::Probe {
            t: 60_000_000_000,
            call: 9,
            worker: None,
        })
        .unwrap();
        s.finish().unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "0:00:01.000  refused 3 calls until 0:00:03.000\n0:01:00.000  probe: call 9 admitted\n"
        );
    }
}
