//! Trace import: CSV, JSON Lines and nginx/Apache access logs replay the same answers.

mod common;

use std::path::Path;

use serde_json::Value;

fn run(dir: &Path, scenario: &str) -> Value {
    std::fs::write(dir.join("s.toml"), scenario).unwrap();
    let out = common::holdoff()
        .current_dir(dir)
        .args(["simulate", "s.toml", "--json", "--timeline"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

const BREAKER: &str = "[config.breaker]\ntrip = { policy = \"consecutive\", threshold = 3 }\n\
                       open_interval = { initial_ms = 10000, multiplier = 1 }\nrecoveries = 1\n";

/// Three 500s trip the breaker at 2 s; the call at 3 s is refused; the probe at 12 s gets a 200
/// and closes it; the call at 13 s goes through.
fn check(v: &Value) {
    let s = &v["summary"];
    assert_eq!(s["calls"], 6, "{s}");
    assert_eq!(s["upstream_requests"], 5);
    assert_eq!(s["refused"], 1);
    assert_eq!(s["opens"], 1);
    assert_eq!(s["closes"], 1);
    assert_eq!(s["upstream_outcomes"]["failure"], 3);
    assert_eq!(s["upstream_outcomes"]["success"], 2);
    let closed: Vec<&Value> = v["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["to"] == "closed")
        .collect();
    assert_eq!(closed[0]["t_ms"], 12000);
}

#[test]
fn csv_jsonl_and_access_logs_replay_alike() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let rows = [
        (0, 500),
        (1000, 500),
        (2000, 500),
        (3000, 200),
        (12000, 200),
        (13000, 200),
    ];
    let mut csv = String::from("t_ms,status,latency_ms\n");
    let mut jsonl = String::new();
    let mut common_log = String::new();
    let mut combined = String::new();
    for (t, st) in rows {
        csv.push_str(&format!("{t},{st},\n"));
        jsonl.push_str(&format!(
            "{{\"time\": \"2026-03-01T10:00:{:02}Z\", \"status\": {st}}}\n",
            t / 1000
        ));
        common_log.push_str(&format!(
            "10.0.0.1 - - [01/Mar/2026:10:00:{:02} +0000] \"GET /v1/items HTTP/1.1\" {st} 512\n",
            t / 1000
        ));
        combined.push_str(&format!(
            "10.0.0.1 - alice [01/Mar/2026:11:00:{:02} +0100] \"GET /v1/items?id=7 HTTP/1.1\" {st} 512 \"-\" \"curl/8.0\"\n",
            t / 1000
        ));
    }
    std::fs::write(p.join("t.csv"), csv).unwrap();
    std::fs::write(p.join("t.jsonl"), jsonl).unwrap();
    std::fs::write(p.join("common.log"), common_log).unwrap();
    std::fs::write(p.join("combined.log"), combined).unwrap();
    for (file, format) in [
        ("t.csv", "csv"),
        ("t.jsonl", "jsonl"),
        ("common.log", "common"),
        ("combined.log", "combined"),
    ] {
        let v = run(
            p,
            &format!("{BREAKER}[callers]\nfrom_trace = true\n[upstream.trace]\nfile = \"{file}\"\nformat = \"{format}\"\n"),
        );
        check(&v);
    }
}

#[test]
fn hold_mode_answers_with_the_record_in_force() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("t.csv"),
        "t_ms,status,retry_after\n0,503,\n20000,200,\n",
    )
    .unwrap();
    let v = run(
        d.path(),
        &format!(
            "{BREAKER}[[callers.arrivals]]\nkind = \"rate\"\nevery_ms = 1000\nto_ms = 30000\n\
             [upstream.trace]\nfile = \"t.csv\"\n"
        ),
    );
    let s = &v["summary"];
    // 503 until 20 s: trips at 2 s, probes at 12 s (fails) and 22 s (200: closes).
    assert_eq!(s["probes"], 2);
    assert_eq!(s["closes"], 1);
    assert_eq!(s["upstream_recovered_at_ms"], 20000);
    assert_eq!(s["recovery_to_close_ms"], 2000);
    assert_eq!(s["upstream_requests"], 3 + 2 + 8);
}

#[test]
fn retry_after_http_dates_use_the_trace_wall_clock() {
    // A 429 whose Retry-After is an HTTP-date 120 s after the record's own time.
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("t.csv"),
        "time,status,retry_after\n2026-03-01T10:00:00Z,429,\"Sun, 01 Mar 2026 10:02:00 GMT\"\n2026-03-01T10:01:00Z,200,\n",
    )
    .unwrap();
    let v = run(
        d.path(),
        "[config.budget]\n[[callers.arrivals]]\nkind = \"list\"\nat_ms = [0]\n[upstream.trace]\nfile = \"t.csv\"\n",
    );
    let waits: Vec<&Value> = v["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"] == "wait")
        .collect();
    assert_eq!(waits.len(), 1);
    assert_eq!(waits[0]["delay_ms"], 120000);
    assert_eq!(waits[0]["source"], "retry_after");
    assert_eq!(v["summary"]["calls_succeeded"], 1);
}

#[test]
fn concurrency_latency_and_timeouts() {
    let d = tempfile::tempdir().unwrap();
    let v = run(
        d.path(),
        "[[callers.arrivals]]\nkind = \"list\"\nat_ms = [0, 0, 0, 0]\n\
         [callers]\nconcurrency = 2\ntimeout_ms = 500\n\
         [[upstream.phases]]\nfrom_ms = 0\nstatus = 200\nlatency_ms = 100\n",
    );
    let s = &v["summary"];
    assert_eq!(s["queued"], 2);
    assert_eq!(s["calls_succeeded"], 4);
    assert_eq!(s["end_ms"], 200, "two waves of 100 ms");
    let v = run(
        d.path(),
        "[[callers.arrivals]]\nkind = \"list\"\nat_ms = [0]\n[callers]\ntimeout_ms = 50\n\
         [[upstream.phases]]\nfrom_ms = 0\nstatus = 200\nlatency_ms = 100\n",
    );
    assert_eq!(v["summary"]["upstream_outcomes"]["timeout"], 1);
    assert_eq!(v["summary"]["end_ms"], 50);
}

#[test]
fn poisson_and_mixes_are_reproducible() {
    let d = tempfile::tempdir().unwrap();
    let scn = "[[callers.arrivals]]\nkind = \"poisson\"\nper_second = 20\nto_ms = 60000\nseed = 7\n\
               [upstream]\nseed = 3\n[[upstream.phases]]\nfrom_ms = 0\n\
               mix = [{ status = 200, weight = 9 }, { status = 503, weight = 1 }]\n";
    let a = run(d.path(), scn);
    let b = run(d.path(), scn);
    assert_eq!(a["summary"], b["summary"]);
    let calls = a["summary"]["calls"].as_u64().unwrap();
    assert!((1000..1400).contains(&calls), "about 20/s for 60 s: {calls}");
    let failed = a["summary"]["upstream_outcomes"]["failure"].as_u64().unwrap();
    assert!(
        failed > calls / 20 && failed < calls / 5,
        "about 10% of {calls}: {failed}"
    );
}
