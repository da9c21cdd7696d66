//! The fleet scenarios: N workers with local breakers against the same workers sharing one
//! record. The headline figures of `make demo` are asserted here from `--json`.

mod common;

use common::json;
use serde_json::Value;

fn run(scenario: &str, config: &str) -> Value {
    let d = json(&[
        "simulate",
        &format!("scenarios/{scenario}.toml"),
        "--config",
        &format!("scenarios/configs/{scenario}.{config}.toml"),
    ]);
    d["summary"].clone()
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// Requests that reached the upstream while it failed (the outage's 503s, the 429s).
fn failed(s: &Value) -> u64 {
    let o = &s["upstream_outcomes"];
    n(&o["failure"]) + n(&o["retry_later"]) + n(&o["timeout"])
}

/// The per-worker figures add up to the totals.
fn check_per_worker(s: &Value, workers: u64) {
    let w = s["per_worker"].as_array().unwrap();
    assert_eq!(w.len() as u64, workers);
    assert_eq!(n(&s["workers"]), workers);
    for key in [
        "calls",
        "upstream_requests",
        "probes",
        "requests_before_retry_after",
        "refused",
        "opens",
    ] {
        let sum: u64 = w.iter().map(|x| n(&x[key])).sum();
        assert_eq!(sum, n(&s[key]), "{key}: per worker against the total");
    }
}

/// The scenario with its local and its shared configuration, each checked for `workers`.
fn local_and_shared(scenario: &str, workers: u64) -> (Value, Value) {
    let local = run(scenario, "local");
    let shared = run(scenario, "shared");
    check_per_worker(&local, workers);
    check_per_worker(&shared, workers);
    assert_eq!(
        (local["fleet"].as_str(), shared["fleet"].as_str()),
        (Some("local"), Some("shared"))
    );
    (local, shared)
}

#[test]
fn shared_fleet_sends_a_tenth_of_the_local_fleets_requests_during_the_outage() {
    let (local, shared) = local_and_shared("fleet-outage", 50);
    // 20 minutes of 503s: every local worker trips on its own 5 failures and probes every 10 s
    // (121 probes each); the shared fleet sends one probe per 10 s in all.
    assert_eq!(failed(&local), 6200);
    assert_eq!(n(&local["probes"]), 50 * 121);
    assert_eq!(failed(&shared), 320);
    assert_eq!(n(&shared["probes"]), 121);
    assert!(
        failed(&shared) * 10 <= failed(&local),
        "shared {} against local {}",
        failed(&shared),
        failed(&local)
    );
    // Every worker of the shared fleet opened (one trip opens them all) and closed again.
    assert_eq!(n(&shared["opens"]), 50);
    assert_eq!(n(&shared["closes"]), 50);
    assert_eq!(n(&shared["calls"]), n(&local["calls"]));
}

#[test]
fn shared_fleet_sends_nothing_before_a_known_retry_after() {
    let (local, shared) = local_and_shared("fleet-rate-limit", 20);
    // Five minutes of 429 with Retry-After: 30. Each local worker asks on its own, inside the
    // Retry-After another worker was already given.
    assert_eq!(n(&local["requests_before_retry_after"]), 218);
    assert_eq!(n(&local["upstream_outcomes"]["retry_later"]), 200);
    assert_eq!(n(&shared["requests_before_retry_after"]), 0);
    assert_eq!(n(&shared["upstream_outcomes"]["retry_later"]), 10);
    let per_worker_before: u64 = shared["per_worker"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| n(&w["requests_before_retry_after"]))
        .sum();
    assert_eq!(per_worker_before, 0);
}

#[test]
fn workers_without_a_fleet_are_independent_breakers() {
    // The same scenario with its own (local) configuration: each worker trips and probes on its
    // own, with the same figures as its neighbours.
    let d = json(&["simulate", "scenarios/fleet-outage.toml"]);
    let s = &d["summary"];
    assert_eq!(s["fleet"], "local");
    for w in s["per_worker"].as_array().unwrap() {
        assert_eq!(w["opens"], 1, "{w}");
        assert_eq!(w["probes"], 121, "{w}");
    }
}

#[test]
fn compare_text_shows_each_worker_and_the_headline() {
    let out = common::holdoff()
        .args([
            "compare",
            "scenarios/configs/fleet-rate-limit.local.toml",
            "scenarios/configs/fleet-rate-limit.shared.toml",
            "--scenario",
            "scenarios/fleet-rate-limit.toml",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let workers = text
        .lines()
        .filter(|l| {
            l.split_whitespace()
                .next()
                .is_some_and(|w| w.parse::<u32>().is_ok())
        })
        .filter(|l| l.starts_with("    ") && l.split_whitespace().count() == 7)
        .count();
    assert_eq!(workers, 20, "{text}");
    assert!(
        text.contains("20, shared fleet (one record in the store)"),
        "{text}"
    );
    assert!(
        text.contains(
            "while the upstream failed, B sent 10 requests, 1/20.0 of A's 200; before a known \
             Retry-After, B sent 0 and A 218"
        ),
        "{text}"
    );
}

#[test]
fn single_worker_summaries_keep_their_figures() {
    // workers defaults to 1: the incident figures are unchanged and no fleet rows are printed.
    let d = json(&["simulate", "scenarios/registry-outage.toml"]);
    let s = &d["summary"];
    assert_eq!(s["workers"], 1);
    assert_eq!(s["fleet"], "local");
    assert_eq!(s["upstream_requests"], 19);
    assert_eq!(s["per_worker"][0]["upstream_requests"], 19);
    let out = common::holdoff()
        .args(["simulate", "scenarios/registry-outage.toml"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        !text.contains("workers") && !text.contains("per worker"),
        "{text}"
    );
}
