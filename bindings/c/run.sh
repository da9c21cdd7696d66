#!/usr/bin/env bash
# bindings/c: the C ABI (crate holdoff-ffi, include/holdoff.h) and its C tests.
#
#   run.sh test         header check, Rust unit tests, C API tests, the pthread stress test and
#                       the conformance runner, then `sanitize`
#   run.sh sanitize     the same three C programs under AddressSanitizer + UBSan (leaks checked
#                       at exit), then under valgrind memcheck (definite leaks are errors)
#   run.sh conformance  the C conformance runner only (ends with `N passed, N failed, N skipped`)
#   run.sh bench        the C ABI's hot paths against a pthread-mutex baseline breaker (release)
#   run.sh header       regenerate include/holdoff.h with the pinned cbindgen
#
# Installs what it needs when missing: gcc, libcjson-dev and valgrind (apt-get), cbindgen
# (cargo install, pinned, into a cache directory).
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
  command -v valgrind >/dev/null || need+=(valgrind)
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

# The C programs every mode runs; each prints `N passed, N failed` last and exits non-zero on
# a failure. The stress test also aborts itself (watchdog) if it stops making progress.
build_tests() { # rest: extra compiler flags; $1 suffix of the binaries
  local suffix="$1"
  shift
  cc_test "$HERE/tests/api_test.c" "$OUT/api_test$suffix" "$@"
  cc_test "$HERE/tests/stress_test.c" "$OUT/stress_test$suffix" "$@"
  cc_test "$HERE/tests/conformance.c" "$OUT/conformance$suffix" "$@"
}

run_suite() { # $1 label, $2 binary suffix, rest: command prefix (a checker)
  local label="$1" suffix="$2"
  shift 2
  log "API tests$label"
  "$@" "$OUT/api_test$suffix" | tail -n 1
  log "stress test$label"
  "$@" "$OUT/stress_test$suffix" | tail -n 2
  log "conformance$label"
  "$@" "$OUT/conformance$suffix" "$ROOT/conformance" | tail -n 1
}

# Memory safety at the boundary: the C side is instrumented by ASan+UBSan (the Rust library is
# linked as it is; its allocations go through malloc, so leaks and frees are checked too), then
# the plain binaries run under valgrind, which sees every load and store of both sides.
# The debug library's handle registry turns use-after-free into HOLDOFF_STATUS_INVALID_HANDLE
# before any dereference, so api_test's use-after-free cases run under both; its quarantine
# keeps freed objects allocated, so for those cases it is the status checks, not the
# sanitizers, that prove the detection.
sanitize() {
  ensure_c_tools
  build_lib
  build_tests ""
  build_tests -asan "${SAN[@]}"
  (
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    run_suite " under ASan+UBSan" -asan
  )
  # Only definite leaks are errors: the debug registry's hash table is reachable from a static
  # through an interior pointer, which memcheck calls "possibly lost".
  HOLDOFF_TEST_THREAD_CALLS=2000 run_suite " under valgrind" "" valgrind -q --error-exitcode=1 --leak-check=full \
    --show-leak-kinds=definite --errors-for-leak-kinds=definite
}

run_tests() {
  ensure_c_tools
  check_header
  (cd "$ROOT" && cargo test --quiet -p holdoff-ffi)
  build_lib
  build_tests ""
  run_suite "" ""
  sanitize
}

bench() {
  ensure_c_tools
  build_lib --release
  mkdir -p "$OUT"
  # The wraps let the bench count every allocation, the Rust library's included.
  gcc -std=c11 -O2 -Wall -Wextra -Werror -I"$HERE/include" "$HERE/tests/bench.c" -o "$OUT/bench" \
    -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=posix_memalign,--wrap=aligned_alloc \
    "$TARGET/release/libholdoff.a" "${LIBS[@]}"
  # HOLDOFF_BENCH_OUT=<file>: also append JSON lines (the cross-language benchmark's records).
  "$OUT/bench"
}

case "${1:-test}" in
  test) run_tests ;;
  sanitize) sanitize ;;
  conformance) conformance ;;
  bench) bench ;;
  header)
    ensure_cbindgen
    generate_header "$HERE/include/holdoff.h"
    log "wrote include/holdoff.h"
    ;;
  *)
    echo "usage: $0 [test|sanitize|conformance|bench|header]" >&2
    exit 2
    ;;
esac
