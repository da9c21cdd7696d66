// Leak loops: objects made and dropped in a loop, memory flat. Each loop runs
// in a child process with --expose-gc (test/leak-child.mjs), which measures after a warm-up and
// at the end, after full collections. `run.sh test` runs the loops at a tenth of their full size
// (n = 90 000 measured iterations of the calls and groups loops, 18 000 of the executions loop,
// 9 000 of the policies loop); `run.sh leak` (HOLDOFF_LEAK=full) at full size (900 000, 180 000
// and 90 000).
//
// Two measures, each allowed to grow by a fixed floor (noise) plus a per-iteration allowance, so
// that the bound scales with n:
// * heapUsed, the live JavaScript heap after full collections: every wrapper object the addon
//   hands out (breaker, permit, lease, call, decision) and every closure or literal lives there.
//   Bound: 256 KiB + 8 bytes an iteration (measured noise without a leak: up to about 160 KiB
//   either way). A JavaScript object is at least 16 bytes and a wrapper several times that, so a
//   leaked object an iteration fails at both sizes: the bound is 11 bytes an iteration of the
//   calls and groups loops at test size (8.3 at full size), 37 bytes of the policies loop (11 at
//   full size), below the smallest object a policies iteration makes (a closure or a literal).
// * RSS, the net for native memory (the Rust objects behind the handles), which heapUsed does
//   not see. Bound: 4 MiB + 16 bytes an iteration. RSS is noisy in Node: V8 grows its young
//   generation (1 MiB semi-spaces doubling up to 16 MiB) whenever the allocation rate says so,
//   which may land in the measured part or not (merely making holdoff.js 5 KB longer moved the
//   policies loop from about 2 to about 5 MiB), so the children run with their semi-spaces
//   pinned at 1 MiB (--max-semi-space-size=1); the allocator still keeps pages (up to 3 MiB
//   measured without a leak, at either size). So this catches a native leak only of about 63
//   bytes an iteration in the calls and groups loops at test size (21 at full size) and 480 bytes
//   in the policies loop (63 at full size); a breaker's native state is about 1 KB.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const KB = 1 << 10
const MB = 1 << 20
// Allowed growth over n measured iterations: floor + perIteration * n.
const BOUNDS = {
  heapUsed: { floor: 256 * KB, perIteration: 8 },
  rss: { floor: 4 * MB, perIteration: 16 },
}
const full = process.env.HOLDOFF_LEAK === 'full'
const scale = full ? 1 : 0.1
const child = fileURLToPath(new URL('./leak-child.mjs', import.meta.url))

function measure(loop) {
  const r = spawnSync(process.execPath, ['--expose-gc', '--max-semi-space-size=1', child, loop, String(scale)], {
    encoding: 'utf8',
    // A hang fails the test instead of stalling the run.
    timeout: full ? 600_000 : 120_000,
  })
  assert.equal(r.error, undefined, `the ${loop} loop did not finish: ${r.error}`)
  assert.equal(r.status, 0, `the ${loop} loop failed:\n${r.stdout}${r.stderr}`)
  const m = JSON.parse(r.stdout.trim().split('\n').pop())
  assert.ok(Number.isInteger(m.iterations) && m.iterations > 0, `bad report ${r.stdout}`)
  for (const key of Object.keys(BOUNDS)) {
    assert.ok(Number.isFinite(m.before[key]) && Number.isFinite(m.after[key]), `bad report ${r.stdout}`)
  }
  return m
}

describe(`leak loops (${full ? 'full' : 'a tenth'})`, () => {
  for (const loop of ['calls', 'groups', 'executions', 'policies']) {
    it(`${loop}: memory stays flat`, { timeout: full ? 600_000 : 120_000 }, () => {
      const m = measure(loop)
      for (const [key, { floor, perIteration }] of Object.entries(BOUNDS)) {
        const growth = m.after[key] - m.before[key]
        const bound = floor + perIteration * m.iterations
        assert.ok(
          growth < bound,
          `${key} grew ${(growth / KB).toFixed(0)} KiB over ${m.iterations} iterations of ${loop} (bound ${(bound / KB).toFixed(0)} KiB)`,
        )
      }
    })
  }
})
