// A small typed example of the public API; `run.sh test` type-checks it with `tsc --noEmit`
// against the installed package (holdoff.d.ts and the generated index.d.ts).
import {
  Breaker,
  BreakerGroup,
  BreakerOpenError,
  Classifier,
  GiveUpError,
  ManualClock,
  Policy,
  PolicyCall,
  RetryBudget,
  RetryLaterError,
  RetryQuota,
  RetryState,
  UpstreamUnavailableError,
  parseRetryAfter,
  hintFromHeaders,
  memoryStoreControl,
  sleep,
  type Before,
  type FleetSync,
  type Decision,
  type GroupSnapshot,
  type QuotaLease,
  type Snapshot,
  type StateChange,
} from 'holdoff'
import { METRICS, observe, type MetricReading, type Observation } from 'holdoff'
import { metrics, type Meter } from '@opentelemetry/api'
// @ts-expect-error the native layer is no export of the package
import type * as native from 'holdoff/native'

const clock = new ManualClock({ wallOriginUnixMs: Date.UTC(2024, 0, 1) })
const breaker = new Breaker({
  trip: { policy: 'window', threshold: 5, windowMs: 10_000 },
  openInterval: { initialMs: 30_000, multiplier: 2, maxMs: 300_000 },
  recoveries: 3,
  clock,
})
breaker.on('stateChange', (e: StateChange) => {
  const from: string = e.from
  const open: number | null = e.openForMs
  void from, open
})

const r = breaker.tryAllow()
if (r.admitted) {
  const effect: 'counted' | 'stale' | 'ignored' = breaker.record(r, 'success')
  void effect
} else {
  const wait: number | null = r.retryAfterMs
  void wait
}
try {
  const p = breaker.allow()
  breaker.record(p, { retryLaterMs: 5_000 })
} catch (e) {
  if (e instanceof BreakerOpenError) {
    const ms: number | null = e.retryAfterMs
    void ms
  }
}
const s: Snapshot = breaker.snapshot()
const state: 'closed' | 'open' | 'half_open' | 'forced_open' | 'disabled' = s.state
void state

const group = new BreakerGroup({ clock, maxKeys: 1000, trip: { threshold: 3 } })
group.get('registry.example').allow()
const gs: GroupSnapshot = group.snapshot()
const bounded: number = gs.maxKeys + gs.size + gs.evictions + gs.overflows + group.maxKeys
void bounded

const budget = new RetryBudget({ maxRateLimitDurationMs: 1_800_000, retryAfterCapMs: 300_000, giveUpAboveCap: true, clock })
const retryState: RetryState = budget.newCall()
const d: Decision = budget.decide(retryState, { retryLaterMs: 180_000 })
const retries: number = retryState.retries
void retries
if (d.decision === 'retry') {
  const delay: number = d.delayMs
  void delay
} else if (d.decision === 'give_up' && d.reason === 'retry_after_above_cap') {
  const asked: number | null = d.serverDelayMs
  void asked
}

const quota = new RetryQuota({ capacity: 100 })
const lease = quota.acquire()
if (lease.acquired) {
  const l: QuotaLease = lease
  const left: number = quota.onSuccess(l)
  const back: boolean = l.givenBack
  void left, back
}

const ra = parseRetryAfter('Wed, 21 Oct 2015 07:28:00 GMT', { now: new Date() })
if (ra.delayMs !== undefined) void (ra.delayMs + 1)
const hint = hintFromHeaders([['retry-after', '120']], { clock })
void hint.source

const classifier = new Classifier({ failureStatuses: [403] })
const c = classifier.classify(429, new Headers({ 'retry-after': '3' }))
const should: boolean | null = c.shouldRetry
const src: 'retry_after_ms' | 'x_ms_retry_after_ms' | 'retry_after' | 'ratelimit' | 'ratelimit_reset' | 'x_ratelimit_reset' | 'none' = c.source
void should, src
breaker.tryAllow()

