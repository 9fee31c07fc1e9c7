import type { Kernel, Policy } from '../../core/rates/types.js'
import { ADMITTED, LIMITED, UNDECIDABLE, type Verdict } from '../../rates/backend.js'
import { StateTable } from './state-table.js'

export { ADMITTED, LIMITED, type Verdict }
/** Every slot holds a live state: the identity cannot be tracked yet. */
export const SATURATED = UNDECIDABLE

/**
 * One limiter's states in memory: a kernel (the algorithm, pure) over a slot table (the
 * registry). The HTTP gate and the rates capability's memory backend both decide here.
 */
export class MemoryLimiter {
  readonly policy: Policy
  readonly table: StateTable
  private readonly kernel: Kernel<unknown>
  // Results of the last `consume`, read right after it (no allocation per decision).
  /** Milliseconds until the same cost passes (LIMITED) or until a slot frees (SATURATED); else 0. */
  retryAfterMs = 0
  /** Whole cost-1 units consumable right now. */
  remaining = 0
  /** Tick of full capacity if nothing else is consumed. */
  resetAt = 0

  constructor (kernel: Kernel<unknown>, policy: Policy, maxIdentities: number) {
    this.kernel = kernel
    this.policy = policy
    const fields = kernel.fields
    this.table = new StateTable(fields, maxIdentities, {
      recoversAt: (data, slot) => kernel.recoversAt(kernel.read(data, slot * fields), policy),
      worstRecovery: worstRecovery(policy)
    })
  }

  /** The stored state of `key` (the kernel's value), or undefined. */
  peek (key: string): unknown {
    const slot = this.table.find(key)
    return slot === -1 ? undefined : this.kernel.read(this.table.data, slot * this.kernel.fields)
  }

  consume (key: string, now: number, cost: number): Verdict {
    const table = this.table
    const kernel = this.kernel
    const fields = kernel.fields
    let slot = table.find(key)
    let state: unknown
    const fresh = slot === -1
    if (fresh) {
      slot = table.insert(key, now)
      if (slot === -1) {
        this.retryAfterMs = table.waitMs
        this.remaining = 0
        this.resetAt = now + table.waitMs
        return SATURATED
      }
      state = kernel.fresh(this.policy, now)
    } else {
      table.touched(slot)
      state = kernel.read(table.data, slot * fields)
    }
    const outcome = kernel.consume(state, this.policy, now, cost)
    kernel.write(outcome.state, table.data, slot * fields)
    if (fresh) table.placed(slot, kernel.recoversAt(outcome.state, this.policy))
    this.retryAfterMs = outcome.retryAfterMs
    this.remaining = outcome.remaining
    this.resetAt = outcome.resetAt
    return outcome.allowed ? ADMITTED : LIMITED
  }
}

/** The longest any state of `policy` takes to recover fully, in ms: an upper bound for waits. */
export function worstRecovery (policy: Policy): number {
  switch (policy.algorithm) {
    case 'token-bucket':
    case 'gcra':
      return Math.ceil(((policy.burst ?? policy.limit) * policy.windowMs) / policy.limit)
    case 'fixed-window':
      return policy.windowMs
    case 'sliding-window-counter':
      return 2 * policy.windowMs
  }
}
