#!/usr/bin/env bash
# Model-checks the core's concurrent paths with loom (core/tests/loom.rs): every interleaving
# of 2-3 threads up to LOOM_MAX_PREEMPTIONS preemptions (default 2; 3 is deeper and ~7x slower).
#   core/loom.sh                        # all models
#   core/loom.sh one_probe_per_interval # one model (cargo test filter)
#   LOOM_MAX_PREEMPTIONS=3 core/loom.sh
# --cfg loom swaps std's atomics and locks for loom's (core/src/sync.rs) and rebuilds every
# crate, so it gets its own target dir (<target>/loom) and leaves the normal build alone. The dev
# profile keeps debug assertions on, which the models check too.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}/loom"
export RUSTFLAGS="--cfg loom${RUSTFLAGS:+ $RUSTFLAGS}"
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}"
exec cargo test -p holdoff --test loom "$@"
