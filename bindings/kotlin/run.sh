#!/usr/bin/env bash
# The Kotlin (JVM) binding: holdoff's core over uniffi (bindings/uniffi), called through JNA.
#
#   bash bindings/kotlin/run.sh test         native library, generated Kotlin (and Swift, to prove
#                                            generation), then every Maven test incl. conformance
#   bash bindings/kotlin/run.sh conformance  the conformance runner only; ends with
#                                            "N passed, N failed, N skipped"
#   bash bindings/kotlin/run.sh bench        allow+record from Kotlin in a warmed loop
#
# Installs the JDK and Maven with apt-get when missing. Maven's local repository is
# $HOLDOFF_M2_REPO (default ~/.m2/repository), so a second run downloads nothing.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
cmd="${1:-test}"
# Tests run on the debug library (shared with the workspace build); benchmarks on a release one.
profile=debug
[ "$cmd" = bench ] && profile=release
native_dir="$CARGO_TARGET_DIR/$profile"
lib="$native_dir/libholdoff_uniffi.so"
bindgen="$CARGO_TARGET_DIR/debug/uniffi-bindgen"
gen_kotlin="$here/target/generated-sources/uniffi"
gen_swift="$here/target/generated-swift"
m2_repo="${HOLDOFF_M2_REPO:-$HOME/.m2/repository}"

ensure_tools() {
  if command -v java >/dev/null && command -v javac >/dev/null && command -v mvn >/dev/null; then
    return
  fi
  echo "kotlin: installing a JDK and Maven (apt-get)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends openjdk-17-jdk-headless maven >/dev/null
}

# The generator first, the library last: both build the crate's lib target, and the one left in
# the target dir must be the lean one (without the generator's `cli` feature).
build_native() {
  local release=()
  [ "$profile" = release ] && release=(--release)
  (cd "$repo" && cargo build -q -p holdoff-uniffi --features cli --bin uniffi-bindgen \
    && cargo build -q -p holdoff-uniffi --lib "${release[@]}")
}

generate() {
  local lang="$1" out="$2"
  rm -rf "$out"
  (cd "$repo" && "$bindgen" generate "$lib" --language "$lang" \
    --out-dir "$out" --no-format --metadata-no-deps)
}

mvn_test() {
  # Kotlin compiles every source each time; stale classes from an earlier layout must not linger.
  rm -rf "$here/target/classes" "$here/target/test-classes" "$here/target/surefire-reports"
  (cd "$here" && MAVEN_OPTS="${MAVEN_OPTS:-} -Djansi.noreset=true" mvn -B -q -Dstyle.color=never -Dmaven.repo.local="$m2_repo" \
    -Dholdoff.native.dir="$native_dir" -Dholdoff.cases.dir="$repo/conformance" "$@" test)
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
  for r in "$here"/target/surefire-reports/TEST-*.xml; do
    [ -f "$r" ] || continue
    read -r t f e s <<<"$(counts "$r")"
    echo "kotlin $(basename "$r" .xml | sed 's/^TEST-dev.holdoff.//'): $((t - f - e - s)) passed, $((f + e)) failed, $s skipped"
    tp=$((tp + t - f - e - s)); tf=$((tf + f + e)); ts=$((ts + s))
  done
  echo
  echo "kotlin: $tp passed, $tf failed, $ts skipped"
}

# The last line: the conformance runner's tally.
tally() {
  local r="$here/target/surefire-reports/TEST-dev.holdoff.ConformanceTest.xml" t f e s
  [ -f "$r" ] || return 0
  read -r t f e s <<<"$(counts "$r")"
  echo
  echo "$((t - f - e - s)) passed, $((f + e)) failed, $s skipped"
}

ensure_tools
build_native
generate kotlin "$gen_kotlin"

case "$cmd" in
  test)
    generate swift "$gen_swift"
    echo "kotlin: Swift bindings generated in ${gen_swift#"$repo"/} (no Swift toolchain here to run them)"
    rc=0
    mvn_test || rc=$?
    summary
    exit $rc
    ;;
  conformance)
    rc=0
    mvn_test -Dtest=ConformanceTest -Dsurefire.failIfNoSpecifiedTests=false || rc=$?
    tally
    exit $rc
    ;;
  bench)
    # The parallel collector: each call leaves small JNA allocations that are freed only after a
    # collection, and with it the loop runs 2-3x faster here than with G1.
    mvn_test -Dholdoff.groups=bench -Dholdoff.excludedGroups= -Dtest=BenchTest \
      -Dholdoff.argLine="-Xmx512m -XX:+UseParallelGC"
    ;;
  *)
    echo "usage: $0 test|conformance|bench" >&2
    exit 2
    ;;
esac
