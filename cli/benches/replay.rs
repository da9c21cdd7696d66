//! A replay of ten million calls (a `cargo bench -p holdoff-cli` run, not a timed test).
//!
//! 1. Trace replay: writes a 10-million-line CSV trace (one call a millisecond, 2.8 hours,
//!    with a 10-minute outage of 503s and a 5-minute stretch of 429s with Retry-After), then
//!    replays it with one caller per record through a policy (breaker + budget, the core's
//!    defaults), streaming the file.
//! 2. Model replay: ten million calls from a rate source against a phased upstream, no I/O.
//!
//! Prints the wall time, calls per second and peak memory (VmHWM) after a one-million-call run
//! and after the ten-million-call run: the trace is streamed, so memory stays flat.
//! `HOLDOFF_BENCH_CALLS` overrides the ten million.

use std::io::{BufWriter, Write};
use std::time::Instant;

use holdoff_cli::scenario;
use holdoff_cli::sim::{self, Options};

fn peak_rss_mib() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// User + system CPU seconds of this process so far (the machine may be shared, so wall time
/// alone can mislead).
fn cpu_secs() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 of stat(5), counted from the state field (3): utime, stime in ticks.
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

fn write_trace(path: &std::path::Path, n: u64) {
    let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(path).unwrap());
    writeln!(w, "t_ms,status,retry_after").unwrap();
    for i in 0..n {
        // One record a millisecond; t in seconds decides the phase.
        let s = i / 1000;
        let (status, ra) = if (1000..1600).contains(&s) {
            (503, "")
        } else if (5000..5300).contains(&s) {
            (429, "2")
        } else {
            (200, "")
        };
        writeln!(w, "{i},{status},{ra}").unwrap();
    }
    w.flush().unwrap();
}

fn replay(dir: &std::path::Path, scenario_text: &str, label: &str) {
    let path = dir.join("scenario.toml");
    std::fs::write(&path, scenario_text).unwrap();
    let scn = scenario::load(&path).unwrap();
    let cpu0 = cpu_secs().unwrap_or(f64::NAN);
    let start = Instant::now();
    let run = sim::run(&scn, Options::default(), None).unwrap();
    let secs = start.elapsed().as_secs_f64();
    let cpu = cpu_secs().unwrap_or(f64::NAN) - cpu0;
    let s = &run.summary;
    println!(
        "{label:<34} {:>9} calls {:>9} upstream {:>9} refused {:>3} opens | wall {:>6.2} s, cpu {:>6.2} s, {:>5.2} M calls/s (cpu) | peak RSS {:.0} MiB",
        s.calls,
        s.upstream_requests,
        s.refused,
        s.opens,
        secs,
        cpu,
        s.calls as f64 / cpu / 1e6,
        peak_rss_mib().unwrap_or(f64::NAN)
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing: run small then.
    let bench = std::env::args().any(|a| a == "--bench");
    let n: u64 = std::env::var("HOLDOFF_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if bench { 10_000_000 } else { 10_000 });
    let dir = tempfile::tempdir().unwrap();
    let config = "[config.breaker]\n[config.budget]\n";
    for (label, calls) in [("(1/10 of the calls)", (n / 10).max(1)), ("", n)] {
        let trace = dir.path().join(format!("trace-{calls}.csv"));
        let t0 = Instant::now();
        write_trace(&trace, calls);
        let wrote = t0.elapsed().as_secs_f64();
        let size = std::fs::metadata(&trace).map(|m| m.len()).unwrap_or(0);
        println!(
            "wrote {calls} trace lines ({:.0} MiB) in {wrote:.1} s",
            size as f64 / 1048576.0
        );
        let file = trace.file_name().unwrap().to_string_lossy().to_string();
        let tail = format!("[callers]\nfrom_trace = true\n[upstream.trace]\nfile = \"{file}\"\n");
        replay(
            dir.path(),
            &format!("[config.breaker]\n{tail}"),
            &format!("trace, breaker {label}"),
        );
        replay(
            dir.path(),
            &format!("{config}{tail}"),
            &format!("trace, breaker + budget {label}"),
        );
        std::fs::remove_file(&trace).ok();
    }
    let to_ms = n; // one call a millisecond
    replay(
        dir.path(),
        &format!(
            "{config}[[callers.arrivals]]\nkind = \"rate\"\nevery_ms = 1\nto_ms = {}\n\
             [[upstream.phases]]\nfrom_ms = 0\nto_ms = 1000000\nstatus = 200\n\
             [[upstream.phases]]\nfrom_ms = 1000000\nto_ms = 1600000\nstatus = 503\n\
             [[upstream.phases]]\nfrom_ms = 1600000\nstatus = 200\n",
            to_ms.saturating_sub(1)
        ),
        "model, breaker + budget",
    );
}
