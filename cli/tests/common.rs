//! Helpers shared by the integration tests (included with `mod common;`).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The repository root (scenario paths in the tests are relative to it).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The `holdoff` binary, run from the repository root.
pub fn holdoff() -> assert_cmd::Command {
    let mut c = assert_cmd::Command::new(env!("CARGO_BIN_EXE_holdoff"));
    c.current_dir(root());
    c
}

/// `holdoff ARGS --json` parsed; fails the test on a non-zero exit.
pub fn json(args: &[&str]) -> Value {
    let out = holdoff().args(args).arg("--json").output().unwrap();
    assert!(
        out.status.success(),
        "holdoff {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Events of one kind from a `--timeline --json` run.
pub fn events<'a>(doc: &'a Value, kind: &str) -> Vec<&'a Value> {
    doc["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"] == kind)
        .collect()
}

/// Runs `holdoff ARGS`, expects exit code 2 and exactly one stderr line, returns that line.
pub fn fails(args: &[&str], dir: &Path) -> String {
    let out = assert_cmd::Command::new(env!("CARGO_BIN_EXE_holdoff"))
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(
        out.status.code(),
        Some(2),
        "exit code for {args:?}; stderr: {err}"
    );
    assert_eq!(err.lines().count(), 1, "one line for {args:?}: {err}");
    assert!(!err.contains("panicked") && !err.contains("backtrace"), "{err}");
    assert!(err.starts_with("error: "), "{err}");
    err.trim_end().to_string()
}
