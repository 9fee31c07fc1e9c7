import type { Algorithm, Policy } from '../core/rates/types.js'
import type { BackendLimiter, RatesBackend } from './backend.js'
import type { RateDecision } from './decision.js'
import { RatesInvalidArgumentError, RatesPolicyConflictError, RatesStoppedError } from './errors.js'
import { encodeIdentity, validateCost, wellFormed } from './identity.js'
import { capacityOf, normalizePolicy, samePolicy } from './policy.js'
import { exactObject } from '../validation/checks.js'

export type IdentityPrimitive = string | number | bigint | boolean
/** A primitive, a tuple of at most 16 primitives, or a plain record of at most 16 primitive fields. */
export type Identity = IdentityPrimitive | readonly IdentityPrimitive[] | { readonly [field: string]: IdentityPrimitive }

export interface RatePolicy {
  algorithm: Algorithm
  limit: number
  windowMs: number
  /** Capacity of `token-bucket` and `gcra` (default `limit`); not allowed for the window algorithms. */
  burst?: number
}

export interface ConsumeOptions {
  /** Units this call takes: a positive safe integer at most the policy's capacity (default 1). */
  cost?: number
}

export interface RateLimiter {
  readonly name: string
  readonly policy: Readonly<Policy>
  /** Resolves with the decision (a deny is a decision); rejects with a `RatesError` when none can be made. */
  consume (identity: Identity, options?: ConsumeOptions): Promise<RateDecision>
}

export interface RatesScope {
  /** A limiter whose quota belongs to the calling plugin (Fastify encapsulation context). */
  use (name: string, policy: RatePolicy): RateLimiter
}

export interface Rates extends RatesScope {
  /** Limiters whose quota is shared on purpose by every plugin that uses the same name. */
  readonly global: RatesScope
}

/** What every caller of one registration shares: the backend and whether it has stopped. */
export class RatesRuntime {
  readonly backend: RatesBackend
  /** Whether stopping the runtime stops the backend: only when the plugin made it. */
  private readonly owned: boolean
  private stopped = false

  constructor (backend: RatesBackend, owned: boolean) {
    this.backend = backend
    this.owned = owned
  }

  get isStopped (): boolean {
    return this.stopped
  }

  async stop (): Promise<void> {
    this.stopped = true
    if (this.owned) await this.backend.stop()
  }
}

const NAME_LIMIT = 256

function checkName (name: unknown): string {
  if (typeof name !== 'string' || name.length === 0 || name.length > NAME_LIMIT || !wellFormed(name) || /\p{Cc}/u.test(name)) {
    throw new RatesInvalidArgumentError('name', `a static limiter name: a well-formed string of 1 to ${NAME_LIMIT} characters without control characters`, name)
  }
  return name
}

class Limiter implements RateLimiter {
  readonly name: string
  readonly policy: Readonly<Policy>
  private readonly runtime: RatesRuntime
  private readonly target: BackendLimiter
  private readonly capacity: number

  constructor (runtime: RatesRuntime, name: string, policy: Readonly<Policy>, target: BackendLimiter) {
    this.runtime = runtime
    this.name = name
    this.policy = policy
    this.target = target
    this.capacity = capacityOf(policy)
  }

  consume (identity: Identity, options?: ConsumeOptions): Promise<RateDecision> {
    if (this.runtime.isStopped) return Promise.reject(new RatesStoppedError(this.name))
    let key: string
    let cost: number
    try {
      key = encodeIdentity(identity)
      cost = validateCost(costOption(options), this.capacity)
    } catch (error) {
      return Promise.reject(error)
    }
    return this.target.consume(key, cost)
  }
}

const CONSUME_OPTIONS = { keys: ['cost'], expected: 'an object { cost? }', options: true }

function costOption (options: unknown): unknown {
  if (options === undefined) return undefined
  return exactObject(RatesInvalidArgumentError.complain, 'options', options, CONSUME_OPTIONS).cost
}

/**
 * The limiters of one caller (or of the global scope, seen from one caller). `address` prefixes
 * every quota's address in the backend. The same name with the same normalized policy gives the
 * same handle; with another policy, `RatesPolicyConflictError`.
 */
export class Scope implements RatesScope {
  private readonly runtime: RatesRuntime
  private readonly address: string
  private readonly handles = new Map<string, Limiter>()

  constructor (runtime: RatesRuntime, address: string) {
    this.runtime = runtime
    this.address = address
  }

  use (name: string, policy: RatePolicy): RateLimiter {
    if (this.runtime.isStopped) throw new RatesStoppedError(typeof name === 'string' ? name : undefined)
    const checked = checkName(name)
    const normalized = normalizePolicy(policy)
    const existing = this.handles.get(checked)
    if (existing !== undefined) {
      if (!samePolicy(existing.policy, normalized)) throw new RatesPolicyConflictError(checked, existing.policy, normalized)
      return existing
    }
    let target: BackendLimiter
    try {
      target = this.runtime.backend.limiter(`${this.address}#${encodeURIComponent(checked)}`, normalized)
    } catch (error) {
      // The backend names the quota by its address; the caller knows it by its name.
      if (error instanceof RatesPolicyConflictError) throw new RatesPolicyConflictError(checked, error.existing, error.requested)
      throw error
    }
    const limiter = new Limiter(this.runtime, checked, normalized, target)
    this.handles.set(checked, limiter)
    return limiter
  }
}

export const GLOBAL_ADDRESS = 'global'

/**
 * The `rates` a caller sees: its own scope at `address`, and a global scope of its own whose
 * quotas (not handles) are shared with every other caller.
 */
export function ratesFor (runtime: RatesRuntime, address: string): Rates {
  const own = new Scope(runtime, address)
  return Object.freeze({ use: own.use.bind(own), global: new Scope(runtime, GLOBAL_ADDRESS) })
}
