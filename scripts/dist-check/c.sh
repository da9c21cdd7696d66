#!/usr/bin/env bash
# The C library as users get it, from dist/c (make dist-c), and as `make install` puts it.
#
#   bash scripts/dist-check/c.sh            the archives in dist/c
#   bash scripts/dist-check/c.sh install    also `make install PREFIX=<temp>` (builds with cargo
#                                           first), then the same checks on that prefix
#
# For this machine's archive, unpacked in a temporary directory outside the checkout, with cargo
# and rustc off PATH, through pkg-config only (PKG_CONFIG_PATH=<unpacked>/lib/pkgconfig):
#   - the shared library's soname, and its symlinks;
#   - a smoke test (a breaker trips after five failures and refuses the next call), linked
#     against the shared library (pkg-config --libs, run through its rpath) and the static one;
#   - the C conformance runner (bindings/c/tests/conformance.c, copied) over conformance/cases,
#     linked both ways, with Debian's libcjson.
# Another target's archive (aarch64) gets the same links, with its cross compiler when present,
# and its files' architecture checked; it is not run.
# Prints `conformance c: N passed, N failed, N skipped` from the installed static library (the
# last tree checked).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VERSION="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$ROOT/Cargo.toml" | head -n 1)"
HOST_ARCH="$(uname -m)"
log() { echo "[dist-check c] $*" >&2; }

WORK="$(mktemp -d "${TMPDIR:-/tmp}/holdoff-dist-c-XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
if [ "${1:-}" = install ]; then
  log "make install PREFIX=$WORK/prefix"
  make -s -C "$ROOT" install PREFIX="$WORK/prefix" >/dev/null
fi

PATH="$(echo "$PATH" | tr : '\n' | grep -v -e cargo -e rustup | paste -sd:)"
export PATH
if command -v cargo >/dev/null || command -v rustc >/dev/null; then
  log "cargo or rustc is still on PATH"; exit 1
fi

# The test programs, copied: nothing is compiled from the checkout.
mkdir -p "$WORK/src"
cp "$ROOT/bindings/c/tests/conformance.c" "$ROOT/bindings/c/tests/metrics_series.h" "$WORK/src/"
cat >"$WORK/src/smoke.c" <<'C'
#include <stdio.h>
#include <string.h>
#include "holdoff.h"

int main(void) {
    if (holdoff_abi_version() != HOLDOFF_ABI_VERSION) return 1;
    const char *json = "{\"breaker\": {\"trip\": {\"policy\": \"consecutive\", \"threshold\": 5}}}";
    holdoff_config *config;
    if (holdoff_config_parse(json, strlen(json), &config) != HOLDOFF_STATUS_OK) {
        fprintf(stderr, "%s (field %s)\n", holdoff_last_error_message(), holdoff_last_error_field());
        return 1;
    }
    holdoff_clock *clock;
    holdoff_breaker *breaker;
    if (holdoff_clock_new_manual(0, &clock) != HOLDOFF_STATUS_OK) return 1;
    if (holdoff_breaker_new(config, clock, &breaker) != HOLDOFF_STATUS_OK) return 1;
    holdoff_config_free(config);
    int failures = 0;
    holdoff_permit permit;
    holdoff_refusal refusal;
    while (holdoff_breaker_allow(breaker, &permit, &refusal) == HOLDOFF_STATUS_OK && failures < 10) {
        holdoff_breaker_record(breaker, &permit, HOLDOFF_OUTCOME_FAILURE, 0, NULL);
        failures++;
    }
    printf("holdoff %s: open after %d failures, next probe in %llu ms\n", holdoff_version(),
           failures, (unsigned long long)(refusal.retry_after_ns / 1000000));
    holdoff_breaker_free(breaker);
    holdoff_clock_free(clock);
    return failures == 5 ? 0 : 1;
}
C

