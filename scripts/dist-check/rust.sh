#!/usr/bin/env bash
# The Rust crates as users get them.
#
#   bash scripts/dist-check/rust.sh        after `make dist-rust` (dist/rust/*.crate)
#
# 1. `cargo publish --dry-run` of holdoff, holdoff-tokio, holdoff-otel and holdoff-cli together
#    (each packaged, then built from its package against the others' packages, as crates.io would).
# 2. In a fresh directory outside the checkout, the four .crate files of dist/rust unpacked and
#    used as path dependencies (the packaged manifests name holdoff by version, so a
#    [patch.crates-io] points it at the unpacked crate): a smoke program over holdoff,
#    holdoff-tokio and holdoff-otel (a breaker trips and refuses, in both, and its metrics reach
#    an OpenTelemetry meter), then the packaged CLI replays a bundled scenario.
# Builds share $CARGO_TARGET_DIR (default <repo>/target), so registry dependencies build once.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
DIST="$ROOT/dist/rust"
VERSION="$(sed -nE 's/^version = "([^"]+)"/\1/p' "$ROOT/Cargo.toml" | head -n1)"
log() { echo "[dist-check rust] $*" >&2; }

log "cargo publish --dry-run: holdoff, holdoff-tokio, holdoff-otel, holdoff-cli"
# The dry run verifies each package against the others through a temporary local registry,
# whose crates cargo unpacks under $CARGO_HOME/registry/src/-<hash>/ and reuses by name and
# version: a copy unpacked by an earlier run of the same version (from the same target path)
# would stand in for today's sources. Those directories belong to local registries only (their
# names start with "-"); crates.io's are left alone.
rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/holdoff-"$VERSION" \
  "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/holdoff-tokio-"$VERSION" \
  "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/holdoff-otel-"$VERSION" \
  "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/holdoff-cli-"$VERSION"
(cd "$ROOT" && cargo publish --dry-run --allow-dirty --quiet -p holdoff -p holdoff-tokio -p holdoff-otel -p holdoff-cli)

for crate in holdoff holdoff-tokio holdoff-otel holdoff-cli; do
  [ -f "$DIST/$crate-$VERSION.crate" ] || { log "missing $DIST/$crate-$VERSION.crate: run make dist-rust"; exit 1; }
done

WORK="$(mktemp -d "${TMPDIR:-/tmp}/holdoff-dist-rust-XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
for crate in holdoff holdoff-tokio holdoff-otel holdoff-cli; do tar xzf "$DIST/$crate-$VERSION.crate"; done

mkdir -p app/src
cat >Cargo.toml <<TOML
[workspace]
resolver = "2"
members = ["app", "holdoff-cli-$VERSION"]

[patch.crates-io]
holdoff = { path = "holdoff-$VERSION" }
TOML
cat >app/Cargo.toml <<TOML
[package]
name = "app"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
holdoff = { path = "../holdoff-$VERSION" }
holdoff-tokio = { path = "../holdoff-tokio-$VERSION" }
holdoff-otel = { path = "../holdoff-otel-$VERSION" }
opentelemetry = { version = "0.33", default-features = false, features = ["metrics"] }
opentelemetry_sdk = { version = "0.33", default-features = false, features = ["metrics", "testing"] }
tokio = { version = "1", features = ["rt", "macros", "time"] }
TOML
cat >app/src/main.rs <<'RS'
use std::sync::Arc;
use std::time::Duration;

use holdoff::{Breaker, BreakerConfig, ManualClock, Outcome};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    // The core: five failures trip the default breaker, which then refuses for 30 s.
    let clock = ManualClock::new();
    let breaker = Breaker::new(BreakerConfig::default(), Arc::new(clock.clone())).unwrap();
    for _ in 0..5 {
        let permit = breaker.allow().unwrap();
        breaker.record(permit, Outcome::Failure).unwrap();
    }
    let refused = breaker.allow().unwrap_err();
    assert_eq!(refused.retry_after, Some(Duration::from_secs(30)));

    // holdoff-tokio: the same breaker refuses a call without running it.
    let ran = std::cell::Cell::new(false);
    let result: Result<(), holdoff_tokio::Error<()>> =
        holdoff_tokio::call(&breaker, async { ran.set(true); Ok(()) }, |_| Outcome::Success).await;
    let err = result.unwrap_err();
    assert!(err.is_upstream_unavailable() && !ran.get());

    // holdoff-otel: the breaker's metrics reach the official SDK's in-memory exporter.
    use opentelemetry::metrics::MeterProvider as _;
    let exporter = opentelemetry_sdk::metrics::InMemoryMetricExporter::default();
    let provider = opentelemetry_sdk::metrics::SdkMeterProvider::builder()
        .with_reader(opentelemetry_sdk::metrics::PeriodicReader::builder(exporter.clone()).build())
        .build();
    let breaker = Arc::new(breaker);
    let _observation = holdoff_otel::observe(&provider.meter("smoke"), &breaker, Some("smoke")).unwrap();
    provider.force_flush().unwrap();
    let names: Vec<String> = exporter
        .get_finished_metrics()
        .unwrap()
        .iter()
        .flat_map(|r| r.scope_metrics())
        .flat_map(|s| s.metrics())
        .map(|m| m.name().to_string())
        .collect();
    assert!(names.iter().any(|n| n == "holdoff.breaker.state"), "{names:?}");
    println!("smoke: breaker tripped and refused ({}); {} metrics exported", err.name(), names.len());
}
RS

log "smoke program over the unpacked holdoff and holdoff-tokio crates in $WORK"
cargo run --quiet -p app
log "the unpacked holdoff-cli replays scenarios/blocked-provider.toml"
cargo run --quiet -p holdoff-cli -- simulate "$ROOT/scenarios/blocked-provider.toml" | tail -n 3
log "ok: $(cd "$DIST" && ls -s --block-size=K -- *.crate | paste -sd ' ')"
