// The public API in JavaScript shapes: classes, milliseconds, plain-object snapshots, events,
// permits, errors with stable codes. Time moves only through ManualClock.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import v8 from 'node:v8'
import vm from 'node:vm'
import {
  Breaker,
  BreakerGroup,
  BreakerOpenError,
  Classifier,
  GiveUpError,
  ManualClock,
  Permit,
  PermitError,
  Policy,
  QuotaLease,
  RetryBudget,
  RetryQuota,
  UpstreamUnavailableError,
  parseRetryAfter,
  hintFromHeaders,
} from 'holdoff'
import { throwsCode } from './throws-code.mjs'

function trip(b, n) {
  for (let i = 0; i < n; i++) b.record(b.allow(), 'failure')
}

describe('ManualClock', () => {
  it('moves only when told to, in milliseconds', () => {
    const c = new ManualClock({ wallOriginUnixMs: 1_559_559_600_000 })
    assert.equal(c.now(), 0)
    assert.equal(c.advance(1500), 1500)
    c.set(2000.5)
    assert.equal(c.now(), 2000.5)
    assert.equal(c.wallOriginUnixMs, 1_559_559_600_000)
    assert.equal(c.wallNowUnixMs(), 1_559_559_602_000.5)
  })

  it('refuses to go backwards with clock_backwards', () => {
    const c = new ManualClock()
    c.set(10)
    const e = throwsCode(() => c.set(9), RangeError, 'clock_backwards')
    assert.match(e.message, /10 ms/)
    assert.equal(c.now(), 10)
  })

  it('keeps whole milliseconds exact a century out', () => {
    const c = new ManualClock()
    c.set(3_155_760_059_999)
    assert.equal(c.now(), 3_155_760_059_999)
  })

  for (const [v, Ctor] of [
    [undefined, TypeError],
    [null, TypeError],
    ['5', TypeError],
    [5n, TypeError],
    [{}, TypeError],
    [NaN, RangeError],
    [Infinity, RangeError],
    [-1, RangeError],
  ]) {
    it(`advance(${typeof v === 'bigint' ? '5n' : String(v)}) is a ${Ctor.name} naming ms`, () => {
      const c = new ManualClock()
      throwsCode(() => c.advance(v), Ctor, 'invalid_input', 'ms')
      throwsCode(() => c.set(v), Ctor, 'invalid_input', 'ms')
      assert.equal(c.now(), 0)
    })
  }
})

