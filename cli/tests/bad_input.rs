//! Bad input: each is one line on stderr naming the file, line and field, exit code 2, never a
//! panic or a backtrace.

mod common;

use std::path::Path;

use common::fails;

const CALLERS: &str = "[[callers.arrivals]]\nkind = \"list\"\nat_ms = [0]\n";

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

fn sim(dir: &Path, file: &str) -> String {
    fails(&["simulate", file], dir)
}

/// Writes `text` to `file`, simulates it and checks the error starts with `want`.
fn rejects(dir: &Path, file: &str, text: &str, want: &str) {
    write(dir, file, text);
    let e = sim(dir, file);
    assert!(e.starts_with(want), "{e}");
}

/// Writes a scenario `file` whose callers and upstream come from the trace `trace`.
fn trace_scenario(dir: &Path, file: &str, trace: &str) {
    let text = format!("[callers]\nfrom_trace = true\n[upstream.trace]\nfile = \"{trace}\"\n");
    write(dir, file, &text);
}

/// Simulates `file` skipping malformed lines: its stderr lines and its JSON report.
fn simulate_skipping(dir: &Path, file: &str) -> (Vec<String>, serde_json::Value) {
    let out = common::holdoff()
        .current_dir(dir)
        .args(["simulate", file, "--skip-malformed", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap();
    (err.lines().map(str::to_owned).collect(), v)
}

#[test]
fn unknown_key() {
    let d = tempfile::tempdir().unwrap();
    rejects(
        d.path(),
        "s.toml",
        &format!("[config.breaker]\nrecoveries = 3\nrecoverys = 2\n{CALLERS}[upstream]\n"),
        "error: s.toml:3: config.breaker.recoverys: unknown field `recoverys`",
    );
    rejects(
        d.path(),
        "u.json",
        r#"{"callers": {"arrivals": [{"kind": "list", "at_ms": [0]}]},
 "upstream": {"phases": [{"from_ms": 0, "status": 200, "sttaus": 1}]}}"#,
        "error: u.json:2: upstream.phases[0].sttaus: unknown field",
    );
}

#[test]
fn wrong_types() {
    let d = tempfile::tempdir().unwrap();
    rejects(
        d.path(),
        "s.toml",
        &format!("[config.breaker]\nrecoveries = \"three\"\n{CALLERS}[upstream]\n"),
        "error: s.toml:2: config.breaker.recoveries: invalid type: string \"three\"",
    );
    rejects(d.path(), "r.json", "{\"callers\": {\"arrivals\": [\n {\"kind\": \"rate\", \"per_second\": \"fast\", \"to_ms\": 10}]},\n \"upstream\": {}}", "error: r.json:2: callers.arrivals[0].per_second: invalid type: string \"fast\"");
    rejects(
        d.path(),
        "k.toml",
        "[[callers.arrivals]]\nkind = \"list\"\nat_ms = [0]\nevery_ms = 5\n[upstream]\n",
        "error: k.toml:4: callers.arrivals[0].every_ms: not a field of kind list",
    );
}

#[test]
fn invalid_configuration_values_name_the_field_and_line() {
    let d = tempfile::tempdir().unwrap();
    rejects(d.path(), "s.toml", &format!("[config.breaker]\nrecoveries = 3\n[config.breaker.open_interval]\ninitial_ms = -5\n{CALLERS}[upstream]\n"), "error: s.toml:4: config.breaker.open_interval.initial: must not be negative");
}

#[test]
fn negative_latencies() {
    let d = tempfile::tempdir().unwrap();
    rejects(
        d.path(),
        "s.toml",
        &format!("{CALLERS}[[upstream.phases]]\nfrom_ms = 0\nstatus = 200\nlatency_ms = -5\n"),
        "error: s.toml:7: upstream.phases[0].latency_ms: must not be negative",
    );
    write(d.path(), "t.csv", "t_ms,status,latency_ms\n0,200,10\n5,200,-3\n");
    rejects(
        d.path(),
        "t.toml",
        "[callers]\nfrom_trace = true\n[upstream.trace]\nfile = \"t.csv\"\n",
        "error: t.csv:3: latency_ms: must not be negative",
    );
}

#[test]
fn times_going_backwards_in_a_trace() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "t.csv", "t_ms,status\n0,200\n1000,200\n500,503\n");
    trace_scenario(d.path(), "t.toml", "t.csv");
    let e = sim(d.path(), "t.toml");
    assert_eq!(
        e,
        "error: t.csv:4: t_ms: time goes backwards (500 ms after a record at 1000 ms); a trace must be in time order"
    );
    write(
        d.path(),
        "t.jsonl",
        "{\"time\": \"2026-01-01T00:00:10Z\", \"status\": 200}\n{\"time\": \"2026-01-01T00:00:09Z\", \"status\": 200}\n",
    );
    rejects(
        d.path(),
        "j.toml",
        &format!("{CALLERS}[upstream.trace]\nfile = \"t.jsonl\"\n"),
        "error: t.jsonl:2: time: ",
    );
}

