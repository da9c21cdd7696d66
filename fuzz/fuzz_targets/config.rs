//! The neutral configuration format (`holdoff::interop::config`, JSON) and the command line's loaders
//! (`holdoff_cli::scenario::load_config` and `scenario::load`, JSON and TOML files).
//!
//! The input is one document. Invalid input must be an `Err`, never a panic, and:
//! * a part whose `to_config` succeeds is accepted by its constructor (validation agrees with
//!   construction), and a refused part names a field of that part (`breaker.…`, `budget.…`);
//! * a fully valid configuration survives a JSON round trip unchanged;
//! * the command line's JSON loader accepts exactly what the core accepts;
//! * every command-line error message is one line.
#![no_main]

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use holdoff::interop::config::HoldoffConfig;
use holdoff::{Breaker, Classifier, ConfigError, ManualClock, RetryBudget, RetryQuota};
use holdoff_cli::scenario;
use libfuzzer_sys::fuzz_target;

fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("holdoff-fuzz-config-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    })
}

fn part<T>(name: &str, r: Result<T, ConfigError>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e) => {
            assert!(
                e.field.starts_with(&format!("{name}.")),
                "a {name} error names field {:?} ({})",
                e.field,
                e.rule
            );
            None
        }
    }
}

/// Converts and builds every part; true if all are valid.
fn build(c: &HoldoffConfig) -> bool {
    let clock: Arc<dyn holdoff::Clock> = Arc::new(ManualClock::new());
    let mut valid = true;
    if let Some(s) = &c.breaker {
        match part("breaker", s.to_config()) {
            Some(cfg) => {
                Breaker::new(cfg, Arc::clone(&clock)).expect("a validated breaker config is accepted");
            }
            None => valid = false,
        }
    }
    if let Some(s) = &c.budget {
        match part("budget", s.to_config()) {
            Some(cfg) => {
                RetryBudget::new(cfg, Arc::clone(&clock)).expect("a validated budget config is accepted");
            }
            None => valid = false,
        }
    }
    if let Some(s) = &c.quota {
        match part("quota", s.to_config()) {
            Some(cfg) => {
                RetryQuota::new(cfg).expect("a validated quota config is accepted");
            }
            None => valid = false,
        }
    }
    if let Some(s) = &c.classifier {
        match part("classifier", s.to_config()) {
            Some(cfg) => {
                Classifier::new(cfg).expect("a validated classifier config is accepted");
            }
            None => valid = false,
        }
    }
    valid
}

/// Renders an error, which must be one line: the field path too, though it carries a
/// document's keys as written (fuzz/regressions/config/field_path_with_newline).
fn one_line<T>(r: Result<T, holdoff_cli::CliError>) -> bool {
    match r {
        Ok(_) => true,
        Err(e) => {
            let text = e.to_string();
            assert!(!text.contains(['\n', '\r']), "error on several lines: {e:?}");
            false
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let core_ok = match serde_json::from_slice::<HoldoffConfig>(data) {
        Ok(c) => {
            let valid = build(&c);
            if valid {
                let text = serde_json::to_string(&c).expect("a valid config serializes");
                let back: HoldoffConfig = serde_json::from_str(&text).expect("a serialized config parses");
                assert_eq!(back, c, "JSON round trip changed the config: {text}");
            }
            valid
        }
        Err(_) => false,
    };

    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let json = dir().join("config.json");
    let toml = dir().join("config.toml");
    std::fs::write(&json, text).unwrap();
    std::fs::write(&toml, text).unwrap();

    let cli_ok = one_line(scenario::load_config(&json));
    if !text.trim().is_empty() {
        assert_eq!(cli_ok, core_ok, "the CLI and the core disagree on {text:?}");
    }
    match scenario::load_config(&toml) {
        Ok(c) => assert!(build(&c), "load_config accepted an invalid TOML config"),
        Err(e) => {
            one_line::<()>(Err(e));
        }
    }
    for path in [&json, &toml] {
        match scenario::load(path) {
            Ok(s) => assert!(build(&s.config), "scenario::load accepted an invalid config"),
            Err(e) => {
                one_line::<()>(Err(e));
            }
        }
    }
});
