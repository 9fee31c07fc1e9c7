import { performance } from 'node:perf_hooks'
import { kernelOf, type Kernel, type Policy } from '../../core/rates/index.js'
import type { BackendLimiter, RatesBackend } from '../backend.js'
import { allowedDecision, deniedDecision, type RateDecision, type RateDenied } from '../decision.js'
import { RatesInvalidArgumentError, RatesPolicyConflictError, RatesStoppedError, RatesUnavailableError } from '../errors.js'
import { policyFingerprint, samePolicy } from '../policy.js'
import { DECIDE_LUA, DECIDE_SHA } from './decide-script.js'

/**
 * What the backend needs of a Redis client: `EVALSHA` and `EVAL` as ioredis (and iovalkey, its
 * fork) expose them, returning promises. Typed structurally so that no client package is loaded
 * at run time; a `Redis` or `Cluster` instance from either package fits.
 */
export interface RedisScriptClient {
  evalsha (sha: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>
  eval (script: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>
}

export interface RedisDenyCacheOptions {
  /** Identities remembered per limiter; the oldest is dropped beyond it. Default 10 000. */
  maxEntries?: number
}

export interface RedisBackendOptions {
  /** An ioredis or iovalkey client that the application owns (connects, and quits). */
  client: RedisScriptClient
  /** Start of every key; without `{` or `}` (the hash tag comes after it). Default `'admission:'`. */
  prefix?: string
  /** A decision Redis has not answered within this many ms rejects with `RATES_UNAVAILABLE`. Default 50. */
  timeoutMs?: number
  /**
   * The local deny cache: an identity that Redis denied is denied locally, with no round trip,
   * while that is certain. `false` turns it off. Default `{ maxEntries: 10_000 }`.
   */
  denyCache?: false | RedisDenyCacheOptions
}

/**
 * @internal For tests only: `now()` replaces both clocks. It is sent to the script as its test
 * time (instead of the server's `TIME`) and is the local clock of the deny cache. `redisBackend()`
 * never sets it.
 */
export interface RedisBackendTesting {
  now: () => number
}

export const DEFAULT_PREFIX = 'admission:'
export const DEFAULT_TIMEOUT_MS = 50
export const DEFAULT_DENY_CACHE_ENTRIES = 10_000

const OPTIONS = ['client', 'prefix', 'timeoutMs', 'denyCache']
const FINGERPRINT = /^(token-bucket|fixed-window|sliding-window-counter|gcra):([1-9][0-9]*):([1-9][0-9]*)(?::([1-9][0-9]*))?$/

/**
 * Quotas in Redis (or Valkey), shared by every process and host that uses the same server and
 * prefix. Each decision is one `EVALSHA` of one script on one key, which reads the server's clock,
 * checks the stored policy, decides as the algorithm's TypeScript kernel does, and stores the new
 * state with a TTL that ends when it has fully recovered — atomically. On `NOSCRIPT` only, the
 * same call is made once with `EVAL` (which also caches the script on the server).
 *
 * Key layout: `<prefix>{<address>:<identity>}`. Each call touches a single key, so Redis Cluster
 * needs no two keys on one slot, and the hash tag covers the address and the identity together:
 * one limiter's identities spread over every shard (a global limiter with a million clients is not
 * one shard's load), and the prefix — or braces inside an identity — cannot choose the slot. The
 * prefix may not contain braces, so the tag always opens right after it; limiter addresses never
 * contain braces (their segments are URI-encoded). An identity containing `}` ends the tag early:
 * that key still hashes to one fixed slot, from the part before the brace.
 *
 * Failures are never a silent allow: a timeout, a connection or server error, or a reply the
 * backend does not understand rejects with `RatesUnavailableError`; a key written under another
 * policy rejects with `RatesPolicyConflictError` and is left as it is.
 */
export class RedisBackend implements RatesBackend {
  readonly kind = 'redis'
  readonly client: RedisScriptClient
  readonly prefix: string
  readonly timeoutMs: number
  /** Entries per limiter's deny cache; 0 when it is off. */
  readonly denyCacheEntries: number
  private readonly limiters = new Map<string, RedisBackendLimiter>()
  private readonly testing: RedisBackendTesting | undefined
  private stopped = false

  constructor (options: RedisBackendOptions, testing?: RedisBackendTesting) {
    const input: unknown = options
    if (typeof input !== 'object' || input === null || Object.getPrototypeOf(input) !== Object.prototype) {
      throw new RatesInvalidArgumentError('options', 'an object { client, prefix?, timeoutMs?, denyCache? }', input)
    }
    for (const key of Reflect.ownKeys(input)) {
      if (!OPTIONS.includes(key as string)) {
        throw new RatesInvalidArgumentError(`options.${String(key)}`, `one of ${OPTIONS.join(', ')} (unknown option)`, (input as Record<PropertyKey, unknown>)[key])
      }
    }
    this.client = clientFrom(options.client)
    this.prefix = prefixFrom(options.prefix)
    this.timeoutMs = timeoutFrom(options.timeoutMs)
    this.denyCacheEntries = denyCacheFrom(options.denyCache)
    this.testing = testing
  }

  get isStopped (): boolean {
    return this.stopped
  }

  /** The local clock, in ms: monotonic, fractional (only differences are used). */
  now (): number {
    return this.testing === undefined ? performance.now() : this.testing.now()
  }

  /** The script's arguments after the key: the fingerprint, the cost, and in tests the time. */
  args (fingerprint: string, cost: number, sent: number): string[] {
    return this.testing === undefined ? [fingerprint, String(cost)] : [fingerprint, String(cost), String(sent)]
  }

  limiter (address: string, policy: Readonly<Policy>): RedisBackendLimiter {
    if (this.stopped) throw new RatesStoppedError(address)
    const existing = this.limiters.get(address)
    if (existing !== undefined) {
      if (!samePolicy(existing.policy, policy)) throw new RatesPolicyConflictError(address, existing.policy, policy)
      return existing
    }
    const limiter = new RedisBackendLimiter(this, address, policy)
    this.limiters.set(address, limiter)
    return limiter
  }

  /**
   * Runs the script on `key`: `EVALSHA`, then `EVAL` once if (and only if) the server answers
   * `NOSCRIPT`. Settles within `timeoutMs` of the call, whatever the client does; an answer that
   * comes later is dropped (the timer is cleared as soon as one comes).
   */
  run (key: string, args: string[]): Promise<unknown> {
    const client = this.client
    return new Promise((resolve, reject) => {
      let settled = false
      const timer = setTimeout(() => {
        settled = true
        reject(new RatesUnavailableError(`Redis did not answer within ${this.timeoutMs} ms`))
      }, this.timeoutMs)
      const answer = (reply: unknown): void => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        resolve(reply)
      }
      const fail = (error: unknown): void => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        reject(new RatesUnavailableError(`Redis failed: ${messageOf(error)}`, { cause: error }))
      }
      send(() => client.evalsha(DECIDE_SHA, 1, key, ...args)).then(answer, (error: unknown) => {
        if (settled || !isNoScript(error)) return fail(error)
        send(() => client.eval(DECIDE_LUA, 1, key, ...args)).then(answer, fail)
      })
    })
  }

