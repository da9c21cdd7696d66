// Metrics: the model API (METRICS, each object's .metrics()) and observe() through the real
// OpenTelemetry metrics SDK (a MeterProvider with a MetricReader collected on demand), after
// scripted scenarios on the manual clock; and the retry helpers' span events through the real
// trace SDK (InMemorySpanExporter, spans made active by the AsyncLocalStorage context manager).
import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { context, trace } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics'
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base'
import {
  Breaker,
  BreakerGroup,
  BreakerOpenError,
  GiveUpError,
  METRICS,
  ManualClock,
  Observation,
  Policy,
  RetryLaterError,
  RetryQuota,
  observe,
} from 'holdoff'
import { ManualTimers } from './manual-timers.mjs'

/** A reader the test collects from when it wants (no timer, no export). */
class TestReader extends MetricReader {
  async onForceFlush() {}
  async onShutdown() {}
}

function sdk() {
  const reader = new TestReader()
  const provider = new MeterProvider({ readers: [reader] })
  return { reader, meter: provider.getMeter('holdoff-test') }
}

function seriesOf(name, attributes) {
  const keys = Object.keys(attributes).sort()
  return keys.length === 0 ? name : `${name}{${keys.map((k) => `${k}=${attributes[k]}`).join(',')}}`
}

/**
 * One collection: every data point as `series -> value`, the non-zero ones apart, and each
 * metric's descriptor by name.
 */
async function collect(reader) {
  const { resourceMetrics, errors } = await reader.collect()
  assert.deepEqual(errors, [])
  const all = {}
  const nonZero = {}
  const descriptors = {}
  for (const sm of resourceMetrics.scopeMetrics) {
    for (const m of sm.metrics) {
      descriptors[m.descriptor.name] = m.descriptor
      for (const p of m.dataPoints) {
        const s = seriesOf(m.descriptor.name, p.attributes)
        assert.ok(!(s in all), `${s} reported twice`)
        all[s] = p.value
        if (p.value !== 0) nonZero[s] = p.value
      }
    }
  }
  return { all, nonZero, descriptors }
}

/** Non-zero readings of the model API as `series -> value`. */
function nonZeroOf(readings) {
  return Object.fromEntries(readings.filter((r) => r.value !== 0).map((r) => [seriesOf(r.name, r.attributes), r.value]))
}

describe('the metric model', () => {
  it('METRICS is the core table: 17 frozen rows in code order', () => {
    assert.equal(METRICS.length, 17)
    assert.ok(Object.isFrozen(METRICS) && Object.isFrozen(METRICS[0]) && Object.isFrozen(METRICS[0].values))
    assert.deepEqual(METRICS[0], {
      name: 'holdoff.breaker.state',
      kind: 'gauge',
      unit: '1',
      description: "1 for the breaker's current state, 0 for the others.",
      attribute: 'state',
      values: ['closed', 'open', 'half_open', 'forced_open', 'disabled'],
    })
    const duration = METRICS.find((d) => d.name === 'holdoff.retry.wait.duration')
    assert.deepEqual([duration.kind, duration.unit, duration.attribute], ['counter', 's', 'source'])
    assert.equal(METRICS.find((d) => d.name === 'holdoff.group.evictions').attribute, null)
  })

  it('a breaker reports every series, zeros included, counted from its first read', () => {
    const clock = new ManualClock()
    const b = new Breaker({ clock })
    b.record(b.allow(), 'failure') // before the first read: not counted
    const first = b.metrics()
    assert.equal(first.length, 5 + 1 + 1 + 6 + 1 + 1 + 9)
    assert.deepEqual(first[0], { name: 'holdoff.breaker.state', attributes: { state: 'closed' }, value: 1 })
    assert.deepEqual(nonZeroOf(first), { 'holdoff.breaker.state{state=closed}': 1 })
    b.record(b.allow(), 'timeout')
    b.record(b.allow(), 'success')
    assert.deepEqual(nonZeroOf(b.metrics()), {
      'holdoff.breaker.state{state=closed}': 1,
      'holdoff.breaker.admitted': 2,
      'holdoff.breaker.outcomes{outcome=timeout}': 1,
      'holdoff.breaker.outcomes{outcome=success}': 1,
    })
  })

  it('a quota reports its tokens and its refusals', () => {
    const q = new RetryQuota({ capacity: 10, retryCost: 5 })
    q.metrics()
    q.acquire()
    q.acquire()
    q.acquire()
    assert.deepEqual(q.metrics(), [
      { name: 'holdoff.quota.tokens', attributes: {}, value: 0 },
      { name: 'holdoff.quota.refused', attributes: {}, value: 1 },
    ])
  })
})

