// Run by leak.test.mjs as `node --expose-gc --max-semi-space-size=1 test/leak-child.mjs <loop>
// <scale>`: makes and drops objects in a loop and prints one JSON line, { loop, iterations,
// before, after }, where before and after are { rss, heapUsed } in bytes (process.memoryUsage())
// after a warm-up (a tenth of the loop's total unless it sets its own) and after nine tenths of
// its total more, each after full collections; iterations counts the measured ones. A child
// process of its own, so that no other test's garbage or heap growth lands in the measurement.
//
// The loop lets the event loop turn every 1000 iterations, as any server does: Node runs the
// finalizers of native handles (which free the Rust objects) from the event loop, so a loop that
// never yields holds every dropped object's native memory until it does (about 1 KB a breaker;
// RSS then stays high because the allocator keeps the freed pages), which is not a leak.
import * as holdoff from 'holdoff'

const { Breaker, BreakerGroup, ManualClock, Policy, RetryQuota } = holdoff

if (typeof globalThis.gc !== 'function') throw new Error('run with --expose-gc')

async function settledUsage() {
  // Finalizers of native handles run after the collection that found them dead, some of them
  // from the event loop: collect, let the loop turn, and again.
  for (let k = 0; k < 4; k++) {
    globalThis.gc()
    await new Promise(setImmediate)
  }
  const { rss, heapUsed } = process.memoryUsage()
  return { rss, heapUsed }
}

const clock = new ManualClock({ wallOriginUnixMs: 1_700_000_000_000 })

const loops = {
  // One of each per-call object an iteration: a breaker, a permit (recorded), a quota lease
  // (refunded), a policy call (PolicyCall, permit, decision; every eighth fails once and
  // retries, with a lease inside the core).
  calls: {
    total: 1_000_000,
    setup() {
      const quota = new RetryQuota({ capacity: 1000 })
      const policy = new Policy({ clock, budget: { maxRetries: 1 }, quota: {} })
      const outcomes = ['success', 'failure', 'timeout', 'cancelled']
      return (i) => {
        const b = new Breaker({ clock })
        b.record(b.allow(), outcomes[i & 3])
        quota.onSuccess(quota.acquire({ timeout: (i & 1) === 1 }))
        const call = policy.newCall()
        const go = policy.beforeAttempt(call)
        if (i & 7) {
          policy.afterAttempt(call, go.permit, 'success')
        } else {
          const d = policy.afterAttempt(call, go.permit, 'failure')
          if (d.decision !== 'retry') throw new Error(`expected a retry, got ${JSON.stringify(d)}`)
          policy.afterAttempt(call, policy.beforeAttempt(call).permit, 'success')
        }
        if (quota.available !== 1000) throw new Error('a lease was not refunded')
      }
    },
  },
  // A bounded group asked for a new key every iteration (keys from request data): the core
  // evicts idle breakers, and the binding's wrappers of evicted breakers must go with them.
  // Every 16th iteration asks again for a key of the last 64, which is still kept. Two things
  // here are V8's, not leaks, and would hide one: an evicted breaker is freed only when V8
  // collects its dead wrapper, which V8 schedules by a JavaScript heap these small wrappers
  // barely grow (so this loop collects at each turn); and wrappers kept in the group's map
  // survive young collections, so V8 grows its young generation to the maximum over the first
  // hundred thousand keys, RSS with it (about 30 MiB here; hence the longer, fixed warm-up).
  groups: {
    total: 1_000_000,
    warmup: 150_000,
    collect: true,
    setup() {
      const group = new BreakerGroup({ clock, maxKeys: 1000 })
      return (i) => {
        const b = group.get(`tenant-${i}`)
        b.record(b.allow(), 'success')
        if ((i & 15) === 15 && group.get(`tenant-${i - 63}`) !== group.get(`tenant-${i - 63}`)) {
          throw new Error('a kept key changed breakers')
        }
      }
    },
  },
  // Calls of the retry helper, each holding a native Execution, its attempt's AbortController and
  // the timer of the default 60 s total timeout (cleared when the attempt ends): seven of eight
  // succeed, the eighth gives up on a transport error (a GiveUpError with its cause). Each call
  // makes short-lived objects (promises, the controller, the timer) at a rate that makes V8 grow
  // its young generation to the maximum over the first hundred thousand calls, RSS with it
  // (about 30 MiB here; flat from the start with --max-semi-space-size=1): hence the longer,
  // fixed warm-up.
  executions: {
    total: 200_000,
    warmup: 100_000,
    setup() {
      const policy = new Policy({ clock, breaker: { trip: { threshold: 1_000_000 } }, budget: { maxRetries: 0 }, quota: {} })
      const down = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' })
      return async (i) => {
        const fails = (i & 7) === 7
        try {
          const v = await policy.execute(async (signal) => {
            if (fails) throw down
            return signal.aborted ? -1 : i
          })
          if (v !== i) throw new Error(`unexpected value ${v}`)
        } catch (e) {
          if (!fails || e.cause !== down) throw e
        }
      }
    },
  },
  // Whole policies (breaker with a listener, budget, quota, classifier), an HTTP decision and
  // the events it caused: bigger objects, fewer of them.
  policies: {
    total: 100_000,
    setup() {
      return () => {
        const breaker = new Breaker({ trip: { threshold: 1 }, clock })
        let heard = 0
        breaker.on('stateChange', () => heard++)
        const policy = new Policy({ breaker, budget: { clock }, quota: {}, classifier: {} })
        const call = policy.newCall()
        const d = policy.afterResponse(call, policy.beforeAttempt(call).permit, 503, { 'retry-after': '2' })
        if (d.decision !== 'retry' || heard !== 1 || breaker.drainEvents()[0].reason !== 'retry_later') {
          throw new Error(`unexpected decision ${JSON.stringify(d)}`)
        }
      }
    },
  },
}

const name = process.argv[2]
const loop = loops[name]
if (loop === undefined) throw new Error(`unknown loop ${name} (${Object.keys(loops)})`)
const scale = Number(process.argv[3] ?? 1)
if (!(scale > 0 && scale <= 1)) throw new Error(`bad scale ${process.argv[3]}`)
const warmup = loop.warmup ?? Math.round((loop.total * scale) / 10)
const total = warmup + Math.round(loop.total * scale * 0.9)
const step = loop.setup()
async function run(from, to) {
  for (let i = from; i < to; i++) {
    const pending = step(i)
    if (pending !== undefined) await pending
    if (i % 1000 === 999) {
      if (loop.collect) globalThis.gc()
      await new Promise(setImmediate)
    }
  }
}
await run(0, warmup)
const before = await settledUsage()
await run(warmup, total)
const after = await settledUsage()
console.log(JSON.stringify({ loop: name, iterations: total - warmup, before, after }))
