// The retry helpers (policy.execute, executeResponse, fetch): options, hooks, the default
// classification, what rejects how, and each attempt's own signal. Time is a ManualClock with
// ManualTimers behind the `sleep` option (waits and attempt limits alike), or node:test's
// mocked timers for the default sleep; nothing sleeps for real.
import { describe, it, mock } from 'node:test'
import assert from 'node:assert/strict'
import { createServer } from 'node:http'
import {
  BreakerOpenError,
  GiveUpError,
  MAX_TIMER_MS,
  ManualClock,
  Policy,
  RetryLaterError,
  UpstreamUnavailableError,
  sleep,
} from 'holdoff'
import { ManualTimers, turn } from './manual-timers.mjs'

/** A policy on a manual clock, and options that record the hooks. */
function setup(options = {}) {
  const clock = new ManualClock()
  const timers = new ManualTimers(clock)
  const policy = new Policy({ clock, ...options })
  const waits = []
  const attempts = []
  const opts = (more = {}) => ({
    sleep: timers.sleep,
    onRetry: (w) => waits.push(w),
    onAttempt: (a) => attempts.push(a),
    ...more,
  })
  return { clock, timers, policy, waits, attempts, opts }
}

/** A transport error as Node's net module raises it. */
function netError(code = 'ECONNREFUSED') {
  return Object.assign(new Error(`connect ${code} 127.0.0.1:9`), { code, errno: -111, syscall: 'connect' })
}

async function rejects(promise) {
  try {
    await promise
  } catch (e) {
    return e
  }
  assert.fail('expected a rejection')
}

