/** A decision the backend made: a deny is a value, never an exception. */
export interface RateAllowed {
  readonly allowed: true
  readonly denied: false
  /** Whole cost-1 units consumable right after this decision. */
  readonly remaining: number
  /** Epoch ms at which the identity is back at full capacity if nothing else is consumed. */
  readonly resetAt: number
}

export interface RateDenied {
  readonly allowed: false
  readonly denied: true
  readonly remaining: number
  /** The least wait, in ms, after which the same cost can pass (never early). */
  readonly retryAfterMs: number
  readonly resetAt: number
}

export type RateDecision = RateAllowed | RateDenied

export function allowedDecision (remaining: number, resetAt: number): RateAllowed {
  return { allowed: true, denied: false, remaining, resetAt }
}

export function deniedDecision (remaining: number, retryAfterMs: number, resetAt: number): RateDenied {
  return { allowed: false, denied: true, remaining, retryAfterMs, resetAt }
}
