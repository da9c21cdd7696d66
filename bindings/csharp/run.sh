#!/usr/bin/env bash
# bindings/csharp: C# over the C ABI (P/Invoke + SafeHandle), built with Mono's mcs.
#
#   run.sh test         API tests, then the conformance runner
#   run.sh conformance  the conformance runner only (ends with `N passed, N failed, N skipped`)
#   run.sh bench        holdoff against a lock-based baseline breaker (release library; Polly
#                       needs NuGet, so it is not measured)
#
# Installs Mono from Debian's packages when missing (no NuGet; HttpClient and the
# DelegatingHandler come from libmono-system-net-http4.0-cil). Builds libholdoff.so with cargo
# into the shared target dir (incremental).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
export CARGO_TARGET_DIR="$TARGET"
OUT="$TARGET/holdoff-csharp"
MCS=(mcs -warnaserror -warn:4 -nologo -r:System.dll -r:System.Core.dll -r:System.Net.Http.dll)

log() { echo "[csharp] $*" >&2; }

ensure_mono() {
  if command -v mcs >/dev/null && command -v mono >/dev/null && [ -f /usr/lib/mono/4.5/System.Core.dll ] \
    && [ -f /usr/lib/mono/4.5/System.Net.Http.dll ]; then
    return
  fi
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  log "installing Mono (mono-mcs, mono-runtime) with apt-get"
  $sudo apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    mono-mcs mono-runtime libmono-system-core4.0-cil libmono-system4.0-cil libmono-system-net-http4.0-cil >/dev/null
}

# Builds the C library ($1: debug or release) and the assemblies.
build() {
  local profile="$1" flag=""
  [ "$profile" = release ] && flag="--release"
  (cd "$ROOT" && cargo build --quiet -p holdoff-ffi $flag)
  mkdir -p "$OUT"
  "${MCS[@]}" -target:library -out:"$OUT/Holdoff.dll" "$HERE"/src/*.cs
  cp "$HERE/src/Holdoff.dll.config" "$OUT/"
  "${MCS[@]}" -out:"$OUT/Conformance.exe" -r:"$OUT/Holdoff.dll" "$HERE/tests/Json.cs" "$HERE/tests/Conformance.cs" \
    "$HERE/tests/ConformanceExecute.cs"
  "${MCS[@]}" -out:"$OUT/ApiTests.exe" -r:"$OUT/Holdoff.dll" "$HERE/tests/ApiTests.cs" "$HERE/tests/ExecuteTests.cs" \
    "$HERE/tests/HandlerTests.cs" "$HERE/tests/DeadlineStorm.cs" "$HERE/tests/TestTime.cs"
  export LD_LIBRARY_PATH="$TARGET/$profile${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

case "${1:-test}" in
  test)
    ensure_mono
    build debug
    log "API tests"
    mono --debug "$OUT/ApiTests.exe"
    log "conformance"
    mono --debug "$OUT/Conformance.exe" "$ROOT/conformance" | tail -n 1
    ;;
  conformance)
    ensure_mono
    build debug
    mono --debug "$OUT/Conformance.exe" "$ROOT/conformance"
    ;;
  bench)
    ensure_mono
    build release
    "${MCS[@]}" -out:"$OUT/Bench.exe" -r:"$OUT/Holdoff.dll" "$HERE/tests/Bench.cs"
    # HOLDOFF_BENCH_OUT=<file>: also append the cross-language benchmark's JSON lines.
    mono -O=all "$OUT/Bench.exe"
    ;;
  *)
    echo "usage: $0 [test|conformance|bench]" >&2
    exit 2
    ;;
esac
