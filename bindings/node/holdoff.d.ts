// Types of holdoff's public JavaScript API (holdoff.js). The native layer's generated types are
// in index.d.ts. Durations are milliseconds (plain numbers, never BigInt).

import { EventEmitter } from 'node:events'

/** setTimeout's largest delay, 2^31-1 ms; `sleep` chains timers for longer waits. */
export declare const MAX_TIMER_MS: number

// ---------------------------------------------------------------------------------------------
// Names

/** A breaker's state. */
export type State = 'closed' | 'open' | 'half_open' | 'forced_open' | 'disabled'
/** Why a breaker's state changed. */
export type Reason =
  | 'tripped'
  | 'retry_later'
  | 'probe_admitted'
  | 'probe_failed'
  | 'recovered'
  | 'forced_open'
  | 'disabled'
  | 'reset'
  /** The fleet's shared record is open (another worker tripped or saw a retry-later). */
  | 'fleet_opened'
/** What recording an outcome did. */
export type Effect = 'counted' | 'stale' | 'ignored'
/** Why a retry loop stopped. */
export type GiveUpReason =
  | 'budget_spent'
  | 'retry_after_exceeds_remaining'
  | 'retry_after_above_cap'
  | 'backoff_exceeds_remaining'
  | 'attempts_exhausted'
  | 'not_retryable'
  | 'quota_empty'
  | 'breaker_open'
  | 'cancelled'
  | 'total_timeout'
/** Where a retry's delay came from. */
export type WaitSource = 'retry_after' | 'backoff' | 'breaker'
/** Why a Retry-After value could not be used. */
export type Unusable = 'missing' | 'malformed' | 'signed' | 'conflicting'
/** Which header a retry hint came from (the core's stable names, in order of precedence). */
export type HintSource =
  | 'retry_after_ms'
  | 'x_ms_retry_after_ms'
  | 'retry_after'
  | 'ratelimit'
  | 'ratelimit_reset'
  | 'x_ratelimit_reset'
  | 'none'
/** The stable error codes (conformance/README.md) plus the give-up codes. */
export type ErrorCode =
  | 'invalid_config'
  | 'invalid_input'
  | 'clock_backwards'
  | 'permit_already_recorded'
  | 'foreign_permit'
  | 'give_up'
  | 'breaker_open'

/** The name of an outcome. */
export type OutcomeName = 'success' | 'answer' | 'failure' | 'timeout' | 'cancelled'
/**
 * What happened to a call: `'success'`; `'answer'` (the upstream answered but it is not a
 * success and retrying will not help, e.g. a 404); `'failure'`; `'timeout'`; `'cancelled'`;
 * or `{ retryLaterMs }` (the upstream asked to be left alone that long, e.g. a 429/503 with
 * Retry-After). A `Classification` is accepted as is.
 */
export type Outcome = OutcomeName | { readonly retryLaterMs: number } | Classification

// ---------------------------------------------------------------------------------------------
// Errors

/** A permit or quota lease misused: recorded or given back twice (`permit_already_recorded`), or on another breaker or quota (`foreign_permit`). */
export declare class PermitError extends Error {
  readonly name: 'PermitError'
  readonly code: 'permit_already_recorded' | 'foreign_permit'
}

/** Configuration and argument errors are `RangeError`/`TypeError` with these fields. */
export interface HoldoffErrorFields {
  /** `invalid_config`, `invalid_input` or `clock_backwards`. */
  readonly code: ErrorCode
  /** The field, as the core names it in every language (`breaker.open_interval.initial`). */
  readonly field?: string
}

/** What an upstream-unavailable error carries (milliseconds). */
export interface UpstreamUnavailableFields {
  /** Attempts made (0 when nothing ran). */
  attempts?: number
  /** When trying again could help, or `null`. */
  retryAfterMs?: number | null
  /** The server's own delay from the last answer, or `null`. */
  serverDelayMs?: number | null
  /** Whether that delay was above the budget's cap. */
  capped?: boolean
  /** The last attempt's error. */
  cause?: unknown
  /** The last attempt's HTTP response (`executeResponse`, `fetch`). */
  response?: unknown
  /** The last attempt's value (`execute`). */
  result?: unknown
}

