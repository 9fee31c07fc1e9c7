/** The four algorithms of the rates capability. */
export type Algorithm = 'token-bucket' | 'fixed-window' | 'sliding-window-counter' | 'gcra'

/**
 * A validated, normalized policy. `burst` is the capacity of `token-bucket` and `gcra` (defaults
 * to `limit`); the window algorithms have capacity `limit` and no burst. `penalty`: a refusal
 * blocks the client for a while, longer the more it asks meanwhile (`penalty.ts`).
 */
export interface Policy {
  readonly algorithm: Algorithm
  readonly limit: number
  readonly windowMs: number
  readonly burst?: number
  readonly penalty?: Penalty
}

/**
 * A refusal blocks every request of the client, whatever the quota holds, until the block ends;
 * each request refused during it lengthens it. `restart`: to `windowMs` after that request
 * (@fastify/rate-limit's `continueExceeding`); `double`: the k-th refusal in a row blocks
 * `windowMs * 2^(k-1)` from it, at most `maxMs` (its `exponentialBackoff`, bounded). A block
 * waited out is forgotten.
 */
export type Penalty = { readonly mode: 'restart' } | { readonly mode: 'double', readonly maxMs: number }

/** A penalty as given: `'double'` blocks at most 64 windows unless `maxMs` says otherwise. */
export type PenaltyOption = 'restart' | 'double' | { mode: 'restart' } | { mode: 'double', maxMs?: number }

/**
 * One decision, in whole milliseconds on the caller's clock (`now`):
 * - `remaining`: whole cost-1 units consumable right after this decision;
 * - `retryAfterMs`: 0 when allowed; else the least wait after which the same cost passes if
 *   nothing else is consumed (never early);
 * - `resetAt`: the tick at which the identity is back at full capacity if nothing else is consumed;
 * - `moreAt`: the first tick at which more than `remaining` cost-1 units are consumable if nothing
 *   else is consumed (never early: `RateLimit`'s `t`); `now` when at full capacity, where no more
 *   comes. Never after `now + retryAfterMs` of a refusal: a cost that did not pass needs more;
 * - `state`: the identity's new state, which the caller stores (also after a denial).
 */
export interface Outcome<S> {
  readonly allowed: boolean
  readonly remaining: number
  readonly retryAfterMs: number
  readonly resetAt: number
  readonly moreAt: number
  readonly state: S
}

/** An algorithm as pure functions of (state, policy, now, cost). */
export interface Kernel<S> {
  /** Numbers per identity (the memory backend stores states as rows of numbers). */
  readonly fields: number
  /** A new identity's state: full capacity at `now`. */
  fresh (policy: Policy, now: number): S
  consume (state: S, policy: Policy, now: number, cost: number): Outcome<S>
  /**
   * Takes `units` (a safe integer, |units| <= 2 * capacity: beyond one capacity either way the
   * bound below makes every amount charge alike, which a stack relies on) whatever the state holds: a positive
   * charge may leave the identity in debt, refused until time repays it; a negative one returns
   * units (never beyond full capacity, never into a window already gone). A charge never raises
   * a debt past one capacity: what is owed beyond that is not recorded (the identity is refused
   * for at most one more full recovery). The outcome is what a cost-1 request would see now
   * (`chargedOutcome`), and its state the charged one.
   */
  charge (state: S, policy: Policy, now: number, units: number): Outcome<S>
  /** Tick at which `state` is back at full capacity (a fully recovered state equals a fresh one). */
  recoversAt (state: S, policy: Policy): number
  /** State to and from a row of `fields` numbers. */
  write (state: S, row: Float64Array, base: number): void
  read (row: Float64Array, base: number): S
}
