#!/usr/bin/env bash
# bindings/go: the Go module over the C ABI's static library (cgo).
#
#   run.sh test         gofmt, go vet, the benchmark's compile check, then every test (API,
#                       conformance subtests, stress) under -race
#   run.sh conformance  the conformance subtests only
#
# Needs Go >= 1.24 and gcc (scripts/install-deps go). Builds libholdoff.a with cargo into the
# shared target dir (incremental). The module has no dependencies; the benchmark and its peers
# are a module of their own (bench/go).
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh" go

export CGO_ENABLED=1
# The debug build checks handles (use after Close is reported, not undefined behaviour).
export CGO_LDFLAGS="-L$CARGO_TARGET_DIR/debug"

# go test prints nothing of a test that passes: the conformance test writes its tally to
# HOLDOFF_TALLY_FILE, printed after go test's own output.
go_test() { # go test arguments
  local tally rc=0
  temp tally
  HOLDOFF_TALLY_FILE="$tally" go test -count=1 "$@" || rc=$?
  cat "$tally"
  return "$rc"
}

cmd_test() {
  cargo_build debug -p holdoff-ffi
  cd "$HERE"
  local unformatted
  unformatted="$(gofmt -l .)"
  [ -z "$unformatted" ] || { log "gofmt needed: $unformatted"; exit 1; }
  go vet ./...
  HOLDOFF_BENCH_PROFILE=debug bash "$ROOT/bench/go/run.sh" check   # the benchmark still compiles
  log "go test -race (API tests, conformance, stress)"
  run_conformance go_test -race ./...
}

cmd_conformance() {
  cargo_build debug -p holdoff-ffi
  cd "$HERE"
  run_conformance go_test -run '^TestConformance$' .
}

run_mode "$@"
