import type { Policy } from '../core/rates/types.js'
import type { RateDecision } from './decision.js'

/** One limiter as a backend holds it: its policy and the quota at one address. */
export interface BackendLimiter {
  readonly policy: Readonly<Policy>
  /**
   * Decides for an identity already encoded (a string) and a cost already checked. Rejects
   * with `RatesUnavailableError` when no trustworthy decision can be made — never allows silently.
   */
  consume (identity: string, cost: number): Promise<RateDecision>
}

/** Where quotas live: memory (one process) or Redis (many). */
export interface RatesBackend {
  readonly kind: string
  /**
   * The limiter at `address`, the structural, stable name of its quota. The same address with
   * another policy throws `RatesPolicyConflictError`: a quota never silently changes policy.
   */
  limiter (address: string, policy: Readonly<Policy>): BackendLimiter
  /** Ends the backend's part; afterwards its limiters reject with `RatesStoppedError`. */
  stop (): Promise<void>
}
