import { kernelFor, type Kernel, type Policy } from '../../core/rates/index.js'
import type { BackendLimiter } from '../../rates/backend.js'
import { allowedDecision, deniedDecision, type RateDecision } from '../../rates/decision.js'
import { RatesStoppedError, RatesUnavailableError } from '../../rates/errors.js'
import { policyFingerprint } from '../../rates/policy.js'
import { DenyCache } from './deny-cache.js'
import { LeaseBook, type QuotaAnswer } from './lease-book.js'
import type { QuotaBackend } from './quota-backend.js'
import { keyConflict, readStored } from './stored-state.js'

// The registry's scripts: rare calls (an application resetting or inspecting one client), so plain
// EVAL; one key each, like the decision.
const READ_LUA = "return redis.call('GET', KEYS[1])"
const DELETE_LUA = `local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local f = string.match(v, '^(%S+)')
if f ~= ARGV[1] then return { f or '' } end
redis.call('DEL', KEYS[1])
return 1`

/** One limiter of the Redis backend: one policy at one address, one key per identity (see `RedisBackend`). */
export class RedisBackendLimiter implements BackendLimiter {
  readonly policy: Readonly<Policy>
  readonly address: string
  /** The deny cache, when the backend has one. */
  readonly cache: DenyCache | undefined
  private readonly backend: QuotaBackend
  private readonly kernel: Kernel<unknown>
  private readonly fingerprint: string
  private readonly keyStart: string
  /** Leases for hot identities, when the backend has them (`leases` option). */
  private readonly leases: LeaseBook | undefined

  constructor (backend: QuotaBackend, address: string, policy: Readonly<Policy>) {
    this.backend = backend
    this.address = address
    this.policy = policy
    this.kernel = kernelFor(policy)
    this.fingerprint = policyFingerprint(policy)
    this.keyStart = `${backend.prefix}{${address}:`
    // A penalty's block grows with each refusal, which a local denial could not tell Redis: every
    // request of a penalized policy goes to Redis.
    this.cache = backend.denyCacheEntries === 0 || policy.penalty !== undefined ? undefined : new DenyCache(backend.denyCacheEntries, this.kernel, policy)
    // Units used locally could not see a block another process's refusal starts: no leases either.
    const leases = backend.leases
    this.leases = leases === undefined || policy.penalty !== undefined
      ? undefined
      : new LeaseBook({
        policy,
        now: () => backend.now(),
        decide: async (identity, cost, sent) => this.answer(identity, String(cost), sent),
        denied: (identity, cost) => this.cache?.answer(identity, cost, backend.now()),
        giveBack: async (identity, units, deadline, sent) => {
          this.cache?.forget(identity)
          return this.answer(identity, `c${-units}`, sent, deadline)
        }
      }, leases)
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
    if (this.leases !== undefined) return this.leases.consume(identity, cost)
    return (await this.answer(identity, String(cost), sent)).decision
  }

  /**
   * One script call, as a decision: the script charges `units` whatever the state holds
   * ("c<units>") and answers for a cost-1 request right after it. Never from the deny cache: a
   * charge always reaches Redis, and what it answers replaces what the cache remembered.
   */
  async charge (identity: string, units: number, returnBy = Infinity): Promise<RateDecision> {
    const backend = this.backend
    if (backend.isStopped) throw new RatesStoppedError(this.address)
    const sent = backend.now()
    this.cache?.forget(identity)
    // Units returned: the script refuses them from the server's time `returnBy` on (its deadline).
    return (await this.answer(identity, `c${units}`, sent, units < 0 ? returnBy : Infinity)).decision
  }

  /** The server's time now as its last reply gave it (never ahead of it); undefined before any reply. */
  now (): number | undefined {
    return this.backend.serverNow()
  }