#[test]
fn malformed_lines_are_fatal_or_skipped_by_flag() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "t.csv",
        "t_ms,status\n0,200\n1000,abc\n2000,700\n3000,200\n",
    );
    trace_scenario(d.path(), "t.toml", "t.csv");
    let e = sim(d.path(), "t.toml");
    assert_eq!(e, "error: t.csv:3: status: must be an integer HTTP status");
    let (warnings, v) = simulate_skipping(d.path(), "t.toml");
    assert_eq!(
        warnings,
        [
            "warning: t.csv:3: status: must be an integer HTTP status (line skipped)",
            "warning: t.csv:4: status: must be an HTTP status between 100 and 599, got 700 (line skipped)",
        ]
    );
    assert_eq!(v["summary"]["calls"], 2);
    assert_eq!(v["summary"]["malformed_lines_skipped"], 2);
}

#[test]
fn bad_lines_in_every_trace_format() {
    let d = tempfile::tempdir().unwrap();
    let cases = [
        (
            "a.csv",
            "csv",
            "t_ms,status,colour\n0,200,red\n",
            "error: a.csv:1: colour: unknown column",
        ),
        (
            "b.csv",
            "csv",
            "t_ms,status\n0,200,9\n",
            "error: b.csv:2: 3 fields where the header has 2",
        ),
        (
            "c.jsonl",
            "jsonl",
            "{\"t_ms\": 0, \"status\": 200, \"colour\": 1}\n",
            "error: c.jsonl:1: colour: unknown field `colour`",
        ),
        (
            "d.jsonl",
            "jsonl",
            "\n{\"t_ms\": 0, \"status\": \"ok\"}\n",
            "error: d.jsonl:2: status: invalid type: string \"ok\"",
        ),
        (
            "e.log",
            "combined",
            "this is not a log line\n",
            "error: e.log:1: not a line of the combined log format",
        ),
        (
            "f.log",
            "common",
            "127.0.0.1 - - [10/Oct/2026:13:55:36 +0000] \"GET / HTTP/1.1\" 200 5\nnope\n",
            "error: f.log:2: not a line of the common log format",
        ),
    ];
    for (file, format, text, want) in cases {
        write(d.path(), file, text);
        let scn = format!("{CALLERS}[upstream.trace]\nfile = \"{file}\"\nformat = \"{format}\"\n");
        write(d.path(), "s.toml", &scn);
        let e = sim(d.path(), "s.toml");
        assert!(e.starts_with(want), "{file}: {e}");
    }
}

#[test]
fn empty_files() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "s.toml", "");
    assert_eq!(sim(d.path(), "s.toml"), "error: s.toml: empty file");
    write(d.path(), "w.json", "  \n");
    assert_eq!(sim(d.path(), "w.json"), "error: w.json: empty file");
    write(d.path(), "t.csv", "");
    trace_scenario(d.path(), "t.toml", "t.csv");
    assert_eq!(sim(d.path(), "t.toml"), "error: t.csv: empty trace file");
    write(d.path(), "h.csv", "t_ms,status\n");
    trace_scenario(d.path(), "h.toml", "h.csv");
    assert_eq!(sim(d.path(), "h.toml"), "error: h.csv: the trace has no records");
    rejects(
        d.path(),
        "n.toml",
        "[upstream]\n[callers]\n",
        "error: n.toml:2: callers: no calls",
    );
}

