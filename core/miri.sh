#!/usr/bin/env bash
# Miri (nightly) over the core's tests and the C ABI's Rust tests: undefined behaviour, data races
# in the threaded tests, leaks, misuse of std and of the dependencies. The core forbids unsafe; the
# C ABI crate (bindings/c) is where holdoff's unsafe code lives, driven by src/abi_tests.rs.
#   core/miri.sh                 # everything below, a few minutes on 2 cores
#   MIRIFLAGS=-Zmiri-tree-borrows core/miri.sh   # the other aliasing model
# Under cfg(miri) the stress test makes 300 calls a thread (not 20,000) and the property tests
# run 2 cases each without replaying the saved regressions. Not run here: the conformance runner
# (252 cases; Miri had done 2 of them after about 10 minutes; the unit tests cover the same safe code)
# and the loom models (core/loom.sh). Miri keeps its own build under <target>/miri.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
export MIRIFLAGS="${MIRIFLAGS:-}"
if ! cargo +nightly miri --version >/dev/null 2>&1; then
    rustup toolchain install nightly --profile minimal --component miri,rust-src || {
        echo "miri.sh: needs the nightly toolchain with miri and rust-src (rustup)" >&2
        exit 1
    }
fi
cargo +nightly miri setup -q
cargo +nightly miri test -p holdoff --lib --test stress --test properties
cargo +nightly miri test -p holdoff-ffi --lib
