import { performance } from 'node:perf_hooks'
import type { Policy } from '../../core/rates/index.js'
import type { RatesBackend } from '../../rates/backend.js'
import { RatesInvalidArgumentError, RatesStoppedError, RatesUnavailableError } from '../../rates/errors.js'
import { isStack, QuotaMap } from '../../rates/limiter-map.js'
import { exactObject } from '../../validation/checks.js'
import { DECIDE_LUA, DECIDE_SHA } from './decide-script.js'
import type { QuotaBackend } from './quota-backend.js'
import { scriptCall, type RedisBackendClient, type RedisClientShape, type ScriptCall } from './redis-client.js'
import { RedisBackendLimiter } from './redis-limiter.js'
import { RedisBackendStack } from './redis-stack.js'
import { RedisFleetMember } from './fleet-membership.js'
import { RedisClientSlots } from './client-slots.js'
import type { LeaseSettings } from './lease-book.js'
import { clientFrom, denyCacheFrom, leasesFrom, prefixFrom, timeoutFrom } from './redis-options.js'

export { RedisBackendLimiter } from './redis-limiter.js'
export { RedisBackendStack } from './redis-stack.js'

// What the backend needs of a Redis client, typed structurally (no client package is loaded at
// run time): ioredis's or iovalkey's `Redis` and `Cluster`, node-redis's `createClient()` and
// `createCluster()`. See redis-client.ts.
export type { NodeRedisScriptClient, NodeRedisScriptOptions, RedisBackendClient, RedisClientShape, RedisScriptClient } from './redis-client.js'

export interface RedisDenyCacheOptions {
  /** Identities remembered per limiter; the oldest is dropped beyond it. Default 10 000. */
  maxEntries?: number
}

export interface RedisBackendOptions {
  /**
   * A client that the application owns (connects, and quits): ioredis or iovalkey (`Redis`,
   * `Cluster`), or node-redis (`createClient()`, `createCluster()`).
   */
  client: RedisBackendClient
  /** Start of every key; without `{` or `}` (the hash tag comes after it). Default `'admission:'`. */
  prefix?: string
  /**
   * A decision Redis has not answered within this many ms rejects with `RATES_UNAVAILABLE`.
   * Default 50. The script is told the server time at which that happens and consumes nothing
   * from then on (see `RedisBackend.args()`).
   */
  timeoutMs?: number
  /**
   * The local deny cache: an identity that Redis denied is denied locally, with no round trip,
   * while that is certain. `false` turns it off. Default `{ maxEntries: 10_000 }`.
   */
  denyCache?: false | RedisDenyCacheOptions
  /**
   * Leases for hot keys: an identity this process decides often takes a batch of units in one call
   * and is admitted from it locally (see docs/guides/hot-keys.md for what that does to the quota's
   * bound). `true` for the defaults. Off by default.
   */
  leases?: boolean | RedisLeaseOptions
}

export interface RedisLeaseOptions {
  /** The largest batch one lease takes. Default 100. */
  maxUnits?: number
  /** How long a lease lasts at most, in ms (a window's lease also ends with its window). Default 100. */
  holdMs?: number
  /** Identities followed per limiter; the one followed longest goes beyond it. Default 10 000. */
  maxEntries?: number
}


export { DEFAULT_DENY_CACHE_ENTRIES, DEFAULT_LEASES, DEFAULT_PREFIX, DEFAULT_TIMEOUT_MS } from './redis-options.js'

/** How long the check at start waits for a client still connecting, ms. */
const REACHABLE_WAIT_MS = 2000

/** What ioredis, iovalkey and node-redis clients say of their connection. */
interface ConnectionState {
  readonly status?: string
  readonly isReady?: boolean
  once?: (event: 'ready', listener: () => void) => unknown
  removeListener?: (event: 'ready', listener: () => void) => unknown
}

const REDIS_OPTIONS = { keys: ['client', 'prefix', 'timeoutMs', 'denyCache', 'leases'], expected: 'an object { client, prefix?, timeoutMs?, denyCache?, leases? }', options: true }

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
 * that key still hashes to one fixed slot, from the part before the brace. A stack of policies
 * (`stack()`) has one key per policy, `<prefix>{<address>:<identity>}/<i>`: one call on keys of
 * one slot (`redis-stack.ts`).
 *
 * Failures are never a silent allow: a timeout, a connection or server error, a call the script
 * refused as past its deadline (it consumed nothing), or a reply the backend does not understand
 * rejects with `RatesUnavailableError`; a key written under another policy rejects with
 * `RatesPolicyConflictError` and is left as it is. A stored state of this policy that fails the
 * script's validation is decided as the worst legitimate state (`stored-state.ts`), and so is a key
 * that holds no string (a hash, a list …): both are overwritten with that state and its TTL.
 */