/**
 * The upstream cannot be reached now: the breaker refused (`BreakerOpenError`) or a retry helper
 * gave up (`GiveUpError`). One `catch` handles both.
 */
export declare class UpstreamUnavailableError extends Error {
  readonly reason: GiveUpReason
  /** Attempts made (0 when the breaker refused before any). */
  readonly attempts: number
  /** When trying again could help: the breaker's time to its next probe, the server's delay; else `null`. */
  readonly retryAfterMs: number | null
  /** The server's own delay from the last answer (Retry-After and the like), before the cap. */
  readonly serverDelayMs: number | null
  /** Whether the server's delay was above the budget's cap. */
  readonly capped: boolean
  /** The last attempt's error, when it threw. */
  readonly cause?: unknown
  /** The last attempt's HTTP response, when it answered (`executeResponse`, `fetch`). */
  readonly response?: unknown
  /** The last attempt's value, when it resolved (`execute`). */
  readonly result?: unknown
  constructor(reason: GiveUpReason, message: string, fields?: UpstreamUnavailableFields)
}

/**
 * A retry helper stopped: retries or budget spent, quota empty, total timeout, a Retry-After
 * above the cap (`giveUpAboveCap`), 500s until the end.
 */
export declare class GiveUpError extends UpstreamUnavailableError {
  readonly name: 'GiveUpError'
  readonly code: 'give_up'
  constructor(reason: GiveUpReason, fields?: UpstreamUnavailableFields)
}

/**
 * The breaker refused the call (`allow()`, a helper's first attempt), or would stay open beyond
 * what is left of the budget or the total timeout (a retry).
 */
export declare class BreakerOpenError extends UpstreamUnavailableError {
  readonly name: 'BreakerOpenError'
  readonly code: 'breaker_open'
  readonly reason: 'breaker_open'
  /** Time until the next probe may be admitted; `null` while forced open. */
  readonly retryAfterMs: number | null
  /** The breaker's state and episode when it refused. */
  readonly state: State | null
  readonly episode: number | null
  constructor(retryAfterMs: number | null, fields?: UpstreamUnavailableFields & { state?: State; episode?: number })
}

/**
 * Throw this from an operation when the upstream asked to be left alone for `retryLaterMs`
 * without a response the helper can read: the breaker opens that long, the retry waits it.
 * `RangeError` for a delay that is not a finite number >= 0.
 */
export declare class RetryLaterError extends Error {
  readonly name: 'RetryLaterError'
  readonly retryLaterMs: number
  constructor(retryLaterMs: number, message?: string, options?: { cause?: unknown })
}

// ---------------------------------------------------------------------------------------------
// Clock

/** Where a wall-clock "now" comes from (for HTTP-dates): a manual clock, a date, or the system. */
export interface WallNow {
  /** Use this clock's wall time (its origin plus its time). */
  clock?: ManualClock
  /** A Date or Unix milliseconds. */
  now?: Date | number
}

/**
 * A clock that moves only when told to, for tests and simulations: nothing in holdoff sleeps or
 * reads time behind your back. Time is milliseconds since the clock's origin.
 */
export declare class ManualClock {
  /** `wallOriginUnixMs`: the wall time at the origin (default the Unix epoch). */
  constructor(options?: { wallOriginUnixMs?: number })
  /** Milliseconds since the origin. */
  now(): number
  /** Moves the clock to `ms`; `RangeError` `clock_backwards` if earlier than now. */
  set(ms: number): void
  /** Moves the clock forward by `ms`; returns the new time. */
  advance(ms: number): number
  /** How many times holdoff read this clock. */
  readonly reads: number
  readonly wallOriginUnixMs: number
  wallNowUnixMs(): number
}

// ---------------------------------------------------------------------------------------------
// Breaker

/** Interval between probes while open: exponential with a cap, optional jitter, never giving up. */
export interface BackoffOptions {
  /** First interval (default 30 000 for a breaker, 500 for a budget). */
  initialMs?: number
  /** Growth per step, >= 1 (default 2). */
  multiplier?: number
  /** Cap (default 300 000 for a breaker, 60 000 for a budget; at least `initialMs`). */
  maxMs?: number
  /** Fraction in [0, 1) taken off at random by the core's seeded PRNG (default 0). */
  jitter?: number
}

