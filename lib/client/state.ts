import { newBudget, type BudgetState } from './budget.js'

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

/** Origins by key; an origin is remembered from its first request on (a client talks to few). */
export class Origins {
  private readonly known = new Map<string, OriginState>()

  get (key: string): OriginState {
    let state = this.known.get(key)
    if (state === undefined) {
      state = { holdUntil: 0, budget: newBudget() }
      this.known.set(key, state)
    }
    return state
  }
}
