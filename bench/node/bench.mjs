// holdoff against the breakers Node users would pick instead, in one run (bench/node/run.sh).
//
// Each tinybench iteration times one batch of calls sized to about 50 ms and records the mean
// per call, so the timer's own cost does not swamp operations of that size; 5 iterations after
// 300 ms of warm-up calls and a warm-up batch. Prints a summary; with HOLDOFF_BENCH_OUT=<file> it also appends one JSON line
// per (subject, op) (the cross-language benchmark's record format), raw ns/op per iteration.
// Memory: RSS delta over 20k objects after gc(), in a fresh child process per sample (RSS
// covers the V8 heap and the Rust addon's own heap alike).
import { spawnSync } from 'node:child_process'
import { appendFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import os from 'node:os'
import { fileURLToPath } from 'node:url'
import { Bench } from 'tinybench'
import CircuitBreaker from 'opossum'
import { ConsecutiveBreaker, ExponentialBackoff, circuitBreaker, handleAll, retry, wrap } from 'cockatiel'

const require = createRequire(import.meta.url)
const holdoff = require('../../bindings/node/holdoff.js')
const { Breaker, BreakerGroup, Policy, RetryBudget } = holdoff
const native = require('../../bindings/node/index.js')
const versions = {
  opossum: require('opossum/package.json').version,
  cockatiel: require('cockatiel/package.json').version,
}

const SAMPLES = 5
const TARGET_MS = 50
const MEM_N = 20_000
const OUT = process.env.HOLDOFF_BENCH_OUT

// -- memory child: node bench.mjs --mem <kind> prints the bytes per object -----------------------

if (process.argv[2] === '--mem') {
  const kind = process.argv[3]
  const keys = Array.from({ length: MEM_N }, (_, i) => `host-${i}`)
  const group = kind === 'group' ? new BreakerGroup({ maxKeys: MEM_N }) : undefined
  const make = {
    holdoff: () => new Breaker(),
    opossum: () => new CircuitBreaker(async () => 1),
    cockatiel: () => circuitBreaker(handleAll, { halfOpenAfter: 30_000, breaker: new ConsecutiveBreaker(5) }),
    group: (i) => group.get(keys[i]),
  }[kind]
  const keep = new Array(MEM_N)
  keep[0] = make(0)
  globalThis.gc()
  const before = process.memoryUsage.rss()
  for (let i = 1; i < MEM_N; i++) keep[i] = make(i)
  globalThis.gc()
  const after = process.memoryUsage.rss()
  console.log(`bytes=${(after - before) / (MEM_N - 1)}`)
  process.exit(0) // opossum's bucket timers would keep the process alive
}

// -- timing -----------------------------------------------------------------------------------------

const rows = []
function emit(subject, op, unit, samples, note) {
  const s = [...samples].sort((a, b) => a - b)
  rows.push([subject, op, unit, s, note])
  if (OUT) {
    appendFileSync(OUT, JSON.stringify({ lang: 'node', subject, op, unit, samples, note }) + '\n')
  }
}

const bench = new Bench({ time: 0, iterations: SAMPLES, warmupTime: 0, warmupIterations: 1, retainSamples: true })
const meta = new Map()

// Runs an operation for WARM_MS before it is calibrated, so that the calibration and the samples
// time optimized code: a call of the retry helpers takes several thousand calls to be optimized
// (an async function and its promises), and timed cold it was several times slower than warm.
const WARM_MS = 300

async function warm(run) {
  const t0 = performance.now()
  while (performance.now() - t0 < WARM_MS) await run(100)
}

// Calibrates the batch size that takes about TARGET_MS, after a warm-up.
async function batchSize(run) {
  await warm(run)
  let n = 100
  for (;;) {
    const t0 = performance.now()
    await run(n)
    const dt = performance.now() - t0
    if (dt > TARGET_MS / 8) return Math.max(1, Math.round((n * TARGET_MS) / dt))
    n *= 4
  }
}

async function sync(name, op, { subject, id, note } = {}) {
  const run = (n) => {
    for (let i = 0; i < n; i++) op()
  }
  const n = await batchSize(run)
  bench.add(name, () => {
    const t0 = bench.now()
    run(n)
    const dt = bench.now() - t0
    return { overriddenDuration: dt / n, overriddenIterationCost: dt }
  })
  if (id) meta.set(name, { subject, id, note })
}

async function async_(name, op, { subject, id, note } = {}) {
  const run = async (n) => {
    for (let i = 0; i < n; i++) await op()
  }
  const n = await batchSize(run)
  bench.add(
    name,
    async () => {
      const t0 = bench.now()
      await run(n)
      const dt = bench.now() - t0
      return { overriddenDuration: dt / n, overriddenIterationCost: dt }
    },
    { async: true },
  )
  if (id) meta.set(name, { subject, id, note })
}

const resolved = async () => 1
const peer = (name) => `, ${name} ${versions[name]}`

// The floor: one trivial call into the addon through the same calling convention as the hot
// calls (a handle argument unwrapped, a number returned), and the old baseline of two.
const handle = native.breakerNew(undefined, undefined)
await sync('floor: one trivial native call', () => {
  native.breakerId(handle)
}, {
  subject: 'floor', id: 'noop_crossing',
  note: 'native.breakerId(handle): one N-API call that unwraps its External argument and returns a number',
})
await sync('baseline: two trivial native calls', () => {
  native.breakerId(handle)
  native.breakerId(handle)
})

const breaker = new Breaker()
await sync('holdoff allow+record (closed)', () => breaker.record(breaker.allow(), 'success'), {
  subject: 'holdoff', id: 'allow_record',
  note: "breaker.record(breaker.allow(), 'success'), closed, defaults: admitted and recorded on the fast-path word, no native call",
})

const open = new Breaker()
open.forceOpen()
await sync('holdoff tryAllow refused (open)', () => {
  if (open.tryAllow().admitted !== false) throw new Error('admitted')
}, {
  subject: 'holdoff', id: 'refuse_open',
  note: 'breaker.tryAllow() -> refusal object (forced open; allow() would throw): the word read, then two native calls',
})

const budget = new RetryBudget()
const later = { retryLaterMs: 1000 }
await sync('holdoff budget decide (429, Retry-After: 1)', () => {
  if (budget.decide(budget.newCall(), later).decision !== 'retry') throw new Error('not retry')
}, {
  subject: 'holdoff', id: 'budget_429',
  note: 'budget.decide(budget.newCall(), { retryLaterMs: 1000 }): one native call, the decision object built in JS',
})

const policy = new Policy()
await async_('holdoff policy.execute (resolved)', () => policy.execute(resolved), {
  subject: 'holdoff', id: 'protected_call',
  note: 'await policy.execute(async () => 1) (breaker + retry budget, defaults): first attempt admitted and its success recognised on the fast-path word, no native call',
})

const cockatielBreaker = circuitBreaker(handleAll, { halfOpenAfter: 30_000, breaker: new ConsecutiveBreaker(5) })
await async_('cockatiel breaker.execute (resolved)', () => cockatielBreaker.execute(resolved), {
  subject: 'cockatiel', id: 'protected_call',
  note: 'await circuitBreaker(handleAll, ConsecutiveBreaker(5)).execute(async () => 1)' + peer('cockatiel'),
})

const cockatielRetry = wrap(retry(handleAll, { maxAttempts: 10, backoff: new ExponentialBackoff() }), cockatielBreaker)
await async_('cockatiel retry+breaker execute (resolved)', () => cockatielRetry.execute(resolved))

const cockatielOpen = circuitBreaker(handleAll, { halfOpenAfter: 3_600_000, breaker: new ConsecutiveBreaker(5) })
for (let i = 0; i < 5; i++) await cockatielOpen.execute(async () => { throw new Error('boom') }).catch(() => {})
await async_('cockatiel execute refused (open)', () => cockatielOpen.execute(resolved).then(
  () => { throw new Error('admitted') }, () => {}), {
  subject: 'cockatiel', id: 'refuse_open', note: 'await breaker.execute(fn) rejecting with BrokenCircuitError, caught' + peer('cockatiel'),
})

const opossum = new CircuitBreaker(resolved)
await async_('opossum fire, defaults (resolved)', () => opossum.fire(), {
  subject: 'opossum', id: 'protected_call', note: 'await new CircuitBreaker(async () => 1).fire(), defaults (10 s timeout timer)' + peer('opossum'),
})

const opossumOpen = new CircuitBreaker(resolved)
opossumOpen.open()
await async_('opossum fire refused (open)', () => opossumOpen.fire().then(() => { throw new Error('admitted') }, () => {}), {
  subject: 'opossum', id: 'refuse_open', note: "await breaker.fire() rejecting with 'Breaker is open', caught (breaker.open())" + peer('opossum'),
})

const groups = []
for (const [keys, id] of [[10, 'group_lookup_10'], [10_000, 'group_lookup_10k'], [1_000_000, 'group_lookup_1m']]) {
  // Bounded to the keys it holds, so that every lookup finds its key (no eviction).
  const group = new BreakerGroup({ maxKeys: keys })
  const names = Array.from({ length: keys }, (_, i) => `host-${i}`)
  for (const k of names) group.get(k)
  groups.push(group)
  let k = 0
  await sync(`holdoff group.get, ${keys} keys`, () => {
    k = (k + 7919) % keys
    group.get(names[k])
  }, { subject: 'holdoff', id, note: `group.get(existing key), ${keys} keys, scattered order` })
}

await bench.run()
opossum.shutdown()
opossumOpen.shutdown()

const ns = (t) => t.result.latency.p50 * 1e6
for (const t of bench.tasks) {
  const m = meta.get(t.name)
  if (m) emit(m.subject, m.id, 'ns/op', [...t.result.latency.samples].map((ms) => ms * 1e6), m.note)
}

// Memory, in child processes.
const self = fileURLToPath(import.meta.url)
for (const [subject, op, kind, note] of [
  ['holdoff', 'bytes_per_breaker', 'holdoff', 'new Breaker() (JS object + addon breaker)'],
  ['opossum', 'bytes_per_breaker', 'opossum', 'new CircuitBreaker(async () => 1)' + peer('opossum')],
  ['cockatiel', 'bytes_per_breaker', 'cockatiel', 'circuitBreaker(handleAll, ConsecutiveBreaker(5))' + peer('cockatiel')],
  ['holdoff', 'bytes_per_group_entry', 'group', "group.get('host-N') of 20k new keys, the returned breakers kept"],
]) {
  const samples = []
  for (let i = 0; i < SAMPLES; i++) {
    const r = spawnSync(process.execPath, ['--expose-gc', self, '--mem', kind], { encoding: 'utf8' })
    const m = /bytes=([0-9.e+-]+)/.exec(r.stdout)
    if (r.status !== 0 || !m) throw new Error(`memory child ${kind}: ${r.stderr}`)
    samples.push(Number(m[1]))
  }
  emit(subject, op, 'bytes', samples, 'RSS delta over 20k objects after gc(), fresh process per sample: ' + note)
}

const by = Object.fromEntries(bench.tasks.map((t) => [t.name, ns(t)]))
console.log(`node ${process.version}, ${os.cpus()[0]?.model ?? 'cpu'} x${os.cpus().length}, load ${os.loadavg()[0].toFixed(2)}`)
console.log('| operation | median per call |')
console.log('|---|---:|')
for (const t of bench.tasks) console.log(`| ${t.name} | ${ns(t).toFixed(0)} ns |`)
console.log('')
for (const [subject, op, unit, s, note] of rows) {
  console.log(`${subject.padEnd(10)} ${op.padEnd(22)} ${s[s.length >> 1].toFixed(1).padStart(10)} ${unit.padEnd(6)} (min ${s[0].toFixed(1)}, max ${s[s.length - 1].toFixed(1)})  ${note}`)
}
const exec = by['holdoff policy.execute (resolved)']
console.log('')
console.log(`allow+record: ${by['holdoff allow+record (closed)'].toFixed(0)} ns (target < 80 ns; one trivial native call ${by['floor: one trivial native call'].toFixed(0)} ns, two ${by['baseline: two trivial native calls'].toFixed(0)} ns)`)
console.log(`budget decision (429): ${by['holdoff budget decide (429, Retry-After: 1)'].toFixed(0)} ns (target <= 500 ns)`)
console.log(`execute: ${exec.toFixed(0)} ns (target < 300 ns and <= cockatiel's breaker.execute; no native call: the breaker's word and the budget's episode flag read in place)`)
console.log(`cockatiel breaker.execute / holdoff execute: ${(by['cockatiel breaker.execute (resolved)'] / exec).toFixed(2)}x`)
console.log(`cockatiel retry+breaker / holdoff execute: ${(by['cockatiel retry+breaker execute (resolved)'] / exec).toFixed(2)}x`)
console.log(`opossum fire / holdoff execute: ${(by['opossum fire, defaults (resolved)'] / exec).toFixed(2)}x (target >= 5x)`)
