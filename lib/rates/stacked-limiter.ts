import type { Policy } from '../core/rates/types.js'
import type { StackLimiter } from './backend.js'
import { costOption, type ConsumeOptions } from './consume-options.js'
import type { StackDecision } from './decision.js'
import { RatesStoppedError } from './errors.js'
import { encodeIdentity, validateCost, type Identity } from './identity.js'
import { checkCharge, type CheckedCharge } from './charge-check.js'
import { capacityOf } from './policy.js'
import { stackCapacity } from './policy-stack.js'
import type { RatesRuntime } from './runtime.js'

/**
 * Several policies on one quota (10 a second and 10 000 a day), decided as one: a call passes only
 * when every policy has room, and when one refuses none consumes.
 */
export interface StackedRateLimiter {
  readonly name: string
  /** The normalized policies, in the order given: the order of every decision's `policies`. */
  readonly policies: readonly Readonly<Policy>[]
  /**
   * Consumes the cost from every policy, or from none. Resolves with the decision (a deny is a
   * decision); rejects with a `RatesError` when none can be made.
   */
  consume (identity: Identity, options?: ConsumeOptions): Promise<StackDecision>
  /** Whether the cost would pass every policy now, as `consume` would decide it; consumes nothing. */
  check (identity: Identity, options?: ConsumeOptions): Promise<StackDecision>
  /**
   * Charges `units` known only after the work to every policy, as `RateLimiter.charge` does for
   * one: each policy may go into debt (up to its own capacity) or get units back. |units| is at
   * most the stack's largest capacity. Resolves with what a cost-1 request would see now.
   */
  charge (identity: Identity, units: number): Promise<StackDecision>
}

const CAPACITY = "the smallest capacity of the limiter's policies"

export class StackedLimiter implements StackedRateLimiter {
  readonly name: string
  readonly policies: readonly Readonly<Policy>[]
  private readonly runtime: RatesRuntime
  private readonly target: StackLimiter
  private readonly capacity: number

  constructor (runtime: RatesRuntime, name: string, policies: readonly Readonly<Policy>[], target: StackLimiter) {
    this.runtime = runtime
    this.name = name
    this.policies = policies
    this.target = target
    this.capacity = stackCapacity(policies)
  }

  consume (identity: Identity, options?: ConsumeOptions): Promise<StackDecision> {
    return this.decide(identity, options, true)
  }

  check (identity: Identity, options?: ConsumeOptions): Promise<StackDecision> {
    return this.decide(identity, options, false)
  }

  /** As `Limiter.consume`: every failure is a rejection, never a synchronous throw. */
  private decide (identity: unknown, options: unknown, store: boolean): Promise<StackDecision> {
    if (this.runtime.isStopped) return Promise.reject(new RatesStoppedError(this.name))
    let key: string
    let cost: number
    try {
      key = encodeIdentity(identity)
      cost = validateCost(costOption(options), this.capacity, CAPACITY)
    } catch (error) {
      return Promise.reject(error)
    }
    return store ? this.target.consume(key, cost) : this.target.check(key, cost)
  }

  charge (identity: Identity, units: number): Promise<StackDecision> {
    if (this.runtime.isStopped) return Promise.reject(new RatesStoppedError(this.name))
    const charge = this.target.charge?.bind(this.target)
    let checked: CheckedCharge
    try {
      checked = checkCharge(this.runtime.backend.kind, charge !== undefined, this.policies, identity, units, Math.max(...this.policies.map(capacityOf)), "the largest capacity of the limiter's policies")
    } catch (error) {
      return Promise.reject(error)
    }
    return (charge as NonNullable<typeof charge>)(checked.key, checked.units)
  }
}