  /** One script call on the identity's key (`amount` a cost or "c<units>"), refused by the script from its time `latest` on. */
  private async answer (identity: string, amount: string, sent: number, latest = Infinity): Promise<QuotaAnswer> {
    const backend = this.backend
    const reply = await backend.run(this.keyOf(identity), backend.args(this.fingerprint, amount, sent, latest))
    return this.decided(identity, reply, sent)
  }

  private decided (identity: string, reply: unknown, sent: number): QuotaAnswer {
    const backend = this.backend
    const cache = this.cache
    const received = backend.now()
    if (isDecision(reply, this.kernel.fields)) {
      const [, allowed, remaining, retryAfterMs, resetAt, serverNow, moreAt] = reply
      backend.observe(serverNow, received)
      if (allowed === 1) {
        cache?.forget(identity)
        return { decision: allowedDecision(remaining, resetAt, moreAt), serverNow }
      }
      cache?.remember(identity, this.kernel.read(Float64Array.from(reply.slice(7)), 0), serverNow, sent, received)
      return { decision: deniedDecision(remaining, retryAfterMs, resetAt, moreAt), serverNow }
    }
    if (Array.isArray(reply) && reply.length === 2 && reply[0] === 1 && typeof reply[1] === 'string') this.conflict(reply[1], this.keyOf(identity))
    if (Array.isArray(reply) && reply.length === 2 && reply[0] === 3 && Number.isSafeInteger(reply[1])) {
      backend.observe(reply[1] as number, received)
      throw new RatesUnavailableError(`too late: Redis ran the decision for ${JSON.stringify(this.keyOf(identity))} after its deadline (the ${backend.timeoutMs} ms timeout); it consumed nothing`)
    }
    throw new RatesUnavailableError(`unexpected reply from the script for ${JSON.stringify(this.keyOf(identity))}: ${JSON.stringify(reply)}`)
  }

  /** The stored state, or undefined; a key written under another policy is a conflict. */
  async state (identity: string): Promise<unknown> {
    if (this.backend.isStopped) throw new RatesStoppedError(this.address)
    const key = this.keyOf(identity)
    const stored = await this.backend.runOnce(READ_LUA, key, [])
    if (stored === null) return undefined
    if (typeof stored === 'string') {
      // As the script reads it, except for the time bounds (no server time here).
      const read = readStored(stored, this.policy, this.fingerprint, Infinity)
      if (read.kind === 'conflict') this.conflict(read.fingerprint, key)
      if (read.valid) return read.state
    }
    throw new RatesUnavailableError(`the key ${JSON.stringify(key)} holds a value this backend did not write`)
  }

  /** Deletes the state if it was written under this policy; true when there was one. */
  async delete (identity: string): Promise<boolean> {
    if (this.backend.isStopped) throw new RatesStoppedError(this.address)
    const key = this.keyOf(identity)
    // A local denial would outlive the state it was drawn from, and a lease the units it counted.
    this.cache?.forget(identity)
    this.leases?.forget(identity)
    const reply = await this.backend.runOnce(DELETE_LUA, key, [this.fingerprint])
    if (reply === 1) return true
    if (reply === 0) return false
    if (Array.isArray(reply) && typeof reply[0] === 'string') this.conflict(reply[0], key)
    throw new RatesUnavailableError(`unexpected reply from the delete script for ${JSON.stringify(key)}: ${JSON.stringify(reply)}`)
  }

  /** Ends the limiter's local part: forgets its denials, gives back its leases (and waits for that). */
  async stop (): Promise<void> {
    this.cache?.clear()
    await this.leases?.stop()
  }

  private conflict (fingerprint: string, key: string): never {
    return keyConflict(this.address, this.policy, fingerprint, key)
  }
}

type DecisionReply = [0, 0 | 1, number, number, number, number, number, ...number[]]

function isDecision (reply: unknown, fields: number): reply is DecisionReply {
  return Array.isArray(reply) && reply[0] === 0 &&
    reply.length === (reply[1] === 1 ? 7 : reply[1] === 0 ? 7 + fields : -1) &&
    reply.every((n) => Number.isSafeInteger(n))
}
