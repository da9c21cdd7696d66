// The conformance runner for Node: every case of conformance/cases through holdoff's public
// JavaScript API, following conformance/README.md (the reference runner is
// core/tests/conformance.rs): one subtest per case, and a case with `execute` steps once per
// helper flavour it applies to (`id [flavour]`, see conformance-execute.mjs), each on a fresh
// build. HOLDOFF_CONFORMANCE_DIR points at the suite (default: the repository's, relative to
// this file); HOLDOFF_CASES=substring runs only matching ids. A fleet case (`workers`, a
// `config.fleet`) builds its workers' breakers on the case's one manual clock, each attached to
// the case's in-memory store, reset before the case. Every object a case builds has its metrics
// read once right after it is built (counting starts at that read), and a `metrics` step compares
// the non-zero readings, written as series, with the case's.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import {
  Breaker,
  BreakerGroup,
  Classifier,
  ManualClock,
  Policy,
  RetryBudget,
  RetryQuota,
  parseRetryAfter,
  hintFromHeaders,
  memoryStoreControl,
  memoryStoreReset,
} from 'holdoff'
import { checkExecute, flavoursOf, runExecute } from './conformance-execute.mjs'
import { ManualTimers } from './manual-timers.mjs'

const SUITE_VERSION = 4
const here = dirname(fileURLToPath(import.meta.url))
const root = process.env.HOLDOFF_CONFORMANCE_DIR ?? join(here, '..', '..', '..', 'conformance')

// ---- configuration: the neutral format (snake_case) to the JavaScript options (camelCase) ----

const special = (v) => (v === 'NaN' ? NaN : v === 'Infinity' ? Infinity : v === '-Infinity' ? -Infinity : v)

function rename(src, table, what) {
  if (src === undefined || src === null) return undefined
  const out = {}
  for (const [k, v] of Object.entries(src)) {
    const entry = table[k]
    if (entry === undefined) throw new Error(`unknown ${what} key ${k}`)
    const [name, conv] = entry
    out[name] = conv(v)
  }
  return out
}

const plain = (v) => special(v)
const BACKOFF = { initial_ms: ['initialMs', plain], multiplier: ['multiplier', plain], max_ms: ['maxMs', plain], jitter: ['jitter', plain] }
const backoff = (v) => rename(v, BACKOFF, 'backoff')
const TRIP = {
  policy: ['policy', plain],
  threshold: ['threshold', plain],
  window_ms: ['windowMs', plain],
  min_calls: ['minCalls', plain],
  buckets: ['buckets', plain],
}
const BREAKER = {
  trip: ['trip', (v) => rename(v, TRIP, 'trip')],
  open_interval: ['openInterval', backoff],
  recoveries: ['recoveries', plain],
  max_probes_in_flight: ['maxProbesInFlight', plain],
  probe_timeout_ms: ['probeTimeoutMs', plain],
  max_retry_later_ms: ['maxRetryLaterMs', plain],
  seed: ['seed', plain],
}
const BUDGET = {
  max_rate_limit_duration_ms: ['maxRateLimitDurationMs', plain],
  retry_after_cap_ms: ['retryAfterCapMs', plain],
  max_retries: ['maxRetries', plain],
  backoff: ['backoff', backoff],
  max_backoff_duration_ms: ['maxBackoffDurationMs', plain],
  give_up_above_cap: ['giveUpAboveCap', plain],
  seed: ['seed', plain],
}
const QUOTA = {
  capacity: ['capacity', plain],
  retry_cost: ['retryCost', plain],
  timeout_cost: ['timeoutCost', plain],
  success_refill: ['successRefill', plain],
}
const CLASSIFIER = {
  failure_statuses: ['failureStatuses', plain],
  answer_statuses: ['answerStatuses', plain],
  retry_after_statuses: ['retryAfterStatuses', plain],
  rate_limit_default_wait_ms: ['rateLimitDefaultWaitMs', plain],
}
const GROUP = { max_keys: ['maxKeys', plain] }
const EXECUTE = { attempt_timeout_ms: ['attemptTimeoutMs', plain], total_timeout_ms: ['totalTimeoutMs', plain] }
const FLEET = {
  url: ['url', plain],
  key: ['key', plain],
  refresh_ms: ['refreshMs', plain],
  fallback_after_ms: ['fallbackAfterMs', plain],
  timeout_ms: ['timeoutMs', plain],
  ttl_ms: ['ttlMs', plain],
}
const CONFIG_KEYS = new Set(['breaker', 'budget', 'quota', 'classifier', 'group', 'execute', 'fleet'])
const MEMORY = 'memory://'

