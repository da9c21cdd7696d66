//! The suite's cases, read from `conformance/` (this crate's parent directory).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// The version of the runner contract (`conformance/VERSION`) these runners were written for.
const SUITE_VERSION: u64 = 4;

/// Every case of `conformance/cases/**/*.json` as `(id, case)`, files in path order, keeping only
/// the cases whose id contains `HOLDOFF_CASES` (all when unset).
///
/// Panics if `VERSION` is not `SUITE_VERSION`, a file does not parse, or two cases (selected
/// or not) share an id.
pub fn cases() -> Vec<(String, Value)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let version: u64 = std::fs::read_to_string(root.join("VERSION"))
        .expect("VERSION")
        .trim()
        .parse()
        .expect("VERSION");
    assert_eq!(
        version, SUITE_VERSION,
        "runner written for suite version {SUITE_VERSION}"
    );
    let filter = std::env::var("HOLDOFF_CASES").unwrap_or_default();
    let mut files = Vec::new();
    case_files(&root.join("cases"), &mut files);
    let mut ids = HashSet::new();
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read case file");
        let doc: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for case in doc["cases"].as_array().expect("cases array") {
            let id = case["id"].as_str().expect("case id").to_owned();
            assert!(ids.insert(id.clone()), "duplicate case id {id}");
            if id.contains(&filter) {
                out.push((id, case.clone()));
            }
        }
    }
    out
}

/// The `.json` files below `dir`, depth first, each directory's entries sorted.
fn case_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("cases dir")
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            case_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "json") {
            out.push(p);
        }
    }
}
