// Timers on a ManualClock, for the helpers' `sleep` option: `sleep(ms, signal)` resolves when
// the clock reaches the time it was due, and rejects with `signal.reason` when `signal` aborts
// (the helpers abort the timer of an attempt that ended in time). Nothing here reads the wall
// clock: time moves only through `advance`, `advanceTo` and `runNext`.
export class ManualTimers {
  #clock
  #timers = []
  #seq = 0

  constructor(clock) {
    this.#clock = clock
  }

  /** The `sleep` option: a timer due `ms` after the clock's time now. */
  sleep = (ms, signal) => {
    if (typeof ms !== 'number' || !(ms >= 0) || ms === Infinity) throw new RangeError(`not a delay: ${ms}`)
    return new Promise((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason)
        return
      }
      const t = { due: this.#clock.now() + ms, seq: this.#seq++, ms, resolve, signal }
      t.onAbort = () => {
        this.#remove(t)
        reject(signal.reason)
      }
      signal?.addEventListener('abort', t.onAbort, { once: true })
      this.#timers.push(t)
    })
  }

  #remove(t) {
    const i = this.#timers.indexOf(t)
    if (i >= 0) this.#timers.splice(i, 1)
  }

  /** Timers pending. */
  get pending() {
    return this.#timers.length
  }

  /** The earliest pending timer (`{ due, ms }`), or undefined. */
  peek() {
    let best
    for (const t of this.#timers) if (best === undefined || t.due < best.due || (t.due === best.due && t.seq < best.seq)) best = t
    return best
  }

  #fire(t) {
    this.#remove(t)
    t.signal?.removeEventListener('abort', t.onAbort)
    if (t.due > this.#clock.now()) this.#clock.set(t.due)
    t.resolve()
  }

  /**
   * Moves the clock to `to`, firing every timer due by then, earliest first (the clock shows each
   * one's due time when it fires). What a timer's resolution causes runs after this returns.
   */
  advanceTo(to) {
    for (let t = this.peek(); t !== undefined && t.due <= to; t = this.peek()) this.#fire(t)
    if (to > this.#clock.now()) this.#clock.set(to)
  }

  /** Moves the clock forward by `ms` (see `advanceTo`). */
  advance(ms) {
    this.advanceTo(this.#clock.now() + ms)
  }

  /** Moves the clock to the earliest timer and fires it; false when none is pending. */
  runNext() {
    const t = this.peek()
    if (t === undefined) return false
    this.#fire(t)
    return true
  }

  /**
   * Settles as `promise` does, firing the earliest timer whenever nothing else runs (an event
   * loop turn passed), as a paused clock that jumps to the next timer. For operations that do no
   * I/O; fails if the promise neither settles nor waits on a timer.
   */
  async run(promise) {
    let settled = false
    const watched = promise.finally(() => (settled = true))
    watched.catch(() => {})
    for (let idle = 0; !settled; ) {
      await turn()
      if (!settled && !this.runNext() && ++idle > 100) throw new Error('the promise neither settles nor waits on a timer')
    }
    return watched
  }
}

/** One turn of the event loop: every promise chain not waiting on I/O or timers has settled. */
export const turn = () => new Promise((resolve) => setImmediate(resolve))
