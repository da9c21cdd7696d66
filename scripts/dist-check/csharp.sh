#!/usr/bin/env bash
# The Holdoff NuGet package as users get it, from dist/nuget (make dist-csharp), on Mono.
#
#   bash scripts/dist-check/csharp.sh
#
# In a temporary directory outside the checkout, with cargo and rustc off PATH and a throwaway
# HOME (so no NuGet cache or configuration of the machine's is used):
#   - `nuget install Holdoff -Source dist/nuget` (Debian's nuget, the folder as the only feed);
#   - the package's files checked: Holdoff.dll, and libholdoff.so for linux-x64 and linux-arm64
#     (each an ELF shared object of its architecture; the other architecture's is not run);
#   - a smoke program (a breaker trips after five failures and refuses; an HttpClient through a
#     HoldoffHandler retries a 503 and returns the 200) and the C# conformance runner
#     (bindings/csharp/tests/Conformance*.cs, copied) compiled with mcs against the installed
#     Holdoff.dll, which is copied beside them with its Holdoff.dll.config, as a build does;
#   - both run on Mono with LD_LIBRARY_PATH set to the package's runtimes/<rid>/native folder,
#     where Mono finds libholdoff.so; the smoke program runs a second time with libholdoff.so
#     copied beside Holdoff.dll instead (no LD_LIBRARY_PATH), the other way an app can ship it.
# Prints `conformance csharp: N passed, N failed, N skipped` from the installed package.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DIST="$ROOT/dist/nuget"
VERSION="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$ROOT/Cargo.toml" | head -n 1)"
log() { echo "[dist-check csharp] $*" >&2; }

[ -f "$DIST/Holdoff.$VERSION.nupkg" ] \
  || { log "no Holdoff.$VERSION.nupkg in ${DIST#"$ROOT"/}: run make dist-csharp"; exit 1; }
for tool in nuget mcs mono; do
  command -v "$tool" >/dev/null || { log "$tool is missing: apt-get install nuget mono-mcs mono-runtime"; exit 1; }
done

PATH="$(echo "$PATH" | tr : '\n' | grep -v -e cargo -e rustup | paste -sd:)"
export PATH
if command -v cargo >/dev/null || command -v rustc >/dev/null; then
  log "cargo or rustc is still on PATH"; exit 1
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/holdoff-dist-csharp-XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
export HOME="$WORK/home"
mkdir -p "$HOME"
unset LD_LIBRARY_PATH MONO_PATH

log "nuget install Holdoff -Version $VERSION -Source ${DIST#"$ROOT"/}"
(cd "$WORK" && nuget install Holdoff -Version "$VERSION" -Source "$DIST" -OutputDirectory "$WORK/packages" \
  -NonInteractive -Verbosity quiet)
pkg="$WORK/packages/Holdoff.$VERSION"
lib="$pkg/lib/netstandard2.0"
[ -f "$lib/Holdoff.dll" ] || { log "the package has no lib/netstandard2.0/Holdoff.dll"; exit 1; }

case "$(uname -m)" in
  x86_64) rid=linux-x64 ;;
  aarch64) rid=linux-arm64 ;;
  *) log "no runtime identifier for $(uname -m)"; exit 1 ;;
esac
declare -A MACHINE=([linux-x64]="X86-64" [linux-arm64]="AArch64")
for r in linux-x64 linux-arm64; do
  so="$pkg/runtimes/$r/native/libholdoff.so"
  [ -f "$so" ] || { log "the package has no runtimes/$r/native/libholdoff.so"; exit 1; }
  machine="$(LC_ALL=C readelf -h "$so" | sed -n 's/ *Machine: *//p')"
  [[ "$machine" == *"${MACHINE[$r]}"* ]] || { log "runtimes/$r/native/libholdoff.so is for $machine"; exit 1; }
  log "runtimes/$r/native/libholdoff.so: $(stat -c %s "$so") B ($machine)"
done
native="$pkg/runtimes/$rid/native"

