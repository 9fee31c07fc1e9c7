import { kernelOf, type Policy } from '../../core/rates/index.js'
import { ADMITTED, LIMITED, UNDECIDABLE, type StackLimiter, type SynchronousStack, type Verdict } from '../../rates/backend.js'
import type { PolicyOutcome, StackDecision } from '../../rates/decision.js'
import { RatesStoppedError, RatesUnavailableError } from '../../rates/errors.js'
import { capacityOf } from '../../rates/policy.js'
import { MemoryLimiter } from './memory-limiter.js'

/** What a stack needs of its backend: the clock, the bound, and whether it has stopped. */
export interface StackHost {
  readonly clock: () => number
  readonly maxIdentities: number
  readonly isStopped: boolean
}

/**
 * Several policies on one quota in memory, decided as one: every policy is tried first (a
 * `MemoryLimiter` each, its own slot table), then all store their outcome or none does. Decides
 * synchronously too (`synchronous`, itself): the gate reads each policy's numbers from the typed
 * arrays right after `decide()`, with no promise and no allocation.
 */
export class MemoryBackendStack implements StackLimiter, SynchronousStack {
  readonly policies: readonly Readonly<Policy>[]
  readonly stores: readonly MemoryLimiter[]
  readonly synchronous: SynchronousStack = this
  retryAfterMs = 0
  readonly remaining: Float64Array
  readonly resetAt: Float64Array
  readonly moreAt: Float64Array
  readonly refused: Uint8Array
  decidedAt = 0
  private readonly host: StackHost
  private readonly address: string

  constructor (host: StackHost, address: string, policies: readonly Readonly<Policy>[]) {
    this.host = host
    this.address = address
    this.policies = policies
    this.stores = policies.map((policy) => new MemoryLimiter(kernelOf(policy.algorithm), policy, host.maxIdentities))
    this.remaining = new Float64Array(policies.length)
    this.resetAt = new Float64Array(policies.length)
    this.moreAt = new Float64Array(policies.length)
    this.refused = new Uint8Array(policies.length)
  }

  decide (identity: string, cost: number): Verdict {
    return this.run(identity, cost, true)
  }

  checkNow (identity: string, cost: number): Verdict {
    return this.run(identity, cost, false)
  }

  /**
   * Tries every policy; stores all outcomes when all had room and `store` is set, else none. A
   * refusal outranks a policy that could not track the identity (the refusal is certain: that
   * policy had no state for it, so full room); the wait is the largest of the refusing policies'.
   */
  private run (identity: string, cost: number, store: boolean): Verdict {
    const now = this.host.clock()
    this.decidedAt = now
    const stores = this.stores
    let verdict: Verdict = ADMITTED
    let limitedWait = 0
    let saturatedWait = 0
    for (let i = 0; i < stores.length; i++) {
      const one = stores[i]!
      const v = one.trial(identity, now, cost)
      this.refused[i] = v === LIMITED ? 1 : 0
      if (v === LIMITED) {
        verdict = LIMITED
        if (one.retryAfterMs > limitedWait) limitedWait = one.retryAfterMs
      } else if (v === UNDECIDABLE) {
        if (verdict === ADMITTED) verdict = UNDECIDABLE
        if (one.retryAfterMs > saturatedWait) saturatedWait = one.retryAfterMs
      }
    }
    const stored = verdict === ADMITTED && store
    for (let i = 0; i < stores.length; i++) {
      const one = stores[i]!
      if (stored) {
        one.commit()
        this.remaining[i] = one.remaining
        this.resetAt[i] = one.resetAt
        this.moreAt[i] = one.moreAt
      } else {
        one.drop()
        this.remaining[i] = one.standingRemaining
        this.resetAt[i] = one.standingResetAt
        this.moreAt[i] = one.standingMoreAt
      }
    }
    this.retryAfterMs = verdict === LIMITED ? limitedWait : verdict === UNDECIDABLE ? saturatedWait : 0
    return verdict
  }

  /** The backend's clock now, ms. */
  now (): number {
    return this.host.clock()
  }

