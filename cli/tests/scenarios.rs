//! The bundled scenarios reproduce the figures of the three incidents (`docs/incidents.md`),
//! and the old designs' figures where the incident gives them.

mod common;

use common::{events, holdoff, json};
use serde_json::Value;

fn ms(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("not whole milliseconds: {v}"))
}

#[test]
fn blocked_provider_never_closes_early() {
    // I1-6: 1 open, 0 closes, 5 + 100 probes = 105 upstream requests with one caller a second.
    let d = json(&["simulate", "scenarios/blocked-provider.toml", "--timeline"]);
    let s = &d["summary"];
    assert_eq!(s["opens"], 1);
    assert_eq!(s["closes"], 0);
    assert_eq!(s["premature_closes"], 0);
    assert_eq!(s["upstream_requests"], 105);
    assert_eq!(s["probes"], 100);
    assert_eq!(s["refused"], 5900);
    assert_eq!(s["calls"], 6005);
    assert_eq!(s["give_ups"], 0);
    assert_eq!(s["largest_burst_after_close"], 0);
    assert_eq!(s["upstream_outcomes"]["answer"], 4);
    assert_eq!(s["upstream_outcomes"]["failure"], 101);
    // Probes exactly one interval apart, at t = 60000 k.
    let probes: Vec<u64> = events(&d, "probe").iter().map(|e| ms(&e["t_ms"])).collect();
    assert_eq!(probes, (1..=100).map(|k| 60_000 * k).collect::<Vec<_>>());
    // The four not-found answers each raise recoveries to 1 and never close it.
    let answers: Vec<u64> = events(&d, "probe_answer")
        .iter()
        .filter(|e| e["status"] == 404)
        .map(|e| ms(&e["t_ms"]))
        .collect();
    assert_eq!(answers, [60_000, 1_500_000, 2_580_000, 5_940_000]);
    assert!(events(&d, "state").iter().all(|e| e["to"] != "closed"));
}

#[test]
fn blocked_provider_old_design_closes_four_times() {
    // I1-6 contrast: closing on one answer closes 4 times, each re-opened 5 requests later:
    // 124 upstream requests on the same trace.
    let d = json(&[
        "compare",
        "scenarios/configs/blocked-provider.old.toml",
        "scenarios/configs/blocked-provider.fixed.toml",
        "--scenario",
        "scenarios/blocked-provider.toml",
    ]);
    let old = &d["a"]["summary"];
    assert_eq!(old["closes"], 4);
    assert_eq!(old["opens"], 5);
    assert_eq!(old["premature_closes"], 4);
    assert_eq!(old["upstream_requests"], 124);
    assert_eq!(old["largest_burst_after_close"], 5);
    assert_eq!(old["probes"], 99);
    assert_eq!(old["refused"], 5881);
    let new = &d["b"]["summary"];
    assert_eq!(new["closes"], 0);
    assert_eq!(new["upstream_requests"], 105);
}

#[test]
fn old_design_with_config_flag_gives_the_same_figures() {
    let d = json(&[
        "simulate",
        "scenarios/blocked-provider.toml",
        "--config",
        "scenarios/configs/blocked-provider.old.toml",
        "--timeline",
    ]);
    assert_eq!(d["summary"]["upstream_requests"], 124);
    let closes: Vec<u64> = events(&d, "state")
        .iter()
        .filter(|e| e["to"] == "closed")
        .map(|e| ms(&e["t_ms"]))
        .collect();
    // The not-found answers reach the old breaker's probes 0, 5, 10 and 15 s after their times.
    assert_eq!(closes, [60_000, 1_505_000, 2_590_000, 5_955_000]);
    let reopens: Vec<u64> = events(&d, "state")
        .iter()
        .filter(|e| e["from"] == "closed" && e["to"] == "open")
        .map(|e| ms(&e["t_ms"]))
        .collect();
    assert_eq!(reopens, [0, 65_000, 1_510_000, 2_595_000, 5_960_000]);
}