describe('Breaker', () => {
  it('trips, refuses with BreakerOpenError, admits one probe per interval', () => {
    const clock = new ManualClock()
    const b = new Breaker({ clock })
    trip(b, 5)
    const r = b.tryAllow()
    assert.deepEqual(r, { admitted: false, retryAfterMs: 30_000, state: 'open', episode: 1 })
    const e = throwsCode(() => b.allow(), BreakerOpenError, 'breaker_open')
    assert.ok(e instanceof UpstreamUnavailableError && !(e instanceof GiveUpError))
    assert.equal(e.reason, 'breaker_open')
    assert.equal(e.retryAfterMs, 30_000)
    assert.equal(e.state, 'open')
    assert.equal(e.episode, 1)
    assert.equal(e.attempts, 0)
    clock.advance(30_000)
    const p = b.allow()
    assert.ok(p instanceof Permit)
    assert.equal(p.probe, true)
    assert.equal(p.episode, 1)
    assert.equal(b.tryAllow().admitted, false, 'a second caller is refused in the same interval')
    assert.equal(b.record(p, 'success'), 'counted')
    assert.equal(b.state, 'half_open')
  })

  it('closed permits carry episode 0 and the fast path reads no clock', () => {
    const clock = new ManualClock()
    const b = new Breaker({ clock })
    for (let i = 0; i < 100; i++) {
      const p = b.allow()
      assert.equal(p.episode, 0)
      assert.equal(p.probe, false)
      assert.equal(b.record(p, i % 2 ? 'success' : 'answer'), 'counted')
    }
    assert.equal(clock.reads, 0)
  })

  it('a permit is recorded once; a foreign permit is refused without being spent', () => {
    const clock = new ManualClock()
    const a = new Breaker({ clock })
    const b = new Breaker({ clock })
    const p = a.allow()
    throwsCode(() => b.record(p, 'success'), PermitError, 'foreign_permit')
    assert.equal(p.recorded, false)
    assert.equal(a.record(p, 'failure'), 'counted')
    assert.equal(p.recorded, true)
    throwsCode(() => a.record(p, 'failure'), PermitError, 'permit_already_recorded')
    throwsCode(() => b.record(p, 'failure'), PermitError, 'foreign_permit')
    assert.equal(a.snapshot().failures, 1, 'the refused second record changed nothing')
  })

  it('bad outcomes are TypeErrors and do not spend the permit', () => {
    const b = new Breaker()
    const p = b.allow()
    for (const o of [undefined, null, 'boom', 3, {}, { retryLaterMs: '5' }, { retryLaterMs: 5n }]) {
      throwsCode(() => b.record(p, o), TypeError, 'invalid_input')
    }
    for (const ms of [-1, NaN, Infinity]) {
      throwsCode(() => b.record(p, { retryLaterMs: ms }), RangeError, 'invalid_input', 'outcome.retryLaterMs')
    }
    throwsCode(() => b.record({ episode: 0 }, 'success'), TypeError, 'invalid_input', 'permit')
    assert.equal(p.recorded, false)
    assert.equal(b.record(p, 'success'), 'counted')
  })

  it('retry-later opens at once for the provider delay', () => {
    const clock = new ManualClock()
    const b = new Breaker({ clock })
    b.record(b.allow(), { retryLaterMs: 120_000 })
    assert.deepEqual(b.drainEvents(), [
      { atMs: 0, from: 'closed', to: 'open', episode: 1, reason: 'retry_later', requestedDelayMs: 120_000, openForMs: 120_000 },
    ])
    assert.equal(b.snapshot().retryAfterMs, 120_000)
  })

  it('snapshots are plain objects with milliseconds and nulls', () => {
    const b = new Breaker({ clock: new ManualClock() })
    const s = b.snapshot()
    assert.equal(Object.getPrototypeOf(s), Object.prototype)
    assert.deepEqual(JSON.parse(JSON.stringify(s)), s)
    assert.deepEqual(s, {
      state: 'closed',
      episode: 0,
      failures: 0,
      recoveries: 0,
      probesInFlight: 0,
      retryAfterMs: null,
      probeReady: false,
      intervalMs: null,
      opens: 0,
      closes: 0,
      probes: 0,
      refusals: 0,
      staleAnswers: 0,
      eventsDropped: 0,
    })
  })

  it('force open, disable and reset', () => {
    const b = new Breaker({ clock: new ManualClock() })
    b.forceOpen()
    assert.deepEqual(b.tryAllow(), { admitted: false, retryAfterMs: null, state: 'forced_open', episode: 1 })
    b.disable()
    trip(b, 10)
    assert.equal(b.state, 'disabled')
    b.reset()
    assert.equal(b.state, 'closed')
    assert.deepEqual(
      b.drainEvents().map((e) => e.reason),
      ['forced_open', 'disabled', 'reset'],
    )
  })

  it("emits 'stateChange' in order; a listener may call back into the breaker", () => {
    const clock = new ManualClock()
    const b = new Breaker({ clock, trip: { threshold: 1 }, openInterval: { initialMs: 1000, multiplier: 1 }, recoveries: 1 })
    const seen = []
    b.on('stateChange', (e) => {
      // Re-entering the breaker from a listener must neither deadlock nor reorder events.
      seen.push(`${e.from}->${e.to}:${e.reason}@${e.atMs} (now ${b.snapshot().state})`)
      if (e.reason === 'tripped') b.reset()
    })
    b.record(b.allow(), 'failure')
    assert.deepEqual(seen, ['closed->open:tripped@0 (now open)', 'open->closed:reset@0 (now closed)'])
    // Listeners are fed independently of the drain queue.
    assert.equal(b.drainEvents().length, 2)
  })

  it('stops listening when the last listener goes', () => {
    const clock = new ManualClock()
    const b = new Breaker({ clock, trip: { threshold: 1 } })
    const seen = []
    const f = (e) => seen.push(e.reason)
    b.on('stateChange', f)
    b.record(b.allow(), 'failure')
    b.off('stateChange', f)
    b.reset()
    b.once('stateChange', f)
    b.record(b.allow(), 'failure')
    b.reset()
    assert.deepEqual(seen, ['tripped', 'tripped'])
    b.on('stateChange', f)
    b.removeAllListeners()
    b.forceOpen()
    b.on('stateChange', f)
    b.reset()
    assert.deepEqual(seen, ['tripped', 'tripped', 'reset'])
  })
})

