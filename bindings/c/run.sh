#!/usr/bin/env bash
# bindings/c: the C ABI (crate holdoff-ffi, include/holdoff.h) and its C tests.
#
#   run.sh test         header check, Rust unit tests, C API tests, the pthread stress test and
#                       the conformance runner, then `sanitize`
#   run.sh sanitize     the same three C programs under AddressSanitizer + UBSan (leaks checked
#                       at exit), then under valgrind memcheck (definite leaks are errors)
#   run.sh conformance  the C conformance runner only
#   run.sh header       regenerate include/holdoff.h with the pinned cbindgen
#
# Needs gcc, libcjson-dev and valgrind (scripts/install-deps c); installs cbindgen (pinned) into
# the tool cache the first time.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh" c

OUT="$CARGO_TARGET_DIR/holdoff-c"
CBINDGEN_VERSION=0.29.4
CFLAGS=(-std=c99 -Wall -Wextra -Werror -g -I"$HERE/include")
SAN=(-O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all)
LIBS=(-lpthread -ldl -lm)

generate_header() { # $1: output file
  cargo_tool cbindgen "$CBINDGEN_VERSION"
  (cd "$HERE" && cbindgen --quiet --config cbindgen.toml --crate holdoff-ffi --output "$1" .)
}

check_header() {
  local tmp
  temp tmp
  generate_header "$tmp"
  if ! diff -u "$HERE/include/holdoff.h" "$tmp"; then
    log "include/holdoff.h is out of date: run bindings/c/run.sh header and commit it"
    exit 1
  fi
  log "header: include/holdoff.h matches cbindgen $CBINDGEN_VERSION"
}

# Compiles a test program against the debug static library; $1 source, $2 output, rest flags.
cc_test() {
  local src="$1" out="$2"
  shift 2
  mkdir -p "$OUT"
  gcc "${CFLAGS[@]}" "$@" "$src" -o "$out" "$CARGO_TARGET_DIR/debug/libholdoff.a" -lcjson "${LIBS[@]}"
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
  run_conformance "$@" "$OUT/conformance$suffix" "$ROOT/conformance"
  echo "$CONFORMANCE"
}

# Memory safety at the boundary: the C side is instrumented by ASan+UBSan (the Rust library is
# linked as it is; its allocations go through malloc, so leaks and frees are checked too), then
# the plain binaries run under valgrind, which sees every load and store of both sides.
# The debug library's handle registry turns use-after-free into HOLDOFF_STATUS_INVALID_HANDLE
# before any dereference, so api_test's use-after-free cases run under both; its quarantine
# keeps freed objects allocated, so for those cases it is the status checks, not the
# sanitizers, that prove the detection.
sanitizers() {
  run_suite " under ASan+UBSan" -asan env ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  # Only definite leaks are errors: the debug registry's hash table is reachable from a static
  # through an interior pointer, which memcheck calls "possibly lost".
  HOLDOFF_TEST_THREAD_CALLS=2000 run_suite " under valgrind" "" valgrind -q --error-exitcode=1 --leak-check=full \
    --show-leak-kinds=definite --errors-for-leak-kinds=definite
}

build_all() {
  cargo_build debug -p holdoff-ffi
  build_tests ""
  build_tests -asan "${SAN[@]}"
}

cmd_sanitize() {
  build_all
  sanitizers
}

cmd_conformance() {
  cargo_build debug -p holdoff-ffi
  cc_test "$HERE/tests/conformance.c" "$OUT/conformance"
  run_conformance "$OUT/conformance" "$ROOT/conformance"
}

cmd_test() {
  check_header
  (cd "$ROOT" && cargo test --quiet -p holdoff-ffi)
  build_all
  run_suite "" ""
  sanitizers
}

cmd_header() {
  generate_header "$HERE/include/holdoff.h"
  log "wrote include/holdoff.h"
}

run_mode "$@"