describe('policy.execute', () => {
  it('resolves to the value; the attempt gets a signal of its own; no timer is left', async () => {
    const { policy, timers, opts, attempts } = setup()
    const caller = new AbortController()
    let seen
    const v = await timers.run(policy.execute(async (signal) => {
      seen = signal
      return 'ok'
    }, opts({ signal: caller.signal })))
    assert.equal(v, 'ok')
    assert.ok(seen instanceof AbortSignal && seen !== caller.signal && !seen.aborted)
    assert.deepEqual(attempts, [{ attempt: 1, probe: false, outcome: 'success' }])
    assert.equal(timers.pending, 0, 'the attempt limit (the 60 s total) was cancelled')
  })

  it('retries network errors on the counted backoff, then succeeds', async () => {
    const { policy, clock, timers, waits, opts } = setup({ breaker: { trip: { threshold: 100 } } })
    let calls = 0
    const v = await timers.run(policy.execute(async () => {
      if (++calls < 4) throw netError()
      return clock.now()
    }, opts()))
    assert.equal(v, 3500)
    assert.deepEqual(waits, [
      { attempt: 1, delayMs: 500, source: 'backoff', capped: false, serverDelayMs: null },
      { attempt: 2, delayMs: 1000, source: 'backoff', capped: false, serverDelayMs: null },
      { attempt: 3, delayMs: 2000, source: 'backoff', capped: false, serverDelayMs: null },
    ])
  })

  it('gives up with GiveUpError, an UpstreamUnavailableError carrying the last error', async () => {
    const { policy, timers, opts } = setup({ breaker: { trip: { threshold: 100 } }, budget: { maxRetries: 2 } })
    const errors = []
    const e = await rejects(timers.run(policy.execute(async () => {
      throw errors[errors.push(netError('ECONNRESET')) - 1]
    }, opts())))
    assert.ok(e instanceof GiveUpError && e instanceof UpstreamUnavailableError && !(e instanceof BreakerOpenError))
    assert.equal(e.code, 'give_up')
    assert.equal(e.reason, 'attempts_exhausted')
    assert.equal(e.attempts, 3)
    assert.equal(e.cause, errors[2])
    assert.equal(e.retryAfterMs, null)
    assert.equal(e.serverDelayMs, null)
    assert.equal(e.capped, false)
    assert.ok(!('result' in e) && !('response' in e))
  })

  it('a RetryLaterError waits its delay; above the cap it waits the cap and says so', async () => {
    // The breaker opens for the server's delay too, up to its own guard: 10 s, as the cap.
    const { policy, timers, waits, opts } = setup({ breaker: { maxRetryLaterMs: 10_000 }, budget: { retryAfterCapMs: 10_000 } })
    let calls = 0
    const v = await timers.run(policy.execute(async () => {
      calls++
      if (calls === 1) throw new RetryLaterError(2000)
      if (calls === 2) throw new RetryLaterError(25_000)
      return calls
    }, opts()))
    assert.equal(v, 3)
    assert.deepEqual(waits, [
      { attempt: 1, delayMs: 2000, source: 'retry_after', capped: false, serverDelayMs: 2000 },
      { attempt: 2, delayMs: 10_000, source: 'retry_after', capped: true, serverDelayMs: 25_000 },
    ])
    assert.throws(() => new RetryLaterError(-1), (err) => err instanceof RangeError && err.field === 'retryLaterMs')
    assert.throws(() => new RetryLaterError('5'), (err) => err instanceof TypeError && err.code === 'invalid_input')
  })

  it('a first attempt against an open breaker rejects with BreakerOpenError, nothing attached', async () => {
    const { policy, clock, timers, opts } = setup()
    const b = policy.breaker
    for (let i = 0; i < 5; i++) b.record(b.allow(), 'failure')
    clock.advance(10_000)
    let called = false
    const e = await rejects(timers.run(policy.execute(async () => {
      called = true
    }, opts())))
    assert.equal(called, false)
    assert.ok(e instanceof BreakerOpenError && e instanceof UpstreamUnavailableError && !(e instanceof GiveUpError))
    assert.equal(e.code, 'breaker_open')
    assert.equal(e.reason, 'breaker_open')
    assert.equal(e.attempts, 0)
    assert.equal(e.retryAfterMs, 20_000)
    assert.equal(e.state, 'open')
    assert.ok(!('cause' in e) && !('result' in e))
  })

  it('a retry the breaker keeps waiting past the budget rejects with BreakerOpenError and the last error', async () => {
    const { policy, timers, opts } = setup({
      breaker: { trip: { threshold: 1 }, openInterval: { initialMs: 10_000, multiplier: 1 } },
      budget: { maxBackoffDurationMs: 5000 },
    })
    const err = netError()
    const e = await rejects(timers.run(policy.execute(async () => {
      throw err
    }, opts())))
    assert.ok(e instanceof BreakerOpenError)
    assert.equal(e.attempts, 1)
    assert.equal(e.retryAfterMs, 10_000)
    assert.equal(e.cause, err)
  })

  it('a programming error is rethrown at once, unretried, and moves nothing', async () => {
    // eslint-disable-next-line no-undef -- a ReferenceError is one of the programming errors
    for (const make of [() => null.x, () => undefinedName, () => { throw new Error('plain') }, () => { throw 'a string' }]) {
      const { policy, timers, opts, attempts, waits } = setup({ breaker: { trip: { threshold: 1 } }, quota: {} })
      let thrown
      const e = await rejects(timers.run(policy.execute(async () => {
        try {
          make()
        } catch (x) {
          thrown = x
          throw x
        }
      }, opts())))
      assert.equal(e, thrown)
      assert.deepEqual(attempts, [{ attempt: 1, probe: false, outcome: 'cancelled', error: thrown }])
      assert.deepEqual(waits, [])
      const s = policy.breaker.snapshot()
      assert.equal(s.state, 'closed')
      assert.equal(s.failures, 0)
      assert.equal(policy.quota.available, 500)
    }
  })

  it('an error classified as an answer is rethrown unchanged after one attempt', async () => {
    class NotFound extends Error {}
    const { policy, timers, opts } = setup()
    const err = new NotFound('no such manifest')
    const e = await rejects(timers.run(policy.execute(async () => {
      throw err
    }, opts({ classify: (x) => (x instanceof NotFound ? 'answer' : undefined) }))))
    assert.equal(e, err)
    assert.equal(policy.breaker.snapshot().failures, 0)
  })

  it('classify overrides the default table; undefined falls back to it', async () => {
    class Throttled extends Error {}
    const { policy, timers, opts, attempts } = setup({ breaker: { trip: { threshold: 100 }, openInterval: { initialMs: 100, multiplier: 1 } } })
    let calls = 0
    const v = await timers.run(policy.execute(async () => {
      calls++
      if (calls === 1) throw new Throttled('slow down')
      if (calls === 2) throw netError('EPIPE')
      if (calls === 3) throw new TypeError('retried as a failure by classify')
      return 'done'
    }, opts({
      classify: (e) => (e instanceof Throttled ? { retryLaterMs: 3000 } : e instanceof TypeError ? 'failure' : undefined),
    })))
    assert.equal(v, 'done')
    assert.deepEqual(attempts.map((a) => a.outcome), ['retry_later', 'failure', 'failure', 'success'])
  })

  it('classifyResult: a value called a failure is retried, then attached as result', async () => {
    const { policy, timers, opts } = setup({ budget: { maxRetries: 1 } })
    const values = []
    const e = await rejects(timers.run(policy.execute(async () => values[values.push({ ok: false }) - 1], opts({
      classifyResult: (v) => (v.ok ? 'success' : 'failure'),
    }))))
    assert.ok(e instanceof GiveUpError)
    assert.equal(e.result, values[1])
    assert.ok(!('cause' in e))
    const { policy: p2, timers: t2, opts: o2 } = setup()
    const answer = { status: 404 }
    assert.equal(await t2.run(p2.execute(async () => answer, o2({ classifyResult: () => 'answer' }))), answer)
  })

  it('a classifier that throws or answers nonsense rejects and frees the probe', async () => {
    const { policy, clock, timers, opts } = setup({ breaker: { trip: { threshold: 1 }, openInterval: { initialMs: 1000 } } })
    const b = policy.breaker
    b.record(b.allow(), 'failure')
    clock.advance(1000)
    const e = await rejects(timers.run(policy.execute(async () => 1, opts({ classifyResult: () => 'great' }))))
    assert.ok(e instanceof TypeError)
    assert.equal(e.field, 'outcome')
    assert.equal(b.snapshot().probesInFlight, 0, 'the probe was recorded as cancelled')
    clock.advance(1000)
    const boom = new Error('classifier bug')
    const e2 = await rejects(timers.run(policy.execute(async () => Promise.reject(netError()), opts({
      classify: () => {
        throw boom
      },
    }))))
    assert.equal(e2, boom)
    assert.equal(b.snapshot().probesInFlight, 0)
  })
})

