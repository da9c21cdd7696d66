#!/usr/bin/env bash
# bindings/go: the Go module holdoff.dev/go over the C ABI's static library (cgo).
#
#   run.sh test         gofmt, go vet, the benchmark's compile check, then every test (API,
#                       conformance subtests, stress, otelmetric against the OpenTelemetry SDK)
#                       under -race, then the multi-process fleet test
#   run.sh conformance  the conformance subtests only
#   run.sh fleet        the multi-process fleet test only (tools/fleetworker processes, a real
#                       redis-server started by conformance/fleet/run.py)
#   run.sh place DIR    put DIR/libholdoff.a (this machine's) and the header where holdoff.go's
#                       cgo directives read them, inside the module (bench/go/run.sh uses it)
#   run.sh dist         dist/go/, a module proxy directory (GOPROXY=file://$PWD/dist/go) serving
#                       holdoff.dev/go at the workspace's version, with the header and the
#                       release static libraries of dist/c (make dist-c) inside the module
#
# Needs Go >= 1.24 and gcc (scripts/install-deps go). test and conformance build the debug
# libholdoff.a with cargo into the shared target dir (incremental) and place it in the module.
# Package holdoff imports nothing outside the standard library; the subpackage otelmetric needs
# OpenTelemetry's API and its tests the SDK (go.mod, go.sum), which go fetches from the module
# proxy on first use. The benchmark and its peers are a module of their own (bench/go), and so is
# the tool writing the proxy directory (tools/modproxy).
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh" go

export CGO_ENABLED=1
MODULE=holdoff.dev/go

# The files the module carries but does not commit (.gitignore): the C header beside the
# package's sources (cgo finds it there, and go's build cache sees it change) and the static
# library at internal/lib/<goos>_<goarch>/libholdoff.a, linked by path (holdoff.go). In the
# repository they are symbolic links into the build (copies with --copy, for the dist module).
place_native() { # [--copy] dir-holding-libholdoff.a [goarch] [header]
  local put=(ln -sfn) lib arch header
  if [ "$1" = --copy ]; then put=(install -m 644); shift; fi
  lib="$1/libholdoff.a" arch="${2:-$(go env GOARCH)}" header="${3:-$ROOT/bindings/c/include/holdoff.h}"
  [ -f "$lib" ] || { log "no $lib"; return 1; }
  mkdir -p "$HERE/internal/lib/linux_$arch"
  rm -f "$HERE/holdoff.h" "$HERE/internal/lib/linux_$arch/libholdoff.a"
  "${put[@]}" "$header" "$HERE/holdoff.h"
  "${put[@]}" "$lib" "$HERE/internal/lib/linux_$arch/libholdoff.a"
}

# The debug build checks handles (use after Close is reported, not undefined behaviour).
build_debug() {
  cargo_build debug -p holdoff-ffi
  place_native "$CARGO_TARGET_DIR/debug"
}

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
  build_debug
  cd "$HERE"
  local unformatted
  unformatted="$(gofmt -l .)"
  [ -z "$unformatted" ] || { log "gofmt needed: $unformatted"; exit 1; }
  go vet ./...
  HOLDOFF_BENCH_PROFILE=debug bash "$ROOT/bench/go/run.sh" check   # the benchmark still compiles
  log "go test -race (API tests, conformance, stress, otelmetric)"
  run_conformance go_test -race ./...
  fleet_test
}

# The multi-process fleet test (conformance/fleet/README.md): worker processes of
# tools/fleetworker sharing one breaker through a real redis-server the driver starts.
fleet_test() {
  local bin
  temp -d bin
  go build -o "$bin/fleetworker" ./tools/fleetworker
  log "multi-process fleet test"
  python3 "$ROOT/conformance/fleet/run.py" go -- "$bin/fleetworker"
}

cmd_fleet() {
  build_debug
  cd "$HERE"
  fleet_test
}

cmd_conformance() {
  build_debug
  cd "$HERE"
  run_conformance go_test -run '^TestConformance$' .
}

cmd_place() { # dir holding libholdoff.a
  place_native "$(cd "${1:?usage: run.sh place DIR}" && pwd)"
}

# Go's architecture names of the Rust targets dist/c builds.
declare -A GOARCH_OF=([x86_64-unknown-linux-gnu]=amd64 [aarch64-unknown-linux-gnu]=arm64)

cmd_dist() {
  local version stamp out="$ROOT/dist/go" stage unpacked tarball target arch found=()
  version="v$(sed -n 's/^version = "\(.*\)"$/\1/p' "$ROOT/Cargo.toml" | head -n 1)"
  stamp="$(git -C "$ROOT" log -1 --format=%cI 2>/dev/null || date -u +%FT%TZ)"
  # The libraries and header of the C archives, as released (stripped).
  temp -d unpacked
  for target in "${!GOARCH_OF[@]}"; do
    tarball="$ROOT/dist/c/holdoff-${version#v}-$target.tar.gz"
    if [ ! -f "$tarball" ]; then
      log "no $tarball (make dist-c): the module will not build on linux/${GOARCH_OF[$target]}"
      continue
    fi
    tar -xzf "$tarball" -C "$unpacked"
    place_native --copy "$unpacked/holdoff-${version#v}-$target/lib" "${GOARCH_OF[$target]}" \
      "$unpacked/holdoff-${version#v}-$target/include/holdoff.h"
    found+=("linux/${GOARCH_OF[$target]}")
  done
  [ ${#found[@]} -gt 0 ] || { log "no C archive in dist/c: run make dist-c first"; return 1; }
  # The module's files: the packages (tests included), the native files just placed, LICENSE.
  temp -d stage
  cp "$HERE"/go.mod "$HERE"/go.sum "$HERE"/*.go "$HERE/README.md" "$HERE/holdoff.h" "$stage/"
  local pkg
  for pkg in otelmetric internal/bridge; do
    mkdir -p "$stage/$pkg"
    cp "$HERE/$pkg"/*.go "$stage/$pkg/"
  done
  cp "$ROOT/LICENSE" "$stage/LICENSE"
  for arch in "${found[@]}"; do
    mkdir -p "$stage/internal/lib/${arch/\//_}"
    cp "$HERE/internal/lib/${arch/\//_}/libholdoff.a" "$stage/internal/lib/${arch/\//_}/"
  done
  rm -rf "$out/$MODULE/@v/$version".*
  (cd "$HERE/tools/modproxy" && go run . -module "$MODULE" -version "$version" -time "$stamp" \
    -dir "$stage" -out "$out")
  log "$out/$MODULE/@v/$version.zip: $(du -k "$out/$MODULE/@v/$version.zip" | cut -f1) KiB (${found[*]})"
  log "use: GOPROXY=file://$out GOSUMDB=off go get $MODULE@$version"
}

run_mode "$@"
