#!/usr/bin/env bash
# bindings/c: the C ABI (crate holdoff-ffi, include/holdoff.h) and its C tests.
#
#   run.sh test         header check, Rust unit tests, C API tests, C metrics tests, the pthread
#                       stress test, the fast-path tests and the conformance runner, then `sanitize`
#   run.sh sanitize     the same five C programs under AddressSanitizer + UBSan (leaks checked
#                       at exit), then under valgrind memcheck (definite leaks are errors)
#   run.sh conformance  the C conformance runner only
#   run.sh header       regenerate include/holdoff.h with the pinned cbindgen
#   run.sh dist [TARGET...]
#                       release archives dist/c/holdoff-<version>-<target>.tar.gz (default: this
#                       machine's target, plus aarch64-unknown-linux-gnu when
#                       aarch64-linux-gnu-gcc is installed): include/holdoff.h, lib/libholdoff.a
#                       (stripped), lib/libholdoff.so.* with its soname and symlinks,
#                       lib/pkgconfig/holdoff.pc (relocatable: ${pcfiledir})
#   run.sh install PREFIX
#                       the same files for this machine under $DESTDIR$PREFIX (make install)
#
# Needs gcc, libcjson-dev and valgrind (scripts/install-deps c); installs cbindgen (pinned) into
# the tool cache the first time. A cross target needs its Rust target (rustup target add) and
# Debian's gcc-<arch>-linux-gnu, which links it and whose binutils strip it.
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
  cc_test "$HERE/tests/metrics_test.c" "$OUT/metrics_test$suffix" "$@"
  cc_test "$HERE/tests/stress_test.c" "$OUT/stress_test$suffix" "$@"
  cc_test "$HERE/tests/fast_path_test.c" "$OUT/fast_path_test$suffix" "$@"
  cc_test "$HERE/tests/conformance.c" "$OUT/conformance$suffix" "$@"
}

run_suite() { # $1 label, $2 binary suffix, rest: command prefix (a checker)
  local label="$1" suffix="$2"
  shift 2
  log "API tests$label"
  "$@" "$OUT/api_test$suffix" | tail -n 1
  log "metrics tests$label"
  "$@" "$OUT/metrics_test$suffix" | tail -n 1
  log "stress test$label"
  "$@" "$OUT/stress_test$suffix" | tail -n 2
  log "fast-path tests$label"
  "$@" "$OUT/fast_path_test$suffix" | tail -n 3
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

# Packaging ---------------------------------------------------------------------------------

VERSION="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$ROOT/Cargo.toml" | head -n 1)"
HOST="$(rustc -vV | sed -n 's/^host: //p')"
CROSS_TARGETS=(aarch64-unknown-linux-gnu)
# What the static library needs from the system (Rust's std), after -lholdoff.
LIBS_PRIVATE="-lpthread -ldl -lm"

# The binutils prefix of a Linux target's Debian cross toolchain (aarch64-linux-gnu-); empty for
# this machine's own.
cross_prefix() { # target
  [ "$1" = "$HOST" ] && return 0
  local arch="${1%%-*}" os="${1#*-*-}"
  echo "$arch-$os-"
}

# Release build of holdoff-ffi for a target; sets BUILT to the directory holding its libraries.
BUILT=""
build_release() { # target
  local target="$1"
  if [ "$target" = "$HOST" ]; then
    cargo_build release -p holdoff-ffi
    BUILT="$CARGO_TARGET_DIR/release"
  else
    local linker var
    linker="$(cross_prefix "$target")gcc"
    command -v "$linker" >/dev/null || { log "$target: $linker is missing (apt-get install gcc-${target%%-*}-linux-gnu)"; return 1; }
    var="CARGO_TARGET_$(echo "$target" | tr 'a-z-' 'A-Z_')_LINKER"
    (export "$var=${!var:-$linker}" && cd "$ROOT" && cargo build --quiet --release -p holdoff-ffi --target "$target")
    BUILT="$CARGO_TARGET_DIR/$target/release"
  fi
}