describe("the helper's own programming errors", () => {
  // Each attempt runs past its 1 s limit (the clock moves, the limit's timer has not fired) and
  // then the helper fails reporting it. A cancel there would be recorded as a timeout (breaker
  // opened, timeout tokens): the helper reports a bug, which moves nothing, and rethrows.
  const cases = [
    ['classify throws', 'execute', () => Promise.reject(netError()), { classify: () => { throw new Error('classify bug') } }, (e) => e.message === 'classify bug'],
    ['classify answers nonsense', 'execute', () => Promise.reject(netError()), { classify: () => 'great' }, (e) => e instanceof TypeError && e.field === 'outcome'],
    ['classify answers a negative delay', 'execute', () => Promise.reject(netError()), { classify: () => ({ retryLaterMs: -1 }) }, (e) => e instanceof RangeError],
    ['classifyResult throws', 'execute', async () => 1, { classifyResult: () => { throw new Error('classifyResult bug') } }, (e) => e.message === 'classifyResult bug'],
    ['classifyResult answers nonsense', 'execute', async () => 1, { classifyResult: () => 42 }, (e) => e instanceof TypeError && e.field === 'outcome'],
    ['a status that is not a number', 'executeResponse', async () => ({ status: '200' }), {}, (e) => e instanceof TypeError && e.field === 'response'],
    ['headers that are not headers', 'executeResponse', async () => ({ status: 503, headers: 5 }), {}, (e) => e instanceof TypeError && e.field === 'headers'],
  ]
  for (const [name, helper, op, more, check] of cases) {
    it(`${name}: rejects with that error, onAttempt sees 'cancelled', the breaker and quota do not move`, async () => {
      const { policy, clock, timers, opts, attempts, waits } = setup({ breaker: { trip: { threshold: 1 } }, quota: {} })
      const e = await rejects(timers.run(policy[helper](async () => {
        clock.advance(2000)
        return op()
      }, opts({ attemptTimeoutMs: 1000, ...more }))))
      assert.ok(check(e), `unexpected error: ${e?.stack ?? e}`)
      assert.equal(attempts.length, 1, 'onAttempt was called for the attempt')
      assert.equal(attempts[0].outcome, 'cancelled')
      assert.deepEqual(waits, [])
      const s = policy.breaker.snapshot()
      assert.equal(s.state, 'closed')
      assert.equal(s.failures, 0)
      assert.equal(s.opens, 0)
      assert.equal(policy.quota.available, 500)
      assert.equal(timers.pending, 0)
    })
  }

  it('a hook that throws while the helper fails does not replace its error', async () => {
    const { policy, timers } = setup()
    const bug = new Error('classify bug')
    let called = 0
    const e = await rejects(timers.run(policy.execute(async () => Promise.reject(netError()), {
      sleep: timers.sleep,
      classify: () => {
        throw bug
      },
      onAttempt: () => {
        called++
        throw new Error('hook')
      },
    })))
    assert.equal(e, bug)
    assert.equal(called, 1)
  })

  it('onRetry or the sleep throwing during a wait: the retry is not made and its tokens go back', async () => {
    for (const [name, more] of [
      ['onRetry', { onRetry: () => { throw new Error('boom') } }],
      ['sleep', { sleep: () => Promise.reject(new Error('boom')), totalTimeoutMs: null }],
    ]) {
      const { policy, timers, opts } = setup({ breaker: { trip: { threshold: 100 } }, quota: {} })
      let calls = 0
      const e = await rejects(timers.run(policy.execute(async () => {
        calls++
        throw netError()
      }, opts(more))))
      assert.equal(e.message, 'boom', name)
      assert.equal(calls, 1, name)
      assert.equal(policy.quota.available, 500, `${name}: the 5 tokens of the retry went back`)
      assert.equal(policy.breaker.snapshot().failures, 1, `${name}: the attempt was recorded`)
    }
  })
})

describe('a broken sleep behind the attempt limit', () => {
  it('rejecting: the attempt is abandoned and its signal aborted; the call rejects with the error, moving nothing', async () => {
    const { policy, clock, attempts } = setup({ breaker: { trip: { threshold: 1 } }, quota: {} })
    const boom = new Error('timer broke')
    let seen
    const e = await rejects(policy.execute((signal) => {
      seen = signal
      return new Promise(() => {}) // hangs, ignoring its signal
    }, {
      attemptTimeoutMs: 1000,
      onAttempt: (a) => attempts.push(a),
      // The timer fails after the clock passed the limit.
      sleep: async () => {
        await null
        clock.advance(2000)
        throw boom
      },
    }))
    assert.equal(e, boom)
    assert.ok(seen.aborted, 'the abandoned attempt\'s signal is aborted')
    assert.equal(seen.reason, boom)
    assert.deepEqual(attempts, [{ attempt: 1, probe: false, outcome: 'cancelled', error: boom }])
    const s = policy.breaker.snapshot()
    assert.equal(s.state, 'closed')
    assert.equal(s.opens, 0)
    assert.equal(policy.quota.available, 500)
  })

  it('throwing at once: the operation is not called', async () => {
    const { policy, attempts } = setup({ breaker: { trip: { threshold: 1 } } })
    const boom = new Error('timer broke')
    let called = false
    const e = await rejects(policy.execute(() => {
      called = true
    }, {
      onAttempt: (a) => attempts.push(a),
      sleep: () => {
        throw boom
      },
    }))
    assert.equal(e, boom)
    assert.equal(called, false)
    assert.deepEqual(attempts.map((a) => a.outcome), ['cancelled'])
    assert.equal(policy.breaker.snapshot().state, 'closed')
  })

  it('a sleep that does not wait does not starve the event loop', { timeout: 10_000 }, async () => {
    // On a clock that never moves, a sleep that returns at once makes every attempt time out and
    // the breaker's wait never end. The helper must still give the event loop its turns, so the
    // caller's own (real) timer can cancel the call; a bound on the sleeps ends a loop that spins.
    const policy = new Policy({ clock: new ManualClock() })
    const ac = new AbortController()
    const reason = new Error('enough')
    let sleeps = 0
    const e = await rejects(policy.execute(async () => {
      throw netError()
    }, {
      signal: ac.signal,
      sleep: () => {
        if (++sleeps === 1) setTimeout(() => ac.abort(reason), 5)
        if (sleeps > 100_000) throw new Error('the retry loop spun without yielding to the event loop')
      },
    }))
    assert.equal(e, reason)
    assert.ok(sleeps >= 2, `the call went on to a wait (${sleeps} sleeps)`)
  })
})