describe('BreakerGroup', () => {
  it('makes one breaker per key, lazily, from the template', () => {
    const clock = new ManualClock()
    const g = new BreakerGroup({ clock, trip: { threshold: 2 } })
    assert.equal(g.peek('a'), undefined)
    const a = g.get('a')
    assert.equal(g.get('a'), a)
    assert.equal(g.peek('a'), a)
    trip(a, 2)
    assert.equal(a.state, 'open')
    assert.equal(g.get('b').state, 'closed')
    assert.deepEqual(g.keys(), ['a', 'b'])
    assert.equal(g.size, 2)
    assert.equal(g.maxKeys, 10_000)
    assert.deepEqual(g.snapshot(), { size: 2, maxKeys: 10_000, evictions: 0, overflows: 0 })
    throwsCode(() => g.get(1), TypeError, 'invalid_input', 'key')
    throwsCode(() => g.peek(null), TypeError, 'invalid_input', 'key')
  })

  it('is bounded by maxKeys: a new key evicts the least recently used idle breaker', () => {
    const clock = new ManualClock()
    const g = new BreakerGroup({ clock, trip: { threshold: 1 }, maxKeys: 2 })
    const a = g.get('a')
    const b = g.get('b')
    assert.equal(g.get('a'), a, 'a is now the most recently used')
    const c = g.get('c')
    assert.deepEqual(g.keys(), ['a', 'c'])
    assert.deepEqual(g.snapshot(), { size: 2, maxKeys: 2, evictions: 1, overflows: 0 })
    assert.equal(g.peek('b'), undefined, 'b was evicted')
    // peek marks nothing: a stays the least recently used and goes next.
    assert.equal(g.peek('a'), a)
    const b2 = g.get('b')
    assert.notEqual(b2, b, 'after an eviction, get() hands out the breaker the core holds now')
    assert.notEqual(b2.id, b.id)
    assert.equal(g.get('b'), b2)
    assert.deepEqual(g.keys(), ['b', 'c'])
    assert.equal(g.get('c'), c)
    // An open breaker is never evicted, even as the least recently used: it is the protection.
    trip(c, 1)
    assert.equal(g.get('b'), b2)
    const d = g.get('d')
    assert.deepEqual(g.keys(), ['c', 'd'])
    assert.equal(g.get('c'), c)
    assert.equal(c.state, 'open')
    assert.equal(d.state, 'closed')
    assert.deepEqual(g.snapshot(), { size: 2, maxKeys: 2, evictions: 3, overflows: 0 })
  })

  it('a full group with nothing idle hands out overflow breakers it does not keep', () => {
    const clock = new ManualClock()
    const g = new BreakerGroup({ clock, trip: { threshold: 1 }, maxKeys: 1 })
    const a = g.get('a')
    trip(a, 1)
    const x1 = g.get('x')
    const x2 = g.get('x')
    assert.notEqual(x1, x2)
    assert.notEqual(x1.id, x2.id)
    assert.equal(x1.state, 'closed')
    assert.equal(x1.tryAllow().admitted, true, 'no call fails because the group is full')
    assert.equal(g.peek('x'), undefined)
    assert.deepEqual(g.keys(), ['a'])
    assert.equal(g.get('a'), a)
    assert.equal(a.state, 'open')
    assert.deepEqual(g.snapshot(), { size: 1, maxKeys: 1, evictions: 0, overflows: 2 })
    // Once a is idle again (reset), the next new key evicts it and is kept.
    a.reset()
    const y = g.get('y')
    assert.equal(g.get('y'), y)
    assert.deepEqual(g.keys(), ['y'])
    assert.deepEqual(g.snapshot(), { size: 1, maxKeys: 1, evictions: 1, overflows: 2 })
  })

  it('drops its wrappers of evicted breakers: the JavaScript side stays bounded', async () => {
    v8.setFlagsFromString('--expose-gc')
    const gc = vm.runInNewContext('gc')
    const g = new BreakerGroup({ clock: new ManualClock(), maxKeys: 4 })
    const refs = []
    for (let i = 0; i < 40; i++) refs.push(new WeakRef(g.get(`k${i}`)))
    // Let the job end (WeakRef targets stay alive until then), then collect.
    await new Promise(setImmediate)
    gc()
    const alive = refs.map((r, i) => (r.deref() === undefined ? null : i)).filter((i) => i !== null)
    // The group keeps the last 4; wrappers of older keys may wait for the next sweep (at twice
    // maxKeys entries), never longer.
    assert.deepEqual(g.keys(), ['k36', 'k37', 'k38', 'k39'])
    assert.ok(alive.length <= 8, `wrappers alive: ${alive}`)
    assert.ok(alive.every((i) => i >= 32), `wrappers alive: ${alive}`)
  })

  it('maxKeys is checked by the core, naming group.max_keys', () => {
    throwsCode(() => new BreakerGroup({ maxKeys: 0 }), RangeError, 'invalid_config', 'group.max_keys')
    throwsCode(() => new BreakerGroup({ maxKeys: 100_000_001 }), RangeError, 'invalid_config', 'group.max_keys')
    throwsCode(() => new BreakerGroup({ maxKeys: -1 }), RangeError, 'invalid_config', 'group.max_keys')
    throwsCode(() => new BreakerGroup({ maxKeys: 1.5 }), RangeError, 'invalid_config', 'group.max_keys')
    throwsCode(() => new BreakerGroup({ maxKeys: NaN }), RangeError, 'invalid_config', 'group.max_keys')
    const e = throwsCode(() => new BreakerGroup({ maxKeys: '10' }), TypeError, 'invalid_config', 'group.max_keys')
    assert.match(e.message, /maxKeys/)
    throwsCode(() => new Breaker({ maxKeys: 10 }), TypeError, 'invalid_config', 'breaker.maxKeys')
    assert.equal(new BreakerGroup({ maxKeys: 100_000_000 }).maxKeys, 100_000_000)
    assert.equal(new BreakerGroup({ maxKeys: undefined }).maxKeys, 10_000)
  })
})

