// policy.execute / executeResponse / fetch and sleep: retries on the core's budget, cancellation,
// timers. Nothing sleeps for real: waits go through an injected sleep that moves a ManualClock,
// or through node:test's mocked timers.
import { describe, it, mock } from 'node:test'
import assert from 'node:assert/strict'
import { createServer } from 'node:http'
import {
  BreakerOpenError,
  GiveUpError,
  MAX_TIMER_MS,
  ManualClock,
  Policy,
  sleep,
} from 'holdoff'

function setup(options = {}) {
  const clock = new ManualClock()
  const waits = []
  const policy = new Policy({ clock, ...options })
  const fakeSleep = async (ms, signal) => {
    assert.ok(ms >= 0 && Number.isFinite(ms), `a wait must be finite and non-negative, got ${ms}`)
    waits.push(ms)
    signal?.throwIfAborted()
    clock.advance(ms)
  }
  return { clock, policy, waits, sleep: fakeSleep }
}

async function rejectsWith(promise, check) {
  let err
  try {
    await promise
  } catch (e) {
    err = e
  }
  assert.ok(err !== undefined, 'expected a rejection')
  check(err)
  return err
}

describe('policy.execute', () => {
  it('returns a resolved value after one attempt and releases its call', async () => {
    const { policy, waits, sleep } = setup()
    let calls = 0
    const v = await policy.execute(async (signal) => {
      calls++
      assert.equal(signal, undefined)
      return 'ok'
    }, { sleep })
    assert.equal(v, 'ok')
    assert.equal(calls, 1)
    assert.deepEqual(waits, [])
    assert.equal(policy._inFlight(), 0)
  })

  it('retries failures on the counted backoff, then succeeds', async () => {
    const { policy, waits, sleep, clock } = setup({ breaker: { trip: { threshold: 100 } } })
    let calls = 0
    const v = await policy.execute(async () => {
      if (++calls < 4) throw new Error(`down ${calls}`)
      return clock.now()
    }, { sleep })
    assert.deepEqual(waits, [500, 1000, 2000])
    assert.equal(v, 3500)
    assert.equal(policy._inFlight(), 0)
  })

  it('gives up with GiveUpError(attempts_exhausted) carrying the last error', async () => {
    const { policy, waits, sleep } = setup({ breaker: { trip: { threshold: 100 } }, budget: { maxRetries: 2 } })
    const err = await rejectsWith(
      policy.execute(async () => {
        throw new Error('still down')
      }, { sleep }),
      (e) => assert.ok(e instanceof GiveUpError),
    )
    assert.equal(err.code, 'give_up')
    assert.equal(err.reason, 'attempts_exhausted')
    assert.equal(err.attempts, 3)
    assert.equal(err.cause.message, 'still down')
    assert.deepEqual(waits, [500, 1000])
    assert.equal(policy._inFlight(), 0)
  })

  it('waits a Retry-After as given and gives up when it no longer fits the budget', async () => {
    const { policy, waits, sleep } = setup({ budget: { maxRateLimitDurationMs: 600_000, retryAfterCapMs: 300_000 } })
    const err = await rejectsWith(
      policy.execute(async () => {
        throw Object.assign(new Error('429'), { retryAfterMs: 250_000 })
      }, { sleep, classifyError: (e) => ({ retryLaterMs: e.retryAfterMs }) }),
      (e) => assert.ok(e instanceof GiveUpError),
    )
    // The first retry-later opens the breaker for the same 250 s; the second wait (at 250 s)
    // would end at 500 s, inside the 600 s episode; the third would not fit.
    assert.deepEqual(waits, [250_000, 250_000])
    assert.equal(err.reason, 'retry_after_exceeds_remaining')
    assert.equal(err.serverDelayMs, 250_000)
  })

  it('a first attempt against an open breaker fails fast with BreakerOpenError', async () => {
    const { policy, sleep, clock } = setup()
    const b = policy.breaker
    for (let i = 0; i < 5; i++) b.record(b.allow(), 'failure')
    clock.advance(10_000)
    let called = false
    const err = await rejectsWith(
      policy.execute(async () => {
        called = true
      }, { sleep }),
      (e) => assert.ok(e instanceof BreakerOpenError && e instanceof GiveUpError),
    )
    assert.equal(called, false)
    assert.equal(err.code, 'breaker_open')
    assert.equal(err.reason, 'breaker_open')
    assert.equal(err.retryAfterMs, 20_000)
    assert.equal(policy._inFlight(), 0)
  })

  it('a retry waits for the breaker when it opens for longer than the backoff', async () => {
    const { policy, waits, sleep } = setup({ breaker: { trip: { threshold: 2 } } })
    let calls = 0
    const v = await policy.execute(async () => {
      if (++calls < 3) throw new Error('down')
      return calls
    }, { sleep })
    // Failure 1: backoff 500. Failure 2 trips the breaker (30 s): the retry waits for it.
    assert.deepEqual(waits, [500, 30_000])
    assert.equal(v, 3)
  })

  it('a resolved final answer (classified answer) is returned, not thrown', async () => {
    const { policy, sleep } = setup()
    const v = await policy.execute(async () => ({ status: 404 }), { sleep, classifyResult: (r) => (r.status === 404 ? 'answer' : 'success') })
    assert.deepEqual(v, { status: 404 })
  })

  it('an abort while waiting rejects with the signal reason and releases the call', async () => {
    const { policy } = setup({ breaker: { trip: { threshold: 100 } } })
    const ac = new AbortController()
    let calls = 0
    const err = await rejectsWith(
      policy.execute(async () => {
        calls++
        throw new Error('down')
      }, {
        signal: ac.signal,
        sleep: async (ms, signal) => {
          ac.abort(new Error('stop'))
          signal.throwIfAborted()
        },
      }),
      () => {},
    )
    assert.equal(err.message, 'stop')
    assert.equal(calls, 1)
    assert.equal(policy._inFlight(), 0)
  })

  it('an aborted attempt is recorded as cancelled: the probe slot is free, its window spent', async () => {
    const { policy, clock, sleep } = setup()
    const b = policy.breaker
    for (let i = 0; i < 5; i++) b.record(b.allow(), 'failure')
    clock.advance(30_000)
    const ac = new AbortController()
    let probing
    const err = await rejectsWith(
      policy.execute((signal) => {
        probing = b.snapshot().probesInFlight
        return new Promise((_, reject) => {
          signal.addEventListener('abort', () => reject(signal.reason))
          ac.abort()
        })
      }, { signal: ac.signal, sleep }),
      () => {},
    )
    assert.equal(err.name, 'AbortError')
    assert.equal(probing, 1)
    const s = b.snapshot()
    assert.equal(s.probesInFlight, 0, 'the cancelled probe gave its slot back')
    // It may have reached the upstream: the next probe waits for the next interval.
    assert.equal(s.probeReady, false)
    assert.equal(s.retryAfterMs, 30_000)
    assert.equal(s.state, 'half_open')
    assert.equal(policy._inFlight(), 0)
  })

  it('a storm of callers cancelling after 100 ms sends the upstream one probe per interval', async () => {
    // Trip after 1 failure, 1 s between probes, an upstream that never answers, no retries.
    // Twenty callers at a time, one arriving every 5 ms for 6 s, each aborting its own call
    // after 100 ms of manual-clock time: a probe's window stays spent when it is cancelled, so
    // the upstream sees the failure that tripped the breaker and then one probe a second
    // (1000, 2000, ..., 6000 ms), 7 calls in all, not one per caller.
    const clock = new ManualClock()
    const policy = new Policy({
      clock,
      breaker: { trip: { threshold: 1 }, openInterval: { initialMs: 1000, multiplier: 1 } },
      budget: { maxRetries: 0 },
    })
    let reached = 0
    const upstream = (signal) => {
      reached++
      if (clock.now() === 0) return Promise.reject(new Error('down'))
      return new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }))
    }
    const ARRIVAL_MS = 5
    const GIVE_UP_MS = 100
    const outcomes = { refused: 0, cancelled: 0, gaveUp: 0, other: [] }
    const pending = []
    const aborts = [] // [deadline, controller], in arrival order
    const settle = (p) =>
      p.then(
        (v) => outcomes.other.push(v),
        (e) => {
          if (e instanceof BreakerOpenError) outcomes.refused++
          else if (e?.name === 'AbortError') outcomes.cancelled++
          else if (e instanceof GiveUpError) outcomes.gaveUp++
          else outcomes.other.push(e)
        },
      )
    const turn = () => new Promise(setImmediate)
    let maxConcurrent = 0
    for (let t = 0; t <= 6000; t += ARRIVAL_MS) {
      clock.set(t)
      while (aborts.length > 0 && aborts[0][0] <= t) aborts.shift()[1].abort()
      await turn()
      const ac = new AbortController()
      aborts.push([t + GIVE_UP_MS, ac])
      maxConcurrent = Math.max(maxConcurrent, aborts.length)
      pending.push(settle(policy.execute(upstream, { signal: ac.signal, sleep: () => assert.fail('no caller retries') })))
      await turn()
    }
    for (const [, ac] of aborts) ac.abort()
    await Promise.all(pending)
    assert.equal(maxConcurrent, GIVE_UP_MS / ARRIVAL_MS, 'twenty callers at a time')
    assert.deepEqual(outcomes.other, [])
    assert.equal(pending.length, 1201)
    assert.equal(reached, 7, 'the tripping failure, then one probe per interval')
    assert.equal(outcomes.gaveUp, 1)
    assert.equal(outcomes.cancelled, 6)
    assert.equal(outcomes.refused, 1201 - 7)
    const s = policy.breaker.snapshot()
    assert.equal(s.probes, 6)
    assert.equal(s.probesInFlight, 0)
    assert.equal(s.opens, 1)
    assert.equal(policy._inFlight(), 0)
  })

  it('an already aborted signal never calls the function', async () => {
    const { policy } = setup()
    let called = false
    await rejectsWith(
      policy.execute(() => {
        called = true
      }, { signal: AbortSignal.abort() }),
      (e) => assert.equal(e.name, 'AbortError'),
    )
    assert.equal(called, false)
    assert.equal(policy._inFlight(), 0)
  })

  it('rejects bad arguments with TypeError', async () => {
    const { policy } = setup()
    await rejectsWith(policy.execute(42), (e) => assert.equal(e.code, 'invalid_input'))
    await rejectsWith(policy.execute(async () => 1, { sleep: 5 }), (e) => assert.ok(e instanceof TypeError))
    await rejectsWith(policy.execute(async () => 1, { signal: {} }), (e) => assert.equal(e.field, 'signal'))
    await rejectsWith(policy.execute(async () => 1, { classifyResult: () => 'great' }), (e) => assert.equal(e.field, 'outcome'))
    assert.equal(policy._inFlight(), 0)
  })

  it('concurrent executions keep their own calls', async () => {
    const { policy, sleep } = setup({ breaker: { trip: { threshold: 100 } } })
    const fails = { a: 2, b: 1 }
    const run = (k) =>
      policy.execute(async () => {
        await null
        if (fails[k]-- > 0) throw new Error(k)
        return k
      }, { sleep })
    assert.deepEqual(await Promise.all([run('a'), run('b'), run('a')]), ['a', 'b', 'a'])
    assert.equal(policy._inFlight(), 0)
  })

  it("delivers the breaker's state changes to its listeners", async () => {
    const { policy, sleep } = setup({ breaker: { trip: { threshold: 1 } }, budget: { maxRetries: 0 } })
    const seen = []
    policy.breaker.on('stateChange', (e) => seen.push(e.reason))
    await rejectsWith(policy.execute(async () => Promise.reject(new Error('x')), { sleep }), () => {})
    assert.deepEqual(seen, ['tripped'])
  })
})

