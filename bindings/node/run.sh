#!/usr/bin/env bash
# The Node binding's entry points (the Makefile calls them):
#   run.sh test         install npm tools, lint, build the addon (debug), install the package from
#                       its tarball into a scratch project, type-check the example, run the
#                       conformance runner, then every other test there
#   run.sh conformance  the same build and install, the conformance runner only
#   run.sh leak         the same build and install, the leak loops at full size (a million
#                       objects; `test` runs them at a tenth of the size)
# Needs Node.js >= 20 with npm (scripts/install-deps node). HOLDOFF_CONFORMANCE_DIR, if set, is
# the suite the runner reads (default: the repository's).
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh" node

export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false
export HOLDOFF_CONFORMANCE_DIR="${HOLDOFF_CONFORMANCE_DIR:-$ROOT/conformance}"

# npm ci only when package-lock.json changed since the last install (npm ci empties node_modules).
npm_deps() {
  local dir="$1" stamp="$1/node_modules/.holdoff-lock"
  if [ -f "$stamp" ] && cmp -s "$dir/package-lock.json" "$stamp"; then return; fi
  (cd "$dir" && npm ci --ignore-scripts --no-progress --loglevel=error >/dev/null)
  cp "$dir/package-lock.json" "$stamp"
}

# Builds the addon (debug), packs the package and installs the tarball into a fresh scratch
# project (as a user would, so the tests see exactly the published files), copies the tests
# there and moves into it.
install_scratch() {
  local major dir
  major="$(node -p 'process.versions.node.split(".")[0]')"
  [ "$major" -ge 20 ] || { log "Node.js >= 20 is needed, found $(node --version)"; exit 1; }
  npm_deps "$HERE"
  (cd "$HERE" && ./node_modules/.bin/napi build --platform --target-dir "$CARGO_TARGET_DIR" >/dev/null)
  temp -d dir
  (cd "$HERE" && npm pack --silent --ignore-scripts --pack-destination "$dir" >/dev/null)
  mkdir -p "$dir/app"
  printf '{ "name": "holdoff-scratch", "private": true, "version": "0.0.0" }\n' >"$dir/app/package.json"
  (cd "$dir/app" && npm install --no-progress --loglevel=error "$dir"/holdoff-*.tgz >/dev/null)
  cp -r "$HERE/test" "$dir/app/test"
  cd "$dir/app"
}

node_test() { # test files
  node --test --test-reporter=./test/tally-reporter.mjs "$@"
}

cmd_test() {
  npm_deps "$HERE"
  # ESLint over holdoff.js, the tests and the scripts (eslint.config.mjs; not the generated index.js).
  (cd "$HERE" && ./node_modules/.bin/eslint --max-warnings 0 .)
  log "eslint: no problems"
  install_scratch
  # The scratch project has no @types/node of its own: use the package's dev copy.
  "$HERE/node_modules/.bin/tsc" -p test/types --typeRoots "$HERE/node_modules/@types"
  log "typescript: test/types/example.ts type-checks against the installed package"
  log "conformance"
  run_conformance node_test test/conformance.test.mjs
  local others=() f
  for f in test/*.test.mjs; do [ "$f" = test/conformance.test.mjs ] || others+=("$f"); done
  log "every other test"
  node_test "${others[@]}"
}

cmd_conformance() {
  install_scratch
  run_conformance node_test test/conformance.test.mjs
}

cmd_leak() {
  install_scratch
  HOLDOFF_LEAK=full node_test test/leak.test.mjs
}

run_mode "$@"
