#!/usr/bin/env bash
# The Node binding's entry points (the Makefile calls them):
#   run.sh test         install npm tools, build the addon (debug), install the package from its
#                       tarball into a scratch project, run every test there and type-check the
#                       example
#   run.sh conformance  the same build and install, the conformance runner only; its output ends
#                       with `N passed, N failed, N skipped`
#   run.sh bench        release build, then holdoff against opossum and cockatiel (not in test)
#   run.sh leak         the same build and install, the leak loops at full size (a million
#                       objects; `test` runs them at a tenth of the size)
# HOLDOFF_CONFORMANCE_DIR, if set, is the suite the runner reads (default: the repository's).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false
cmd="${1:-test}"

need_node() {
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "node: installing nodejs and npm (apt)" >&2
    apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null
  fi
  local major
  major="$(node -p 'process.versions.node.split(".")[0]')"
  if [ "$major" -lt 20 ]; then
    echo "node: Node.js >= 20 is needed, found $(node --version)" >&2
    exit 1
  fi
}

# npm ci only when package-lock.json changed since the last install (npm ci empties node_modules).
npm_deps() {
  local dir="$1" stamp="$1/node_modules/.holdoff-lock"
  if [ -f "$stamp" ] && cmp -s "$dir/package-lock.json" "$stamp"; then return; fi
  (cd "$dir" && npm ci --ignore-scripts --no-progress --loglevel=error >/dev/null)
  cp "$dir/package-lock.json" "$stamp"
}

build() {
  (cd "$here" && ./node_modules/.bin/napi build --platform "$@" --target-dir "$CARGO_TARGET_DIR" >/dev/null)
}

# Packs the package and installs the tarball into a fresh scratch project (as a user would, so
# the tests see exactly the published files), then copies the tests there. Prints its path.
scratch() {
  local dir
  dir="$(mktemp -d "${TMPDIR:-/tmp}/holdoff-node-XXXXXX")"
  (cd "$here" && npm pack --silent --ignore-scripts --pack-destination "$dir" >/dev/null)
  mkdir -p "$dir/app"
  printf '{ "name": "holdoff-scratch", "private": true, "version": "0.0.0" }\n' >"$dir/app/package.json"
  (cd "$dir/app" && npm install --no-progress --loglevel=error "$dir"/holdoff-*.tgz >/dev/null)
  cp -r "$here/test" "$dir/app/test"
  echo "$dir"
}

case "$cmd" in
  test | conformance | leak)
    need_node
    npm_deps "$here"
    build
    dir="$(scratch)"
    trap 'rm -rf "$dir"' EXIT
    cd "$dir/app"
    export HOLDOFF_CONFORMANCE_DIR="${HOLDOFF_CONFORMANCE_DIR:-$repo/conformance}"
    if [ "$cmd" = conformance ]; then
      node --test --test-reporter=./test/tally-reporter.mjs test/conformance.test.mjs
    elif [ "$cmd" = leak ]; then
      HOLDOFF_LEAK=full node --test --test-reporter=./test/tally-reporter.mjs test/leak.test.mjs
    else
      # The scratch project has no @types/node of its own: use the package's dev copy.
      "$here/node_modules/.bin/tsc" -p test/types --typeRoots "$here/node_modules/@types"
      echo "typescript: test/types/example.ts type-checks against the installed package"
      node --test --test-reporter=./test/tally-reporter.mjs test/*.test.mjs
    fi
    ;;
  bench)
    need_node
    npm_deps "$here"
    npm_deps "$here/bench"
    build --release
    cd "$here/bench" && node --expose-gc bench.mjs
    ;;
  *)
    echo "usage: $0 test|conformance|bench|leak" >&2
    exit 2
    ;;
esac
