'use strict'
// npm's install step. A package built by `napi build --platform` (or `npm pack` after it) ships
// its addon, and there is nothing to do. Installed from a source checkout without one
// (`npm install ./bindings/node` in the holdoff repository), it builds the addon with cargo,
// which needs Rust but no npm tooling.
const { existsSync, copyFileSync, readdirSync } = require('node:fs')
const { join, resolve } = require('node:path')
const { spawnSync } = require('node:child_process')

const here = resolve(__dirname, '..')
if (readdirSync(here).some((f) => /^holdoff\..+\.node$/.test(f))) process.exit(0)

function fail(msg) {
  console.error(`holdoff: ${msg}`)
  process.exit(1)
}

const workspace = resolve(here, '..', '..')
if (!existsSync(join(here, 'Cargo.toml')) || !existsSync(join(workspace, 'core', 'Cargo.toml'))) {
  fail('no prebuilt addon for this platform in the package, and no source checkout to build one from')
}

// The file name the generated loader (index.js) looks for first.
function platformName() {
  const { platform, arch } = process
  if (platform === 'linux') {
    const glibc = process.report?.getReport?.().header?.glibcVersionRuntime
    return `linux-${arch}-${glibc ? 'gnu' : 'musl'}`
  }
  if (platform === 'win32') return `win32-${arch}-msvc`
  return `${platform}-${arch}`
}

const libName = { win32: 'holdoff_node.dll', darwin: 'libholdoff_node.dylib' }[process.platform] ?? 'libholdoff_node.so'
const targetDir = process.env.CARGO_TARGET_DIR ? resolve(process.env.CARGO_TARGET_DIR) : join(workspace, 'target')
console.error('holdoff: building the native addon with cargo (release)')
const r = spawnSync('cargo', ['build', '--release', '-p', 'holdoff-node', '--target-dir', targetDir], {
  cwd: workspace,
  stdio: 'inherit',
})
if (r.error) fail(`cannot run cargo (${r.error.message}); install Rust from https://rustup.rs`)
if (r.status !== 0) fail(`cargo build failed with status ${r.status}`)
copyFileSync(join(targetDir, 'release', libName), join(here, `holdoff.${platformName()}.node`))
