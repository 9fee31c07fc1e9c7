import { advance, newBudget, type BudgetConfig, type BudgetState } from './budget.js'

/** What the client knows of one origin. */
export interface OriginState {
  /** Nothing is sent to the origin before this time (ms since the epoch): a pause or a spent quota. */
  holdUntil: number
  budget: BudgetState
}

/** What the interceptor did, since it was made: `stats()` returns a copy. */
export interface AdmissionRetryStats {
  /** Requests sent (first attempts). */
  requests: number
  /** Attempts sent: requests and retries. */
  attempts: number
  retries: number
  /** Retries not made because the origin's budget was spent (the refusal was passed on). */
  retriesDenied: number
  /** Attempts that waited before they were sent (for an advertised time, a pause or a backoff), and how long in all. */
  waits: number
  waitedMs: number
  /** Origins paused by a 503 with `Retry-After`. */
  pauses: number
  /** Responses whose `RateLimit` fields said nothing was left, holding their origin until the reset. */
  paced: number
  /** `onRetry` calls that threw. */
  callbackErrors: number
}

export function newStats (): AdmissionRetryStats {
  return { requests: 0, attempts: 0, retries: 0, retriesDenied: 0, waits: 0, waitedMs: 0, pauses: 0, paced: 0, callbackErrors: 0 }
}

/** Origins remembered at most; a client that talks to more forgets the ones that hold nothing. */
export const MAX_ORIGINS = 1024

/**
 * Origins by key, from their first request on. A client talks to few; one that talks to many (a
 * crawler, a proxy) keeps at most `MAX_ORIGINS`: at the bound, a new origin first makes the client
 * forget every origin that holds nothing — no hold ahead, no request or retry in the budget's
 * window: forgotten, it starts as it stands, afresh —, and, when each holds something, the one
 * known longest.
 */
export class Origins {
  private readonly known = new Map<string, OriginState>()
  private readonly budget: BudgetConfig
  private readonly now: () => number

  constructor (budget: BudgetConfig, now: () => number) {
    this.budget = budget
    this.now = now
  }

  get (key: string): OriginState {
    let state = this.known.get(key)
    if (state === undefined) {
      if (this.known.size >= MAX_ORIGINS) this.forget()
      state = { holdUntil: 0, budget: newBudget() }
      this.known.set(key, state)
    }
    return state
  }

  get size (): number {
    return this.known.size
  }

  private forget (): void {
    const now = this.now()
    for (const [key, state] of this.known) {
      if (state.holdUntil <= now && empty(advance(state.budget, this.budget, now))) this.known.delete(key)
    }
    if (this.known.size >= MAX_ORIGINS) this.known.delete(this.known.keys().next().value!)
  }
}

const empty = (budget: BudgetState): boolean => budget.requests.every((n) => n === 0) && budget.retries.every((n) => n === 0)