describe('configuration errors name the field', () => {
  const number = [
    ['openInterval.initialMs', (v) => ({ openInterval: { initialMs: v } }), 'breaker.open_interval.initial'],
    ['openInterval.multiplier', (v) => ({ openInterval: { multiplier: v } }), 'breaker.open_interval.multiplier'],
    ['probeTimeoutMs', (v) => ({ probeTimeoutMs: v }), 'breaker.probe_timeout'],
    ['maxRetryLaterMs', (v) => ({ maxRetryLaterMs: v }), 'breaker.max_retry_later'],
    ['trip.windowMs', (v) => ({ trip: { policy: 'window', threshold: 3, windowMs: v } }), 'breaker.trip.window', 'required'],
    ['recoveries', (v) => ({ recoveries: v }), 'breaker.recoveries'],
    ['trip.threshold', (v) => ({ trip: { threshold: v } }), 'breaker.trip.threshold', 'required'],
    ['seed', (v) => ({ seed: v }), 'breaker.seed'],
  ]
  const wrongType = [null, '5', 5n, {}, [], true]
  const wrongRange = [NaN, Infinity, -Infinity, -1]
  for (const [name, make, field, required] of number) {
    for (const v of wrongType) {
      it(`${name} = ${typeof v === 'bigint' ? '5n' : JSON.stringify(v)}: TypeError`, () => {
        const e = throwsCode(() => new Breaker(make(v)), TypeError, 'invalid_config', field)
        assert.match(e.message, new RegExp(name.replace('.', '\\.')))
      })
    }
    for (const v of wrongRange) {
      it(`${name} = ${v}: RangeError`, () => {
        throwsCode(() => new Breaker(make(v)), RangeError, 'invalid_config', field)
      })
    }
    if (required) {
      it(`${name} = undefined: TypeError (required)`, () => {
        throwsCode(() => new Breaker(make(undefined)), TypeError, 'invalid_config', field)
      })
    } else {
      it(`${name} = undefined: the default`, () => {
        assert.doesNotThrow(() => new Breaker(make(undefined)))
      })
    }
  }

  it('whole numbers where counts belong', () => {
    throwsCode(() => new Breaker({ recoveries: 1.5 }), RangeError, 'invalid_config', 'breaker.recoveries')
    throwsCode(() => new RetryQuota({ capacity: 0.5 }), RangeError, 'invalid_config', 'quota.capacity')
    throwsCode(() => new Breaker({ seed: 2 ** 53 }), RangeError, 'invalid_config', 'breaker.seed')
  })

  it('the core rules: zero intervals, multiplier < 1, jitter, budget against cap', () => {
    throwsCode(() => new Breaker({ openInterval: { initialMs: 0 } }), RangeError, 'invalid_config', 'breaker.open_interval.initial')
    throwsCode(() => new Breaker({ openInterval: { multiplier: 0.5 } }), RangeError, 'invalid_config', 'breaker.open_interval.multiplier')
    throwsCode(() => new Breaker({ openInterval: { jitter: 1 } }), RangeError, 'invalid_config', 'breaker.open_interval.jitter')
    throwsCode(() => new Breaker({ trip: { policy: 'rate', threshold: 1.5, minCalls: 5, windowMs: 1000 } }), RangeError, 'invalid_config', 'breaker.trip.threshold')
    const e = throwsCode(
      () => new RetryBudget({ maxRateLimitDurationMs: 300_000, retryAfterCapMs: 300_000 }),
      RangeError,
      'invalid_config',
      'budget.max_rate_limit_duration',
    )
    assert.match(e.message, /leaves no room to retry/)
    assert.match(e.message, /maxRateLimitDurationMs/)
  })

  it('unknown options, options of the wrong type, missing and unknown trip fields', () => {
    throwsCode(() => new Breaker({ recoverys: 3 }), TypeError, 'invalid_config', 'breaker.recoverys')
    throwsCode(() => new Breaker(5), TypeError, 'invalid_config', 'breaker')
    throwsCode(() => new Breaker(null), TypeError, 'invalid_config')
    throwsCode(() => new Breaker({ trip: { policy: 'window', threshold: 3 } }), TypeError, 'invalid_config', 'breaker.trip.window')
    throwsCode(() => new Breaker({ trip: { policy: 'sometimes', threshold: 3 } }), RangeError, 'invalid_config', 'breaker.trip.policy')
    throwsCode(() => new Breaker({ clock: Date }), TypeError, 'invalid_config', 'clock')
    throwsCode(() => new Classifier({ failureStatuses: [403, '404'] }), TypeError, 'invalid_config', 'classifier.failure_statuses')
    throwsCode(() => new Classifier({ failureStatuses: [99] }), RangeError, 'invalid_config', 'classifier.failure_statuses')
    throwsCode(() => new Classifier({ failureStatuses: 403 }), TypeError, 'invalid_config', 'classifier.failure_statuses')
    throwsCode(() => new RetryBudget({ backoff: { maxMs: -5 } }), RangeError, 'invalid_config', 'budget.backoff.max')
    throwsCode(() => new Policy({ breakr: {} }), TypeError, 'invalid_config', 'policy.breakr')
  })

  // An explicit null (or any value that is not an options object) where an options object
  // belongs is refused with the error of the object's own constructor, naming the same field;
  // it never stands for the defaults.
  const clock = new ManualClock()
  const notOptions = [
    ['new Breaker(null)', () => new Breaker(null), 'breaker'],
    ['new RetryBudget(null)', () => new RetryBudget(null), 'budget'],
    ['new RetryQuota(null)', () => new RetryQuota(null), 'quota'],
    ['new Classifier(null)', () => new Classifier(null), 'classifier'],
    ['new BreakerGroup(null)', () => new BreakerGroup(null), 'breaker'],
    ['new ManualClock(null)', () => new ManualClock(null), 'clock'],
    ['new Policy(null)', () => new Policy(null), 'policy'],
    ['new Policy({ breaker: null })', () => new Policy({ breaker: null }), 'breaker', () => new Breaker(null)],
    ['new Policy({ budget: null })', () => new Policy({ budget: null }), 'budget', () => new RetryBudget(null)],
    ['new Policy({ quota: null })', () => new Policy({ quota: null }), 'quota', () => new RetryQuota(null)],
    ['new Policy({ classifier: null })', () => new Policy({ classifier: null }), 'classifier', () => new Classifier(null)],
    ['new Policy({ clock: null })', () => new Policy({ clock: null }), 'clock', () => new Breaker({ clock: null })],
    ['new Policy({ breaker: null, clock })', () => new Policy({ breaker: null, clock }), 'breaker', () => new Breaker(null)],
    ['new Policy({ budget: null, clock })', () => new Policy({ budget: null, clock }), 'budget', () => new RetryBudget(null)],
    ['new Policy({ breaker: 5, clock })', () => new Policy({ breaker: 5, clock }), 'breaker', () => new Breaker(5)],
    ['new Policy({ breaker: [], clock })', () => new Policy({ breaker: [], clock }), 'breaker', () => new Breaker([])],
    ['new Breaker({ trip: null })', () => new Breaker({ trip: null }), 'breaker.trip'],
    ['new Breaker({ openInterval: null })', () => new Breaker({ openInterval: null }), 'breaker.open_interval'],
    ['new RetryBudget({ backoff: null })', () => new RetryBudget({ backoff: null }), 'budget.backoff'],
  ]
  for (const [name, make, field, alone] of notOptions) {
    it(`${name}: TypeError naming ${field}`, () => {
      const e = throwsCode(make, TypeError, 'invalid_config', field)
      if (alone !== undefined) assert.equal(e.message, throwsCode(alone, TypeError, 'invalid_config', field).message)
    })
  }

  it('a policy needs one clock for its breaker and budget', () => {
    const e = throwsCode(
      () => new Policy({ breaker: new Breaker({ clock: new ManualClock() }), budget: new RetryBudget({ clock: new ManualClock() }) }),
      RangeError,
      'invalid_config',
      'policy.clock',
    )
    assert.match(e.message, /share one clock/)
    assert.doesNotThrow(() => new Policy())
  })
})