/** When a closed breaker opens. */
export type TripOptions =
  | { policy?: 'consecutive'; threshold: number }
  | { policy: 'window'; threshold: number; windowMs: number }
  | { policy: 'rate'; threshold: number; minCalls: number; windowMs: number; buckets?: number }

export interface BreakerOptions {
  /** Default: 5 consecutive failures. */
  trip?: TripOptions
  /** Default: 30 000 ms doubling to 300 000 ms, no jitter. */
  openInterval?: BackoffOptions
  /** Consecutive probe answers, one per interval, needed to close (default 3). */
  recoveries?: number
  /** Probes admitted per interval (default 1). */
  maxProbesInFlight?: number
  /** How long an unanswered probe holds its slot (default: the interval). */
  probeTimeoutMs?: number
  /** Guard on a provider's retry-later delay (default 300 000). */
  maxRetryLaterMs?: number
  /** Seed of the jitter PRNG (a whole number up to 2^53-1). */
  seed?: number
  /** The clock (default: the system's monotonic clock). */
  clock?: ManualClock
  /** Share this breaker with every worker calling the same upstream (docs/fleet.md). */
  fleet?: FleetOptions
}

/**
 * Where a fleet's shared record lives and how this breaker keeps its view of it (milliseconds).
 * What is shared: the open episode, when the fleet's next probe may go, who holds each probe,
 * the recovery progress. What stays local: admission while closed, failure counting.
 */
export interface FleetOptions {
  /**
   * The store: `redis://[user:password@]host[:port][/db]`, `rediss://...`,
   * `unix:///path/redis.sock`, or `memory://<name>` (in-process, for tests: no background sync,
   * tick with `syncFleet()`).
   */
  url: string
  /** The shared record's key, the upstream's name: 1..200 bytes, no whitespace. */
  key: string
  /** Period of the background sync (default 50). */
  refreshMs?: number
  /** With no successful sync for this long the breaker runs purely local until one succeeds (default 1000). */
  fallbackAfterMs?: number
  /** Bound on one store round trip (default 50). */
  timeoutMs?: number
  /** The shared record expires when no worker wrote it for this long (default 3 600 000). */
  ttlMs?: number
}

/** The fleet's shared record as of a tick; times are the store's clock in milliseconds. */
export interface FleetRecord {
  readonly state: 'closed' | 'open'
  /** +1 on every open from closed; 0 = never opened. */
  readonly episode: number
  /** Answers to current-episode probes counted this episode. */
  readonly recoveries: number
  /** Failed probes this episode. */
  readonly step: number
  /** Store time from which the fleet's next probe may be granted (while open). */
  readonly nextProbeAt: number
  /** Grants made in the current probe window. */
  readonly windowGranted: number
  /** Probe grants outstanding. */
  readonly leases: number
  /** Store time of the last change. */
  readonly updatedAt: number
}

/** What one `syncFleet()` tick did. */
export interface FleetSync {
  /** Whether the exchange with the store succeeded (and the shared record was applied). */
  readonly ok: boolean
  /** Whether the breaker follows the fleet after this tick. */
  readonly attached: boolean
  /** Whether this tick detached the breaker (`fallbackAfterMs` without a successful sync). */
  readonly detached: boolean
  /** Whether this tick re-attached a detached breaker. */
  readonly reattached: boolean
  /** Whether this tick claimed a probe grant and got it. */
  readonly granted: boolean
  /** Operations sent to the store. */
  readonly sent: number
  /** The shared record; `null` when the exchange failed. */
  readonly record: FleetRecord | null
  /** Why the exchange failed; `null` when it succeeded. */
  readonly error: string | null
}

/** Leave to make one call; record it exactly once. */
export declare class Permit {
  private constructor()
  readonly admitted: true
  /** The episode the call was admitted under: 0 while closed. */
  readonly episode: number
  /** Whether this call is a probe of an open breaker. */
  readonly probe: boolean
  /** Whether the permit was recorded. */
  readonly recorded: boolean
}

/** A refused admission. */
export interface Refusal {
  readonly admitted: false
  /** Time until a call could be admitted; `null` while forced open. */
  readonly retryAfterMs: number | null
  readonly state: State
  readonly episode: number
}

