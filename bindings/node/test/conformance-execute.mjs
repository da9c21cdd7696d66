// The conformance runner's `execute` op (conformance/README.md, "Execute: the retry helpers"):
// one logical call through a real public helper, the operation following the case's script, the
// waits and attempt time limits on a ManualTimers over the case's ManualClock, the hooks
// recording what a user sees.
//
// Flavours: `execute` (plain), `executeResponse` and `fetch` (HTTP; `fetch` with a
// fetch-compatible stub passed as its `fetch` option, which honours the attempt's signal as
// fetch does). A script with a `returns` item runs in the plain flavour only, one with a
// `response` item in the HTTP flavours only, any other in all three.
import { BreakerOpenError, GiveUpError, RetryLaterError, UpstreamUnavailableError } from 'holdoff'
import { turn } from './manual-timers.mjs'

export const FLAVOURS = ['execute', 'executeResponse', 'fetch']
const HTTP = new Set(['executeResponse', 'fetch'])
const ITEM_KEYS = new Set(['returns', 'response', 'raises', 'hits_deadline', 'cancelled', 'takes_ms'])
const URL_ = 'http://upstream.test/'

/** The flavours a case runs in, or null for a case without an `execute` step. */
export function flavoursOf(c) {
  const items = (c.steps ?? []).filter((s) => s.op === 'execute').flatMap((s) => s.script ?? [])
  if (items.length === 0) return null
  const returns = items.some((i) => 'returns' in i)
  const response = items.some((i) => 'response' in i)
  if (returns && response) throw new Error('a script with both returns and response items fits no flavour')
  if (returns) return ['execute']
  if (response) return [...HTTP]
  return FLAVOURS
}

/** The runner's own error type, which its classifier calls an answer. */
class RunnerAnswer extends Error {
  constructor(n) {
    super(`a final answer raised by attempt ${n}`)
    this.name = 'RunnerAnswer'
  }
}

function outcomeOf(v) {
  if (typeof v === 'string') return v
  if (v !== null && typeof v === 'object' && Number.isInteger(v.retry_later_ms)) return { retryLaterMs: v.retry_later_ms }
  throw new Error(`bad outcome ${JSON.stringify(v)}`)
}

// A real programming error, as user code makes one.
function bug() {
  const read = (o) => o.field
  try {
    read(null)
  } catch (e) {
    return e
  }
  throw new Error('unreachable')
}

// The language's usual errors: Node's system errors for a plain function, fetch's wrapping of
// undici's errors for the HTTP flavours.
function errorOf(raises, n, http) {
  if (raises !== null && typeof raises === 'object') return new RetryLaterError(outcomeOf(raises).retryLaterMs)
  switch (raises) {
    case 'transport': {
      const e = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:80'), { code: 'ECONNREFUSED', errno: -111, syscall: 'connect' })
      return http ? new TypeError('fetch failed', { cause: e }) : e
    }
    case 'timeout': {
      if (!http) return Object.assign(new Error('connect ETIMEDOUT 10.0.0.1:80'), { code: 'ETIMEDOUT', errno: -110, syscall: 'connect' })
      const cause = Object.assign(new Error('Connect Timeout Error'), { name: 'ConnectTimeoutError', code: 'UND_ERR_CONNECT_TIMEOUT' })
      return new TypeError('fetch failed', { cause })
    }
    case 'answer':
      return new RunnerAnswer(n)
    case 'bug':
      return bug()
  }
  throw new Error(`unknown raise ${JSON.stringify(raises)}`)
}

// A real Response where fetch's constructor takes the status (200..599), else the helper's shape.
function responseOf(r) {
  if (!Number.isInteger(r?.status)) throw new Error('a response needs a status')
  const headers = r.headers ?? []
  if (r.status >= 200 && r.status <= 599) return new Response(null, { status: r.status, headers })
  return { status: r.status, headers: new Headers(headers) }
}

/**
 * Runs one `execute` step in `flavour` on the case's policy, clock and timers; returns what the
 * caller and the hooks saw: `{ attempts, waits, result }` in the contract's terms.
 */
