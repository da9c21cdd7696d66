// The scripted flaky upstream and a deterministic synchronous scenario on one breaker and one
// quota, shared by stress.test.mjs (main thread) and stress-worker.mjs (worker threads). Not a
// test file itself (node --test runs only *.test.mjs).

/**
 * The upstream's answer to call `i` of task `task` in round `round`: mostly up, down two rounds
 * out of twelve (the breaker trips), with failures, timeouts, cancellations and rate limits
 * sprinkled deterministically.
 */
export function upstream(task, round, i) {
  const n = task * 1009 + round * 131 + i
  if (round % 12 === 3 || round % 12 === 4) {
    if (n % 5 !== 0) return n % 3 === 0 ? 'timeout' : 'failure'
  }
  if (n % 997 === 0) return { retryLaterMs: 150 }
  if (n % 11 === 0) return 'cancelled'
  if (n % 13 === 0) return 'timeout'
  if (n % 7 === 0) return 'failure'
  return 'success'
}

export const BREAKER = Object.freeze({
  trip: { threshold: 6 },
  openInterval: { initialMs: 100, multiplier: 2, maxMs: 400 },
  recoveries: 2,
  maxProbesInFlight: 2,
  probeTimeoutMs: 250,
})

export const QUOTA = Object.freeze({ capacity: 60, retryCost: 5, timeoutCost: 10, successRefill: 0 })

/** Counters that add up: `add(t, 'x')` bumps t.x. */
export function add(t, key, n = 1) {
  t[key] = (t[key] ?? 0) + n
}

/**
 * The quota's side of one recorded outcome: a failure or timeout takes a lease (or finds the
 * bucket empty), a success refunds the oldest outstanding lease. `leases` is the caller's own.
 */
export function quotaStep(quota, leases, outcome, t, seq) {
  if (outcome === 'failure' || outcome === 'timeout') {
    const lease = quota.acquire({ timeout: outcome === 'timeout' })
    if (lease.acquired) {
      add(t, 'spent', lease.cost)
      leases.push(lease)
    } else {
      add(t, 'quotaEmpty')
      if (!(lease.available >= 0 && lease.available < lease.cost)) throw new Error(`bad QuotaEmpty ${JSON.stringify(lease)}`)
    }
  } else if (outcome === 'success') {
    const lease = leases.shift()
    quota.onSuccess(lease)
    if (lease !== undefined) {
      add(t, 'refunded', lease.cost)
      if (seq % 5 === 0) {
        // A lease refunds once: the second time is refused and changes nothing.
        try {
          quota.onSuccess(lease)
          throw new Error('a lease was refunded twice')
        } catch (e) {
          if (e.code !== 'permit_already_recorded') throw e
          add(t, 'doubleRefund')
        }
      }
    }
  }
  const available = quota.available
  if (!(available >= 0 && available <= QUOTA.capacity)) throw new Error(`quota out of bounds: ${available}`)
}

/**
 * One more admission from inside a state-change listener (on an opening, the breaker re-entered),
 * recorded as cancelled when admitted; counted in `t` (attempts, admitted, probes, cancelled or
 * refused, and the record's own count).
 */
export function admitOneCancelled(breaker, t) {
  add(t, 'attempts')
  const p = breaker.tryAllow()
  if (p.admitted) {
    add(t, 'admitted')
    if (p.probe) add(t, 'probes')
    add(t, breaker.record(p, 'cancelled'))
    add(t, 'cancelled')
  } else add(t, 'refused')
}

/**
 * Records each answered permit on `breaker` (counted in `t`) and takes its quota step on
 * `leases[task]`; every 97th record is tried twice and must be refused `permit_already_recorded`
 * (a `PermitError` of `holdoff`), or the recorder throws.
 */
export function recorder(holdoff, breaker, quota, leases, t) {
  let seq = 0
  return (task, permit, outcome) => {
    seq++
    add(t, breaker.record(permit, outcome))
    if (outcome === 'cancelled') add(t, 'cancelled')
    if (seq % 97 === 0) {
      try {
        breaker.record(permit, 'success')
        throw new Error('a permit was recorded twice')
      } catch (e) {
        if (!(e instanceof holdoff.PermitError) || e.code !== 'permit_already_recorded') throw e
        add(t, 'doubleRecord')
      }
    }
    quotaStep(quota, leases[task], outcome, t, seq)
  }
}

/**
 * `tasks` callers taking turns on one breaker and one quota, `calls` each per round, the clock
 * moving `stepMs` between rounds; one permit in 17 is answered only in the next round. Fully
 * deterministic: the same arguments give the same result on any thread.
 */
export function scenario(holdoff, { rounds = 30, tasks = 6, calls = 40, stepMs = 100 } = {}) {
  const { Breaker, ManualClock, RetryQuota } = holdoff
  const clock = new ManualClock()
  const breaker = new Breaker({ ...BREAKER, clock })
  const quota = new RetryQuota(QUOTA)
  const t = {}
  const heard = []
  // The listener re-enters the breaker; a throw in it would only become a process warning, so
  // it is counted (and must stay at zero).
  breaker.on('stateChange', (e) => {
    try {
      heard.push(e)
      if (breaker.snapshot().episode < e.episode) throw new Error('snapshot behind its event')
      if (e.from === 'closed') admitOneCancelled(breaker, t)
    } catch {
      add(t, 'listenerErrors')
    }
  })
  const leases = Array.from({ length: tasks }, () => [])
  let held = []
  const record = recorder(holdoff, breaker, quota, leases, t)
  for (let round = 0; round < rounds; round++) {
    const late = held
    held = []
    for (const [task, permit, outcome] of late) record(task, permit, outcome)
    for (let i = 0; i < calls; i++) {
      for (let task = 0; task < tasks; task++) {
        add(t, 'attempts')
        const p = breaker.tryAllow()
        if (!p.admitted) {
          add(t, 'refused')
          continue
        }
        add(t, 'admitted')
        if (p.probe) add(t, 'probes')
        const outcome = upstream(task, round, i)
        if (i % 17 === 0) held.push([task, p, outcome])
        else record(task, p, outcome)
      }
    }
    clock.advance(stepMs)
  }
  for (const [task, permit, outcome] of held) record(task, permit, outcome)
  return {
    breakerId: breaker.id,
    tally: t,
    snapshot: breaker.snapshot(),
    events: breaker.drainEvents(),
    heard,
    available: quota.available,
  }
}
