#!/usr/bin/env bash
# bindings/csharp: C# over the C ABI (P/Invoke + SafeHandle), built with Mono's mcs.
#
#   run.sh test         API tests, the conformance runner, then the multi-process fleet test
#   run.sh conformance  the conformance runner only
#   run.sh fleet        the multi-process fleet test only (tests/FleetWorker.cs processes, a real
#                       redis-server started by conformance/fleet/run.py)
#   run.sh dist         dist/nuget/Holdoff.<version>.nupkg (make dist-csharp), packed by Debian's
#                       `nuget pack` from Holdoff.nuspec: lib/netstandard2.0/Holdoff.dll (built
#                       with mcs, optimized, with its XML docs and Holdoff.dll.config) and
#                       runtimes/<rid>/native/libholdoff.so for linux-x64 and linux-arm64, the
#                       stripped shared libraries of the archives in dist/c (this machine's is
#                       made with bindings/c/run.sh dist when missing; arm64 only if present),
#                       staged in $CARGO_TARGET_DIR/holdoff-csharp/package (Holdoff.csproj packs
#                       the native libraries from there with dotnet pack)
#
# Needs Mono from Debian's packages (scripts/install-deps csharp; no NuGet to build or test:
# HttpClient and the DelegatingHandler come from libmono-system-net-http4.0-cil); `dist` also
# needs Debian's nuget. Builds libholdoff.so with cargo into the shared target dir (incremental).
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh" csharp

OUT="$CARGO_TARGET_DIR/holdoff-csharp"
MCS=(mcs -warnaserror -warn:4 -nologo -unsafe -r:System.dll -r:System.Core.dll -r:System.Net.Http.dll)

# Builds the debug C library and the assemblies.
build() {
  cargo_build debug -p holdoff-ffi
  mkdir -p "$OUT"
  local sources
  mapfile -t sources < <(find "$HERE/src" -name '*.cs' | sort)   # one type per file, in folders
  "${MCS[@]}" -target:library -out:"$OUT/Holdoff.dll" "${sources[@]}"
  cp "$HERE/src/Holdoff.dll.config" "$OUT/"
  "${MCS[@]}" -out:"$OUT/Conformance.exe" -r:"$OUT/Holdoff.dll" "$HERE/tests/Conformance.cs" \
    "$HERE/tests/ConformanceExecute.cs"
  "${MCS[@]}" -out:"$OUT/ApiTests.exe" -r:"$OUT/Holdoff.dll" "$HERE/tests/ApiTests.cs" "$HERE/tests/ExecuteTests.cs" \
    "$HERE/tests/HandlerTests.cs" "$HERE/tests/DeadlineStorm.cs" "$HERE/tests/TestTime.cs" "$HERE/tests/ArgumentTests.cs" \
    "$HERE/tests/FleetTests.cs" "$HERE/tests/MetricsTests.cs" "$HERE/tests/FastPathTests.cs" \
    "$HERE/tests/RefusalTests.cs"
  "${MCS[@]}" -out:"$OUT/FleetWorker.exe" -r:"$OUT/Holdoff.dll" "$HERE/tests/FleetWorker.cs"
  export LD_LIBRARY_PATH="$CARGO_TARGET_DIR/debug${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

cmd_test() {
  build
  log "API tests"
  mono --debug "$OUT/ApiTests.exe"
  log "conformance"
  run_conformance mono --debug "$OUT/Conformance.exe" "$ROOT/conformance"
  fleet_test
}

# The multi-process fleet test (conformance/fleet/README.md): C# worker processes sharing one
# breaker through a real redis-server the driver starts.
fleet_test() {
  log "multi-process fleet test"
  python3 "$ROOT/conformance/fleet/run.py" csharp -- mono --debug "$OUT/FleetWorker.exe"
}

cmd_fleet() {
  build
  fleet_test
}

cmd_conformance() {
  build
  run_conformance mono --debug "$OUT/Conformance.exe" "$ROOT/conformance"
}

# dist: the package's runtime identifiers, by the C archives' Rust target.
declare -A RIDS=([x86_64-unknown-linux-gnu]=linux-x64 [aarch64-unknown-linux-gnu]=linux-arm64)

cmd_dist() {
  command -v nuget >/dev/null || { log "nuget is missing: apt-get install nuget"; return 1; }
  local version host stage archive target rid name out="$ROOT/dist/nuget" sources
  version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$ROOT/Cargo.toml" | head -n 1)"
  host="$(uname -m)-unknown-linux-gnu"
  if [ ! -f "$ROOT/dist/c/holdoff-$version-$host.tar.gz" ]; then
    log "no dist/c archive for $host: bindings/c/run.sh dist $host"
    bash "$ROOT/bindings/c/run.sh" dist "$host"
  fi
  grep -q "<Version>$version</Version>" "$HERE/Holdoff.csproj" \
    || { log "Holdoff.csproj's <Version> is not $version (Cargo.toml)"; return 1; }
  # The package's tree, kept where Holdoff.csproj finds the native libraries for dotnet pack.
  stage="$OUT/package"
  rm -rf "$stage"
  mkdir -p "$stage/lib/netstandard2.0"
  mapfile -t sources < <(find "$HERE/src" -name '*.cs' | sort)
  # The XML docs are for IDEs; their completeness warnings are not the build's errors.
  "${MCS[@]}" -optimize+ -target:library -out:"$stage/lib/netstandard2.0/Holdoff.dll" \
    -doc:"$stage/lib/netstandard2.0/Holdoff.xml" -nowarn:0419,1573,1574,1591 "${sources[@]}"
  cp "$HERE/src/Holdoff.dll.config" "$stage/lib/netstandard2.0/"
  for target in "${!RIDS[@]}"; do
    archive="$ROOT/dist/c/holdoff-$version-$target.tar.gz"
    rid="${RIDS[$target]}"
    if [ ! -f "$archive" ]; then log "no ${archive#"$ROOT"/}: the package has no $rid library"; continue; fi
    name="holdoff-$version-$target"
    mkdir -p "$stage/runtimes/$rid/native"
    tar -xzf "$archive" -C "$stage" "$name/lib/libholdoff.so.$version"
    mv "$stage/$name/lib/libholdoff.so.$version" "$stage/runtimes/$rid/native/libholdoff.so"
    rm -rf "${stage:?}/$name"
  done
  cp "$ROOT/LICENSE" "$HERE/README.md" "$stage/"
  mkdir -p "$out"
  rm -f "$out"/Holdoff.*.nupkg
  # nuget keeps its configuration under $HOME: a throwaway one, so the user's is not touched.
  HOME="$stage/nuget-home" nuget pack "$HERE/Holdoff.nuspec" -BasePath "$stage" -OutputDirectory "$out" \
    -Version "$version" -NoPackageAnalysis -NonInteractive -Verbosity quiet
  rm -rf "$stage/nuget-home"
  log "dist/nuget/Holdoff.$version.nupkg: $(du -k "$out/Holdoff.$version.nupkg" | cut -f1) KiB:" \
    "$(cd "$stage" && find lib runtimes -type f | sort | paste -sd ' ')"
}

run_mode "$@"