function outcome(v) {
  if (typeof v === 'string') return v
  if (v !== null && typeof v === 'object' && Number.isInteger(v.retry_later_ms)) return { retryLaterMs: v.retry_later_ms }
  throw new Error(`bad outcome ${JSON.stringify(v)}`)
}

// ---- expectations ----

function check(expect, actual, known) {
  if (expect === undefined) return
  assert.ok(expect !== null && typeof expect === 'object', 'expect must be an object')
  for (const [k, want] of Object.entries(expect)) {
    if (!known.includes(k)) throw new Error(`unknown expect key ${JSON.stringify(k)}`)
    const got = actual[k] === undefined ? null : actual[k]
    const same = typeof want === 'number' && typeof got === 'number' ? want === got : JSON.stringify(want) === JSON.stringify(got)
    if (!same) throw new Error(`${k}: expected ${JSON.stringify(want)}, got ${JSON.stringify(got)}  (all: ${JSON.stringify(actual)})`)
  }
}

// Readings as series (`name` or `name{k=v,...}`, attributes sorted by key), zeros dropped, must
// equal `expect.series` exactly: the same keys, each value within 1e-9.
function checkMetrics(expect, readings) {
  if (expect === null || typeof expect !== 'object') throw new Error('metrics needs expect')
  for (const k of Object.keys(expect)) if (k !== 'series') throw new Error(`unknown expect key ${JSON.stringify(k)}`)
  const want = expect.series
  if (want === null || typeof want !== 'object') throw new Error('metrics needs expect.series')
  const got = {}
  for (const r of readings) {
    if (r.value === 0) continue
    const attrs = Object.entries(r.attributes).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    const series = attrs.length === 0 ? r.name : `${r.name}{${attrs.map(([k, v]) => `${k}=${v}`).join(',')}}`
    if (series in got) throw new Error(`series ${series} read twice`)
    got[series] = r.value
  }
  const keys = new Set([...Object.keys(want), ...Object.keys(got)])
  const wrong = [...keys].sort().filter((k) => !(k in want && k in got && Math.abs(want[k] - got[k]) <= 1e-9))
  if (wrong.length > 0) {
    const show = (m, k) => (k in m ? m[k] : 'absent')
    throw new Error(`series differ: ${wrong.map((k) => `${k}: expected ${show(want, k)}, got ${show(got, k)}`).join('; ')}  (all: ${JSON.stringify(got)})`)
  }
}

const DECISION_KEYS = ['decision', 'delay_ms', 'source', 'server_delay_ms', 'capped', 'reason']

function decisionJson(d) {
  const a = { decision: d.decision }
  if (d.decision === 'retry') {
    Object.assign(a, { delay_ms: d.delayMs, source: d.source, server_delay_ms: d.serverDelayMs, capped: d.capped })
  } else if (d.decision === 'give_up') {
    Object.assign(a, { reason: d.reason, server_delay_ms: d.serverDelayMs })
  }
  return a
}

function hintJson(h) {
  return 'delayMs' in h ? { delay_ms: h.delayMs } : { unusable: h.unusable }
}

function errorName(e) {
  if (e && typeof e.code === 'string') return e.code
  throw e
}

// ---- one case ----

