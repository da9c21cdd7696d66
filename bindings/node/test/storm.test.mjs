// Storms of callers against an open breaker, on the manual clock: whether callers give up by
// cancelling or by running into a deadline, the upstream sees one probe per open interval, not
// one request per caller. Arrivals, aborts and deadlines move only through ManualTimers.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { BreakerOpenError, GiveUpError, ManualClock, Policy } from 'holdoff'
import { ManualTimers, turn } from './manual-timers.mjs'

const ARRIVAL_MS = 5
const DEADLINE_MS = 100
const END_MS = 6000
const CALLERS = END_MS / ARRIVAL_MS + 1

// Trip after one failure, 1 s between probes (constant), no retries: each caller makes at most
// one attempt. The upstream refuses the first connection (which trips the breaker at 0), then
// hangs: every later request waits until its caller gives up.
function storm() {
  const clock = new ManualClock()
  const timers = new ManualTimers(clock)
  const policy = new Policy({
    clock,
    breaker: { trip: { threshold: 1 }, openInterval: { initialMs: 1000, multiplier: 1 } },
    budget: { maxRetries: 0 },
  })
  const reached = []
  const upstream = (signal) => {
    reached.push(clock.now())
    if (clock.now() === 0) return Promise.reject(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }))
    return new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }))
  }
  return { clock, timers, policy, reached, upstream }
}

// Twenty callers at a time: one arrives every 5 ms for 6 s, each giving up after 100 ms the way
// `call` makes it (its own abort, or a deadline). Returns how the calls ended.
async function arrive(s, call) {
  const outcomes = { refused: 0, gaveUp: 0, rejected: [], other: [] }
  const pending = []
  const arrivals = []
  let maxConcurrent = 0
  for (let t = 0; t <= END_MS; t += ARRIVAL_MS) {
    s.timers.advanceTo(t)
    await turn()
    // Callers still within their 100 ms.
    arrivals.push(t)
    maxConcurrent = Math.max(maxConcurrent, arrivals.filter((a) => a > t - DEADLINE_MS).length)
    pending.push(
      call(t).then(
        (v) => outcomes.other.push(v),
        (e) => {
          if (e instanceof BreakerOpenError) outcomes.refused++
          else if (e instanceof GiveUpError) outcomes.gaveUp++
          else outcomes.rejected.push(e)
        },
      ),
    )
    await turn()
  }
  return { outcomes, pending, maxConcurrent }
}

describe('storms of callers against a hanging upstream', () => {
  it('callers cancelling after 100 ms reach the upstream once per interval', async () => {
    // A cancelled probe frees its slot but its window stays spent (it may have reached the
    // upstream) and it does not re-open the breaker: the upstream sees the failure that tripped
    // the breaker and then one probe a second, at 1000, 2000, ..., 6000 ms: 7 calls in all.
    const s = storm()
    const aborts = []
    const { outcomes, pending, maxConcurrent } = await arrive(s, () => {
      const ac = new AbortController()
      s.timers.sleep(DEADLINE_MS).then(() => ac.abort())
      aborts.push(ac)
      return s.policy.execute(s.upstream, {
        signal: ac.signal,
        sleep: s.timers.sleep,
        onRetry: () => assert.fail('no caller retries'),
      })
    })
    s.timers.advance(DEADLINE_MS)
    await Promise.all(pending)
    assert.equal(maxConcurrent, DEADLINE_MS / ARRIVAL_MS, 'twenty callers at a time')
    assert.deepEqual(outcomes.other, [])
    assert.deepEqual(s.reached, [0, 1000, 2000, 3000, 4000, 5000, 6000], 'the tripping failure, then one probe per interval')
    assert.equal(outcomes.gaveUp, 1)
    assert.equal(outcomes.rejected.length, 6)
    assert.ok(outcomes.rejected.every((e) => e.name === 'AbortError'), 'cancelled callers get their abort reason')
    assert.equal(outcomes.refused, CALLERS - 7)
    const snap = s.policy.breaker.snapshot()
    assert.equal(snap.probes, 6)
    assert.equal(snap.probesInFlight, 0)
    assert.equal(snap.opens, 1)
    assert.equal(s.timers.pending, 0)
    assert.ok(aborts.every((ac) => ac.signal.aborted))
  })

  for (const [kind, options] of [
    ["the helper's attempt timeout", () => ({ attemptTimeoutMs: DEADLINE_MS })],
    ["the caller's own deadline (AbortSignal.timeout's TimeoutError)", (s) => {
      const ac = new AbortController()
      s.timers.sleep(DEADLINE_MS).then(() => ac.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError')))
      return { signal: ac.signal }
    }],
  ]) {
    it(`callers with 100 ms deadlines (${kind}) reach the upstream once per interval, and the breaker stays open`, async () => {
      // A deadline is a timeout, never a cancellation: each probe that runs into it fails, and a
      // failed probe re-opens the breaker from that moment for the next (constant) interval. So
      // the upstream sees the tripping failure at 0 and one probe an interval after each failed
      // one: 1000 (cut at 1100), 2100 (cut at 2200), 3200, 4300, 5400; the next would go at 6500.
      // 6 requests, within the one-probe-per-interval bound of 7 over 6 s. Had the deadlines
      // been recorded as cancellations, the breaker would never see the upstream hang.
      const s = storm()
      const { outcomes, pending, maxConcurrent } = await arrive(s, () =>
        s.policy.execute(s.upstream, {
          ...options(s),
          sleep: s.timers.sleep,
          onRetry: () => assert.fail('no caller retries'),
        }),
      )
      const snap = s.policy.breaker.snapshot()
      assert.equal(maxConcurrent, DEADLINE_MS / ARRIVAL_MS, 'twenty callers at a time')
      assert.deepEqual(s.reached, [0, 1000, 2100, 3200, 4300, 5400])
      assert.ok(s.reached.length <= 7)
      assert.equal(snap.state, 'open', 'open at 6 s: not closed, not stuck half-open')
      assert.equal(snap.probesInFlight, 0)
      assert.equal(snap.probes, 5)
      assert.equal(snap.retryAfterMs, 500, 'the next probe may go at 6500')
      s.timers.advance(DEADLINE_MS)
      await Promise.all(pending)
      assert.deepEqual(outcomes.other, [])
      assert.deepEqual(outcomes.rejected, [])
      assert.equal(outcomes.gaveUp, 6, 'the tripping failure and five probes cut at their deadline')
      assert.equal(outcomes.refused, CALLERS - 6)
      assert.equal(s.timers.pending, 0)
    })
  }
})
