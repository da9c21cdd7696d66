#!/usr/bin/env bash
# bindings/c: the C ABI (crate holdoff-ffi, include/holdoff.h) and its C tests.
#
#   run.sh test         header check, Rust unit tests, C API tests and the conformance runner,
#                       then both again under AddressSanitizer + UBSan
#   run.sh conformance  the C conformance runner only (ends with `N passed, N failed, N skipped`)
#   run.sh bench        allow+record through the C ABI (release build)
#   run.sh header       regenerate include/holdoff.h with the pinned cbindgen
#
# Installs what it needs when missing: gcc and libcjson-dev (apt-get), cbindgen (cargo install,
# pinned, into a cache directory).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
export CARGO_TARGET_DIR="$TARGET"
OUT="$TARGET/holdoff-c"
CBINDGEN_VERSION=0.29.4
CACHE="${HOLDOFF_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/holdoff}"
CBINDGEN="$CACHE/cbindgen-$CBINDGEN_VERSION/bin/cbindgen"
CFLAGS=(-std=c99 -Wall -Wextra -Werror -g -I"$HERE/include")
SAN=(-O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all)
LIBS=(-lpthread -ldl -lm)

log() { echo "[c] $*" >&2; }

apt_install() {
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  log "installing $* with apt-get"
  $sudo apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
}

ensure_c_tools() {
  local need=()
  command -v gcc >/dev/null || need+=(gcc libc6-dev)
  [ -f /usr/include/cjson/cJSON.h ] || need+=(libcjson-dev)
  if [ ${#need[@]} -gt 0 ]; then apt_install "${need[@]}"; fi
}

ensure_cbindgen() {
  if [ -x "$CBINDGEN" ] && "$CBINDGEN" --version | grep -q " $CBINDGEN_VERSION\$"; then return; fi
  log "installing cbindgen $CBINDGEN_VERSION into $CACHE"
  # Its own target dir: the shared one is for the workspace.
  CARGO_TARGET_DIR="$CACHE/cbindgen-build" cargo install --quiet --locked --force \
    --version "$CBINDGEN_VERSION" --root "$CACHE/cbindgen-$CBINDGEN_VERSION" cbindgen
  rm -rf "$CACHE/cbindgen-build"
}

generate_header() { # $1: output file
  (cd "$HERE" && "$CBINDGEN" --quiet --config cbindgen.toml --crate holdoff-ffi --output "$1" .)
}

check_header() {
  ensure_cbindgen
  local tmp
  tmp="$(mktemp)"
  generate_header "$tmp"
  if ! diff -u "$HERE/include/holdoff.h" "$tmp"; then
    rm -f "$tmp"
    log "include/holdoff.h is out of date: run bindings/c/run.sh header and commit it"
    exit 1
  fi
  rm -f "$tmp"
  log "header: include/holdoff.h matches cbindgen $CBINDGEN_VERSION"
}

build_lib() { # $1: "" (debug) or "--release"
  (cd "$ROOT" && cargo build --quiet -p holdoff-ffi ${1:-})
}

# Compiles a test program against the debug static library; $1 source, $2 output, rest flags.
cc_test() {
  local src="$1" out="$2"
  shift 2
  mkdir -p "$OUT"
  gcc "${CFLAGS[@]}" "$@" "$src" -o "$out" "$TARGET/debug/libholdoff.a" -lcjson "${LIBS[@]}"
}

conformance() {
  ensure_c_tools
  build_lib
  cc_test "$HERE/tests/conformance.c" "$OUT/conformance"
  "$OUT/conformance" "$ROOT/conformance"
}

run_tests() {
  ensure_c_tools
  check_header
  (cd "$ROOT" && cargo test --quiet -p holdoff-ffi)
  build_lib
  cc_test "$HERE/tests/api_test.c" "$OUT/api_test"
  cc_test "$HERE/tests/conformance.c" "$OUT/conformance"
  log "API tests"
  "$OUT/api_test"
  log "conformance"
  "$OUT/conformance" "$ROOT/conformance" | tail -n 1
  # Sanitizers: the C side is instrumented; every allocation (Rust's too, through malloc) is
  # leak-checked at exit. The live-handle counter catches handles kept by the debug registry.
  cc_test "$HERE/tests/api_test.c" "$OUT/api_test-asan" "${SAN[@]}"
  cc_test "$HERE/tests/conformance.c" "$OUT/conformance-asan" "${SAN[@]}"
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  log "API tests under ASan+UBSan"
  "$OUT/api_test-asan"
  log "conformance under ASan+UBSan"
  "$OUT/conformance-asan" "$ROOT/conformance" | tail -n 1
}

bench() {
  ensure_c_tools
  build_lib --release
  mkdir -p "$OUT"
  gcc -std=c99 -O2 -Wall -Wextra -Werror -I"$HERE/include" "$HERE/tests/bench.c" -o "$OUT/bench" \
    "$TARGET/release/libholdoff.a" "${LIBS[@]}"
  "$OUT/bench"
}

case "${1:-test}" in
  test) run_tests ;;
  conformance) conformance ;;
  bench) bench ;;
  header)
    ensure_cbindgen
    generate_header "$HERE/include/holdoff.h"
    log "wrote include/holdoff.h"
    ;;
  *)
    echo "usage: $0 [test|conformance|bench|header]" >&2
    exit 2
    ;;
esac
