//! Arguments (clap) and the two commands.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand};

use crate::error::CliError;
use crate::metrics::Sampler;
use crate::report::{compare_text, summary_text, JsonSink, TextSink};
use crate::scenario::{self, Scenario};
use crate::sim::{self, Options, Run, Sink};

/// Replay an outage against a circuit breaker and retry budget on a virtual clock.
#[derive(Debug, Parser)]
#[command(name = "holdoff", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one scenario and print its summary (and timeline, and charts).
    Simulate(SimulateArgs),
    /// Run one scenario with two configurations and print the summaries side by side.
    Compare(CompareArgs),
}

#[derive(Debug, Args)]
struct Common {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Skip malformed trace lines (each reported on stderr with its line number) instead of
    /// stopping at the first one.
    #[arg(long)]
    skip_malformed: bool,
}

#[derive(Debug, Args)]
struct SimulateArgs {
    /// Scenario file (.toml or .json).
    scenario: PathBuf,
    /// Use this configuration file instead of the scenario's `config`.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Also print the timeline: state changes, probes, refusals, waits and give-ups.
    #[arg(long)]
    timeline: bool,
    /// Write a chart (.svg or .png); may be given more than once.
    #[arg(long, value_name = "FILE")]
    plot: Vec<PathBuf>,
    /// Write the metric series (docs/metrics.md) over virtual time: .json or .csv.
    #[arg(long, value_name = "FILE")]
    metrics: Option<PathBuf>,
    /// Virtual seconds between two metric samples (a whole number of milliseconds); default 1.
    #[arg(long, value_name = "SECONDS", allow_hyphen_values = true)]
    metrics_interval: Option<String>,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, Args)]
struct CompareArgs {
    /// First configuration file (.toml or .json, the neutral config format).
    a: PathBuf,
    /// Second configuration file.
    b: PathBuf,
    /// The scenario to replay with each.
    #[arg(long, value_name = "FILE")]
    scenario: PathBuf,
    /// Write each run's chart: PREFIX-a.svg and PREFIX-b.svg (or .png when PREFIX ends so).
    #[arg(long, value_name = "PREFIX")]
    plot: Option<PathBuf>,
    #[command(flatten)]
    common: Common,
}

fn io(e: std::io::Error) -> CliError {
    crate::error::output_error(e)
}

/// Parses `std::env::args` and runs. Usage errors exit with code 2 through clap.
pub fn main() -> Result<(), CliError> {
    let cli = Cli::parse();
    match cli.command {
        Command::Simulate(a) => simulate(a),
        Command::Compare(a) => compare(a),
    }
}

fn with_config(mut s: Scenario, path: &Path) -> Result<Scenario, CliError> {
    s.config = scenario::load_config(path)?;
    s.config_origin = path.to_path_buf();
    Ok(s)
}

