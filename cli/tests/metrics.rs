//! `holdoff simulate --metrics`: the core's metric series over virtual time agree with the
//! summary of the same run, sample by sample where the scenario fixes the time.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{fails, holdoff, json};
use holdoff::metrics::METRICS;
use serde_json::Value;

/// One row of a metrics file.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    t: f64,
    series: String,
    value: f64,
}

/// Runs `holdoff simulate ARGS --json --metrics FILE`: the summary and the file's rows.
fn run(args: &[&str], file: &Path) -> (Value, Vec<Row>) {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--metrics", file.to_str().unwrap()]);
    let doc = json(&all);
    let text = std::fs::read_to_string(file).unwrap();
    let rows = if file.extension().unwrap() == "json" {
        json_rows(&text)
    } else {
        csv_rows(&text)
    };
    (doc["summary"].clone(), rows)
}

fn json_rows(text: &str) -> Vec<Row> {
    let d: Value = serde_json::from_str(text).unwrap();
    let rows: Vec<Row> = d["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            // The series is the name with the attributes, sorted by key.
            let attrs = r["attributes"].as_object().unwrap();
            let inner: Vec<String> = attrs
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap()))
                .collect();
            let name = r["name"].as_str().unwrap();
            let series = if inner.is_empty() {
                name.to_string()
            } else {
                format!("{name}{{{}}}", inner.join(","))
            };
            assert_eq!(r["series"], series.as_str());
            Row {
                t: r["t_s"].as_f64().unwrap(),
                series,
                value: r["value"].as_f64().unwrap(),
            }
        })
        .collect();
    assert_eq!(d["end_s"].as_f64(), rows.last().map(|r| r.t));
    rows
}

fn csv_rows(text: &str) -> Vec<Row> {
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("t_s,name,attributes,value"));
    let mut rdr = csv::ReaderBuilder::new().from_reader(text.as_bytes());
    rdr.records()
        .map(|r| {
            let r = r.unwrap();
            let series = if r[2].is_empty() {
                r[1].to_string()
            } else {
                format!("{}{{{}}}", &r[1], &r[2])
            };
            Row {
                t: r[0].parse().unwrap(),
                series,
                value: r[3].parse().unwrap(),
            }
        })
        .collect()
}

/// Each series' value at `t`: its latest row at or before `t`.
fn at(rows: &[Row], t: f64) -> BTreeMap<String, f64> {
    let mut m = BTreeMap::new();
    for r in rows.iter().filter(|r| r.t <= t) {
        m.insert(r.series.clone(), r.value);
    }
    m
}

/// The rows at the end: every series has one.
fn end(rows: &[Row]) -> BTreeMap<String, f64> {
    let t = rows.last().unwrap().t;
    rows.iter()
        .filter(|r| r.t == t)
        .map(|r| (r.series.clone(), r.value))
        .collect()
}

/// The rows are in time order, every series has a row at 0 and at the end, and each name and
/// attribute is the core table's.
fn well_formed(rows: &[Row]) {
    assert!(
        rows.windows(2).all(|w| w[0].t <= w[1].t),
        "rows out of time order"
    );
    let first: Vec<&str> = rows
        .iter()
        .filter(|r| r.t == 0.0)
        .map(|r| r.series.as_str())
        .collect();
    let last = end(rows);
    assert_eq!(first.len(), last.len());
    assert!(first.iter().all(|s| last.contains_key(*s)));
    for s in last.keys() {
        let (name, attrs) = s.split_once('{').unwrap_or((s, ""));
        let def = METRICS
            .iter()
            .find(|d| d.name == name)
            .unwrap_or_else(|| panic!("{name}"));
        for pair in attrs.trim_end_matches('}').split(',').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap();
            if k != "worker" {
                assert_eq!(Some(k), def.attribute, "{s}");
                assert!(def.values.contains(&v), "{s}");
            }
        }
    }
}