/** A side-effect-free view of a breaker. */
export interface Snapshot {
  readonly state: State
  readonly episode: number
  readonly failures: number
  readonly recoveries: number
  readonly probesInFlight: number
  /** While open or half-open: time until the next probe (0 when one may go); else `null`. */
  readonly retryAfterMs: number | null
  readonly probeReady: boolean
  /** The open interval in force while open or half-open; else `null`. */
  readonly intervalMs: number | null
  readonly opens: number
  readonly closes: number
  readonly probes: number
  readonly refusals: number
  readonly staleAnswers: number
  readonly eventsDropped: number
}

/** One state change. */
export interface StateChange {
  /** When, in milliseconds on the breaker's clock. */
  readonly atMs: number
  readonly from: State
  readonly to: State
  readonly episode: number
  readonly reason: Reason
  /** For `retry_later`: the delay the provider asked for, before the guard. */
  readonly requestedDelayMs: number | null
  /** For openings: how long until the first probe may be admitted. */
  readonly openForMs: number | null
}

/**
 * A circuit breaker for one upstream. Emits `'stateChange'` after the operation that caused it
 * returned from the core, so listeners may call back into the breaker.
 */
export declare class Breaker extends EventEmitter {
  /** `RangeError`/`TypeError` with `code: 'invalid_config'` and `field` for bad options. */
  constructor(options?: BreakerOptions)
  readonly id: number
  /** Admits the call (a `Permit`) or refuses it (a `Refusal`). The only act of admission. */
  tryAllow(): Permit | Refusal
  /** Admits the call or throws `BreakerOpenError`. */
  allow(): Permit
  /** Records the outcome of an admitted call; `PermitError` when recorded twice or on another breaker. */
  record(permit: Permit, outcome: Outcome): Effect
  snapshot(): Snapshot
  readonly state: State
  /** The state changes since the last call. */
  drainEvents(): StateChange[]
  /** This breaker's metric readings, zeros included; counting starts at the first read. */
  metrics(): MetricReading[]
  forceOpen(): void
  disable(): void
  reset(): void
  /** Whether the breaker follows its fleet now (false without one, while detached, after `close()`). */
  readonly fleetAttached: boolean
  /**
   * One fleet tick now (tests; `memory://` fleets): `null` without a fleet; a store failure is
   * `ok: false`, not a rejection; rejects with `code: 'fleet_closed'` after `close()`.
   */
  syncFleet(): Promise<FleetSync | null>
  /** Detaches from the fleet (background sync stopped and joined); idempotent. Collected breakers close too. */
  close(): Promise<void>
  on(event: 'stateChange', listener: (change: StateChange) => void): this
  once(event: 'stateChange', listener: (change: StateChange) => void): this
  off(event: 'stateChange', listener: (change: StateChange) => void): this
  on(event: string | symbol, listener: (...args: any[]) => void): this
  once(event: string | symbol, listener: (...args: any[]) => void): this
  off(event: string | symbol, listener: (...args: any[]) => void): this
}

/** A group's template; groups stay local (a `fleet` is refused with field `fleet`). */
export interface GroupOptions extends Omit<BreakerOptions, 'fleet'> {
  /**
   * Breakers the group keeps at most (default 10 000; a whole number in 1..100 000 000, else
   * `invalid_config` naming `group.max_keys`).
   */
  maxKeys?: number
}

/** A group's counts, read without side effects. */
export interface GroupSnapshot {
  /** Breakers kept now. */
  readonly size: number
  /** The bound on `size`. */
  readonly maxKeys: number
  /** Idle breakers (closed, no failures counted) evicted to make room for a new key. */
  readonly evictions: number
  /** Breakers handed out without being kept, because nothing could be evicted. */
  readonly overflows: number
}

/**
 * Breakers keyed by upstream, made lazily from one template, at most `maxKeys` of them. A new key
 * at a full group evicts the least recently used idle breaker (closed, no failures counted); open,
 * half-open, forced-open and disabled breakers are never evicted. With none idle, the key gets an
 * overflow breaker the group does not keep: no call fails because the group is full.
 */
