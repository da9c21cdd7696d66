//! Makes the Rust conformance runner (`core/tests/conformance.rs`) includable by the
//! `case_loader` target without touching it: `include!` refuses the file's inner doc comments
//! (`//!`), so they are blanked out in a copy under OUT_DIR. Everything else is the runner's own
//! code, byte for byte, so the fuzz target exercises exactly what `cargo test` runs.

use std::path::PathBuf;

fn main() {
    let src =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("../core/tests/conformance.rs");
    println!("cargo:rerun-if-changed={}", src.display());
    let text = std::fs::read_to_string(&src).expect("core/tests/conformance.rs");
    let body: String = text
        .lines()
        .map(|l| if l.trim_start().starts_with("//!") { "" } else { l })
        .collect::<Vec<_>>()
        .join("\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("conformance_runner.rs");
    std::fs::write(out, body).expect("write runner copy");
}
