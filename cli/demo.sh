#!/usr/bin/env bash
# `make demo`: build the holdoff command line and replay the three bundled incidents on the
# virtual clock, printing each summary and writing each chart (SVG and PNG) under target/demo/;
# the blocked-provider replay also writes its metric series (CSV) and shows a few rows; then the
# two fleet scenarios, local breakers against a shared fleet, side by side.
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
    if [ "$name" != blocked-provider ]; then
        "$holdoff" simulate "scenarios/$scenario" --plot "$out/$name.svg" --plot "$out/$name.png"
        echo
        continue
    fi
    csv="$out/$name.metrics.csv"
    "$holdoff" simulate "scenarios/$scenario" --plot "$out/$name.svg" --plot "$out/$name.png" --metrics "$csv"
    end="$(tail -n 1 "$csv" | cut -d, -f1)"
    echo "Its metric series, named as every language exports them (docs/metrics.md), one sample a"
    echo "virtual second: the rows at 1 s and the non-zero ones at the end ($end s):"
    awk -F, -v end="$end" 'NR == 1 || $1 == 1 || ($1 == end && $4 != 0)' "$csv"
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