fn simulate(a: SimulateArgs) -> Result<(), CliError> {
    let mut scn = scenario::load(&a.scenario)?;
    if let Some(c) = &a.config {
        scn = with_config(scn, c)?;
    }
    for p in &a.plot {
        check_plot_path(p)?;
    }
    let mut sampler = metrics_sampler(&a, &scn)?;
    let opts = Options {
        skip_malformed: a.common.skip_malformed,
        chart: !a.plot.is_empty(),
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let run = if a.common.json {
        write!(
            out,
            "{{\"scenario\":{},\"description\":{}",
            serde_json::to_string(&scn.name).unwrap_or_default(),
            serde_json::to_string(&scn.description).unwrap_or_default()
        )
        .map_err(io)?;
        let run = if a.timeline {
            out.write_all(b",\"timeline\":[\n").map_err(io)?;
            let mut sink = JsonSink::new(&mut out);
            let run = sim::run_sampled(&scn, opts, Some(&mut sink as &mut dyn Sink), sampler.as_mut())?;
            sink.finish()?;
            out.write_all(b"\n]").map_err(io)?;
            run
        } else {
            sim::run_sampled(&scn, opts, None, sampler.as_mut())?
        };
        let summary = serde_json::to_string_pretty(&run.summary).map_err(|e| CliError::msg(e.to_string()))?;
        writeln!(out, ",\"summary\":{summary}}}").map_err(io)?;
        run
    } else {
        let run = if a.timeline {
            writeln!(out, "== timeline of {} ==", scn.name).map_err(io)?;
            let mut sink = TextSink::new(&mut out);
            let run = sim::run_sampled(&scn, opts, Some(&mut sink as &mut dyn Sink), sampler.as_mut())?;
            sink.finish()?;
            run
        } else {
            sim::run_sampled(&scn, opts, None, sampler.as_mut())?
        };
        write!(out, "{}", summary_text(&run.summary, scn.description.as_deref())).map_err(io)?;
        run
    };
    out.flush().map_err(io)?;
    if let Some(p) = &a.metrics {
        eprintln!("metrics written to {}", p.display());
    }
    write_plots(&a.plot, &run)
}

/// The sampler `--metrics` asks for (its file created now, so that a bad path fails before the
/// run), or none. Errors name `--metrics` or `--metrics-interval`.
fn metrics_sampler(a: &SimulateArgs, scn: &Scenario) -> Result<Option<Sampler>, CliError> {
    let interval = match &a.metrics_interval {
        Some(text) => crate::metrics::parse_interval(text)?,
        None => 1_000_000_000,
    };
    match &a.metrics {
        Some(p) => Ok(Some(Sampler::create(
            p,
            interval,
            &scn.name,
            scn.workers as usize,
        )?)),
        None if a.metrics_interval.is_some() => {
            Err(CliError::msg("needs --metrics FILE to write the samples to").field("--metrics-interval"))
        }
        None => Ok(None),
    }
}

fn check_plot_path(p: &Path) -> Result<(), CliError> {
    match p
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("svg") | Some("png") => Ok(()),
        _ => Err(CliError::in_file(p, "the chart must be a .svg or .png file").field("--plot")),
    }
}

fn write_plots(paths: &[PathBuf], run: &Run) -> Result<(), CliError> {
    if let Some(chart) = &run.chart {
        for p in paths {
            crate::plot::render(p, &run.summary, chart)?;
            eprintln!("chart written to {}", p.display());
        }
    }
    Ok(())
}

fn compare(a: CompareArgs) -> Result<(), CliError> {
    let base = scenario::load(&a.scenario)?;
    let sa = with_config(base.clone(), &a.a)?;
    let sb = with_config(base, &a.b)?;
    let plots: Option<(PathBuf, PathBuf)> = a.plot.as_ref().map(|p| {
        let s = p.to_string_lossy();
        let (stem, ext) = match s.rsplit_once('.') {
            Some((st, e)) if e.eq_ignore_ascii_case("png") || e.eq_ignore_ascii_case("svg") => {
                (st.to_string(), e.to_string())
            }
            _ => (s.to_string(), "svg".to_string()),
        };
        (
            PathBuf::from(format!("{stem}-a.{ext}")),
            PathBuf::from(format!("{stem}-b.{ext}")),
        )
    });
    let opts = Options {
        skip_malformed: a.common.skip_malformed,
        chart: plots.is_some(),
    };
    let ra = sim::run(&sa, opts, None)?;
    let rb = sim::run(&sb, opts, None)?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if a.common.json {
        let v = serde_json::json!({
            "scenario": sa.name,
            "a": { "config": a.a.display().to_string(), "summary": ra.summary },
            "b": { "config": a.b.display().to_string(), "summary": rb.summary },
        });
        let text = serde_json::to_string_pretty(&v).map_err(|e| CliError::msg(e.to_string()))?;
        writeln!(out, "{text}").map_err(io)?;
    } else {
        write!(out, "{}", compare_text(&ra.summary, &rb.summary, &sa.name)).map_err(io)?;
    }
    out.flush().map_err(io)?;
    if let Some((pa, pb)) = plots {
        write_plots(&[pa], &ra)?;
        write_plots(&[pb], &rb)?;
    }
    Ok(())
}
