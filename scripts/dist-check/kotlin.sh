#!/usr/bin/env bash
# dev.holdoff:holdoff as users get it, from dist/maven (make dist-kotlin).
#
#   bash scripts/dist-check/kotlin.sh
#
# A fresh Maven project in a temporary directory outside the checkout, with cargo and rustc off
# PATH, depends on the jar through the file repository dist/maven and runs, through JNA loading
# the native library from the jar itself (no jna.library.path):
#   - SmokeTest: a breaker trips after five failures and refuses the next call;
#   - the Kotlin conformance runner (bindings/kotlin/src/test/.../Conformance*.kt, copied) over
#     conformance/cases.
# Prints `conformance kotlin: N passed, N failed, N skipped` from the installed artifact.
# Maven's local repository is a hard-linked copy of $HOLDOFF_M2_REPO (default ~/.m2/repository)
# without dev/holdoff, so nothing is downloaded twice and the jar can only come from dist/maven.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DIST="$ROOT/dist/maven"
M2="${HOLDOFF_M2_REPO:-$HOME/.m2/repository}"
VERSION="$(sed -nE '0,/<version>/s|.*<version>([^<]+)</version>.*|\1|p' "$ROOT/bindings/kotlin/pom.xml")"
log() { echo "[dist-check kotlin] $*" >&2; }

[ -f "$DIST/dev/holdoff/holdoff/$VERSION/holdoff-$VERSION.jar" ] \
  || { log "no dev.holdoff:holdoff:$VERSION in ${DIST#"$ROOT"/}: run make dist-kotlin"; exit 1; }

PATH="$(echo "$PATH" | tr : '\n' | grep -v -e cargo -e rustup | paste -sd:)"
export PATH
if command -v cargo >/dev/null || command -v rustc >/dev/null; then
  log "cargo or rustc is still on PATH"; exit 1
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/holdoff-dist-kotlin-XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/m2"
if [ -d "$M2" ]; then cp -al "$M2/." "$WORK/m2/" 2>/dev/null || cp -a "$M2/." "$WORK/m2/"; fi
rm -rf "$WORK/m2/dev/holdoff"

app="$WORK/app"
mkdir -p "$app/src/test/kotlin/dev/holdoff"
cp "$ROOT"/bindings/kotlin/src/test/kotlin/dev/holdoff/Conformance*.kt "$app/src/test/kotlin/dev/holdoff/"
cat >"$app/pom.xml" <<POM
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>example</groupId>
  <artifactId>holdoff-user</artifactId>
  <version>0.0.0</version>
  <properties>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
    <kotlin.version>2.2.0</kotlin.version>
  </properties>
  <repositories>
    <repository>
      <id>holdoff-dist</id>
      <url>file://$DIST</url>
    </repository>
  </repositories>
  <dependencies>
    <dependency>
      <groupId>dev.holdoff</groupId>
      <artifactId>holdoff</artifactId>
      <version>$VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.junit.jupiter</groupId>
      <artifactId>junit-jupiter</artifactId>
      <version>5.12.2</version>
      <scope>test</scope>
    </dependency>
    <dependency>
      <groupId>org.json</groupId>
      <artifactId>json</artifactId>
      <version>20250107</version>
      <scope>test</scope>
    </dependency>
  </dependencies>
  <build>
    <testSourceDirectory>src/test/kotlin</testSourceDirectory>
    <plugins>
      <plugin>
        <groupId>org.jetbrains.kotlin</groupId>
        <artifactId>kotlin-maven-plugin</artifactId>
        <version>\${kotlin.version}</version>
        <executions>
          <execution><id>test-compile</id><goals><goal>test-compile</goal></goals></execution>
        </executions>
        <configuration><jvmTarget>17</jvmTarget></configuration>
      </plugin>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-surefire-plugin</artifactId>
        <version>3.5.3</version>
        <configuration>
          <argLine>-Xmx512m</argLine>
          <systemPropertyVariables>
            <holdoff.cases.dir>$ROOT/conformance</holdoff.cases.dir>
          </systemPropertyVariables>
        </configuration>
      </plugin>
    </plugins>
  </build>
</project>
POM
cat >"$app/src/test/kotlin/dev/holdoff/SmokeTest.kt" <<'KT'
package dev.holdoff

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import kotlin.time.Duration.Companion.seconds

class SmokeTest {
    @Test
    fun `a breaker trips after five failures and refuses`() {
        val clock = ManualClock()
        val breaker = Breaker(BreakerConfig(trip = TripPolicy.Consecutive(threshold = 5)), clock)
        repeat(5) { breaker.acquire().record(Outcome.Failure) }
        assertEquals(State.OPEN, breaker.snapshot().state)
        val refused = breaker.allow()
        assertTrue(refused is Admission.Refused)
        assertEquals(30.seconds, (refused as Admission.Refused).retryAfter)
        println("smoke: breaker tripped and refused, next probe in ${refused.retryAfter}")
    }
}
KT

log "mvn test in $app (cargo off PATH; dev.holdoff:holdoff:$VERSION from ${DIST#"$ROOT"/})"
rc=0
(cd "$app" && MAVEN_OPTS="${MAVEN_OPTS:-} -Djansi.noreset=true" mvn -B -q -Dstyle.color=never \
  -Dmaven.repo.local="$WORK/m2" test) >"$WORK/mvn.log" 2>&1 || rc=$?
jar="$WORK/m2/dev/holdoff/holdoff/$VERSION/holdoff-$VERSION.jar"
[ -f "$jar" ] || { cat "$WORK/mvn.log"; log "the jar was not resolved from ${DIST#"$ROOT"/}"; exit 1; }

count() { sed -nE "0,/<testsuite /s/.*<testsuite [^>]* $2=\"([0-9]+)\".*/\1/p" "$1"; }
tally() { # report -> "passed failed skipped"
  local t f e s
  t=$(count "$1" tests); f=$(count "$1" failures); e=$(count "$1" errors); s=$(count "$1" skipped)
  echo "$((t - f - e - s)) passed, $((f + e)) failed, $s skipped"
}
reports="$app/target/surefire-reports"
smoke="$reports/TEST-dev.holdoff.SmokeTest.xml"
conf="$reports/TEST-dev.holdoff.ConformanceTest.xml"
if [ "$rc" -ne 0 ] || [ ! -f "$smoke" ] || [ ! -f "$conf" ]; then
  grep -v '^ok ' "$WORK/mvn.log" | tail -n 60
fi
[ -f "$smoke" ] && echo "smoke kotlin: $(tally "$smoke")"
[ -f "$conf" ] && echo "conformance kotlin: $(tally "$conf")"
exit "$rc"
