// holdoff without its optional peer dependency: run.sh runs this in the scratch project before
// it links @opentelemetry/* there, so `@opentelemetry/api` cannot be found. The package loads,
// its metric readings work, and the retry helpers wait and give up without tracing anything.
import { it } from 'node:test'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { GiveUpError, METRICS, ManualClock, Policy } from 'holdoff'
import { ManualTimers } from './manual-timers.mjs'

it('loads, reads metrics and retries without @opentelemetry/api installed', async () => {
  const fromHoldoff = createRequire(createRequire(import.meta.url).resolve('holdoff'))
  assert.throws(() => fromHoldoff.resolve('@opentelemetry/api'), { code: 'MODULE_NOT_FOUND' })
  assert.equal(METRICS.length, 17)
  const clock = new ManualClock()
  const timers = new ManualTimers(clock)
  const policy = new Policy({ clock, budget: { maxRetries: 1 } })
  policy.metrics()
  const failing = () => {
    throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' })
  }
  await assert.rejects(timers.run(policy.execute(failing, { sleep: timers.sleep })), GiveUpError)
  const attempts = policy.metrics().find((r) => r.name === 'holdoff.retry.attempts')
  assert.equal(attempts.value, 2)
})
