#!/usr/bin/env bash
# The Node packages as users get them.
#
#   bash scripts/dist-check/node.sh      after `make dist-node` (dist/node/)
#
# 1. The tarballs: the main package `holdoff` holds no addon and no install script, exports no
#    `./native`, and has an optional dependency on each platform package in dist/node/ (and on
#    nothing else); each platform package holds its one addon, of its architecture, and names its
#    os, cpu and libc.
# 2. In a fresh project outside the checkout, with cargo and rustc absent from PATH:
#    `npm install --offline` of the main tarball and this machine's platform tarball (nothing
#    comes from the registry; the other platforms' optional dependencies are skipped). The
#    packages are copied into node_modules (no symlink anywhere), the loader loads the addon of
#    the platform package, and `holdoff/native` is not importable.
# 3. A smoke test (a breaker trips after five failures and refuses the next call; a policy
#    retries a failing call), then the conformance runner (bindings/node/test/conformance.test.mjs
#    and its helpers, copied beside a copy of conformance/cases) against the installed package:
#    `conformance node: N passed, 0 failed, 0 skipped`.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DIST="$ROOT/dist/node"
log() { echo "[dist-check node] $*" >&2; }
fail() { log "FAILED: $*"; exit 1; }

VERSION="$(node -p 'require(process.argv[1]).version' "$ROOT/bindings/node/package.json")"
MAIN="$DIST/holdoff-$VERSION.tgz"
[ -f "$MAIN" ] || fail "no $MAIN (make dist-node)"
case "$(uname -m)" in
  x86_64) ARCH=x64 ;;
  aarch64) ARCH=arm64 ;;
  *) fail "no platform package for $(uname -m)" ;;
esac
if ldd --version 2>&1 | grep -qi musl; then LIBC=musl; else LIBC=gnu; fi
PLATFORM="$DIST/holdoff-linux-$ARCH-$LIBC-$VERSION.tgz"
[ -f "$PLATFORM" ] || fail "no $PLATFORM (make dist-node)"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/holdoff-dist-node-XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
# PATH without Rust, as on a user's machine.
PATH="$(echo "$PATH" | tr : '\n' | grep -v -E 'cargo|rustup' | paste -sd:)"
export PATH npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false
if command -v cargo >/dev/null || command -v rustc >/dev/null; then
  fail "cargo or rustc still on PATH: $(command -v cargo rustc | paste -sd' ')"
fi

log "the tarballs in $DIST"
mkdir -p unpacked
for tgz in "$DIST"/*.tgz; do
  name="$(basename "$tgz" "-$VERSION.tgz")"
  mkdir -p "unpacked/$name"
  tar -xzf "$tgz" -C "unpacked/$name"
done
node - "$WORK/unpacked" "$VERSION" <<'JS'
const fs = require('node:fs')
const path = require('node:path')
const [dir, version] = process.argv.slice(2)
const problems = []
const files = (d) => fs.readdirSync(d, { recursive: true }).filter((f) => fs.statSync(path.join(d, f)).isFile())
const platforms = fs.readdirSync(dir).filter((n) => n !== 'holdoff')
if (!fs.existsSync(path.join(dir, 'holdoff'))) problems.push('no main package holdoff')
const pkgOf = (n) => JSON.parse(fs.readFileSync(path.join(dir, n, 'package', 'package.json'), 'utf8'))
const main = pkgOf('holdoff')
const mainFiles = files(path.join(dir, 'holdoff', 'package'))
if (mainFiles.some((f) => f.endsWith('.node'))) problems.push(`holdoff ships an addon: ${mainFiles}`)
for (const s of ['preinstall', 'install', 'postinstall', 'prepare']) {
  if (main.scripts?.[s]) problems.push(`holdoff has a ${s} script`)
}
if (main.exports['./native']) problems.push('holdoff exports ./native')
for (const f of ['holdoff.js', 'holdoff.d.ts', 'index.js', 'index.d.ts', 'package.json', 'README.md']) {
  if (!mainFiles.includes(f)) problems.push(`holdoff lacks ${f}`)
}
const optional = Object.keys(main.optionalDependencies ?? {}).sort()
if (JSON.stringify(optional) !== JSON.stringify(platforms.slice().sort())) {
  problems.push(`optionalDependencies ${optional} are not the platform tarballs ${platforms}`)
}
for (const n of platforms) {
  const p = pkgOf(n)
  const plat = n.slice('holdoff-'.length)
  const [os, cpu, abi] = plat.split('-')
  const want = { version, main: `holdoff.${plat}.node`, os: [os], cpu: [cpu], libc: [abi === 'gnu' ? 'glibc' : 'musl'] }
  for (const [k, v] of Object.entries(want)) {
    if (JSON.stringify(p[k]) !== JSON.stringify(v)) problems.push(`${n}: ${k} is ${JSON.stringify(p[k])}, not ${JSON.stringify(v)}`)
  }
  if (main.optionalDependencies?.[n] !== version) problems.push(`holdoff wants ${n}@${main.optionalDependencies?.[n]}`)
  const pf = files(path.join(dir, n, 'package')).sort()
  if (JSON.stringify(pf) !== JSON.stringify(['README.md', `holdoff.${plat}.node`, 'package.json'])) problems.push(`${n} holds ${pf}`)
  if (p.scripts) problems.push(`${n} has scripts`)
  console.log(`  ${n}@${p.version}: ${p.os} ${p.cpu} ${p.libc}, ${fs.statSync(path.join(dir, n, 'package', want.main)).size} bytes`)
}
if (problems.length) {
  for (const p of problems) console.error(`  ${p}`)
  process.exit(1)
}
console.log(`  holdoff@${main.version}: ${mainFiles.length} files, optional dependencies ${optional.join(', ')}`)
JS
for f in unpacked/holdoff-linux-*/package/*.node; do
  machine="$(readelf -h "$f" | sed -n 's/^ *Machine: *//p')"
  case "$f" in
    *-x64-*) [[ "$machine" == *X86-64* ]] ;;
    *-arm64-*) [[ "$machine" == *AArch64* ]] ;;
  esac || fail "${f##*/} is for $machine"