describe('RetryBudget and RetryQuota', () => {
  it('honours a Retry-After as given and gives up rather than shorten it', () => {
    const clock = new ManualClock()
    const budget = new RetryBudget({ clock })
    const call = budget.newCall()
    assert.deepEqual(budget.decide(call, { retryLaterMs: 250_000 }), {
      decision: 'retry',
      delayMs: 250_000,
      source: 'retry_after',
      serverDelayMs: 250_000,
      capped: false,
    })
    assert.equal(budget.episodeStartMs, 0)
    clock.set(1_750_000)
    assert.deepEqual(budget.decide(call, { retryLaterMs: 250_000 }), {
      decision: 'give_up',
      reason: 'retry_after_exceeds_remaining',
      serverDelayMs: 250_000,
    })
    assert.deepEqual(budget.decide(call, 'success'), { decision: 'done' })
    assert.equal(budget.episodeStartMs, null)
  })

  it('counts retries per call on the backoff path', () => {
    const clock = new ManualClock()
    const budget = new RetryBudget({ clock, maxRetries: 2 })
    const call = budget.newCall()
    assert.equal(call.firstFailureMs, null)
    clock.set(100)
    assert.equal(budget.decide(call, 'failure').delayMs, 500)
    assert.equal(budget.decide(call, 'timeout').delayMs, 1000)
    assert.equal(budget.decide(call, 'failure').reason, 'attempts_exhausted')
    assert.equal(call.retries, 2)
    assert.equal(call.firstFailureMs, 100)
    throwsCode(() => budget.decide({}, 'failure'), TypeError, 'invalid_input', 'state')
  })

  it('quota: retries cost, successes refund', () => {
    const q = new RetryQuota({ capacity: 12 })
    const lease = q.acquire()
    assert.ok(lease instanceof QuotaLease)
    assert.deepEqual({ ...lease }, { acquired: true, cost: 5, available: 7 })
    assert.equal(lease.givenBack, false)
    assert.deepEqual(q.acquire({ timeout: true }), { acquired: false, cost: 10, available: 7 })
    assert.equal(q.onSuccess(lease), 12)
    assert.equal(lease.givenBack, true)
    assert.equal(q.onSuccess(), 12)
    assert.equal(q.available, 12)
    throwsCode(() => q.acquire({ timeout: 1 }), TypeError, 'invalid_input', 'timeout')
    // Only a lease the core issued is a lease: an empty result or a forged object refunds nothing.
    throwsCode(() => q.onSuccess({ acquired: false, cost: 5 }), TypeError, 'invalid_input', 'lease')
    throwsCode(() => q.onSuccess({ acquired: true, cost: 5, available: 7 }), TypeError, 'invalid_input', 'lease')
    throwsCode(() => q.onSuccess(5), TypeError, 'invalid_input', 'lease')
    throwsCode(() => new QuotaLease(), TypeError, 'invalid_input', 'lease')
    assert.equal(q.available, 12)
  })

  it('quota: a lease is given back once, and only to the quota that issued it', () => {
    const q = new RetryQuota({ capacity: 12 })
    const small = new RetryQuota({ capacity: 20 })
    const leases = [small.acquire(), small.acquire(), small.acquire(), small.acquire()]
    assert.equal(small.available, 0)
    assert.equal(small.onSuccess(leases[0]), 5)
    assert.throws(() => small.onSuccess(leases[0]), { name: 'PermitError', code: 'permit_already_recorded' })
    assert.equal(small.available, 5, 'a second give-back changes nothing')
    // Another quota refuses it and the lease stays usable on its own.
    assert.throws(() => q.onSuccess(leases[1]), { name: 'PermitError', code: 'foreign_permit' })
    assert.equal(q.available, 12)
    assert.equal(leases[1].givenBack, false)
    assert.equal(small.onSuccess(leases[1]), 10)
    assert.throws(() => q.onSuccess(leases[1]), { name: 'PermitError', code: 'foreign_permit' })
    assert.throws(() => small.onSuccess(leases[1]), { name: 'PermitError', code: 'permit_already_recorded' })
    assert.ok(new PermitError('foreign_permit', 'x') instanceof Error)
    assert.equal(small.available, 10)
    assert.equal(q.available, 12)
  })
})

