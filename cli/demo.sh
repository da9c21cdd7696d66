#!/usr/bin/env bash
# `make demo`: build the holdoff command line and replay the three bundled incidents on the
# virtual clock, printing each summary and writing each chart (SVG and PNG) under target/demo/;
# then the two fleet scenarios, local breakers against a shared fleet, side by side.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
target="${CARGO_TARGET_DIR:-$repo/target}"
out="$repo/target/demo"
cargo build --quiet -p holdoff-cli
holdoff="$target/debug/holdoff"
mkdir -p "$out"
for scenario in blocked-provider.toml registry-outage.toml rate-limited-api.json; do
    name="${scenario%.*}"
    "$holdoff" simulate "scenarios/$scenario" --plot "$out/$name.svg" --plot "$out/$name.png"
    echo
done
echo "The same blocked-provider trace with the old design (close on the first probe answer) and holdoff's:"
"$holdoff" compare scenarios/configs/blocked-provider.old.toml scenarios/configs/blocked-provider.fixed.toml \
    --scenario scenarios/blocked-provider.toml --plot "$out/blocked-provider-compare.svg"
echo
for name in fleet-rate-limit fleet-outage; do
    echo "A fleet on $name: every worker its own breaker (A) against one shared record (B):"
    "$holdoff" compare "scenarios/configs/$name.local.toml" "scenarios/configs/$name.shared.toml" \
        --scenario "scenarios/$name.toml" --plot "$out/$name-compare.svg"
    echo
done
echo "Charts: $out/"
