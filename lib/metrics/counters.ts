import type { ReasonCounts } from './reasons.js'

/** Counters kept by the gate's outcomes, for the whole gate and for each route. */
export interface GateCounters {
  /** Requests let through both gates (with `enforce: false`, every request that reached the rate check). */
  admitted: number
  /** Requests refused by a rate limit. */
  limited: number
  /** Requests answered 503: a full in-flight gate, or a quota the backend could not decide. */
  shed: number
  /**
   * Decisions the backend could not make (Redis down or slow, memory full of live state); each
   * was shed, or admitted when `onBackendError: 'allow'` (or `enforce: false`) asks for it.
   */
  unavailable: number
  /** Requests holding a slot of this gate right now. */
  inFlight: number
  /**
   * Long-lived connections open right now (websockets, event streams, replies marked long-lived):
   * their requests' work is over, so they hold no in-flight slot; a request to a route known to be
   * long-lived is counted from its admission.
   */
  longLived: number
  /** Requests the allow list let past the rate limit (and past shedding, with `allowListSkipsShedding`); counted in `admitted` too. */
  allowed: number
  /** `enforce: false`: requests a quota would have refused (admitted instead, and counted in `admitted`). */
  wouldLimit: number
  /** `enforce: false`: requests a full in-flight gate would have shed (let on, holding no permit). */
  wouldShed: number
}

/**
 * Requests that said they were retries (the attempt header: `Retry-Attempt: 2` and up), by outcome;
 * the rest of `admitted` and `shed` were first attempts. Kept only with `retries` on.
 */
export interface RetryCounters {
  admitted: number
  shed: number
}

/** Admissions and sheds of one kind of attempt. */
export interface AttemptCounts {
  admitted: number
  shed: number
}

/** A registration's admissions and sheds by attempt kind: the retries as counted, the first attempts the rest. */
export function attemptsOf (global: GateCounters, retries: RetryCounters): { first: AttemptCounts, retries: AttemptCounts } {
  return {
    first: { admitted: global.admitted - retries.admitted, shed: global.shed - retries.shed },
    retries: { admitted: retries.admitted, shed: retries.shed }
  }
}

/** A gate's name and counters, as metrics read them at each scrape. */
export interface CountedGate {
  readonly name: string
  /** The route's URL template (`/users/:id`), undefined for the requests that matched no route. */
  readonly url: string | undefined
  /**
   * The names its rate limit's policies have in `RateLimit-Policy` (`default`, a tier's, a stack's),
   * a tiered route's tiers for its own gate; empty without a rate limit.
   */
  readonly policyNames: readonly string[]
  readonly counters: GateCounters
  /** Its refusals by reason, every reason its plan can refuse for included (at 0 until one). */
  readonly reasons: ReasonCounts
  /** The gate's own in-flight limit, 0 for none. */
  readonly maxInFlight: number
  /** The gate's quota, undefined when it has no rate limit. */
  readonly limiter: object | undefined
}

export function newCounters (): GateCounters {
  return { admitted: 0, limited: 0, shed: 0, unavailable: 0, inFlight: 0, longLived: 0, allowed: 0, wouldLimit: 0, wouldShed: 0 }
}

export function copyCounters (counters: GateCounters): GateCounters {
  return {
    admitted: counters.admitted,
    limited: counters.limited,
    shed: counters.shed,
    unavailable: counters.unavailable,
    inFlight: counters.inFlight,
    longLived: counters.longLived,
    allowed: counters.allowed,
    wouldLimit: counters.wouldLimit,
    wouldShed: counters.wouldShed
  }
}
