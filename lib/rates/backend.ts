import type { Policy } from '../core/rates/types.js'
import type { RateDecision, StackDecision } from './decision.js'

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
/** A verdict on the request's path, and the wait a refusal reports. */
export interface Verdicts {
  decide (identity: string, cost: number): Verdict
  /** Milliseconds until the same cost passes (LIMITED), until trying again can help (UNDECIDABLE); else 0. */
  readonly retryAfterMs: number
}

export interface SynchronousDecisions extends Verdicts {
  /** Whole cost-1 units consumable right after the last decision. */
  readonly remaining: number
  /** Backend tick of full capacity after the last decision. */
  readonly resetAt: number
  /** Backend tick of the first unit beyond `remaining` after the last decision (`RateDecision.moreAt`). */
  readonly moreAt: number
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
  /**
   * Takes `units` (a checked safe integer, |units| <= capacity) whatever the quota holds — a debt
   * that time repays — or returns -units. Resolves with what a cost-1 request would see now.
   * `returnBy`, a time on the quota's clock: units returned (`units` < 0) from then on are not
   * taken, atomically with the decision — a window's units belong to the window that admitted them.
   * Optional: a backend without it cannot charge after the work (`limiter.charge` says so).
   */
  charge? (identity: string, units: number, returnBy?: number): Promise<RateDecision>
  /**
   * The quota's clock now, ms (memory: the backend's clock; Redis: the server's time as its last
   * reply gave it, never ahead of it), or undefined before it is known. Optional.
   */
  now? (): number | undefined
  /** Present when the backend can decide synchronously. */
  readonly synchronous?: SynchronousDecisions
}

/**
 * Synchronous decisions over a stack (the memory backend's): `decide` consumes from every policy
 * or from none; `checkNow` says whether the cost would pass and stores nothing. After either, the
 * fields describe it: `retryAfterMs` the largest wait among the policies that refused, and per
 * policy (in the stack's order) `remaining[i]`, `resetAt[i]` and `moreAt[i]`, as `PolicyOutcome` defines them.
 */
export interface SynchronousStack {
  decide (identity: string, cost: number): Verdict
  checkNow (identity: string, cost: number): Verdict
  readonly retryAfterMs: number
  readonly remaining: Float64Array
  readonly resetAt: Float64Array
  readonly moreAt: Float64Array
  /** Per policy, 1 when it refused the last decision. */
  readonly refused: Uint8Array
  readonly decidedAt: number
}

/**
 * Several policies on one quota, decided as one (e.g. 10 a second and 10,000 a day): a request
 * passes only when every policy has room, and when one refuses none consumes — no unit is wasted.
 */
export interface StackLimiter {
  readonly policies: readonly Readonly<Policy>[]
  /** Consumes `cost` from every policy, or from none; rejects with `RatesUnavailableError` as `BackendLimiter.consume` does. */
  consume (identity: string, cost: number): Promise<StackDecision>
  /** Whether `cost` would pass every policy now; stores nothing. */
  check (identity: string, cost: number): Promise<StackDecision>
  /**
   * Charges `units` (a checked safe integer, |units| at most the stack's largest capacity) to every
   * policy, each as `BackendLimiter.charge` does (its debt bounded by its own capacity), or to
   * none. Optional, as for a single limiter; `returnBy` as there: units returned from that time on
   * (the stack's clock) are not taken.
   */
  charge? (identity: string, units: number, returnBy?: number): Promise<StackDecision>
  /** The stack's clock now, ms, as `BackendLimiter.now`. Optional. */
  now? (): number | undefined
  /** Each policy's stored state (as `BackendLimiter.state`), in the stack's order. */
  state (identity: string): Promise<unknown[]>
  /** Forgets the identity's state under every policy; true when there was one. */
  delete (identity: string): Promise<boolean>
  readonly synchronous?: SynchronousStack
}

/** A fleet as one member sees it: how many members are live, and where this one sorts among them (from 0). */
export interface FleetView {
  readonly members: number
  readonly rank: number
  /** The smallest and the largest fleet limit the members were registered with (0 when none said). */
  readonly least: number
  readonly most: number
}

/** One process's membership of a fleet that shares a limit (`maxInFlight: { fleet }`). */
export interface FleetMember {
  /** Renews this member's entry (it lapses after the TTL it was made with) and answers the fleet as it stands. */
  refresh (): Promise<FleetView>
  /** Leaves the fleet at once (a process that stops). */
  leave (): Promise<void>
}

/**
 * Per-client in-flight slots held for a whole fleet (`clientInFlight` on a shared backend): each
 * slot this process holds lapses `ttlMs` after its last renewal, so a process that dies frees its
 * slots within `ttlMs` of its death.
 */
export interface ClientSlotBook {
  /** A slot of `key` while fewer than `limit` are held across the fleet: true when taken. */
  take (key: string, limit: number): Promise<boolean>
  /** One of this process's slots of `key` goes back (best effort: one that cannot lapses with its TTL). */
  release (key: string): void
  /** No more renewals; the slots still held go back. */
  stop (): Promise<void>
}

/** Where quotas live: memory (one process) or Redis (many). */
export interface RatesBackend {
  readonly kind: string
  /**
   * The limiter at `address`, the structural, stable name of its quota. The same address with
   * another policy throws `RatesPolicyConflictError`: a quota never silently changes policy.
   */
  limiter (address: string, policy: Readonly<Policy>): BackendLimiter
  /**
   * A stack of one or more policies at `address` (all or nothing; on Redis one script call on keys
   * in one hash slot). The same address with another list of policies throws
   * `RatesPolicyConflictError`. Optional: a custom backend without it cannot serve stacked policies,
   * tiers with stacks or login throttling, which say so at registration.
   */
  stack? (address: string, policies: readonly Readonly<Policy>[]): StackLimiter
  /**
   * A membership of the fleet `name` (every process of it shares the backend), whose entry lapses
   * `ttlMs` after its last refresh, registered with the fleet's `limit` (its views say the least
   * and the most limit of the members). Optional: the memory backend has no fleet to be part of.
   */
  fleet? (name: string, ttlMs: number, limit?: number): FleetMember
  /**
   * Per-client in-flight slots at `address`, shared by every process that asks at that address
   * (`clientInFlight`). Optional: without it the gate counts a client's requests in this process.
   */
  clientSlots? (address: string): ClientSlotBook
  /**
   * Resolves when the backend answers a round trip now, rejects with why not: asked once at the
   * gate's `ready()`, so that a store out of reach at start is said once (decisions then fail closed
   * by `onBackendError`). Optional: a backend in this process is always reachable.
   */
  reachable? (): Promise<void>
  /** States held over all its limiters, recovered ones included until dropped, when the backend keeps them in this process (memory). */
  readonly identities?: number
  /** Ends the backend's part; afterwards its limiters reject with `RatesStoppedError`. */
  stop (): Promise<void>
}
