// The fleet option in JavaScript shapes: typed errors naming the field, one tick by hand on the
// in-memory store (time only through ManualClock), close and the garbage collector ending the
// background threads, and two breakers sharing one open through a real redis-server this test
// starts on a unix socket in a temporary directory (the one place real time is used: bounds
// with margins, never exact times).
import { describe, it, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { createConnection } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import v8 from 'node:v8'
import vm from 'node:vm'
import { Breaker, BreakerGroup, ManualClock, Policy, memoryStoreControl, memoryStoreReset } from 'holdoff'
import { throwsCode } from './throws-code.mjs'

const TRIP_ON_ONE = { trip: { policy: 'consecutive', threshold: 1 }, openInterval: { initialMs: 1000, multiplier: 1 } }

describe('fleet option', () => {
  const build = (fleet) => () => new Breaker({ fleet })

  it('refuses bad values with the core field, typed', () => {
    throwsCode(build({ url: 'http://x', key: 'k' }), RangeError, 'invalid_config', 'fleet.url')
    throwsCode(build({ key: 'k' }), RangeError, 'invalid_config', 'fleet.url')
    throwsCode(build({ url: 'memory://a' }), RangeError, 'invalid_config', 'fleet.key')
    throwsCode(build({ url: 'memory://a', key: 'a b' }), RangeError, 'invalid_config', 'fleet.key')
    const e = throwsCode(build({ url: 'memory://a', key: 'k', refreshMs: 0 }), RangeError, 'invalid_config', 'fleet.refresh')
    assert.match(e.message, /fleet\.refreshMs/)
    throwsCode(build({ url: 'memory://a', key: 'k', fallbackAfterMs: Infinity }), RangeError, 'invalid_config', 'fleet.fallback_after')
    throwsCode(build({ url: 'memory://a', key: 'k', timeoutMs: -1 }), RangeError, 'invalid_config', 'fleet.timeout')
    throwsCode(build({ url: 'memory://a', key: 'k', ttlMs: NaN }), RangeError, 'invalid_config', 'fleet.ttl')
  })

  it('refuses wrong types and unknown options', () => {
    throwsCode(build(null), TypeError, 'invalid_config', 'fleet')
    throwsCode(build({ url: 1, key: 'k' }), TypeError, 'invalid_config', 'fleet.url')
    throwsCode(build({ url: 'memory://a', key: 'k', refreshMs: '20' }), TypeError, 'invalid_config', 'fleet.refresh')
    throwsCode(build({ url: 'memory://a', key: 'k', refresh: 20 }), TypeError, 'invalid_config', 'fleet.refresh')
  })

  it('is refused on a group and on a policy given a built breaker', () => {
    throwsCode(() => new BreakerGroup({ fleet: { url: 'memory://a', key: 'k' } }), RangeError, 'invalid_config', 'fleet')
    throwsCode(() => new Policy({ breaker: new Breaker(), fleet: { url: 'memory://a', key: 'k' } }), TypeError, 'invalid_config', 'fleet')
  })

  it('memoryStoreControl refuses a bad name or action', () => {
    throwsCode(() => memoryStoreControl('a', 'sideways'), RangeError, 'invalid_input', 'action')
    throwsCode(() => memoryStoreControl(1, 'down'), TypeError, 'invalid_input', 'name')
    throwsCode(() => memoryStoreReset(null), TypeError, 'invalid_input', 'name')
  })
})

describe('fleet on the in-memory store', () => {
  it('one trip opens every worker at their next tick', async () => {
    memoryStoreReset('node-api-trip')
    const clock = new ManualClock()
    const fleet = { url: 'memory://node-api-trip', key: 'upstream' }
    const a = new Breaker({ ...TRIP_ON_ONE, clock, fleet })
    const b = new Breaker({ ...TRIP_ON_ONE, clock, fleet })
    assert.equal(a.fleetAttached, true)
    a.record(a.allow(), 'failure')
    const sa = await a.syncFleet()
    assert.deepEqual(
      { ok: sa.ok, attached: sa.attached, state: sa.record.state, episode: sa.record.episode, error: sa.error },
      { ok: true, attached: true, state: 'open', episode: 1, error: null },
    )
    assert.equal(b.state, 'closed')
    const events = []
    b.on('stateChange', (e) => events.push(e))
    const sb = await b.syncFleet()
    assert.equal(sb.record.state, 'open')
    assert.equal(b.state, 'open')
    assert.equal(b.tryAllow().admitted, false)
    assert.deepEqual(
      events.map((e) => [e.from, e.to, e.reason]),
      [['closed', 'open', 'fleet_opened']],
    )
    await a.close()
    await b.close()
  })

  it('a store down fails the tick, not the caller; close ends the fleet', async () => {
    memoryStoreReset('node-api-down')
    const clock = new ManualClock()
    const b = new Breaker({ ...TRIP_ON_ONE, clock, fleet: { url: 'memory://node-api-down', key: 'k', fallbackAfterMs: 100 } })
    memoryStoreControl('node-api-down', 'down')
    const s = await b.syncFleet()
    assert.equal(s.ok, false)
    assert.equal(s.record, null)
    assert.match(s.error, /unavailable/)
    clock.advance(100)
    const detached = await b.syncFleet()
    assert.deepEqual([detached.attached, detached.detached, b.fleetAttached], [false, true, false])
    memoryStoreControl('node-api-down', 'up')
    const back = await b.syncFleet()
    assert.deepEqual([back.ok, back.reattached, b.fleetAttached], [true, true, true])
    await b.close()
    await b.close()
    assert.equal(b.fleetAttached, false)
    await assert.rejects(b.syncFleet(), (e) => e.code === 'fleet_closed')
    // Local from now on: it still trips on its own.
    b.record(b.allow(), 'failure')
    assert.equal(b.state, 'open')
  })

  it('a breaker without a fleet ticks to null; a policy carries and closes its fleet', async () => {
    assert.equal(await new Breaker().syncFleet(), null)
    memoryStoreReset('node-api-policy')
    const policy = new Policy({ breaker: TRIP_ON_ONE, fleet: { url: 'memory://node-api-policy', key: 'k' }, clock: new ManualClock() })
    assert.equal(policy.breaker.fleetAttached, true)
    assert.equal((await policy.syncFleet()).ok, true)
    await policy.close()
    assert.equal(policy.breaker.fleetAttached, false)
  })
})

// ---- a real redis-server ----

function threads() {
  return readdirSync('/proc/self/task').length
}

async function startRedis() {
  const dir = mkdtempSync(join(tmpdir(), 'holdoff-node-redis-'))
  const sock = join(dir, 'redis.sock')
  const child = spawn('redis-server', ['--port', '0', '--unixsocket', sock, '--save', '', '--appendonly', 'no', '--dir', dir], {
    stdio: 'ignore',
  })
  const deadline = Date.now() + 10_000
  for (;;) {
    if (existsSync(sock) && (await ping(sock))) break
    if (Date.now() > deadline || child.exitCode !== null) throw new Error('redis-server did not start')
    await sleep(20)
  }
  return {
    url: `unix://${sock}`,
    async stop() {
      child.kill('SIGKILL')
      if (child.exitCode === null) await new Promise((r) => child.once('exit', r))
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

function ping(path) {
  return new Promise((resolve) => {
    const s = createConnection(path)
    s.on('error', () => resolve(false))
    s.on('connect', () => s.write('PING\r\n'))
    s.on('data', (d) => {
      s.destroy()
      resolve(d.toString().startsWith('+PONG'))
    })
  })
}

async function until(cond, ms) {
  const t0 = performance.now()
  while (!cond()) {
    if (performance.now() - t0 > ms) return null
    await sleep(2)
  }
  return performance.now() - t0
}

describe('fleet on a real redis-server', () => {
  let redis
  before(async () => {
    redis = await startRedis()
  })
  after(async () => {
    await redis?.stop()
  })

  it('a trip at one breaker opens the other within the bound; close joins the threads', async () => {
    // The thread pool that runs close() exists before the baseline.
    await new Breaker().close()
    const base = threads()
    const fleet = { url: redis.url, key: `node-${process.pid}`, refreshMs: 20 }
    const a = new Breaker({ ...TRIP_ON_ONE, fleet })
    const b = new Breaker({ ...TRIP_ON_ONE, fleet })
    assert.ok(threads() > base, 'a Redis fleet runs background threads')
    assert.ok((await until(() => a.fleetAttached && b.fleetAttached, 5000)) !== null, 'attached')
    a.record(a.allow(), 'failure')
    const took = await until(() => b.state === 'open', 2000)
    assert.ok(took !== null && took < 500, `the second breaker opened after ${took} ms`)
    await a.close()
    await b.close()
    assert.equal(threads(), base)
    assert.equal(b.state, 'open', 'the local breaker keeps what it learnt')
  })

  it('a collected breaker stops its threads', async () => {
    v8.setFlagsFromString('--expose-gc')
    const gc = vm.runInNewContext('gc')
    await new Breaker().close()
    const base = threads()
    ;(() => {
      // Made and dropped in a scope of its own.
      new Breaker({ fleet: { url: redis.url, key: `node-gc-${process.pid}`, refreshMs: 20 } })
    })()
    assert.ok(threads() > base)
    for (let k = 0; k < 20 && threads() > base; k++) {
      gc()
      await sleep(20)
    }
    assert.equal(threads(), base)
  })
})