describe('the default classification', () => {
  const fetchFailed = (cause) => new TypeError('fetch failed', cause === undefined ? undefined : { cause })
  const undici = (code) => Object.assign(new Error(code), { code })
  const rows = [
    ['ECONNREFUSED', netError('ECONNREFUSED'), 'failure'],
    ['ECONNRESET', netError('ECONNRESET'), 'failure'],
    ['ENOTFOUND', netError('ENOTFOUND'), 'failure'],
    ['EAI_AGAIN', netError('EAI_AGAIN'), 'failure'],
    ['EPIPE', netError('EPIPE'), 'failure'],
    ['EHOSTUNREACH', netError('EHOSTUNREACH'), 'failure'],
    ['ENETUNREACH', netError('ENETUNREACH'), 'failure'],
    ['ECONNABORTED', netError('ECONNABORTED'), 'failure'],
    ['UND_ERR_SOCKET', undici('UND_ERR_SOCKET'), 'failure'],
    ['an HTTP parser error', undici('HPE_INVALID_CONSTANT'), 'failure'],
    ['fetch failed (ECONNREFUSED)', fetchFailed(netError()), 'failure'],
    ['fetch failed (no cause)', fetchFailed(), 'failure'],
    ['ETIMEDOUT', netError('ETIMEDOUT'), 'timeout'],
    ['UND_ERR_CONNECT_TIMEOUT', undici('UND_ERR_CONNECT_TIMEOUT'), 'timeout'],
    ['UND_ERR_HEADERS_TIMEOUT', undici('UND_ERR_HEADERS_TIMEOUT'), 'timeout'],
    ['UND_ERR_BODY_TIMEOUT', undici('UND_ERR_BODY_TIMEOUT'), 'timeout'],
    ['fetch failed (UND_ERR_HEADERS_TIMEOUT)', fetchFailed(undici('UND_ERR_HEADERS_TIMEOUT')), 'timeout'],
    ['fetch failed (wrapped twice, a timeout)', fetchFailed(fetchFailed(undici('UND_ERR_HEADERS_TIMEOUT'))), 'timeout'],
    ['fetch failed (its own cause)', (() => {
      const e = fetchFailed()
      e.cause = e
      return e
    })(), 'failure'],
    ['fetch failed (a cycle of two)', (() => {
      const a = fetchFailed()
      const b = fetchFailed(a)
      a.cause = b
      return a
    })(), 'failure'],
    ['fetch failed (wrapped deeper than the bound, a timeout)', Array.from({ length: 20 }).reduce((e) => fetchFailed(e), undici('UND_ERR_HEADERS_TIMEOUT')), 'failure'],
    ['a TimeoutError DOMException', new DOMException('late', 'TimeoutError'), 'timeout'],
    ['RetryLaterError', new RetryLaterError(1500), 'retry_later'],
    ['TypeError', new TypeError('x is not a function'), 'bug'],
    ['ReferenceError', new ReferenceError('x is not defined'), 'bug'],
    ['a plain Error', new Error('something'), 'bug'],
    ['a Node argument error', Object.assign(new TypeError('bad arg'), { code: 'ERR_INVALID_ARG_TYPE' }), 'bug'],
    ['undici misuse', undici('UND_ERR_INVALID_ARG'), 'bug'],
    ['an AbortError not from the caller', new DOMException('aborted', 'AbortError'), 'bug'],
    ['a thrown string', 'oops', 'bug'],
  ]
  for (const [name, error, want] of rows) {
    it(`${name}: ${want}`, async () => {
      const { policy, timers, opts, attempts } = setup({ budget: { maxRetries: 0 } })
      const e = await rejects(timers.run(policy.execute(async () => {
        throw error
      }, opts())))
      const recorded = attempts[0].outcome
      if (want === 'bug') {
        assert.equal(e, error, 'a programming error is rethrown unchanged')
        assert.equal(recorded, 'cancelled')
      } else {
        assert.ok(e instanceof GiveUpError, `expected a give-up, got ${e}`)
        assert.equal(e.cause, error)
        assert.equal(recorded, want)
      }
    })
  }
})