#[test]
fn registry_outage_probes_at_the_backoff_intervals() {
    // I2-2: probes at minutes 1, 2, 4, 8, 13, 18 against the dead registry; I2-3: no latch
    // after 15 minutes, the first probe after recovery (minute 23) closes it.
    let d = json(&["simulate", "scenarios/registry-outage.toml", "--timeline"]);
    let probes: Vec<u64> = events(&d, "probe")
        .iter()
        .map(|e| ms(&e["t_ms"]) / 60_000)
        .collect();
    assert_eq!(probes, [1, 2, 4, 8, 13, 18, 23]);
    let failed: Vec<u64> = events(&d, "probe_answer")
        .iter()
        .filter(|e| e["outcome"] == "failure")
        .map(|e| ms(&e["t_ms"]) / 60_000)
        .collect();
    assert_eq!(failed, [1, 2, 4, 8, 13, 18]);
    let s = &d["summary"];
    assert_eq!(s["opens"], 1);
    assert_eq!(s["closes"], 1);
    assert_eq!(s["premature_closes"], 0);
    assert_eq!(s["probes"], 7);
    // 14 refusals in the 20 one-minute steps (I2-2), 2 more before the closing probe.
    assert_eq!(s["refused"], 16);
    assert_eq!(s["upstream_requests"], 5 + 7 + 7);
    assert_eq!(s["upstream_recovered_at_ms"], 1_200_000);
    assert_eq!(s["recovery_to_close_ms"], 180_000);
    assert_eq!(s["largest_burst_after_close"], 0, "the close was not premature");
    let intervals: Vec<u64> = events(&d, "state")
        .iter()
        .filter_map(|e| e["open_for_ms"].as_u64())
        .collect();
    assert_eq!(
        intervals,
        [30_000, 60_000, 120_000, 240_000, 300_000, 300_000, 300_000]
    );
}

#[test]
fn rate_limited_api_honours_retry_after_inside_the_budget() {
    // I3-1: RA 180 s -> 11 requests, give up budget_spent at 30 min.
    // I3-2a: RA 250 s -> 8 requests, give up retry_after_exceeds_remaining (50 s left).
    // I3-2b: RA 300 s -> 7 requests, give up budget_spent.
    let d = json(&["simulate", "scenarios/rate-limited-api.json", "--timeline"]);
    let gave: Vec<(u64, u64, String, u64)> = events(&d, "give_up")
        .iter()
        .map(|e| {
            (
                e["call"].as_u64().unwrap(),
                e["attempts"].as_u64().unwrap(),
                e["reason"].as_str().unwrap().to_string(),
                ms(&e["t_ms"]),
            )
        })
        .collect();
    assert_eq!(
        gave,
        [
            (1, 11, "budget_spent".into(), 1_800_000),
            (
                3,
                8,
                "retry_after_exceeds_remaining".into(),
                2_400_000 + 1_750_000
            ),
            (5, 7, "budget_spent".into(), 4_800_000 + 1_800_000),
        ]
    );
    for (call, delay, n) in [(1, 180_000, 10), (3, 250_000, 7), (5, 300_000, 6)] {
        let waits: Vec<u64> = events(&d, "wait")
            .iter()
            .filter(|e| e["call"] == call)
            .map(|e| ms(&e["delay_ms"]))
            .collect();
        assert_eq!(
            waits,
            vec![delay; n],
            "call {call}: waits used as given, never shortened"
        );
    }
    let s = &d["summary"];
    assert_eq!(s["upstream_requests"], 11 + 1 + 8 + 1 + 7);
    assert_eq!(s["give_ups"], 3);
    assert_eq!(s["rate_limit_give_ups"], 3);
    assert_eq!(s["rate_limit_give_ups_by_reason"]["budget_spent"], 2);
    assert_eq!(
        s["rate_limit_give_ups_by_reason"]["retry_after_exceeds_remaining"],
        1
    );
    assert_eq!(s["rate_limit_episodes"], 3);
    assert_eq!(s["budget_ms"], 1_800_000);
    assert_eq!(s["budget_spent_ms"], 1_800_000);
    assert_eq!(s["calls_succeeded"], 2);
}