  /**
   * Charges `units` to every policy (each as `Kernel.charge` does, its debt bounded by its own
   * capacity: `units` clamped to twice it charges exactly the same), or to none when one cannot
   * track a new identity; units returned at `returnBy` or later are not taken. The decision is
   * what a cost-1 request would see after it.
   */
  async charge (identity: string, units: number, returnBy = Infinity): Promise<StackDecision> {
    this.live()
    const now = this.host.clock()
    if (units < 0 && now >= returnBy) units = 0
    this.decidedAt = now
    const stores = this.stores
    let verdict: Verdict = ADMITTED
    let limitedWait = 0
    let saturated = false
    let saturatedWait = 0
    for (let i = 0; i < stores.length; i++) {
      const one = stores[i]!
      const bound = 2 * capacityOf(one.policy)
      const v = one.trialCharge(identity, now, Math.max(-bound, Math.min(bound, units)))
      this.refused[i] = v === LIMITED ? 1 : 0
      if (v === LIMITED) {
        verdict = LIMITED
        if (one.retryAfterMs > limitedWait) limitedWait = one.retryAfterMs
      } else if (v === UNDECIDABLE) {
        saturated = true
        if (one.retryAfterMs > saturatedWait) saturatedWait = one.retryAfterMs
      }
    }
    for (let i = 0; i < stores.length; i++) {
      const one = stores[i]!
      if (saturated) one.drop()
      else one.commit()
      this.remaining[i] = one.standingRemaining
      this.resetAt[i] = one.standingResetAt
      this.moreAt[i] = one.standingMoreAt
    }
    if (saturated) verdict = UNDECIDABLE
    this.retryAfterMs = saturated ? saturatedWait : verdict === LIMITED ? limitedWait : 0
    return this.settle(verdict)
  }

  async consume (identity: string, cost: number): Promise<StackDecision> {
    this.live()
    return this.settle(this.decide(identity, cost))
  }

  async check (identity: string, cost: number): Promise<StackDecision> {
    this.live()
    return this.settle(this.checkNow(identity, cost))
  }

  async state (identity: string): Promise<unknown[]> {
    this.live()
    return this.stores.map((store) => store.peek(identity))
  }

  async delete (identity: string): Promise<boolean> {
    this.live()
    let had = false
    for (const store of this.stores) if (store.table.remove(identity)) had = true
    return had
  }

  /** States held under the policies, recovered ones included until dropped (each policy counts its own). */
  get identities (): number {
    let total = 0
    for (const store of this.stores) total += store.table.size
    return total
  }

  private live (): void {
    if (this.host.isStopped) throw new RatesStoppedError(this.address)
  }

  /** The last synchronous decision as a value. */
  private settle (verdict: Verdict): StackDecision {
    if (verdict === UNDECIDABLE) {
      throw new RatesUnavailableError(`the memory backend tracks ${this.host.maxIdentities} identities for each policy of this stack, all with live state`, { retryAfterMs: this.retryAfterMs })
    }
    const policies: PolicyOutcome[] = []
    let remaining = Number.POSITIVE_INFINITY
    let resetAt = 0
    for (let i = 0; i < this.stores.length; i++) {
      const store = this.stores[i]!
      // Only a refusal is a policy without room: one that could not track the identity (outranked
      // here by another's refusal) has no state for it, so full room.
      const allowed = store.trialVerdict !== LIMITED
      policies.push({ allowed, remaining: this.remaining[i]!, retryAfterMs: allowed ? 0 : store.retryAfterMs, resetAt: this.resetAt[i]!, moreAt: this.moreAt[i]! })
      if (this.remaining[i]! < remaining) remaining = this.remaining[i]!
      if (this.resetAt[i]! > resetAt) resetAt = this.resetAt[i]!
    }
    return verdict === ADMITTED
      ? { allowed: true, denied: false, remaining, resetAt, policies }
      : { allowed: false, denied: true, remaining, retryAfterMs: this.retryAfterMs, resetAt, policies }
  }
}