  /**
   * Ends the backend's part: its limiters reject with `RatesStoppedError` from now on (a decision
   * in flight still settles). The client stays open: the application owns it.
   */
  async stop (): Promise<void> {
    this.stopped = true
    for (const limiter of this.limiters.values()) limiter.cache?.clear()
    this.limiters.clear()
  }
}

export class RedisBackendLimiter implements BackendLimiter {
  readonly policy: Readonly<Policy>
  readonly address: string
  /** The deny cache, when the backend has one. */
  readonly cache: DenyCache | undefined
  private readonly backend: RedisBackend
  private readonly kernel: Kernel<unknown>
  private readonly fingerprint: string
  private readonly keyStart: string

  constructor (backend: RedisBackend, address: string, policy: Readonly<Policy>) {
    this.backend = backend
    this.address = address
    this.policy = policy
    this.kernel = kernelOf(policy.algorithm)
    this.fingerprint = policyFingerprint(policy)
    this.keyStart = `${backend.prefix}{${address}:`
    this.cache = backend.denyCacheEntries === 0 ? undefined : new DenyCache(backend.denyCacheEntries, this.kernel, policy)
  }

  /** The Redis key of an identity's state. */
  keyOf (identity: string): string {
    return this.keyStart + identity + '}'
  }

  async consume (identity: string, cost: number): Promise<RateDecision> {
    const backend = this.backend
    if (backend.isStopped) throw new RatesStoppedError(this.address)
    const sent = backend.now()
    const cache = this.cache
    if (cache !== undefined) {
      const denied = cache.answer(identity, cost, sent)
      if (denied !== undefined) return denied
    }
    const reply = await backend.run(this.keyOf(identity), backend.args(this.fingerprint, cost, sent))
    const received = backend.now()
    if (isDecision(reply, this.kernel.fields)) {
      const [, allowed, remaining, retryAfterMs, resetAt, serverNow] = reply
      if (allowed === 1) {
        cache?.forget(identity)
        return allowedDecision(remaining, resetAt)
      }
      cache?.remember(identity, this.kernel.read(Float64Array.from(reply.slice(6)), 0), serverNow, sent, received)
      return deniedDecision(remaining, retryAfterMs, resetAt)
    }
    if (Array.isArray(reply) && reply.length === 2 && reply[0] === 1 && typeof reply[1] === 'string') {
      const stored = policyOf(reply[1])
      if (stored !== undefined) throw new RatesPolicyConflictError(this.address, stored, this.policy)
      throw new RatesUnavailableError(`the key ${JSON.stringify(this.keyOf(identity))} holds a value this backend did not write`)
    }
    throw new RatesUnavailableError(`unexpected reply from the script for ${JSON.stringify(this.keyOf(identity))}: ${JSON.stringify(reply)}`)
  }
}