export declare class BreakerGroup {
  constructor(options?: GroupOptions)
  /**
   * The breaker the group hands out for `key` now (created on first use; marks the key most
   * recently used): the same object while the group keeps it, a fresh one after an eviction, a
   * new overflow breaker each time the group is full with nothing idle. Ask for each call.
   */
  get(key: string): Breaker
  /** The breaker the group keeps for `key`, without making it or marking it used. */
  peek(key: string): Breaker | undefined
  /** Keys the group keeps a breaker for, sorted. */
  keys(): string[]
  /** Breakers kept now. */
  readonly size: number
  readonly maxKeys: number
  snapshot(): GroupSnapshot
  /**
   * The group's two series, then each kept breaker's (keys sorted) with `upstream` = its key.
   * The first read starts counting on every breaker the group keeps or makes later.
   */
  metrics(): MetricReading[]
}

// ---------------------------------------------------------------------------------------------
// Budget and quota

export interface BudgetOptions {
  /** Total time of one rate-limit episode (default 1 800 000); at least twice the cap. */
  maxRateLimitDurationMs?: number
  /** Cap on one Retry-After wait (default 300 000). */
  retryAfterCapMs?: number
  /** Retries on the counted path (default 10). */
  maxRetries?: number
  /** Counted path backoff (default 500 ms doubling to 60 000 ms). */
  backoff?: BackoffOptions
  /** Total time of the counted path from a call's first failure (default 43 200 000). */
  maxBackoffDurationMs?: number
  /**
   * A Retry-After above `retryAfterCapMs`: `false` (default) waits the cap (`capped: true`);
   * `true` gives up at once with reason `retry_after_above_cap` and the server's delay.
   */
  giveUpAboveCap?: boolean
  seed?: number
  clock?: ManualClock
}

/** A budget decision for one answer. */
export type Decision =
  | { readonly decision: 'done' }
  | {
      readonly decision: 'retry'
      /** Never negative; never shorter than the server asked, up to the cap. */
      readonly delayMs: number
      readonly source: WaitSource
      /** The server's Retry-After before the cap. */
      readonly serverDelayMs: number | null
      /** Whether the cap shortened the server's value (never with `giveUpAboveCap`). */
      readonly capped: boolean
    }
  | { readonly decision: 'give_up'; readonly reason: GiveUpReason; readonly serverDelayMs: number | null }

/** The budget's per-call state (the core's `RetryState`): one per logical call. */
export declare class RetryState {
  private constructor()
  readonly retries: number
  readonly firstFailureMs: number | null
}

/** The retry budget of one upstream. */
export declare class RetryBudget {
  constructor(options?: BudgetOptions)
  /** The state of a fresh logical call, for `decide`. */
  newCall(): RetryState
  /** What to do after an answer of the call whose state is `state`. */
  decide(state: RetryState, outcome: Outcome): Decision
  readonly episodeStartMs: number | null
}

export interface QuotaOptions {
  /** Tokens (default 500). */
  capacity?: number
  /** Cost of a retry (default 5). */
  retryCost?: number
  /** Cost of a retry after a timeout (default 10). */
  timeoutCost?: number
  /** Tokens a success without retry adds back (default 1). */
  successRefill?: number
}

/**
 * Tokens taken for one retry: give it back once, to the quota that issued it, with
 * `quota.onSuccess(lease)`. Backed by the core's `LeaseSlot`.
 */
export declare class QuotaLease {
  private constructor()
  readonly acquired: true
  /** Tokens taken. */
  readonly cost: number
  /** Tokens left right after this lease took its cost. */
  readonly available: number
  /** Whether the lease was given back. */
  readonly givenBack: boolean
}

export interface QuotaEmpty {
  readonly acquired: false
  readonly cost: number
  readonly available: number
}

/** A token bucket shared by every caller of one upstream. */
export declare class RetryQuota {
  constructor(options?: QuotaOptions)
  acquire(options?: { timeout?: boolean }): QuotaLease | QuotaEmpty
  /**
   * Refunds `lease`, or adds the success refill; returns the tokens left. A lease given back
   * twice throws `PermitError` (`permit_already_recorded`), one of another quota `PermitError`
   * (`foreign_permit`); neither changes the bucket. A value that is not a `QuotaLease` is a
   * `TypeError` (`invalid_input`).
   */
  onSuccess(lease?: QuotaLease | null): number
  /** `holdoff.quota.tokens` and `holdoff.quota.refused` (counted from the first read). */
  metrics(): MetricReading[]
  readonly available: number
}