class Ctx {
  constructor(c) {
    const config = c.config ?? {}
    for (const k of Object.keys(config)) if (!CONFIG_KEYS.has(k)) throw new Error(`unknown config key ${k}`)
    this.config = config
    this.clock = new ManualClock({ wallOriginUnixMs: c.clock?.wall_origin_unix_ms ?? 0 })
    this.timers = new ManualTimers(this.clock)
    // Absent limits stay absent (the helper's defaults); null is no limit.
    this.executeOptions = rename(config.execute, EXECUTE, 'execute') ?? {}
    this.breakerOpts = rename(config.breaker, BREAKER, 'breaker')
    const fleet = rename(config.fleet, FLEET, 'fleet')
    // A fresh store for the case: its workers attach (and so read it) as they are built.
    if (typeof fleet?.url === 'string' && fleet.url.startsWith(MEMORY)) memoryStoreReset(fleet.url.slice(MEMORY.length))
    // The workers: each a breaker from the case's config, worker 0 the case's own breaker.
    this.workers = []
    // Same order as the reference runner, so that the first refusal is the same one.
    if (this.breakerOpts !== undefined || fleet !== undefined) {
      const opts = { ...this.breakerOpts, clock: this.clock, ...(fleet === undefined ? {} : { fleet }) }
      if (c.group === true) this.group = new BreakerGroup({ ...opts, ...rename(config.group, GROUP, 'group') })
      else this.breakerObj = new Breaker(opts)
      if (fleet !== undefined) {
        this.fleetUrl = fleet.url
        this.workers.push(this.breakerObj)
        for (let i = 1; i < (c.workers ?? 1); i++) this.workers.push(new Breaker(opts))
      }
    }
    if (config.budget !== undefined) this.budget = new RetryBudget({ ...rename(config.budget, BUDGET, 'budget'), clock: this.clock })
    if (config.quota !== undefined) this.quota = new RetryQuota(rename(config.quota, QUOTA, 'quota'))
    this.classifier = new Classifier(rename(config.classifier, CLASSIFIER, 'classifier'))
    if (c.policy === true) {
      if (!this.breakerObj || !this.budget) throw new Error('a policy case needs a breaker and a budget')
      this.policy = new Policy({ breaker: this.breakerObj, budget: this.budget, quota: this.quota, classifier: this.classifier })
    }
    // Counting starts at an object's first read of its metrics: read each once now, so the
    // `metrics` steps count the whole case.
    for (const o of [this.breakerObj, ...this.workers.slice(1), this.group, this.quota, this.policy]) o?.metrics()
    this.permits = new Map()
    this.calls = new Map()
    this.policyCalls = new Map()
    this.leases = new Map()
  }

  // A step naming a key asks the group once: the breaker it hands out now (which marks the key
  // used, and may evict or overflow).
  breaker(step) {
    if (step.worker !== undefined) {
      const w = this.workers[step.worker]
      if (!w) throw new Error(`no worker ${step.worker}`)
      return w
    }
    if (typeof step.key === 'string') {
      if (!this.group) throw new Error('step names a key but the case has no group')
      return this.group.get(step.key)
    }
    if (!this.breakerObj) throw new Error('the case has no breaker')
    return this.breakerObj
  }

  // The readings a `metrics` step names with `of` (and `worker`, in a fleet case).
  metricsOf(step) {
    const of = {
      breaker: () => this.breaker(step),
      policy: () => this.policy,
      quota: () => this.quota,
      group: () => this.group,
    }[step.of]
    if (of === undefined) throw new Error(`metrics: unknown of ${JSON.stringify(step.of)}`)
    const o = of()
    if (!o) throw new Error(`metrics: the case has no ${step.of}`)
    return o.metrics()
  }

  allow(step, a) {
    const b = this.breaker(step)
    const r = b.tryAllow()
    if (r.admitted) {
      Object.assign(a, { admitted: true, episode: r.episode, probe: r.probe })
      // Recorded later on the breaker object that admitted it, as user code does.
      this.permits.set(step.as ?? '_last', { permit: r, breaker: b })
      return true
    }
    Object.assign(a, { admitted: false, retry_after_ms: r.retryAfterMs, state: r.state })
    return false
  }

  record(name, o, a) {
    const held = this.permits.get(name)
    if (!held) throw new Error(`no permit named ${name}`)
    try {
      a.effect = held.breaker.record(held.permit, o)
    } catch (e) {
      a.error = errorName(e)
    }
  }

