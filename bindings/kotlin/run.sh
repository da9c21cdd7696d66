#!/usr/bin/env bash
# The Kotlin (JVM) binding: holdoff's core over uniffi (bindings/uniffi), called through JNA.
#
#   bash bindings/kotlin/run.sh test         native library, generated Kotlin (and Swift, to prove
#                                            generation), then every Maven test incl. conformance,
#                                            then the multi-process fleet test (JVM workers sharing
#                                            one breaker through a redis-server it starts)
#   bash bindings/kotlin/run.sh fleet        the multi-process fleet test only
#   bash bindings/kotlin/run.sh conformance  the conformance runner only
#   bash bindings/kotlin/run.sh bench        bench/kotlin/BenchTest.kt against Resilience4j (release
#                                            library; bench/kotlin/run.sh calls it)
#   bash bindings/kotlin/run.sh dist         the jar into dist/maven/, a Maven file repository
#                                            (make dist-kotlin; scripts/dist-check/kotlin.sh)
#
# Needs a JDK, Maven and redis-server (scripts/install-deps kotlin). Maven's local repository is
# $HOLDOFF_M2_REPO (default ~/.m2/repository), so a second run downloads nothing.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh" kotlin

bindgen="$CARGO_TARGET_DIR/debug/uniffi-bindgen"
gen_kotlin="$HERE/target/generated-sources/uniffi"
gen_swift="$HERE/target/generated-swift"
m2_repo="${HOLDOFF_M2_REPO:-$HOME/.m2/repository}"

# Builds the native library ($1: debug for the tests, shared with the workspace build; release
# for the benchmark) and generates the Kotlin over it. The generator first, the library last:
# both build the crate's lib target, and the one left in the target dir must be the lean one
# (without the generator's `cli` feature).
prepare() {
  profile="$1"
  native_dir="$CARGO_TARGET_DIR/$profile"
  lib="$native_dir/libholdoff_uniffi.so"
  cargo_build debug -p holdoff-uniffi --features cli --bin uniffi-bindgen
  cargo_build "$profile" -p holdoff-uniffi --lib
  generate kotlin "$gen_kotlin"
}

generate() {
  local lang="$1" out="$2"
  rm -rf "$out"
  (cd "$ROOT" && "$bindgen" generate "$lib" --language "$lang" \
    --out-dir "$out" --no-format --metadata-no-deps)
}

# prepare() has built the library and generated the Kotlin: Maven's own cargo steps (the ones a
# plain `mvn install` runs) are skipped.
mvn_test() {
  # Kotlin compiles every source each time; stale classes from an earlier layout must not linger.
  rm -rf "$HERE/target/classes" "$HERE/target/test-classes" "$HERE/target/surefire-reports"
  (cd "$HERE" && MAVEN_OPTS="${MAVEN_OPTS:-} -Djansi.noreset=true" mvn -B -q -Dstyle.color=never -Dmaven.repo.local="$m2_repo" \
    -Dholdoff.cargo.skip=true -Dholdoff.native.dir="$native_dir" -Dholdoff.cases.dir="$ROOT/conformance" "$@" test)
}

# Counts from a Surefire XML report: "tests failures errors skipped".
counts() {
  local head
  head=$(grep -m1 '<testsuite ' "$1")
  for a in tests failures errors skipped; do
    echo "$head" | sed -nE "s/.* $a=\"([0-9]+)\".*/\1/p"
  done | tr '\n' ' '
}

# One line per test class, e.g. "kotlin ApiTest: 24 passed, 0 failed, 0 skipped".
# Then the total of every class as the last line.
summary() {
  local r t f e s tp=0 tf=0 ts=0
  for r in "$HERE"/target/surefire-reports/TEST-*.xml; do
    [ -f "$r" ] || continue
    read -r t f e s <<<"$(counts "$r")"
    echo "kotlin $(basename "$r" .xml | sed 's/^TEST-dev.holdoff.//'): $((t - f - e - s)) passed, $((f + e)) failed, $s skipped"
    tp=$((tp + t - f - e - s)); tf=$((tf + f + e)); ts=$((ts + s))
  done
  echo
  echo "kotlin: $tp passed, $tf failed, $ts skipped"
}

# Records the conformance runner's tally from its Surefire report.
tally() {
  local r="$HERE/target/surefire-reports/TEST-dev.holdoff.ConformanceTest.xml" t f e s out
  [ -f "$r" ] || { log "no conformance report (${r#"$ROOT"/})"; return 1; }
  read -r t f e s <<<"$(counts "$r")"
  temp out
  echo "$((t - f - e - s)) passed, $((f + e)) failed, $s skipped" >"$out"
  record_conformance "$out"
}

