#!/usr/bin/env bash
# make fuzz: every cargo-fuzz (libFuzzer) target of fuzz/ for a bounded time.
#
#   bash fuzz/run.sh                 # every target, FUZZ_SECONDS (default 60) each
#   FUZZ_SECONDS=600 bash fuzz/run.sh stateful retry_after
#
# Installs what it needs (the nightly toolchain through rustup, cargo-fuzz under
# ~/.cache/holdoff/cargo-fuzz), replays every saved crash under fuzz/regressions/<target>/ and
# the seeds under fuzz/corpus/<target>/ first, then fuzzes. New corpus entries go to
# $CARGO_TARGET_DIR/fuzz/corpus/<target> (never into the committed seeds); a crash is saved
# under fuzz/artifacts/<target>/ and fails the run. Ends with `fuzz: N passed, N failed`.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FUZZ="$ROOT/fuzz"
SECONDS_EACH="${FUZZ_SECONDS:-60}"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}/fuzz"
CARGO_FUZZ_ROOT="$HOME/.cache/holdoff/cargo-fuzz"
export PATH="$CARGO_FUZZ_ROOT/bin:$HOME/.cargo/bin:$PATH"
# The fuzz crate is its own workspace with its own lock file; the shared target dir would be
# rebuilt with sanitizer flags, so fuzz builds live in a subdirectory of it.
unset CARGO_TARGET_DIR

if ! command -v rustup >/dev/null; then
    echo "fuzz: rustup is needed to install the nightly toolchain" >&2
    exit 1
fi
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    rustup toolchain install nightly --profile minimal
fi
if ! command -v cargo-fuzz >/dev/null; then
    cargo install --locked --root "$CARGO_FUZZ_ROOT" cargo-fuzz
fi

ALL_TARGETS=(retry_after config case_loader trace_import stateful)
if [ "$#" -gt 0 ]; then TARGETS=("$@"); else TARGETS=("${ALL_TARGETS[@]}"); fi

cd "$ROOT"
fuzz() { cargo +nightly fuzz "$@"; }
for t in "${TARGETS[@]}"; do
    if ! fuzz build --target-dir "$TARGET_DIR" "$t"; then
        echo "FAIL fuzz $t: the target does not build"
        echo "fuzz: 0 passed, ${#TARGETS[@]} failed"
        exit 1
    fi
done

passed=0
failed=0
summary=()
for t in "${TARGETS[@]}"; do
    echo "== fuzz $t: replaying regressions and seeds"
    inputs=()
    for dir in "$FUZZ/regressions/$t" "$FUZZ/corpus/$t"; do
        if [ -d "$dir" ]; then
            while IFS= read -r -d '' f; do inputs+=("$f"); done < <(find "$dir" -type f -print0 | sort -z)
        fi
    done
    if [ "${#inputs[@]}" -gt 0 ] &&
        ! fuzz run --target-dir "$TARGET_DIR" "$t" "${inputs[@]}" -- -runs=1 >"$TARGET_DIR/$t.replay.log" 2>&1; then
        tail -40 "$TARGET_DIR/$t.replay.log"
        echo "FAIL fuzz $t: a saved input crashes"
        failed=$((failed + 1))
        summary+=("$t: replay FAILED")
        continue
    fi
    echo "== fuzz $t: ${SECONDS_EACH}s"
    gen="$TARGET_DIR/corpus/$t"
    mkdir -p "$gen" "$FUZZ/artifacts/$t"
    log="$TARGET_DIR/$t.log"
    if fuzz run --target-dir "$TARGET_DIR" "$t" "$gen" "$FUZZ/corpus/$t" -- \
        -max_total_time="$SECONDS_EACH" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 >"$log" 2>&1; then
        runs="$(grep -o 'Done [0-9]* runs' "$log" | tail -1 | grep -o '[0-9]*' || echo '?')"
        echo "ok   fuzz $t: $runs executions, no crash"
        passed=$((passed + 1))
        summary+=("$t: $runs executions")
    else
        tail -60 "$log"
        # libFuzzer also stops on a timeout or the RSS limit; the log above tells which.
        echo "FAIL fuzz $t: see $log; a crashing input is saved under fuzz/artifacts/$t/ (minimise with: cargo +nightly fuzz tmin $t <file>)"
        failed=$((failed + 1))
        summary+=("$t: CRASH")
    fi
done

printf '%s\n' "${summary[@]}"
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
