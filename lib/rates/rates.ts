import type { Algorithm, PenaltyOption, Policy } from '../core/rates/types.js'
import { limiterAddress } from './address.js'
import type { BackendLimiter, StackLimiter } from './backend.js'
import { costOption, type ConsumeOptions } from './consume-options.js'
import type { RateDecision } from './decision.js'
import { RatesInvalidArgumentError, RatesPolicyConflictError, RatesStoppedError } from './errors.js'
import { encodeIdentity, validateCost, wellFormed, type Identity } from './identity.js'
import { sameStack } from './limiter-map.js'
import { checkCharge, type CheckedCharge } from './charge-check.js'
import { capacityOf, normalizePolicy, samePolicy } from './policy.js'
import { normalizePolicies } from './policy-stack.js'
import type { RatesRuntime } from './runtime.js'
import { StackedLimiter, type StackedRateLimiter } from './stacked-limiter.js'

export type { ConsumeOptions } from './consume-options.js'
export type { Identity, IdentityPrimitive } from './identity.js'
export { RatesRuntime } from './runtime.js'
export type { StackedRateLimiter } from './stacked-limiter.js'

export interface RatePolicy {
  algorithm: Algorithm
  limit: number
  windowMs: number
  /** Capacity of `token-bucket` and `gcra` (default `limit`); not allowed for the window algorithms. */
  burst?: number
  /** Refusals block, longer while the client keeps asking (`'restart'` or `'double'`); a single limiter's policy only, not a stack's. */
  penalty?: PenaltyOption
}

/**
 * One policy on one quota. It has no `check`: its quota lives at `RatesBackend.limiter`, whose
 * contract only consumes; stack the one policy (`use(name, [policy])`) to check without consuming.
 */
export interface RateLimiter {
  readonly name: string
  readonly policy: Readonly<Policy>
  /** Resolves with the decision (a deny is a decision); rejects with a `RatesError` when none can be made. */
  consume (identity: Identity, options?: ConsumeOptions): Promise<RateDecision>
  /**
   * Charges `units` known only after the work (tokens, bytes, rows): taken whatever the quota
   * holds, so the identity may go into debt and is refused, with an honest wait, until time has
   * repaid it; a negative amount returns units an estimate took too many of. |units| is at most the
   * policy's capacity. Resolves with what a cost-1 request would see now.
   */
  charge (identity: Identity, units: number): Promise<RateDecision>
}

export interface RatesScope {
  /** A limiter whose quota belongs to the calling plugin (Fastify encapsulation context). */
  use (name: string, policy: RatePolicy): RateLimiter
  /**
   * A stack: 1 to 8 different policies on one quota, decided as one (all consume or none does),
   * in this order. Needs a backend with stacks (`RatesBackend.stack`).
   */
  use (name: string, policies: readonly RatePolicy[]): StackedRateLimiter
}

export interface Rates extends RatesScope {
  /** Limiters whose quota is shared on purpose by every plugin that uses the same name. */
  readonly global: RatesScope
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

  charge (identity: Identity, units: number): Promise<RateDecision> {
    if (this.runtime.isStopped) return Promise.reject(new RatesStoppedError(this.name))
    const charge = this.target.charge?.bind(this.target)
    let checked: CheckedCharge
    try {
      checked = checkCharge(this.runtime.backend.kind, charge !== undefined, this.policy, identity, units, this.capacity)
    } catch (error) {
      return Promise.reject(error)
    }
    return (charge as NonNullable<typeof charge>)(checked.key, checked.units)
  }
}

type Handle = Limiter | StackedLimiter

/** What a handle's quota has: its policy, or its stack's list. */
function quotaOf (handle: Handle): Readonly<Policy> | readonly Readonly<Policy>[] {
  return handle instanceof Limiter ? handle.policy : handle.policies
}

/**
 * The limiters of one caller (or of the global scope, seen from one caller). `address` prefixes
 * every quota's address in the backend. The same name with the same normalized policy (or list of
 * policies) gives the same handle; with another one, or a list where a policy was, or the reverse,
 * `RatesPolicyConflictError`.
 */
export class Scope implements RatesScope {
  private readonly runtime: RatesRuntime
  private readonly address: string
  private readonly handles = new Map<string, Handle>()

  constructor (runtime: RatesRuntime, address: string) {
    this.runtime = runtime
    this.address = address
  }

  use (name: string, policy: RatePolicy): RateLimiter
  use (name: string, policies: readonly RatePolicy[]): StackedRateLimiter
  use (name: string, policy: RatePolicy | readonly RatePolicy[]): RateLimiter | StackedRateLimiter {
    if (this.runtime.isStopped) throw new RatesStoppedError(typeof name === 'string' ? name : undefined)
    const checked = checkName(name)
    // A list is a stack; anything else is checked as one policy, and its errors name `policy`.
    return Array.isArray(policy) ? this.stack(checked, normalizePolicies(policy)) : this.single(checked, normalizePolicy(policy))
  }

  private single (name: string, policy: Readonly<Policy>): Limiter {
    const existing = this.handles.get(name)
    if (existing !== undefined) {
      if (existing instanceof Limiter && samePolicy(existing.policy, policy)) return existing
      throw new RatesPolicyConflictError(name, quotaOf(existing), policy)
    }
    let target: BackendLimiter
    try {
      target = this.runtime.backend.limiter(limiterAddress(this.address, name), policy)
    } catch (error) {
      throw named(name, error)
    }
    const limiter = new Limiter(this.runtime, name, policy, target)
    this.handles.set(name, limiter)
    return limiter
  }

  private stack (name: string, policies: readonly Readonly<Policy>[]): StackedLimiter {
    const existing = this.handles.get(name)
    if (existing !== undefined) {
      if (existing instanceof StackedLimiter && sameStack(existing.policies, policies)) return existing
      throw new RatesPolicyConflictError(name, quotaOf(existing), policies)
    }
    const backend = this.runtime.backend
    if (backend.stack === undefined) {
      throw new RatesInvalidArgumentError('policies', `a single policy: the ${JSON.stringify(backend.kind)} backend has no stacks (RatesBackend.stack)`, policies)
    }
    let target: StackLimiter
    try {
      target = backend.stack(limiterAddress(this.address, name), policies)
    } catch (error) {
      throw named(name, error)
    }
    const stacked = new StackedLimiter(this.runtime, name, policies, target)
    this.handles.set(name, stacked)
    return stacked
  }
}

/** The backend names the quota by its address; the caller knows it by its name. */
function named (name: string, error: unknown): unknown {
  return error instanceof RatesPolicyConflictError ? new RatesPolicyConflictError(name, error.existing, error.requested) : error
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