# Writes holdoff.pc; $2 is the prefix line's value (an absolute path, or ${pcfiledir}/../..).
write_pc() { # file prefix
  mkdir -p "$(dirname "$1")"
  cat >"$1" <<PC
prefix=$2
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: holdoff
Description: One sans-IO circuit breaker, retry budget and retry quota (C ABI)
Version: $VERSION
Libs: -L\${libdir} -lholdoff
Libs.private: $LIBS_PRIVATE
Cflags: -I\${includedir}
PC
}

# The files a C user installs, under $2: include/holdoff.h, lib/libholdoff.a stripped, lib/libholdoff.so.<version> stripped, the soname and libholdoff.so as symlinks,
# lib/pkgconfig/holdoff.pc with the prefix given.
stage() { # target dir pc-prefix
  local target="$1" dir="$2" from strip soname real
  build_release "$target"
  from="$BUILT"
  strip="$(cross_prefix "$target")strip"
  command -v "$strip" >/dev/null || { log "$target: $strip is missing (apt-get install binutils-${target%%-*}-linux-gnu)"; return 1; }
  mkdir -p "$dir/include" "$dir/lib"
  install -m 644 "$HERE/include/holdoff.h" "$dir/include/holdoff.h"
  # Debug info, and the LLVM bitcode std's objects embed for Rust's LTO (60% of the archive),
  # which a C linker never reads.
  "$strip" --strip-debug --remove-section=.llvmbc --remove-section=.llvmcmd \
    -o "$dir/lib/libholdoff.a" "$from/libholdoff.a"
  chmod 644 "$dir/lib/libholdoff.a"
  real="libholdoff.so.$VERSION"
  "$strip" --strip-unneeded -o "$dir/lib/$real" "$from/libholdoff.so"
  chmod 755 "$dir/lib/$real"
  soname="$(LC_ALL=C "$(cross_prefix "$target")readelf" -d "$dir/lib/$real" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')"
  [ -n "$soname" ] || { log "$target: libholdoff.so has no soname (bindings/c/build.rs)"; return 1; }
  [ "$soname" = "$real" ] || ln -sfn "$real" "$dir/lib/$soname"
  ln -sfn "$soname" "$dir/lib/libholdoff.so"
  write_pc "$dir/lib/pkgconfig/holdoff.pc" "$3"
}

cmd_dist() { # [target...]
  local targets=("$@") out="$ROOT/dist/c" t name work mtime
  if [ ${#targets[@]} -eq 0 ]; then
    targets=("$HOST")
    for t in "${CROSS_TARGETS[@]}"; do
      if command -v "$(cross_prefix "$t")gcc" >/dev/null; then targets+=("$t")
      else log "skipping $t: $(cross_prefix "$t")gcc is missing (apt-get install gcc-${t%%-*}-linux-gnu)"; fi
    done
  fi
  # Reproducible archives: sorted names, root owner, the commit's time.
  mtime="$(git -C "$ROOT" log -1 --format=%ct 2>/dev/null || date +%s)"
  mkdir -p "$out"
  for t in "${targets[@]}"; do
    name="holdoff-$VERSION-$t"
    temp -d work
    log "$name: release build, strip, package"
    # shellcheck disable=SC2016 # pkg-config expands it
    stage "$t" "$work/$name" '${pcfiledir}/../..'
    install -m 644 "$ROOT/LICENSE" "$work/$name/LICENSE"
    tar -C "$work" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$mtime" -cf - "$name" \
      | gzip -9n >"$out/$name.tar.gz"
    log "$out/$name.tar.gz: $(du -k "$out/$name.tar.gz" | cut -f1) KiB; stripped" \
      "libholdoff.a $(du -k "$work/$name/lib/libholdoff.a" | cut -f1) KiB," \
      "libholdoff.so $(du -k "$work/$name/lib/libholdoff.so.$VERSION" | cut -f1) KiB"
  done
}

cmd_install() { # prefix (DESTDIR honoured)
  local prefix="${1:?usage: run.sh install PREFIX}"
  case "$prefix" in /*) ;; *) prefix="$(pwd)/$prefix" ;; esac
  stage "$HOST" "${DESTDIR:-}$prefix" "$prefix"
  log "installed $prefix/include/holdoff.h, $prefix/lib/libholdoff.{a,so*}, $prefix/lib/pkgconfig/holdoff.pc"
}

cmd_header() {
  generate_header "$HERE/include/holdoff.h"
  log "wrote include/holdoff.h"
}

run_mode "$@"