// The breaker's story: 5 failures trip it, 2 calls are refused, after its 1 s interval a probe
// is admitted and succeeds, which closes it (recoveries 1).
describe('observe() with the OpenTelemetry metrics SDK', () => {
  it('a breaker: trip, refusals, probe, recovery, under its upstream', async () => {
    const { reader, meter } = sdk()
    const clock = new ManualClock()
    const b = new Breaker({ clock, trip: { policy: 'consecutive', threshold: 5 }, openInterval: { initialMs: 1000 }, recoveries: 1 })
    b.record(b.allow(), 'failure') // before observe: not counted
    const obs = observe(meter, b, { upstream: 'pay' })
    assert.ok(obs instanceof Observation)
    for (let i = 0; i < 4; i++) b.record(b.allow(), 'failure')
    assert.equal(b.state, 'open')
    assert.equal(b.tryAllow().admitted, false)
    assert.equal(b.tryAllow().admitted, false)

    let c = await collect(reader)
    assert.deepEqual(c.nonZero, {
      'holdoff.breaker.state{state=open,upstream=pay}': 1,
      'holdoff.breaker.admitted{upstream=pay}': 4,
      'holdoff.breaker.refused{upstream=pay}': 2,
      'holdoff.breaker.outcomes{outcome=failure,upstream=pay}': 4,
      'holdoff.breaker.transitions{reason=tripped,upstream=pay}': 1,
    })
    // Every series is there, zeros included; the instruments carry the table's kind and unit.
    assert.equal(Object.keys(c.all).length, 24)
    assert.equal(c.all['holdoff.breaker.state{state=closed,upstream=pay}'], 0)
    assert.equal(c.all['holdoff.breaker.stale_answers{upstream=pay}'], 0)
    assert.deepEqual(
      [c.descriptors['holdoff.breaker.state'].type, c.descriptors['holdoff.breaker.refused'].type, c.descriptors['holdoff.breaker.refused'].unit],
      ['OBSERVABLE_GAUGE', 'OBSERVABLE_COUNTER', '{call}'],
    )
    assert.equal(c.descriptors['holdoff.breaker.refused'].description, METRICS[2].description)

    clock.set(1000)
    const probe = b.allow()
    assert.equal(probe.probe, true)
    assert.equal(b.record(probe, 'success'), 'counted')
    c = await collect(reader)
    assert.deepEqual(c.nonZero, {
      'holdoff.breaker.state{state=closed,upstream=pay}': 1,
      'holdoff.breaker.admitted{upstream=pay}': 5,
      'holdoff.breaker.refused{upstream=pay}': 2,
      'holdoff.breaker.outcomes{outcome=failure,upstream=pay}': 4,
      'holdoff.breaker.outcomes{outcome=success,upstream=pay}': 1,
      'holdoff.breaker.probes{upstream=pay}': 1,
      'holdoff.breaker.transitions{reason=tripped,upstream=pay}': 1,
      'holdoff.breaker.transitions{reason=probe_admitted,upstream=pay}': 1,
      'holdoff.breaker.transitions{reason=recovered,upstream=pay}': 1,
    })

    // Closed: the target is no longer read (the SDK keeps reporting the last values it had).
    obs.close()
    obs.close()
    b.record(b.allow(), 'failure')
    c = await collect(reader)
    assert.equal(c.all['holdoff.breaker.admitted{upstream=pay}'], 5)
    assert.equal(b.metrics().find((r) => r.name === 'holdoff.breaker.admitted').value, 6)
  })

  // A call answered 429-like (the upstream asks for 2 s), retried after that wait, succeeds: the
  // policy reports its retry series, its breaker's and its quota's, under one upstream.
  it('a policy: a call retried after a Retry-After, with its breaker and quota', async () => {
    const { reader, meter } = sdk()
    const clock = new ManualClock()
    const timers = new ManualTimers(clock)
    const policy = new Policy({ clock, breaker: { recoveries: 1 }, quota: { capacity: 100, retryCost: 5 } })
    observe(meter, policy, { upstream: 'search' })
    let n = 0
    const fn = () => {
      n++
      if (n === 1) throw new RetryLaterError(2000)
      return 'ok'
    }
    const value = await timers.run(policy.execute(fn, { sleep: timers.sleep }))
    assert.equal(value, 'ok')
    assert.equal(clock.now(), 2000)
    const c = await collect(reader)
    assert.deepEqual(c.nonZero, {
      'holdoff.retry.attempts{upstream=search}': 2,
      'holdoff.retry.retries{upstream=search}': 1,
      'holdoff.retry.waits{source=retry_after,upstream=search}': 1,
      'holdoff.retry.wait.duration{source=retry_after,upstream=search}': 2,
      'holdoff.breaker.state{state=closed,upstream=search}': 1,
      'holdoff.breaker.admitted{upstream=search}': 2,
      'holdoff.breaker.outcomes{outcome=retry_later,upstream=search}': 1,
      'holdoff.breaker.outcomes{outcome=success,upstream=search}': 1,
      'holdoff.breaker.probes{upstream=search}': 1,
      'holdoff.breaker.transitions{reason=retry_later,upstream=search}': 1,
      'holdoff.breaker.transitions{reason=probe_admitted,upstream=search}': 1,
      'holdoff.breaker.transitions{reason=recovered,upstream=search}': 1,
      'holdoff.quota.tokens{upstream=search}': 100,
    })
    assert.equal(c.descriptors['holdoff.retry.wait.duration'].unit, 's')
    assert.equal(c.all['holdoff.retry.give_ups{reason=budget_spent,upstream=search}'], 0)
    assert.equal(c.all['holdoff.quota.refused{upstream=search}'], 0)
  })

  it('a group: its own series and each kept breaker under its key', async () => {
    const { reader, meter } = sdk()
    const clock = new ManualClock()
    const group = new BreakerGroup({ clock, maxKeys: 1, trip: { policy: 'consecutive', threshold: 1 } })
    observe(meter, group)
    const a = group.get('a')
    a.record(a.allow(), 'success')
    const b = group.get('b') // a is idle: evicted to make room
    b.record(b.allow(), 'failure')
    const c = await collect(reader)
    assert.deepEqual(c.nonZero, {
      'holdoff.group.keys': 1,
      'holdoff.group.evictions': 1,
      'holdoff.breaker.state{state=open,upstream=b}': 1,
      'holdoff.breaker.admitted{upstream=b}': 1,
      'holdoff.breaker.outcomes{outcome=failure,upstream=b}': 1,
      'holdoff.breaker.transitions{reason=tripped,upstream=b}': 1,
    })
    assert.deepEqual(nonZeroOf(group.metrics()), c.nonZero)
  })

  it('several targets on one meter share one instrument per table row', async () => {
    const { reader, meter } = sdk()
    const made = []
    const counting = new Proxy(meter, {
      get(target, prop) {
        const v = Reflect.get(target, prop)
        if (typeof v !== 'function') return v
        return (...args) => {
          if (String(prop).startsWith('createObservable')) made.push(args[0])
          return v.apply(target, args)
        }
      },
    })
    const clock = new ManualClock()
    const one = new Breaker({ clock })
    const two = new Breaker({ clock })
    observe(counting, one, { upstream: 'one' })
    observe(counting, two, { upstream: 'two' })
    observe(counting, new RetryQuota({ capacity: 20 }), { upstream: 'one' })
    assert.deepEqual(made, [...METRICS.filter((d) => d.name.startsWith('holdoff.breaker.')).map((d) => d.name), 'holdoff.quota.tokens', 'holdoff.quota.refused'])
    one.record(one.allow(), 'success')
    two.tryAllow()
    two.tryAllow()
    const c = await collect(reader)
    assert.equal(c.nonZero['holdoff.breaker.admitted{upstream=one}'], 1)
    assert.equal(c.nonZero['holdoff.breaker.admitted{upstream=two}'], 2)
    assert.equal(c.nonZero['holdoff.quota.tokens{upstream=one}'], 20)
  })

  it('refuses what it cannot observe, naming the field', () => {
    const { meter } = sdk()
    const clock = new ManualClock()
    const fails = (fn, field) => assert.throws(fn, (e) => e instanceof TypeError && e.code === 'invalid_input' && e.field === field)
    fails(() => observe(null, new Breaker({ clock })), 'meter')
    fails(() => observe({}, new Breaker({ clock })), 'meter')
    fails(() => observe(meter, {}), 'target')
    fails(() => observe(meter, new Breaker({ clock }), { upstream: 5 }), 'upstream')
    fails(() => observe(meter, new Breaker({ clock }), { upstream: '' }), 'upstream')
    fails(() => observe(meter, new BreakerGroup({ clock }), { upstream: 'x' }), 'upstream')
    fails(() => observe(meter, new Breaker({ clock }), 'x'), 'options')
  })
})

