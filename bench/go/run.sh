#!/usr/bin/env bash
# bench/go: holdoff's Go binding against sony/gobreaker and failsafe-go, same run, same
# operations (bench_records_test.go), on the release static library. A module of its own: the
# peers stay out of the binding's go.mod, which this one replaces with ../../bindings/go.
#
#   run.sh         the cross-language records (TestBenchRecords); HOLDOFF_BENCH_OUT=<file>
#                  also appends them (`go test -bench .` here runs the Benchmark functions)
#   run.sh check   go vet only: the bench compiles against the binding (bindings/go's test runs it)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"

need go go
export CGO_ENABLED=1
build_ffi
# The library of this profile where the binding's cgo directives read it (inside its module).
bash "$ROOT/bindings/go/run.sh" place "$CARGO_TARGET_DIR/$PROFILE"
cd "$BENCH/go"
case "${1:-run}" in
  check) go vet ./... ;;
  run)
    go test -c -o "$BENCH_OUT_DIR/go-bench.test" .
    HOLDOFF_BENCH_RUN=1 exec "$BENCH_OUT_DIR/go-bench.test" -test.count=1 -test.run '^TestBenchRecords$'
    ;;
  *) echo "usage: $0 [run|check]" >&2; exit 2 ;;
esac