done

log "fresh project, npm install --offline ${MAIN##*/} ${PLATFORM##*/}"
mkdir app
cd app
printf '{ "name": "holdoff-user", "private": true, "version": "0.0.0", "type": "module" }\n' >package.json
npm install --offline --no-progress --loglevel=error "$MAIN" "$PLATFORM" >"$WORK/install.log" 2>&1 \
  || { cat "$WORK/install.log"; fail "npm install of the tarballs"; }
links="$(find node_modules -type l)"
[ -z "$links" ] || fail "symlinks in node_modules: $links"
installed="$(ls node_modules | grep -v '^\.' | paste -sd' ')"
[ "$installed" = "holdoff holdoff-linux-$ARCH-$LIBC" ] || fail "node_modules holds: $installed"

log "smoke: the installed package"
cat >smoke.mjs <<'JS'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { Breaker, BreakerOpenError, ManualClock, Policy } from 'holdoff'

const require = createRequire(import.meta.url)
const addon = require.resolve(`holdoff-linux-${process.arch}-${process.argv[2]}`)
assert.ok(addon.startsWith(process.cwd() + '/node_modules/'), addon)
assert.ok(require.cache[addon], `the loader did not load ${addon}`)
await assert.rejects(import('holdoff/native'), { code: 'ERR_PACKAGE_PATH_NOT_EXPORTED' })

const clock = new ManualClock()
const breaker = new Breaker({ trip: { policy: 'consecutive', threshold: 5 }, clock })
for (let i = 0; i < 5; i++) breaker.record(breaker.allow(), 'failure')
assert.equal(breaker.state, 'open')
assert.throws(() => breaker.allow(), BreakerOpenError)

const policy = new Policy({ budget: { backoff: { initialMs: 1, maxMs: 1 } } })
let calls = 0
const got = await policy.execute(async () => {
  if (++calls < 3) throw new Error('flaky')
  return 'ok'
}, { classify: () => 'failure' })
assert.equal(got, 'ok')
assert.equal(calls, 3)
console.log(`  holdoff ${require('holdoff/package.json').version}, addon ${addon.slice(process.cwd().length + 1)}: breaker opens after five failures, a call succeeds on its third attempt`)
JS
node smoke.mjs "$LIBC" || fail "the smoke test"

# The runner and its helpers, and the cases: nothing else of the checkout.
mkdir -p test conformance
cp "$ROOT"/bindings/node/test/{conformance.test.mjs,conformance-execute.mjs,manual-timers.mjs,tally-reporter.mjs} test/
cp -r "$ROOT"/conformance/{VERSION,cases} conformance/
export HOLDOFF_CONFORMANCE_DIR="$WORK/app/conformance"
log "conformance runner against the installed package"
rc=0
node --test --test-reporter=./test/tally-reporter.mjs test/conformance.test.mjs >"$WORK/conformance.log" 2>&1 || rc=$?
tally="$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$WORK/conformance.log" | tail -n1)"
if [ "$rc" -ne 0 ] || [[ "$tally" != *" 0 failed, 0 skipped" ]]; then
  grep -v '^ok ' "$WORK/conformance.log" | tail -n 40
  fail "conformance runner (exit $rc): ${tally:-no tally line}"
fi

echo "conformance node: $tally"