#[test]
fn rate_limited_api_old_budget_equal_to_cap_is_refused() {
    // I3-5: a 300 s budget against a 300 s cap leaves no room to retry (the old default that
    // spent the episode in one wait): refused before anything runs.
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("old.toml");
    std::fs::write(
        &cfg,
        "[budget]\nmax_rate_limit_duration_ms = 300000\nretry_after_cap_ms = 300000\n",
    )
    .unwrap();
    let line = common::fails(
        &[
            "compare",
            cfg.to_str().unwrap(),
            cfg.to_str().unwrap(),
            "--scenario",
            common::root()
                .join("scenarios/rate-limited-api.json")
                .to_str()
                .unwrap(),
        ],
        dir.path(),
    );
    assert!(
        line.contains("old.toml:2: budget.max_rate_limit_duration: budget 300s against a 300s cap"),
        "{line}"
    );
}

#[test]
fn summary_json_has_the_documented_keys() {
    let d = json(&["simulate", "scenarios/registry-outage.toml"]);
    let s = d["summary"].as_object().unwrap();
    for k in [
        "upstream_requests",
        "refused",
        "opens",
        "closes",
        "premature_closes",
        "probes",
        "give_ups",
        "give_ups_by_reason",
        "rate_limit_give_ups",
        "rate_limit_give_ups_by_reason",
        "recovery_to_close_ms",
        "largest_burst_after_close",
        "budget_spent_ms",
    ] {
        assert!(s.contains_key(k), "missing {k}");
    }
    assert!(d.get("timeline").is_none(), "no timeline unless asked for");
}

#[test]
fn text_output_and_charts() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("c.svg");
    let png = dir.path().join("c.png");
    let out = holdoff()
        .args(["simulate", "scenarios/blocked-provider.toml", "--plot"])
        .arg(&svg)
        .arg("--plot")
        .arg(&png)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("upstream requests                   105"), "{text}");
    assert!(text.contains("premature closes                    0"), "{text}");
    let svg_text = std::fs::read_to_string(&svg).unwrap();
    assert!(svg_text.starts_with("<svg") && svg_text.contains("Breaker state"));
    assert!(svg_text.contains("105 upstream requests"));
    let png_bytes = std::fs::read(&png).unwrap();
    assert_eq!(&png_bytes[1..4], b"PNG");
    assert!(png_bytes.len() > 10_000);
}

#[test]
fn bundled_scenarios_match_the_schema() {
    // The schema is checked with the same validator the conformance suite uses (jsonschema,
    // which `.ci/run` installs).
    let probe = std::process::Command::new("python3")
        .args(["-c", "import jsonschema, referencing, tomllib"])
        .output();
    if !probe.map(|o| o.status.success()).unwrap_or(false) {
        eprintln!("note: python3 with jsonschema not found; schema check not run");
        return;
    }
    let out = std::process::Command::new("python3")
        .arg(common::root().join("cli/tests/validate_scenarios.py"))
        .arg(common::root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn text_timeline_shows_the_burst_after_a_premature_close() {
    let out = holdoff()
        .args([
            "simulate",
            "scenarios/blocked-provider.toml",
            "--config",
            "scenarios/configs/blocked-provider.old.toml",
            "--timeline",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let close = lines
        .iter()
        .position(|l| l.starts_with("0:01:00.000  breaker half_open -> closed"))
        .expect(&text);
    assert_eq!(
        &lines[close + 1..close + 4],
        [
            "0:01:01.000  5 requests reached the upstream until 0:01:05.000 (5 failed)",
            "0:01:05.000  breaker closed -> open (tripped, episode 2, next probe in 60 s)",
            "0:01:06.000  refused 59 calls until 0:02:04.000",
        ]
    );
}

#[test]
fn end_ms_stops_the_clock() {
    let dir = tempfile::tempdir().unwrap();
    let scn = std::fs::read_to_string(common::root().join("scenarios/registry-outage.toml")).unwrap();
    let scn = scn.replace("name = \"registry-outage\"", "name = \"cut\"\nend_ms = 600000");
    std::fs::write(dir.path().join("cut.toml"), scn).unwrap();
    let out = holdoff()
        .current_dir(dir.path())
        .args(["simulate", "cut.toml", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = &v["summary"];
    assert_eq!(s["end_ms"], 600_000);
    assert_eq!(s["calls"], 5 + 10);
    assert_eq!(s["probes"], 4, "minutes 1, 2, 4, 8");
}