interface DenyEntry {
  /** The state after the denial, as the script returned it. */
  readonly state: unknown
  /** The server's time of that decision (ms). */
  readonly serverNow: number
  /** Local clock when the request was sent, and when its reply came. */
  readonly sent: number
  readonly received: number
  /** Local time after which the state may have fully recovered: nothing left to deny. */
  readonly expires: number
}

/**
 * A bounded local memory of denials: per identity, the last state Redis returned with a denial,
 * and when. Rule: a request is denied locally iff the algorithm's kernel, run on that state at the
 * LATEST time the server's clock can read by now, denies its cost. Otherwise it goes to Redis.
 *
 * Why that never denies what Redis would allow: the state in Redis is that state plus whatever was
 * consumed since (consuming never makes a cost pass sooner; only Redis's own expiry, which comes
 * after full recovery, or someone deleting keys by hand, removes state), and every algorithm only
 * recovers as time passes. The server read its clock (`serverNow`, floored to the ms) after the
 * request was sent, so now it reads at most serverNow + ceil(localNow - sent) (clock rates agree;
 * drift over a recovery time is far below a ms). Any cost, not only the denied one, is answered
 * this way: a smaller cost that might pass goes to Redis.
 *
 * The answer's fields are what Redis would say, made conservative for the uncertainty of the
 * server's time (one round trip): `remaining` at the EARLIEST time the server can read by now,
 * serverNow + floor(localNow - received); `retryAfterMs` counted so that waiting it locally
 * reaches the passing time on the server's clock for sure (never early); `resetAt` the kernel's
 * (a denial does not move it). With one clock (the test hook) they are exactly Redis's answer.
 *
 * A local denial consumes nothing and writes nothing, so Redis keeps the state the kernel last
 * stored; should the server's clock later step back, a decision made there may then differ from
 * one made without the cache (the kernels' rule for such clocks is itself an approximation), but
 * no time is ever credited twice.
 *
 * Bounded: at `maxEntries`, the entry remembered longest ago goes (a lost entry costs one round
 * trip, never a wrong decision); an entry is dropped when found expired or when Redis admits.
 */
export class DenyCache {
  readonly maxEntries: number
  private readonly entries = new Map<string, DenyEntry>()
  private readonly kernel: Kernel<unknown>
  private readonly policy: Policy

  constructor (maxEntries: number, kernel: Kernel<unknown>, policy: Policy) {
    this.maxEntries = maxEntries
    this.kernel = kernel
    this.policy = policy
  }

  get size (): number {
    return this.entries.size
  }

  /** A local denial of `cost` at local time `now`, or undefined: ask Redis. */
  answer (identity: string, cost: number, now: number): RateDenied | undefined {
    const entry = this.entries.get(identity)
    if (entry === undefined) return undefined
    if (now >= entry.expires) {
      this.entries.delete(identity)
      return undefined
    }
    const latest = entry.serverNow + Math.ceil(now - entry.sent)
    const outcome = this.kernel.consume(entry.state, this.policy, latest, cost)
    if (outcome.allowed) return undefined
    const earliest = entry.serverNow + Math.floor(now - entry.received)
    const remaining = this.kernel.consume(entry.state, this.policy, earliest, cost).remaining
    // Passes at latest + retry on the server's clock at the earliest; that clock reads at least
    // `earliest` now.
    return deniedDecision(remaining, latest + outcome.retryAfterMs - earliest, outcome.resetAt)
  }

