#!/usr/bin/env bash
# bindings/csharp: C# over the C ABI (P/Invoke + SafeHandle), built with Mono's mcs.
#
#   run.sh test         API tests, then the conformance runner
#   run.sh conformance  the conformance runner only
#
# Needs Mono from Debian's packages (scripts/install-deps csharp; no NuGet: HttpClient and the
# DelegatingHandler come from libmono-system-net-http4.0-cil). Builds libholdoff.so with cargo
# into the shared target dir (incremental).
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh" csharp

OUT="$CARGO_TARGET_DIR/holdoff-csharp"
MCS=(mcs -warnaserror -warn:4 -nologo -r:System.dll -r:System.Core.dll -r:System.Net.Http.dll)

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
    "$HERE/tests/HandlerTests.cs" "$HERE/tests/DeadlineStorm.cs" "$HERE/tests/TestTime.cs" "$HERE/tests/ArgumentTests.cs"
  export LD_LIBRARY_PATH="$CARGO_TARGET_DIR/debug${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

cmd_test() {
  build
  log "API tests"
  mono --debug "$OUT/ApiTests.exe"
  log "conformance"
  run_conformance mono --debug "$OUT/Conformance.exe" "$ROOT/conformance"
}

cmd_conformance() {
  build
  run_conformance mono --debug "$OUT/Conformance.exe" "$ROOT/conformance"
}

run_mode "$@"
