// policy.execute without options admits its first attempt on the breaker's fast-path word and
// ends a clean success there, with no native call; anything else continues in the core's loop
// from that attempt. Checked against the same calls made through the core all the way
// (`execute(fn, {})`: any options object takes the core's path): the same answers and the same
// breaker books, call by call, with callers interleaved so that successes admitted before a trip
// answer after it (stale: never counted); an attempt that outlives its time limit (Node's timers
// mocked). And what the word cannot see: the budget's rate-limit episode (a success ends it),
// the policy's retry metrics (counted once read), a quota, a manual clock.
//
// The policies run on the system clock (a manual clock's never take the fast path) and nothing
// here depends on its readings: no retry is made (maxRetries 0, so no sleep), and a tripped
// breaker stays open (30 s) far longer than the test runs, until the test resets it.
import { describe, it, mock } from 'node:test'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { BreakerOpenError, GiveUpError, ManualClock, Policy, RetryQuota } from 'holdoff'
import { throwsCode } from './throws-code.mjs'

// The addon's module object, which holdoff.js calls through: counting its calls shows which
// calls crossed into native code.
const require = createRequire(import.meta.url)
const native = require(join(dirname(require.resolve('holdoff')), 'index.js'))

const EXEC = ['execStartDefault', 'execStart', 'execAdmitted', 'execSucceeded', 'execComplete', 'execNext']

/** Awaits `fn()` counting the native calls of `names`; returns `[result, { name: calls }]`. */
async function counting(names, fn) {
  const calls = Object.fromEntries(names.map((n) => [n, 0]))
  const saved = names.map((n) => native[n])
  names.forEach((n, i) => {
    native[n] = (...args) => {
      calls[n]++
      return saved[i](...args)
    }
  })
  try {
    return [await fn(), calls]
  } finally {
    names.forEach((n, i) => {
      native[n] = saved[i]
    })
  }
}

const refused = () => Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' })
const ok = async () => 1
const failing = async () => {
  throw refused()
}

// What a call came to, as the caller sees it.
async function answer(promise) {
  try {
    return `value ${await promise}`
  } catch (e) {
    if (e instanceof GiveUpError || e instanceof BreakerOpenError) return `${e.constructor.name} ${e.reason} ${e.attempts}`
    return `${e.constructor.name} ${e.message}`
  }
}

// A breaker's books without the time to its next probe (read at a slightly different instant on
// each policy).
function books(policy) {
  const { retryAfterMs: _, ...s } = policy.breaker.snapshot()
  return s
}

// A small seeded generator (mulberry32): the same sequence every run.
function generator(seed) {
  let a = seed >>> 0
  return (n) => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return (((t ^ (t >>> 14)) >>> 0) / 4294967296) * n
  }
}

