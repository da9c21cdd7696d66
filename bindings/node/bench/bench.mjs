// holdoff against the breakers Node users would pick instead, in one run (run.sh bench).
// Each sample times a batch of calls and records the mean per call, so the timer's own cost
// (tens of nanoseconds) does not swamp operations of that size.
import { createRequire } from 'node:module'
import os from 'node:os'
import { Bench } from 'tinybench'
import CircuitBreaker from 'opossum'
import { ConsecutiveBreaker, ExponentialBackoff, circuitBreaker, handleAll, retry, wrap } from 'cockatiel'

const require = createRequire(import.meta.url)
const { Breaker, Policy } = require('../holdoff.js')
const native = require('../index.js')

const SYNC_BATCH = 2000
const ASYNC_BATCH = 200

const bench = new Bench({ time: Number(process.env.BENCH_TIME_MS ?? 1500), warmupTime: 300 })

function sync(name, op) {
  bench.add(name, () => {
    const t0 = bench.now()
    for (let i = 0; i < SYNC_BATCH; i++) op()
    const dt = bench.now() - t0
    return { overriddenDuration: dt / SYNC_BATCH, overriddenIterationCost: dt }
  })
}

function async(name, op) {
  bench.add(
    name,
    async () => {
      const t0 = bench.now()
      for (let i = 0; i < ASYNC_BATCH; i++) await op()
      const dt = bench.now() - t0
      return { overriddenDuration: dt / ASYNC_BATCH, overriddenIterationCost: dt }
    },
    { async: true },
  )
}

const resolved = async () => 1

// Baseline: two trivial calls into the addon through the same calling convention.
const handle = native.breakerNew(undefined, undefined)
sync('baseline: two trivial native calls', () => {
  native.breakerId(handle)
  native.breakerId(handle)
})

const breaker = new Breaker()
sync('holdoff allow+record (closed)', () => breaker.record(breaker.allow(), 'success'))

const policy = new Policy()
async('holdoff policy.execute (resolved)', () => policy.execute(resolved))

const cockatielBreaker = circuitBreaker(handleAll, { halfOpenAfter: 30_000, breaker: new ConsecutiveBreaker(5) })
async('cockatiel breaker.execute (resolved)', () => cockatielBreaker.execute(resolved))

const cockatielRetry = wrap(retry(handleAll, { maxAttempts: 10, backoff: new ExponentialBackoff() }), cockatielBreaker)
async('cockatiel retry+breaker execute (resolved)', () => cockatielRetry.execute(resolved))

const opossum = new CircuitBreaker(resolved)
async('opossum fire, defaults (resolved)', () => opossum.fire())

await bench.run()
opossum.shutdown()

const ns = (t) => t.result.latency.p50 * 1e6
const rows = bench.tasks.map((t) => ({ name: t.name, ns: ns(t), rme: t.result.latency.rme }))
const by = Object.fromEntries(rows.map((r) => [r.name, r.ns]))
console.log(`node ${process.version}, ${os.cpus()[0]?.model ?? 'cpu'} x${os.cpus().length}, load ${os.loadavg()[0].toFixed(2)}`)
console.log('| operation | median per call | ±% |')
console.log('|---|---:|---:|')
for (const r of rows) console.log(`| ${r.name} | ${r.ns.toFixed(0)} ns | ${r.rme.toFixed(1)} |`)
const exec = by['holdoff policy.execute (resolved)']
console.log('')
console.log(`allow+record: ${by['holdoff allow+record (closed)'].toFixed(0)} ns (target < 80 ns; baseline two trivial native calls ${by['baseline: two trivial native calls'].toFixed(0)} ns)`)
console.log(`execute: ${exec.toFixed(0)} ns (target < 300 ns)`)
console.log(`cockatiel breaker.execute / holdoff execute: ${(by['cockatiel breaker.execute (resolved)'] / exec).toFixed(2)}x`)
console.log(`cockatiel retry+breaker / holdoff execute: ${(by['cockatiel retry+breaker execute (resolved)'] / exec).toFixed(2)}x`)
console.log(`opossum fire / holdoff execute: ${(by['opossum fire, defaults (resolved)'] / exec).toFixed(2)}x (target >= 5x)`)