describe('policy.executeResponse and fetch', () => {
  it('classifies responses: Retry-After waits, a 404 is returned', async () => {
    const { policy, waits, sleep } = setup()
    const responses = [
      { status: 503, headers: { 'retry-after': '2' } },
      { status: 429, headers: new Headers({ 'retry-after': '3' }) },
      { status: 404 },
    ]
    const r = await policy.executeResponse(async () => responses.shift(), { sleep })
    assert.equal(r.status, 404)
    assert.deepEqual(waits, [2000, 3000])
  })

  it('a broken status (600) is retried as a failure; a value that is not a status is refused', async () => {
    const { policy, waits, sleep } = setup({ breaker: { trip: { threshold: 100 } } })
    const responses = [{ status: 600 }, { status: 999 }, { status: 200 }]
    assert.equal((await policy.executeResponse(async () => responses.shift(), { sleep })).status, 200)
    assert.deepEqual(waits, [500, 1000])
    for (const status of [-1, 1000, 70_000]) {
      await rejectsWith(policy.executeResponse(async () => ({ status }), { sleep }), (e) => {
        assert.ok(e instanceof RangeError)
        assert.equal(e.code, 'invalid_input')
        assert.equal(e.field, 'status')
      })
    }
    assert.equal(policy._inFlight(), 0)
    assert.equal(policy.breaker.snapshot().failures, 0, 'recorded as cancelled, not as failures')
  })

  it('refuses a non-response value', async () => {
    const { policy, sleep } = setup()
    await rejectsWith(policy.executeResponse(async () => 'nope', { sleep }), (e) => assert.equal(e.field, 'response'))
    assert.equal(policy._inFlight(), 0)
  })

  it('fetch retries a local server that answers 503 with Retry-After', async () => {
    let hits = 0
    const server = createServer((req, res) => {
      hits++
      if (hits === 1) {
        res.writeHead(503, { 'retry-after': '1' })
        res.end('busy')
      } else {
        res.end('hello')
      }
    })
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
    try {
      const { policy, waits, sleep } = setup()
      const res = await policy.fetch(`http://127.0.0.1:${server.address().port}/`, undefined, { sleep })
      assert.equal(res.status, 200)
      assert.equal(await res.text(), 'hello')
      assert.deepEqual(waits, [1000])
      assert.equal(hits, 2)
    } finally {
      server.close()
    }
  })
})