// ---------------------------------------------------------------------------------------------
// Retry-After and classification

export type RetryAfter = { readonly delayMs: number; readonly unusable?: undefined } | { readonly unusable: Unusable; readonly delayMs?: undefined }

/** Header forms accepted: fetch's `Headers`, a `Map`, a plain object, or `[name, value]` pairs. */
export type HeadersLike =
  | { forEach(cb: (value: string, name: string) => void): void; get(name: string): string | null }
  | ReadonlyMap<string, string>
  | Readonly<Record<string, string | readonly string[] | undefined>>
  | ReadonlyArray<readonly [string, string]>

/** Parses one Retry-After value (RFC 9110 §10.2.3). Never throws for a bad value. */
export declare function parseRetryAfter(value: string, options?: WallNow): RetryAfter
/**
 * The retry hint of a response: the first present of `retry-after-ms`, `x-ms-retry-after-ms`
 * (milliseconds), `Retry-After`, `RateLimit` (its `t`), `RateLimit-Reset`, `X-RateLimit-Reset`.
 */
export declare function hintFromHeaders(headers: HeadersLike, options?: WallNow): RetryAfter & { readonly source: HintSource }

export interface ClassifierOptions {
  failureStatuses?: number[]
  answerStatuses?: number[]
  /** Default [429, 503]. */
  retryAfterStatuses?: number[]
  /** What a 429 without a usable hint waits (default: it is a plain failure). */
  rateLimitDefaultWaitMs?: number
}

export interface Classification {
  readonly outcome: OutcomeName | 'retry_later'
  readonly retryLaterMs: number | null
  readonly hint: RetryAfter
  readonly source: HintSource
  /** The provider's `x-should-retry` (`true` or `false`), else `null`; the outcome honours it. */
  readonly shouldRetry: boolean | null
}

/** HTTP response to outcome. */
export declare class Classifier {
  constructor(options?: ClassifierOptions)
  /**
   * Any whole number 0..999 is a status; one outside 100..599 is a broken upstream (`'failure'`).
   * Any other number is a `RangeError` `invalid_input` naming `status`.
   */
  classify(status: number, headers?: HeadersLike, options?: WallNow): Classification
}

// ---------------------------------------------------------------------------------------------
// Policy

/**
 * Each part is an object or its options; left out (or `undefined`), the part takes its defaults.
 * Any other value, `null` included, is refused with the `TypeError` `invalid_config` that part's
 * own constructor gives for it (`new Breaker(null)`: field `breaker`).
 */
export interface PolicyOptions {
  breaker?: Breaker | BreakerOptions
  budget?: RetryBudget | BudgetOptions
  quota?: RetryQuota | QuotaOptions
  classifier?: Classifier | ClassifierOptions
  /** Clock for the parts built from options (breaker and budget must share one). */
  clock?: ManualClock
  /** The fleet of the breaker built from options (a `Breaker` given as `breaker` takes its own). */
  fleet?: FleetOptions
}

export declare class PolicyCall {
  private constructor()
  readonly attempts: number
  readonly retries: number
}

export type Before =
  | { readonly action: 'go'; readonly permit: Permit }
  | { readonly action: 'wait'; readonly delayMs: number }
  | { readonly action: 'give_up'; readonly reason: GiveUpReason; readonly retryAfterMs: number | null }

/** What `onRetry` sees before each wait. */
export interface RetryInfo {
  /** Attempts made so far. */
  readonly attempt: number
  /** How long the wait is (never shorter than the server asked, up to the cap). */
  readonly delayMs: number
  readonly source: WaitSource
  /** Whether the budget's cap shortened the server's delay. */
  readonly capped: boolean
  /** The server's own delay, before the cap; `null` without one. */
  readonly serverDelayMs: number | null
}