describe('retries as span events', () => {
  const exporter = new InMemorySpanExporter()
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
  const tracer = provider.getTracer('holdoff-test')
  let manager

  before(() => {
    manager = new AsyncLocalStorageContextManager().enable()
    assert.ok(context.setGlobalContextManager(manager))
  })
  after(() => {
    context.disable()
    manager.disable()
  })

  /** Runs `fn` in an active span named `name`; returns [its result or error, the span's events]. */
  async function traced(name, fn) {
    exporter.reset()
    let result
    await tracer.startActiveSpan(name, async (span) => {
      try {
        result = await fn()
      } catch (e) {
        result = e
      } finally {
        span.end()
      }
    })
    const [span] = exporter.getFinishedSpans()
    return [result, span.events.map((e) => ({ name: e.name, attributes: e.attributes }))]
  }

  function setup(options) {
    const clock = new ManualClock()
    const timers = new ManualTimers(clock)
    const policy = new Policy({ clock, ...options })
    // Each call waits and runs into attempt limits on the manual clock only.
    const execute = (fn) => timers.run(policy.execute(fn, { sleep: timers.sleep }))
    return { clock, policy, execute }
  }

  const refused = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' })

  const retryEvent = (attempt, outcome, delay, source, capped) => ({
    name: 'holdoff.retry',
    attributes: { 'holdoff.attempt': attempt, 'holdoff.outcome': outcome, 'holdoff.delay': delay, 'holdoff.source': source, 'holdoff.capped': capped },
  })

  it('nothing on a call that succeeds first time', async () => {
    const { execute } = setup()
    const [r, events] = await traced('first-try', () => execute(() => 'ok'))
    assert.equal(r, 'ok')
    assert.deepEqual(events, [])
  })

  it('one event per decided wait: its attempt, outcome, delay in seconds, source, capped', async () => {
    const { execute, clock } = setup()
    let n = 0
    const [r, events] = await traced('retried', () =>
      execute(() => {
        n++
        if (n === 1) throw refused()
        if (n === 2) throw new RetryLaterError(2500)
        return 'ok'
      }),
    )
    assert.equal(r, 'ok')
    assert.equal(clock.now(), 500 + 2500)
    assert.deepEqual(events, [retryEvent(1, 'failure', 0.5, 'backoff', false), retryEvent(2, 'retry_later', 2.5, 'retry_after', false)])
  })

  // The budget caps the server's 4 s at 1 s, but the breaker it opened holds for the full 4 s:
  // the wait is the breaker's, and capped says the server asked for more than the cap.
  it('a Retry-After above the cap is a capped wait', async () => {
    const { execute } = setup({ budget: { retryAfterCapMs: 1000 } })
    let n = 0
    const [r, events] = await traced('capped', () =>
      execute(() => {
        if (++n === 1) throw new RetryLaterError(4000)
        return 'ok'
      }),
    )
    assert.equal(r, 'ok')
    assert.deepEqual(events, [retryEvent(1, 'retry_later', 4, 'breaker', true)])
  })

  it('a give-up: its attempts and reason', async () => {
    const { execute } = setup({ budget: { maxRetries: 1 } })
    const [r, events] = await traced('gave-up', () =>
      execute(() => {
        throw refused()
      }),
    )
    assert.ok(r instanceof GiveUpError)
    assert.equal(r.reason, 'attempts_exhausted')
    assert.deepEqual(events, [
      retryEvent(1, 'failure', 0.5, 'backoff', false),
      { name: 'holdoff.give_up', attributes: { 'holdoff.attempts': 2, 'holdoff.reason': 'attempts_exhausted' } },
    ])
  })

  it('a breaker that refuses the call: a give-up after no attempt', async () => {
    const { execute, policy } = setup()
    policy.breaker.forceOpen()
    const [r, events] = await traced('refused', () => execute(() => 'ok'))
    assert.ok(r instanceof BreakerOpenError)
    assert.deepEqual(events, [{ name: 'holdoff.give_up', attributes: { 'holdoff.attempts': 0, 'holdoff.reason': 'breaker_open' } }])
  })

  it('no span, or one that does not record: nothing, and the call goes on', async () => {
    const { execute } = setup()
    let n = 0
    const fn = () => {
      if (++n % 2 === 1) throw refused()
      return 'ok'
    }
    assert.equal(await execute(fn), 'ok')
    const silent = trace.wrapSpanContext({ traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', traceFlags: 0 })
    assert.equal(silent.isRecording(), false)
    assert.equal(await context.with(trace.setSpan(context.active(), silent), () => execute(fn)), 'ok')
    assert.equal(n, 4)
  })
})