describe('listeners', () => {
  it('a throwing stateChange listener is reported as a warning and loses no probe', async () => {
    const clock = new ManualClock()
    const b = new Breaker({ clock, trip: { policy: 'consecutive', threshold: 1 }, openInterval: { initialMs: 1000, multiplier: 1 } })
    const warnings = []
    const onWarning = (w) => warnings.push(w)
    process.on('warning', onWarning)
    try {
      b.on('stateChange', (e) => {
        if (e.reason === 'probe_admitted') throw new Error('listener boom')
      })
      b.record(b.allow(), 'failure')
      clock.advance(1000)
      const probe = b.allow()
      assert.equal(probe.probe, true)
      assert.equal(b.record(probe, 'success'), 'counted')
      await new Promise((resolve) => setImmediate(resolve))
      assert.equal(warnings.length, 1)
      assert.equal(warnings[0].message, 'listener boom')
      assert.equal(warnings[0].name, 'Error')
    } finally {
      process.off('warning', onWarning)
    }
  })
})

describe('Retry-After and classification', () => {
  const now = { now: Date.UTC(2019, 5, 3, 11, 0, 0) }

  it('parses delta-seconds and the three HTTP-date forms (RFC 9110 §10.2.3)', () => {
    assert.deepEqual(parseRetryAfter('120', now), { delayMs: 120_000 })
    assert.deepEqual(parseRetryAfter('Mon, 03 Jun 2019 11:30:12 GMT', now), { delayMs: 1_812_000 })
    assert.deepEqual(parseRetryAfter('Monday, 03-Jun-19 11:30:12 GMT', { now: new Date(now.now) }), { delayMs: 1_812_000 })
    assert.deepEqual(parseRetryAfter('Mon Jun  3 11:30:12 2019', now), { delayMs: 1_812_000 })
    assert.deepEqual(parseRetryAfter('Mon, 03 Jun 2019 10:00:00 GMT', now), { delayMs: 0 })
  })

  it('bad values are unusable, never exceptions', () => {
    assert.deepEqual(parseRetryAfter('-5'), { unusable: 'signed' })
    assert.deepEqual(parseRetryAfter('soon'), { unusable: 'malformed' })
    assert.deepEqual(parseRetryAfter(''), { unusable: 'missing' })
    assert.deepEqual(parseRetryAfter('120, 60'), { unusable: 'conflicting' })
    throwsCode(() => parseRetryAfter(120), TypeError, 'invalid_input', 'value')
    throwsCode(() => parseRetryAfter('1', { now: '2019' }), TypeError, 'invalid_input', 'now')
  })

  it('reads hints from Headers, Map, objects and pairs, against a manual clock', () => {
    const clock = new ManualClock({ wallOriginUnixMs: now.now })
    const forms = [
      new Headers({ 'Retry-After': '7' }),
      new Map([['retry-after', '7']]),
      { 'retry-after': '7', 'x-other': undefined },
      [['Retry-After', '7']],
    ]
    for (const h of forms) assert.deepEqual(hintFromHeaders(h, { clock }), { delayMs: 7000, source: 'retry_after' })
    assert.deepEqual(hintFromHeaders({}, { clock }), { unusable: 'missing', source: 'none' })
    throwsCode(() => hintFromHeaders([['a']]), TypeError, 'invalid_input', 'headers')
    throwsCode(() => hintFromHeaders({ 'retry-after': 7 }), TypeError, 'invalid_input', 'headers')
  })

  it('classifies statuses: outside 100..599 a failure, outside 0..999 invalid_input', () => {
    const c = new Classifier({ failureStatuses: [403] })
    assert.deepEqual(c.classify(429, { 'retry-after': '3' }), {
      outcome: 'retry_later',
      retryLaterMs: 3000,
      hint: { delayMs: 3000 },
      source: 'retry_after',
      shouldRetry: null,
    })
    assert.equal(c.classify(403).outcome, 'failure')
    assert.equal(c.classify(404).outcome, 'answer')
    assert.equal(c.classify(200).outcome, 'success')
    // A broken upstream, not a programmer's error: a failure whatever its headers say.
    for (const status of [0, 99, 600, 999]) {
      assert.equal(c.classify(status, { 'x-should-retry': 'false' }).outcome, 'failure', `status ${status}`)
    }
    for (const status of [-1, 1000, 70_000, 2 ** 53, -(2 ** 63), 1e300, 200.5, NaN, Infinity, -Infinity]) {
      throwsCode(() => c.classify(status), RangeError, 'invalid_input', 'status')
    }
    throwsCode(() => c.classify('200'), TypeError, 'invalid_input', 'status')
    throwsCode(() => c.classify(200n), TypeError, 'invalid_input', 'status')
  })

  it("honours the provider's x-should-retry and reports it", () => {
    const c = new Classifier()
    assert.deepEqual(
      { ...c.classify(503, { 'x-should-retry': 'false' }), hint: undefined },
      { outcome: 'answer', retryLaterMs: null, hint: undefined, source: 'none', shouldRetry: false },
    )
    assert.equal(c.classify(400, { 'x-should-retry': 'true' }).outcome, 'failure')
    assert.equal(c.classify(400, { 'x-should-retry': 'true' }).shouldRetry, true)
    assert.equal(c.classify(200, { 'x-should-retry': 'false' }).outcome, 'success')
    assert.equal(c.classify(400, { 'x-should-retry': 'maybe' }).shouldRetry, null)
  })

  it('reads the providers\' millisecond and RateLimit headers, names from the core', () => {
    const clock = new ManualClock()
    assert.deepEqual(hintFromHeaders({ 'retry-after-ms': '1500.2', 'retry-after': '9' }, { clock }), { delayMs: 1501, source: 'retry_after_ms' })
    assert.deepEqual(hintFromHeaders({ 'x-ms-retry-after-ms': '250' }, { clock }), { delayMs: 250, source: 'x_ms_retry_after_ms' })
    assert.deepEqual(hintFromHeaders({ ratelimit: '"default";r=0;t=30' }, { clock }), { delayMs: 30_000, source: 'ratelimit' })
    assert.deepEqual(hintFromHeaders({ 'ratelimit-reset': '7' }, { clock }), { delayMs: 7000, source: 'ratelimit_reset' })
    assert.deepEqual(hintFromHeaders({ 'x-ratelimit-reset': '12' }, { clock }), { delayMs: 12_000, source: 'x_ratelimit_reset' })
  })

  it('policy.afterResponse: a value that is not a status is refused and the probe slot freed', () => {
    const clock = new ManualClock()
    const policy = new Policy({ clock, breaker: { trip: { threshold: 1 }, openInterval: { initialMs: 1000, multiplier: 1 } } })
    const b = policy.breaker
    b.record(b.allow(), 'failure')
    clock.set(1000)
    const call = policy.newCall()
    const go = policy.beforeAttempt(call)
    assert.equal(go.permit.probe, true)
    assert.equal(b.snapshot().probesInFlight, 1)
    throwsCode(() => policy.afterResponse(call, go.permit, -5), RangeError, 'invalid_input', 'status')
    assert.equal(go.permit.recorded, true)
    const s = b.snapshot()
    assert.equal(s.probesInFlight, 0, 'recorded as cancelled: the slot is free')
    assert.equal(s.retryAfterMs, 1000, 'and the window stays spent')
    assert.throws(() => policy.afterResponse(call, go.permit, 200), { name: 'PermitError', code: 'permit_already_recorded' })
    // Above 999 and fractional values too; a broken status (600) is a failure and re-opens.
    for (const status of [70_000, 1000, 99.5]) {
      clock.advance(1000)
      const p = policy.beforeAttempt(policy.newCall()).permit
      throwsCode(() => policy.afterResponse(policy.newCall(), p, status), RangeError, 'invalid_input', 'status')
      assert.equal(b.snapshot().probesInFlight, 0)
    }
    clock.advance(1000)
    const c2 = policy.newCall()
    const d = policy.afterResponse(c2, policy.beforeAttempt(c2).permit, 600)
    assert.equal(d.outcome, 'failure')
    assert.equal(b.snapshot().state, 'open')
  })

  it('budget giveUpAboveCap: a Retry-After above the cap gives up at once', () => {
    const clock = new ManualClock()
    const capped = new RetryBudget({ clock, retryAfterCapMs: 300_000 })
    assert.deepEqual(capped.decide(capped.newCall(), { retryLaterMs: 400_000 }), {
      decision: 'retry',
      delayMs: 300_000,
      source: 'retry_after',
      serverDelayMs: 400_000,
      capped: true,
    })
    const strict = new RetryBudget({ clock, retryAfterCapMs: 300_000, giveUpAboveCap: true })
    assert.deepEqual(strict.decide(strict.newCall(), { retryLaterMs: 400_000 }), {
      decision: 'give_up',
      reason: 'retry_after_above_cap',
      serverDelayMs: 400_000,
    })
    assert.equal(strict.decide(strict.newCall(), { retryLaterMs: 300_000 }).decision, 'retry')
    throwsCode(() => new RetryBudget({ giveUpAboveCap: 1 }), TypeError, 'invalid_config', 'budget.give_up_above_cap')
    const e = throwsCode(() => new RetryBudget({ giveUpAboveCap: 'yes' }), TypeError, 'invalid_config', 'budget.give_up_above_cap')
    assert.match(e.message, /giveUpAboveCap/)
  })

  it('a classification records as its outcome', () => {
    const clock = new ManualClock()
    const b = new Breaker({ clock })
    b.record(b.allow(), new Classifier().classify(503, { 'retry-after': '60' }))
    assert.equal(b.snapshot().retryAfterMs, 60_000)
  })
})
