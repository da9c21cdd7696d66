// Stress: many callers share ONE breaker, ONE retry quota and ONE policy
// against a scripted flaky upstream, time moving only through a ManualClock, and the books must
// balance exactly at the end: admitted = recorded + cancelled, refusals + admissions = attempts,
// tokens = capacity - spent + refunded, the breaker's own metrics and events agreeing with what
// the callers counted.
//
// Why not worker threads sharing one breaker: a native handle (napi External) belongs to the
// isolate that made it, and the binding offers no way to reach the same core breaker from
// another thread (no shared registry, no handle ids). So the shared-object stress runs thousands
// of concurrent async callers on one event loop, each awaiting between admission and record,
// which is how a Node service shares a breaker. Worker threads are used for what they can show:
// several OS threads driving the addon and the core at once (each on its own breaker) must get
// exactly the results of the same script run alone.
//
// Nothing sleeps: rounds are separated by a coordinator that advances the clock. Every wait on
// another thread or on a round has a timeout that fails the test.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { Worker } from 'node:worker_threads'
import * as holdoff from 'holdoff'
import { BREAKER, QUOTA, add, admitOneCancelled, recorder, scenario, upstream } from './stress-script.mjs'

const { Breaker, BreakerOpenError, ManualClock, Policy, RetryQuota, UpstreamUnavailableError } = holdoff