/** What `onAttempt` sees after each attempt, once it is recorded. */
export interface AttemptInfo {
  /** 1 for the first attempt. */
  readonly attempt: number
  /** Whether the attempt was a probe of an open breaker. */
  readonly probe: boolean
  /** What the attempt was recorded as; a programming error and a cancelled attempt are `'cancelled'`. */
  readonly outcome: OutcomeName | 'retry_later'
  /** The attempt's error, when it threw. */
  readonly error?: unknown
}

export interface ExecuteOptions<T> {
  /** The caller's cancellation: each attempt's own signal aborts with it, and waits end. */
  signal?: AbortSignal
  /** Longest one attempt may take (default: no limit but the total timeout); `null`: none. */
  attemptTimeoutMs?: number | null
  /** Longest the whole call may take, waits included (default 60 000); `null`: no limit. */
  totalTimeoutMs?: number | null
  /**
   * The timer behind waits and attempt limits (default `sleep`, on `setTimeout`): resolve after
   * `ms` on the clock the policy reads, reject with `signal.reason` when `signal` aborts. It must
   * wait: one that returns at once makes every attempt time out at once and the retry loop spin
   * until the total timeout. One that throws or rejects by itself is a programming error: the
   * attempt is abandoned (its signal aborted), recorded as cancelled, and the call rejects with
   * that error.
   */
  sleep?: (ms: number, signal?: AbortSignal) => PromiseLike<void> | void
  /**
   * What an error means; return `undefined` for the default table (a network error is a
   * `'failure'`, a timeout a `'timeout'`, a `RetryLaterError` a retry later, anything else a
   * programming error, rethrown at once).
   */
  classify?: (error: unknown) => Outcome | undefined | null
  /** What a resolved value means (default `'success'`). */
  classifyResult?: (value: T) => Outcome
  /** Called before each wait. */
  onRetry?: (info: RetryInfo) => void
  /**
   * Called after each attempt, once recorded; also when the helper failed reporting it (a
   * classifier that threw, a response without a numeric status), which is then `'cancelled'`.
   */
  onAttempt?: (info: AttemptInfo) => void
}

/** Options of the HTTP helpers: responses are classified by the policy's classifier. */
export type ExecuteResponseOptions<T> = Omit<ExecuteOptions<T>, 'classifyResult'>

/** Options of `policy.fetch`. */
export interface FetchOptions extends ExecuteResponseOptions<Response> {
  /** The fetch to call (default `globalThis.fetch`). */
  fetch?: (input: string | URL | Request, init: RequestInit) => Promise<Response>
}

/** A response as `executeResponse` reads it (fetch's `Response` fits). */
export interface ResponseLike {
  readonly status: number
  readonly headers?: HeadersLike
}

/** One upstream's breaker, budget, quota and classifier, and the retry helpers built on them. */
export declare class Policy {
  constructor(options?: PolicyOptions)
  readonly breaker: Breaker
  readonly budget: RetryBudget
  readonly quota: RetryQuota | undefined
  readonly classifier: Classifier
  /** `breaker.syncFleet()`. */
  syncFleet(): Promise<FleetSync | null>
  /** Closes the fleet of the breaker the policy built (a `Breaker` given as `breaker` is the caller's to close). */
  close(): Promise<void>
  /**
   * The retry series only (`holdoff.retry.*`, durations in seconds), counted from the first
   * read; its breaker's and quota's come from them (`observe` reports all three).
   */
  metrics(): MetricReading[]
  newCall(): PolicyCall
  beforeAttempt(call: PolicyCall): Before
  afterAttempt(call: PolicyCall, permit: Permit, outcome: Outcome): Decision
  /**
   * `afterAttempt` for an HTTP response. A number that is not a status (outside 0..999) is a `RangeError`
   * `invalid_input` naming `status`, and the permit is then recorded as cancelled.
   */
  afterResponse(call: PolicyCall, permit: Permit, status: number, headers?: HeadersLike): Decision & { readonly outcome: OutcomeName | 'retry_later' }
  /**
   * Runs `fn` with retries, each attempt with its own signal. Resolves to the value (a success or
   * a value classified as an answer); rejects with the operation's own error (a final answer,
   * a programming error), `BreakerOpenError`, `GiveUpError`, or the caller's `signal.reason`.
   * An arrow function with no parameters (`async () => ...`) cannot see the signal: none is made.
   */
  execute<T>(fn: (signal: AbortSignal) => T | PromiseLike<T>, options?: ExecuteOptions<T>): Promise<T>
  /**
   * `execute` for functions resolving to an HTTP response, classified by status and headers:
   * resolves to a success or a final answer (a 404); 500s until the end reject with
   * `GiveUpError` carrying the last `response`; a status above 999 is a `RangeError`.
   */
  executeResponse<T extends ResponseLike>(fn: (signal: AbortSignal) => T | PromiseLike<T>, options?: ExecuteResponseOptions<T>): Promise<T>
  /**
   * `fetch` through `executeResponse`; the caller's signal is `options.signal`, `init.signal` or
   * a `Request`'s own. A body fetch spends (a stream, a `Request`'s) is not sent twice: where the
   * policy would retry, it rejects with `GiveUpError` `attempts_exhausted`.
   */
  fetch(input: string | URL | Request, init?: RequestInit, options?: FetchOptions): Promise<Response>
}

