#!/usr/bin/env bash
# bench/kotlin: holdoff's Kotlin binding through its fast path (BenchTest.kt) against
# Resilience4j's CircuitBreaker (Maven Central, test scope), in one JVM, over a release build of
# the uniffi library; the floor is a no-op JNA call into that library. Prints a summary;
# HOLDOFF_BENCH_OUT=<file> also appends the records (lang `kotlin`).
# BenchTest.kt compiles with the binding's tests (bindings/kotlin/pom.xml adds this directory);
# the binding's run.sh builds the library, generates the Kotlin and runs Maven.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"
need mvn kotlin
need java kotlin
if [ -n "${HOLDOFF_BENCH_OUT:-}" ]; then
  # The test JVM runs in the binding's directory: give it an absolute path.
  case "$HOLDOFF_BENCH_OUT" in /*) ;; *) HOLDOFF_BENCH_OUT="$PWD/$HOLDOFF_BENCH_OUT" ;; esac
  export HOLDOFF_BENCH_OUT
fi
exec bash "$ROOT/bindings/kotlin/run.sh" bench