# Checks one installed tree (an unpacked archive or a make install prefix); $2 its target.
check_tree() { # dir target
  local dir="$1" target="$2" arch="${2%%-*}" cc=gcc readelf=readelf run=1 pc libdir soname
  if [ "$arch" != "$HOST_ARCH" ]; then
    run=0 cc="$arch-linux-gnu-gcc" readelf="$arch-linux-gnu-readelf"
    if ! command -v "$cc" >/dev/null; then
      log "$target: $cc is missing, checking the files only"; cc=""
    fi
    command -v "$readelf" >/dev/null || readelf=readelf
  fi
  export PKG_CONFIG_PATH="$dir/lib/pkgconfig"
  pc="$(pkg-config --modversion holdoff)"
  [ "$pc" = "$VERSION" ] || { log "$target: pkg-config says version $pc, not $VERSION"; return 1; }
  libdir="$(pkg-config --variable=libdir holdoff)"
  log "$target: pkg-config --cflags --libs holdoff: $(pkg-config --cflags --libs holdoff)"
  soname="$(LC_ALL=C "$readelf" -d "$libdir/libholdoff.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')"
  if [ -z "$soname" ] || [ ! -L "$libdir/$soname" ] || [ ! -L "$libdir/libholdoff.so" ]; then
    log "$target: libholdoff.so has no soname, or its symlinks are missing"; return 1
  fi
  local machine
  machine="$(LC_ALL=C "$readelf" -h "$libdir/libholdoff.so" | sed -n 's/ *Machine: *//p')"
  log "$target: soname $soname ($machine); stripped sizes: libholdoff.a" \
    "$(stat -c %s "$libdir/libholdoff.a") B, $(readlink -f "$libdir/libholdoff.so" | xargs basename)" \
    "$(stat -c %s "$(readlink -f "$libdir/libholdoff.so")") B"
  if LC_ALL=C "$readelf" -S "$libdir/libholdoff.so" | grep -q '\.debug_info'; then
    log "$target: libholdoff.so carries debug info"; return 1
  fi
  [ -n "$cc" ] || return 0

  local out="$WORK/bin-$target" cflags libs static_libs
  mkdir -p "$out"
  read -ra cflags <<<"$(pkg-config --cflags holdoff)"
  read -ra libs <<<"$(pkg-config --libs holdoff)"
  # Static: the archive itself, then what it needs from the system (Libs.private).
  read -ra static_libs <<<"$libdir/libholdoff.a $(pkg-config --libs-only-l --static holdoff | sed 's/-lholdoff//')"
  "$cc" -std=c99 -Wall -Werror "${cflags[@]}" "$WORK/src/smoke.c" -o "$out/smoke-shared" \
    "${libs[@]}" -Wl,-rpath,"$libdir"
  "$cc" -std=c99 -Wall -Werror "${cflags[@]}" "$WORK/src/smoke.c" -o "$out/smoke-static" "${static_libs[@]}"
  LC_ALL=C "$readelf" -d "$out/smoke-shared" | grep -q "NEEDED.*\[$soname\]" \
    || { log "$target: the shared smoke test does not need $soname"; return 1; }
  if LC_ALL=C "$readelf" -d "$out/smoke-static" | grep -q 'NEEDED.*libholdoff'; then
    log "$target: the static smoke test needs libholdoff.so"; return 1
  fi
  if [ "$run" = 0 ]; then
    log "$target: smoke test links, shared and static (not run: another architecture)"
    return 0
  fi
  local said
  said="$("$out/smoke-shared")"
  log "$target: smoke test (shared): $said"
  said="$("$out/smoke-static")"
  log "$target: smoke test (static): $said"
  gcc -std=c99 "${cflags[@]}" "$WORK/src/conformance.c" -o "$out/conformance-shared" \
    "${libs[@]}" -Wl,-rpath,"$libdir" -lcjson
  gcc -std=c99 "${cflags[@]}" "$WORK/src/conformance.c" -o "$out/conformance-static" \
    "${static_libs[@]}" -lcjson
  said="$("$out/conformance-shared" "$ROOT/conformance" | tail -n 1)"
  log "$target: conformance (shared): $said"
  CONFORMANCE="$("$out/conformance-static" "$ROOT/conformance" | tail -n 1)"
}

CONFORMANCE=""
found=0
for tarball in "$ROOT"/dist/c/holdoff-"$VERSION"-*.tar.gz; do
  [ -f "$tarball" ] || continue
  found=1
  name="$(basename "$tarball" .tar.gz)"
  mkdir -p "$WORK/unpacked"
  tar -xzf "$tarball" -C "$WORK/unpacked"
  log "${tarball#"$ROOT"/}: $(stat -c %s "$tarball") B"
  check_tree "$WORK/unpacked/$name" "${name#holdoff-"$VERSION"-}"
done
[ "$found" = 1 ] || { log "no archive in dist/c: run make dist-c"; exit 1; }
if [ -d "$WORK/prefix" ]; then
  check_tree "$WORK/prefix" "$HOST_ARCH-make-install"
fi
[ -n "$CONFORMANCE" ] || { log "no archive for $HOST_ARCH ran the conformance runner"; exit 1; }
echo "conformance c: $CONFORMANCE"
[[ "$CONFORMANCE" == *" 0 failed, 0 skipped" ]]