describe('time limits', () => {
  it('attemptTimeoutMs cuts a hanging attempt: its signal aborts with a TimeoutError, recorded as a timeout and retried', async () => {
    const { policy, clock, timers, opts, attempts } = setup()
    const caller = new AbortController()
    const signals = []
    const v = await timers.run(policy.execute((signal) => {
      signals.push(signal)
      if (signals.length === 1) return new Promise(() => {}) // ignores its signal: not waited for
      return clock.now()
    }, opts({ attemptTimeoutMs: 2000, signal: caller.signal })))
    assert.equal(v, 2500)
    assert.ok(signals[0].aborted && signals[0].reason instanceof DOMException && signals[0].reason.name === 'TimeoutError')
    assert.ok(!signals[1].aborted && signals[1] !== signals[0])
    assert.equal(caller.signal.aborted, false, 'an attempt limit never aborts the caller')
    assert.deepEqual(attempts.map((a) => a.outcome), ['timeout', 'success'])
    assert.equal(attempts[0].error, signals[0].reason)
  })

  it('the total timeout (default 60 s) gives up a Retry-After it cannot wait; null lifts it', async () => {
    const slow = async () => {
      throw new RetryLaterError(120_000)
    }
    const a = setup()
    const e = await rejects(a.timers.run(a.policy.execute(slow, a.opts())))
    assert.ok(e instanceof GiveUpError)
    assert.equal(e.reason, 'total_timeout')
    assert.equal(e.retryAfterMs, 120_000)
    assert.equal(e.serverDelayMs, 120_000)
    const b = setup()
    let calls = 0
    const v = await b.timers.run(b.policy.execute(async () => {
      if (calls++ === 0) throw new RetryLaterError(120_000)
      return b.clock.now()
    }, b.opts({ totalTimeoutMs: null })))
    assert.equal(v, 120_000)
  })

  it('the total timeout bounds a hanging attempt', async () => {
    const { policy, timers, opts } = setup()
    const e = await rejects(timers.run(policy.execute((signal) => new Promise((_, reject) => {
      signal.addEventListener('abort', () => reject(signal.reason))
    }), opts({ totalTimeoutMs: 5000 }))))
    assert.ok(e instanceof GiveUpError)
    assert.equal(e.reason, 'total_timeout')
    assert.equal(e.attempts, 1)
    assert.equal(e.cause.name, 'TimeoutError')
  })

  it('refuses limits the core refuses, naming the field', async () => {
    const { policy, opts } = setup()
    for (const [key, field] of [['attemptTimeoutMs', 'execute.attempt_timeout'], ['totalTimeoutMs', 'execute.total_timeout']]) {
      for (const bad of [0, -1, NaN, Infinity]) {
        const e = await rejects(policy.execute(async () => 1, opts({ [key]: bad })))
        assert.ok(e instanceof RangeError, `${key}: ${bad}`)
        assert.equal(e.code, 'invalid_config')
        assert.equal(e.field, field)
        assert.match(e.message, new RegExp(key))
      }
      const e = await rejects(policy.execute(async () => 1, opts({ [key]: '5' })))
      assert.ok(e instanceof TypeError)
      assert.equal(e.field, field)
    }
  })

  it('the default sleep runs attempt limits and waits on the (mocked) global timers', async () => {
    mock.timers.enable({ apis: ['setTimeout'] })
    try {
      const policy = new Policy({ clock: new ManualClock(), breaker: { trip: { threshold: 100 } } })
      let calls = 0
      const signals = []
      const p = policy.execute((signal) => {
        signals.push(signal)
        if (++calls === 1) return new Promise(() => {})
        return calls
      }, { attemptTimeoutMs: 1000 })
      const settled = p.then(() => true)
      for (let i = 0; i < 10 && calls < 2; i++) {
        await turn()
        mock.timers.tick(500)
      }
      assert.equal(await settled, true)
      assert.equal(await p, 2)
      assert.equal(signals[0].reason.name, 'TimeoutError')
    } finally {
      mock.timers.reset()
    }
  })
})

describe('hooks', () => {
  it('onRetry sees each wait before it starts; onAttempt each attempt after it is recorded', async () => {
    const { policy, clock, timers, opts } = setup({ breaker: { trip: { threshold: 2 } } })
    const log = []
    let calls = 0
    const v = await timers.run(policy.execute(async () => {
      log.push(['attempt', clock.now()])
      if (++calls < 3) throw netError()
      return calls
    }, opts({
      onRetry: (w) => log.push(['wait', clock.now(), w]),
      onAttempt: (a) => log.push(['after', clock.now(), a.attempt, a.probe, a.outcome]),
    })))
    assert.equal(v, 3)
    // Failure 1: backoff 500. Failure 2 trips the breaker (30 s): the retry waits for its probe.
    assert.deepEqual(log.map((x) => x.map((y) => (y instanceof Error ? 'error' : y))), [
      ['attempt', 0],
      ['after', 0, 1, false, 'failure'],
      ['wait', 0, { attempt: 1, delayMs: 500, source: 'backoff', capped: false, serverDelayMs: null }],
      ['attempt', 500],
      ['after', 500, 2, false, 'failure'],
      ['wait', 500, { attempt: 2, delayMs: 30_000, source: 'breaker', capped: false, serverDelayMs: null }],
      ['attempt', 30_500],
      ['after', 30_500, 3, true, 'success'],
    ])
  })

  it('a hook that throws rejects the call with its error; no probe is held', async () => {
    const { policy, clock, timers, opts } = setup({ breaker: { trip: { threshold: 1 }, openInterval: { initialMs: 1000 } } })
    const b = policy.breaker
    b.record(b.allow(), 'failure')
    clock.advance(1000)
    const boom = new Error('hook failed')
    const e = await rejects(timers.run(policy.execute(async () => {
      throw netError()
    }, opts({
      onAttempt: () => {
        throw boom
      },
    }))))
    assert.equal(e, boom)
    const s = b.snapshot()
    assert.equal(s.probesInFlight, 0)
    assert.equal(s.state, 'open', 'the failed probe was recorded before the hook ran')
    assert.equal(timers.pending, 0)
  })
})

