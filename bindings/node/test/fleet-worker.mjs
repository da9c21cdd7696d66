// The Node worker of the multi-process fleet test (contract: conformance/fleet/README.md), run
// by `run.sh test` through `conformance/fleet/run.py node -- node test/fleet-worker.mjs` from the
// scratch project, where `holdoff` is the installed package. Calls the upstream through one
// breaker shared with the other workers through the fleet, for RUN_MS, and writes its report
// to OUT.
import { writeFileSync } from 'node:fs'
import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import { Breaker, BreakerOpenError } from 'holdoff'

const env = process.env
const breaker = new Breaker({
  trip: { policy: 'consecutive', threshold: 1 },
  openInterval: { initialMs: 500, multiplier: 1, maxMs: 500 },
  recoveries: 2,
  maxProbesInFlight: 1,
  fleet: { url: env.HOLDOFF_FLEET_URL, key: env.HOLDOFF_FLEET_KEY, refreshMs: 20 },
})
const report = {
  worker: env.WORKER_ID,
  calls_started: 0,
  calls_ended: 0,
  allowed: 0,
  refused: 0,
  errors: 0,
  statuses: {},
  slowest_breaker_call_ms: 0,
  refusal_starts: [],
}

function timed(fn) {
  const t0 = performance.now()
  try {
    return fn()
  } finally {
    report.slowest_breaker_call_ms = Math.max(report.slowest_breaker_call_ms, performance.now() - t0)
  }
}

// One call; true if the breaker refused it.
async function call(wasRefused) {
  let permit
  try {
    permit = timed(() => breaker.allow())
  } catch (e) {
    if (!(e instanceof BreakerOpenError)) throw e
    report.refused += 1
    if (!wasRefused) report.refusal_starts.push(Date.now())
    return true
  }
  report.allowed += 1
  let res
  try {
    res = await fetch(`${env.UPSTREAM_URL}/call`, { headers: { 'X-Worker-Id': env.WORKER_ID }, signal: AbortSignal.timeout(2000) })
    await res.arrayBuffer()
  } catch (e) {
    // A transport error or timeout: a failure.
    console.error(`worker ${env.WORKER_ID}: ${e}`)
    report.errors += 1
    timed(() => breaker.record(permit, 'failure'))
    return false
  }
  const status = String(res.status)
  report.statuses[status] = (report.statuses[status] ?? 0) + 1
  let outcome = 'failure'
  if (res.status === 200) outcome = 'success'
  else if (res.status === 429) outcome = { retryLaterMs: 1000 * Number.parseInt(res.headers.get('retry-after') ?? '1', 10) }
  timed(() => breaker.record(permit, outcome))
  if (res.status === 200) await sleep(10)
  return false
}

const end = performance.now() + Number(env.RUN_MS)
let refused = false
while (performance.now() < end) {
  report.calls_started += 1
  try {
    refused = await call(refused)
  } catch (e) {
    // Counted, and the loop goes on: every call must end.
    console.error(`worker ${env.WORKER_ID}: ${e?.stack ?? e}`)
    report.errors += 1
    refused = false
  }
  report.calls_ended += 1
  if (refused) await sleep(5)
}
await breaker.close()
writeFileSync(env.OUT, JSON.stringify(report))
