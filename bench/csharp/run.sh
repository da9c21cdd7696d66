#!/usr/bin/env bash
# bench/csharp: holdoff's C# binding (Bench.cs, Mono, release library) against a lock-based
# baseline breaker. Polly installs only through NuGet, which this build does not use, so it is
# not measured. Prints a summary; HOLDOFF_BENCH_OUT=<file> also appends the records.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"

need mcs csharp
need mono csharp
build_ffi
MCS=(mcs -warnaserror -warn:4 -nologo -unsafe -r:System.dll -r:System.Core.dll -r:System.Net.Http.dll)
src="$ROOT/bindings/csharp/src"
mapfile -t sources < <(find "$src" -name '*.cs' | sort)
"${MCS[@]}" -target:library -out:"$BENCH_OUT_DIR/Holdoff.dll" "${sources[@]}"
cp "$src/Holdoff.dll.config" "$BENCH_OUT_DIR/"
"${MCS[@]}" -out:"$BENCH_OUT_DIR/Bench.exe" -r:"$BENCH_OUT_DIR/Holdoff.dll" "$BENCH/csharp/Bench.cs"
export LD_LIBRARY_PATH="$CARGO_TARGET_DIR/$PROFILE${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec mono -O=all "$BENCH_OUT_DIR/Bench.exe"
