import type { Policy } from '../../core/rates/types.js'
import { LIMITED, type BackendLimiter, type StackLimiter, type SynchronousStack, type Verdict, type Verdicts } from '../../rates/backend.js'
import type { RateDecision, StackDecision } from '../../rates/decision.js'
import { stackCapacity } from '../../rates/policy-stack.js'
import { quotaOf, rateLimitStart } from '../headers/rate-limit-fields.js'
import type { NamedPolicy } from '../options/limits.js'

/**
 * A backend's stack as the gate's quota: the gate decides on it as on one limiter (one verdict,
 * the largest wait), and the `RateLimit` headers list every policy from the stack's own numbers.
 *
 * `loginAttempts` (login throttling, `count: 'failures'`): the request's decision only checks for room and
 * stores nothing; `record()` consumes, once the response shows a failure. The client's attempts
 * in flight count as failures to come (`pending`), the one being checked among them (it is
 * counted before its check is sent, `LoginAttempts.step`): a check asks room for all of them, so
 * that parallel attempts cannot outnumber the quota; more in flight than the quota holds is
 * refused whatever the quota has (`Retry-After` at least 1 s: until an attempt ends).
 */
export class StackedQuota implements BackendLimiter, Verdicts {
  /** The first policy: what the logs name (`describePolicy`) when the backend fails. */
  readonly policy: Readonly<Policy>
  readonly stack: StackLimiter
  /** Its verdicts on the request's path, when the stack decides synchronously (memory). */
  readonly verdicts: Verdicts | undefined
  /** The stack's synchronous decisions (memory), read for the headers right after `decide()`. */
  readonly sync: SynchronousStack | undefined
  readonly names: readonly string[]
  readonly quotas: readonly number[]
  /** Each policy's start of its `RateLimit` item (`"<name>";r=`), made once. */
  readonly starts: readonly string[]
  private readonly loginAttempts: boolean
  /** Login throttling: units of each client's attempts in flight, checks on their way included (kept by `LoginAttempts`). */
  readonly pending = new Map<string, number>()
  /** The least capacity of the policies: more pending than this is refused here. */
  private readonly capacity: number
  /** The last synchronous check was refused here (too many attempts in flight), not by the quota. */
  private crowded = false

  constructor (stack: StackLimiter, policies: readonly NamedPolicy[], loginAttempts: boolean) {
    this.stack = stack
    this.policy = policies[0]!.policy
    this.names = policies.map((p) => p.name)
    this.quotas = policies.map((p) => quotaOf(p.policy).quota)
    this.starts = this.names.map(rateLimitStart)
    this.loginAttempts = loginAttempts
    this.capacity = stackCapacity(stack.policies)
    this.sync = stack.synchronous
    this.verdicts = this.sync === undefined ? undefined : this
  }

  /** A charge after the work: every policy of the stack (`StackLimiter.charge`), when the backend's stacks charge. */
  get charge (): ((identity: string, units: number, returnBy?: number) => Promise<RateDecision>) | undefined {
    const stack = this.stack
    return stack.charge === undefined ? undefined : (identity, units, returnBy) => stack.charge!(identity, units, returnBy)
  }

  /** The stack's clock (`StackLimiter.now`), when it has one. */
  now (): number | undefined {
    return this.stack.now?.()
  }

  // Verdicts, over the stack's.
  decide (identity: string, cost: number): Verdict {
    const sync = this.sync!
    if (!this.loginAttempts) return sync.decide(identity, cost)
    const need = this.pending.get(identity)!
    this.crowded = need > this.capacity
    if (!this.crowded) return sync.checkNow(identity, need)
    // Refused here whatever the quota holds; the check gives the headers the quota as it stands.
    sync.checkNow(identity, cost)
    return LIMITED
  }

  get retryAfterMs (): number {
    return this.crowded ? Math.max(1000, this.sync!.retryAfterMs) : this.sync!.retryAfterMs
  }
  // BackendLimiter, over the stack's.
  consume (identity: string, cost: number): Promise<RateDecision> {
    if (!this.loginAttempts) return this.stack.consume(identity, cost)
    const need = this.pending.get(identity)!
    if (need <= this.capacity) return this.stack.check(identity, need)
    return this.stack.check(identity, cost).then((d) => ({ ...d, allowed: false, denied: true, retryAfterMs: Math.max(1000, (d as { retryAfterMs?: number }).retryAfterMs ?? 0) }))
  }

  /** Consumes for a failure that the response showed (login throttling). */
  record (identity: string, cost: number): Verdict | Promise<StackDecision> {
    return this.sync === undefined ? this.stack.consume(identity, cost) : this.sync.decide(identity, cost)
  }

  state (identity: string): Promise<unknown> {
    return this.stack.state(identity)
  }

  delete (identity: string): Promise<boolean> {
    return this.stack.delete(identity)
  }
}
