// The fast-path word (holdoff.js reads the core's breaker word in place, docs/ffi.md "The
// fast-path word"): a closed breaker admits and takes a clean success without a native call,
// a permit admitted that way behaves as a native one, and everything else still reaches the
// core. Then the stress: interleaved callers mixing fast-path successes with failures through the
// core, checked record by record against the consecutive trip rule, and a breaker opened by its
// fleet from a native thread while callers read its word. Time moves only on a ManualClock.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { Breaker, ManualClock, PermitError, Policy, memoryStoreReset } from 'holdoff'
import { throwsCode } from './throws-code.mjs'

// The addon's module object, which holdoff.js calls through: counting its calls shows which
// operations crossed into native code.
const require = createRequire(import.meta.url)
const native = require(join(dirname(require.resolve('holdoff')), 'index.js'))

/** Runs `fn` counting the native calls of `names`; returns `[result, { name: calls }]`. */
function counting(names, fn) {
  const calls = Object.fromEntries(names.map((n) => [n, 0]))
  const saved = names.map((n) => native[n])
  names.forEach((n, i) => {
    native[n] = (...args) => {
      calls[n]++
      return saved[i](...args)
    }
  })
  try {
    return [fn(), calls]
  } finally {
    names.forEach((n, i) => {
      native[n] = saved[i]
    })
  }
}

const CROSSINGS = ['breakerAllow', 'breakerRecord']

describe('fast path', () => {
  it('describes the layout the core publishes', () => {
    const [version, mask] = native.fastPathLayout()
    assert.equal(version, 1)
    assert.equal(mask, 0b1111, 'state bits 0..3 and the counting flag')
  })

  it('admits and records clean successes of a closed breaker without a native call', () => {
    const b = new Breaker({ clock: new ManualClock(), trip: { threshold: 3 } })
    const [effects, calls] = counting(CROSSINGS, () => {
      const out = []
      for (let i = 0; i < 100; i++) {
        const p = b.allow()
        assert.equal(p.admitted, true)
        assert.equal(p.probe, false)
        assert.equal(p.episode, 0)
        out.push(b.record(p, 'success'))
      }
      return out
    })
    assert.deepEqual(new Set(effects), new Set(['counted']))
    assert.deepEqual(calls, { breakerAllow: 0, breakerRecord: 0 })
  })

  it('sends a success with failures pending to the core, then goes fast again', () => {
    const b = new Breaker({ clock: new ManualClock(), trip: { threshold: 3 } })
    b.record(b.allow(), 'failure')
    assert.equal(b.snapshot().failures, 1)
    const [, calls] = counting(CROSSINGS, () => {
      const p = b.allow() // failures pending still admit on the word
      assert.equal(b.record(p, 'success'), 'counted')
    })
    assert.deepEqual(calls, { breakerAllow: 0, breakerRecord: 1 }, 'the success that forgets the failure is the core\'s')
    assert.equal(b.snapshot().failures, 0)
    const [, again] = counting(CROSSINGS, () => b.record(b.allow(), 'success'))
    assert.deepEqual(again, { breakerAllow: 0, breakerRecord: 0 })
  })

  it('refuses a second record and a foreign record of a permit admitted on the word', () => {
    const b = new Breaker()
    const other = new Breaker()
    const p = b.allow()
    throwsCode(() => other.record(p, 'success'), PermitError, 'foreign_permit')
    assert.equal(b.record(p, 'success'), 'counted')
    assert.equal(p.recorded, true)
    throwsCode(() => b.record(p, 'success'), PermitError, 'permit_already_recorded')
    throwsCode(() => other.record(p, 'success'), PermitError, 'foreign_permit')
    const q = b.allow()
    assert.equal(b.record(q, 'failure'), 'counted')
    throwsCode(() => b.record(q, 'success'), PermitError, 'permit_already_recorded')
  })

  it('goes through the core while metrics count, so every call is counted', () => {
    const b = new Breaker()
    b.record(b.allow(), 'success')
    const value = (name, attrs = {}) =>
      b.metrics().find((r) => r.name === name && Object.entries(attrs).every(([k, v]) => r.attributes[k] === v))?.value
    assert.equal(value('holdoff.breaker.admitted'), 0, 'counting starts at the first read')
    const [, calls] = counting(CROSSINGS, () => {
      for (let i = 0; i < 10; i++) b.record(b.allow(), 'success')
    })
    assert.deepEqual(calls, { breakerAllow: 10, breakerRecord: 10 })
    assert.equal(value('holdoff.breaker.admitted'), 10)
  })

  it('admits on the word under a time-window policy but records through the core', () => {
    const b = new Breaker({ clock: new ManualClock(), trip: { policy: 'window', threshold: 3, windowMs: 10_000 } })
    const [, calls] = counting(CROSSINGS, () => b.record(b.allow(), 'success'))
    assert.deepEqual(calls, { breakerAllow: 0, breakerRecord: 1 })
  })

  it('answers a permit of an earlier episode as stale, and refuses while open', () => {
    const clock = new ManualClock()
    const b = new Breaker({ clock, trip: { threshold: 1 } })
    const early = b.allow()
    b.reset()
    assert.equal(b.record(early, 'success'), 'stale', 'admitted before the reset')
    b.forceOpen()
    const [r, calls] = counting(CROSSINGS, () => b.tryAllow())
    assert.equal(r.admitted, false)
    assert.equal(r.state, 'forced_open')
    assert.equal(calls.breakerAllow, 1)
    b.reset()
    const p = b.allow()
    assert.equal(b.record(p, 'success'), 'counted')
    assert.equal(b.snapshot().staleAnswers, 1)
    assert.equal(b.snapshot().episode, 3, 'reset, forced open, reset')
  })

  it('a policy records a permit its breaker admitted on the word', () => {
    const policy = new Policy({ clock: new ManualClock() })
    const call = policy.newCall()
    const p = policy.breaker.allow()
    assert.equal(policy.afterAttempt(call, p, 'success').decision, 'done')
    throwsCode(() => policy.afterAttempt(call, p, 'success'), PermitError, 'permit_already_recorded')
  })
})