export async function runExecute(ctx, step, flavour) {
  const script = step.script
  if (!Array.isArray(script)) throw new Error('execute needs a script')
  for (const item of script) {
    for (const k of Object.keys(item)) if (!ITEM_KEYS.has(k)) throw new Error(`unknown script key ${k}`)
  }
  const { clock, timers, policy } = ctx
  const http = HTTP.has(flavour)
  const caller = new AbortController()
  const problems = []
  const starts = []
  const errors = []
  const values = []
  const signals = []
  const hooks = []
  const waits = []
  let busy = 0
  let cancelAtNextTimer = false

  // One attempt: what the script's next item says, on the attempt's own signal.
  const perform = async (signal) => {
    const i = starts.length
    starts.push(clock.now())
    const item = script[i]
    if (item === undefined) {
      problems.push(`attempt ${i + 1} is not in the script`)
      throw new Error('not in the script')
    }
    if (!(signal instanceof AbortSignal) || signal.aborted || signals.includes(signal)) {
      problems.push(`attempt ${i + 1} did not get a fresh signal of its own`)
    }
    signals.push(signal)
    const fail = (e) => {
      errors[i] = e
      throw e
    }
    if (item.hits_deadline === true) {
      // Hangs until the helper's own deadline aborts it, then fails as fetch does.
      const started = clock.now()
      await new Promise((resolve) => (signal.aborted ? resolve() : signal.addEventListener('abort', resolve, { once: true })))
      if (clock.now() - started !== (item.takes_ms ?? 0)) {
        problems.push(`attempt ${i + 1} was cut after ${clock.now() - started} ms, the script says ${item.takes_ms}`)
      }
      fail(signal.reason)
    }
    busy++
    try {
      if (item.takes_ms > 0) {
        // Timers due by then fire first: an attempt limit ends the attempt there.
        timers.advance(item.takes_ms)
        await turn()
        if (signal.aborted) fail(signal.reason)
      }
      if (item.cancelled === true) {
        caller.abort()
        fail(signal.reason)
      }
      if ('returns' in item) return (values[i] = { attempt: i + 1, outcome: outcomeOf(item.returns) })
      if ('response' in item) return (values[i] = responseOf(item.response))
      if ('raises' in item) fail(errorOf(item.raises, i + 1, http))
      problems.push(`attempt ${i + 1}: an item returns, responds, raises, hits its deadline or is cancelled`)
      throw new Error('empty item')
    } finally {
      busy--
    }
  }

  const options = {
    ...ctx.executeOptions,
    signal: caller.signal,
    sleep: timers.sleep,
    classify: (e) => (e instanceof RunnerAnswer ? 'answer' : undefined),
    onAttempt: (a) => {
      if (a.attempt !== hooks.length + 1) problems.push(`onAttempt numbered ${a.attempt}, expected ${hooks.length + 1}`)
      hooks.push(a)
    },
    onRetry: (w) => {
      if (w.attempt !== starts.length) problems.push(`onRetry after ${w.attempt} attempts, ${starts.length} were made`)
      waits.push({ delay_ms: w.delayMs, source: w.source, capped: w.capped, server_delay_ms: w.serverDelayMs })
      if (waits.length === step.cancel_in_wait) cancelAtNextTimer = true
    },
  }
  let p
  if (flavour === 'execute') {
    if (script.some((i) => 'returns' in i && i.returns !== 'success')) options.classifyResult = (v) => v.outcome
    p = policy.execute(perform, options)
  } else if (flavour === 'executeResponse') {
    p = policy.executeResponse(perform, options)
  } else {
    const fetch = (input, init) => {
      if (input !== URL_ || init?.method !== 'GET') problems.push('fetch did not get the caller\'s input and init')
      return perform(init?.signal)
    }
    p = policy.fetch(URL_, { method: 'GET' }, { ...options, fetch })
  }

  // Drives time: when nothing runs, the earliest timer fires (a wait's, or the attempt limit of
  // a hanging attempt); for the wait numbered cancel_in_wait, the caller cancels instead.
  let settled = false
  let ended
  p.then(
    (value) => ((settled = true), (ended = { value })),
    (error) => ((settled = true), (ended = { error })),
  )
  for (let idle = 0; !settled; ) {
    await turn()
    if (settled || busy > 0) continue
    if (cancelAtNextTimer && timers.pending > 0) {
      cancelAtNextTimer = false
      caller.abort()
    } else if (!timers.runNext() && ++idle > 100) {
      throw new Error('the call neither settles nor waits on a timer')
    }
  }
  if (timers.pending > 0) problems.push(`${timers.pending} timer(s) left pending after the call: ${JSON.stringify(timers.peek())}`)
  if (hooks.length !== starts.length) problems.push(`${starts.length} attempts ran, onAttempt saw ${hooks.length}`)
  if (problems.length > 0) throw new Error(problems.join('; '))

  const at = (list, x) => {
    const i = list.indexOf(x)
    return i >= 0 ? i + 1 : `not an attempt's: ${String(x)}`
  }
  let result
  if ('value' in ended) {
    result = { returns: at(values, ended.value) }
  } else {
    const e = ended.error
    if (caller.signal.aborted && e === caller.signal.reason) {
      result = { raises: 'cancelled', attempts: starts.length }
    } else if (errors.includes(e)) {
      result = { raises: 'original', attempt: at(errors, e) }
    } else if (e instanceof BreakerOpenError || e instanceof GiveUpError) {
      if (!(e instanceof UpstreamUnavailableError)) throw new Error(`${e.name} is not an UpstreamUnavailableError`)
      if ((http && 'result' in e) || (!http && 'response' in e)) throw new Error(`${e.name} attaches a value as ${http ? 'result' : 'response'}`)
      const cause = 'cause' in e ? at(errors, e.cause) : 'response' in e ? at(values, e.response) : 'result' in e ? at(values, e.result) : null
      result = {
        raises: e instanceof BreakerOpenError ? 'breaker_open' : 'give_up',
        reason: e.reason,
        attempts: e.attempts,
        retry_after_ms: e.retryAfterMs,
        server_delay_ms: e.serverDelayMs,
        capped: e.capped,
        cause,
      }
    } else if (e instanceof RangeError && e.code === 'invalid_input' && e.field === 'status') {
      result = { raises: 'invalid_input', attempts: starts.length }
    } else {
      throw new Error(`the call rejected with an unexpected error: ${e?.stack ?? e}`)
    }
  }
  return {
    attempts: starts.map((t, i) => ({ at: t, probe: hooks[i].probe, outcome: hooks[i].outcome })),
    waits,
    result,
  }
}

/** Compares an `execute` step's expectation: `attempts` and `waits` exact lists, `result` its keys. */
export function checkExecute(expect, got, check) {
  if (expect === undefined) return
  for (const [k, want] of Object.entries(expect)) {
    if (k === 'attempts' || k === 'waits') {
      if (!Array.isArray(want)) throw new Error(`${k} must be an array`)
      const have = got[k]
      if (want.length !== have.length) throw new Error(`${k}: expected ${want.length}, got ${have.length}: ${JSON.stringify(have)}`)
      const keys = k === 'attempts' ? ['at', 'probe', 'outcome'] : ['delay_ms', 'source', 'capped', 'server_delay_ms']
      want.forEach((w, i) => {
        try {
          check(w, have[i], keys)
        } catch (e) {
          throw new Error(`${k}[${i}]: ${e.message}`, { cause: e })
        }
      })
    } else if (k === 'result') {
      try {
        check(want, got.result, ['returns', 'raises', 'reason', 'attempts', 'attempt', 'retry_after_ms', 'server_delay_ms', 'capped', 'cause'])
      } catch (e) {
        throw new Error(`result: ${e.message}`, { cause: e })
      }
    } else {
      throw new Error(`unknown expect key ${JSON.stringify(k)}`)
    }
  }
}
