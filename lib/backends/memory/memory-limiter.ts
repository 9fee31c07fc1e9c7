import type { Kernel, Outcome, Policy } from '../../core/rates/types.js'
import { ADMITTED, LIMITED, UNDECIDABLE, type Verdict } from '../../rates/backend.js'
import { capacityOf } from '../../rates/policy.js'
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
  /** First tick of more than `remaining` units if nothing else is consumed (the decision's tick at full capacity). */
  moreAt = 0

  // A trial's outcome, until `commit()` stores it or `drop()` forgets it.
  private pendingState: unknown = undefined
  private pendingSlot = -1
  private pendingFresh = false
  private pendingKey = ''
  /** The last trial's verdict for this policy. */
  trialVerdict: Verdict = ADMITTED
  /** After any trial: the remaining units and full-capacity tick of the state as it stands, unconsumed. */
  standingRemaining = 0
  standingResetAt = 0
  standingMoreAt = 0
  private readonly capacity: number
  /** Once charged, a state may hold a debt, and recover later than a request alone can make it. */
  private charged = false

  constructor (kernel: Kernel<unknown>, policy: Policy, maxIdentities: number) {
    this.kernel = kernel
    this.policy = policy
    this.capacity = capacityOf(policy)
    const fields = kernel.fields
    const limiter = this
    this.table = new StateTable(fields, maxIdentities, {
      recoversAt: (data, slot) => kernel.recoversAt(kernel.read(data, slot * fields), policy),
      // A getter: a limiter that has charged may hold a debt from then on.
      get worstRecovery () { return worstRecovery(policy, limiter.charged) }
    })
  }

  /** The stored state of `key` (the kernel's value), or undefined. */
  peek (key: string): unknown {
    const slot = this.table.find(key)
    return slot === -1 ? undefined : this.kernel.read(this.table.data, slot * this.kernel.fields)
  }

  consume (key: string, now: number, cost: number): Verdict {
    const slot = this.slotOf(key, now)
    if (slot === -1) return this.saturated(now)
    return this.store(slot, this.kernel.consume(this.stateIn(slot, now), this.policy, now, cost))
  }

  /**
   * Charges `units` (|units| <= capacity) whatever the state holds (`Kernel.charge`): a debt the
   * identity repays in time, or units returned. The fields then say what a cost-1 request would
   * see. A new identity with no slot free cannot be charged (SATURATED): nothing is stored.
   */
  charge (key: string, now: number, units: number): Verdict {
    const slot = this.slotOf(key, now)
    if (slot === -1) return this.saturated(now)
    this.charged = true
    return this.store(slot, this.kernel.charge(this.stateIn(slot, now), this.policy, now, units))
  }

  // The slot of `key`, a new one for a new identity (`placing`), or -1 when none is free.
  private placing = false
  private slotOf (key: string, now: number): number {
    const table = this.table
    const slot = table.find(key)
    this.placing = slot === -1
    if (slot === -1) return table.insert(key, now)
    table.touched(slot)
    return slot
  }

  private stateIn (slot: number, now: number): unknown {
    return this.placing ? this.kernel.fresh(this.policy, now) : this.kernel.read(this.table.data, slot * this.kernel.fields)
  }

  private store (slot: number, outcome: Outcome<unknown>): Verdict {
    const kernel = this.kernel
    kernel.write(outcome.state, this.table.data, slot * kernel.fields)
    if (this.placing) this.table.placed(slot, kernel.recoversAt(outcome.state, this.policy))
    this.retryAfterMs = outcome.retryAfterMs
    this.remaining = outcome.remaining
    this.resetAt = outcome.resetAt
    this.moreAt = outcome.moreAt
    return outcome.allowed ? ADMITTED : LIMITED
  }

  /** No slot for a new identity: the wait until one frees, nothing left. */
  private saturated (now: number): Verdict {
    const wait = this.table.waitMs
    this.retryAfterMs = wait
    this.remaining = 0
    this.resetAt = now + wait
    this.moreAt = now + wait
    return SATURATED
  }

  /**
   * Decides as `consume` does and stores nothing yet: a stack of policies tries every one first,
   * then stores all (`commit()`) or none (`drop()`). A new identity gets its slot now (or the
   * verdict is SATURATED), so that a commit cannot fail; `drop()` gives the slot back. Between a
   * trial and its commit or drop nothing else may use this limiter (the stack is synchronous).
   */
  trial (key: string, now: number, cost: number): Verdict {
    return this.attempt(key, now, cost, false)
  }

  /**
   * Charges as `charge` does and stores nothing yet (a stack's charge: every policy or, when one
   * cannot track a new identity, none). Its `commit()` stores the charged state whatever the
   * verdict says, which is what a cost-1 request would see after it; the standing fields say the same.
   */
  trialCharge (key: string, now: number, units: number): Verdict {
    this.charged = true
    return this.attempt(key, now, units, true)
  }

  private attempt (key: string, now: number, amount: number, charging: boolean): Verdict {
    const table = this.table
    const kernel = this.kernel
    let slot = table.find(key)
    const fresh = slot === -1
    if (fresh) {
      slot = table.insert(key, now)
      if (slot === -1) {
        this.saturated(now)
        // The identity has no state here: as it stands it is a new one, at full capacity. A stack
        // that another policy refused reports that (nothing would have been stored anyway).
        this.standingRemaining = this.capacity
        this.standingResetAt = now
        this.standingMoreAt = now
        this.pendingSlot = -1
        return (this.trialVerdict = SATURATED)
      }
    }
    const state = fresh ? kernel.fresh(this.policy, now) : kernel.read(table.data, slot * kernel.fields)
    const outcome = charging ? kernel.charge(state, this.policy, now, amount) : kernel.consume(state, this.policy, now, amount)
    this.pendingState = outcome.state
    this.pendingSlot = slot
    this.pendingFresh = fresh
    this.pendingKey = key
    this.retryAfterMs = outcome.retryAfterMs
    this.remaining = outcome.remaining
    this.resetAt = outcome.resetAt
    this.moreAt = outcome.moreAt
    if (!outcome.allowed || charging) {
      // A refusal takes nothing, and a charge's outcome is already the look after it: the state as it stands.
      this.standingRemaining = outcome.remaining
      this.standingResetAt = outcome.resetAt
      this.standingMoreAt = outcome.moreAt
      return (this.trialVerdict = outcome.allowed ? ADMITTED : LIMITED)
    }
    // Every kernel's remaining falls by exactly the cost it admitted. A state that has already
    // recovered (a new identity's, or a window long past) is full now, not at its own tick: the
    // window kernels' recoversAt() is the window's start there, in the past.
    this.standingRemaining = outcome.remaining + amount
    this.standingResetAt = Math.max(now, kernel.recoversAt(state, this.policy))
    // The first unit beyond the standing state's is not known from the trial: its full capacity
    // stands for it (later, never early), as the Redis stack script says it.
    this.standingMoreAt = this.standingResetAt
    return (this.trialVerdict = ADMITTED)
  }

  /** Stores the last trial's outcome. */
  commit (): void {
    const slot = this.pendingSlot
    if (slot === -1) return
    const kernel = this.kernel
    kernel.write(this.pendingState, this.table.data, slot * kernel.fields)
    if (this.pendingFresh) this.table.placed(slot, kernel.recoversAt(this.pendingState, this.policy))
    else this.table.touched(slot)
    this.pendingSlot = -1
  }

  /** Forgets the last trial: a new identity's slot goes back, a known one is left as it was. */
  drop (): void {
    if (this.pendingSlot !== -1 && this.pendingFresh) this.table.remove(this.pendingKey)
    this.pendingSlot = -1
  }
}

/**
 * The longest any state of `policy` takes to recover fully, in ms: an upper bound for waits. With
 * a charge's `debt` (at most one capacity beyond empty) a bucket's and a fixed window's double,
 * and a sliding window's takes one window more.
 */
export function worstRecovery (policy: Policy, debt = false): number {
  const d = debt ? 1 : 0
  switch (policy.algorithm) {
    case 'token-bucket':
    case 'gcra':
      return Math.ceil(((1 + d) * (policy.burst ?? policy.limit) * policy.windowMs) / policy.limit)
    case 'fixed-window':
      return (1 + d) * policy.windowMs
    case 'sliding-window-counter':
      return (2 + d) * policy.windowMs
  }
}