/**
 * For tests of `memory://` fleets: the store `name` fails every exchange (`'down'`), works again
 * (`'up'`) or forgets its records (`'flush'`). `invalid_input` naming `name` or `action`.
 */
export declare function memoryStoreControl(name: string, action: 'down' | 'up' | 'flush'): void
/** For tests: the `memory://` store `name` emptied and up. */
export declare function memoryStoreReset(name: string): void

/**
 * Waits `ms` (>= 0) milliseconds, chaining timers past 2^31-1 ms; rejects with `signal.reason`
 * on abort. `timers` defaults to the global `setTimeout`/`clearTimeout`.
 */
export declare function sleep(
  ms: number,
  signal?: AbortSignal,
  timers?: { setTimeout(cb: () => void, ms: number): unknown; clearTimeout(handle: any): void },
): Promise<void>

// ---------------------------------------------------------------------------------------------
// Metrics (docs/metrics.md)

/** One row of the metric table. */
export interface MetricDef {
  /** OpenTelemetry name, `holdoff.<object>.<what>`. */
  readonly name: string
  /** `counter`: cumulative since counting started; `gauge`: the value now. */
  readonly kind: 'counter' | 'gauge'
  /** UCUM unit: `s`, `1`, or an annotation such as `{call}`. */
  readonly unit: string
  readonly description: string
  /** The row's own attribute, or `null`. */
  readonly attribute: 'state' | 'outcome' | 'reason' | 'source' | null
  /** That attribute's values, in code order (empty without one). */
  readonly values: readonly string[]
}

/** The core's metric table, in code order (17 rows). */
export declare const METRICS: readonly MetricDef[]

/** One series' reading: a count, seconds, a state flag (1 or 0), tokens or keys. */
export interface MetricReading {
  name: string
  /** The row's own attribute if it has one, and `upstream` (a group's key, or `observe`'s). */
  attributes: Record<string, string>
  value: number
}

/**
 * What `observe` needs of an OpenTelemetry `Meter` (`@opentelemetry/api`'s `Meter` is one;
 * holdoff does not import its types, so the peer dependency stays optional).
 */
export interface MeterLike {
  createObservableCounter(name: string, options?: { description?: string; unit?: string }): object
  createObservableGauge(name: string, options?: { description?: string; unit?: string }): object
  addBatchObservableCallback(callback: (result: any) => void, observables: any[]): void
  removeBatchObservableCallback(callback: (result: any) => void, observables: any[]): void
}

export interface ObserveOptions {
  /** Added as the attribute `upstream` to every series (a breaker, policy or quota; not a group). */
  upstream?: string
}

/** A target `observe` reports; `close()` stops reading it. */
export declare class Observation {
  private constructor()
  /** Stops reading the target at collection (the instruments stay on the meter). Idempotent. */
  close(): void
}

/**
 * Reports the target's readings through observable instruments of `meter`, read at collection
 * time (one instrument per table row, made once per meter). Reads the target once now, which
 * starts its counting. `TypeError` `invalid_input` naming `meter`, `target`, `options` or
 * `upstream`.
 */
export declare function observe(meter: MeterLike, target: Breaker | Policy | RetryQuota | BreakerGroup, options?: ObserveOptions): Observation