describe('cancellation', () => {
  it('an abort during a wait rejects with the caller\'s reason; nothing more runs', async () => {
    const { policy, timers, opts } = setup({ breaker: { trip: { threshold: 100 } } })
    const ac = new AbortController()
    const reason = new Error('stop')
    let calls = 0
    const e = await rejects(timers.run(policy.execute(async () => {
      calls++
      throw netError()
    }, opts({ signal: ac.signal, onRetry: () => ac.abort(reason) }))))
    assert.equal(e, reason)
    assert.equal(calls, 1)
    assert.equal(timers.pending, 0)
  })

  it('an abort during a probe: recorded as cancelled, the slot is free, its window spent', async () => {
    const { policy, clock, timers, opts, attempts } = setup()
    const b = policy.breaker
    for (let i = 0; i < 5; i++) b.record(b.allow(), 'failure')
    clock.advance(30_000)
    const ac = new AbortController()
    let probing
    const e = await rejects(timers.run(policy.execute((signal) => {
      probing = b.snapshot().probesInFlight
      return new Promise((_, reject) => {
        signal.addEventListener('abort', () => reject(signal.reason))
        ac.abort()
      })
    }, opts({ signal: ac.signal }))))
    assert.equal(e, ac.signal.reason)
    assert.equal(e.name, 'AbortError')
    assert.equal(probing, 1)
    assert.equal(attempts[0].outcome, 'cancelled')
    const s = b.snapshot()
    assert.equal(s.probesInFlight, 0, 'the cancelled probe gave its slot back')
    assert.equal(s.probeReady, false, 'it may have reached the upstream: the next probe waits')
    assert.equal(s.retryAfterMs, 30_000)
    assert.equal(s.state, 'half_open')
  })

  it("the caller's abort after the attempt's limit ends the call: no retry, no tokens, recorded as the timeout it was", async () => {
    for (const helper of ['execute', 'executeResponse']) {
      const { policy, clock, timers, opts, attempts, waits } = setup({ breaker: { trip: { threshold: 1 } }, quota: {} })
      const ac = new AbortController()
      const reason = new Error('Ctrl-C')
      let calls = 0
      const e = await rejects(timers.run(policy[helper]((signal) => new Promise((_, reject) => {
        calls++
        signal.addEventListener('abort', () => reject(signal.reason))
        clock.advance(1500) // past the limit; its timer has not fired yet
        ac.abort(reason)
      }), opts({ signal: ac.signal, attemptTimeoutMs: 1000 }))))
      assert.equal(e, reason, helper)
      assert.equal(calls, 1, helper)
      assert.deepEqual(waits, [], `${helper}: onRetry is not called`)
      assert.deepEqual(attempts.map((a) => a.outcome), ['timeout'], helper)
      assert.equal(policy.breaker.snapshot().state, 'open', `${helper}: the breaker counts the timeout`)
      assert.equal(policy.quota.available, 500, `${helper}: no retry was paid for`)
      assert.equal(timers.pending, 0)
    }
  })

  it('an abort between the attempt and its wait makes no wait and gives the tokens back', async () => {
    const { policy, timers, opts, waits } = setup({ breaker: { trip: { threshold: 100 } }, quota: {} })
    const ac = new AbortController()
    const reason = new Error('stop')
    const seen = []
    const e = await rejects(timers.run(policy.executeResponse(async () => ({ status: 503, headers: {}, body: { cancel: async () => seen.push('released') } }), opts({
      signal: ac.signal,
      onAttempt: (a) => {
        seen.push(a.outcome)
        ac.abort(reason)
      },
    }))))
    assert.equal(e, reason)
    assert.deepEqual(waits, [])
    assert.deepEqual(seen, ['failure', 'released'], 'the response not handed over is released')
    assert.equal(policy.quota.available, 500)
  })

  it('an operation that ignores the abort is not waited for', async () => {
    const { policy, timers, opts } = setup()
    const ac = new AbortController()
    const p = policy.execute(() => new Promise(() => {}), opts({ signal: ac.signal }))
    await turn()
    ac.abort(new Error('bye'))
    const e = await rejects(timers.run(p))
    assert.equal(e.message, 'bye')
  })

  it("the caller's deadline (a TimeoutError reason, as AbortSignal.timeout gives) is a timeout, not a cancellation", async () => {
    const { policy, timers, opts, attempts } = setup({ breaker: { trip: { threshold: 1 } } })
    const ac = new AbortController()
    const deadline = new DOMException('The operation was aborted due to timeout', 'TimeoutError')
    const e = await rejects(timers.run(policy.execute((signal) => new Promise((_, reject) => {
      signal.addEventListener('abort', () => reject(signal.reason))
      ac.abort(deadline)
    }), opts({ signal: ac.signal }))))
    assert.equal(attempts[0].outcome, 'timeout')
    assert.equal(policy.breaker.snapshot().state, 'open', 'a caller deadline counts against a hanging upstream')
    assert.equal(e instanceof BreakerOpenError ? e.cause : e, deadline)
  })

  it('an already aborted signal never calls the function', async () => {
    const { policy, opts } = setup()
    let called = false
    const e = await rejects(policy.execute(() => {
      called = true
    }, opts({ signal: AbortSignal.abort() })))
    assert.equal(e.name, 'AbortError')
    assert.equal(called, false)
  })
})