describe('stress: fast-path successes and core failures interleaved', () => {
  it('trips exactly when the consecutive rule says, losing no failure and counting no stale answer', async () => {
    const THRESHOLD = 5
    const clock = new ManualClock()
    const b = new Breaker({ clock, trip: { threshold: THRESHOLD } })
    // The rule the core applies to these records, kept by the test: consecutive failures of the
    // current episode trip at THRESHOLD; a record of an earlier episode is stale.
    const model = { episode: 0, failures: 0, open: false, stale: 0, opens: 0, refused: 0 }
    const books = { admitted: 0, recorded: 0, fast: 0 }
    let n = 0
    // Rounds of a healthy upstream (one call in ten fails) and of a failing one (four in five).
    const outcomeOf = (k, round) => {
      const r = (k * 7919) % 20
      if (r >= (round % 3 === 1 ? 16 : 2)) return 'success'
      return r % 4 === 0 ? 'timeout' : 'failure'
    }

    async function caller(id, round) {
      for (let i = 0; i < 40; i++) {
        const k = n++
        const p = b.tryAllow()
        if (!p.admitted) {
          assert.equal(model.open, true, `refused while the rule says closed (call ${k})`)
          model.refused++
          await null
          continue
        }
        assert.equal(model.open, false, `admitted while the rule says open (call ${k})`)
        books.admitted++
        const episode = model.episode
        for (let w = (id + i) % 5; w > 0; w--) await null
        const outcome = outcomeOf(k, round)
        const [effect, calls] = counting(CROSSINGS, () => b.record(p, outcome))
        books.recorded++
        if (calls.breakerRecord === 0) books.fast++
        if (episode !== model.episode) {
          model.stale++
          assert.equal(effect, 'stale', `a permit of episode ${episode} recorded in ${model.episode}`)
        } else {
          assert.equal(effect, 'counted')
          if (outcome === 'success') {
            assert.equal(calls.breakerRecord === 0, model.failures === 0, 'fast exactly when nothing is pending')
            model.failures = 0
          } else if (++model.failures >= THRESHOLD) {
            model.failures = 0
            model.open = true
            model.episode++
            model.opens++
          }
        }
        const s = b.snapshot()
        assert.equal(s.state, model.open ? 'open' : 'closed', `state after call ${k}`)
        assert.equal(s.failures, model.failures, `failures after call ${k}`)
        assert.equal(s.episode, model.episode)
      }
    }

    for (let round = 0; round < 30; round++) {
      await Promise.all(Array.from({ length: 24 }, (_, id) => caller(id, round)))
      if (model.open) {
        // Back to closed for the next round: a new episode, answers to older permits stale.
        b.reset()
        model.open = false
        model.failures = 0
        model.episode++
      }
    }
    const s = b.snapshot()
    assert.equal(books.recorded, books.admitted, 'every permit recorded once')
    assert.equal(s.staleAnswers, model.stale)
    assert.equal(s.opens, model.opens)
    assert.equal(s.refusals, model.refused)
    assert.ok(model.opens >= 10, `the script trips often (${model.opens})`)
    assert.ok(model.stale > 0, 'and answers late')
    assert.ok(books.fast > books.recorded / 3, `most successes take the word (${books.fast} of ${books.recorded})`)
  })

  it('a fleet opening the breaker from a native thread mid-loop: no stale answer counted', async () => {
    memoryStoreReset('node-fast-path')
    const clock = new ManualClock()
    const fleet = { url: 'memory://node-fast-path', key: 'upstream' }
    const trip = { trip: { threshold: 1000 }, openInterval: { initialMs: 60_000, multiplier: 1 } }
    const a = new Breaker({ clock, fleet, trip: { threshold: 1 } })
    const b = new Breaker({ ...trip, clock, fleet })
    try {
      a.record(a.allow(), 'failure')
      assert.equal((await a.syncFleet()).record.state, 'open')
      const books = { admitted: 0, counted: 0, stale: 0, ignored: 0, refused: 0 }
      // b's fleet tick runs on a libuv thread and opens b (episode 0 to 1) while this thread
      // admits and records in a tight loop, each permit held for 8 more admissions: the word
      // changes under the reads. Once a refusal shows the open, no answer of episode 0 may count;
      // once one is stale, nothing may be admitted any more.
      // Eight permits admitted before the tick starts, answered during or after it.
      const held = Array.from({ length: 8 }, () => b.allow())
      books.admitted += held.length
      const sync = b.syncFleet()
      let openSeen = false
      let staleSeen = false
      const record = (q, i) => {
        const effect = b.record(q, i % 9 === 0 ? 'failure' : 'success')
        books[effect]++
        if (effect === 'stale') staleSeen = true
        else assert.equal(openSeen, false, 'an answer of episode 0 counted after the open was seen')
      }
      for (let i = 0; i < 2_000_000 && books.refused < 1000; i++) {
        const p = b.tryAllow()
        if (p.admitted) {
          assert.equal(staleSeen, false, 'admitted after an answer was stale')
          books.admitted++
          held.push(p)
        } else {
          books.refused++
          openSeen = true
        }
        if (held.length > 8) record(held.shift(), i)
      }
      await sync
      held.splice(0).forEach(record)
      const s = b.snapshot()
      assert.equal(s.state, 'open')
      assert.equal(s.episode, 1)
      assert.equal(books.counted + books.stale, books.admitted, 'every permit recorded once')
      assert.equal(s.staleAnswers, books.stale, 'the stale answers the callers saw are the core\'s')
      assert.equal(s.refusals, books.refused)
      assert.equal(s.failures, 0, 'counted failures were forgotten by the open, none left pending')
      assert.ok(books.stale > 0, 'permits of episode 0 answered after the open')
      assert.ok(books.refused > 0, 'the loop saw the open')
    } finally {
      await a.close()
      await b.close()
    }
  })
})