const policy = new Policy({ breaker, budget, quota: new RetryQuota({ capacity: 100 }), classifier })
// The manual API around one attempt.
const pcall: PolicyCall = policy.newCall()
const before: Before = policy.beforeAttempt(pcall)
if (before.action === 'go') {
  const after: Decision = policy.afterAttempt(pcall, before.permit, 'success')
  void after
} else if (before.action === 'wait') {
  void before.delayMs
}
class NotFound extends Error {}
async function main(): Promise<void> {
  const n: number = await policy.execute(async (signal: AbortSignal) => {
    signal.throwIfAborted()
    return 42
  }, {
    signal: AbortSignal.timeout(10_000),
    attemptTimeoutMs: 2000,
    totalTimeoutMs: null,
    classify: (e) => (e instanceof NotFound ? 'answer' : undefined),
    classifyResult: (v) => (v === 42 ? 'success' : 'failure'),
    onRetry: ({ attempt, delayMs, source, capped, serverDelayMs }) => console.log(attempt, delayMs, source, capped, serverDelayMs),
    onAttempt: ({ attempt, probe, outcome }) => console.log(attempt, probe, outcome),
  })
  const res: Response = await policy.fetch('http://127.0.0.1:1/', { method: 'HEAD' }, { totalTimeoutMs: 30_000, fetch: globalThis.fetch })
  const same = await policy.executeResponse(async () => ({ status: 200, headers: { 'retry-after': '1' } }))
  void n, res, same.status, c.outcome
  try {
    await policy.execute(() => Promise.reject(new RetryLaterError(5000)))
  } catch (e) {
    if (e instanceof UpstreamUnavailableError) {
      const after: number | null = e.retryAfterMs
      const server: number | null = e.serverDelayMs
      void after, server, e.capped, e.attempts, e.cause
    }
    if (e instanceof GiveUpError) console.log(e.reason, e.attempts, e.code, e.response)
  }
  await sleep(0)
}
void main

// A breaker shared by a fleet: options in milliseconds, one tick by hand, close.
async function fleet(): Promise<void> {
  const shared = new Breaker({ clock, fleet: { url: 'memory://example', key: 'payments-api', refreshMs: 20 } })
  memoryStoreControl('example', 'flush')
  const tick: FleetSync | null = await shared.syncFleet()
  const open: boolean = tick !== null && tick.ok && tick.record?.state === 'open'
  const attached: boolean = shared.fleetAttached
  void [open, attached]
  await shared.close()
  const p = new Policy({ breaker: { recoveries: 2 }, fleet: { url: 'unix:///run/redis.sock', key: 'k' } })
  await p.close()
}
void fleet

// @ts-expect-error groups stay local: no fleet option
new BreakerGroup({ fleet: { url: 'memory://g', key: 'k' } })
// @ts-expect-error fleet durations are milliseconds: refreshMs
new Breaker({ fleet: { url: 'memory://x', key: 'k', refresh: 0.02 } })

// @ts-expect-error executeResponse classifies responses itself
policy.executeResponse(async () => ({ status: 200 }), { classifyResult: () => 'success' })
// @ts-expect-error a limit is a number of milliseconds or null
policy.execute(async () => 1, { totalTimeoutMs: '60s' })

// Wrong shapes do not type-check:
// @ts-expect-error durations are numbers, not BigInt
new Breaker({ probeTimeoutMs: 10n })
// @ts-expect-error not an outcome
breaker.record(breaker.allow(), 'boom')
// @ts-expect-error maxKeys is a group option, not a breaker option
new Breaker({ maxKeys: 10 })
// @ts-expect-error an options object, or undefined for the defaults; null is refused
new Policy({ breaker: null })
// @ts-expect-error giveUpAboveCap is a boolean
new RetryBudget({ giveUpAboveCap: 1 })
// @ts-expect-error a window trip needs windowMs
new Breaker({ trip: { policy: 'window', threshold: 3 } })

// Metrics: the table, readings, and observe() with @opentelemetry/api's own Meter type.
const meter: Meter = metrics.getMeter('example')
const observation: Observation = observe(meter, new Policy({ quota: {} }), { upstream: 'payments' })
observation.close()
observe(meter, new BreakerGroup())
const readings: MetricReading[] = new Breaker().metrics()
const firstValue: number = readings[0].value
const units: string[] = METRICS.map((d) => d.unit)
const refusedBy: string | undefined = new RetryQuota().metrics()[1].attributes.upstream
// @ts-expect-error upstream is a string
observe(meter, new Breaker(), { upstream: 1 })
// @ts-expect-error a budget is no target
observe(meter, new RetryBudget())
void [firstValue, units, refusedBy]
