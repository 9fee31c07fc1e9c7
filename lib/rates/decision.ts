/** A decision the backend made: a deny is a value, never an exception. */
export interface RateAllowed {
  readonly allowed: true
  readonly denied: false
  /** Whole cost-1 units consumable right after this decision. */
  readonly remaining: number
  /** Epoch ms at which the identity is back at full capacity if nothing else is consumed. */
  readonly resetAt: number
  /**
   * Epoch ms of the first moment more than `remaining` cost-1 units can be consumed if nothing else
   * is (never early: `RateLimit`'s `t`); the decision's time at full capacity. The built-in backends
   * always say it; a custom backend may leave it out, and `resetAt` stands for it (later, never early).
   */
  readonly moreAt?: number
}

export interface RateDenied {
  readonly allowed: false
  readonly denied: true
  readonly remaining: number
  /** The least wait, in ms, after which the same cost can pass (never early). */
  readonly retryAfterMs: number
  readonly resetAt: number
  /** As `RateAllowed.moreAt`; never after the wait (a cost that did not pass needs more). */
  readonly moreAt?: number
}

export type RateDecision = RateAllowed | RateDenied

export function allowedDecision (remaining: number, resetAt: number, moreAt: number): RateAllowed {
  return { allowed: true, denied: false, remaining, resetAt, moreAt }
}

export function deniedDecision (remaining: number, retryAfterMs: number, resetAt: number, moreAt: number): RateDenied {
  return { allowed: false, denied: true, remaining, retryAfterMs, resetAt, moreAt }
}

/**
 * One policy's part of a stacked decision. When the stack consumed (it admitted), `remaining`
 * and `resetAt` describe the state after it; when nothing was stored (the stack refused, or it
 * was a `check`), the state as it stands, unconsumed.
 */
export interface PolicyOutcome {
  /** Whether this policy had room for the cost. */
  readonly allowed: boolean
  readonly remaining: number
  /** 0 when this policy had room; else the least wait after which the same cost passes it. */
  readonly retryAfterMs: number
  readonly resetAt: number
  /** As `RateAllowed.moreAt`, for this policy. */
  readonly moreAt?: number
}

/**
 * A decision over several policies at once, all or nothing: `allowed` when every policy had room
 * (then each consumed), else none consumed and `retryAfterMs` is the largest wait among the
 * policies that refused (after it every one of them has room: nothing was taken from the others).
 * `remaining` is the least of the policies', `resetAt` the latest; `policies` lists each, in the
 * stack's order.
 */
export type StackDecision = RateDecision & { readonly policies: readonly PolicyOutcome[] }
