#!/usr/bin/env bash
# bench/c: the C ABI's hot paths (bench.c) against a pthread-mutex baseline breaker, on the
# release static library. Prints a summary; HOLDOFF_BENCH_OUT=<file> also appends the records.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"

need gcc c
build_ffi
# The wraps let the bench count every allocation, the Rust library's included.
gcc -std=c11 -O2 -Wall -Wextra -Werror -I"$ROOT/bindings/c/include" "$BENCH/c/bench.c" -o "$BENCH_OUT_DIR/c-bench" \
  -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=posix_memalign,--wrap=aligned_alloc \
  "$CARGO_TARGET_DIR/$PROFILE/libholdoff.a" -lpthread -ldl -lm
exec "$BENCH_OUT_DIR/c-bench"
