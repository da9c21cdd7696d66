#!/usr/bin/env bash
# bench/node: holdoff's Node binding (the addon built in release) against opossum and cockatiel,
# in one run (bench.mjs). Prints a summary; HOLDOFF_BENCH_OUT=<file> also appends the records.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"
export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false

need node node
need npm node
binding="$ROOT/bindings/node"
# npm ci into <dir> unless its node_modules was installed from the same package-lock.json.
deps() {
  local stamp="$1/node_modules/.holdoff-lock"
  cmp -s "$1/package-lock.json" "$stamp" 2>/dev/null && return
  (cd "$1" && npm ci --ignore-scripts --no-progress --loglevel=error >/dev/null)
  cp "$1/package-lock.json" "$stamp"
}
deps "$binding"   # @napi-rs/cli, to build the addon
deps "$BENCH/node"
(cd "$binding" && ./node_modules/.bin/napi build --platform "${CARGO_PROFILE[@]}" --target-dir "$CARGO_TARGET_DIR" >/dev/null)
cd "$BENCH/node"
exec node --expose-gc bench.mjs
