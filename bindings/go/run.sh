#!/usr/bin/env bash
# bindings/go: the Go module over the C ABI's static library (cgo).
#
#   run.sh test         go vet, then every test (API, conformance subtests, stress) under -race
#   run.sh conformance  the conformance subtests only (ends with `N passed, N failed, N skipped`)
#   run.sh bench        holdoff vs sony/gobreaker and failsafe-go, same run (release library)
#
# Builds libholdoff.a with cargo into the shared target dir (incremental). Go modules come
# from the Go proxy (sony/gobreaker and failsafe-go, the benchmark's peers, are the only
# dependencies).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
export CARGO_TARGET_DIR="$TARGET"
export CGO_ENABLED=1

log() { echo "[go] $*" >&2; }

ensure_tools() {
  command -v go >/dev/null || { log "Go is not installed (needs Go >= 1.24)"; exit 1; }
  if ! command -v gcc >/dev/null; then
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq gcc libc6-dev >/dev/null
  fi
}

# Builds the static library and points cgo at it ($1: debug or release). The debug build
# checks handles (use after Close is reported, not undefined behaviour).
use_lib() {
  local profile="$1" flag=""
  [ "$profile" = release ] && flag="--release"
  (cd "$ROOT" && cargo build --quiet -p holdoff-ffi $flag)
  export CGO_LDFLAGS="-L$TARGET/$profile"
}

cd "$HERE"
case "${1:-test}" in
  test)
    ensure_tools
    use_lib debug
    unformatted="$(gofmt -l .)"
    [ -z "$unformatted" ] || { log "gofmt needed: $unformatted"; exit 1; }
    go vet ./...
    log "go test -race (API tests, conformance, stress)"
    tally="$(mktemp)"
    HOLDOFF_TALLY_FILE="$tally" go test -race -count=1 ./...
    log "conformance: $(cat "$tally")"
    rm -f "$tally"
    ;;
  conformance)
    ensure_tools
    use_lib debug
    tally="$(mktemp)"
    out="$(mktemp)"
    rc=0
    HOLDOFF_TALLY_FILE="$tally" go test -count=1 -run '^TestConformance$' . >"$out" 2>&1 || rc=$?
    grep -E -- '--- FAIL|conformance_test.go|^(FAIL|panic|#)' "$out" | grep -v -- '--- FAIL: TestConformance ' || true
    [ "$rc" -eq 0 ] || [ -s "$tally" ] || tail -n 20 "$out"
    cat "$tally"
    rm -f "$tally" "$out"
    exit "$rc"
    ;;
  bench)
    ensure_tools
    use_lib release
    # TestBenchRecords prints the summary; with HOLDOFF_BENCH_OUT=<file> it also appends the
    # cross-language benchmark's JSON lines. (`go test -bench .` still runs the Benchmark
    # functions for ad-hoc profiling.)
    mkdir -p "$TARGET/holdoff-go"
    go test -c -o "$TARGET/holdoff-go/bench.test" .
    HOLDOFF_BENCH_RUN=1 "$TARGET/holdoff-go/bench.test" -test.count=1 -test.run '^TestBenchRecords$'
    ;;
  *)
    echo "usage: $0 [test|conformance|bench]" >&2
    exit 2
    ;;
esac