# The multi-process fleet test (conformance/fleet/run.py): each worker is a JVM running
# dev.holdoff.FleetWorker (src/test/kotlin) from the classes mvn_test compiled, on Maven's test
# classpath, which the exec plugin prints (offline: it is the plugin the build already uses).
# Six JVMs share two cores here: the workers use the C1 compiler only, and ZGC, whose pauses stay
# under a millisecond (a stop-the-world young collection took over 200 ms on this loaded machine,
# the driver's bound on one breaker call), and they get 10 s rather than 5 to start.
fleet_test() {
  local cp
  temp cp
  (cd "$HERE" && MAVEN_OPTS="${MAVEN_OPTS:-} -Djansi.noreset=true" mvn -B -q -Dstyle.color=never \
    -Dmaven.repo.local="$m2_repo" -Dholdoff.cargo.skip=false exec:exec -Dexec.executable=echo \
    -Dexec.args=%classpath -Dexec.classpathScope=test -Dexec.outputFile="$cp")
  log "multi-process fleet test"
  python3 "$ROOT/conformance/fleet/run.py" kotlin --warmup-ms 10000 -- java -Xmx128m \
    -XX:TieredStopAtLevel=1 -XX:+UseZGC -Djna.library.path="$native_dir" -cp "$(cat "$cp")" \
    dev.holdoff.FleetWorker
}

cmd_test() {
  prepare debug
  generate swift "$gen_swift"
  log "Swift bindings generated in ${gen_swift#"$ROOT"/} (no Swift toolchain here to run them)"
  local rc=0
  mvn_test || rc=$?
  summary
  tally
  fleet_test || rc=$?
  return "$rc"
}

# Builds and compiles as `test` does, then runs only the multi-process fleet test.
cmd_fleet() {
  prepare debug
  mvn_test -Dtest=NoSuchTest -Dsurefire.failIfNoSpecifiedTests=false
  fleet_test
}

cmd_conformance() {
  prepare debug
  local rc=0
  mvn_test -Dtest=ConformanceTest -Dsurefire.failIfNoSpecifiedTests=false || rc=$?
  tally
  return "$rc"
}

# The parallel collector: each native call leaves small JNA allocations that are freed only after
# a collection, and with it the loop runs 2-3x faster here than with G1. HOLDOFF_BENCH_OUT (the
# records' file) reaches the test JVM through the environment; HOLDOFF_BENCH_PROFILE=debug runs
# it over the debug library (a quick check; the figures mean nothing).
cmd_bench() {
  prepare "${HOLDOFF_BENCH_PROFILE:-release}"
  mvn_test -Dholdoff.groups=bench -Dholdoff.excludedGroups= -Dtest=BenchTest \
    -Dholdoff.argLine="-Xmx512m -XX:+UseParallelGC"
}

# make dist-kotlin: dist/maven/, a Maven file repository holding dev.holdoff:holdoff, built by
# Maven alone from the sources (cargo, uniffi-bindgen, kotlinc; tests skipped: `test` runs them).
# The jar carries the release library for this machine and, when Debian's gcc-aarch64-linux-gnu
# is installed, one cross-built for linux-aarch64.
cmd_dist() {
  local out="$ROOT/dist/maven" profiles=() jar
  if command -v aarch64-linux-gnu-gcc >/dev/null && [ "$(uname -m)" = x86_64 ]; then
    profiles=(-Paarch64)
  else
    log "no aarch64-linux-gnu-gcc: the jar carries the $(uname -m) library only"
  fi
  (cd "$HERE" && MAVEN_OPTS="${MAVEN_OPTS:-} -Djansi.noreset=true" mvn -B -q -Dstyle.color=never \
    -Dmaven.repo.local="$m2_repo" "${profiles[@]}" -Dmaven.test.skip=true \
    -DaltDeploymentRepository="holdoff-dist::file://$out" clean deploy)
  jar="$(ls "$out"/dev/holdoff/holdoff/*/holdoff-*.jar | grep -v -- '-sources' | tail -n 1)"
  log "${jar#"$ROOT"/}: $(du -k "$jar" | cut -f1) KB"
  unzip -l "$jar" | awk '/libholdoff_uniffi/ {printf "  %s (%d KB)\n", $4, $1 / 1024}' >&2
}

run_mode "$@"