# The programs, copied: nothing is compiled from the checkout.
mkdir -p "$WORK/src" "$WORK/app"
cp "$ROOT"/bindings/csharp/tests/Conformance*.cs "$WORK/src/"
cat >"$WORK/src/Smoke.cs" <<'CS'
using System;
using System.Net;
using System.Net.Http;
using System.Threading;
using System.Threading.Tasks;
using Holdoff;

static class Smoke
{
    sealed class Upstream : HttpMessageHandler   // answers 503, then 200
    {
        public int Requests;
        protected override Task<HttpResponseMessage> SendAsync(HttpRequestMessage request, CancellationToken ct)
        {
            var status = Requests++ == 0 ? HttpStatusCode.ServiceUnavailable : HttpStatusCode.OK;
            return Task.FromResult(new HttpResponseMessage(status) { RequestMessage = request });
        }
    }

    static int Main()
    {
        Library.EnsureCompatible();
        int failures = 0;
        TimeSpan? retryAfter = null;
        using (var clock = new ManualClock())
        using (var breaker = new Breaker(new BreakerOptions { Trip = TripPolicy.ConsecutiveFailures(5) }, clock))
        {
            try
            {
                for (; failures < 10; failures++) breaker.Record(breaker.Allow(), Outcome.Failure);
            }
            catch (BreakerOpenException e) { retryAfter = e.RetryAfter; }
        }
        var upstream = new Upstream();
        HttpStatusCode got;
        using (var policy = new Policy(new PolicyOptions()))
        using (var client = new HttpClient(new HoldoffHandler(policy, upstream)))
        using (var response = client.GetAsync("http://upstream.invalid/").Result)
            got = response.StatusCode;
        Console.WriteLine("holdoff {0}: open after {1} failures, next probe in {2}; HttpClient: {3} after {4} requests",
            Library.Version, failures, retryAfter, (int)got, upstream.Requests);
        if (Library.LiveHandles != 0) { Console.WriteLine("handles left alive: {0}", Library.LiveHandles); return 1; }
        return failures == 5 && retryAfter != null && got == HttpStatusCode.OK && upstream.Requests == 2 ? 0 : 1;
    }
}
CS

# As a build does: the referenced assembly, with its Mono configuration, beside the programs.
cp "$lib/Holdoff.dll" "$lib/Holdoff.dll.config" "$WORK/app/"
MCS=(mcs -nologo -r:System.dll -r:System.Core.dll -r:System.Net.Http.dll -r:"$lib/Holdoff.dll")
"${MCS[@]}" -out:"$WORK/app/Smoke.exe" "$WORK/src/Smoke.cs"
"${MCS[@]}" -out:"$WORK/app/Conformance.exe" "$WORK/src"/Conformance*.cs

log "smoke (LD_LIBRARY_PATH=<package>/runtimes/$rid/native): $(LD_LIBRARY_PATH="$native" mono "$WORK/app/Smoke.exe")"
cp "$native/libholdoff.so" "$WORK/app/"
log "smoke (libholdoff.so beside Holdoff.dll): $(mono "$WORK/app/Smoke.exe")"
rm "$WORK/app/libholdoff.so"

rc=0
LD_LIBRARY_PATH="$native" mono "$WORK/app/Conformance.exe" "$ROOT/conformance" >"$WORK/conformance.log" 2>&1 || rc=$?
CONFORMANCE="$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$WORK/conformance.log" | tail -n 1 || true)"
if [ "$rc" -ne 0 ] || [ -z "$CONFORMANCE" ]; then
  grep -v '^ok ' "$WORK/conformance.log" | tail -n 60
  log "the conformance runner failed (exit $rc)"
  [ -z "$CONFORMANCE" ] || echo "conformance csharp: $CONFORMANCE"
  exit 1
fi
echo "conformance csharp: $CONFORMANCE"
[[ "$CONFORMANCE" == *" 0 failed, 0 skipped" ]]