export class RedisBackend implements RatesBackend, QuotaBackend {
  readonly kind = 'redis'
  readonly client: RedisBackendClient
  /** How `client` is called: `'ioredis'` (also iovalkey) or `'node-redis'`, seen at construction. */
  readonly clientShape: RedisClientShape
  readonly prefix: string
  readonly timeoutMs: number
  /** Entries per limiter's deny cache; 0 when it is off. */
  readonly denyCacheEntries: number
  /** Lease settings; undefined when leases are off. */
  readonly leases: LeaseSettings | undefined
  private readonly quotas = new QuotaMap<RedisBackendLimiter, RedisBackendStack>()
  /** Set only by `testingRedisBackend()` (tests): one clock for the script and the deny cache. */
  private testing: RedisBackendTesting | undefined
  private readonly call: ScriptCall
  private stopped = false
  /** The server's now in the latest reply that carried one, and the local time it came at. */
  private observedServerNow: number | undefined
  private observedLocal = 0

  constructor (options: RedisBackendOptions) {
    const input = exactObject(RatesInvalidArgumentError.complain, 'options', options, REDIS_OPTIONS)
    const { client, shape } = clientFrom(input.client)
    this.client = client
    this.clientShape = shape
    this.call = scriptCall(client, shape)
    this.prefix = prefixFrom(input.prefix)
    this.timeoutMs = timeoutFrom(input.timeoutMs)
    this.denyCacheEntries = denyCacheFrom(input.denyCache)
    this.leases = leasesFrom(input.leases)
  }

  get isStopped (): boolean {
    return this.stopped
  }

  /** The local clock, in ms: monotonic, fractional (only differences are used). */
  now (): number {
    return this.testing === undefined ? performance.now() : this.testing.now()
  }

  /**
   * The script's arguments after the key: the fingerprint, the amount (a cost, or "c<units>" for a
   * charge), in tests the time (else ''
   * when a deadline follows), and the deadline once a server time has been observed.
   *
   * The deadline is the server time at which this call's timeout fires, estimated from the latest
   * reply: the server read its clock before that reply came, so at local time `sent` its clock
   * reads at least `observedServerNow + (sent - observedLocal)`, and `timeoutMs` later at least
   * the deadline. A script that runs after the caller gave up (Redis paused, a long queue) then
   * sees its time at or past the deadline and consumes nothing; one that runs within the
   * observation's round trip before the timeout may be refused too ("too late", which the reply
   * also refreshes the observation with). Before any reply there is no deadline. Clock steps and
   * drift between the hosts since the observation shift it: the next reply corrects it.
   * `latest`, a server time, brings the deadline forward (a lease's give-back belongs to its window).
   */
  args (fingerprint: string, amount: string, sent: number, latest = Infinity): string[] {
    return this.timed([fingerprint, amount], sent, latest)
  }

  /** `lead` (a script's own arguments), then the test time and the deadline as `args()` sends them. */
  timed (lead: string[], sent: number, latest = Infinity): string[] {
    const time = this.testing === undefined ? '' : String(sent)
    const observed = this.observedServerNow
    const deadline = Math.min(latest, observed === undefined ? Infinity : Math.floor(observed + (sent - this.observedLocal) + this.timeoutMs))
    if (deadline === Infinity) {
      if (time !== '') lead.push(time)
      return lead
    }
    lead.push(time, String(deadline))
    return lead
  }

  /**
   * The server's time now, estimated from the latest reply: its time then plus the local time since
   * it came (the server read its clock before its reply left, so this is never ahead of it);
   * undefined before any reply.
   */
  serverNow (): number | undefined {
    return this.observedServerNow === undefined ? undefined : this.observedServerNow + (this.now() - this.observedLocal)
  }

  /** Keeps the server's now from a reply that came at local time `received`. */
  observe (serverNow: number, received: number): void {
    this.observedServerNow = serverNow
    this.observedLocal = received
  }

  limiter (address: string, policy: Readonly<Policy>): RedisBackendLimiter {
    if (this.stopped) throw new RatesStoppedError(address)
    return this.quotas.limiter(address, policy, () => new RedisBackendLimiter(this, address, policy))
  }

  /**
   * A stack of policies at `address`: each decision is one call of the stack script on one key per
   * policy, all in one hash slot (`redis-stack.ts`).
   */
  stack (address: string, policies: readonly Readonly<Policy>[]): RedisBackendStack {
    if (this.stopped) throw new RatesStoppedError(address)
    if (policies.length === 0) throw new RatesInvalidArgumentError('policies', 'one or more policies', policies)
    return this.quotas.stack(address, policies, () => new RedisBackendStack(this, address, policies))
  }

