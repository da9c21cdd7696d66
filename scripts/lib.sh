# What every bindings/<lang>/run.sh (and conformance/run-all) shares. Sourced, with a name:
#
#   source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh" python
#
# Turns on strict mode and sets
#   BINDING           the name given: the log prefix and the conformance row's name
#   ROOT              the repository
#   HERE              the directory of the script that sourced this file
#   CARGO_TARGET_DIR  one target dir for every build of the workspace (default <repo>/target)
#   HOLDOFF_CACHE     tools built once per machine (default ~/.cache/holdoff)
# A run.sh defines one cmd_<mode> function per mode and ends with `run_mode "$@"`, which checks
# the system packages (scripts/install-deps --check), runs the mode (default: test), and ends
# with the time it took and the line `conformance <lang>: N passed, N failed, N skipped` when the
# mode ran the conformance runner.
set -euo pipefail

BINDING="${1:?usage: source scripts/lib.sh <name>}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HERE="$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
HOLDOFF_CACHE="${HOLDOFF_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/holdoff}"

log() { echo "[$BINDING] $*" >&2; }

# cargo build of the workspace's crates into the shared target dir; $1: debug or release.
cargo_build() {
  local profile="$1" release=()
  shift
  [ "$profile" = release ] && release=(--release)
  (cd "$ROOT" && cargo build --quiet "${release[@]}" "$@")
}

# Puts a pinned crates.io tool on PATH, built once per machine into $HOLDOFF_CACHE/<crate>-<version>
# (in a target dir of its own: the shared one is for the workspace).
cargo_tool() { # crate version
  local crate="$1" version="$2" root="$HOLDOFF_CACHE/$1-$2"
  if ! "$root/bin/$crate" --version 2>/dev/null | grep -q " $version\$"; then
    log "installing $crate $version into $root"
    CARGO_TARGET_DIR="$root-build" cargo install --quiet --locked --force --version "$version" \
      --root "$root" "$crate"
    rm -rf "$root-build"
  fi
  PATH="$root/bin:$PATH"
}

# Sets the named variable to the path of a new temporary file (a directory with -d), removed when
# the script exits.
_TEMPS=()
temp() { # [-d] name
  local _kind=()   # not a name a caller would pass
  if [ "$1" = -d ]; then _kind=(-d); shift; fi
  printf -v "$1" '%s' "$(mktemp "${_kind[@]}" "${TMPDIR:-/tmp}/holdoff-$BINDING-XXXXXX")"
  _TEMPS+=("${!1}")
}

# Every tally line of a runner's output (`N passed, N failed[, N skipped]`, perhaps after one word
# and a colon) as "passed failed skipped".
_tally_numbers() { # file
  { grep -E '^([A-Za-z]+: )?[0-9]+ passed, [0-9]+ failed' "$1" || true; } \
    | sed -E 's/^([A-Za-z]+: )?([0-9]+) passed, ([0-9]+) failed(, ([0-9]+) skipped)?.*/\2 \3 \5/'
}
_tally_format='{printf "%d passed, %d failed, %d skipped\n", $1, $2, $3}'
# The last tally line of a runner's output, as `N passed, N failed, N skipped`; empty if none.
tally_of() { _tally_numbers "$1" | tail -n 1 | awk "$_tally_format"; }
# The sum of every tally line of a runner's output; empty if none.
tally_sum() {
  _tally_numbers "$1" | awk '{p += $1; f += $2; s += $3} END {if (NR) print p, f, s}' \
    | awk "$_tally_format"
}

# Keeps the conformance tally found in a runner's output for this run's last line and, when
# HOLDOFF_TALLY_DIR is set (make test), in $HOLDOFF_TALLY_DIR/<lang>, where the conformance
# matrix reads it instead of running the runner a second time.
CONFORMANCE=""
record_conformance() { # file
  local kept="${HOLDOFF_TALLY_DIR:-}${HOLDOFF_TALLY_DIR:+/$BINDING}"
  CONFORMANCE="$(tally_of "$1")"
  [ -z "$kept" ] || rm -f "$kept"
  if [ -z "$CONFORMANCE" ]; then
    log "the conformance runner printed no tally line"
    return 1
  fi
  if [ -n "$kept" ]; then
    mkdir -p "$HOLDOFF_TALLY_DIR"
    echo "$CONFORMANCE" >"$kept"
  fi
}

# Runs a conformance runner and records its tally. Its output is shown only when something
# failed or was skipped; otherwise the tally line says it all.
run_conformance() { # command...
  local out rc=0
  temp out
  "$@" >"$out" 2>&1 || rc=$?
  if ! record_conformance "$out" && [ "$rc" -eq 0 ]; then rc=1; fi
  if [ "$rc" -ne 0 ] || [[ "$CONFORMANCE" != *" 0 failed, 0 skipped" ]]; then cat "$out"; fi
  return "$rc"
}

_finish() {
  local rc=$?
  rm -rf "${_TEMPS[@]}"
  if [ "$rc" -eq 0 ]; then
    log "$MODE: done in ${SECONDS} s"
  else
    log "$MODE: FAILED (exit $rc) after ${SECONDS} s"
  fi
  if [ -n "$CONFORMANCE" ]; then echo "conformance $BINDING: $CONFORMANCE"; fi
}

run_mode() { # mode (default test), then the mode's arguments
  MODE="${1:-test}"
  [ $# -eq 0 ] || shift
  if ! declare -F "cmd_$MODE" >/dev/null; then
    echo "usage: $0 [$(compgen -A function cmd_ | sed 's/^cmd_//' | paste -sd '|')]" >&2
    exit 2
  fi
  "$ROOT/scripts/install-deps" --check "$BINDING"
  trap _finish EXIT
  "cmd_$MODE" "$@"
}
