import type { Policy } from '../core/rates/types.js'
import type { RateDecision } from './decision.js'

/** Verdicts of a synchronous decision. */
export const ADMITTED = 0
export const LIMITED = 1
/** The backend cannot decide (for the memory backend: every slot holds live state). */
export const UNDECIDABLE = 2
export type Verdict = typeof ADMITTED | typeof LIMITED | typeof UNDECIDABLE

/**
 * A backend capability: a decision made at once, on the caller's stack, with no promise. The
 * memory backend offers it; the HTTP gate uses it when present (no allocation per decision: the
 * details of the last decision are read from the fields right after `decide()`).
 */
export interface SynchronousDecisions {
  decide (identity: string, cost: number): Verdict
  /** Whole cost-1 units consumable right after the last decision. */
  readonly remaining: number
  /** Milliseconds until the same cost passes (LIMITED), until trying again can help (UNDECIDABLE); else 0. */
  readonly retryAfterMs: number
  /** Backend tick of full capacity after the last decision. */
  readonly resetAt: number
  /** Backend tick of the last decision. */
  readonly decidedAt: number
}

/** One limiter as a backend holds it: its policy and the quota at one address. */
export interface BackendLimiter {
  readonly policy: Readonly<Policy>
  /**
   * Decides for an identity already encoded (a string) and a cost already checked. Rejects
   * with `RatesUnavailableError` when no trustworthy decision can be made — never allows silently.
   */
  consume (identity: string, cost: number): Promise<RateDecision>
  /**
   * The identity's stored state, as its algorithm's kernel reads it (token-bucket: the core's
   * `Bucket` `{ tokens, last }`), or undefined when there is none (a fresh identity).
   */
  state (identity: string): Promise<unknown>
  /** Forgets the identity's state (it starts fresh); true when there was one. */
  delete (identity: string): Promise<boolean>
  /** Present when the backend can decide synchronously. */
  readonly synchronous?: SynchronousDecisions
}

/** Where quotas live: memory (one process) or Redis (many). */
export interface RatesBackend {
  readonly kind: string
  /**
   * The limiter at `address`, the structural, stable name of its quota. The same address with
   * another policy throws `RatesPolicyConflictError`: a quota never silently changes policy.
   */
  limiter (address: string, policy: Readonly<Policy>): BackendLimiter
  /** Identities with live state over all its limiters, when the backend keeps them in this process (memory). */
  readonly identities?: number
  /** Ends the backend's part; afterwards its limiters reject with `RatesStoppedError`. */
  stop (): Promise<void>
}
