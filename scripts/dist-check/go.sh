#!/usr/bin/env bash
# holdoff.dev/go as users get it, from the module proxy directory dist/go (make dist-go).
#
#   bash scripts/dist-check/go.sh
#
# A fresh module in a temporary directory outside the checkout, with cargo and rustc off PATH, an
# empty module cache and GOPROXY=file://<repo>/dist/go (nothing from the network), runs
# `go get holdoff.dev/go@<version>`, then:
#   - builds and runs a smoke program (a breaker trips after five failures and refuses the next
#     call), linked against the static library the module carries;
#   - runs the module's own conformance runner (go test holdoff.dev/go -run TestConformance, the
#     installed package's test) over conformance/cases, through HOLDOFF_CONFORMANCE_DIR;
#   - cross-builds the smoke program for linux/arm64 when aarch64-linux-gnu-gcc is installed.
# Prints `conformance go: N passed, N failed, N skipped` from the installed module.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
MODULE=holdoff.dev/go
VERSION="v$(sed -n 's/^version = "\(.*\)"$/\1/p' "$ROOT/Cargo.toml" | head -n 1)"
log() { echo "[dist-check go] $*" >&2; }

[ -f "$ROOT/dist/go/$MODULE/@v/$VERSION.zip" ] \
  || { log "no $MODULE@$VERSION in dist/go: run make dist-go"; exit 1; }

PATH="$(echo "$PATH" | tr : '\n' | grep -v -e cargo -e rustup | paste -sd:)"
export PATH
if command -v cargo >/dev/null || command -v rustc >/dev/null; then
  log "cargo or rustc is still on PATH"; exit 1
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/holdoff-dist-go-XXXXXX")"
# The module cache is read-only.
trap 'chmod -R u+w "$WORK" 2>/dev/null; rm -rf "$WORK"' EXIT
export GOPROXY="file://$ROOT/dist/go" GOSUMDB=off GOFLAGS=-mod=mod GOTOOLCHAIN=local \
  GOMODCACHE="$WORK/modcache" CGO_ENABLED=1
unset GOPATH GONOSUMDB GOPRIVATE GONOPROXY CGO_LDFLAGS CGO_CFLAGS

app="$WORK/app"
mkdir -p "$app"
cd "$app"
go mod init example.com/app >/dev/null 2>&1
go get "$MODULE@$VERSION"
cat >main.go <<'GO'
package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	holdoff "holdoff.dev/go"
)

func main() {
	clock, err := holdoff.NewManualClock(time.Unix(1_700_000_000, 0))
	if err != nil {
		panic(err)
	}
	defer clock.Close()
	cfg := holdoff.DefaultBreakerConfig()
	cfg.Trip = holdoff.ConsecutiveFailures(5)
	b, err := holdoff.NewBreaker(cfg, holdoff.WithClock(clock))
	if err != nil {
		panic(err)
	}
	defer b.Close()
	failures := 0
	for {
		p, err := b.Allow()
		if errors.Is(err, holdoff.ErrBreakerOpen) {
			break
		} else if err != nil {
			panic(err)
		}
		if _, err := b.Record(p, holdoff.Failure); err != nil {
			panic(err)
		}
		failures++
	}
	fmt.Printf("holdoff.dev/go (ABI %d): open after %d failures, next probe in %v\n",
		holdoff.ABIVersion, failures, b.Snapshot().RetryAfter)
	if failures != 5 {
		os.Exit(1)
	}
}
GO
log "go get $MODULE@$VERSION: $(go list -m -f '{{.Path}} {{.Version}} {{.Dir}}' "$MODULE")"
go build -o smoke .
said="$(./smoke)"
log "smoke: $said"

tally="$WORK/tally"
HOLDOFF_CONFORMANCE_DIR="$ROOT/conformance" HOLDOFF_TALLY_FILE="$tally" \
  go test -count=1 -run '^TestConformance$' "$MODULE" >"$WORK/test.log" 2>&1 \
  || { tail -n 30 "$WORK/test.log"; exit 1; }
tail -n 1 "$WORK/test.log" >&2

if command -v aarch64-linux-gnu-gcc >/dev/null; then
  GOARCH=arm64 CC=aarch64-linux-gnu-gcc go build -o smoke-arm64 .
  log "linux/arm64: the smoke program links ($(LC_ALL=C readelf -h smoke-arm64 | sed -n 's/ *Machine: *//p'))"
fi

line="$(cat "$tally")"
echo "conformance go: $line"
[[ "$line" == *" 0 failed, 0 skipped" ]]