  async step(step, flavour) {
    const expect = step.expect
    const a = {}
    const callName = step.call ?? 'default'
    switch (step.op) {
      case 'allow':
        this.allow(step, a)
        return check(expect, a, ['admitted', 'episode', 'probe', 'retry_after_ms', 'state'])
      case 'record':
        if (typeof step.permit !== 'string') throw new Error('record needs permit')
        this.record(step.permit, outcome(step.outcome), a)
        return check(expect, a, ['effect', 'error'])
      case 'call': {
        const o = outcome(step.outcome)
        if (this.allow(step, a)) this.record(step.as ?? '_last', o, a)
        return check(expect, a, ['admitted', 'episode', 'probe', 'retry_after_ms', 'state', 'effect'])
      }
      case 'record_foreign': {
        const held = this.permits.get(step.permit)
        if (!held) throw new Error(`no permit named ${step.permit}`)
        const other = new Breaker({ ...this.breakerOpts, clock: this.clock })
        try {
          a.effect = other.record(held.permit, 'success')
        } catch (e) {
          a.error = errorName(e)
        }
        return check(expect, a, ['error', 'effect'])
      }
      case 'snapshot': {
        const s = this.breaker(step).snapshot()
        Object.assign(a, {
          state: s.state,
          episode: s.episode,
          failures: s.failures,
          recoveries: s.recoveries,
          probes_in_flight: s.probesInFlight,
          retry_after_ms: s.retryAfterMs,
          probe_ready: s.probeReady,
          interval_ms: s.intervalMs,
          opens: s.opens,
          closes: s.closes,
          probes: s.probes,
          refusals: s.refusals,
          stale_answers: s.staleAnswers,
        })
        return check(expect, a, Object.keys(a))
      }
      case 'events': {
        const got = this.breaker(step).drainEvents().map((e) => ({
          at: e.atMs,
          from: e.from,
          to: e.to,
          episode: e.episode,
          reason: e.reason,
          requested_delay_ms: e.requestedDelayMs,
          open_for_ms: e.openForMs,
        }))
        if (!Array.isArray(expect)) throw new Error('events expects an array')
        if (expect.length !== got.length) throw new Error(`expected ${expect.length} events, got ${got.length}: ${JSON.stringify(got)}`)
        expect.forEach((w, i) => {
          try {
            check(w, got[i], ['at', 'from', 'to', 'episode', 'reason', 'requested_delay_ms', 'open_for_ms'])
          } catch (e) {
            throw new Error(`event ${i}: ${e.message}`, { cause: e })
          }
        })
        return
      }
      case 'force_open':
        this.breaker(step).forceOpen()
        return check(expect, a, [])
      case 'disable':
        this.breaker(step).disable()
        return check(expect, a, [])
      case 'reset':
        this.breaker(step).reset()
        return check(expect, a, [])
      case 'clock_set':
        if (!Number.isInteger(step.to_ms)) throw new Error('clock_set needs to_ms')
        try {
          this.clock.set(step.to_ms)
        } catch (e) {
          a.error = errorName(e)
        }
        return check(expect, a, ['error'])
      case 'clock_advance':
        if (!Number.isInteger(step.by_ms)) throw new Error('clock_advance needs by_ms')
        this.clock.advance(step.by_ms)
        return check(expect, a, [])
      case 'decide': {
        if (!this.budget) throw new Error('the case has no budget')
        if (!this.calls.has(callName)) this.calls.set(callName, this.budget.newCall())
        return check(expect, decisionJson(this.budget.decide(this.calls.get(callName), outcome(step.outcome))), DECISION_KEYS)
      }
      case 'budget_state': {
        if (!this.budget) throw new Error('the case has no budget')
        const start = this.budget.episodeStartMs
        Object.assign(a, {
          episode_active: start !== null,
          episode_start_ms: start,
          retries: this.calls.get(callName)?.retries ?? 0,
        })
        return check(expect, a, ['episode_active', 'episode_start_ms', 'retries'])
      }
      case 'parse_retry_after':
        if (typeof step.value !== 'string') throw new Error('parse_retry_after needs value')
        return check(expect, hintJson(parseRetryAfter(step.value, { clock: this.clock })), ['delay_ms', 'unusable'])
      case 'hint': {
        const h = hintFromHeaders(step.headers ?? [], { clock: this.clock })
        return check(expect, { ...hintJson(h), source: h.source }, ['delay_ms', 'unusable', 'source'])
      }
      case 'classify': {
        if (!Number.isInteger(step.status)) throw new Error('classify needs status')
        try {
          const c = this.classifier.classify(step.status, step.headers ?? [], { clock: this.clock })
          Object.assign(a, { outcome: c.outcome, retry_later_ms: c.retryLaterMs })
        } catch (e) {
          a.error = errorName(e)
        }
        return check(expect, a, ['outcome', 'retry_later_ms', 'error'])
      }
      case 'quota_acquire': {
        if (!this.quota) throw new Error('the case has no quota')
        const r = this.quota.acquire({ timeout: step.timeout === true })
        Object.assign(a, { acquired: r.acquired, cost: r.cost, available: r.available })
        if (r.acquired && typeof step.as === 'string') this.leases.set(step.as, r)
        return check(expect, a, ['acquired', 'cost', 'available'])
      }
      case 'quota_success': {
        if (!this.quota) throw new Error('the case has no quota')
        let lease
        if (typeof step.lease === 'string') {
          lease = this.leases.get(step.lease)
          if (!lease) throw new Error(`no lease named ${step.lease}`)
        }
        // A second quota built from the same config, for a lease given to the wrong quota.
        const to = step.foreign === true ? new RetryQuota(rename(this.config.quota, QUOTA, 'quota')) : this.quota
        try {
          to.onSuccess(lease)
        } catch (e) {
          a.error = errorName(e)
        }
        a.available = this.quota.available
        return check(expect, a, ['available', 'error'])
      }
      case 'group_snapshot': {
        if (!this.group) throw new Error('the case has no group')
        const s = this.group.snapshot()
        Object.assign(a, { keys: this.group.keys(), max_keys: s.maxKeys, evictions: s.evictions, overflows: s.overflows })
        return check(expect, a, ['keys', 'max_keys', 'evictions', 'overflows'])
      }
      case 'before': {
        if (!this.policy) throw new Error('the case has no policy')
        if (!this.policyCalls.has(callName)) this.policyCalls.set(callName, this.policy.newCall())
        const r = this.policy.beforeAttempt(this.policyCalls.get(callName))
        a.action = r.action
        if (r.action === 'go') {
          Object.assign(a, { episode: r.permit.episode, probe: r.permit.probe })
          this.permits.set(step.as ?? '_last', { permit: r.permit, breaker: this.policy.breaker })
        } else if (r.action === 'wait') {
          a.delay_ms = r.delayMs
        } else {
          Object.assign(a, { reason: r.reason, retry_after_ms: r.retryAfterMs })
        }
        return check(expect, a, ['action', 'episode', 'probe', 'delay_ms', 'reason', 'retry_after_ms'])
      }
      case 'after': {
        if (!this.policy) throw new Error('the case has no policy')
        const name = step.permit ?? '_last'
        const held = this.permits.get(name)
        if (!held) throw new Error(`no permit named ${name}`)
        if (!this.policyCalls.has(callName)) this.policyCalls.set(callName, this.policy.newCall())
        const call = this.policyCalls.get(callName)
        let r
        try {
          if (Number.isInteger(step.status)) {
            const d = this.policy.afterResponse(call, held.permit, step.status, step.headers ?? [])
            r = { ...decisionJson(d), outcome: d.outcome }
          } else {
            if (step.outcome === undefined) throw new Error('after needs outcome or status')
            r = decisionJson(this.policy.afterAttempt(call, held.permit, outcome(step.outcome)))
          }
        } catch (e) {
          r = { error: errorName(e) }
        }
        return check(expect, r, [...DECISION_KEYS, 'error', 'outcome'])
      }
      case 'fleet_sync': {
        if (this.workers.length === 0) throw new Error('the case has no fleet')
        const which = step.worker === undefined ? this.workers.keys() : [step.worker]
        for (const i of which) {
          const w = this.workers[i]
          if (!w) throw new Error(`no worker ${i}`)
          const r = await w.syncFleet()
          const rec = r.record
          const got = {
            ok: r.ok,
            attached: r.attached,
            granted: r.granted,
            fleet_state: rec?.state ?? null,
            fleet_episode: rec?.episode ?? null,
            fleet_recoveries: rec?.recoveries ?? null,
          }
          try {
            check(expect, got, ['ok', 'attached', 'granted', 'fleet_state', 'fleet_episode', 'fleet_recoveries'])
          } catch (e) {
            throw new Error(`worker ${i}: ${e.message}`, { cause: e })
          }
        }
        return
      }
      case 'fleet_store': {
        if (typeof this.fleetUrl !== 'string' || !this.fleetUrl.startsWith(MEMORY)) throw new Error('the case has no memory:// fleet')
        if (typeof step.action !== 'string') throw new Error('fleet_store needs action')
        memoryStoreControl(this.fleetUrl.slice(MEMORY.length), step.action)
        return check(expect, a, [])
      }
      case 'metrics':
        return checkMetrics(expect, this.metricsOf(step))
      case 'execute': {
        if (!this.policy) throw new Error('the case has no policy')
        if (flavour === undefined) throw new Error('an execute step in a case without flavours')
        return checkExecute(expect, await runExecute(this, step, flavour), check)
      }
      default:
        throw new Error(`unknown op ${JSON.stringify(step.op)}`)
    }
  }
}