describe('sleep', () => {
  function fakeTimers() {
    const calls = []
    return {
      calls,
      setTimeout(cb, ms) {
        calls.push(ms)
        queueMicrotask(cb)
        return calls.length
      },
      clearTimeout() {},
    }
  }

  it('chains timers past 2^31-1 ms and never passes a negative delay', async () => {
    const t = fakeTimers()
    await sleep(2 ** 31 + 5, undefined, t)
    assert.deepEqual(t.calls, [MAX_TIMER_MS, 6])
    await sleep(3 * MAX_TIMER_MS, undefined, t)
    assert.deepEqual(t.calls.slice(2), [MAX_TIMER_MS, MAX_TIMER_MS, MAX_TIMER_MS])
    await sleep(0, undefined, t)
    assert.equal(t.calls.length, 5, 'a zero wait sets no timer')
    assert.ok(t.calls.every((ms) => ms > 0 && ms <= MAX_TIMER_MS))
  })

  it('refuses what is not a duration', async () => {
    for (const [v, Ctor] of [[-1, RangeError], [NaN, RangeError], [Infinity, RangeError], ['5', TypeError], [5n, TypeError], [null, TypeError], [undefined, TypeError]]) {
      assert.throws(() => sleep(v), (e) => e instanceof Ctor && e.code === 'invalid_input' && e.field === 'ms')
    }
  })

  it('uses the global timers by default (mocked here) and rejects on abort', async () => {
    mock.timers.enable({ apis: ['setTimeout'] })
    try {
      let done = false
      const p = sleep(MAX_TIMER_MS + 1000).then(() => (done = true))
      mock.timers.tick(MAX_TIMER_MS)
      await null
      assert.equal(done, false)
      mock.timers.tick(1000)
      await p
      assert.equal(done, true)
      const ac = new AbortController()
      const q = sleep(5000, ac.signal)
      ac.abort(new Error('bye'))
      await rejectsWith(q, (e) => assert.equal(e.message, 'bye'))
    } finally {
      mock.timers.reset()
    }
  })

  it('execute with the default sleep waits on the (mocked) timers', async () => {
    mock.timers.enable({ apis: ['setTimeout'] })
    try {
      const policy = new Policy({ clock: new ManualClock(), breaker: { trip: { threshold: 100 } } })
      let calls = 0
      const p = policy.execute(async () => {
        if (++calls === 1) throw new Error('once')
        return calls
      })
      for (let i = 0; i < 5 && calls < 2; i++) {
        await new Promise((r) => setImmediate(r))
        mock.timers.tick(500)
      }
      assert.equal(await p, 2)
    } finally {
      mock.timers.reset()
    }
  })
})
