#!/usr/bin/env bash
# The Python package as users get it.
#
#   bash scripts/dist-check/python.sh      after `make dist-python` (dist/python/)
#
# In a fresh directory outside the checkout, with cargo and rustc absent from PATH:
# 1. The wheel of this machine's platform: its tags are abi3 and manylinux; `pip install` of the
#    wheel file into a fresh venv, a smoke import (the extension is the installed one), then the
#    conformance runner (bindings/python/tests/test_conformance.py and its helpers, copied beside
#    a copy of conformance/cases) against the installed package: `conformance python: N passed,
#    0 failed, 0 skipped`.
# 2. The sdist: `pip install` of it fails within seconds with the message saying what to install,
#    and nothing is downloaded (no build requirement, no toolchain in the cache).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DIST="$ROOT/dist/python"
PY="${PYTHON:-python3}"
ARCH="$(uname -m)"
log() { echo "[dist-check python] $*" >&2; }
fail() { log "FAILED: $*"; exit 1; }

shopt -s nullglob
wheels=("$DIST"/holdoff-*-cp39-abi3-manylinux2014_"$ARCH".manylinux_2_17_"$ARCH".whl)
sdists=("$DIST"/holdoff-*.tar.gz)
shopt -u nullglob
[ "${#wheels[@]}" -eq 1 ] || fail "want one $ARCH wheel in $DIST (make dist-python)"
[ "${#sdists[@]}" -eq 1 ] || fail "want one sdist in $DIST (make dist-python)"
WHEEL="${wheels[0]}"
SDIST="${sdists[0]}"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/holdoff-dist-python-XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
# PATH without Rust, as on a user's machine.
PATH="$(echo "$PATH" | tr : '\n' | grep -v -E 'cargo|rustup' | paste -sd:)"
export PATH PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
if command -v cargo >/dev/null || command -v rustc >/dev/null; then
  fail "cargo or rustc still on PATH: $(command -v cargo rustc | paste -sd' ')"
fi

log "wheel tags of ${WHEEL##*/}"
"$PY" - "$WHEEL" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    name = next(n for n in z.namelist() if n.endswith(".dist-info/WHEEL"))
    tags = [l.split(":", 1)[1].strip() for l in z.read(name).decode().splitlines() if l.startswith("Tag:")]
bad = [t for t in tags if not (t.startswith("cp39-abi3-manylinux") and t.endswith(("_x86_64", "_aarch64")))]
print("  " + " ".join(tags))
sys.exit(f"not an abi3 manylinux wheel: {bad}" if bad or not tags else 0)
EOF

log "fresh venv, pip install ${WHEEL##*/} (and pytest, requests, httpx for the runner)"
"$PY" -m venv "$WORK/venv"
VPY="$WORK/venv/bin/python"
"$VPY" -m pip install -q "$WHEEL" pytest requests httpx

log "smoke: import the installed package"
"$VPY" - "$WORK/venv" <<'EOF'
import sys
import holdoff, holdoff._holdoff as ext
assert ext.__file__.startswith(sys.argv[1]), ext.__file__
clock = holdoff.ManualClock()
breaker = holdoff.Breaker(trip=holdoff.ConsecutiveFailures(1), clock=clock)
breaker.record(breaker.allow(), holdoff.Outcome.FAILURE)
assert breaker.state == "open", breaker.state
print(f"  holdoff {holdoff.__version__} from {ext.__file__}: breaker opens after one failure")
EOF

# The runner and its helpers, and the cases: nothing else of the checkout.
mkdir -p tests conformance
cp "$ROOT"/bindings/python/tests/{conftest.py,conformance_execute.py,test_conformance.py,test_smoke.py} tests/
cp -r "$ROOT"/conformance/{VERSION,cases} conformance/
export HOLDOFF_CONFORMANCE_DIR="$WORK/conformance"
PYTEST=("$VPY" -m pytest -p no:cacheprovider -q -W error)
(cd tests && "${PYTEST[@]}" test_smoke.py >"$WORK/smoke.log" 2>&1) \
  || { cat "$WORK/smoke.log"; fail "tests/test_smoke.py against the installed wheel"; }
log "conformance runner against the installed wheel"
rc=0
(cd tests && "${PYTEST[@]}" test_conformance.py >"$WORK/conformance.log" 2>&1) || rc=$?
tally="$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$WORK/conformance.log" | tail -n1)"
if [ "$rc" -ne 0 ] || [[ "$tally" != *" 0 failed, 0 skipped" ]]; then
  tail -n 40 "$WORK/conformance.log"
  fail "conformance runner (exit $rc): ${tally:-no tally line}"
fi

log "sdist without Rust: pip install ${SDIST##*/} must stop at once and say what to install"
mkdir -p "$WORK/cache"
start=$SECONDS
rc=0
XDG_CACHE_HOME="$WORK/cache" timeout 120 "$VPY" -m pip install --no-cache-dir "$SDIST" \
  >"$WORK/sdist.log" 2>&1 || rc=$?
took=$((SECONDS - start))
sed -n '/holdoff: building from source/,/Nothing was downloaded/{p;/Nothing was/q}' "$WORK/sdist.log"
[ "$rc" -ne 0 ] || fail "pip install of the sdist succeeded without Rust"
[ "$rc" -ne 124 ] || fail "pip install of the sdist still running after 120 s"
for said in "cargo (Rust's build tool) is not on PATH" "https://rustup.rs" "--only-binary holdoff"; do
  if ! grep -qF -- "$said" "$WORK/sdist.log"; then
    cat "$WORK/sdist.log"
    fail "the sdist's refusal does not say: $said"
  fi
done
if grep -qiE 'puccinialin|Collecting|Downloading' "$WORK/sdist.log"; then
  cat "$WORK/sdist.log"
  fail "pip fetched something for the sdist build"
fi
[ -z "$(ls -A "$WORK/cache")" ] || fail "something was cached: $(ls -A "$WORK/cache")"
[ "$took" -le 30 ] || fail "the sdist's refusal took $took s"
log "sdist refused in $took s, nothing downloaded"

echo "conformance python: $tally"