async function runCase(c, flavour) {
  let ctx
  try {
    ctx = new Ctx(c)
  } catch (e) {
    if (c.expect_error === undefined) throw new Error(`configuration refused: ${e.message}`, { cause: e })
    const a = { error: errorName(e) }
    if (typeof e.field === 'string') a.field = e.field
    return check(c.expect_error, a, ['error', 'field'])
  }
  if (c.expect_error !== undefined) throw new Error(`expected configuration error ${JSON.stringify(c.expect_error)}, but it built`)
  if (!Array.isArray(c.steps)) throw new Error('case without steps')
  try {
    await runSteps(ctx, c, flavour)
  } finally {
    for (const w of ctx.workers) await w.close()
  }
}

async function runSteps(ctx, c, flavour) {
  for (const [i, step] of c.steps.entries()) {
    const repeat = step.repeat ?? 1
    const every = step.every_ms ?? 0
    for (let r = 0; r < repeat; r++) {
      if (step.at !== undefined) ctx.clock.set(step.at + r * every)
      try {
        await ctx.step(step, flavour)
      } catch (e) {
        const rep = repeat > 1 ? ` (repetition ${r})` : ''
        throw new Error(`step ${i} ${step.op} at ${ctx.clock.now()}${rep}: ${e.message}`, { cause: e })
      }
    }
  }
}

function caseFiles(dir) {
  const out = []
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name)
    if (statSync(p).isDirectory()) out.push(...caseFiles(p))
    else if (name.endsWith('.json')) out.push(p)
  }
  return out
}

const version = Number(readFileSync(join(root, 'VERSION'), 'utf8').trim())
const filter = process.env.HOLDOFF_CASES ?? ''
const cases = []
const ids = new Set()
for (const file of caseFiles(join(root, 'cases'))) {
  for (const c of JSON.parse(readFileSync(file, 'utf8')).cases) {
    if (ids.has(c.id)) throw new Error(`duplicate case id ${c.id}`)
    ids.add(c.id)
    if (c.id.includes(filter)) cases.push(c)
  }
}

// Checked before any case runs, and not as cases of their own, so that the count of subtests is
// the count of (case, flavour) pairs.
assert.equal(version, SUITE_VERSION, `runner written for suite version ${SUITE_VERSION}`)
assert.ok(cases.length > 0, 'no conformance cases found')

describe('conformance', () => {
  for (const c of cases) {
    const flavours = flavoursOf(c)
    if (flavours === null) it(c.id, () => runCase(c))
    else for (const f of flavours) it(`${c.id} [${f}]`, () => runCase(c, f))
  }
})
