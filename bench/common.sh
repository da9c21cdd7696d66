# Sourced by every bench/<lang>/run.sh: the paths, the build profile and the checks they share.
#
#   HOLDOFF_BENCH_OUT=<file>     append the cross-language records (JSON Lines) to <file>
#   HOLDOFF_BENCH_PROFILE=debug  build the debug libraries instead of release: checks that a
#                                bench builds and runs, faster; its figures mean nothing
# shellcheck shell=bash
BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$BENCH/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
PROFILE="${HOLDOFF_BENCH_PROFILE:-release}"
case "$PROFILE" in
  release) CARGO_PROFILE=(--release) ;;
  debug) CARGO_PROFILE=() ;;
  *) echo "[bench] HOLDOFF_BENCH_PROFILE must be release or debug, not '$PROFILE'" >&2; exit 2 ;;
esac
# Where a language's bench puts what it compiles.
BENCH_OUT_DIR="$CARGO_TARGET_DIR/holdoff-bench/$PROFILE"
mkdir -p "$BENCH_OUT_DIR"

bench_log() { printf '[bench] %s\n' "$*" >&2; }

# need <command> <binding>: `scripts/install-deps <binding>` installs what the bench needs.
need() {
  command -v "$1" >/dev/null && return
  bench_log "$1 is not installed: bash scripts/install-deps $2 installs it"
  exit 1
}

# The C ABI's libraries (libholdoff.a, libholdoff.so) that C, Go and C# link, incrementally.
build_ffi() {
  (cd "$ROOT" && cargo build --quiet -p holdoff-ffi "${CARGO_PROFILE[@]}")
}