#[test]
fn blocked_provider_metrics_match_the_summary() {
    let d = tempfile::tempdir().unwrap();
    let (s, rows) = run(
        &["simulate", "scenarios/blocked-provider.toml"],
        &d.path().join("m.json"),
    );
    well_formed(&rows);
    assert_eq!(rows.last().unwrap().t, 6000.0);
    let fin = end(&rows);
    assert_eq!(
        fin["holdoff.breaker.transitions{reason=tripped}"],
        s["opens"].as_f64().unwrap()
    );
    assert_eq!(fin["holdoff.breaker.transitions{reason=tripped}"], 1.0);
    assert_eq!(fin["holdoff.breaker.refused"], s["refused"].as_f64().unwrap());
    assert_eq!(fin["holdoff.breaker.refused"], 5900.0);
    assert_eq!(fin["holdoff.breaker.probes"], s["probes"].as_f64().unwrap());
    assert_eq!(fin["holdoff.breaker.probes"], 100.0);
    assert_eq!(fin["holdoff.breaker.admitted"], 105.0);
    assert_eq!(fin["holdoff.breaker.outcomes{outcome=answer}"], 4.0);
    assert_eq!(fin["holdoff.breaker.outcomes{outcome=failure}"], 101.0);
    assert_eq!(fin["holdoff.breaker.state{state=open}"], 1.0);
    // One breaker, no budget, no quota: the breaker's 24 series and nothing else.
    assert_eq!(fin.len(), 24);
    assert!(fin.keys().all(|k| k.starts_with("holdoff.breaker.")));

    // Counting starts when the breaker is built: at 0 only the state gauge is not zero.
    let zero = at(&rows, 0.0);
    assert_eq!(zero.values().sum::<f64>(), 1.0);
    assert_eq!(zero["holdoff.breaker.state{state=closed}"], 1.0);
    // Five calls at 0 trip it, then one call a second is refused: the sample at 1 s counts
    // the call at 1 s.
    let one = at(&rows, 1.0);
    assert_eq!(one["holdoff.breaker.admitted"], 5.0);
    assert_eq!(one["holdoff.breaker.transitions{reason=tripped}"], 1.0);
    assert_eq!(one["holdoff.breaker.state{state=open}"], 1.0);
    assert_eq!(one["holdoff.breaker.state{state=closed}"], 0.0);
    assert_eq!(one["holdoff.breaker.refused"], 1.0);
    // The first probe is admitted at 60 s exactly: the sample at 60 s counts it, 59 s does not.
    assert_eq!(at(&rows, 59.0)["holdoff.breaker.probes"], 0.0);
    assert_eq!(at(&rows, 59.0)["holdoff.breaker.refused"], 59.0);
    assert_eq!(at(&rows, 60.0)["holdoff.breaker.probes"], 1.0);
    assert_eq!(at(&rows, 60.0)["holdoff.breaker.outcomes{outcome=answer}"], 1.0);
}

#[test]
fn rate_limited_api_retry_series_match_the_summary_in_csv() {
    let d = tempfile::tempdir().unwrap();
    let (s, rows) = run(
        &["simulate", "scenarios/rate-limited-api.json"],
        &d.path().join("m.csv"),
    );
    well_formed(&rows);
    let fin = end(&rows);
    assert_eq!(fin["holdoff.retry.give_ups{reason=budget_spent}"], 2.0);
    assert_eq!(
        fin["holdoff.retry.give_ups{reason=retry_after_exceeds_remaining}"],
        1.0
    );
    for (reason, n) in s["give_ups_by_reason"].as_object().unwrap() {
        assert_eq!(
            fin[&format!("holdoff.retry.give_ups{{reason={reason}}}")],
            n.as_f64().unwrap()
        );
    }
    assert_eq!(
        fin["holdoff.retry.attempts"],
        s["upstream_requests"].as_f64().unwrap()
    );
    assert_eq!(fin["holdoff.retry.attempts"], 28.0);
    assert_eq!(fin["holdoff.retry.retries"], 23.0);
    assert_eq!(
        fin["holdoff.retry.waits{source=retry_after}"],
        s["retries"].as_f64().unwrap()
    );
    // Durations are seconds: the summary's 5 350 000 ms of waits.
    assert_eq!(fin["holdoff.retry.wait.duration{source=retry_after}"], 5350.0);
    assert_eq!(s["wait_ms_total"], 5_350_000);
    // No breaker in the configuration: the policy's is disabled, and reports so.
    assert_eq!(fin["holdoff.breaker.state{state=disabled}"], 1.0);
    assert_eq!(fin["holdoff.breaker.transitions{reason=disabled}"], 0.0);
}