/** Rejects (failing the test) if `promise` does not settle within `ms` of real time. */
function within(ms, promise, what) {
  let timer
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms: deadlock?`)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

/** Lets every pending microtask and I/O callback run (a few turns of the event loop). */
async function turns(n) {
  for (let k = 0; k < n; k++) await new Promise(setImmediate)
}

/** Consecutive state changes from the core's queue must connect: none lost. */
function checkChain(events) {
  let state = 'closed'
  for (const e of events) {
    assert.equal(e.from, state, `lost state change before ${JSON.stringify(e)}`)
    state = e.to
  }
}

const eventKey = (e) => `${e.atMs}|${e.from}|${e.to}|${e.episode}|${e.reason}`

function sameMultiset(a, b) {
  assert.deepEqual([...a].map(eventKey).sort(), [...b].map(eventKey).sort())
}

describe('stress: one breaker and one quota shared by thousands of async callers', () => {
  it('keeps exact books with permits held across awaits and clock moves', { timeout: 30_000 }, async () => {
    const ROUNDS = 60
    const TASKS = 240
    const CALLS = 6
    const clock = new ManualClock()
    const breaker = new Breaker({ ...BREAKER, clock })
    const quota = new RetryQuota(QUOTA)
    const t = {}
    const heard = []
    const drained = []
    const errors = []
    // The listener re-enters the breaker (a snapshot, and on an opening one more admission that it
    // records as cancelled), from whichever caller's operation caused the change.
    breaker.on('stateChange', (e) => {
      // A throw here would only become a process warning: collect it instead.
      try {
        heard.push(e)
        assert.ok(breaker.snapshot().episode >= e.episode)
        if (e.from === 'closed') {
          add(t, 'listener')
          admitOneCancelled(breaker, t)
        }
      } catch (err) {
        errors.push(err)
      }
    })

    const leases = Array.from({ length: TASKS }, () => [])
    const record = recorder(holdoff, breaker, quota, leases, t)

    let held = []
    // One caller: admission, then 0 to 3 awaits (so thousands of permits are in flight at
    // once and their records interleave), then the record; one permit in 17 is kept for the
    // next round, answered after the clock moved.
    async function caller(task, round) {
      for (let i = 0; i < CALLS; i++) {
        add(t, 'attempts')
        const p = breaker.tryAllow()
        if (!p.admitted) {
          add(t, 'refused')
          assert.ok(p.state === 'open' || p.state === 'half_open')
          assert.ok(p.retryAfterMs >= 0)
          await null
          continue
        }
        add(t, 'admitted')
        if (p.probe) add(t, 'probes')
        const outcome = upstream(task, round, i)
        for (let k = (task * 7 + i) % 4; k > 0; k--) await null
        if ((task + i) % 17 === 0) held.push([task, p, outcome])
        else record(task, p, outcome)
      }
    }

    for (let round = 0; round < ROUNDS; round++) {
      const late = held
      held = []
      for (const [task, permit, outcome] of late) record(task, permit, outcome)
      const callers = []
      for (let task = 0; task < TASKS; task++) callers.push(caller(task, round))
      await within(10_000, Promise.all(callers), `round ${round}`)
      drained.push(...breaker.drainEvents())
      clock.advance(100)
    }
    for (const [task, permit, outcome] of held) record(task, permit, outcome)
    drained.push(...breaker.drainEvents())
    assert.deepEqual(errors, [])

    const s = breaker.snapshot()
    // Every admission answered once: admitted = recorded (counted + stale) + cancelled.
    assert.equal(t.admitted, t.counted + (t.stale ?? 0) + t.ignored)
    assert.equal(t.ignored, t.cancelled)
    assert.equal(t.attempts, t.admitted + t.refused)
    assert.equal(t.attempts, ROUNDS * TASKS * CALLS + (t.listener ?? 0))
    // The breaker saw the same.
    assert.equal(s.refusals, t.refused)
    assert.equal(s.probes, t.probes)
    assert.equal(s.staleAnswers, t.stale ?? 0)
    assert.equal(s.probesInFlight, 0)
    assert.equal(s.eventsDropped, 0)
    checkChain(drained)
    sameMultiset(drained, heard)
    assert.equal(s.opens, drained.filter((e) => e.from === 'closed' && e.to === 'open').length)
    assert.equal(s.closes, drained.filter((e) => e.reason === 'recovered').length)
    // The quota balances to the token.
    assert.equal(quota.available, QUOTA.capacity - t.spent + t.refunded)
    // The paths it claims to cover were taken.
    assert.ok(s.opens >= 2 && s.closes >= 1 && t.stale > 0 && t.probes > 5 && t.listener >= 1, JSON.stringify({ s, t }))
    assert.ok(t.doubleRecord > 0 && t.doubleRefund > 0 && t.quotaEmpty > 0 && t.spent > QUOTA.capacity, JSON.stringify(t))
  })

  it('keeps exact books through thousands of concurrent policy.execute() calls', { timeout: 30_000 }, async () => {
    const clock = new ManualClock()
    const breaker = new Breaker({ trip: { threshold: 8 }, openInterval: { initialMs: 200, maxMs: 200 }, recoveries: 1, maxProbesInFlight: 2, clock })
    const COSTS = { retry: 5, timeout: 10 }
    const capacity = 1000
    const policy = new Policy({
      breaker,
      budget: { maxRetries: 3, backoff: { initialMs: 50, multiplier: 2, maxMs: 200 }, maxBackoffDurationMs: 2_000, clock },
      quota: { capacity, retryCost: COSTS.retry, timeoutCost: COSTS.timeout, successRefill: 0 },
    })
    const t = {}
    // Sleepers wait for the coordinator's next clock move, whatever they asked for: a caller
    // that wakes early is told to wait again (a refusal like any other).
    let wake = []
    const nextRound = () => new Promise((resolve) => wake.push(resolve))
    const TIMEOUT = Object.assign(new Error('upstream timed out'), { name: 'TimeoutError' })

    async function one(id) {
      let attempt = 0
      let lastCost = 0 // the lease a success refunds: the last retry's
      let afterAttempt = false
      const fn = async () => {
        const outcome = upstream(id % 240, Math.floor(clock.now() / 100), attempt++)
        add(t, 'admitted')
        afterAttempt = true
        await null
        if (outcome === 'success') return id
        const err = outcome === 'timeout' ? TIMEOUT : new Error(JSON.stringify(outcome))
        err.outcome = outcome
        throw err
      }
      let last // the outcome of the last attempt, as classified
      const sleep = async (ms) => {
        assert.ok(ms >= 0 && Number.isFinite(ms))
        if (afterAttempt) {
          // A retry decision: the quota paid for it.
          afterAttempt = false
          add(t, 'retries')
          lastCost = last === 'timeout' ? COSTS.timeout : COSTS.retry
          add(t, 'spent', lastCost)
        } else add(t, 'refused')
        await nextRound()
      }
      // Executions start in waves, one per clock move, so that the breaker goes through
      // several episodes while thousands of them are in flight.
      for (let k = id % 20; k > 0; k--) await nextRound()
      try {
        // The sleep above is a barrier, not a timer: no time limits, so it sees only waits.
        const v = await policy.execute(fn, {
          sleep,
          totalTimeoutMs: null,
          classify: (e) => (last = e === TIMEOUT ? 'timeout' : e.outcome),
          classifyResult: () => (last = 'success'),
        })
        assert.equal(v, id)
        add(t, 'done')
        add(t, 'refunded', lastCost)
      } catch (e) {
        if (e?.outcome === 'cancelled') {
          // An attempt classified as cancelled ends the call with its own error.
          add(t, 'cancelled')
          return
        }
        if (!(e instanceof UpstreamUnavailableError)) throw e
        add(t, `gaveUp.${e.reason}`)
        // The breaker refused an admission (a first attempt, or a retry after its wait), unless
        // the error came straight from an attempt's decision, which admits nothing. A retry it
        // refused after its wait was paid for and never made: its tokens went back.
        if (e instanceof BreakerOpenError && !afterAttempt) {
          add(t, 'refused')
          add(t, 'refunded', lastCost)
        }
      }
    }

    const N = 3000
    const all = []
    for (let id = 0; id < N; id++) all.push(one(id))
    let settled = false
    const done = Promise.all(all).then(() => (settled = true))
    let rounds = 0
    while (!settled) {
      await turns(3)
      assert.ok(++rounds < 500, 'executions still running after 500 rounds')
      clock.advance(50)
      const w = wake
      wake = []
      for (const r of w) r()
    }
    await within(5_000, done, 'the executions')

    const s = breaker.snapshot()
    assert.equal(s.probesInFlight, 0)
    assert.equal(s.refusals, t.refused)
    const finished = (t.done ?? 0) + (t.cancelled ?? 0) + Object.keys(t).filter((k) => k.startsWith('gaveUp.')).reduce((a, k) => a + t[k], 0)
    assert.equal(finished, N)
    assert.equal(policy.quota.available, capacity - t.spent + t.refunded)
    // The script must have exercised what the books cover: several episodes, retries paid for,
    // an empty quota, and many successes (the run is deterministic: these are its figures).
    assert.ok(s.opens >= 2 && t.retries > 100 && t['gaveUp.quota_empty'] > 0 && t.done > 300, JSON.stringify({ s, t }))
  })
})

describe('stress: worker threads drive the addon at once', () => {
  it('gives every thread the results of the same script run alone', { timeout: 60_000 }, async () => {
    const WORKERS = 4
    const options = { rounds: 30, tasks: 6, calls: 40 }
    const repeats = 3
    const alone = scenario(holdoff, options)
    const workers = []
    const results = []
    for (let w = 0; w < WORKERS; w++) {
      const worker = new Worker(new URL('./stress-worker.mjs', import.meta.url), { workerData: { options, repeats } })
      workers.push(worker)
      results.push(
        new Promise((resolve, reject) => {
          worker.once('message', resolve)
          worker.once('error', reject)
          worker.once('exit', (code) => reject(new Error(`worker exited with ${code} before answering`)))
        }),
      )
    }
    let got
    try {
      got = await within(45_000, Promise.all(results), 'the workers')
    } finally {
      await Promise.all(workers.map((w) => w.terminate()))
    }
    const ids = new Set([alone.breakerId])
    const strip = ({ breakerId, ...rest }) => rest
    for (const runs of got) {
      assert.equal(runs.length, repeats)
      for (const r of runs) {
        assert.deepEqual(strip(r), strip(alone))
        assert.ok(!ids.has(r.breakerId), 'two breakers got the same id')
        ids.add(r.breakerId)
      }
    }
    // The script's own books balance too (the same identities as the shared test above).
    const { tally: t, snapshot: s, events, heard } = alone
    assert.equal(t.listenerErrors, undefined)
    assert.equal(t.admitted, t.counted + (t.stale ?? 0) + t.ignored)
    assert.equal(t.ignored, t.cancelled)
    assert.equal(t.attempts, t.admitted + t.refused)
    assert.equal(s.refusals, t.refused)
    assert.equal(s.probes, t.probes)
    assert.equal(s.staleAnswers, t.stale ?? 0)
    checkChain(events)
    sameMultiset(events, heard)
    assert.equal(alone.available, QUOTA.capacity - t.spent + t.refunded)
    assert.ok(s.opens >= 2 && t.stale > 0 && t.doubleRecord > 0, JSON.stringify({ s, t }))
  })
})