describe('options and concurrency', () => {
  it('rejects bad arguments, naming them', async () => {
    const { policy } = setup()
    const bad = async (p, check) => check(await rejects(p))
    await bad(policy.execute(42), (e) => assert.equal(e.field, 'fn'))
    await bad(policy.execute(async () => 1, { sleep: 5 }), (e) => assert.ok(e instanceof TypeError && e.field === 'sleep'))
    await bad(policy.execute(async () => 1, { onRetry: 'x' }), (e) => assert.equal(e.field, 'onRetry'))
    await bad(policy.execute(async () => 1, { signal: {} }), (e) => assert.equal(e.field, 'signal'))
    await bad(policy.execute(async () => 1, { classifyError: () => 'failure' }), (e) => assert.ok(e instanceof TypeError && e.field === 'classifyError'))
    await bad(policy.execute(async () => 1, null), (e) => assert.equal(e.field, 'options'))
    await bad(policy.executeResponse(async () => ({ status: 200 }), { classifyResult: () => 'success' }), (e) => assert.equal(e.field, 'classifyResult'))
  })

  it('concurrent executions keep their own calls', async () => {
    const { policy, timers, opts } = setup({ breaker: { trip: { threshold: 100 } } })
    const fails = { a: 2, b: 1 }
    const run = (k) =>
      policy.execute(async () => {
        await null
        if (fails[k]-- > 0) throw netError()
        return k
      }, opts())
    assert.deepEqual(await timers.run(Promise.all([run('a'), run('b'), run('a')])), ['a', 'b', 'a'])
    assert.equal(timers.pending, 0)
  })

  it("delivers the breaker's state changes to its listeners", async () => {
    const { policy, timers, opts } = setup({ breaker: { trip: { threshold: 1 } }, budget: { maxRetries: 0 } })
    const seen = []
    policy.breaker.on('stateChange', (e) => seen.push(e.reason))
    await rejects(timers.run(policy.execute(async () => Promise.reject(netError()), opts())))
    assert.deepEqual(seen, ['tripped'])
  })
})