#[test]
fn each_worker_of_a_fleet_has_its_own_series() {
    let d = tempfile::tempdir().unwrap();
    let (s, rows) = run(
        &[
            "simulate",
            "scenarios/fleet-rate-limit.toml",
            "--config",
            "scenarios/configs/fleet-rate-limit.shared.toml",
            "--metrics-interval",
            "10",
        ],
        &d.path().join("m.csv"),
    );
    well_formed(&rows);
    let fin = end(&rows);
    let workers = s["per_worker"].as_array().unwrap();
    assert_eq!(workers.len(), 20);
    assert_eq!(fin.len(), 20 * 24);
    let mut refused = 0.0;
    for w in workers {
        let i = &w["worker"];
        let r = fin[&format!("holdoff.breaker.refused{{worker={i}}}")];
        assert_eq!(r, w["refused"].as_f64().unwrap(), "worker {i}");
        assert_eq!(
            fin[&format!("holdoff.breaker.probes{{worker={i}}}")],
            w["probes"].as_f64().unwrap()
        );
        refused += r;
    }
    assert_eq!(refused, s["refused"].as_f64().unwrap());
    // Samples every 10 s of virtual time, and the end.
    let end_t = rows.last().unwrap().t;
    assert!(rows.iter().all(|r| r.t % 10.0 == 0.0 || r.t == end_t));
}

#[test]
fn a_coarser_interval_gives_the_same_values_at_its_sample_times() {
    let d = tempfile::tempdir().unwrap();
    let args = ["simulate", "scenarios/registry-outage.toml"];
    let (_, fine) = run(&args, &d.path().join("a.json"));
    let mut coarse_args = args.to_vec();
    coarse_args.extend(["--metrics-interval", "300"]);
    let (_, coarse) = run(&coarse_args, &d.path().join("b.json"));
    well_formed(&coarse);
    for t in [0.0, 300.0, 600.0, 900.0, 1200.0, 1500.0, 1800.0] {
        assert_eq!(at(&fine, t), at(&coarse, t), "at {t} s");
    }
    assert!(coarse.len() < fine.len());
    // Trip, six failed probes, then the seventh closes it: all in the table's reasons.
    let fin = end(&coarse);
    assert_eq!(fin["holdoff.breaker.transitions{reason=probe_failed}"], 6.0);
    assert_eq!(fin["holdoff.breaker.transitions{reason=recovered}"], 1.0);
    assert_eq!(fin["holdoff.breaker.state{state=closed}"], 1.0);
}

#[test]
fn bad_metrics_flags_name_the_flag() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("s.toml"),
        "[[callers.arrivals]]\nkind = \"list\"\nat_ms = [0]\n[upstream]\n",
    )
    .unwrap();
    let e = fails(&["simulate", "s.toml", "--metrics", "out.txt"], d.path());
    assert_eq!(
        e,
        "error: out.txt: --metrics: the metrics file must be a .json or .csv file"
    );
    assert!(!d.path().join("out.txt").exists());
    let e = fails(&["simulate", "s.toml", "--metrics", "gone/m.json"], d.path());
    assert!(
        e.starts_with("error: gone/m.json: --metrics: cannot create the file: "),
        "{e}"
    );
    for bad in ["0", "-1", "0.0005", "1.0001", "x", "inf"] {
        let e = fails(
            &[
                "simulate",
                "s.toml",
                "--metrics",
                "m.csv",
                "--metrics-interval",
                bad,
            ],
            d.path(),
        );
        assert!(
            e.starts_with(&format!("error: --metrics-interval: `{bad}` is not")),
            "{e}"
        );
    }
    let e = fails(&["simulate", "s.toml", "--metrics-interval", "5"], d.path());
    assert_eq!(
        e,
        "error: --metrics-interval: needs --metrics FILE to write the samples to"
    );
    // A run that stops on bad input leaves no partial metrics file.
    std::fs::write(d.path().join("t.csv"), "t_ms,status\n0,200\n1000,200\n500,200\n").unwrap();
    std::fs::write(
        d.path().join("t.toml"),
        "[callers]\nfrom_trace = true\n[upstream.trace]\nfile = \"t.csv\"\n",
    )
    .unwrap();
    let e = fails(&["simulate", "t.toml", "--metrics", "m.json"], d.path());
    assert!(e.starts_with("error: t.csv:4: t_ms: time goes backwards"), "{e}");
    assert!(!d.path().join("m.json").exists());
}

#[test]
fn a_run_that_ends_at_zero_writes_one_set_of_rows() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("s.toml"),
        "[[callers.arrivals]]\nkind = \"list\"\nat_ms = [0, 0]\n[upstream]\n",
    )
    .unwrap();
    let out = holdoff()
        .current_dir(d.path())
        .args(["simulate", "s.toml", "--metrics", "m.json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let rows = json_rows(&std::fs::read_to_string(d.path().join("m.json")).unwrap());
    assert_eq!(rows.len(), 24);
    let fin = end(&rows);
    assert_eq!(fin["holdoff.breaker.admitted"], 2.0);
    assert_eq!(fin["holdoff.breaker.outcomes{outcome=success}"], 2.0);
}