#[test]
fn missing_files() {
    let d = tempfile::tempdir().unwrap();
    assert_eq!(sim(d.path(), "nothere.toml"), "error: nothere.toml: no such file");
    trace_scenario(d.path(), "t.toml", "gone.csv");
    assert_eq!(sim(d.path(), "t.toml"), "error: gone.csv: no such file");
    write(d.path(), "s.toml", &format!("{CALLERS}[upstream]\n"));
    let e = fails(&["compare", "a.toml", "s.toml", "--scenario", "s.toml"], d.path());
    assert_eq!(e, "error: a.toml: no such file");
    let e = fails(&["simulate", "s.toml", "--plot", "chart.gif"], d.path());
    assert_eq!(
        e,
        "error: chart.gif: --plot: the chart must be a .svg or .png file"
    );
}

#[test]
fn syntax_errors() {
    let d = tempfile::tempdir().unwrap();
    rejects(d.path(), "s.toml", "[callers\n", "error: s.toml:1: ");
    rejects(d.path(), "s.json", "{\n \"callers\": {,\n}", "error: s.json:2: ");
}

#[test]
fn usage_errors_exit_2() {
    let d = tempfile::tempdir().unwrap();
    for args in [&["simulate"][..], &["frobnicate"]] {
        let out = common::holdoff()
            .current_dir(d.path())
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}

#[test]
fn a_line_that_is_not_utf8_is_one_bad_line_in_line_formats() {
    // As in CSV, a line that is not UTF-8 is one malformed line, skippable, not the end of the
    // trace (fuzz/regressions/trace_import/jsonl_invalid_utf8_not_skippable).
    let d = tempfile::tempdir().unwrap();
    let mut bytes = b"{\"time\": \"2026-01-01T00:00:00Z\", \"status\": 200}\n".to_vec();
    bytes.extend_from_slice(b"{\"time\": \"\xff\"}\n");
    bytes.extend_from_slice(b"{\"time\": \"2026-01-01T00:00:01Z\", \"status\": 200}\n");
    std::fs::write(d.path().join("t.jsonl"), bytes).unwrap();
    trace_scenario(d.path(), "t.toml", "t.jsonl");
    assert_eq!(sim(d.path(), "t.toml"), "error: t.jsonl:2: not UTF-8 text");
    let (warnings, v) = simulate_skipping(d.path(), "t.toml");
    assert_eq!(warnings, ["warning: t.jsonl:2: not UTF-8 text (line skipped)"]);
    assert_eq!(v["summary"]["calls"], 2);
    assert_eq!(v["summary"]["malformed_lines_skipped"], 1);
}

#[test]
fn a_field_name_with_a_newline_stays_on_one_line() {
    // An unknown key is echoed in the error; a newline in it must not break the one-line
    // promise (fuzz/regressions/config/field_path_with_newline).
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "c.json", "{\"budget\": {\"a\\nb\": 1}}");
    write(d.path(), "t.csv", "t_ms,status\n0,200\n");
    trace_scenario(d.path(), "t.toml", "t.csv");
    let e = common::fails(&["simulate", "t.toml", "--config", "c.json"], d.path());
    assert!(e.starts_with("error: c.json"), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
}

#[test]
fn bad_workers_and_fleet() {
    let d = tempfile::tempdir().unwrap();
    rejects(
        d.path(),
        "w.toml",
        &format!("workers = 0\n{CALLERS}[upstream]\n"),
        "error: w.toml:1: workers: must be between 1 and 10000",
    );
    rejects(
        d.path(),
        "f.toml",
        &format!("[config.breaker]\nrecoveries = 1\n[config.fleet]\nurl = \"http://x\"\nkey = \"k\"\n{CALLERS}[upstream]\n"),
        "error: f.toml:4: config.fleet.url: scheme must be memory://, redis://, rediss:// or unix://",
    );
    rejects(
        d.path(),
        "nb.toml",
        &format!("[config.fleet]\nurl = \"memory://x\"\nkey = \"k\"\n{CALLERS}[upstream]\n"),
        "error: nb.toml: config.fleet: a fleet shares a breaker: give a breaker too",
    );
    // A compare configuration names the field without the `config.` prefix.
    write(d.path(), "s.toml", &format!("workers = 2\n{CALLERS}[upstream]\n"));
    write(
        d.path(),
        "c.toml",
        "[fleet]\nurl = \"memory://x\"\nkey = \"a b\"\n",
    );
    let e = fails(&["compare", "c.toml", "c.toml", "--scenario", "s.toml"], d.path());
    assert!(
        e.starts_with("error: c.toml:3: fleet.key: must not contain whitespace or control characters"),
        "{e}"
    );
}