  remember (identity: string, state: unknown, serverNow: number, sent: number, received: number): void {
    const entries = this.entries
    entries.delete(identity)
    if (entries.size >= this.maxEntries) entries.delete(entries.keys().next().value as string)
    const expires = sent + this.kernel.recoversAt(state, this.policy) - serverNow
    entries.set(identity, { state, serverNow, sent, received, expires })
  }

  forget (identity: string): void {
    this.entries.delete(identity)
  }

  clear (): void {
    this.entries.clear()
  }
}

/** The Redis backend: quotas shared by every process that uses the same Redis and prefix. */
export function redisBackend (options: RedisBackendOptions): RedisBackend {
  return new RedisBackend(options)
}

type DecisionReply = [0, 0 | 1, number, number, number, number, ...number[]]

function isDecision (reply: unknown, fields: number): reply is DecisionReply {
  return Array.isArray(reply) && reply[0] === 0 &&
    reply.length === (reply[1] === 1 ? 6 : reply[1] === 0 ? 6 + fields : -1) &&
    reply.every((n) => Number.isSafeInteger(n))
}

/** The policy a stored fingerprint names, or undefined when it is not one. */
export function policyOf (fingerprint: string): Policy | undefined {
  const match = FINGERPRINT.exec(fingerprint)
  if (match === null) return undefined
  const [, algorithm, limit, windowMs, burst] = match as unknown as [string, Policy['algorithm'], string, string, string | undefined]
  const policy: Policy = burst === undefined
    ? { algorithm, limit: Number(limit), windowMs: Number(windowMs) }
    : { algorithm, limit: Number(limit), windowMs: Number(windowMs), burst: Number(burst) }
  return Object.freeze(policy)
}

function send (call: () => Promise<unknown>): Promise<unknown> {
  try {
    return Promise.resolve(call())
  } catch (error) {
    return Promise.reject(error)
  }
}

function isNoScript (error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT')
}

function messageOf (error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}

function clientFrom (client: unknown): RedisScriptClient {
  const candidate = client as { evalsha?: unknown, eval?: unknown } | null
  if (typeof candidate !== 'object' || candidate === null || typeof candidate.evalsha !== 'function' || typeof candidate.eval !== 'function') {
    throw new RatesInvalidArgumentError('options.client', 'a Redis client with evalsha() and eval() (an ioredis or iovalkey instance)', client)
  }
  return client as RedisScriptClient
}

function prefixFrom (prefix: unknown): string {
  if (prefix === undefined) return DEFAULT_PREFIX
  if (typeof prefix !== 'string' || /[{}]/.test(prefix)) {
    throw new RatesInvalidArgumentError('options.prefix', 'a string without { or } (the key\'s hash tag follows it)', prefix)
  }
  return prefix
}

function timeoutFrom (timeoutMs: unknown): number {
  if (timeoutMs === undefined) return DEFAULT_TIMEOUT_MS
  if (typeof timeoutMs !== 'number' || !Number.isSafeInteger(timeoutMs) || timeoutMs <= 0) {
    throw new RatesInvalidArgumentError('options.timeoutMs', 'a positive safe integer (milliseconds)', timeoutMs)
  }
  return timeoutMs
}

function denyCacheFrom (denyCache: unknown): number {
  if (denyCache === undefined) return DEFAULT_DENY_CACHE_ENTRIES
  if (denyCache === false) return 0
  const expected = 'false or an object { maxEntries? }'
  if (typeof denyCache !== 'object' || denyCache === null || Object.getPrototypeOf(denyCache) !== Object.prototype) {
    throw new RatesInvalidArgumentError('options.denyCache', expected, denyCache)
  }
  for (const key of Reflect.ownKeys(denyCache)) {
    if (key !== 'maxEntries') {
      throw new RatesInvalidArgumentError(`options.denyCache.${String(key)}`, `${expected} (unknown option)`, (denyCache as Record<PropertyKey, unknown>)[key])
    }
  }
  const maxEntries = (denyCache as RedisDenyCacheOptions).maxEntries
  if (maxEntries === undefined) return DEFAULT_DENY_CACHE_ENTRIES
  if (typeof maxEntries !== 'number' || !Number.isSafeInteger(maxEntries) || maxEntries <= 0) {
    throw new RatesInvalidArgumentError('options.denyCache.maxEntries', 'a positive safe integer', maxEntries)
  }
  return maxEntries
}