describe('policy.executeResponse and fetch', () => {
  it('classifies responses: Retry-After waits, a final 404 is returned', async () => {
    const { policy, timers, waits, opts } = setup()
    const responses = [
      { status: 503, headers: { 'retry-after': '2' } },
      new Response(null, { status: 429, headers: { 'retry-after': '3' } }),
      new Response('gone', { status: 404 }),
    ]
    const last = responses[2]
    const r = await timers.run(policy.executeResponse(async () => responses.shift(), opts()))
    assert.equal(r, last)
    assert.deepEqual(waits.map((w) => [w.delayMs, w.source]), [[2000, 'retry_after'], [3000, 'retry_after']])
  })

  it('500s until retries run out reject with GiveUpError carrying the last response; retried bodies are released', async () => {
    const { policy, timers, opts } = setup({ budget: { maxRetries: 2 } })
    const cancelled = []
    const responses = [0, 1, 2].map((i) => ({ status: 500, headers: {}, body: { cancel: async () => cancelled.push(i) } }))
    let n = 0
    const e = await rejects(timers.run(policy.executeResponse(async () => responses[n++], opts())))
    assert.ok(e instanceof GiveUpError)
    assert.equal(e.reason, 'attempts_exhausted')
    assert.equal(e.response, responses[2])
    assert.ok(!('cause' in e) && !('result' in e))
    assert.deepEqual(cancelled, [0, 1], 'the body handed over stays readable')
  })

  it('a broken status (600) is retried as a failure; a value that is not a status is refused', async () => {
    const { policy, timers, waits, opts } = setup({ breaker: { trip: { threshold: 100 } } })
    const responses = [{ status: 600 }, { status: 999 }, { status: 200 }]
    assert.equal((await timers.run(policy.executeResponse(async () => responses.shift(), opts()))).status, 200)
    assert.deepEqual(waits.map((w) => w.delayMs), [500, 1000])
    for (const status of [-1, 1000, 70_000, 200.5, NaN]) {
      const e = await rejects(timers.run(policy.executeResponse(async () => ({ status }), opts())))
      assert.ok(e instanceof RangeError, String(status))
      assert.equal(e.code, 'invalid_input')
      assert.equal(e.field, 'status')
    }
    assert.equal(policy.breaker.snapshot().failures, 0, 'recorded as cancelled, not as failures')
  })

  it('refuses a value that is not a response, freeing the probe', async () => {
    const { policy, clock, timers, opts } = setup({ breaker: { trip: { threshold: 1 }, openInterval: { initialMs: 1000 } } })
    const b = policy.breaker
    b.record(b.allow(), 'failure')
    clock.advance(1000)
    const e = await rejects(timers.run(policy.executeResponse(async () => 'nope', opts())))
    assert.equal(e.field, 'response')
    assert.equal(b.snapshot().probesInFlight, 0)
  })

  it('fetch: each attempt gets its own signal; the caller\'s is init.signal or options.signal', async () => {
    const { policy, timers, opts } = setup({ breaker: { trip: { threshold: 100 } } })
    const caller = new AbortController()
    const seen = []
    const stub = async (input, init) => {
      seen.push({ input, method: init.method, signal: init.signal })
      if (seen.length === 1) throw new TypeError('fetch failed', { cause: netError() })
      return new Response('ok')
    }
    const r = await timers.run(policy.fetch('http://upstream.test/', { method: 'POST', signal: caller.signal }, opts({ fetch: stub })))
    assert.equal(await r.text(), 'ok')
    assert.equal(seen.length, 2)
    assert.ok(seen.every((s) => s.input === 'http://upstream.test/' && s.method === 'POST'))
    assert.ok(seen[0].signal !== caller.signal && seen[1].signal !== seen[0].signal && !seen[1].signal.aborted)
    // The caller's signal (here init.signal) cancels the attempt through its own signal.
    const p = policy.fetch('http://upstream.test/', { signal: caller.signal }, opts({
      fetch: (_, init) => new Promise((_, reject) => init.signal.addEventListener('abort', () => reject(init.signal.reason))),
    }))
    await turn()
    caller.abort(new Error('caller gave up'))
    assert.equal((await rejects(timers.run(p))).message, 'caller gave up')
    const twice = await rejects(policy.fetch('http://upstream.test/', { signal: new AbortController().signal }, { signal: caller.signal }))
    assert.equal(twice.field, 'signal')
  })

  it('fetch: a body it cannot send twice ends the call where it would retry; a string body is sent again', async () => {
    const stream = () => new ReadableStream({ start: (c) => (c.enqueue(new TextEncoder().encode('{}')), c.close()) })
    const cases = [
      ['a stream body', 'http://upstream.test/', { method: 'PUT', body: stream(), duplex: 'half' }, 1],
      ['a Request with a body', new Request('http://upstream.test/', { method: 'PUT', body: '{}' }), undefined, 1],
      ['a string body', 'http://upstream.test/', { method: 'PUT', body: '{}' }, 3],
      ['a Request without a body', new Request('http://upstream.test/'), undefined, 3],
    ]
    for (const [name, input, init, sent] of cases) {
      const { policy, timers, opts, waits } = setup({ budget: { maxRetries: 2 } })
      let calls = 0
      const down = new TypeError('fetch failed', { cause: netError() })
      const e = await rejects(timers.run(policy.fetch(input, init, opts({
        fetch: async () => {
          calls++
          throw down
        },
      }))))
      assert.equal(calls, sent, name)
      assert.ok(e instanceof GiveUpError, name)
      assert.equal(e.reason, 'attempts_exhausted', name)
      assert.equal(e.cause, down)
      assert.equal(e.attempts, sent, name)
      if (sent === 1) {
        assert.equal(e.retryAfterMs, 500, `${name}: the wait it would have made`)
        assert.deepEqual(waits, [], `${name}: no wait`)
      }
    }
  })

  it('fetch against a local server: an attempt cut by its limit is aborted, the next one is really sent', { timeout: 20_000 }, async () => {
    // The old helper handed the caller's signal to every retry. Here the first request hangs at
    // the server until the attempt limit aborts it; the retry carries a fresh signal and reaches
    // the server, which answers.
    const arrived = []
    let firstClosed
    const closed = new Promise((resolve) => (firstClosed = resolve))
    const server = createServer((req, res) => {
      arrived.push(req.url)
      if (arrived.length === 1) {
        res.on('close', firstClosed)
        return // hangs
      }
      res.end('hello')
    })
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
    try {
      const { policy, timers, waits, opts, attempts } = setup()
      const url = `http://127.0.0.1:${server.address().port}/manifest`
      const p = policy.fetch(url, undefined, opts({ attemptTimeoutMs: 1000 }))
      // Real I/O: wait (on the wall clock, bounded) until the server holds the first request.
      for (let i = 0; arrived.length === 0; i++) {
        assert.ok(i < 500, 'the first request never arrived')
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
      timers.advance(1000) // the attempt limit
      await closed // the client aborted the hanging request
      for (let i = 0; timers.pending === 0; i++) {
        assert.ok(i < 100, 'no wait was scheduled')
        await turn()
      }
      timers.runNext() // the backoff
      // The retry must reach the server (a retry on the first attempt's aborted signal never
      // leaves the client).
      for (let i = 0; arrived.length < 2; i++) {
        assert.ok(i < 300, `the retry never reached the server (attempts: ${JSON.stringify(attempts.map((a) => a.outcome))})`)
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
      const res = await p
      assert.equal(res.status, 200)
      assert.equal(await res.text(), 'hello')
      assert.deepEqual(arrived, ['/manifest', '/manifest'])
      assert.deepEqual(attempts.map((a) => a.outcome), ['timeout', 'success'])
      assert.deepEqual(waits.map((w) => w.delayMs), [500])
    } finally {
      server.closeAllConnections()
      server.close()
    }
  })

  it('fetch retries a local server that answers 503 with Retry-After', { timeout: 20_000 }, async () => {
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
      const { policy, timers, waits, opts } = setup()
      const p = policy.fetch(`http://127.0.0.1:${server.address().port}/`, undefined, opts())
      for (let i = 0; timers.peek()?.ms !== 1000; i++) {
        assert.ok(i < 500, 'no Retry-After wait was scheduled')
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
      timers.runNext()
      const res = await p
      assert.equal(res.status, 200)
      assert.equal(await res.text(), 'hello')
      assert.deepEqual(waits.map((w) => w.delayMs), [1000])
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
      assert.equal((await rejects(q)).message, 'bye')
    } finally {
      mock.timers.reset()
    }
  })
})