describe('policy.execute on the fast-path word', () => {
  it('a clean success crosses nothing; a failure continues in the core from the admitted attempt', async () => {
    const p = new Policy({ budget: { maxRetries: 0 } })
    const [v, calls] = await counting(EXEC, () => p.execute(ok))
    assert.equal(v, 1)
    assert.deepEqual(calls, Object.fromEntries(EXEC.map((n) => [n, 0])))
    const [a, failed] = await counting(EXEC, () => answer(p.execute(failing)))
    assert.equal(a, 'GiveUpError attempts_exhausted 1')
    assert.equal(failed.execAdmitted, 1)
    assert.equal(failed.execComplete, 1)
    assert.equal(failed.execStartDefault, 0)
    assert.equal(p.breaker.snapshot().failures, 1)
    // The success after it goes to the core (a failure is pending on the word) and clears it.
    const [, cleared] = await counting(EXEC, () => p.execute(ok))
    assert.equal(cleared.execAdmitted, 1)
    assert.equal(cleared.execSucceeded, 1)
    assert.equal(p.breaker.snapshot().failures, 0)
  })

  it('a function that throws at once is reported after execute returns, on either path', async () => {
    for (const options of [undefined, {}]) {
      const log = []
      const p = new Policy({ breaker: { trip: { policy: 'consecutive', threshold: 1 } }, budget: { maxRetries: 0 } })
      p.breaker.on('stateChange', (e) => log.push(`${e.from}->${e.to}`))
      const call = p.execute(() => { throw Object.assign(new Error('boom'), { code: 'ECONNREFUSED' }) }, options)
      log.push('returned')
      log.push(await answer(call))
      assert.deepEqual(log, ['returned', 'closed->open', 'GiveUpError attempts_exhausted 1'], `options ${JSON.stringify(options)}`)
    }
  })

  it('a success during a rate-limit episode of the budget ends it, as through the core', async () => {
    const a = new Policy()
    const b = new Policy({ budget: a.budget })
    // Started through the budget itself, then through another policy sharing it.
    a.budget.decide(a.budget.newCall(), { retryLaterMs: 1000 })
    assert.notEqual(a.budget.episodeStartMs, null)
    const [, calls] = await counting(EXEC, () => a.execute(ok))
    assert.equal(calls.execSucceeded, 1)
    assert.equal(a.budget.episodeStartMs, null)
    const call = b.newCall()
    const before = b.beforeAttempt(call)
    assert.equal(before.action, 'go')
    assert.equal(b.afterAttempt(call, before.permit, { retryLaterMs: 1000 }).decision, 'retry')
    assert.notEqual(a.budget.episodeStartMs, null)
    assert.equal(await a.execute(ok), 1)
    assert.equal(a.budget.episodeStartMs, null)
    // An episode that starts while an attempt admitted on the word is in flight: its success
    // goes to the core, which ends it.
    const gate = deferred()
    const [inFlight, during] = await counting(EXEC, async () => {
      const call = a.execute(async () => {
        await gate.promise
        return 2
      })
      a.budget.decide(a.budget.newCall(), { retryLaterMs: 1000 })
      gate.resolve()
      return call
    })
    assert.equal(inFlight, 2)
    assert.equal(during.execAdmitted, 1)
    assert.equal(a.budget.episodeStartMs, null)
    // No episode: the next success ends on the word again.
    const [, quiet] = await counting(EXEC, () => a.execute(ok))
    assert.equal(quiet.execSucceeded + quiet.execAdmitted, 0)
  })

  it('once the retry metrics are read, every attempt is counted', async () => {
    const p = new Policy()
    const attempts = () => p.metrics().find((r) => r.name === 'holdoff.retry.attempts').value
    assert.equal(attempts(), 0)
    for (let i = 0; i < 3; i++) assert.equal(await p.execute(ok), 1)
    assert.equal(attempts(), 3)
  })

  it('a policy with a quota or on a manual clock goes through the core every call', async () => {
    for (const p of [new Policy({ quota: new RetryQuota() }), new Policy({ clock: new ManualClock() })]) {
      const [v, calls] = await counting(EXEC, () => p.execute(ok))
      assert.equal(v, 1)
      assert.equal(calls.execStartDefault, 1)
      assert.equal(calls.execAdmitted, 0)
    }
  })

  it('an attempt admitted on the word that outlives its limit ends as through the core', async (t) => {
    // Node's timers mocked (the attempt's limit is a global timer armed at the next turn of the
    // event loop); the core's clock barely moves, so the limit is what ends the attempts. The
    // limits earlier tests deferred are armed first, on the real timers.
    await new Promise(setImmediate)
    mock.timers.enable({ apis: ['setTimeout', 'setImmediate'] })
    t.after(() => mock.timers.reset())
    const fast = new Policy({ budget: { maxRetries: 0 } })
    const slow = new Policy({ budget: { maxRetries: 0 } })
    let signals = 0
    const hang = () => new Promise(() => {})
    const hangSeeing = (signal) => {
      if (signal instanceof AbortSignal) signals++
      return new Promise(() => {})
    }
    const calls = [fast.execute(hang), slow.execute(hang, {}), fast.execute(hangSeeing), slow.execute(hangSeeing, {})]
    const answers = Promise.all(calls.map(answer))
    mock.timers.tick(0)
    mock.timers.tick(60_000)
    const [f, s, fs, ss] = await answers
    assert.equal(f, 'GiveUpError attempts_exhausted 1')
    assert.equal(f, s)
    assert.equal(fs, ss)
    assert.equal(signals, 2)
    assert.deepEqual(books(fast), books(slow))
    assert.equal(fast.breaker.snapshot().failures, 2)
  })

  it('every attempt of a turn gets its limit, however many start in it', async (t) => {
    // Many calls started within one turn of the event loop (their limits are queued for the
    // next, in stacks of a few dozen), every seventh hanging: those, and only those, run into
    // their limit; the others answer at once.
    await new Promise(setImmediate)
    mock.timers.enable({ apis: ['setTimeout', 'setImmediate'] })
    t.after(() => mock.timers.reset())
    const p = new Policy({ budget: { maxRetries: 0 }, breaker: { trip: { policy: 'consecutive', threshold: 1000 } } })
    const calls = []
    for (let i = 0; i < 300; i++) {
      calls.push(p.execute(i % 7 === 3 ? () => new Promise(() => {}) : async () => i))
      // Calls made one after another within the turn, between the concurrent ones.
      if (i % 10 === 0) assert.equal(await p.execute(ok), 1)
    }
    // The answers already given are taken before the mocked timers run the next turn at once.
    assert.equal(await p.execute(ok), 1)
    const answers = Promise.all(calls.map(answer))
    mock.timers.tick(0)
    mock.timers.tick(60_000)
    const got = await answers
    got.forEach((a, i) => assert.equal(a, i % 7 === 3 ? 'GiveUpError attempts_exhausted 1' : `value ${i}`, `call ${i}`))
    assert.equal(p.breaker.snapshot().failures, got.filter((_, i) => i % 7 === 3).length)
  })

  it('an attempt started late in a turn gets its whole limit', async (t) => {
    // Calls in one turn, 150 ms of synchronous work between them (performance.now moved by
    // hand, Node's timers mocked): no limit (the default 60 s) may end before it has run in
    // full from when it is armed, the later calls' included, on the word (no options) and
    // through the core (options).
    await new Promise(setImmediate)
    mock.timers.enable({ apis: ['setTimeout', 'setImmediate'] })
    t.after(() => mock.timers.reset())
    let fakeNow = 1000
    t.mock.method(performance, 'now', () => fakeNow)
    const hang = () => new Promise(() => {})
    const ended = []
    const track = (name, promise) => answer(promise).then((a) => ended.push(`${name}: ${a}`))
    const fast = new Policy({ budget: { maxRetries: 0 } })
    const slow = new Policy({ budget: { maxRetries: 0 } })
    const calls = [track('fast first', fast.execute(hang)), track('slow first', slow.execute(hang, {}))]
    fakeNow += 150
    calls.push(track('fast late', fast.execute(hang)), track('slow late', slow.execute(hang, {})))
    mock.timers.tick(0)
    mock.timers.tick(59_999)
    for (let i = 0; i < 20; i++) await null
    assert.deepEqual(ended, [])
    mock.timers.tick(1)
    await Promise.all(calls)
    assert.deepEqual(ended.sort(), ['fast first', 'fast late', 'slow first', 'slow late'].map((n) => `${n}: GiveUpError attempts_exhausted 1`))
  })

  it('the native continuation refuses an elapsed time that is not one, naming it', () => {
    const policy = native.policyNew(native.breakerNew({}), native.budgetNew({}), undefined, native.classifierNew({}))
    for (const bad of [-1, Number.NaN, Infinity]) {
      throwsCode(() => native.execAdmitted(native.execNew(), policy, 0, bad), RangeError, 'invalid_input', 'elapsedMs')
    }
    // Past any duration the core can hold: it saturates, nothing panics.
    native.execAdmitted(native.execNew(), policy, 0, 0)
    native.execAdmitted(native.execNew(), policy, 0, Number.MAX_VALUE)
  })

  it('stress: interleaved callers get the same answers and books as through the core', async () => {
    const fast = new Policy({ budget: { maxRetries: 0 } })
    const slow = new Policy({ budget: { maxRetries: 0 } })
    const rand = generator(20)
    // Totals over the run (a reset starts the breaker's counts afresh).
    let trips = 0
    let stale = 0
    // Resets the breaker when open: between rounds, or in the middle of one (`resetAt`), where the
    // calls still waiting were admitted before the trip and answer in the reset's new episode,
    // on a word that says closed with nothing pending.
    const resetIfOpen = (policy) => {
      if (policy.breaker.state !== 'open') return false
      if (policy === fast) {
        trips += fast.breaker.snapshot().opens
        stale += fast.breaker.snapshot().staleAnswers
      }
      policy.breaker.reset()
      return true
    }
    // Stale answers given after a reset in the middle of a round, on the fast path.
    let midRoundStale = 0
    for (let round = 0; round < 1500; round++) {
      // A batch of callers admitted together, answering in a shuffled order, each answer
      // recorded before the next is given: the same order of events on both policies.
      const n = 1 + Math.floor(rand(4))
      const kinds = Array.from({ length: n }, () => {
        const r = rand(100)
        return r < 55 ? 'success' : r < 93 ? 'failure' : 'bug'
      })
      const order = Array.from({ length: n }, (_, i) => i)
      for (let i = n - 1; i > 0; i--) {
        const j = Math.floor(rand(i + 1))
        ;[order[i], order[j]] = [order[j], order[i]]
      }
      const resetAt = rand(100) < 25 ? Math.floor(rand(n)) : -1
      let midReset = false
      const run = async (policy, viaCore) => {
        const gates = kinds.map(() => deferred())
        const fns = kinds.map((kind, i) => async () => {
          await gates[i].promise
          if (kind === 'success') return i
          if (kind === 'failure') throw refused()
          throw new Error(`bug ${i}`)
        })
        const calls = fns.map((fn) => (viaCore ? policy.execute(fn, {}) : policy.execute(fn)))
        const answers = []
        for (const [k, i] of order.entries()) {
          gates[i].resolve()
          answers[i] = await answer(calls[i])
          if (k === resetAt && resetIfOpen(policy) && policy === fast) midReset = true
        }
        return answers
      }
      const got = await run(fast, false)
      const want = await run(slow, true)
      assert.deepEqual(got, want, `round ${round}: ${kinds.join(', ')}, answered in order ${order.join(', ')}`)
      assert.deepEqual(books(fast), books(slow), `round ${round}: ${kinds.join(', ')}, answered in order ${order.join(', ')}`)
      if (midReset) midRoundStale += fast.breaker.snapshot().staleAnswers
      if (rand(100) < 30) {
        resetIfOpen(fast)
        resetIfOpen(slow)
      }
    }
    trips += fast.breaker.snapshot().opens
    stale += fast.breaker.snapshot().staleAnswers
    // The run saw what it is about: trips, and successes admitted before a trip answering after it.
    assert.ok(trips > 100, `trips: ${trips}`)
    assert.ok(stale > 50, `stale answers: ${stale}`)
    assert.ok(midRoundStale > 0, `stale answers after a reset in the middle of a round: ${midRoundStale}`)
  })

  it('a success admitted before a trip answers stale after a reset, as through the core', async () => {
    const seen = []
    for (const options of [undefined, {}]) {
      const p = new Policy({ budget: { maxRetries: 0 } })
      const gate = deferred()
      const call = p.execute(async () => {
        await gate.promise
        return 7
      }, options)
      // A new episode, closed with nothing pending: the word alone would take the success.
      p.breaker.forceOpen()
      p.breaker.reset()
      assert.equal(p.breaker.state, 'closed')
      gate.resolve()
      assert.equal(await call, 7)
      seen.push(books(p))
    }
    assert.deepEqual(seen[0], seen[1])
    assert.equal(seen[0].staleAnswers, 1)
  })
})

function deferred() {
  let resolve
  const promise = new Promise((r) => {
    resolve = r
  })
  return { promise, resolve }
}