  /** A membership of the fleet `name`: one sorted set of live processes (`fleet-membership.ts`). */
  fleet (name: string, ttlMs: number, limit?: number): RedisFleetMember {
    if (this.stopped) throw new RatesStoppedError(`fleet ${name}`)
    return new RedisFleetMember(this, name, ttlMs, limit)
  }

  /** Per-client in-flight slots at `address`, shared by the fleet (`client-slots.ts`). */
  clientSlots (address: string): RedisClientSlots {
    if (this.stopped) throw new RatesStoppedError(`client slots ${address}`)
    return new RedisClientSlots(this, address)
  }

  /** Runs the decision script on `key` (`runScript`). */
  run (key: string, args: string[]): Promise<unknown> {
    return this.runScript(DECIDE_SHA, DECIDE_LUA, key, args)
  }

  /**
   * Runs a decision script (`sha` the SHA-1 of `source`) on `keys`: `EVALSHA`, then `EVAL` once if
   * (and only if) the server answers `NOSCRIPT`. Settles within `timeoutMs` of the call, whatever
   * the client does; an answer that comes later is dropped (the timer is cleared as soon as one comes).
   */
  runScript (sha: string, source: string, keys: string | readonly string[], args: string[]): Promise<unknown> {
    const call = this.call
    return this.within((answer, fail, settled) => {
      call('sha', sha, keys, args).then(answer, (error: unknown) => {
        // No EVAL for a decision that already failed (timed out).
        if (settled() || !isNoScript(error)) return fail(error)
        call('source', source, keys, args).then(answer, fail)
      })
    })
  }

  /** Runs a rarely used script (the registry's reads and deletes) with `EVAL`, within `timeoutMs`. */
  runOnce (script: string, keys: string | readonly string[], args: string[]): Promise<unknown> {
    return this.within((answer, fail) => {
      this.call('source', script, keys, args).then(answer, fail)
    })
  }

  /**
   * Whether the client is connected, by its own word (ioredis's and iovalkey's `status`,
   * node-redis's `isReady`): no command is sent. One still connecting is given REACHABLE_WAIT_MS
   * to say `ready`. A client that says nothing of its state is taken as reachable.
   */
  async reachable (): Promise<void> {
    const client = this.client as unknown as ConnectionState
    const ready = client.status !== undefined ? client.status === 'ready' : client.isReady ?? true
    if (ready || typeof client.once !== 'function') return
    await new Promise<void>((resolve, reject) => {
      const connected = (): void => {
        clearTimeout(timer)
        resolve()
      }
      const timer = setTimeout(() => {
        client.removeListener?.('ready', connected)
        reject(new RatesUnavailableError(`the client is not connected (${client.status === undefined ? 'not ready' : `status ${JSON.stringify(client.status)}`}) after ${REACHABLE_WAIT_MS} ms`))
      }, REACHABLE_WAIT_MS)
      timer.unref()
      client.once!('ready', connected)
    })
  }

  /**
   * Settles within `timeoutMs` of the call, whatever the client does; an answer that comes later
   * is dropped (the timer is cleared as soon as one comes).
   */
  private within (start: (answer: (reply: unknown) => void, fail: (error: unknown) => void, settled: () => boolean) => void): Promise<unknown> {
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
      start(answer, fail, () => settled)
    })
  }

  /**
   * Ends the backend's part: its limiters reject with `RatesStoppedError` from now on (a decision
   * in flight still settles) and give back the units their leases hold, which this waits for
   * (each within `timeoutMs`). The client stays open: the application owns it.
   */
  async stop (): Promise<void> {
    this.stopped = true
    const quotas = [...this.quotas.values()]
    this.quotas.clear()
    await Promise.all(quotas.map(async (quota) => isStack(quota) ? undefined : quota.stop()))
  }
}

/**
 * A test seam, not part of the package's exports: `now()` replaces both clocks. It is sent to the
 * script as its test time (instead of the server's `TIME`) and is the local clock of the deny cache
 * and of the deadline.
 */
export interface RedisBackendTesting {
  now: () => number
}

/** For tests only (not exported by the package): a backend whose clocks are `testing.now`. */
export function testingRedisBackend (options: RedisBackendOptions, testing: RedisBackendTesting): RedisBackend {
  const backend = new RedisBackend(options)
  ;(backend as unknown as { testing: RedisBackendTesting }).testing = testing
  return backend
}

/** The Redis backend: quotas shared by every process that uses the same Redis and prefix. */
export function redisBackend (options: RedisBackendOptions): RedisBackend {
  return new RedisBackend(options)
}


function isNoScript (error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT')
}

function messageOf (error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}

