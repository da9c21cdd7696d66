#!/usr/bin/env bash
# bench/kotlin: allow + record and friends from Kotlin in a warmed loop (BenchTest.kt), over a
# release build of the uniffi library. Wall-clock figures printed, no records: every call
# crosses JNA, which costs microseconds, so Kotlin is not part of `make bench`.
# BenchTest.kt compiles with the binding's tests (bindings/kotlin/pom.xml adds this directory);
# the binding's run.sh builds the library, generates the Kotlin and runs Maven.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"
exec bash "$ROOT/bindings/kotlin/run.sh" bench
